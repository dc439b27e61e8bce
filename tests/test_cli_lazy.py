"""The CLI imports only the module of the subcommand it runs (lazy imports), every
subcommand is still reachable that way, and each lives in the module named like it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from optsched.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]


def _commands(parser) -> set[str]:
    return set(parser._subparsers._group_actions[0].choices)  # noqa: SLF001


def test_every_command_resolves_to_the_module_that_registers_it():
    full = _commands(build_parser())
    assert {"simulate", "policies", "evaluate", "validate", "generate", "kv-capacity"} <= full
    for cmd in full:
        lazy = build_parser([cmd, "x"])
        assert cmd in _commands(lazy), cmd
        # the lazy parser parses the same way: the command's own handler is selected
        assert lazy._subparsers._group_actions[0].choices[cmd].get_default("func") \
            .__name__ == build_parser()._subparsers._group_actions[0].choices[cmd] \
            .get_default("func").__name__  # noqa: SLF001


def test_each_command_lives_in_the_module_named_like_it():
    parser = build_parser()
    for cmd, sub in parser._subparsers._group_actions[0].choices.items():  # noqa: SLF001
        assert sub.get_default("func").__module__ == f"optsched.cli.{cmd.replace('-', '_')}", cmd


def test_simulate_does_not_import_the_other_commands():
    code = ("import sys; from optsched.cli import build_parser; build_parser(['simulate']); "
            "print(sorted(m for m in sys.modules if m.startswith('optsched.cli.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    assert out.strip() == "['optsched.cli._common', 'optsched.cli.simulate']"


def test_the_shared_helpers_do_not_import_the_solvers_or_numba():
    """``evaluate`` and ``simulate`` start without :mod:`optsched.comparison` (the solvers,
    the search) and without numba, which the compiled paths import when they run (the table
    formatter ``fmt`` once came from the comparison module and brought them all in)."""
    heavy = ("numba", "optsched.comparison", "optsched.solving", "optsched.search")
    code = ("import sys; from optsched.cli import build_parser\n"
            "for cmd in ('evaluate', 'simulate'):\n"
            "    build_parser([cmd])\n"
            f"print(sorted(m for m in {heavy!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout
    assert out.strip() == "[]"
