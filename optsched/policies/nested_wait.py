"""Nested WAIT (Ao, Luo, Simchi-Levi, Wang, *Optimizing LLM Inference: Fluid-Guided Online
Scheduling with Memory Constraints*, arXiv 2504.11320, v2 abstract: WAIT for unknown output
lengths), compared with the authors' simulator code (GitHub Luoxiaogan/vidur_or,
``GeneralizedNestedBookingLimitReplicaScheduler``; read to match behaviour, not copied).

What the paper and the code say
-------------------------------
"Rather than predicting output lengths, Nested WAIT classifies prompts on-the-fly: short
prompts complete early and exit, while longer prompts naturally advance to later segments.
A safety buffer provides high-probability protection against memory overflow." In the
code, the decode stages are cut into *segments* at the types' distinct output lengths
``d_1 < d_2 < ...``: segment ``s`` is stages ``[d_{s-1}, d_s)`` and carries the types
still alive there (arrival-rate sum ``Lambda_s``); its per-stage limit is its share of a
configured total. Every batch walks the segments in order: a segment runs only if at least
``min(limit, remaining segment capacity)`` requests wait at its first stage (else it and
every later segment skip this batch); a running segment takes up to the per-stage limit of
requests at each of its stages, which advance one stage (token). Requests beyond a limit,
or in a skipped segment, wait with their KV in place.

What exactly is simulated, and every difference from the authors' code
-----------------------------------------------------------------------
1. **Segments from a parameter**: the length distribution (``types`` quantile bins of the
   output length, :func:`optsched.policies.wait.length_types`; ``d_j`` = a bin's mean
   length rounded up) replaces the code's hard-coded types. Only this *aggregate* is read
   from the true outputs -- never a request's own length (decisions use ``g``, the tokens
   generated so far); the registry marks the policy hypothetical because the aggregate
   comes from the instance itself (the paper assumes it known). The last segment is open
   (``[d_J, inf)``): a request longer than every ``d_j`` stays in it.
2. **Limits from ``M``** (the code: a configured ``total_limit``): per-stage limit
   ``q_s = max(1, floor(x Lambda_s))`` with ``x`` such that the fluid memory
   ``sum_s q_s sum_{k in s} (Ibar + k)`` is ``scale * M`` (``Ibar`` the mean prompt, counts
   instead of rates -- their time unit cancels); a segment's capacity is ``q_s`` times its
   number of stages.
3. **The safety buffer** (its rule is not in the abstract) is our memory guard: if the
   batch would leave more than ``M`` KV (semantics section 3), the newest admissions are
   dropped from it, then running requests are evicted (recompute), most recently admitted
   first, never the oldest running request (so it always progresses); a batch the guard
   would leave empty gives the oldest holder the budget.
4. **Budgets**: decodes take the token budget ``C`` first, then prefills and recomputes (in
   segment order) chunked to what is left of ``C`` and of the prefill budget; at most
   ``max_batch_size`` entries. The code has no token budget.
5. **Nothing is dropped**: once no request is left to arrive, the thresholds and limits stop
   holding requests back (the code drops the queue then, and its ``first_segment_satisfied``
   is forced true). Before that, as in the code, a batch may be empty: the clock jumps to
   the next arrival.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from ..plugins import ParamSpec, open_unit_interval, positive
from .registry import register
from .simulator import Plan, Policy, SimView
from .wait import checked_types_scale, length_types

_BIG = 1 << 62


@dataclass(frozen=True)
class Segment:
    """Decode stages ``[start, end)`` (``end`` None: open), per-stage limit ``q``, capacity
    ``total`` (module docstring items 1-2)."""

    start: int
    end: int | None
    q: int
    total: int

    def __post_init__(self):
        if self.start < 0 or (self.end is not None and self.end <= self.start) or self.q < 1:
            raise ValueError(f"segment [{self.start}, {self.end}) with limit {self.q}: "
                             "need 0 <= start < end and limit >= 1")


def nested_segments(prompt: np.ndarray, output: np.ndarray, types: int, M: int,
                    scale: float = 1.0) -> list[Segment]:
    """The segments of item 1 with the limits of item 2 (module docstring)."""
    typ = length_types(output, types)
    J = int(typ.max(initial=-1)) + 1
    c = np.bincount(typ, minlength=J).astype(np.float64)
    obar = np.bincount(typ, weights=np.asarray(output, np.float64), minlength=J) / np.maximum(c, 1)
    d = np.maximum(1, np.ceil(obar)).astype(np.int64)
    cuts = sorted(set(d.tolist()))
    ibar = float(np.mean(prompt)) if len(prompt) else 1.0
    bounds = list(zip([0] + cuts[:-1], cuts))
    lam = [float(c[d > lo].sum()) for lo, _ in bounds]
    mem = sum(la * ((hi - lo) * ibar + (lo + hi - 1) * (hi - lo) / 2)
              for la, (lo, hi) in zip(lam, bounds))
    x = scale * M / max(mem, 1e-12)
    segs = []
    for k, ((lo, hi), la) in enumerate(zip(bounds, lam)):
        q = max(1, int(np.floor(x * la)))
        segs.append(Segment(lo, None if k == len(bounds) - 1 else hi, q, q * (hi - lo)))
    return segs


class NestedWait(Policy):
    """Nested WAIT; see the module docstring."""

    def __init__(self, types: int = 3, scale: float = 1.0):
        self.types, self.scale = checked_types_scale(types, scale)

    def bind(self, view: SimView) -> None:
        super().bind(view)
        lim = view.limits
        self.M, self.C = lim.kv_capacity, lim.max_batch_tokens
        self.Pb = min(self.C, lim.prefill_budget)
        self.maxbs = lim.max_batch_size or _BIG
        # the aggregate length distribution only (item 1): never a request's own length
        self.segs = nested_segments(view.prompt, view.known_output, self.types, self.M,
                                    self.scale)
        self.starts = [s.start for s in self.segs]
        self.last_arrival = float(view.arrival.max(initial=0.0))
        self.active: list[int] = []  # arrived, unfinished, arrival order
        self.seq = np.zeros(view.n, np.int64)  # admission order (0 = never admitted)
        self.nseq = 0
        self.ev: list[int] = []

    def on_arrivals(self, idx: list[int]) -> None:
        self.active.extend(idx)

    def _select(self, flush: bool) -> list[int]:
        """Requests the segments let run this batch, in segment and stage order."""
        g, m = self.view.g, self.view.m
        by_seg: list[dict[int, list[int]]] = [{} for _ in self.segs]
        for i in self.active:
            gi = int(g[i])
            by_seg[bisect.bisect_right(self.starts, gi) - 1].setdefault(gi, []).append(i)
        out: list[int] = []
        for seg, stages in zip(self.segs, by_seg):
            at_start = stages.get(seg.start, [])
            occupied = sum(len(v) for k, v in stages.items() if k != seg.start)
            remain = seg.total - occupied
            if not flush and len(at_start) < min(seg.q, remain):
                break  # this segment and every later one wait
            for k in sorted(stages):
                cap = _BIG if flush else (min(remain, seg.q) if k == seg.start else seg.q)
                members = sorted(stages[k], key=lambda i: (int(m[i]) == 0, int(self.seq[i]) or _BIG))
                out.extend(members[:max(cap, 0)])
        return out

    def _tokens(self, sel: list[int]) -> tuple[list[int], list[int]]:
        """Decodes first within ``C``, then prefill/recompute chunks (item 4)."""
        S, m, g = self.view.S, self.view.m, self.view.g
        req: list[int] = []
        tok: list[int] = []
        ctok, ptok = self.C, self.Pb
        # a decode: one token left and one generated already (the simulator's definition)
        isdec = {i: bool(g[i] >= 1 and int(S[i] - m[i]) == 1) for i in sel}
        dec = [i for i in sel if isdec[i]]
        pre = [i for i in sel if not isdec[i]]
        for i in dec:
            if len(req) >= self.maxbs or ctok < 1:
                break
            req.append(i)
            tok.append(1)
            ctok -= 1
        for i in pre:
            c = min(int(S[i] - m[i]), ctok, ptok)
            if len(req) >= self.maxbs or c < 1:
                break
            req.append(i)
            tok.append(c)
            ctok -= c
            ptok -= c
        return req, tok

    def next_batch(self) -> Plan | None:
        v = self.view
        flush = v.now >= self.last_arrival
        req, tok = self._tokens(self._select(flush))
        req, tok, self.ev = self._guard(req, tok)
        if not req and not self.ev:
            return None
        for i in req:
            if not self.seq[i]:
                self.nseq += 1
                self.seq[i] = self.nseq
        return Plan(req, tok, self.ev)

    def _guard(self, req: list[int], tok: list[int]) -> tuple[list[int], list[int], list[int]]:
        """Item 3: keep the KV after the batch within ``M``."""
        v = self.view
        m = v.m
        c = dict(zip(req, tok))
        holders = [i for i in self.active if m[i] > 0]
        kv = int(v.fp(m[holders]).sum()) if holders else 0
        kv_after = kv + sum(int(v.fp(m[i] + c[i]) - v.fp(m[i])) for i in req)
        for i in reversed([i for i in req if m[i] == 0]):  # newest admissions first
            if kv_after <= self.M:
                break
            kv_after -= int(v.fp(c.pop(i)))
        req = [i for i in req if i in c]
        ev: list[int] = []
        if kv_after > self.M:
            oldest = min(holders, key=lambda i: int(self.seq[i]) or _BIG)
            for i in sorted(holders, key=lambda i: -int(self.seq[i])):
                if kv_after <= self.M:
                    break
                if i == oldest:
                    continue
                kv_after -= int(v.fp(m[i] + c.pop(i, 0)))
                ev.append(i)
            gone = set(ev)
            req = [i for i in req if i not in gone]
            if not req:
                kv_after += self._feed_oldest(oldest, c, kv_after)
                req = [oldest] if oldest in c else []
        elif not req and holders:
            # the dropped admissions had taken the whole budget ahead of a holder (a request
            # at an earlier stage sorts first): the oldest holder gets it, or nothing runs
            oldest = min(holders, key=lambda i: int(self.seq[i]) or _BIG)
            kv_after += self._feed_oldest(oldest, c, kv_after)
            req = [oldest] if oldest in c else []
        return req, [c[i] for i in req], ev

    def _feed_oldest(self, i: int, c: dict[int, int], kv_after: int) -> int:
        """Item 3's progress: a batch the guard would leave with evictions only gives the
        oldest holder, never evicted, the budget the evictions freed (up to its next token,
        within ``C``, the prefill budget, the batch size and ``M``). Without it a newer
        request that took the prefill budget ahead of the oldest (an earlier stage), was
        evicted for memory and took it again starved the oldest forever (a livelock found by
        ``tests/policies/test_every_policy.py``). Adds ``c[i]``; returns the KV it adds."""
        v = self.view
        S, m, g = int(v.S[i]), int(v.m[i]), int(v.g[i])
        is_decode = g >= 1 and S - m == 1
        decodes = [j for j in c if v.g[j] >= 1 and int(v.S[j] - v.m[j]) == 1]
        room = self.C - sum(c.values())
        if not is_decode:
            room = min(room, self.Pb - sum(c[j] for j in c if j not in decodes))
        want = min(1 if is_decode else S - m, room)
        while want > 0 and int(v.fp(m + want) - v.fp(m)) > self.M - kv_after:
            want -= 1
        if want < 1 or len(c) >= self.maxbs:
            return 0
        c[i] = want
        return int(v.fp(m + want) - v.fp(m))

    def on_batch_end(self, plan: Plan, finished: np.ndarray) -> None:
        if finished.size:
            done = set(finished.tolist())
            self.active = [i for i in self.active if i not in done]


register(
    "nested-wait",
    "Nested WAIT: decode stages cut into segments at the output-length types' lengths, "
    "per-stage limits from the fluid memory (sum over stages <= M); a segment runs when enough "
    "requests wait at its first stage, each stage advances up to its limit; requests are "
    "classified by tokens generated, never by their own length (the length distribution is "
    "read from the instance: hypothetical); evicts on overflow",
    "Ao, Luo, Simchi-Levi, Wang, Optimizing LLM Inference: Fluid-Guided Online Scheduling "
    "with Memory Constraints, arXiv 2504.11320, Nested WAIT (abstract) and the authors' "
    "vidur_or nested booking-limit scheduler (differences in optsched/policies/nested_wait.py)",
    hypothetical=True,
    params=(ParamSpec("types", int, 3, "number of output-length types (quantile bins) that "
                      "cut the segments", check=positive),
            ParamSpec("scale", float, 1.0, "fraction of M the fluid limits may fill",
                      check=open_unit_interval)),
    factory=NestedWait,
)

__all__ = ["NestedWait", "Segment", "nested_segments"]
