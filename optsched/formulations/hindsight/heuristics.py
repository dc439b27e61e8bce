"""List schedules and local search over start slots for the ``hindsight`` formulation
(``formulations/hindsight.md`` (H8), (H21)): the upper bound and warm start of the model."""

from __future__ import annotations

import time
from typing import Any

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


class _Decoder:
    """The arrays (H21a) needs, laid out once for the compiled kernel
    (:mod:`._anneal_kernel`): per-request profiles end to end, the limits, and scratch for a
    horizon long enough that every request finds a slot after all the others."""

    def __init__(self, instance: Instance, objective: str):
        lim = instance.limits
        n, O = instance.n, instance.output.astype(np.int64)
        self.e = earliest_slots(instance)
        self.I, self.O = instance.prompt.astype(np.int64), O
        self.a = instance.arrival.astype(np.float64)
        self.off = np.concatenate([[0], np.cumsum(O)[:-1]]).astype(np.int64)
        self.prof = (np.concatenate([footprint(instance, self.I[i] + np.arange(O[i]))
                                     for i in range(n)]).astype(np.int64)
                     if n else np.zeros(0, np.int64))
        self.limits = (int(lim.kv_capacity), int(lim.max_batch_tokens), int(lim.prefill_budget),
                       -1 if lim.max_batch_size is None else int(lim.max_batch_size))
        slots = int(self.e.max() + O.sum() + 2 * O.max() + 2) if n else 1
        self.scratch = tuple(np.zeros(slots, np.int64) for _ in range(4))
        self.kind = _OBJECTIVE_CODES.get(objective, -1)

    def starts(self, order: np.ndarray) -> np.ndarray:
        from ._anneal_kernel import serial_decode  # lazy: numba compiles on first use

        decode: Any = serial_decode  # a numba dispatcher; its stub's arity is not the kernel's
        out = np.full(self.e.size, -1, np.int64)
        if not decode(np.asarray(order, np.int64), self.e, self.prof, self.off, self.I, self.O,
                      *self.limits, *self.scratch, out):
            raise FormulationError("hindsight: serial schedule generation ran out of horizon "
                                   "(a request whose profile alone exceeds a limit?)")
        return out


#: objectives the compiled search prices itself (:data:`._anneal_kernel.TOTAL_LATENCY`, ...)
_OBJECTIVE_CODES = {"total-latency": 0, "mean-ttft": 1, "makespan": 2}


def serial_starts(instance: Instance, order: np.ndarray) -> np.ndarray:
    """(H21a) Serial schedule generation: requests in ``order``, each at the earliest slot
    ``>= ceil(a_i)`` where its whole profile fits beside the requests already placed (memory
    with block rounding, tokens, prefill and batch size, as in :func:`greedy_starts`).

    Unlike the time-stepping :func:`greedy_starts`, a request placed later in the list may
    start before one placed earlier, so every non-delay arrangement of the list is reachable.
    """
    if instance.n == 0:
        return np.zeros(0, np.int64)
    return _Decoder(instance, "total-latency").starts(order)


#: moves per compiled chunk of (H21b) (the clock and the temperature are read between chunks)
CHUNK = 256
#: default move budget of (H21b) per request, and the annealing runs it is split into
MOVES_PER_REQUEST = 20_000
RUNS = 4


def improve_starts(instance: Instance, objective: str, starts: np.ndarray, *, time_limit: float,
                   max_iters: int | None = None, seed: int = 0,
                   runs: int = RUNS) -> tuple[np.ndarray, int]:
    """(H21) Simulated annealing over priority lists decoded by :func:`serial_starts`.

    ``runs`` annealing runs, each with an equal share of the budget (``time_limit`` seconds or
    ``max_iters`` moves, default :data:`MOVES_PER_REQUEST` ``n``, whichever ends first), each
    from the list ordered by the best start vector found so far: a move swaps two requests or
    moves one to another position; worse lists are accepted with probability
    ``exp(-delta / temp)``, the temperature falling linearly from 2% of the mean per-request
    objective to 0 over the run. The moves run compiled (:mod:`._anneal_kernel`), :data:`CHUNK`
    at a time at one temperature. Returns the best start vector seen (never worse than
    ``starts``) and the number of moves tried. A heuristic: it gives the model its upper bound
    and warm start, and proves nothing.
    """
    n = instance.n
    max_iters = MOVES_PER_REQUEST * n if max_iters is None else max_iters
    best_s = np.asarray(starts, np.int64).copy()
    best = objective_of_starts(instance, objective, best_s)
    if n < 2 or time_limit <= 0 or max_iters <= 0:
        return best_s, 0
    dec = _Decoder(instance, objective)
    if dec.kind < 0:
        raise FormulationError(f"hindsight: unknown objective {objective!r}")
    t0, it = time.perf_counter(), 0
    runs = max(1, min(int(runs), max_iters))
    for r in range(runs):
        left = time_limit - (time.perf_counter() - t0)
        if left <= 0:
            break
        found, val, moves = _anneal(dec, instance, objective, best_s, left / (runs - r),
                                    (max_iters - it) // (runs - r), seed * 1_000_003 + r * 7919)
        it += moves
        if val < best - 1e-9:
            best, best_s = val, found
    return best_s, it


def _anneal(dec: _Decoder, instance: Instance, objective: str, starts: np.ndarray,
            time_limit: float, moves: int, seed: int) -> tuple[np.ndarray, float, int]:
    """One annealing run of (H21b) from the list ordered by ``starts`` (ties: shorter output
    first): the best start vector it decodes, its objective, the moves tried."""
    from ._anneal_kernel import anneal_chunk

    order = np.lexsort((instance.output, starts)).astype(np.int64)
    best_s = dec.starts(order)
    cur = best = objective_of_starts(instance, objective, best_s)
    temp0 = 0.02 * max(cur, 1.0) / instance.n
    t0, it, chunk = time.perf_counter(), 0, 0
    while it < moves:
        frac = max((time.perf_counter() - t0) / time_limit, it / moves)
        if frac >= 1:
            break
        step = min(CHUNK, moves - it)
        cur, best = anneal_chunk(dec.kind, step, temp0 * (1 - frac), seed + chunk, order, cur,
                                 best, best_s, dec.e, dec.prof, dec.off, dec.I, dec.O, dec.a,
                                 *dec.limits, *dec.scratch)
        it, chunk = it + step, chunk + 1
    return best_s, best, it
