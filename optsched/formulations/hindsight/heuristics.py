"""List schedules and local search over start slots for the ``hindsight`` formulation
(``formulations/hindsight.md`` (H8), (H21)): the upper bound and warm start of the model."""

from __future__ import annotations

import math
import time

import numpy as np

from ...instance import Instance
from ..base import FormulationError
from .floors import earliest_slots, footprint
from .starts import objective_of_starts


class _SlotLoad:
    """What the requests placed so far use per slot: KV (block-rounded), tokens, prefill and
    batch size, the limits (H4)/(H17) every list schedule checks. Tokens never bind when
    ``C >= M`` (a batch's tokens are at most the KV it leaves), nor prefill when ``P >= min(C, M)``."""

    def __init__(self, instance: Instance, slots: int):
        lim = instance.limits
        self.instance = instance
        self.M, self.C, self.P, self.B = (lim.kv_capacity, lim.max_batch_tokens, lim.prefill_budget,
                                          lim.max_batch_size)
        self.kv, self.tok, self.pre, self.cnt = (np.zeros(slots, np.int64) for _ in range(4))

    def fits(self, i: int, lo: int, hi: int) -> np.ndarray:
        """For each start slot ``lo..hi``: does request ``i`` fit beside the placed requests?"""
        from numpy.lib.stride_tricks import sliding_window_view as windows

        inst = self.instance
        I, o = int(inst.prompt[i]), int(inst.output[i])
        prof = footprint(inst, I + np.arange(o))
        ok = (windows(self.kv[lo:hi + o], o) + prof).max(axis=1) <= self.M
        if self.C < self.M:
            ok &= self.tok[lo:hi + 1] + I <= self.C
            if o > 1:
                ok &= windows(self.tok[lo + 1:hi + o], o - 1).max(axis=1) + 1 <= self.C
        if self.P < min(self.C, self.M):
            ok &= self.pre[lo:hi + 1] + I <= self.P
        if self.B is not None:
            ok &= windows(self.cnt[lo:hi + o], o).max(axis=1) + 1 <= self.B
        return ok

    def place(self, i: int, t: int) -> None:
        inst = self.instance
        I, o = int(inst.prompt[i]), int(inst.output[i])
        self.kv[t:t + o] += footprint(inst, I + np.arange(o))
        self.tok[t] += I
        self.tok[t + 1:t + o] += 1
        self.pre[t] += I
        self.cnt[t:t + o] += 1


def greedy_starts(instance: Instance, order: str = "mcsf", skip: bool = False) -> np.ndarray:
    """A feasible start vector by list scheduling in start-time space (no model needed).

    ``order="mcsf"``: the paper's Algorithms 1-2 (MC-SF): at each slot, the arrived waiting
    requests in order of output length (ties: arrival, id) are added while their whole future
    memory profile fits at every later slot (the check of the paper's eq. (1)); the scan stops
    at the first that does not fit (the paper adds requests "in this order"), exactly as the
    ``mcsf`` policy does. ``"fcfs"``: arrival order with the same check. ``skip=True`` passes
    over a request that does not fit and tries the next ones: not the paper's rule, but a
    further list schedule for the upper bound (H8). Token, prefill and batch-size limits are
    checked per slot as well.
    """
    n = instance.n
    if n == 0:
        return np.zeros(0, np.int64)
    O = instance.output
    e = earliest_slots(instance)
    H = int(e.max() + O.sum() + 1)
    load = _SlotLoad(instance, H + int(O.max()) + 1)
    key = (O, e, np.arange(n)) if order == "mcsf" else (np.arange(n), e)
    pri = np.lexsort(key[::-1])  # primary key first in `key`
    starts = np.full(n, -1, np.int64)
    waiting = list(pri)
    t = 0
    while waiting:
        nxt = []
        for k, i in enumerate(waiting):
            if e[i] > t:
                nxt.append(i)
            elif load.fits(i, t, t)[0]:
                starts[i] = t
                load.place(i, t)
            elif skip:
                nxt.append(i)
            else:  # the paper's rule: stop at the first arrived request that does not fit
                nxt += waiting[k:]
                break
        waiting = nxt
        t += 1
        if t > H:  # pragma: no cover - every request fits alone once the cache drains
            raise FormulationError("hindsight: greedy list scheduling did not terminate")
    return starts


def serial_starts(instance: Instance, order: np.ndarray) -> np.ndarray:
    """(H21a) Serial schedule generation: requests in ``order``, each at the earliest slot
    ``>= ceil(a_i)`` where its whole profile fits beside the requests already placed (memory
    with block rounding, tokens, prefill and batch size, as in :func:`greedy_starts`).

    Unlike the time-stepping :func:`greedy_starts`, a request placed later in the list may
    start before one placed earlier, so every non-delay arrangement of the list is reachable.
    """
    n = instance.n
    O = instance.output
    e = earliest_slots(instance)
    H = int(e.max() + O.sum() + O.max() + 1) if n else 1
    load = _SlotLoad(instance, H)
    starts = np.full(n, -1, np.int64)
    for i in np.asarray(order, np.int64):
        hit = np.flatnonzero(load.fits(i, int(e[i]), H - int(O[i])))
        if hit.size == 0:  # pragma: no cover - H leaves room after everything placed
            raise FormulationError("hindsight: serial schedule generation ran out of horizon")
        starts[i] = int(e[i] + hit[0])
        load.place(i, int(starts[i]))
    return starts


def improve_starts(instance: Instance, objective: str, starts: np.ndarray, *, time_limit: float,
                   max_iters: int | None = None, seed: int = 0) -> tuple[np.ndarray, int]:
    """(H21) Simulated annealing over priority lists decoded by :func:`serial_starts`.

    Starts from the list ordered by ``starts``; a move swaps two requests or moves one to
    another position; worse lists are accepted with probability ``exp(-delta / temp)``, the
    temperature falling linearly from 2% of the mean per-request objective to 0 over the budget
    (``time_limit`` seconds or ``max_iters`` moves, default ``500 n``, whichever ends first).
    Returns the best start
    vector seen (never worse than ``starts``) and the number of moves tried. A heuristic: it
    gives the model its upper bound and warm start, and proves nothing.
    """
    n = instance.n
    max_iters = 500 * n if max_iters is None else max_iters
    best_s = np.asarray(starts, np.int64)
    best = objective_of_starts(instance, objective, best_s)
    if n < 2 or time_limit <= 0 or max_iters <= 0:
        return best_s, 0
    rng = np.random.default_rng(seed)
    order = np.lexsort((instance.output, best_s))
    cur_s = serial_starts(instance, order)
    cur = objective_of_starts(instance, objective, cur_s)
    if cur < best:
        best, best_s = cur, cur_s
    temp0 = 0.02 * max(cur, 1.0) / n
    t0 = time.perf_counter()
    it = 0
    while it < max_iters:
        frac = max((time.perf_counter() - t0) / time_limit, it / max_iters)
        if frac >= 1:
            break
        it += 1
        cand = order.copy()
        a, b = (int(v) for v in rng.integers(0, n, 2))
        if rng.random() < 0.5:
            cand[a], cand[b] = cand[b], cand[a]
        else:
            cand = np.insert(np.delete(cand, a), b, cand[a])
        cs = serial_starts(instance, cand)
        v = objective_of_starts(instance, objective, cs)
        temp = temp0 * (1 - frac)
        if v <= cur or (temp > 0 and rng.random() < math.exp(-(v - cur) / temp)):
            order, cur = cand, v
            if v < best - 1e-9:
                best, best_s = v, cs
    return best_s, it
