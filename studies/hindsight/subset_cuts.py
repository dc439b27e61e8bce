"""Do subset-optimum cuts strengthen the hindsight LP? (an experiment behind ``formulations/hindsight.md``)

For every set ``S`` of at most ``--kmax`` requests, ``sum_{i in S} C_i >= OPT(S)`` holds in every
feasible schedule: removing the other requests keeps a schedule feasible, so the requests of ``S``
complete no earlier than ``S``'s own optimum. ``OPT(S)`` is proven by the hindsight model itself
(through ``solve()``, so each sub-optimum is decoded and replayed by ``evaluate``). The script
solves the root LP of the tight model (with (H20)), adds the violated subset cuts, re-solves and
repeats, and prints how far the LP moves towards the best known schedule.

    python -m studies.hindsight.subset_cuts --ns 12,16 --seeds 0 --kmax 3

Measured (HiGHS 1.15.1): no violated cut of size <= 3 at n = 12 (seeds 0 and 4) and n = 16 (seed 0);
with ``--kmax 5`` at n = 12 seed 0 one cut, LP 863.1 -> 864.3 against the optimum 914. The LP's gap is
not local to a few requests.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import time

import highspy
import numpy as np

from optsched.formulations import SolveOptions
from optsched.formulations.hindsight import (
    HindsightParams,
    build,
    greedy_starts,
    improve_starts,
    objective_of_starts,
)
from optsched.milp.backends.highs import _load_arrays
from optsched.solving import solve
from optsched.workloads.generators import online_paper_random

OBJ = "total-latency"


def completion_terms(hm, O):
    """Per request: (columns, coefficients) with ``C_i = sum coef * value`` (late bucket: its cut)."""
    late = {int(u): k for k, u in enumerate(hm.late_units)} if hm.late is not None else {}
    terms = {}
    for u, members in enumerate(hm.unit_members):
        i = int(members[0])
        sel = np.flatnonzero(hm.col_unit == u)
        cols, coef = list(hm.x.ids[sel]), list((hm.col_t[sel] + O[i]).astype(float))
        if u in late:
            cols.append(int(hm.late.ids[late[u]]))
            coef.append(float(hm.cut + O[i]))
        terms[i] = (np.asarray(cols, np.int32), np.asarray(coef))
    return terms


def run(n: int, seed: int, kmax: int, rounds: int, search: float) -> None:
    inst = online_paper_random(n, seed)
    O = inst.output.astype(int)
    ub = improve_starts(inst, OBJ, greedy_starts(inst), time_limit=search)[0]
    best = objective_of_starts(inst, OBJ, ub)
    hm = build(inst, OBJ, ub_starts=ub, params=HindsightParams(aggregate=False, symmetry=False))
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    a = hm.model.arrays()
    _load_arrays(h, dataclasses.replace(a, is_int=np.zeros_like(a.is_int)))
    h.run()
    lp0 = h.getInfo().objective_function_value
    terms = completion_terms(hm, O)
    cache: dict[tuple, float] = {}

    def opt(S) -> float:
        key = tuple(sorted((int(inst.prompt[i]), int(O[i])) for i in S))
        if key not in cache:
            sub = inst.replace(requests=tuple(inst.requests[i] for i in S), name=f"{inst.name}-sub")
            rep = solve(sub, "hindsight", OBJ, options=SolveOptions(time_limit=60, threads=1, progress=False))
            if rep.status != "optimal":
                raise SystemExit(f"sub-instance {S} not proven ({rep.status}); raise its time limit")
            cache[key] = float(rep.objective)
        return cache[key]

    t0 = time.perf_counter()
    lp = lp0
    added = 0
    for _ in range(rounds):
        v = np.asarray(h.getSolution().col_value)
        cbar = {i: float(v[c] @ f) for i, (c, f) in terms.items()}
        viol = []
        for k in range(2, kmax + 1):
            for S in itertools.combinations(range(n), k):
                rhs = opt(S)
                if sum(cbar[i] for i in S) < rhs - 1e-6:
                    viol.append(S)
        if not viol:
            break
        for S in viol:
            cols = np.concatenate([terms[i][0] for i in S])
            coef = np.concatenate([terms[i][1] for i in S])
            h.addRow(opt(S), highspy.kHighsInf, cols.size, cols, coef)
        added += len(viol)
        h.run()
        lp = h.getInfo().objective_function_value
    print(f"{n:>3} {seed:>4} {kmax:>4} {best:>8.0f} {lp0:>9.1f} {lp:>9.1f} {added:>6} "
          f"{len(cache):>7} {time.perf_counter() - t0:>6.0f}", flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ns", default="12")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--kmax", type=int, default=3, help="largest subset size (default 3)")
    ap.add_argument("--rounds", type=int, default=5, help="separation rounds (default 5)")
    ap.add_argument("--search", type=float, default=10.0, help="local-search seconds for the best schedule")
    args = ap.parse_args(argv)
    print(f"{'n':>3} {'seed':>4} {'kmax':>4} {'best':>8} {'LP':>9} {'LP+cuts':>9} {'cuts':>6} "
          f"{'subsets':>7} {'s':>6}")
    for n in (int(v) for v in args.ns.split(",")):
        for seed in (int(v) for v in args.seeds.split(",")):
            run(n, seed, args.kmax, args.rounds, args.search)


if __name__ == "__main__":
    main()
