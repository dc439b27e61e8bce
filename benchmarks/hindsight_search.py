"""The hindsight model's local search (H21, ``formulations/hindsight.md``): the serial decode's
speed, compiled against the per-window NumPy decode it replaced, and what the annealing reaches
by move budget, on the online paper's family (all arrivals at 0, total latency).

    python -m benchmarks.hindsight_search                       # n = 20, 40, 60; seeds 0-2
    python -m benchmarks.hindsight_search --ns 40 --seeds 0,1,2,3,4 --budgets 500,5000,20000

Per (n, seed): one line for the decode (microseconds per decoded list, the NumPy path over the
compiled one, both from the same lists, identical starts checked) and one per move budget
(moves per request): CPU seconds, MC-SF's objective, the search's best and its ratio to MC-SF.
The search is seeded, so the objectives repeat; the times depend on the machine and its load
(printed). Recorded in ``docs/results/hindsight.md``.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from optsched.formulations.hindsight import greedy_starts, objective_of_starts
from optsched.formulations.hindsight.floors import earliest_slots
from optsched.formulations.hindsight.heuristics import _Decoder, _SlotLoad, improve_starts
from optsched.instance import Instance
from optsched.workloads.generators import online_paper_random

OBJ = "total-latency"


def numpy_decode(instance: Instance, order: np.ndarray) -> np.ndarray:
    """(H21a) as it was before the compiled kernel: every candidate start's window checked at
    once with NumPy (the reference the speed-up is measured against)."""
    O, e = instance.output, earliest_slots(instance)
    H = int(e.max() + O.sum() + O.max() + 1)
    load = _SlotLoad(instance, H)
    starts = np.full(instance.n, -1, np.int64)
    for i in order:
        hit = np.flatnonzero(load.fits(int(i), int(e[i]), H - int(O[i])))
        starts[i] = int(e[i] + hit[0])
        load.place(int(i), int(starts[i]))
    return starts


def decode_line(inst: Instance, lists: int, rng: np.random.Generator) -> str:
    orders = [rng.permutation(inst.n) for _ in range(lists)]
    dec = _Decoder(inst, OBJ)
    dec.starts(orders[0])  # compile or load outside the clock
    t0 = time.process_time()
    fast = [dec.starts(o) for o in orders]
    t_fast = (time.process_time() - t0) / lists
    t0 = time.process_time()
    slow = [numpy_decode(inst, o) for o in orders]
    t_slow = (time.process_time() - t0) / lists
    same = all(np.array_equal(a, b) for a, b in zip(fast, slow))
    return (f"| {inst.n} | {inst.name} | {lists} | {t_fast * 1e6:,.0f} | {t_slow * 1e6:,.0f} | "
            f"{t_slow / t_fast:,.1f} | {'identical' if same else 'DIFFERENT'} |")


def budget_line(inst: Instance, per_request: int, seed: int) -> str:
    g = greedy_starts(inst, "mcsf")
    mcsf = objective_of_starts(inst, OBJ, g)
    t0 = time.process_time()
    found, moves = improve_starts(inst, OBJ, g, time_limit=1e9, max_iters=per_request * inst.n,
                                  seed=seed)
    cpu = time.process_time() - t0
    best = objective_of_starts(inst, OBJ, found)
    return (f"| {inst.n} | {inst.name} | {per_request:,} | {moves:,} | {cpu:.1f} | {mcsf:,.0f} | "
            f"{best:,.0f} | {best / mcsf:.4f} |")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ns", default="20,40,60")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--budgets", default="500,5000", help="moves per request, comma-separated")
    ap.add_argument("--lists", type=int, default=50, help="lists decoded per speed line")
    args = ap.parse_args(argv)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    cases = [(online_paper_random(n, s), s) for n in (int(x) for x in args.ns.split(","))
             for s in (int(x) for x in args.seeds.split(","))]
    print("\n| n | instance | lists | compiled us/list | NumPy us/list | ratio | starts |")
    print("|---|---|---|---|---|---|---|")
    for inst, s in cases:
        print(decode_line(inst, args.lists, np.random.default_rng(s)), flush=True)
    print("\n| n | instance | moves / n | moves | CPU s | MC-SF | best | best / MC-SF |")
    print("|---|---|---|---|---|---|---|---|")
    for inst, s in cases:
        for b in (int(x) for x in args.budgets.split(",")):
            print(budget_line(inst, b, s), flush=True)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
