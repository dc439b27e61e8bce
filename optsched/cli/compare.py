"""``optsched compare``: policies (and schedule files) against the optimum, as a report.

A thin layer over :mod:`optsched.compare` (which says what the rows, gaps and figures are):
parse the arguments, :func:`~optsched.compare`, write the report, print the table.
Exit codes (:func:`exit_code`): 0 an answer (every schedule feasible; the optimum, or a
certified lower bound when the model was skipped or not solved to optimality); 1 a compared
schedule infeasible; 2 bad input, including a policy that refused the instance or broke the
simulator's rules; 3 the solver failed. The report is written in every case.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ..comparison import CompareInputError, compare, headers_in, policy_names, table_rows, write_report
from ..evaluation import OBJECTIVES
from ..solve_types import Status
from . import EXIT_INPUT, EXIT_NO, EXIT_OK, EXIT_SOLVER_ERROR
from ._common import checked_schedule, load_instance, output_dir, say_load, table


def register(sub) -> None:
    p = sub.add_parser(
        "compare",
        help="compare policies (and schedules) with each other and the optimum: Markdown report + PNGs",
        description="Every schedule (simulated, loaded or the solver's) is replayed by the evaluator; "
        "objectives are the evaluator's. With --optimal, gaps are (objective - reference) / reference "
        "where the reference is the proven optimum, or else the largest global lower bound: the solver's "
        "bound or the certified bound of formulations/bounds.md, computed at every size (the report "
        "says which). --time-limit covers the whole command: a model that cannot be built in time is "
        "skipped and the report says so. Writes report.md, report.json, compare.png, kv.png and one "
        "gantt_<label>.png per schedule, and prints the table. Exit 0: every schedule feasible (with "
        "the optimum or a certified lower bound); 1: a compared schedule infeasible; 2: bad input or "
        "a policy that failed; 3: solver failure (the report is written in every case).",
    )
    p.add_argument("instance", help="instance JSON file (or a shipped instance name)")
    p.add_argument("--policies", default="",
                   help="comma-separated policy names, or 'all' for every registered policy; "
                        "a policy of your own as path/to/file.py:Class or package.module:Class")
    p.add_argument("--schedule", action="append", default=[], metavar="LABEL=PATH",
                   help="also compare a schedule file (repeatable)")
    p.add_argument("--optimal", action="store_true", help="also solve for the optimum")
    p.add_argument("--formulation", default="infermax", help="formulation for --optimal")
    p.add_argument("--objective", default="makespan", choices=OBJECTIVES)
    p.add_argument("--time-limit", type=float, default=60.0,
                   help="seconds for the whole command (default 60): the model is sized "
                        "before it is built and skipped when it cannot fit")
    p.add_argument("--solver", default="highs",
                   help="highs (default), gurobi, cbc, cpsat, auto, or an installed backend")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--improve", type=float, default=0.0, metavar="SECONDS",
                   help="also run large-neighbourhood search this long from the best schedule "
                        "(optsched/search/lns.py; within --time-limit)")
    p.add_argument("--ttft-slo", type=float, default=None,
                   help="TTFT SLO for requests without one (seconds; steps under unit time): "
                        "adds the SLO goodput table, attainment beside its certified upper "
                        "bound (formulations/bounds.md B12)")
    p.add_argument("--tpot-slo", type=float, default=None,
                   help="mean TPOT SLO for requests without one (as --ttft-slo)")
    p.add_argument("--max-rows", type=int, default=300, help="Gantt rows per figure (0 = all)")
    p.add_argument("--no-gantt", action="store_true", help="skip the per-schedule Gantt charts")
    p.add_argument("-o", "--output", required=True, metavar="REPORT_DIR", help="report directory")
    p.set_defaults(func=run)


#: seconds before the end of --time-limit after which no further chart is started
CHART_SECONDS = 1.0


def run(args: argparse.Namespace) -> int:
    # lazy: each subcommand imports what it runs (start-up time)
    from ..solving.budget import command_seconds
    limit = command_seconds(args.time_limit)  # the budget counts from the command's start
    end = time.perf_counter() + limit
    output_dir(args.output)
    inst = load_instance(args.instance).with_default_slos(args.ttft_slo, args.tpot_slo)
    names = policy_names(args.policies)
    files = []
    mismatched: list[str] = []  # schedule files written for another instance
    for item in args.schedule:
        label, sep, path = item.partition("=")
        if not sep or not label or not path:
            raise CompareInputError(f"--schedule {item!r}: expected LABEL=PATH")
        sched, check = checked_schedule(path, inst, "compare", label)
        if check["matches"] is False:
            mismatched.append(f"schedule {label!r} ({path}): {check['message']}")
        files.append((label, sched))
    cmp = compare(inst, names, files, optimal=args.optimal, formulation=args.formulation,
                  objective=args.objective, solver=args.solver, time_limit=limit,
                  threads=args.threads, improve_seconds=args.improve)
    cmp.notes.extend(mismatched)
    if cmp.offered_load is not None:
        say_load(cmp.offered_load, "compare")
    out = Path(args.output)
    write_report(out, cmp, gantt_charts=not args.no_gantt, max_rows=args.max_rows or None,
                 title=args.instance, deadline=end - CHART_SECONDS)
    # lazy: each subcommand imports what it runs (start-up time)
    from ..progress import unit
    from ..solve_types import ABOVE_OPTIMAL

    headers = headers_in(unit(inst))
    headers[3] = {"optimum": "above optimal", "bound": ABOVE_OPTIMAL, None: "gap"}[cmp.reference_kind]
    print(table(headers, table_rows(cmp.rows)))
    if cmp.best is not None:
        print(f"best: {cmp.best.label} ({cmp.best.method}), {args.objective} "
              f"{cmp.best.objective:.6g}")
    if cmp.reference_kind == "bound":
        print(f"note: the optimum is not proven; gaps are to the {cmp.reference_source} "
              f"{cmp.reference:.6g}")
    if cmp.goodput is not None:
        from ..comparison import GOODPUT_HEADERS, goodput_lines, goodput_table_rows

        print()
        print(table(GOODPUT_HEADERS, goodput_table_rows(cmp.goodput)))
        for line in goodput_lines(cmp.goodput):
            print(line)
    for n in cmp.notes:
        print(f"note: {n}")
    for r in cmp.rows:
        if r.message:
            print(f"{r.label}: {r.message}")
    print(f"report written to {out / 'report.md'}")
    # lazy: each subcommand imports what it runs (start-up time)
    from ..comparison import compare_verdict, say

    say(compare_verdict(cmp))
    return exit_code(cmp)


def exit_code(cmp) -> int:
    """The command line's contract (``optsched.cli``) for a comparison: 1 when a compared
    schedule is infeasible, 2 when a policy refused the instance or broke the simulator's rules
    (its row says why), 3 when the solver failed, else 0 -- a skipped model, a solve without a
    proven optimum or a policy stopped at the time limit (its row says so) still leaves
    schedules and a certified lower bound."""
    rows = cmp.rows
    if any(r.kind != "optimum" and r.evaluation is not None and not r.evaluation.feasible
           for r in rows):
        return EXIT_NO
    if any(r.kind == "policy" and r.status == Status.ERROR for r in rows):
        return EXIT_INPUT
    if cmp.optimum is not None and cmp.optimum.status == Status.ERROR:
        return EXIT_SOLVER_ERROR
    return EXIT_OK
