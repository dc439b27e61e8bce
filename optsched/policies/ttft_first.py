"""TTFT-first: prefill every request as soon as it arrives, evict as memory requires, finish
later (the schedule side of the mean-TTFT bound).

Why: with recompute preemption (docs/semantics.md section 3) a request's first token needs
only its prompt's prefill. A policy that admits arrivals only when memory is free (vLLM,
SARATHI: "a waiting candidate never evicts", ``unified.py``) makes a new request wait for
running decodes to finish; mean TTFT then carries the decode queue. Here a first prefill
outranks every request that already has its first token: it evicts them (recompute) until
its prompt fits. The ``srpt`` bound of ``formulations/bounds.md`` prices exactly this: each
request's first token as its prefill work alone.

What exactly is simulated (per batch, token budget ``C``, prefill budget ``P``, entry cap
``max_batch_size``)
---------------------------------------------------------------------------------------
Memory is held by **reservations**: a request whose (re)fill has started reserves its whole
``S`` (whole blocks) at its first chunk, so later chunks always fit; a decode grows its
reservation to ``m + 1``. The sum of reservations stays ``<= M`` and every reservation is
``>= m``, so the KV after every batch fits ``M`` (section 3 step 3; finishing requests count).

The prefill budget ``P`` (default 2,048 tokens; the instance's own ``P`` caps it) bounds
how many prompt tokens one batch holds, so a short prompt does not wait for a batch full of
long ones. Measured on the six seeded Azure windows of ``studies/bounds/upper.py`` (mean TTFT,
s, conversation seeds 1-3 / code seeds 1-3): ``P = C`` 0.177, 0.212, 0.648 / 9.45, 3.12,
13.38; ``P = 1024`` 0.168, 0.197, 0.477 / 10.14, 2.98, 14.34; ``P = 2048`` 0.165, 0.194,
0.470 / 9.51, 2.86, 13.52; ``P = 4096`` 0.172, 0.205, 0.523 / 9.30, 2.90, 13.26 (chosen on
the same windows the study reports).

1. **First prefills under way** (``g = 0``, ``m > 0``): their next chunk, ``min(S - m,
   tokens left, prefill tokens left)``.
2. **New first prefills** (``g = 0``, ``m = 0``), in ``first`` order (``arrival``: FCFS;
   ``prompt``: shortest prompt first, ties by arrival): a chunk as in 1; if the prompt's
   reservation does not fit, requests that have their first token are evicted (lowest
   resident priority first, never one already in the batch) until it does; if it cannot fit
   even then, no further first prefill starts this batch.
   Unless ``hybrid`` is set, a batch with first prefills holds nothing else (steps 3-4 are
   skipped): requests past their first token do not lengthen the batch that gives others
   theirs (on an Azure conversation window: mean TTFT 0.263 s hybrid, 0.202 s not;
   ``studies/bounds/upper.py``).
3. **Requests with their first token that hold KV**, in resident priority order: a decode (one
   token) or the next chunk of a refill. A decode that does not fit evicts the
   lowest-priority resident not yet in the batch, or itself when it is the lowest (vLLM's
   recompute preemption).
4. **Refills** of evicted requests, in resident priority order, while their ``S`` fits the
   free memory without evicting anyone (a refill never evicts; the first that does not fit
   closes the refill queue for this batch, so a long refill is not starved). A refill
   processes at most ``refill_chunk`` tokens per batch (default 256), so an arrival never
   waits long behind a refill batch (conversation window: mean TTFT 0.202 s uncapped, 0.177 s
   at 256; code window: 9.45 s either way).

A request generates at most one token per batch, and a refill always makes progress (its
completing chunk generates a token), so with a finite instance the run ends.

**Resident priority** (``ttft-first``): arrival, earlier first; the victim is the latest
arrival (vLLM's LIFO preemption); non-clairvoyant. ``ttft-first-sr`` (hypothetical): the
fewest tokens left to generate (``O - g``) first, so the victim is the request with the most
left (SRPT on the decode side, true output lengths).
"""

from __future__ import annotations

import heapq

import numpy as np

from .registry import Param, register
from .simulator import Plan, Policy, SimView

_BIG = 1 << 62
_FIRST_ORDERS = ("arrival", "prompt")


