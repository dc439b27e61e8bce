"""``optsched sweep run SPEC -o OUT`` and ``optsched sweep report OUT``: grids of instances x
seeds x methods on a local process pool or a Ray cluster (``optsched.sweep``)."""

from __future__ import annotations

import sys
from pathlib import Path

from . import EXIT_OK, EXIT_SOLVER_ERROR
from ._common import output_dir, print_json


def register(sub) -> None:
    p = sub.add_parser(
        "sweep", help="run a grid of instances x seeds x methods (local pool or Ray), resumable",
        description="Sweeps: 'run' computes every cell of a TOML spec not already in OUT (a "
        "Parquet dataset, one row per cell); 'report' summarises OUT as Markdown + plots.")
    s = p.add_subparsers(dest="sweep_command", metavar="{run,report}")
    r = s.add_parser("run", help="compute the missing and failed cells of a spec into OUT",
                     description="Every cell (instance, seed, method) is an independent task; each "
                     "finished cell is written at once, so an interrupted run loses only the cells "
                     "in flight and rerunning computes only the rest. Failed cells are recorded "
                     "with their error. Exit 0: no failed cell; 2: bad input; 3: some cell failed.")
    r.add_argument("spec", help="sweep spec (TOML)")
    r.add_argument("-o", "--output", required=True, metavar="OUT", help="output directory (dataset)")
    r.add_argument("--engine", default="local", help="local (process pool, default) or ray")
    r.add_argument("--address", default=None,
                   help="Ray cluster address (ray engine; default: start a local Ray instance)")
    r.add_argument("--workers", type=int, default=None,
                   help="parallel cells (default: all CPUs of this machine / of the local Ray instance)")
    r.add_argument("--dry-run", action="store_true", help="count the cells and exit")
    r.add_argument("--json", action="store_true", help="print the run summary as JSON")
    r.add_argument("--quiet", action="store_true", help="no progress on stderr")
    r.set_defaults(func=run)
    q = s.add_parser("report", help="Markdown + plots from a sweep's dataset",
                     description="Per method: ratio to the best bound or proven optimum of each "
                     "instance (CDF), gap bars, runtime distribution. Writes report.md and PNGs.")
    q.add_argument("out", metavar="OUT", help="a sweep's output directory")
    q.add_argument("-o", "--output", default=None, metavar="DIR",
                   help="report directory (default OUT/report)")
    q.add_argument("--json", action="store_true", help="print the summary as JSON")
    q.set_defaults(func=report)
    p.set_defaults(func=lambda args: (p.print_help(sys.stderr), 2)[1])


def run(args) -> int:
    # lazy: each subcommand imports what it runs (start-up time)
    from ..sweep import load_spec, make_engine, pending, run_sweep
    from ..sweep.results import require_pyarrow

    require_pyarrow()
    output_dir(args.output)
    spec = load_spec(args.spec)
    make_engine(args.engine, workers=args.workers, address=args.address).close()  # check the options
    if args.dry_run:
        cells, todo = pending(spec, args.output)
        out = {"sweep": spec.name, "cells": len(cells), "already_done": len(cells) - len(todo),
               "to_compute": len(todo), "instances": len({c.instance_hash for c in cells}),
               "methods": len(spec.methods)}
        if args.json:
            print_json(out)
        else:
            print(f"sweep {spec.name}: {out['cells']} cells ({out['instances']} instances x "
                  f"{out['methods']} methods), {out['already_done']} already done, "
                  f"{out['to_compute']} to compute")
        return EXIT_OK
    summary = run_sweep(spec, args.output, engine=args.engine, workers=args.workers,
                        address=args.address, progress=not args.quiet)
    if args.json:
        print_json(summary.to_dict())
    else:
        print(f"sweep {summary.sweep}: {summary.cells} cells, {summary.already_done} already done, "
              f"{summary.computed} computed ({summary.failed} failed) in {summary.elapsed:.1f} s "
              f"on {summary.engine}; results in {summary.out}/cells")
    # a failed cell is a failure, not a negative answer (exit codes: optsched.cli)
    return EXIT_SOLVER_ERROR if summary.failed else EXIT_OK


def report(args) -> int:
    # lazy: each subcommand imports what it runs (start-up time)
    from ..sweep.report import write_report

    out = Path(args.output) if args.output else Path(args.out) / "report"
    output_dir(str(out))
    summary = write_report(args.out, out)
    if args.json:
        print_json(summary)
    else:
        print(f"report written to {out / 'report.md'}")
    return EXIT_OK
