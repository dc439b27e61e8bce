"""Prefill-first schedules for mean TTFT, decoded from a priority key.

Mean TTFT counts only when each request's first token is generated (docs/semantics.md
section 5), so a schedule aimed at it can put every first token first and every later token
after. :func:`prefill_first_schedule` builds, from a key (smallest first):

1. **first tokens**, as the arrivals come: when the server is free, the arrived requests
   without a first token are taken in key order; the first one's prompt is prefilled (in
   chunks of ``min(C, P)`` when longer, one batch each), and with ``pack`` the next ones
   join the same batch while the batch stays within ``min(C, P)`` tokens, at most ``pack``
   requests; a request that finishes at its first token (``O = 1``) frees its KV, the others
   keep it; when the next prefills do not fit ``M``, the requests holding KV longest are
   evicted (oldest first) until they do. The clock that decides which requests have arrived
   is the cost model's price of each batch (an idle server waits for the next arrival).
2. **the remaining tokens**: the requests with ``O > 1``, in key order, in groups whose
   whole ``I + O - 1`` fits ``M``; a group's members not still cached are refilled (prompt
   and first token, in chunks, generating the second token) and the group decodes together,
   one token each per batch, the others evicted first.

Phase 1 is the packed prefill-first construction that ``studies/bounds/trace_bounds.py`` measured
beating TTFT-first on the seeded windows, with the order and packing as parameters; the
schedule is hypothetical (it reads output lengths, like the key decoders) and, like every
schedule, judged by :func:`optsched.evaluate` (no stated starts: each batch runs
as early as possible, semantics section 4).
"""

from __future__ import annotations

import heapq

import numpy as np

from ..errors import OptschedError
from ..instance import Instance
from ..policies.simulator import batch_pricer
from ..schedule import Schedule, ScheduleBuilder


class PrefillPhaseError(OptschedError):
    """A request whose prompt alone does not fit ``M`` (the instance forbids it)."""


class _Builder:
    """Batches appended in instance positions; evictions wait for the next batch."""

    def __init__(self, inst: Instance):
        self.b = ScheduleBuilder(ids=inst.ids)
        self.evict: list[int] = []
        self.price = batch_pricer(inst.cost_model)

    def add(self, req: list[int], tok: list[int], cached: list[int] | None = None) -> float:
        """Append a batch (with the pending evictions); the price in seconds of a prefill
        batch whose ``cached`` tokens are given (phase 1's clock), else 0."""
        self.b.add_indexed(req, tok, self.evict)
        self.evict = []
        if cached is None:
            return 0.0
        c = np.asarray(tok, np.int64)
        return float(self.price(c, np.asarray(cached, np.int64), np.zeros(c.size, bool), 0))


def _admit_arrived(pending: list[tuple[float, float, int]], order: list[int], nxt: int,
                   t: float, a: list[float], key: np.ndarray) -> int:
    """Push the requests of ``order[nxt:]`` that have arrived by ``t`` onto the ``pending``
    heap (smallest key, then arrival, first); the index of the first one not yet arrived."""
    while nxt < len(order) and a[order[nxt]] <= t:
        i = order[nxt]
        heapq.heappush(pending, (float(key[i]), a[i], i))
        nxt += 1
    return nxt


def prompt_done(i: int, output: int, kv: int, partial: list[int], held: list[int]) -> int:
    """Request ``i``'s prompt is complete (its first token is out): it is no longer a prefill
    under way; with more tokens to come it is held (its KV ``kv`` stays) for phase 2, else
    its KV is freed. The KV freed (0 or ``kv``)."""
    if i in partial:
        partial.remove(i)
    if output > 1:
        held.append(i)
        return 0
    return kv


def _chunks(n_tok: int, cap: int) -> list[tuple[int, int]]:
    """``(tokens, cached before)`` of a prefill of ``n_tok`` tokens in chunks of ``cap``."""
    return [(min(cap, n_tok - m), m) for m in range(0, n_tok, cap)]


def _first_tokens(inst: Instance, key: np.ndarray, pack: int, out: _Builder) -> list[int]:
    """Phase 1 (module docstring); the requests still holding KV after it, oldest first."""
    lim = inst.limits
    cap = min(lim.max_batch_tokens, lim.prefill_budget)
    fp = lim.kv_footprint
    I, O, a = inst.prompt.tolist(), inst.output.tolist(), inst.arrival.tolist()
    order = np.lexsort((np.arange(inst.n), inst.arrival)).tolist()
    pending: list[tuple[float, float, int]] = []
    held: list[int] = []
    used, t, nxt = 0, 0.0, 0
    while nxt < inst.n or pending:
        if not pending:
            t = max(t, a[order[nxt]])
        nxt = _admit_arrived(pending, order, nxt, t, a, key)
        group = [heapq.heappop(pending)[2]]
        tok, need = I[group[0]], fp(I[group[0]])
        # a packed prompt joins only while the group's prompts fit C, the batch size and M
        # together (each fits M alone: the instance guarantees it)
        while (len(group) < pack and pending and tok + I[pending[0][2]] <= cap
               and len(group) + 1 <= (lim.max_batch_size or inst.n)
               and need + fp(I[pending[0][2]]) <= lim.kv_capacity):
            tok += I[pending[0][2]]
            need += fp(I[pending[0][2]])
            group.append(heapq.heappop(pending)[2])
        while held and used + need > lim.kv_capacity:
            j = held.pop(0)
            used -= fp(I[j])
            out.evict.append(j)
        if used + need > lim.kv_capacity:
            raise PrefillPhaseError(f"prefill-first: request {inst.ids[group[0]]!r}: prompt "
                                    f"does not fit kv_capacity {lim.kv_capacity}")
        if len(group) == 1:
            for c, m in _chunks(I[group[0]], cap):
                t += out.add(group, [c], [m])
        else:
            t += out.add(group, [I[j] for j in group], [0] * len(group))
        for j in group:
            if O[j] > 1:
                held.append(j)
                used += fp(I[j])
    return held


