"""Do window-hull cuts strengthen the (H23) LP? (an experiment behind ``formulations/hindsight.md``)

The (H23) rows make the LP's load of every *single slot* a cover of future-feasible multisets.
The question this script answers: does the LP lose *between* slots, where a request split over
several starts lets consecutive slots hold sets of requests that cannot follow one another?

**The cut** (:mod:`optsched.formulations.hindsight.windowcuts`): the start columns that occupy a
window of ``W`` consecutive slots and that an integer schedule uses fit together in memory at
every slot; when the LP's values on them are not covered by one unit of such patterns, the
cover LP's duals give a row every schedule satisfies (CP-SAT prices the patterns; the
right-hand side is its proven bound). ``W = 1`` is the per-request slot hull.

The script runs the (H23) loop of :mod:`optsched.formulations.hindsight.lpbound` for
``--h23`` seconds, then alternates window rounds (offsets 0 and ``W / 2``, every window of the
horizon) with three (H23) rounds, until ``--limit`` seconds or a round with no cut at offset 0.
The bound printed is (H24a), certified from the LP's duals.

    python -m studies.hindsight.window_hull --n 12 --seed 0 --width 8 --h23 15 --limit 150

Measured on the quiet 2-core machine (HiGHS 1.16, CP-SAT 9.x, one thread each):

- n = 12, seed 0 (optimum 914): (H23) 910.45 after 20 rounds; 6 window rounds at ``W = 8``
  (4-8 cuts each, largest cover number 1.155 in the first, 1.056 in the last) move it to
  910.82 in 150 s.
- n = 20, seed 1 (best known 1,156): (H23) 1,110.16 after 34 rounds (121 s); two window rounds at
  ``W = 12`` find 1 and 3 violated windows (largest cover 1.019 and 1.046) and move the LP to
  1,110.42 (gap 3.94%) in 285 s.

So the LP's solution restricted to any 8-12 consecutive slots is already, or nearly, a convex
combination of patterns that fit: the gap is not between neighbouring slots.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass

import numpy as np

from optsched.formulations.hindsight import HindsightParams, build
from optsched.formulations.hindsight.ffcuts import CutLoop, SlotItems
from optsched.formulations.hindsight.lpbound import _add_rows, _certified, _run
from optsched.formulations.hindsight.solve import best_known_starts
from optsched.formulations.hindsight.windowcuts import columns_of, separate
from optsched.milp.backends.highs import _load_arrays, new_highs
from optsched.workloads.generators import online_paper_random
from studies.hindsight.ratio_sample import replayed

OBJ = "total-latency"


@dataclass
class LP:
    """The hindsight model's LP in HiGHS with its (H23) loop and the best certified bound."""

    hm: object
    h: object
    loop: CutLoop
    cap: np.ndarray
    best: float = -math.inf

    @classmethod
    def of(cls, hm) -> LP:
        a = hm.model.arrays()
        h = new_highs()
        _load_arrays(h, a)
        h.changeColsIntegrality(a.num_vars, np.arange(a.num_vars, dtype=np.int32),
                                np.zeros(a.num_vars, dtype=np.uint8))
        cols = columns_of(hm)
        items = SlotItems.of_columns(cols.start, cols.prompt[cols.unit], cols.output[cols.unit])
        lp = cls(hm, h, CutLoop(items, cols.M), np.full(a.num_vars, float(hm.instance.n)))
        lp.solve()
        return lp

    def x(self) -> np.ndarray:
        return np.array(self.h.getSolution().col_value, float)[self.hm.x.ids]

    def solve(self) -> float:
        _run(self.h, None)
        self.best = max(self.best, _certified(self.h, self.cap)[0])
        return float(self.h.getInfo().objective_function_value)

    def add(self, rows) -> float:
        _add_rows(self.h, rows, self.hm.x.ids)
        return self.solve()

    def h23(self, deadline: float | None, rounds: int = 200) -> int:
        """(H23) rounds until none is violated, ``rounds`` or the deadline; how many ran."""
        for k in range(rounds):
            if deadline is not None and time.perf_counter() >= deadline:
                return k
            rows, _ = self.loop.separate(self.x(), deadline)
            if not rows:
                return k
            self.add(rows)
        return rounds


def run(n: int, seed: int, width: int, h23: float, limit: float) -> dict:
    """The experiment on ``online_paper_random(n, seed)``; one record of every round."""
    t0 = time.perf_counter()
    inst = online_paper_random(n, seed)
    starts, _, _ = best_known_starts(inst, OBJ, None, min(10.0, n / 4))
    ub = replayed(inst, starts)  # the evaluator's objective, checked against the model's
    hm = build(inst, OBJ, None, HindsightParams(), starts)
    lp = LP.of(hm)
    cols = columns_of(hm)
    k = lp.h23(t0 + h23)
    rec = {"n": n, "seed": seed, "width": width, "best_known": ub, "h23_rounds": k,
           "h23_bound": lp.best, "rounds": []}
    _log(f"n={n} seed={seed}: best known {ub:g}; (H23) {k} rounds, bound {lp.best:.2f}")
    deadline = t0 + limit
    for r in range(10_000):
        offset = (r % 2) * (width // 2)
        rows, covers = separate(cols, lp.x(), width, offset, deadline)
        value = lp.add(rows) if rows else float(lp.h.getInfo().objective_function_value)
        if rows:
            lp.h23(deadline, rounds=3)
        rec["rounds"].append({"offset": offset, "cuts": len(rows), "max_cover": max(covers, default=1.0),
                              "lp": value, "bound": lp.best, "seconds": time.perf_counter() - t0})
        _log(f"round {r} (offset {offset}): {len(rows)} window rows, largest cover "
             f"{max(covers, default=1.0):.4f}, bound {lp.best:.2f}, {time.perf_counter() - t0:.0f} s")
        if time.perf_counter() >= deadline or (not rows and offset == 0 and r > 0):
            break
    rec["bound"] = lp.best
    rec["gap"] = (ub - lp.best) / ub
    return rec


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=12)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--width", type=int, default=8, help="slots per window (W)")
    ap.add_argument("--h23", type=float, default=15.0, help="seconds of (H23) rounds first")
    ap.add_argument("--limit", type=float, default=150.0, help="seconds in all")
    args = ap.parse_args(argv)
    if args.n < 1 or args.width < 1 or args.h23 < 0 or args.limit <= 0:
        print("window_hull: --n and --width must be >= 1, --h23 >= 0, --limit > 0",
              file=sys.stderr)
        return 2
    json.dump(run(args.n, args.seed, args.width, args.h23, args.limit), sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
