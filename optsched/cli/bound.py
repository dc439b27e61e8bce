"""``optsched bound``: a certified lower bound on the optimum, at any instance size."""

from __future__ import annotations

import argparse
import sys

from ..evaluation import OBJECTIVES
from . import EXIT_OK, EXIT_UNDECIDED
from ._common import command_load, load_instance, print_json, say_load, table


class _MethodsHelp(argparse.HelpFormatter):
    """Lists the registered bound methods in ``--method``'s help, read from the registry when
    the help is printed (importing the rungs is not paid by every command's start-up)."""

    def _get_help_string(self, action):
        text = super()._get_help_string(action) or ""
        if action.dest != "method":
            return text
        # lazy: the registry imports every rung module
        from ..bounds import bound_methods

        return f"{text}; registered: {', '.join(bound_methods())}"


def register(sub) -> None:
    p = sub.add_parser(
        "bound", formatter_class=_MethodsHelp,
        help="a certified lower bound on the optimal objective (any size)",
        description="Climb the ladder of lower bounds (formulations/bounds.md) within the time "
        "limit and report the largest, with the method that gave it. Every value is at most the "
        "optimum over all feasible schedules. Exit 0: a bound was found; 2: bad input; 4: the "
        "method gave no bound within the time limit (e.g. exact).",
    )
    p.add_argument("instance", help="instance JSON file (or a shipped instance name)")
    p.add_argument("--objective", default="makespan", choices=OBJECTIVES)
    p.add_argument("--method", default="best",
                   help="a registered bound method (default: best, the whole ladder), or "
                        "path/file.py:Name of your own")
    p.add_argument("--time-limit", type=float, default=10.0,
                   help="seconds for the whole command (default 10)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    # lazy: each subcommand imports what it runs (start-up time)
    from ..bounds import BoundError, BoundUnavailable, bound_methods

    if args.time_limit is not None and not args.time_limit > 0:
        raise BoundError(f"--time-limit must be > 0 seconds, got {args.time_limit:g}")
    # lazy: each subcommand imports what it runs (start-up time)
    from ..plugins import is_reference

    methods = bound_methods()
    if args.method not in methods and not is_reference(args.method):
        raise BoundError(f"--method: unknown bound method {args.method!r}; choose one of "
                         f"{', '.join(methods)}")
    inst = load_instance(args.instance)
    load = command_load(inst, args.time_limit)
    # lazy: each subcommand imports what it runs (start-up time)
    from ..solving import lower_bound  # the ladder with the one solve for its exact rung
    from ..solving.budget import command_seconds

    try:
        res = lower_bound(inst, args.objective, args.method,
                          time_limit=command_seconds(args.time_limit))
    except BoundUnavailable as e:  # valid input, no bound within the limit: not exit 2
        say_load(load, "bound")
        print(f"optsched bound: no bound: {e} (undecided; a longer --time-limit or "
              "--method best may give one)", file=sys.stderr)
        return EXIT_UNDECIDED
    # lazy: each subcommand imports what it runs (start-up time)
    from ..comparison.report import bound_verdict, say

    verdict = bound_verdict(inst, args.objective, res)
    say_load(load, "bound")
    if args.json:
        print_json({"instance": inst.name, "requests": inst.n, **res.to_dict(),
                    "verdict": verdict, "offered_load": load.to_dict()})
        say(verdict)
        return EXIT_OK
    # lazy: each subcommand imports what it runs (start-up time)
    from ..progress import unit

    rows = [(f"lower bound ({unit(inst)})", res.value), ("method", res.method),
            ("objective", res.objective),
            ("requests", inst.n), ("runtime (s)", round(res.runtime, 4))]
    rows += [(f"  rung {name} ({unit(inst)})", v) for name, v in res.ladder.items()]
    print(table(["", "result"], rows))
    for n in res.notes:
        print(f"note: {n}")
    say(verdict)
    return EXIT_OK
