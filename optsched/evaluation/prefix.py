"""The evaluator's prefix-reuse rules (docs/semantics.md section 6, "Prefix reuse"): the
resident blocks, hits, drops and the shared memory, replayed batch by batch.

:func:`optsched.evaluation.evaluator.evaluate` replays every request's ``S``, ``m``, ``g`` in closed form
(a hit advances ``m`` like processed tokens, so the closed form holds with ``hit + c`` in
place of ``c``). What it cannot do in closed form is the one piece of state shared between
requests: the set ``R`` of resident blocks and how many requests hold each. This module walks
the few events that change it, in batch order, and within a batch in the order of the rules:

0. the blocks of requests that finished in the previous batch are released (rule 5);
1. evictions release the evicted requests' held blocks (rule 1);
2. drops remove unheld resident blocks (rule 2: ``DUPLICATE_DROP``, ``DROP_NOT_RESIDENT``,
   ``DROP_REFERENCED``, each reported and the drop ignored);
3. hits hold resident blocks (rule 3: ``HIT_INVALID``, ``HIT_NOT_RESIDENT``, reported and
   applied as given), then the blocks the computed tokens complete join ``R`` (once).

Only events that change a request's held blocks ``f(m) = min(P, floor(m / b))`` matter, so
decode entries (past the prompt) never enter the walk. It returns the resident and cached
block counts after every batch; the evaluator adds ``b`` times the resident count to the
requests' private KV (rule 4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..instance import Instance
from ..prefix import PrefixIndex
from ..schedule import Schedule


class Reporter(Protocol):
    """The evaluator's violation collector (``optsched.evaluation.evaluator._Violations``)."""

    def add_many(self, code: str, batches: Any, reqs: Any, make_msg: Any,
                 names: Any = None) -> None: ...


@dataclass(frozen=True)
class BlockEffects:
    """Per batch: resident blocks and cached (resident, held by nobody) blocks after it, and
    the drops that took effect."""

    resident: np.ndarray
    cached: np.ndarray
    dropped: np.ndarray


# event phases within a batch (module docstring)
_RELEASE_FINISHED, _EVICT, _DROP, _HIT, _COMPLETE = range(5)


