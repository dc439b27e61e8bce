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

This script builds schedules of R exactly (event-driven, no time grid): at every moment the
machine serves the released requests in order of least remaining work (SRPT; also with the
remaining duration added at weights 0.02 and 0.05, the least value kept), each up to its
rate, the rest going to the next. ``R + memory`` also admits a request only while the
admitted, unfinished requests reserve at most ``M`` tokens (``I + O - 1`` each, never
evicted), a schedule of every memory-concurrency relaxation that charges resident KV (at
any time at most ``M`` tokens held by the requests started and not finished). A schedule
of a relaxation is at least that relaxation's optimum, so no bound proven from R's
inequalities (with or without the memory row) can exceed the value printed: the printed
gap ``(best - value) / best`` is the least certified gap such a bound could reach.

    OPTSCHED_TRACES=... python bench/bench_fluid_ceiling.py [--traces conv,code]
        [--window-seeds 0,1,2] [--window 1200]

Prints per window: ``spread`` (B13), the fluid values, the best recorded schedule (the
windows table of docs/results/bounds.md), the least reachable gap, and CPU seconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from bench_bounds import M, window_instance  # noqa: E402

from optsched.bounds import Floors, lower_bound  # noqa: E402
from optsched.bounds.coupled import _steps, other_entry_rate  # noqa: E402

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


def relaxation(inst) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Flat per-step works ``x`` and least durations ``dur`` at ``u = M / S`` (step 0 of a
    request: its prefill pass), each request's first step index and the tokens it reserves
    (``I + O - 1``)."""
    f = Floors.of(inst)
    Mf = float(inst.limits.kv_capacity)
    S, ent, c, first = _steps(f, False)
    umax = np.maximum(Mf / S, 1.0)
    x = ent + f.batch_overhead / umax
    dur = c + other_entry_rate(f.k) * S * (umax - 1.0)
    reserve = (inst.prompt + inst.output - 1).astype(np.float64)
    return x, dur, first.astype(np.int64), reserve


@njit(cache=True)
def fluid_srpt(a, x, dur, first, reserve, cap_mem, dur_weight=0.0):  # pragma: no cover
    """Exact event-driven fluid schedule of R (priority: least remaining work plus
    ``dur_weight`` times the remaining memory-full duration; per-step rate caps; admission
    while the reservations fit in ``cap_mem``, ``inf`` = no memory row). Returns the
    completion times."""
    n = a.size
    last = np.empty(n, np.int64)
    for i in range(n):
        last[i] = first[i + 1] if i + 1 < n else x.size
    suffix = np.zeros(x.size + 1)  # priority of a request at step k: its work (and
    for i in range(n):  # weighted duration) from step k on
        acc = 0.0
        for k in range(last[i] - 1, first[i] - 1, -1):
            acc += x[k] + dur_weight * dur[k]
            suffix[k] = acc
    order = np.argsort(a, kind="mergesort")
    step = first.copy()
    rem = x[first].copy()  # remaining work of the current step
    done = np.full(n, np.nan)
    admitted = np.zeros(n, np.bool_)
    waiting = np.empty(n, np.int64)  # released, not admitted
    active = np.empty(n, np.int64)  # admitted, unfinished
    nw, na, nxt, used, t = 0, 0, 0, 0.0, 0.0
    rate = np.zeros(n)
    finished = 0
    while finished < n:
        while nxt < n and a[order[nxt]] <= t:
            waiting[nw] = order[nxt]
            nw += 1
            nxt += 1
        # admit in order of least remaining work while the reservations fit
        if nw > 0:
            key = np.empty(nw)
            for q in range(nw):
                key[q] = suffix[step[waiting[q]]]
            perm = np.argsort(key, kind="mergesort")
            keep = np.empty(nw, np.int64)
            nk = 0
            for q in perm:
                j = waiting[q]
                if used + reserve[j] <= cap_mem or na == 0:
                    used += reserve[j]
                    admitted[j] = True
                    active[na] = j
                    na += 1
                else:
                    keep[nk] = j
                    nk += 1
            for q in range(nk):
                waiting[q] = keep[q]
            nw = nk
        if na == 0:
            t = a[order[nxt]]
            continue
        key = np.empty(na)
        for q in range(na):
            j = active[q]
            k = step[j]
            part = rem[j] * (1.0 + dur_weight * dur[k] / x[k]) if x[k] > 0 else 0.0
            key[q] = part + suffix[k + 1] if k + 1 < last[j] else part
        perm = np.argsort(key, kind="mergesort")
        left = 1.0
        dt = np.inf
        for q in perm:
            j = active[q]
            k = step[j]
            r = 1.0 if dur[k] <= 0.0 else min(1.0, x[k] / dur[k])
            r = min(r, left)
            rate[j] = r
            left -= r
            if r > 0.0:
                dt = min(dt, rem[j] / r)
        if nxt < n:
            dt = min(dt, a[order[nxt]] - t)
        t += dt
        q = 0
        while q < na:
            j = active[q]
            if rate[j] > 0.0:
                rem[j] -= rate[j] * dt
                if rem[j] <= 1e-12 * max(1.0, x[step[j]]):
                    step[j] += 1
                    if step[j] == last[j]:
                        done[j] = t
                        finished += 1
                        used -= reserve[j]
                        rate[j] = 0.0
                        active[q] = active[na - 1]
                        na -= 1
                        continue
                    rem[j] = x[step[j]]
            rate[j] = 0.0
            q += 1
    return done


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
            inst, _ = window_instance(trace, seed, args.window)
            t0 = time.process_time()
            a = inst.arrival.astype(np.float64)
            x, dur, first, reserve = relaxation(inst)
            free, mem = (
                min(float((fluid_srpt(a, x, dur, first, reserve, cap, w) - a).sum()) for w in WEIGHTS)
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
