"""Exact optima with prefix reuse: how far the exhaustive search with hits and drops
(``optsched/formulations/exhaustive/reuse.py``, ``formulations/exhaustive-reuse.md``) and the
reuse MILP (formulation ``reuse-milp``, ``formulations/reuse-milp.md``, HiGHS) reach within a
time limit, by instance size.

    python -m benchmarks.prefix_exact                              # n = 2..6, seeds 0-2, 60 s
    python -m benchmarks.prefix_exact --sizes 2,3 --seeds 0 --time-limit 10   # quick
    python -m benchmarks.prefix_exact --family shared --methods exhaustive,milp \
        --sizes 4,6,8,10,12 --seeds 0,1,2,3 --objectives makespan     # MILP beside the search

``--family shared`` is :func:`optsched.testing.shared_prompt_instance` (unit time, offline,
three system prompts of 2 blocks of 2 tokens with Zipf popularity, M = 24, C = 8); the MILP
row is the whole ``optsched.solve`` call (warm start included) under the same time limit.

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
from collections.abc import Callable

from optsched.errors import OptschedError
from optsched.evaluation import evaluate
from optsched.formulations.exhaustive import SearchOptions, search
from optsched.instance import Instance
from optsched.policies import simulate
from optsched.solve_types import SolveOptions
from optsched.solving.pipeline import solve
from optsched.testing import shared_prompt_instance, tiny_prefix_instance

FAMILIES: dict[str, Callable[[int, int], Instance]] = {
    "tiny": tiny_prefix_instance, "shared": shared_prompt_instance}


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_method(inst: Instance, method: str, objective: str, limit: float
               ) -> tuple[str, int, float | None, str]:
    """(status, states or nodes, objective, incumbent/bound when not proven) of one exact
    method on ``inst``."""
    if method == "milp":
        try:
            rep = solve(inst, "reuse-milp", objective, options=SolveOptions(time_limit=limit))
        except OptschedError:
            return "refused", 0, None, "-"  # e.g. a linear cost model (the MILP is unit time)
        gap = "-" if rep.status == "optimal" or rep.objective is None else (
            f"{rep.objective:.4g}/{rep.bound:.4g}" if rep.bound is not None else f"{rep.objective:.4g}/-")
        return (str(rep.status), rep.nodes or 0, rep.objective if rep.status == "optimal" else None,
                gap)
    if inst.n > 6:
        return "refused", 0, None, "-"  # the exhaustive search's size guard
    r = search(inst, objective, SearchOptions(max_states=2_000_000, time_limit=limit))
    return str(r.status), r.expanded, r.objective, "-"


def row(n: int, seed: int, objective: str, limit: float, family: str = "tiny",
        method: str = "exhaustive") -> str:
    inst = FAMILIES[family](seed, n)
    lpm = evaluate(inst, simulate(inst, "lpm")).objective(objective)
    w0, c0 = time.perf_counter(), time.process_time()
    status, expanded, value, inc_bound = run_method(inst, method, objective, limit)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    idx = inst.prefix_index
    blocks = 0 if idx is None else idx.n_blocks
    opt = f"{value:.4g}" if value is not None else "-"
    ratio = f"{value / lpm:.3f}" if value is not None and lpm > 0 else "-"
    return (f"{method:<10} {n:>2} {seed:>4} {blocks:>6} {objective:<14} {status:<12} {expanded:>9} "
            f"{wall:>7.2f} {cpu:>7.2f} {opt:>8} {lpm:>8.4g} {ratio:>6} {inc_bound:>9}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="2,3,4,5,6", help="requests per instance (comma list)")
    ap.add_argument("--seeds", default="0,1,2", help="instance seeds (comma list)")
    ap.add_argument("--objectives", default="makespan,total-latency")
    ap.add_argument("--time-limit", type=float, default=60.0, help="seconds per search")
    ap.add_argument("--family", choices=sorted(FAMILIES), default="tiny")
    ap.add_argument("--methods", default="exhaustive", help="exhaustive, milp (comma list)")
    a = ap.parse_args(argv)
    print(f"# exact methods with prefix reuse ({a.methods}), family {a.family}, time limit "
          f"{a.time_limit:g} s per search; load average {load()}")
    print("method      n seed blocks objective      status        expanded    wall     cpu  "
          "optimum      lpm opt/lpm inc/bound")
    for n in (int(x) for x in a.sizes.split(",")):
        for seed in (int(x) for x in a.seeds.split(",")):
            for objective in a.objectives.split(","):
                for method in a.methods.split(","):
                    print(row(n, seed, objective, a.time_limit, a.family, method), flush=True)
    print(f"# load average at the end {load()}")


if __name__ == "__main__":
    main()
