"""How much ``optsched improve`` gains over the best router on a cluster (feeds
docs/results/cluster.md, "Improving on the best router").

Setting: ``routers.py``'s (a seeded 1,200-request window of the Azure conversation trace,
``M = 30,000``, ``C = 8,192``, Llama-2-7B/A100, vLLM on every engine) on ``R`` identical
replicas at a load per replica ``rho`` (one-engine load ``R * rho``). Every router of
``routers.py`` is simulated; the search (:func:`optsched.search.assignment.improve_assignment`)
starts from the router with the lowest objective and runs for ``--seconds`` (the search alone;
the CLI's ``--time-limit`` also pays for the start simulation). Records go to
``results/improve.jsonl`` (one per cell, with CPU seconds and the load average)::

    OPTSCHED_DATA=/path/to/shared/data nice -n 10 .venv/bin/python -m studies.cluster.improve \\
        [--size 1200] [--seed 0] [--replicas 4] [--loads 0.7,1.2] [--seconds 120]
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path

from optsched.cluster import replicate, simulate
from optsched.evaluation import evaluate
from optsched.policies import get_spec
from optsched.search.assignment import AssignmentOptions, improve_assignment
from studies.cluster.routers import POLICY, ROUTERS, at_load, generate_command

OBJECTIVE = "total-latency"


def cell(size: int, seed: int, R: int, rho: float, seconds: float) -> dict:
    """Every router's objective, then the search from the best one."""
    inst = replicate(at_load(size, seed, R * rho)[0], R)
    spec = get_spec(POLICY)
    routers, best = {}, None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for r in ROUTERS:
            sched = simulate(inst, POLICY, r)
            routers[r] = evaluate(inst, sched).objective(OBJECTIVE)
            if best is None or routers[r] < routers[best[0]]:
                best = (r, sched)
        assert best is not None
        c0 = time.process_time()
        res = improve_assignment(inst, best[1], spec.make, OBJECTIVE,
                                 AssignmentOptions(time_limit=seconds, seed=0))
        cpu = time.process_time() - c0
    ev = evaluate(inst, res.schedule)
    return {"size": size, "seed": seed, "R": R, "rho": rho, "n": inst.n, "objective": OBJECTIVE,
            "routers": routers, "best_router": best[0], "start": res.start_objective,
            "improved": res.objective, "gain": 1 - res.objective / res.start_objective,
            "feasible": ev.feasible, "mean_latency": ev.metrics["mean_latency"],
            "moves_tried": res.moves_tried, "moves_accepted": res.moves_accepted,
            "rejected": res.moves_rejected_infeasible, "seconds": seconds,
            "cpu_search": cpu, "wall_search": res.runtime, "history": res.history,
            "loadavg": os.getloadavg()[0],
            "commands": [generate_command(size, seed, rho).replace(
                "--load", f"--replicas {R} --load"),
                f"optsched improve w.json --from {best[0]} --policy {POLICY} "
                f"--objective {OBJECTIVE} --time-limit {seconds:g} --json"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--loads", default="0.7,1.2")
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--out", default="studies/cluster/results/improve.jsonl")
    args = ap.parse_args()
    for rho in (float(x) for x in args.loads.split(",")):
        rec = cell(args.size, args.seed, args.replicas, rho, args.seconds)
        with Path(args.out).open("a") as f:
            f.write(json.dumps(rec) + "\n")
        print(json.dumps({k: v for k, v in rec.items() if k != "history"}), flush=True)


if __name__ == "__main__":
    main()
