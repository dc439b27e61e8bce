"""Prefill-first SRPT with cut-to-arrival chunks, for mean TTFT (``docs/results/bounds.md``,
"Mean TTFT: which side").

Mean TTFT depends only on when each prompt's last chunk runs (docs/semantics.md section 5:
the entry that completes the prompt generates the first token), a request may be evicted
after it and refilled later (section 3), and a batch without decode entries is allowed, so
the first tokens can all come first and every later token after them
(:mod:`optsched.search.prefill_phase`, phase 2). What is left is a *prefill-only* problem on
one server: batches of prompt chunks, release dates, batch time from the cost model.

Its preemptive single-server relaxation (bound ``srpt``, ``formulations/bounds.md`` B7) is
solved by shortest remaining processing time. This decoder imitates that schedule, paying
what batching costs for it: the prompt with the fewest remaining tokens runs; the schedule
is offline, so when an arrival would overtake it under SRPT (its prompt plus ``margin``
tokens is shorter than what would remain), the running chunk is cut to end at that arrival
(the most tokens whose batch, priced by the cost model, ends by then); a cut shorter than
``min_chunk`` tokens is not worth a batch's fixed time, so the server waits for the arrival
instead. Without a cut the prompt runs in chunks of ``C`` tokens. KV of finished prompts is
kept until memory is needed (evicted oldest first, like the other prefill-first decoders).
Like every schedule, the result is judged by :func:`optsched.evaluate` (no stated
starts: each batch runs as early as possible, semantics section 4).
"""

from __future__ import annotations

import heapq

import numpy as np

from ..instance import Instance
from ..schedule import Schedule
from .prefill_phase import PrefillPhaseError, _Builder, _rest, prompt_done


def _fit_tokens(price, done: int, cap: int, budget: float) -> int:
    """The most prompt tokens (at most ``cap``) of one chunk after ``done`` cached tokens
    whose batch takes at most ``budget`` seconds (batch time grows with tokens), else 0."""
    lo, hi = 0, cap
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if price(mid, done) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _chunk_for(
    i: int, t: float, rem: int, done: int, cap: int, arrivals, price, margin: int, min_chunk: int
) -> tuple[int, float | None]:
    """Tokens of the next chunk of prompt ``i`` at time ``t``: its full chunk unless an
    arrival before that chunk ends would overtake it under SRPT; then the chunk that ends by
    that arrival, or ``(0, arrival time)`` when that chunk is shorter than ``min_chunk``."""
    full = min(rem, cap)
    end = t + price(full, done)
    for aj, pj in arrivals:
        if aj >= end:
            break
        c = _fit_tokens(price, done, full, aj - t)
        if pj + margin < rem - c:
            return (c, None) if c >= min_chunk else (0, aj)
    return full, None


def _packed(
    pending: list, I: list[int], fp, room: int, mem: int, price, h: float, pack: float, most: int
) -> list[int]:
    """Whole prompts (not started, shortest first) popped from ``pending`` to join a batch
    that completes a prompt: the ``k``-th joins while its own time ``w`` delays the ``k``
    prompts finishing in the batch before it less than the fixed time ``h`` it saves each
    prompt still waiting, itself included (``pack`` scales that saving); at most ``most``."""
    out: list[int] = []
    while len(out) < most and pending and pending[0][0] == I[pending[0][2]]:
        j = pending[0][2]
        w = price(I[j], 0) - h
        if I[j] > room or fp(I[j]) > mem or pack * h * len(pending) <= w * (len(out) + 1):
            break
        heapq.heappop(pending)
        out.append(j)
        room -= I[j]
        mem -= fp(I[j])
    return out


