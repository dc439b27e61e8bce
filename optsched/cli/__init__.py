"""The ``optsched`` command line.

Each subcommand lives in its own module in this package, named like the command
(``kv-capacity`` in ``kv_capacity.py``), and defines ``register(subparsers)``, which adds its
parser and sets ``func`` to a callable ``func(args) -> int`` (the exit code). Adding a command
touches one file. Modules starting with ``_`` are shared helpers; ``warm.py`` (``python -m
optsched.cli.warm``) registers no command.

Exit codes mean one thing in every command: 0 an answer exists (a feasible schedule, an
optimum, or the best schedule found with a certified bound); 1 a negative answer (an
infeasible schedule, a claim violated, no schedule meets the hypotheses); 2 unreadable or
invalid input (one line on stderr naming the problem), and only that; 3 a solver failure, or
an internal error (one line on stderr; set ``OPTSCHED_TRACEBACK=1`` for the traceback); 4
undecided: the question asked (a hypothesis, an exact bound) was neither answered yes nor no
within the time limit, which is no failure (a longer limit may decide it).
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import pkgutil
import sys
import threading
import warnings

from ..errors import OptschedError
from ..runtime.stdout_guard import stdout_for_python_only

EXIT_OK, EXIT_NO, EXIT_INPUT, EXIT_SOLVER_ERROR, EXIT_UNDECIDED = 0, 1, 2, 3, 4



def _command_module(argv: list[str]) -> str | None:
    """The module that registers the subcommand in ``argv`` (its first word that is not an
    option), when it exists; None for no command or ``--help``/``--version``."""
    words = [a for a in argv if not a.startswith("-")]
    if not words or any(a in ("-h", "--help", "--version") for a in argv[: argv.index(words[0])]):
        return None
    name = words[0].replace("-", "_")
    if name.startswith("_") or not any(m.name == name for m in pkgutil.iter_modules(__path__)):
        return None
    return name


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; with ``argv``, only the module of its subcommand is imported (the
    others are not needed to run it, and importing them all costs a good part of a
    second), falling back to every module when that one does not register it."""
    # lazy: each subcommand imports what it runs (start-up time)
    from .. import __version__

    parser = argparse.ArgumentParser(
        prog="optsched",
        description="Provably optimal schedules for LLM inference serving, "
        "and heuristic schedulers held up against them.",
    )
    parser.add_argument("--version", action="version", version=f"optsched {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    only = _command_module(argv) if argv is not None else None
    if only is not None:
        module = importlib.import_module(f"{__name__}.{only}")
        words = [a for a in argv or () if not a.startswith("-")]
        if hasattr(module, "register"):
            module.register(sub)
            if words[0] in sub.choices:
                return parser
        return build_parser()
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if mod.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{mod.name}")
        if hasattr(module, "register"):
            module.register(sub)
    return parser


def _one_line_warning(command: str):
    """``warnings.showwarning`` for the command line: one line on stderr, no source line."""
    def show(message, category, filename, lineno, file=None, line=None) -> None:
        print(f"optsched {command}: warning: {message}", file=sys.stderr)

    return show


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_INPUT
    # lazy: each subcommand imports what it runs (start-up time)
    from .. import progress

    # the budget of --time-limit counts from the process start when run as a program
    progress.enable(not getattr(args, "quiet", False), args.command,
                    from_process_start=argv is None)
    try:
        # stdout carries only what the command prints (one JSON document with --json);
        # whatever a solver library writes there from C goes to stderr
        with stdout_for_python_only(), warnings.catch_warnings():
            warnings.showwarning = _one_line_warning(args.command)
            return int(args.func(args) or 0)
    except OptschedError as e:
        print(f"optsched {args.command}: error: {e}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print(f"optsched {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into e.g. `head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except (RecursionError, MemoryError) as e:  # input too deep or too large to hold
        print(f"optsched {args.command}: error: input too large or too deeply nested "
              f"({type(e).__name__})", file=sys.stderr)
        return EXIT_INPUT
    except Exception as e:  # a bug: one line, never a traceback that reads as exit 1
        if os.environ.get("OPTSCHED_TRACEBACK"):
            raise
        print(f"optsched {args.command}: internal error: {type(e).__name__}: "
              f"{str(e).splitlines()[0] if str(e) else ''} (please report it; "
              "OPTSCHED_TRACEBACK=1 shows where)", file=sys.stderr)
        return EXIT_SOLVER_ERROR
    finally:
        progress.enable(False)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


def run() -> None:
    """The ``optsched`` program (``[project.scripts]``, ``python -m optsched``): :func:`main`,
    then exit without tearing the interpreter down.

    Tearing down a process that has loaded numpy, numba's run-time and a 4M-entry schedule
    (freeing every object and module) took ~0.1 s of a 1.0 s ``optsched simulate`` of the full
    trace (``benchmarks/simulate.py --process``). It buys nothing: every file a
    command writes is closed by then. So the program flushes stdout and stderr, runs the
    ``atexit`` handlers (``weakref.finalize`` clean-ups, ``logging``, ``multiprocessing``)
    and leaves with ``os._exit``. Only when another non-daemon thread is alive does it exit
    normally, so that Python waits for it. :func:`main` itself (tests, library use) returns."""
    code = main()
    if threading.active_count() > 1:
        sys.exit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # stdout piped into e.g. `head` and closed: stop quietly
        code = code or 141
    atexit._run_exitfuncs()
    os._exit(code)
