"""Reach of the exact cluster model (``--formulation cluster``, ``formulations/cluster.md``)
against its cross-check, the exhaustive search over assignments
(:mod:`optsched.formulations.cluster.exhaustive`): 2 identical replicas x ``n`` requests, 5
seeds each. Per cell: the MILP's status, objective and CPU seconds (HiGHS, ``--threads``,
``--time-limit`` for the whole solve, warm start included), the exhaustive optimum and its CPU
seconds, the best router's objective and B17's certified bound.

The generator (:func:`tiny_cluster`, seeded): prompts uniform in 1..8 tokens, outputs 1..4,
arrivals uniform integers in ``0..n/2`` steps (``--offline``: all at 0), ``M = 16`` tokens,
``C = 8`` tokens per batch, unit time (``--linear``: the test kit's linear model, seconds);
the offered load per replica (docs/semantics.md sections 4 and 6) is printed per seed::

    .venv/bin/python -m benchmarks.cluster_exact [--sizes 4,6,8,10] [--seeds 0-4]
        [--objective total-latency] [--time-limit 60] [--threads 2] [--offline] [--linear]
        [--no-exhaustive] [--exhaustive-max 8] [--exhaustive-limit 60] [--method milp|bnb]

``--method bnb`` runs the branch and bound over assignments (``formulations/cluster.md``
section 6) in the MILP's place; the columns keep their ``milp_`` names.

CPU seconds are ``time.process_time`` of this process (the solver's threads included); the
load average is printed first (the machine is shared).
"""

from __future__ import annotations

import argparse
import math
import os
import time
import warnings

import numpy as np

from optsched.cluster import replica_load, replicate
from optsched.cost import LinearCost, UnitCost
from optsched.formulations.base import FormulationError, Hypotheses, prepare_solve, solve_model
from optsched.formulations.cluster.exhaustive import cluster_optimum
from optsched.formulations.cluster.solve import best_router
from optsched.instance import Instance, Limits, Request
from optsched.solve_types import SolveOptions
from optsched.solving.pipeline import cluster_bound

#: the test kit's linear cost model (optsched.testing.instances), in seconds
LINEAR = LinearCost(k0=0.5, k1=0.01, kpq=1e-4, kpm=2e-4, kdm=1e-3, kpr=0.05, kdr=0.02)


def tiny_cluster(n: int, seed: int, R: int = 2, offline: bool = False, linear: bool = False,
                 M: int = 16, C: int = 8) -> Instance:
    """The benchmark's instance (module docstring)."""
    rng = np.random.default_rng(seed)
    reqs = tuple(Request(f"q{i}", 0.0 if offline else float(rng.integers(0, n // 2 + 1)),
                         int(rng.integers(1, 9)), int(rng.integers(1, 5))) for i in range(n))
    inst = Instance(f"tiny-cluster-n{n}-s{seed}", Limits(kv_capacity=M, max_batch_tokens=C),
                    LINEAR if linear else UnitCost(), reqs)
    return replicate(inst, R)


def milp_cell(inst: Instance, objective: str, limit: float, threads: int,
              method: str = "milp") -> dict:
    t0, c0 = time.perf_counter(), time.process_time()
    opts = SolveOptions(time_limit=limit, threads=threads, progress=False,
                        params={"method": method})
    obj, opts = prepare_solve(inst, "cluster", objective, opts, Hypotheses(), None)
    rep = solve_model(inst, "cluster", obj, options=opts, hypotheses=Hypotheses(),
                      warm_start=None)
    return {"status": str(rep.status), "objective": rep.objective, "bound": rep.bound,
            "cpu": time.process_time() - c0, "wall": time.perf_counter() - t0}


def exhaustive_cell(inst: Instance, objective: str, limit: float) -> dict:
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        v = cluster_optimum(inst, objective, time_limit=limit).value
    except FormulationError as e:
        v = None
        print(f"#   exhaustive: {e}")
    return {"objective": v, "cpu": time.process_time() - c0, "wall": time.perf_counter() - t0}


def _load(inst: Instance) -> str:
    from optsched.serving.load import offered_load

    plain = inst.replace(cluster=None)
    doc, _, _ = replica_load(offered_load(plain), inst.n_engines)
    return "offline" if doc["point"] is None else f"{doc['point']:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="4,6,8,10")
    ap.add_argument("--seeds", default="0-4")
    ap.add_argument("--objective", default="total-latency")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--offline", action="store_true")
    ap.add_argument("--linear", action="store_true")
    ap.add_argument("--method", default="milp", choices=("milp", "bnb"),
                    help="the cluster formulation's exact path (its parameter 'method')")
    ap.add_argument("--no-exhaustive", action="store_true")
    ap.add_argument("--exhaustive-max", type=int, default=8,
                    help="largest n the exhaustive search runs on")
    ap.add_argument("--exhaustive-limit", type=float, default=60.0,
                    help="seconds for the exhaustive search of one instance")
    a = ap.parse_args()
    lo, _, hi = a.seeds.partition("-")
    seeds = range(int(lo), int(hi or lo) + 1)
    warnings.simplefilter("ignore")
    print(f"# load average {os.getloadavg()[0]:.2f}; objective {a.objective}; "
          f"{'offline' if a.offline else 'arrivals 0..n/2'}; "
          f"{'linear' if a.linear else 'unit'} cost; M = 16, C = 8; 2 replicas; method "
          f"{a.method} (HiGHS {a.threads} threads for milp), {a.time_limit:g} s")
    print("n\tseed\tload/replica\trouter\tB17\tmilp_status\tmilp_obj\tmilp_cpu\tmilp_wall"
          "\texh_obj\texh_cpu\tagree")
    for n in [int(x) for x in a.sizes.split(",")]:
        proven, cpu = 0, []
        for seed in seeds:
            inst = tiny_cluster(n, seed, offline=a.offline, linear=a.linear)
            ws = best_router(inst, a.objective)
            r = milp_cell(inst, a.objective, a.time_limit, a.threads, a.method)
            e = {"objective": None, "cpu": math.nan} \
                if a.no_exhaustive or n > a.exhaustive_max else \
                exhaustive_cell(inst, a.objective, a.exhaustive_limit)
            agree = "-" if e["objective"] is None or r["status"] != "optimal" else \
                str(abs(e["objective"] - r["objective"]) <= 1e-6 * max(1, abs(e["objective"])))
            proven += r["status"] == "optimal"
            cpu.append(r["cpu"])
            print(f"{n}\t{seed}\t{_load(inst)}\t{None if ws is None else ws.objective(a.objective):.6g}"
                  f"\t{cluster_bound(inst, a.objective).value:.6g}\t{r['status']}"
                  f"\t{r['objective']}\t{r['cpu']:.1f}\t{r['wall']:.1f}\t{e['objective']}"
                  f"\t{e['cpu']:.1f}\t{agree}", flush=True)
        print(f"# n = {n}: {proven}/{len(seeds)} proven in the model within {a.time_limit:g} s; "
              f"MILP CPU median {np.median(cpu):.1f} s, max {max(cpu):.1f} s", flush=True)


if __name__ == "__main__":
    main()
