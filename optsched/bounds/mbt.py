"""Bound ``mbt``: the mean-busy-time LP relaxation with per-request tails
(``formulations/bounds.md`` B9).

The sharing rule of B7 turns any schedule into a preemptive one-machine schedule of fluid
work: request ``i`` receives ``w_i`` (its floors under the rule) after ``a_i``. Its *mean
busy time* ``MB_i = (1 / w_i) * integral of t * r_i(t) dt`` (``r_i`` = its rate) satisfies
``C_i >= MB_i + T_i``, where the tail ``T_i`` uses what the single machine does not see:
the prefill work is done before the first token, at least the decode chain ``D_i`` before
the completion, and the work of decode step ``g`` before token ``g + 1``, at least
``tail_g`` (the chain floors of the later steps) before the completion. The least
``sum_i MB_i`` over all preemptive one-machine schedules is the optimum of the mean-busy-time
LP, attained by preemptive smallest-work-first (Goemans 1997; Goemans, Queyranne, Schulz,
Skutella and Wang 2002). So ``sum_i C_i >= PSWF(a, w) + sum_i T_i``.

Total latency only; O(sum O) once, then O(n log n) per sharing mix.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from .base import BoundResult, Budget, register_bound
from .floors import Floors
from .srpt import promising_mixes

#: (lam_kv, lam_tok, lam_cnt) sharing mixes tried (each valid, bounds.md B7); fewer than
#: srpt's eight because each costs a heap pass: the KV-heavy mixes won on every trace cell
MBT_MIXES = ((1.0, 0.0, 0.0), (0.8, 0.1, 0.1), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))


def pswf_mean_busy_sum(release: np.ndarray, work: np.ndarray) -> float:
    """``sum_i MB_i`` of preemptive smallest-work-first on one machine (static priority
    ``w_i``, a job runs until it finishes or a smaller one is released): the optimum of the
    mean-busy-time LP with unit weights (bounds.md B9). A piece ``[t, t + d)`` of job ``i``
    adds ``d (2 t + d) / (2 w_i)``."""
    order = np.argsort(release, kind="stable")
    r = release[order].tolist()
    w = work[order].tolist()
    n, k, t, total = len(r), 0, 0.0, 0.0
    heap: list[tuple[float, int, float]] = []  # (work = priority, index, remaining)
    while k < n or heap:
        if not heap:
            t = max(t, r[k])
        while k < n and r[k] <= t:
            heapq.heappush(heap, (w[k], k, w[k]))
            k += 1
        wk, j, rem = heapq.heappop(heap)
        run = min(rem, (r[k] if k < n else float("inf")) - t)
        if wk > 0:
            total += run * (2 * t + run) / (2 * wk)
        t += run
        if run < rem:
            heapq.heappush(heap, (wk, j, rem - run))
    return total


@dataclass(frozen=True)
class StepSums:
    """Per-request sums over decode steps ``g = 1..O-1`` that the tail of every sharing mix
    needs (the step's work is ``ent + alpha * kv + beta``, linear in the mix)."""

    D: np.ndarray  # decode chain floor: sum_g c_g
    count: np.ndarray  # O - 1
    ent: np.ndarray  # sum_g ent_g
    kv: np.ndarray  # sum_g fp(I + g)
    tail: np.ndarray  # sum_g tail_g
    ent_tail: np.ndarray
    kv_tail: np.ndarray
    ent2: np.ndarray
    kv2: np.ndarray
    ent_kv: np.ndarray


def step_sums(f: Floors) -> StepSums:
    """Step ``g`` (token ``g + 1``, ``S = I + g``): entry floor ``ent_g = min(dec_g, ref_g)``
    (B2), KV ``fp(S)`` after its generating batch (F3), chain floor ``c_g`` of its batches
    (F5) and ``tail_g = sum_{g' > g} c_g'``. The steps of a request are contiguous, so the
    per-request sums are ``np.add.reduceat`` over segments (one pass over ``sum O``)."""
    inst, k = f.instance, f.k
    n = inst.n
    steps = inst.output - 1
    has = steps > 0
    first = (np.cumsum(steps) - steps)[has]
    total = int(steps.sum())
    if total == 0:
        z = np.zeros(n)
        return StepSums(z, z, z, z, z, z, z, z, z, z)
    # S = I + g with g = 1..O-1: position in the flat array plus a per-request offset
    S_int = np.arange(total, dtype=np.int64) + np.repeat((inst.prompt[has] + 1) - first,
                                                         steps[has])
    S = S_int.astype(np.float64)
    dec = (k["k1"] + k["kdr"] - k["kdm"]) + k["kdm"] * S
    ref = k["kpr"] + k["k1"] * S + f._quad_floor(S)
    ent = np.minimum(dec, ref)
    c = k["k0"] + np.minimum(dec + k["kdb"], ref + k["kpb"])
    kv = inst.limits.kv_footprint(S_int).astype(np.float64)

    def s(x):
        out = np.zeros(n)
        out[has] = np.add.reduceat(x, first)
        return out

    D = s(c)
    # tail_g = D - (c_1 + ... + c_g): a running sum restarted at each request's first step
    run = np.cumsum(c)
    base = run[first] - c[first]
    tail = np.repeat(D[has] + base, steps[has]) - run
    return StepSums(D, steps.astype(np.float64), s(ent), s(kv), s(tail), s(ent * tail),
                    s(kv * tail), s(ent * ent), s(kv * kv), s(ent * kv))


def works_and_tails(f: Floors, ss: StepSums, mix) -> tuple[np.ndarray, np.ndarray]:
    """Per request, the fluid work ``w_i`` under the sharing ``mix`` (the same as
    :func:`optsched.bounds.srpt.job_works`) and the tail ``T_i`` of B9."""
    inst, lim = f.instance, f.instance.limits
    h = f.batch_overhead
    lk, lt, lc = mix
    M, C, B = lim.kv_capacity, lim.max_batch_tokens, f.max_entries
    Wp = f.prefill_entry_cost + h * (lk * f.prefill_area / M + lt * inst.prompt / C
                                     + lc * f.kmin / B)
    alpha, beta = h * lk / M, h * (lt / C + lc / B)
    # step work om_g = ent_g + alpha kv_g + beta
    Wd = ss.ent + alpha * ss.kv + beta * ss.count
    om_tail = ss.ent_tail + alpha * ss.kv_tail + beta * ss.tail
    om2 = (ss.ent2 + alpha * alpha * ss.kv2 + beta * beta * ss.count + 2 * alpha * ss.ent_kv
           + 2 * beta * ss.ent + 2 * alpha * beta * ss.kv)
    w = Wp + Wd
    with np.errstate(divide="ignore", invalid="ignore"):
        T = np.where(w > 0, (Wp * (ss.D + Wp / 2) + om_tail + om2 / 2) / w, 0.0)
    return w, T


@register_bound("mbt", "mean-busy-time LP relaxation (preemptive smallest-work-first, "
                "Goemans 1997) plus per-request tails: prefill before the decode chain, each "
                "step's work before the later steps (B9), O(sum O + n log n)",
                objectives=("total-latency",), rank=40, cheap=True)
def mbt_bound(instance, objective: str, budget: Budget) -> BoundResult:
    f = Floors.of(instance)
    ss = step_sums(f)
    a = instance.arrival.astype(np.float64)
    best, best_mix = -np.inf, MBT_MIXES[0]
    wt = {mix: works_and_tails(f, ss, mix) for mix in MBT_MIXES}
    for mix in promising_mixes({m: w for m, (w, _) in wt.items()}, instance.n):
        w, T = wt[mix]
        v = pswf_mean_busy_sum(a, w) + float(T.sum())
        if v > best:
            best, best_mix = v, mix
        if budget.expired:
            break
    return BoundResult(best - float(a.sum()), "mbt", objective,
                       notes=(f"sharing mix (kv, tokens, count) = "
                              f"{tuple(round(x, 3) for x in best_mix)}",))
