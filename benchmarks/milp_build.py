"""Time building (and assembling) a MILP with about one million nonzeros.

    .venv/bin/python -m benchmarks.milp_build [--jobs 1000 --slots 500] [--highs] [--mps]
    .venv/bin/python -m benchmarks.milp_build --formulations [--repeat 5]

The model is an assignment toy: binary x[j, t] (job j starts in slot t), one "assign" row
per job (sum_t x[j, t] == 1) and one "capacity" row per slot (sum_j size[j] x[j, t] <= C),
so nonzeros = 2 * jobs * slots. Prints seconds per phase and the nonzero count.

``--formulations`` instead times the project's own model builders (InferMax plain / tight /
flow, hindsight tight / plain) on fixed generated instances: best of ``--repeat`` builds,
with the model sizes, so a refactor of a builder can be checked for a build-time regression.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

from optsched.milp import Model


def build(jobs: int, slots: int, seed: int = 0) -> Model:
    rng = np.random.default_rng(seed)
    size = rng.integers(1, 10, size=jobs).astype(float)
    m = Model("bench")
    x = m.add_vars("x", (jobs, slots), vtype="B")
    m.add_constraints(np.arange(jobs)[:, None], x[:, :], 1.0, lo=1, hi=1, name="assign")
    cap = size.sum() / slots * 1.5
    m.add_constraints(np.arange(slots)[None, :], x[:, :], size[:, None], hi=cap,
                      name="capacity")
    m.set_objective(x[:, :], np.arange(slots)[None, :] * size[:, None])
    return m


def _formulation_cases():
    """(label, build thunk) pairs: fixed instances, sizes of a few 10^4 - 10^5 nonzeros."""
    from optsched.cost import UnitCost, preset
    from optsched.formulations import Hypotheses, hindsight
    from optsched.formulations import infermax as ix
    from optsched.formulations.infermax.flow import FlowModel
    from optsched.instance import Limits
    from optsched.workloads.generators import infermax_mix, online_paper_random

    lim = Limits(kv_capacity=2048, max_batch_tokens=1024)
    mix = infermax_mix("SISO", 12, seed=1, limits=lim, cost_model=preset("infermax-llama2-7b-a100"))
    unit = infermax_mix("SISO", 12, seed=1, limits=lim, cost_model=UnitCost())
    paper = online_paper_random(40, seed=3)
    return [
        ("infermax plain  J=60 makespan", lambda: ix.build(mix, "makespan", J=60, variant="plain")),
        ("infermax tight  J=60 makespan", lambda: ix.build(mix, "makespan", J=60, variant="tight")),
        ("infermax tight  J=60 latency", lambda: ix.build(mix, "total-latency", J=60)),
        ("infermax tight  J=60 unit", lambda: ix.build(unit, "makespan", J=60)),
        ("infermax flow   J=40 makespan", lambda: FlowModel(mix, 40, Hypotheses(), None)),
        ("hindsight tight n=40 latency", lambda: hindsight.build(paper, "total-latency")),
        ("hindsight plain n=40 latency", lambda: hindsight.build(
            paper, "total-latency", params=hindsight.HindsightParams(variant="plain"))),
        ("hindsight tight n=40 makespan", lambda: hindsight.build(paper, "makespan")),
    ]


def bench_formulations(repeat: int) -> None:
    for label, thunk in _formulation_cases():
        best = float("inf")
        built = None
        for _ in range(repeat):
            t0 = time.perf_counter()
            built = thunk()
            best = min(best, time.perf_counter() - t0)
        m = built.model
        print(f"{label:32s} {best * 1e3:8.1f} ms  ({m.num_vars} vars, {m.num_constraints} rows, "
              f"{m.arrays().nnz} nonzeros)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--slots", type=int, default=500)
    ap.add_argument("--highs", action="store_true", help="also pass the model to HiGHS")
    ap.add_argument("--mps", action="store_true", help="also write an MPS file")
    ap.add_argument("--formulations", action="store_true",
                    help="time the InferMax / hindsight model builders instead")
    ap.add_argument("--repeat", type=int, default=5, help="builds per case (best is shown)")
    args = ap.parse_args()
    if args.formulations:
        bench_formulations(args.repeat)
        return

    t0 = time.perf_counter()
    m = build(args.jobs, args.slots)
    t1 = time.perf_counter()
    a = m.arrays()
    t2 = time.perf_counter()
    print(f"model      {m.num_vars} vars, {m.num_constraints} rows, {a.nnz} nonzeros")
    print(f"build      {t1 - t0:.3f} s  (add_vars, add_constraints, set_objective)")
    print(f"assemble   {t2 - t1:.3f} s  (CSR, duplicates summed)")
    print(f"total      {t2 - t0:.3f} s")
    if args.highs:
        import highspy

        from optsched.milp.backends.highs import _load_arrays

        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        t3 = time.perf_counter()
        _load_arrays(h, a)
        print(f"highs pass {time.perf_counter() - t3:.3f} s")
    if args.mps:
        with tempfile.TemporaryDirectory() as tmp:
            t4 = time.perf_counter()
            m.write_mps(os.path.join(tmp, "bench.mps"))
            print(f"write mps  {time.perf_counter() - t4:.3f} s")


if __name__ == "__main__":
    main()
