"""Speed of the hindsight IP (``formulations/hindsight.md``): largest n proven optimal in <= 60 s.

The online paper's random family with all arrivals at 0 (``online_paper_random``: M ~ U[30, 50],
s ~ U[1, 5], o ~ U[1, M - s]), objective total latency, HiGHS on 2 threads, seeds 0..4 per n.
A variant's sweep stops after the first n whose median run is not proven optimal in the limit.
Prints, per (n, variant): #proven/5, median seconds, median gap, median greedy-MC-SF/optimum
over the proven runs, and median MC-SF/best over all runs: the best schedule found is at least
the optimum, so MC-SF/best is a lower bound on MC-SF/optimum even where nothing is proven.
``--keep-going`` runs every n (for the large-n figures) instead of stopping at the first n
whose median run is unproven.

    python -m studies.hindsight.proven                       # plain and tight, n = 4, 6, 8, 12, ...
    python -m studies.hindsight.proven --variants tight --ns 8,12 --param cliques=1 --solver cpsat
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from optsched.formulations import SolveOptions
from optsched.formulations.hindsight import greedy_starts, objective_of_starts
from optsched.solving import solve
from optsched.workloads.generators import online_paper_random

DEFAULT_NS = (4, 6, 8, 12, 16, 20, 24, 32, 40, 48, 56, 64)


def run_one(n: int, seed: int, variant: str, solver: str, limit: float, params: dict) -> dict:
    inst = online_paper_random(n, seed)
    mcsf = objective_of_starts(inst, "total-latency", greedy_starts(inst, "mcsf"))
    opts = SolveOptions(solver=solver, time_limit=limit, threads=2, progress=False,
                        params={"variant": variant, **params})
    t = time.perf_counter()
    rep = solve(inst, "hindsight", "total-latency", options=opts, warm_start=None)
    wall = time.perf_counter() - t
    return {"n": n, "seed": seed, "variant": variant, "solver": solver, "status": rep.status,
            "objective": rep.objective, "bound": rep.bound, "gap": rep.gap, "seconds": wall,
            "mcsf": mcsf, "M": inst.limits.kv_capacity, "params": params,
            "message": rep.message}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ns", default=",".join(map(str, DEFAULT_NS)))
    ap.add_argument("--variants", default="plain,tight")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--limit", type=float, default=60.0)
    ap.add_argument("--solver", default="highs")
    ap.add_argument("--param", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--keep-going", action="store_true", help="run every n, proven or not")
    ap.add_argument("--out", default=None,
                    help="JSON file (default studies/hindsight/results/hindsight-<solver>.json)")
    args = ap.parse_args(argv)
    params = dict(p.split("=", 1) for p in args.param)
    ns = [int(x) for x in args.ns.split(",")]
    rows, table = [], []
    head = (f"{'n':>4} {'variant':>8} {'proven':>7} {'median s':>9} {'med gap':>8} {'MC-SF/opt':>9} "
            f"{'MC-SF/best':>10}")
    print(head, flush=True)
    for variant in args.variants.split(","):
        for n in ns:
            runs = [run_one(n, s, variant, args.solver, args.limit, params) for s in range(args.seeds)]
            rows += runs
            proven = sum(r["status"] == "optimal" for r in runs)
            secs = statistics.median(r["seconds"] if r["status"] == "optimal" else float("inf")
                                     for r in runs)
            gaps = [r["gap"] if r["gap"] is not None else float("inf") for r in runs]
            ratio = [r["mcsf"] / r["objective"] for r in runs if r["status"] == "optimal"]
            vs_best = [r["mcsf"] / r["objective"] for r in runs if r["objective"]]
            line = (f"{n:>4} {variant:>8} {proven:>5}/{args.seeds} "
                    f"{secs:>9.1f} {statistics.median(gaps):>8.3%} "
                    f"{(statistics.median(ratio) if ratio else float('nan')):>9.4f} "
                    f"{(statistics.median(vs_best) if vs_best else float('nan')):>10.4f}")
            print(line, flush=True)
            table.append(line)
            if proven * 2 <= args.seeds and not args.keep_going:  # median run not proven
                break
    out = Path(args.out or f"studies/hindsight/results/hindsight-{args.solver}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"limit": args.limit, "params": params, "runs": rows}, indent=1))
    print(f"results written to {out}")


if __name__ == "__main__":
    main()
