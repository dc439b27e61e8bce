"""``optsched demo``: the main job on an instance shipped with optsched.

InferMax's eviction experiment (section 5.1): B = 4 requests with prompt I = 16 and
O = 4 output tokens, KV capacity M = max(2I, I + O - 1) = 32, the InferMax
Llama-2-7B cost model. Several published policies are simulated, the optimum is
proven with the InferMax model (HiGHS), ``compare`` writes the table, bar charts and
Gantt charts (``out/demo/``), and a hypothesis solve answers "is an eviction-free
schedule as fast?". Every schedule is replayed by the one evaluator.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from ..data import embedded_instance_path
from ..errors import InputFileError
from ..solve_types import Status
from . import compare
from ._common import output_dir

DEMO_INSTANCE = "demo"
DEMO_POLICIES = "vllm,sarathi,fcfs,infermax,mcsf,vllm-ef"


def register(sub) -> None:
    p = sub.add_parser("demo", help="the main job on a shipped instance: policies vs the proven optimum")
    p.add_argument("-o", "--output", default="out/demo", help="report directory (default out/demo)")
    p.add_argument("--time-limit", type=float, default=120.0, help="solver seconds (default 120)")
    p.set_defaults(func=run)


def _check_args(args) -> None:
    """Bad options are refused before any output (a bad --time-limit was found only after
    the compare table had been printed)."""
    if not (math.isfinite(args.time_limit) and args.time_limit > 0):
        raise InputFileError(f"--time-limit must be a finite number of seconds > 0, "
                             f"got {args.time_limit}")
    output_dir(args.output)


def run(args) -> int:
    _check_args(args)
    path = embedded_instance_path(DEMO_INSTANCE)
    if path is None:  # a broken installation, not bad input
        raise RuntimeError(f"the shipped instance {DEMO_INSTANCE!r} is missing")
    print(f"optsched demo: InferMax eviction experiment (section 5.1) on {path.name}")
    print("  4 requests, prompt 16, output 4, KV capacity 32, InferMax Llama-2-7B cost model")
    print(f"  policies: {DEMO_POLICIES}; optimum: InferMax model (formulations/infermax.md) "
          "solved by HiGHS\n")
    # compare's own parser fills every option it has (a hand-built Namespace fell behind when
    # compare gained --improve and the demo crashed)
    parser = argparse.ArgumentParser(prog="optsched")
    compare.register(parser.add_subparsers())
    cargs = parser.parse_args(["compare", str(path), "--policies", DEMO_POLICIES, "--optimal",
                               "--formulation", "infermax", "--objective", "makespan",
                               "--time-limit", str(args.time_limit), "--solver", "highs",
                               "-o", args.output])
    code = compare.run(cargs)
    # lazy: each subcommand imports what it runs (start-up time)
    from ..formulations import Hypotheses, SolveOptions
    from ..instance import Instance
    from ..solving import solve

    report = json.loads((Path(args.output) / "report.json").read_text())
    best = next((r for r in report["rows"] if r["kind"] == "optimum"
                 and r["status"] == Status.OPTIMAL), None)
    ef = solve(Instance.load(path), "infermax", "makespan",
               options=SolveOptions(time_limit=args.time_limit, progress=False),
               hypotheses=Hypotheses(no_evictions=True))
    if best is not None and ef.status == Status.OPTIMAL and ef.objective is not None:
        slower = (ef.objective - best["objective"]) / ef.objective
        print(f"\nproof by example: the best eviction-free schedule takes {ef.objective * 1000:.3f} "
              f"ms, {100 * slower:.1f}% slower than the optimum ({best['objective'] * 1000:.3f} ms, "
              f"{best['evictions']} evictions): evictions pay off here, as InferMax section 5.1 "
              "predicts for short prompts")
    for png in sorted(Path(args.output).glob("gantt_*.png")):
        if png.name.startswith(("gantt_optimal", "gantt_best_found")):
            print(f"Gantt chart of the solver's schedule: {png}")
    return code