def private_tokens(index: PrefixIndex | None, req: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``m - b * f(m)``: a request's cached tokens outside its held blocks (rule 4)."""
    if index is None:
        return m
    return m - index.block_size * index.held(req, m)


def _events(index: PrefixIndex, ev_req, ev_batch, m0, hit, m2, evicted, finish, live
            ) -> list[tuple[int, int, int, int, int, int]]:
    """The events of the walk, sorted: ``(batch, phase, order, request, lo, hi)`` with
    ``[lo, hi)`` the tokens (hit, completion) or the held blocks (release)."""
    held0 = index.held(ev_req, m0)
    m1 = m0 + hit
    held1 = index.held(ev_req, m1)
    held2 = index.held(ev_req, m2)
    out: list[tuple[int, int, int, int, int, int]] = []
    for k in np.flatnonzero(evicted & (held0 > 0)).tolist():
        out.append((int(ev_batch[k]), _EVICT, k, int(ev_req[k]), 0, int(held0[k])))
    for k in np.flatnonzero(live & (hit > 0)).tolist():
        out.append((int(ev_batch[k]), _HIT, k, int(ev_req[k]), int(m0[k]), int(m1[k])))
    for k in np.flatnonzero(live & (held2 > held1)).tolist():
        out.append((int(ev_batch[k]), _COMPLETE, k, int(ev_req[k]), int(held1[k]), int(held2[k])))
    for k in np.flatnonzero(finish & (held2 > 0)).tolist():
        out.append((int(ev_batch[k]) + 1, _RELEASE_FINISHED, k, int(ev_req[k]), 0, int(held2[k])))
    return out


class _Walk:
    """The resident set and hold counts, with the rules that change them."""

    def __init__(self, index: PrefixIndex, V: Reporter, req_ids: tuple[str, ...]):
        self.ix = index
        self.V = V
        self.ids = req_ids
        self.resident = np.zeros(index.n_blocks, bool)
        self.holds = np.zeros(index.n_blocks, np.int64)
        self.n_res = 0
        self.n_held = 0

    def release(self, i: int, hi: int) -> None:
        for x in self.ix.blocks_of(i)[:hi].tolist():
            self.holds[x] -= 1
            if self.holds[x] == 0:
                self.n_held -= 1

    def hold(self, x: int) -> None:
        if self.holds[x] == 0:
            self.n_held += 1
        self.holds[x] += 1

    def add(self, x: int) -> None:
        if not self.resident[x]:
            self.resident[x] = True
            self.n_res += 1

    def drop(self, j: int, x: int, raw: int, seen: set[int]) -> bool:
        """Rule 2 for block ``raw`` (dense ``x``, -1 when no request lists it)."""
        why = code = ""
        if raw in seen:
            code, why = "DUPLICATE_DROP", f"block {raw} is listed twice among the batch's drops"
        elif x < 0 or not self.resident[x]:
            code = "DROP_NOT_RESIDENT"
            why = f"drops block {raw}, which is not resident" + (
                " (no request lists it)" if x < 0 else "")
        elif self.holds[x] > 0:
            code = "DROP_REFERENCED"
            why = f"drops block {raw}, which {int(self.holds[x])} request(s) hold"
        seen.add(raw)
        if code:
            self.V.add_many(code, [j], None, lambda _k: why)
            return False
        self.resident[x] = False
        self.n_res -= 1
        return True

    def hit(self, j: int, i: int, m0: int, m1: int) -> None:
        """Rule 3, the hit of request ``i`` from ``m0`` to ``m1`` tokens."""
        b = self.ix.block_size
        H = int(self.ix.shareable[i])
        if m0 % b or (m1 - m0) % b or m1 > H * b:
            self.V.add_many("HIT_INVALID", [j], [i], lambda _k: (
                f"hit of {m1 - m0} tokens at {m0} cached tokens is not whole blocks of {b} from "
                f"a block boundary within the request's {H} shareable blocks ({H * b} tokens)"))
        blocks = self.ix.blocks_of(i)
        lo, hi = int(self.ix.held(i, m0)), int(self.ix.held(i, m1))
        missing = [p for p in range(lo, hi) if not self.resident[blocks[p]]]
        if missing:
            raw = [int(self.ix.ids[blocks[p]]) for p in missing]
            self.V.add_many("HIT_NOT_RESIDENT", [j], [i], lambda _k: (
                f"hit covers block {raw[0]} (position {missing[0]})"
                + (f" and {len(raw) - 1} more" if len(raw) > 1 else "")
                + ", not resident when the batch's entries start"))
        for p in range(lo, hi):
            self.add(int(blocks[p]))
            self.hold(int(blocks[p]))

    def complete(self, i: int, lo: int, hi: int) -> None:
        for x in self.ix.blocks_of(i)[lo:hi].tolist():
            self.add(x)
            self.hold(x)


def replay_blocks(inst: Instance, s: Schedule, nb: int, ev_req: np.ndarray,
                  ev_batch: np.ndarray, m0: np.ndarray, hit: np.ndarray, m2: np.ndarray,
                  evicted: np.ndarray, finish: np.ndarray, live: np.ndarray, V: Reporter
                  ) -> BlockEffects:
    """Rules 1-3 and 5 of "Prefix reuse" on the replay's events (``m0`` before the event,
    ``hit`` its hit tokens, ``m2`` after it; masks of the evictions that take effect, the
    finishing entries and the live entries). Returns the block counts after each batch."""
    index = inst.prefix_index
    dropped = np.zeros(nb, np.int64)
    if index is None:
        index = empty_index(inst)
    events = _events(index, ev_req, ev_batch, m0, hit, m2, evicted, finish, live)
    drop_b = s.batch_of_drop
    drop_x = index.dense(s.drop_block)
    events += [(int(drop_b[k]), _DROP, k, -1, int(drop_x[k]), int(s.drop_block[k]))
               for k in range(s.drop_block.size)]
    events.sort()
    w = _Walk(index, V, inst.ids)
    seen: set[int] = set()
    last = -1
    rec: list[tuple[int, int, int]] = []  # (batch, resident, cached) after the batch's events
    for j, phase, _, i, lo, hi in events:
        if j != last:
            if 0 <= last < nb:
                rec.append((last, w.n_res, w.n_res - w.n_held))
            last, seen = j, set()
        if phase in (_RELEASE_FINISHED, _EVICT):
            w.release(i, hi)
        elif phase == _DROP:
            dropped[j] += w.drop(j, lo, hi, seen)
        elif phase == _HIT:
            w.hit(j, i, lo, hi)
        else:
            w.complete(i, lo, hi)
    if 0 <= last < nb:
        rec.append((last, w.n_res, w.n_res - w.n_held))
    resident, cached = _forward_fill(rec, nb)
    return BlockEffects(resident, cached, dropped)


def _forward_fill(rec: list[tuple[int, int, int]], nb: int) -> tuple[np.ndarray, np.ndarray]:
    """Per batch the counts of the latest recorded batch at or before it (0 before the first)."""
    if not rec:
        return np.zeros(nb, np.int64), np.zeros(nb, np.int64)
    a = np.array(rec, dtype=np.int64)
    mark = np.full(nb, -1, np.int64)
    mark[a[:, 0]] = np.arange(len(rec))
    at = np.maximum.accumulate(mark)
    ok = at >= 0
    res = np.where(ok, a[np.maximum(at, 0), 1], 0)
    cac = np.where(ok, a[np.maximum(at, 0), 2], 0)
    return res, cac


def empty_index(inst: Instance) -> PrefixIndex:
    """The index of an instance without block ids (hits are then invalid, drops name no
    resident block)."""
    from ..prefix import build_index

    return build_index([()] * inst.n, inst.prompt, inst.limits.block_size)


__all__ = ["BlockEffects", "empty_index", "private_tokens", "replay_blocks"]