class TTFTFirst(Policy):
    """The TTFT-first policy; see the module docstring."""

    def __init__(self, first: str = "prompt", P: int = 2048, hybrid: bool = False,
                 refill_chunk: int = 256):
        if first not in _FIRST_ORDERS:
            raise ValueError(f"first must be one of {', '.join(_FIRST_ORDERS)}, got {first!r}")
        self.first = first
        self.P = P
        self.hybrid = hybrid
        self.refill_chunk = refill_chunk

    # -- keys (subclasses: the LNS's keyed decoder, optsched/search/lns.py) ------------------------
    def first_key(self, view: SimView) -> np.ndarray:
        """Order of new first prefills, smallest first (ties: arrival, then index)."""
        return view.prompt.astype(np.float64) if self.first == "prompt" else view.arrival

    def resident_key(self, idx: np.ndarray) -> np.ndarray:
        """Priority of requests that have their first token, smallest first (the largest is
        the first victim)."""
        return self.view.arrival[idx]

    # -- hooks --------------------------------------------------------------------------------
    def bind(self, view: SimView) -> None:
        super().bind(view)
        lim = view.limits
        self.M, self.C = lim.kv_capacity, lim.max_batch_tokens
        cap = self.C if self.P <= 0 else min(self.P, self.C)
        self.Pb = min(cap, lim.prefill_budget)
        self.cap = lim.max_batch_size or _BIG
        n = view.n
        key = self.first_key(view)
        order = np.lexsort((np.arange(n), view.arrival, key))
        self.first_rank = np.empty(n, np.int64)
        self.first_rank[order] = np.arange(n)
        self.pending: list[tuple[int, int]] = []  # heap of (rank, i): never prefilled
        self.prefilling: list[int] = []  # first prefill under way (g = 0, m > 0), in order
        self.active: set[int] = set()  # first token generated, unfinished
        self.res = np.zeros(n, np.int64)  # reserved KV (whole blocks) of requests holding KV
        self.used = 0

    def on_arrivals(self, idx: list[int]) -> None:
        for i in idx:
            heapq.heappush(self.pending, (int(self.first_rank[i]), i))

    def next_batch(self) -> Plan | None:
        self._req: list[int] = []
        self._tok: list[int] = []
        self._ev: list[int] = []
        self._left, self._pre = self.C, self.Pb
        self._started: list[int] = []
        act = np.fromiter(self.active, np.int64, len(self.active))
        ranked = act[np.lexsort((act, self.resident_key(act)))] if act.size else act
        held = self.view.m[ranked] > 0
        holding, evicted = ranked[held], ranked[~held].tolist()
        self._victims = holding.tolist()  # the tail goes first
        self._in_batch: set[int] = set()
        self._continue_first()
        self._new_first()
        if self.hybrid or not self._req:
            self._residents(holding)
            self._refills(evicted)
        return Plan(self._req, self._tok, self._ev)

    def _chunk(self, i: int, refill: bool = False) -> int:
        """Tokens request ``i``'s (re)fill processes in this batch (0: none fit); a refill
        takes at most ``refill_chunk`` (0: no cap)."""
        if len(self._req) >= self.cap:
            return 0
        v = self.view
        c = min(int(v.S[i] - v.m[i]), self._left, self._pre)
        if refill and self.refill_chunk:
            c = min(c, self.refill_chunk)
        return max(0, c)

    def _add(self, i: int, c: int, prefill: bool) -> None:
        self._req.append(i)
        self._tok.append(c)
        self._in_batch.add(i)
        self._left -= c
        if prefill:
            self._pre -= c

    def _evict_one(self) -> bool:
        """Evict the lowest-priority resident not in the batch; False if there is none."""
        j = self._tail()
        if j is not None:
            self._victims.pop()
            self._ev.append(j)
            self.used -= int(self.res[j])
            self.res[j] = 0
            return True
        return False

    def _continue_first(self) -> None:
        for i in self.prefilling:
            c = self._chunk(i)
            if c:
                self._add(i, c, True)

    def _new_first(self) -> None:
        fp = self.view.fp
        while self.pending:
            i = self.pending[0][1]
            c = self._chunk(i)
            if not c:
                return
            need = int(fp(int(self.view.S[i])))
            while self.used + need > self.M and self._evict_one():
                pass
            if self.used + need > self.M:
                return
            heapq.heappop(self.pending)
            self.res[i] = need
            self.used += need
            self._started.append(i)
            self._add(i, c, True)

    def _tail(self) -> int | None:
        """The lowest-priority resident that may still be evicted (None: no one)."""
        while self._victims and (self._victims[-1] in self._in_batch
                                 or self._victims[-1] in self._ev):
            self._victims.pop()
        return self._victims[-1] if self._victims else None

    def _residents(self, holding: np.ndarray) -> None:
        """Step 3 of the module docstring: requests holding KV, in resident priority order."""
        v = self.view
        if self._ev:
            holding = holding[~np.isin(holding, self._ev)]
        if self._all_decode(holding):
            return
        for i in holding.tolist():
            if i in self._ev:  # evicted by an earlier decode of this batch
                continue
            m = int(v.m[i])
            if m < int(v.S[i]) - 1:  # a refill under way: its reservation covers the chunk
                c = self._chunk(i, refill=True)
                if c:
                    self._add(i, c, True)
            else:
                self._decode(i)

    def _all_decode(self, holding: np.ndarray) -> bool:
        """Fast path of step 3: every holding request decodes and all of them fit (tokens,
        entries, memory); False (nothing done) otherwise."""
        v = self.view
        k = holding.size
        if not k or k > self._left or len(self._req) + k > self.cap:
            return not k
        m = v.m[holding]
        if (m != v.S[holding] - 1).any():
            return False
        grow = np.maximum(v.fp(m + 1) - self.res[holding], 0)
        total = int(grow.sum())
        if self.used + total > self.M:
            return False
        self.res[holding] += grow
        self.used += total
        ids = holding.tolist()
        self._req.extend(ids)
        self._tok.extend([1] * k)
        self._in_batch.update(ids)
        self._left -= k
        return True

    def _refills(self, evicted: list[int]) -> None:
        """Step 4: evicted requests into free memory, in resident priority order."""
        v = self.view
        for i in evicted:
            c = self._chunk(i, refill=True)
            need = int(v.fp(int(v.S[i])))
            if not c or self.used + need > self.M:
                return
            self.res[i] = need
            self.used += need
            self._add(i, c, True)

    def _decode(self, i: int) -> None:
        v = self.view
        if self._left < 1 or len(self._req) >= self.cap:
            return
        grow = int(v.fp(int(v.m[i]) + 1)) - int(self.res[i])
        while grow > 0 and self.used + grow > self.M and self._tail() is not None:
            self._evict_one()  # the tail may be i itself: a self-eviction
            if i in self._ev:
                return
        if self.used + grow > self.M:
            return
        self.res[i] += max(grow, 0)
        self.used += max(grow, 0)
        self._add(i, 1, False)

    def on_batch_end(self, plan: Plan, finished: np.ndarray) -> None:
        v = self.view
        self.prefilling = [i for i in self.prefilling + self._started if v.g[i] == 0]
        for i in self._req:
            if v.g[i] >= 1:
                self.active.add(i)
        for i in finished.tolist():
            self.active.discard(i)
            self.used -= int(self.res[i])
            self.res[i] = 0