def _first_tokens_chunked(inst: Instance, key: np.ndarray, chunk: int,
                          out: _Builder) -> list[int]:
    """Phase 1 preemptive (module docstring, ``chunk``): one chunk of at most ``chunk``
    prompt tokens a batch, of the arrived request with the smallest key, so an arrival with a
    smaller key overtakes a long prefill under way at the next chunk. When a chunk does not
    fit ``M``, the requests holding KV are evicted, finished prefills oldest first, then
    prefills under way (which start over); the requests still holding KV after it."""
    lim = inst.limits
    step = min(chunk, lim.max_batch_tokens, lim.prefill_budget)
    fp = lim.kv_footprint
    I, O, a = inst.prompt.tolist(), inst.output.tolist(), inst.arrival.tolist()
    order = np.lexsort((np.arange(inst.n), inst.arrival)).tolist()
    pending: list[tuple[float, float, int]] = []
    held: list[int] = []
    done = [0] * inst.n  # prompt tokens prefilled (cached) so far
    partial: list[int] = []  # prefills under way, oldest first
    used, t, nxt = 0, 0.0, 0
    while nxt < inst.n or pending:
        if not pending:
            t = max(t, a[order[nxt]])
        nxt = _admit_arrived(pending, order, nxt, t, a, key)
        i = pending[0][2]
        c = min(step, I[i] - done[i])
        need = fp(done[i] + c) - fp(done[i])
        while used + need > lim.kv_capacity and (held or len(partial) > (i in partial)):
            j = held.pop(0) if held else next(q for q in partial if q != i)
            if j in partial:
                partial.remove(j)
                used -= fp(done[j])
                done[j] = 0
            else:
                used -= fp(I[j])
            out.evict.append(j)
        if used + need > lim.kv_capacity:
            raise PrefillPhaseError(f"prefill-first: request {inst.ids[i]!r}: prompt does not "
                                    f"fit kv_capacity {lim.kv_capacity}")
        t += out.add([i], [c], [done[i]])
        used += need
        done[i] += c
        if done[i] < I[i]:
            if i not in partial:
                partial.append(i)
            continue
        heapq.heappop(pending)
        used -= prompt_done(i, O[i], fp(I[i]), partial, held)
    return held


def _rest(inst: Instance, key: np.ndarray, held: list[int], out: _Builder) -> None:
    """Phase 2 (module docstring): the remaining tokens, in groups that fit ``M``."""
    lim = inst.limits
    cap = min(lim.max_batch_tokens, lim.prefill_budget)
    fp = lim.kv_footprint
    I, O = inst.prompt.tolist(), inst.output.tolist()
    todo = [i for i in np.lexsort((np.arange(inst.n), inst.arrival, key)).tolist() if O[i] > 1]
    cached = set(held)
    k = 0
    while k < len(todo):
        group: list[int] = []
        mem = 0
        while (k < len(todo) and mem + fp(I[todo[k]] + O[todo[k]] - 1) <= lim.kv_capacity
               and len(group) < min(lim.max_batch_tokens, lim.max_batch_size or inst.n)):
            group.append(todo[k])
            mem += fp(I[todo[k]] + O[todo[k]] - 1)
            k += 1
        if not group:  # the instance guarantees I + O - 1 <= M: never empty
            raise PrefillPhaseError("prefill-first: a request does not fit kv_capacity")
        members = set(group)
        out.evict += [j for j in cached if j not in members]
        cached &= members
        left = {i: O[i] - 1 for i in group}
        for i in group:
            if i not in cached:  # refill the prompt and the first token: generates token 2
                for c, _ in _chunks(I[i] + 1, cap):
                    out.add([i], [c])
                left[i] -= 1
        live = [i for i in group if left[i] > 0]
        while live:
            out.add(live, [1] * len(live))
            for i in live:
                left[i] -= 1
            live = [i for i in live if left[i] > 0]
        cached = set()  # every member finished: its KV is freed


def prefill_first_schedule(inst: Instance, key: np.ndarray, pack: int = 1,
                           chunk: int = 0) -> Schedule:
    """The prefill-first schedule of ``key`` (module docstring): first tokens in key order as
    the arrivals come, up to ``pack`` prompts per batch (or, with ``chunk`` > 0, preemptive:
    one chunk of at most ``chunk`` tokens a batch), then the remaining tokens."""
    if pack < 1 or chunk < 0:
        raise PrefillPhaseError(f"prefill-first: pack must be >= 1 and chunk >= 0, got "
                                f"pack {pack}, chunk {chunk}")
    key = np.asarray(key, np.float64)
    out = _Builder(inst)
    held = (_first_tokens_chunked(inst, key, chunk, out) if chunk
            else _first_tokens(inst, key, pack, out))
    _rest(inst, key, held, out)
    return out.b.build()


__all__ = ["PrefillPhaseError", "prefill_first_schedule"]