def _first_tokens_srpt(
    inst: Instance, out: _Builder, margin: int, min_chunk: int, pack: float = 0.0
) -> list[int]:
    """Phase 1 (module docstring); the requests still holding KV after it, oldest first."""
    lim = inst.limits
    cap = min(lim.max_batch_tokens, lim.prefill_budget)
    fp = lim.kv_footprint
    I, O, a = inst.prompt.tolist(), inst.output.tolist(), inst.arrival.tolist()
    order = np.lexsort((np.arange(inst.n), inst.arrival)).tolist()
    zero = np.zeros(1, bool)

    def price(c: int, m: int) -> float:
        return out.price(np.array([c], np.int64), np.array([m], np.int64), zero, 0)

    h = max(0.0, 2 * price(1, 0) - price(2, 0))  # a batch's fixed time (k0 + kpb + kpr)
    most = lim.max_batch_size or inst.n
    done = [0] * inst.n
    pending: list[tuple[int, float, int]] = []  # (remaining tokens, arrival, request)
    held: list[int] = []
    partial: list[int] = []
    used, t, nxt = 0, 0.0, 0
    while nxt < inst.n or pending:
        if not pending:
            t = max(t, a[order[nxt]])
        while nxt < inst.n and a[order[nxt]] <= t:
            j = order[nxt]
            heapq.heappush(pending, (I[j], a[j], j))
            nxt += 1
        rem, _, i = pending[0]
        later = ((a[j], I[j]) for j in order[nxt:])
        c, wait = _chunk_for(i, t, rem, done[i], cap, later, price, margin, min_chunk)
        if wait is not None:
            t = wait
            continue
        need = fp(done[i] + c) - fp(done[i])
        while used + need > lim.kv_capacity and (held or len(partial) > (i in partial)):
            j = held.pop(0) if held else next(q for q in partial if q != i)
            if j in partial:  # a prefill under way starts over
                partial.remove(j)
                used -= fp(done[j])
                done[j] = 0
                pending = [(I[q], aq, q) if q == j else (r, aq, q) for r, aq, q in pending]
                heapq.heapify(pending)
            else:
                used -= fp(I[j])
            out.evict.append(j)
        if used + need > lim.kv_capacity:
            raise PrefillPhaseError(
                f"prefill-srpt: request {inst.ids[i]!r}: prompt does not fit kv_capacity {lim.kv_capacity}"
            )
        group = [i]
        if pack and c == rem:
            heapq.heappop(pending)
            group += _packed(pending, I, fp, cap - c, lim.kv_capacity - used - need, price, h, pack, most - 1)
            for j in group[1:]:
                need += fp(I[j])
            heapq.heappush(pending, (rem, a[i], i))
        t += out.add(group, [c] + [I[j] for j in group[1:]], [done[i]] + [0] * (len(group) - 1))
        used += need
        done[i] += c
        if done[i] < I[i]:
            heapq.heapreplace(pending, (rem - c, a[i], i))
        else:
            heapq.heappop(pending)
        for j in group[1:]:  # whole prompts not started: never in ``partial``
            done[j] = I[j]
            used -= prompt_done(j, O[j], fp(I[j]), partial, held)
        if done[i] < I[i]:
            if i not in partial:
                partial.append(i)
            continue
        used -= prompt_done(i, O[i], fp(I[i]), partial, held)
    return held


#: the (margin, pack) pairs ``optsched improve`` tries for mean TTFT, most useful first (the
#: grid of ``studies/bounds/ttft_side.py``, ``min_chunk`` = :data:`GRID_MIN_CHUNK`; its best cells
#: on the seeded windows: margin 0-1000, pack 0-2)
GRID = tuple((m, p) for p in (0.0, 1.0, 2.0, 4.0) for m in (0, 200, 1000, 2000, 3000))
GRID_MIN_CHUNK = 32


def prefill_srpt_schedule(
    inst: Instance, margin: int = 0, min_chunk: int = 64, pack: float = 0.0
) -> Schedule:
    """First tokens by SRPT on remaining prompt tokens with chunks cut to end at the arrival
    that overtakes (module docstring), then the remaining tokens in key order of prompt
    length (:mod:`optsched.search.prefill_phase` phase 2)."""
    if margin < 0 or min_chunk < 1:
        raise PrefillPhaseError(
            f"prefill-srpt: margin must be >= 0 and min_chunk >= 1, got "
            f"margin {margin}, min_chunk {min_chunk}"
        )
    out = _Builder(inst)
    held = _first_tokens_srpt(inst, out, margin, min_chunk, pack)
    _rest(inst, inst.prompt.astype(np.float64), held, out)
    return out.b.build()


__all__ = ["prefill_srpt_schedule"]
