"""How far can a one-machine fluid relaxation lift the total-latency bound? A diagnostic,
NOT a bound (``formulations/bounds.md``, "What did not help": memory concurrency).

Every total-latency rung since B9 (``mbt``, ``coupled``, ``dual``, ``spread``) is a lower
bound on the following fluid relaxation R at the memory-full batching (``u = M / S``, the
batching at which ``spread``'s optimistic version is least on every seeded window, B13):
one machine of rate 1; request ``i`` is released at ``a_i`` and receives, in order, its
prefill work ``x_0`` and then one piece per output step
``g = 1..O-1`` of work ``x_g = ent_g + h S / M``, each piece (step 0 included) at a
rate ``<= x_g / dur_g``, with ``dur_g = c_g + kappa (M - S)`` the step's memory-full duration
(B10/B13: its pass lasts at least its chain floor plus the other entries' ``M - S`` cached
tokens). Each inequality those rungs use holds for every schedule of R
(the works are the least works; each step takes at least its memory-full duration, so the
per-step tails of B13 hold; the mean-busy-time duality holds for any fluid schedule).

This script builds schedules of R exactly (:mod:`optsched.bounds.fluid`; event-driven, no time
grid): at every moment the machine serves the released requests in order of least remaining
work (SRPT; also with the remaining duration added at weights 0.02 and 0.05, the least value
kept), each up to its rate, the rest going to the next. ``R + memory`` also admits a request
only while the admitted, unfinished requests reserve at most ``M`` tokens (``I + O - 1`` each,
never evicted), a schedule of every memory-concurrency relaxation that charges resident KV (at
any time at most ``M`` tokens held by the requests started and not finished). A schedule of a
relaxation is at least that relaxation's optimum, so no bound proven from R's inequalities
(with or without the memory row) can exceed the value printed: the printed gap ``(best -
value) / best`` is the least certified gap such a bound could reach.

    OPTSCHED_DATA=... python -m studies.bounds.fluid_ceiling [--traces conv,code]
        [--window-seeds 0,1,2] [--window 1200]

Prints per window: ``spread`` (B13), the fluid values, the best recorded schedule (the
windows table of docs/results/bounds.md), the least reachable gap, and CPU seconds.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from optsched.bounds import lower_bound
from optsched.bounds.fluid import fluid_completions, relaxation
from studies.settings import M, window

#: best total latency found on each window (docs/results/bounds.md, seeded-windows table:
#: ``improve`` 60 s from the best registered policy, replayed by ``evaluate``)
RECORDED_BEST = {
    ("conv", 0): 12_238,
    ("conv", 1): 21_094,
    ("conv", 2): 11_642,
    ("code", 0): 6_440,
    ("code", 1): 10_665,
    ("code", 2): 6_361,
}

#: weights of the remaining duration in the fluid schedules' priority (0 = SRPT)
WEIGHTS = (0.0, 0.02, 0.05)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", default="conv,code")
    ap.add_argument("--window-seeds", default="0,1,2")
    ap.add_argument("--window", type=int, default=1200)
    args = ap.parse_args(argv)
    print(
        f"{'trace':5} {'seed':>4} {'spread':>8} {'R':>8} {'R+memory':>9} {'best':>8} "
        f"{'gap now':>8} {'least gap':>9} {'cpu s':>6}",
        flush=True,
    )
    for trace in args.traces.split(","):
        for seed in (int(s) for s in args.window_seeds.split(",")):
            inst = window(trace, seed, args.window)
            t0 = time.process_time()
            a = inst.arrival.astype(np.float64)
            x, dur, first, reserve = relaxation(inst)
            free, mem = (
                min(float((fluid_completions(a, x, dur, first, reserve, cap, w) - a).sum()) for w in WEIGHTS)
                for cap in (np.inf, float(M))
            )
            cpu = time.process_time() - t0
            sp = lower_bound(inst, "total-latency", "spread").value
            best = RECORDED_BEST.get((trace, seed), float("nan"))
            print(
                f"{trace:5} {seed:>4} {sp:>8.0f} {free:>8.0f} {mem:>9.0f} {best:>8.0f} "
                f"{(best - sp) / best:>8.1%} {(best - max(free, mem)) / best:>9.1%} "
                f"{cpu:>6.1f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
