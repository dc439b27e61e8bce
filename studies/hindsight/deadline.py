"""Root bound of the hindsight IP with the deadline-cardinality rows (H22), and what they cost.

For each instance of the online paper's random family (all arrivals at 0, total latency): the
best known schedule (list schedules + local search, H21), the completion floors ``L_k`` (H22b:
CP-SAT (H22e) or max-count MILP (H22a) probes within ``--budget`` seconds, ``--probe`` seconds
each), and the LP relaxation of the tight model without and with the rows (H22c).
``formulations/hindsight.md`` (H22) quotes these numbers. Times are wall seconds on whatever
the machine is doing: say the load when quoting them.

    python -m studies.hindsight.deadline --ns 12,16,20 --seeds 0,1,2,3,4 --budget 300
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from optsched.formulations.hindsight import HindsightParams, best_known_starts, build, objective_of_starts
from optsched.formulations.hindsight.deadline import PROBES, completion_floors
from optsched.milp import lp_relaxation_value
from optsched.workloads.generators import online_paper_random


def run_one(n: int, seed: int, budget: float, probe: float, search: float, kind: str) -> dict:
    inst = online_paper_random(n, seed)
    starts, src, _ = best_known_starts(inst, "total-latency", None, search)
    best = objective_of_starts(inst, "total-latency", starts)
    cf = completion_floors(inst, starts + inst.output, budget=budget, probe_limit=probe, probe=kind)
    t = time.perf_counter()
    lp = lp_relaxation_value(build(inst, "total-latency", params=HindsightParams(), ub_starts=starts).model)
    lp_cut = lp_relaxation_value(build(inst, "total-latency", params=HindsightParams(), ub_starts=starts,
                                       floors=cf.floors).model)
    return {"n": n, "seed": seed, "best": best, "best_from": src, "floors": cf.floors.tolist(),
            "floors_closed": int(cf.proven.sum()), "probes": cf.solves, "floor_seconds": cf.seconds,
            "sum_floors": int(cf.floors.sum()), "lp": lp, "lp_deadline": lp_cut,
            "lp_seconds": time.perf_counter() - t, "load": os.getloadavg()[0]}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ns", default="12,16,20")
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds for the floors per instance")
    ap.add_argument("--probe", type=float, default=10.0, help="seconds per max-count probe")
    ap.add_argument("--probe-kind", default="cpsat", choices=PROBES, help="(H22e) or (H22a)")
    ap.add_argument("--search", type=float, default=None, help="local search seconds (default n/4)")
    ap.add_argument("--out", default="studies/hindsight/results/hindsight-deadline.json")
    args = ap.parse_args(argv)
    rows = []
    print(f"{'n':>3} {'seed':>4} {'best':>6} {'LP':>8} {'LP+H22':>8} {'sum L':>6} {'closed':>6} "
          f"{'probes':>6} {'floor s':>7} {'load':>5}", flush=True)
    for n in (int(v) for v in args.ns.split(",")):
        for seed in (int(v) for v in args.seeds.split(",")):
            r = run_one(n, seed, args.budget, args.probe, n / 4 if args.search is None else args.search,
                        args.probe_kind)
            rows.append(r)
            print(f"{n:>3} {seed:>4} {r['best']:>6.0f} {r['lp']:>8.1f} {r['lp_deadline']:>8.1f} "
                  f"{r['sum_floors']:>6} {r['floors_closed']:>3}/{n:<2} {r['probes']:>6} "
                  f"{r['floor_seconds']:>7.1f} {r['load']:>5.1f}", flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"budget": args.budget, "probe": args.probe,
                                "probe_kind": args.probe_kind, "runs": rows}, indent=1))
    print(f"results written to {out}")


if __name__ == "__main__":
    main()
