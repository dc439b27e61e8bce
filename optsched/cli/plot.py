"""``optsched plot``: the Gantt chart (InferMax Figure 15 style) plus KV use of one schedule,
or with ``--timeline`` its trace-scale picture (:func:`optsched.plot.timeline`)."""

from __future__ import annotations

import math
import sys

from ..evaluation import evaluate
from . import EXIT_OK
from ._common import image_file, load_instance, load_schedule

#: rows the Gantt chart samples and the timeline's raster draws when --max-rows is not given
GANTT_ROWS = 300
TIMELINE_ROWS = 1000


def register(sub) -> None:
    p = sub.add_parser(
        "plot",
        help="draw a schedule: Gantt chart ((p)refill black, decode gray, evicted red) and KV use",
        description="Replay SCHEDULE on INSTANCE with the evaluator and draw one row per request "
        "((p)refill black, decode gray, evicted until refill red) above KV use over time against M. "
        "With --timeline (for hundreds of requests and more): every request a raster row sorted "
        "by arrival, waiting shaded and arrivals drawn, then requests running and in the system, "
        "KV use and batch times. "
        "An infeasible schedule is drawn as given (the title says so; a warning goes to stderr).",
    )
    p.add_argument("instance", help="instance JSON file (or a shipped instance name)")
    p.add_argument("schedule", help="schedule file (.json or .npz)")
    p.add_argument("-o", "--output", required=True, help="image file (.png, .svg, .pdf)")
    p.add_argument("--title", default=None, help="figure title (default: instance and key metrics)")
    p.add_argument("--timeline", action="store_true",
                   help="the trace-scale picture: a request raster and per-time series instead "
                   "of one box per entry")
    p.add_argument("--window", default=None,
                   help="draw only the times START:END (the instance's time unit) and the "
                   "requests present in them")
    p.add_argument("--bins", type=int, default=1200,
                   help="--timeline: time columns of the raster and series (default 1200)")
    p.add_argument("--max-rows", type=int, default=None,
                   help=f"Gantt: draw at most this many request rows (an evenly spaced sample, "
                   f"evicted requests first; default {GANTT_ROWS}); --timeline: raster rows, "
                   f"neighbouring requests sharing one above it (default {TIMELINE_ROWS}); "
                   "0 = all")
    p.add_argument("--no-kv", action="store_true", help="omit the KV panel (Gantt chart)")
    p.set_defaults(func=run)


def _window(s: str | None) -> tuple[float, float] | None:
    # lazy: each subcommand imports what it runs (start-up time)
    from ..errors import InputFileError

    if s is None:
        return None
    try:
        a, b = (float(x) for x in s.split(":"))
    except ValueError:
        raise InputFileError(f"--window must be START:END (two numbers), got {s!r}") from None
    if not (math.isfinite(a) and math.isfinite(b)) or b <= a:
        raise InputFileError(f"--window: START must be below END, both finite, got {s!r}")
    return a, b


def run(args) -> int:
    # lazy: each subcommand imports what it runs (start-up time)
    from ..errors import InputFileError
    from ..plot import gantt, timeline

    out = image_file(args.output)
    if args.max_rows is not None and args.max_rows < 0:
        raise InputFileError(f"--max-rows must be >= 0 (0 = all rows), got {args.max_rows}")
    if args.bins < 1:
        raise InputFileError(f"--bins must be >= 1, got {args.bins}")
    window = _window(args.window)
    inst = load_instance(args.instance)
    sched = load_schedule(args.schedule)
    ev = evaluate(inst, sched)
    if not ev.feasible:
        print(f"optsched plot: warning: the schedule is infeasible "
              f"({sum(ev.violation_counts.values())} violations); drawn as given", file=sys.stderr)
    rows = args.max_rows if args.max_rows is not None else \
        TIMELINE_ROWS if args.timeline else GANTT_ROWS
    if args.timeline:
        timeline(inst, sched, ev, title=args.title, window=window, bins=args.bins,
                 max_rows=rows or max(inst.n, 1), save=out)
    else:
        gantt(inst, sched, ev, title=args.title, max_rows=rows or None, kv=not args.no_kv,
              window=window, save=out)
    print(f"figure written to {out}")
    return EXIT_OK
