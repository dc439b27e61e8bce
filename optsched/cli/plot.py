"""``optsched plot``: the Gantt chart (InferMax Figure 15 style) plus KV use of one schedule."""

from __future__ import annotations

import sys

from ..evaluation import evaluate
from . import EXIT_OK
from ._common import image_file, load_instance, load_schedule


def register(sub) -> None:
    p = sub.add_parser(
        "plot",
        help="draw a schedule: Gantt chart ((p)refill black, decode gray, evicted red) and KV use",
        description="Replay SCHEDULE on INSTANCE with the evaluator and draw one row per request "
        "((p)refill black, decode gray, evicted until refill red) above KV use over time against M. "
        "An infeasible schedule is drawn as given (the title says so; a warning goes to stderr).",
    )
    p.add_argument("instance", help="instance JSON file (or a shipped instance name)")
    p.add_argument("schedule", help="schedule file (.json or .npz)")
    p.add_argument("-o", "--output", required=True, help="image file (.png, .svg, .pdf)")
    p.add_argument("--title", default=None, help="figure title (default: instance and key metrics)")
    p.add_argument("--max-rows", type=int, default=300,
                   help="draw at most this many request rows (an evenly spaced sample); 0 = all")
    p.add_argument("--no-kv", action="store_true", help="omit the KV panel")
    p.set_defaults(func=run)


def run(args) -> int:
    # lazy: each subcommand imports what it runs (start-up time)
    from ..plot import gantt

    out = image_file(args.output)
    if args.max_rows < 0:
        # lazy: each subcommand imports what it runs (start-up time)
        from ..errors import InputFileError

        raise InputFileError(f"--max-rows must be >= 0 (0 = all rows), got {args.max_rows}")
    inst = load_instance(args.instance)
    sched = load_schedule(args.schedule)
    ev = evaluate(inst, sched)
    if not ev.feasible:
        print(f"optsched plot: warning: the schedule is infeasible "
              f"({sum(ev.violation_counts.values())} violations); drawn as given", file=sys.stderr)
    gantt(inst, sched, ev, title=args.title, max_rows=args.max_rows or None, kv=not args.no_kv,
          save=out)
    print(f"figure written to {out}")
    return EXIT_OK
