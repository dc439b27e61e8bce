"""Exact optima with prefix reuse: how far the exhaustive search with hits and drops
(``optsched/formulations/exhaustive/reuse.py``, ``formulations/exhaustive-reuse.md``) reaches
within a time limit, by instance size.

    python -m benchmarks.prefix_exact                              # n = 2..6, seeds 0-2, 60 s
    python -m benchmarks.prefix_exact --sizes 2,3 --seeds 0 --time-limit 10   # quick

The family is :func:`optsched.testing.tiny_prefix_instance` (seeded): ``n`` requests with
prompts of 2-5 tokens and 1-2 output tokens, each listing the first blocks of one of two
stems, KV blocks of 1 or 2 tokens, tight ``M`` and ``C``, unit or a linear cost. For each
size, seed and objective: the status (optimal, or no_solution at the time or state limit),
states expanded, wall and CPU seconds, and the optimum against ``lpm``'s value. The machine
is usually shared: CPU seconds are printed next to wall seconds, with the load average."""

from __future__ import annotations

import argparse
import os
import time

from optsched.evaluation import evaluate
from optsched.formulations.exhaustive import SearchOptions, search
from optsched.policies import simulate
from optsched.testing import tiny_prefix_instance


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def row(n: int, seed: int, objective: str, limit: float) -> str:
    inst = tiny_prefix_instance(seed, n)
    lpm = evaluate(inst, simulate(inst, "lpm")).objective(objective)
    w0, c0 = time.perf_counter(), time.process_time()
    r = search(inst, objective, SearchOptions(max_states=2_000_000, time_limit=limit))
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    idx = inst.prefix_index
    blocks = 0 if idx is None else idx.n_blocks
    opt = f"{r.objective:.4g}" if r.objective is not None else "-"
    ratio = f"{r.objective / lpm:.3f}" if r.objective is not None and lpm > 0 else "-"
    return (f"{n:>2} {seed:>4} {blocks:>6} {objective:<14} {r.status:<12} {r.expanded:>9} "
            f"{wall:>7.2f} {cpu:>7.2f} {opt:>8} {lpm:>8.4g} {ratio:>6}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="2,3,4,5,6", help="requests per instance (comma list)")
    ap.add_argument("--seeds", default="0,1,2", help="instance seeds (comma list)")
    ap.add_argument("--objectives", default="makespan,total-latency")
    ap.add_argument("--time-limit", type=float, default=60.0, help="seconds per search")
    a = ap.parse_args(argv)
    print(f"# exhaustive search with prefix reuse, time limit {a.time_limit:g} s per search; "
          f"load average {load()}")
    print(" n seed blocks objective      status        expanded    wall     cpu  optimum      "
          "lpm opt/lpm")
    for n in (int(x) for x in a.sizes.split(",")):
        for seed in (int(x) for x in a.seeds.split(",")):
            for objective in a.objectives.split(","):
                print(row(n, seed, objective, a.time_limit), flush=True)
    print(f"# load average at the end {load()}")


if __name__ == "__main__":
    main()
