"""Time building (and assembling) a MILP with about one million nonzeros.

    .venv/bin/python bench/bench_milp_build.py [--jobs 1000 --slots 500] [--highs] [--mps]

The model is an assignment toy: binary x[j, t] (job j starts in slot t), one "assign" row
per job (sum_t x[j, t] == 1) and one "capacity" row per slot (sum_j size[j] x[j, t] <= C),
so nonzeros = 2 * jobs * slots. Prints seconds per phase and the nonzero count.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from optsched.milp import Model  # noqa: E402


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--slots", type=int, default=500)
    ap.add_argument("--highs", action="store_true", help="also pass the model to HiGHS")
    ap.add_argument("--mps", action="store_true", help="also write an MPS file")
    args = ap.parse_args()

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