class TTFTFirstSR(TTFTFirst):
    """TTFT-first with shortest remaining output first among requests that have their first
    token (true output lengths: hypothetical)."""

    def resident_key(self, idx: np.ndarray) -> np.ndarray:
        v = self.view
        return (v.known_output[idx] - v.g[idx]).astype(np.float64)


_PARAMS = (
    Param("first", str, "prompt", "order of new first prefills: arrival (FCFS) or prompt "
          "(shortest prompt first)", choices=_FIRST_ORDERS),
    Param("P", int, 2048, "max prefill tokens per batch (0 = C); capped by the instance's P",
          lo=0),
    Param("hybrid", bool, False, "requests past their first token join a batch that has first "
          "prefills (False: such a batch holds first prefills only, so it is shorter)"),
    Param("refill_chunk", int, 256, "most tokens of a refill per batch, 0 = no cap (a short "
          "refill batch delays an arrival less)", lo=0),
)
_SOURCE = ("optsched (prefill on arrival, evict as memory requires); recompute "
           "preemption as vLLM (Kwon et al., section 4.5), first token priced by the srpt "
           "bound, formulations/bounds.md")

register(
    "ttft-first",
    "TTFT-first: every arrival's prompt is prefilled at once, evicting (recompute) requests "
    "that already have their first token, latest arrival first; the rest decode FCFS",
    _SOURCE, params=_PARAMS, factory=TTFTFirst,
)
register(
    "ttft-first-sr",
    "TTFT-first with shortest remaining output first among requests past their first token "
    "(the one with the most left is evicted first; knows O)",
    _SOURCE, hypothetical=True, params=_PARAMS, factory=TTFTFirstSR,
)

__all__ = ["TTFTFirst", "TTFTFirstSR"]
