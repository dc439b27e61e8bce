"""Bound ``srpt``: a preemptive single-server relaxation (``formulations/bounds.md`` B7).

Split every batch's duration among its entries: each entry keeps its own entry terms, and
the per-batch part (at least ``h = k0 + min(kpb, kdb)``; ``k0 + kpb`` for a batch with a
prefill entry) is shared by a fixed rule whose shares sum to at most 1 in every batch --
a mix ``lam_kv * (KV after) / M + lam_tok * c / C + lam_cnt / max_entries``. Request ``i``
then receives at least ``w_i`` time (its floors F1-F4 under the rule), in disjoint pieces
after it arrives and before it completes: a preemptive one-machine schedule of jobs with
release ``a_i`` and work ``w_i``. Shortest-remaining-processing-time is optimal for
``1 | r_j, pmtn | sum C_j`` (Schrage 1968; Baker 1974, section 2), so its total
completion time is a lower bound. Every mix gives a valid bound; the best is kept (above
2,000 requests only the two most promising by an O(n log n) proxy get a heap pass).
For mean TTFT the same holds with the prefill floors (tokens shared over ``P``).
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from ..solve_types import Objective
from .base import BoundResult, Budget, register_bound
from .floors import Floors

#: (lam_kv, lam_tok, lam_cnt) mixes tried; each gives a valid bound
MIXES = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0), (0.5, 0.5, 0.0),
         (0.5, 0.0, 0.5), (0.0, 0.5, 0.5), (1 / 3, 1 / 3, 1 / 3), (0.8, 0.1, 0.1))


def srpt_total_completion(release: np.ndarray, work: np.ndarray) -> float:
    """Sum of completion times of preemptive SRPT on one machine (optimal for
    ``1 | r_j, pmtn | sum C_j``)."""
    return float(srpt_completions(release, work).sum())


def srpt_completions(release: np.ndarray, work: np.ndarray, until: float = math.inf
                     ) -> np.ndarray:
    """Completion times of preemptive SRPT on one machine, sorted, up to ``until``. At every
    time SRPT has completed at least as many jobs as any preemptive schedule (bounds.md B7),
    so its ``k``-th completion is a lower bound on the ``k``-th completion of any of them."""
    order = np.argsort(release, kind="stable")
    r = release[order].tolist()
    w = work[order].tolist()
    done: list[float] = []
    n, k, t = len(r), 0, -math.inf
    heap: list[float] = []
    while k < n or heap:
        if not heap:
            t = max(t, r[k])
        while k < n and r[k] <= t:
            heapq.heappush(heap, w[k])
            k += 1
        rem = heapq.heappop(heap)
        nxt = r[k] if k < n else math.inf
        if t + rem <= min(nxt, until):
            t += rem
            done.append(t)
        elif until <= nxt:  # the job in service would end after ``until``: stop there
            break
        else:  # run until the next release, then reconsider
            heapq.heappush(heap, rem - (nxt - t))
            t = nxt
    return np.array(done)



def prefill_indicative(instance) -> tuple[float, float]:
    """Two *indicative* mean-TTFT values of the prefill-only problem, **not** bounds:
    preemptive SRPT (:func:`srpt_completions`) with each prompt's work floor
    (``Floors.prefill_entry_cost``) and no batch fixed time (what this rung sees, minus its
    shared fixed time), and with one whole fixed time ``k0 + kpb`` per prompt (a schedule that
    batches every prompt alone and preempts for free); docs/results/bounds.md, "Mean TTFT: which
    side", ``studies/bounds/ttft_side.py``."""
    f = Floors.of(instance)
    h = f.k["k0"] + f.k["kpb"]
    out = []
    for w in (f.prefill_entry_cost, f.prefill_entry_cost + h):
        done = srpt_completions(instance.arrival, np.asarray(w, np.float64))
        out.append(float((done.sum() - instance.arrival.sum()) / instance.n))
    return out[0], out[1]

#: above this many requests only the most promising mixes get a heap pass (each is valid,
#: so any subset is; on the full traces a pass costs ~0.1 s)
ALL_MIXES_UP_TO = 2000
PROMISING = 2


def promising_mixes(works: dict[tuple, np.ndarray], n: int) -> list[tuple]:
    """The mixes worth a one-machine pass: all of them for small instances, else the
    :data:`PROMISING` with the largest total completion time of shortest-work-first with
    every release at 0 (an O(n log n) proxy of the pass; only the choice depends on it)."""
    if n <= ALL_MIXES_UP_TO:
        return list(works)
    proxy = {mix: float(np.cumsum(np.sort(w)).sum()) for mix, w in works.items()}
    return sorted(works, key=lambda m: -proxy[m])[:PROMISING]


def job_works(f: Floors, objective: str, mix) -> np.ndarray:
    """Per request, the least time the sharing rule ``mix`` gives it (B7)."""
    lim, k = f.instance.limits, f.k
    lk, lt, lc = mix
    if objective == Objective.MEAN_TTFT:
        h = k["k0"] + k["kpb"]
        share = (lk * f.prefill_area / lim.kv_capacity
                 + lt * f.computed_prompt / lim.prefill_budget + lc * f.kmin / f.max_entries)
        return f.prefill_entry_cost + h * share
    share = (lk * f.area / lim.kv_capacity + lt * f.tokens / lim.max_batch_tokens
             + lc * f.own_batches / f.max_entries)
    return f.entry_cost + f.batch_overhead * share


def srpt_value(instance, objective: str, budget: Budget, f: Floors, own: np.ndarray,
               name: str) -> BoundResult:
    """B7 for floors ``f`` and per-request completion floors ``own``: the best of the
    promising sharing mixes' SRPT completions, each k-th at least the k-th own floor."""
    own = np.sort(own)
    best, best_mix = -np.inf, None
    works = {mix: job_works(f, objective, mix) for mix in MIXES}
    for mix in promising_mixes(works, instance.n):
        done = srpt_completions(instance.arrival, works[mix])
        total = float(np.maximum(done, own).sum())  # k-th completion >= both k-th floors
        if total > best:
            best, best_mix = total, mix
        if budget.expired:
            break
    if best_mix is None:  # MIXES is non-empty and every total is finite
        raise RuntimeError(f"{name} bound: no sharing mix was evaluated")
    v = best - float(instance.arrival.sum())
    if objective == Objective.MEAN_TTFT:
        v /= instance.n
    return BoundResult(v, name, objective, notes=(f"sharing mix (kv, tokens, count) = "
                                                  f"{tuple(round(x, 3) for x in best_mix)}",))


@register_bound("srpt", "preemptive shortest-remaining-work on one server with per-request "
                "work from shared batch time (B7), O(n log n)",
                objectives=("total-latency", "mean-ttft"), rank=30, cheap=True)
def srpt_bound(instance, objective: str, budget: Budget) -> BoundResult:
    from .request import request_floors

    return srpt_value(instance, objective, budget, Floors.of(instance),
                      request_floors(instance, objective), "srpt")
