"""MC-SF against the optimum of its own model at small prompt/capacity ratios (Theorem 4.2 of
the online-scheduling paper; ``docs/results/claims.md``, "MC-SF's semi-online optimality").

``optsched check-claim mcsf-optimal`` draws tiny instances (``s`` = 1-3, ``M`` at most twice the
largest peak), so its smallest counterexample has ``s / M = 1/5``. This search asks whether the
violation needs a large prompt share: prompt ``I = 2`` (``s = 1``), capacity ``--M`` (``s / M =
1 / M``), all at 0, unit time, 5-8 requests, each output long (``U[M/4, M-2]``) or short
(``U[1, M/4]``) with probability 1/2 (so the peaks exceed ``M`` and memory binds). MC-SF is the
registered ``mcsf`` policy; the optimum of the paper's model (no preemption, no chunking) is the
hindsight IP (``formulations/hindsight.md``, HiGHS, proven optimal); every schedule is replayed by
``optsched.evaluate``. The shipped instances were the first found with ``--M 40 --seed 2`` (trial
14, 5 requests: 165 vs 161) and ``--M 35 --seed 3`` (trial 46, 6 requests: 109 vs 106);
``tests/checks/test_claims.py`` re-derives both optima by the exhaustive search of the paper's
model and the IP.

    .venv/bin/python -m studies.claims.mcsf_ratios --M 40 --seed 2 --trials 15
    .venv/bin/python -m studies.claims.mcsf_ratios --M 35 --seed 3 --trials 47
"""

from __future__ import annotations

import argparse
import random
import time

from optsched.checks.claims import _mcsf_schedule, _total_latency, paper_instance
from optsched.instance import Instance
from optsched.solve_types import SolveOptions, Status
from optsched.solving import solve


def draw(rng: random.Random, M: int) -> list[int]:
    """One instance's outputs (module docstring)."""
    n = rng.randint(5, 8)
    return sorted(rng.randint(M // 4, M - 2) if rng.random() < 0.5 else rng.randint(1, M // 4)
                  for _ in range(n))


def trial(inst: Instance, time_limit: float) -> tuple[float, str, float | None]:
    """MC-SF's total latency, the IP's status and its optimum (replayed)."""
    mc = _total_latency(inst, _mcsf_schedule(inst)[0])
    rep = solve(inst, "hindsight", "total-latency", warm_start="mcsf",
                options=SolveOptions(time_limit=time_limit, progress=False))
    opt = _total_latency(inst, rep.schedule) if rep.schedule is not None else None
    return mc, str(rep.status), opt if rep.status == Status.OPTIMAL else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--M", type=int, default=40, help="KV capacity (s = 1: s / M = 1 / M)")
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--trials", type=int, default=15)
    ap.add_argument("--time-limit", type=float, default=30.0, help="seconds per IP solve")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    viol = solved = 0
    for k in range(a.trials):
        outs = draw(rng, a.M)
        t0 = time.process_time()
        mc, status, opt = trial(paper_instance(2, outs, a.M), a.time_limit)
        solved += opt is not None
        bad = opt is not None and mc > opt + 1e-9
        viol += bad
        print(f"{k} I=2 M={a.M} outputs={outs} mcsf={mc:g} ip={status} "
              f"optimum={'-' if opt is None else format(opt, 'g')} cpu={time.process_time() - t0:.1f}s"
              + (" VIOLATION" if bad else ""), flush=True)
    print(f"s/M = 1/{a.M}: {viol} of {solved} proven instances violate Theorem 4.2")


if __name__ == "__main__":
    main()
