"""BROS (paper 003, sections 4-5): hybrid real-time / best-effort scheduling.

* ``bros`` -- Algorithm 1 with adaptive batch sizing and bidirectional KV blocks:

  1. RT requests (``cls == "rt"``) are ordered by the time left to their next token's
     deadline (``arrival + ttft_slo`` for the first token, ``last token + tpot_slo`` after;
     section 4.1's per-token SLOs). The most urgent are added while the batch holds fewer
     than the current cap, memory can be found (:class:`BidirectionalBlocks`), and the
     iteration's estimated time (the instance's cost model plus ``kswap`` per swapped
     token) stays within the most urgent request's residual time (eq. 6).
  2. BE requests (``cls == "be"``; any other request is treated as BE) in ascending order
     of checkpointed tokens (swap-in overhead) fill the remaining cap, or replace the least
     urgent RT request of the batch when that request can skip this iteration and still
     meet its deadline (its residual is at least twice the iteration estimate; our reading
     of "replace lower-priority RT requests where they introduce less overhead", since RT
     requests never hold checkpointed KV here). A BE prefill that would break the deadline
     is chunked (halving) until it fits -- our adaptation: the paper prefills whole.
  3. Adaptive batch sizing (section 4.2): the cap starts at ``init_batch``, grows by one
     after an iteration whose estimate met the most urgent deadline (or had no RT request),
     and is reset to ``init_batch`` when the estimate exceeds it.

  Memory (section 5): blocks of ``block`` slots, at most one RT request filling from the
  left and one BE request from the right. An RT request takes free slots, then a free
  block, then the BE block with the most empty slots (FindPreemptBlock), then overwrites
  BE slots; only the overwritten BE tokens are checkpointed to host (a partial swap-out,
  lazy checkpointing), recorded in the preemption table, and swapped back in when that BE
  request runs again. When nothing can run, a whole BE request is swapped out (host
  permitting) or, failing that, the least urgent RT request is evicted (recompute).

* ``bros-rr`` -- the paper's round-robin baseline (section 2.2, 7.1): RT and BE FCFS queues
  served in alternate iterations (a class with nothing to run yields its turn), no
  bidirectional sharing (one request per block), recompute eviction of the newest
  request when a running request cannot grow.

The evaluator charges KV token-exactly on these instances (block size 1); the block table
here has ``gcd(block, M)`` slots per block and holds at most ``M`` tokens, so every schedule
fits. Our adaptations (not in the paper): BE prefills are chunked by halving to meet the
deadline, and the BE pass stops after eight BE requests in a row did not fit.
"""

from __future__ import annotations

import math

import numpy as np

from .registry import Param, positive, register
from .simulator import Plan, Policy


class BidirectionalBlocks:
    """The block table: per block an RT owner filling slots from the left and a BE owner
    filling from the right (``-1`` = none); per request its blocks in allocation order.
    ``shared=False`` gives one owner per block (bros-rr)."""

    def __init__(self, n_blocks: int, size: int, shared: bool = True):
        self.size, self.shared = size, shared
        self.rt_owner = np.full(n_blocks, -1, np.int64)
        self.be_owner = np.full(n_blocks, -1, np.int64)
        self.rt_n = np.zeros(n_blocks, np.int64)
        self.be_n = np.zeros(n_blocks, np.int64)
        self.blocks: dict[int, list[int]] = {}
        self._undo: list = []
        #: host slots left for checkpoints in this iteration (set by the policy)
        self.host_free = 0
        #: preemption table: block -> (RT request, BE request) whose slots were overwritten
        self.preempted: dict[int, tuple[int, int]] = {}

    def free_in(self, b: int) -> int:
        return self.size - int(self.rt_n[b]) - int(self.be_n[b])

    def held(self, i: int) -> int:
        return sum(int(self.rt_n[b] if self.rt_owner[b] == i else self.be_n[b])
                   for b in self.blocks.get(i, ()))

    def snapshot(self) -> int:
        """A mark in the undo log; :meth:`restore` rolls every change after it back."""
        return len(self._undo)

    def restore(self, mark: int) -> None:
        while len(self._undo) > mark:
            self._undo.pop()()

    def _set(self, arr: np.ndarray, b: int, value: int) -> None:
        old = int(arr[b])
        arr[b] = value
        self._undo.append(lambda: arr.__setitem__(b, old))

    def _link(self, i: int, b: int) -> None:
        lst = self.blocks.setdefault(i, [])
        lst.append(b)
        self._undo.append(lambda: lst.remove(b))

    def _unlink(self, i: int, b: int) -> None:
        lst = self.blocks[i]
        k = lst.index(b)
        lst.pop(k)
        self._undo.append(lambda: lst.insert(k, b))

    def _take(self, i: int, b: int, k: int, rt: bool) -> int:
        t = min(k, self.free_in(b))
        if t <= 0:
            return 0
        owner, count = (self.rt_owner, self.rt_n) if rt else (self.be_owner, self.be_n)
        if owner[b] != i:
            self._set(owner, b, i)
            self._link(i, b)
        self._set(count, b, int(count[b]) + t)
        return t

    def room(self, i: int, rt: bool) -> int:
        """Free slots request ``i`` could take without overwriting anyone."""
        own = self.rt_owner if rt else self.be_owner
        usable = (own == -1) | (own == i)
        return int((self.size - self.rt_n[usable] - self.be_n[usable]).sum())

    def _take_empty(self, i: int, k: int, rt: bool) -> int:
        """Whole empty blocks for up to ``k`` slots, in one step."""
        empty = np.flatnonzero((self.rt_owner == -1) & (self.be_owner == -1))
        nb = min(empty.size, -(-k // self.size))
        if nb == 0:
            return 0
        bl = empty[:nb]
        counts = np.full(nb, self.size, np.int64)
        counts[-1] = min(self.size, k - self.size * (nb - 1))
        owner, count = (self.rt_owner, self.rt_n) if rt else (self.be_owner, self.be_n)
        lst = self.blocks.setdefault(i, [])
        owner[bl] = i
        count[bl] = counts
        lst.extend(bl.tolist())

        def undo(bl=bl, owner=owner, count=count, lst=lst, nb=nb):
            owner[bl] = -1
            count[bl] = 0
            del lst[-nb:]

        self._undo.append(undo)
        return int(counts.sum())

    def grow(self, i: int, k: int, rt: bool, protected: set[int]) -> list[tuple[int, int]] | None:
        """``k`` more slots for request ``i``; returns the BE slots overwritten (``(BE request,
        tokens)``, RT only) or None when the slots cannot be found (the table is unchanged)."""
        snap = self.snapshot()
        overwritten: dict[int, int] = {}
        own = self.rt_owner if rt else self.be_owner
        other = self.be_owner if rt else self.rt_owner
        mine = self.blocks.get(i, [])
        if mine:
            k -= self._take(i, mine[-1], k, rt)
        if k > 0:
            k -= self._take_empty(i, k, rt)
        if k > 0 and self.shared:  # FindPreemptBlock: shared blocks, most empty slots first
            cand = np.flatnonzero((own == -1) & (other >= 0))
            free = self.size - self.rt_n[cand] - self.be_n[cand]
            for blk in cand[np.argsort(-free, kind="stable")][: int((free > 0).sum())].tolist():
                k -= self._take(i, blk, k, rt)
                if k <= 0:
                    break
            if k > 0 and rt:  # lazy checkpointing: overwrite BE slots, fullest BE blocks first
                cand = np.flatnonzero((own == -1) & (other >= 0) & (self.be_n > 0))
                cand = cand[np.argsort(-self.be_n[cand], kind="stable")]
                for blk in cand.tolist():
                    j = int(self.be_owner[blk])
                    if j in protected or self.host_free <= 0:
                        continue
                    t = min(k, int(self.be_n[blk]), self.host_free)
                    self.host_free -= t
                    self._set(self.be_n, blk, int(self.be_n[blk]) - t)
                    overwritten[j] = overwritten.get(j, 0) + t
                    self.preempted[blk] = (i, j)
                    if self.be_n[blk] == 0:
                        self._set(self.be_owner, blk, -1)
                        self._unlink(j, blk)
                    k -= self._take(i, blk, k, rt)
                    if k <= 0:
                        break
        if k > 0:
            self.restore(snap)
            self.host_free += sum(overwritten.values())
            return None
        return list(overwritten.items())

    def release(self, i: int) -> None:
        """Free request ``i``'s slots (finished, evicted or swapped out whole); not undoable:
        call it between iterations only (it clears the undo log)."""
        self._undo.clear()
        for b in self.blocks.pop(i, ()):
            if self.rt_owner[b] == i:
                self.rt_owner[b], self.rt_n[b] = -1, 0
            if self.be_owner[b] == i:
                self.be_owner[b], self.be_n[b] = -1, 0
            self.preempted.pop(b, None)


class Bros(Policy):
    """See the module docstring; ``round_robin=True`` is ``bros-rr``."""

    def __init__(self, block: int = 16, init_batch: int = 4, max_batch: int = 256,
                 round_robin: bool = False):
        self.block, self.init_batch, self.max_batch = block, init_batch, max_batch
        self.round_robin = round_robin

    def bind(self, view) -> None:
        super().bind(view)
        n, lim = view.n, view.limits
        self.is_rt = np.array([c == "rt" for c in view.cls], bool)
        self.last_token = np.full(n, math.nan)
        self.waiting: list[int] = []  # arrived, unfinished
        self.cap = self.init_batch
        self.turn_rt = True
        # slots per block: gcd(block, M), so the blocks hold exactly M tokens (16 for any M
        # that is a multiple of 16; smaller for tiny or odd capacities)
        size = math.gcd(self.block, lim.kv_capacity)
        self.table = BidirectionalBlocks(lim.kv_capacity // size, size, shared=not self.round_robin)
        self.kswap = float(getattr(view.cost_model, "kswap", 0.0))
        self._g_before: dict[int, int] = {}

    def on_arrivals(self, idx: list[int]) -> None:
        self.waiting.extend(idx)

    # -- estimates --------------------------------------------------------------------
    def residual(self, i: int) -> float:
        v = self.view
        if v.g[i] == 0:
            slo = v.ttft_slo[i]
            return (v.arrival[i] + slo - v.now) if math.isfinite(slo) else math.inf
        slo = v.tpot_slo[i]
        return (self.last_token[i] + slo - v.now) if math.isfinite(slo) else math.inf

    def estimate(self, req: list[int], tok: list[int], moved: int) -> float:
        if not req:
            return self.kswap * moved
        v = self.view
        r = np.asarray(req, np.int64)
        m = v.m[r]
        dec = (m == v.S[r] - 1) & (v.g[r] >= 1)
        return v.cost_model.batch_time(tok, m, dec) + self.kswap * moved

    # -- one iteration ------------------------------------------------------------------
    def next_batch(self) -> Plan | None:
        self.table._undo.clear()
        if self.round_robin:
            return self._round_robin()
        return self._bros()

    def _bros(self) -> Plan | None:
        v = self.view
        C, P = v.limits.max_batch_tokens, v.limits.prefill_budget
        cap = min(self.cap, v.limits.max_batch_size or self.cap)
        pre = 0
        rt = sorted((i for i in self.waiting if self.is_rt[i]), key=self.residual)
        # ascending checkpointed tokens; ties: requests holding KV first, then by arrival
        be = sorted((i for i in self.waiting if not self.is_rt[i]),
                    key=lambda i: (int(v.h[i]), v.m[i] == 0, v.arrival[i], i))
        budget = self.residual(rt[0]) if rt else math.inf
        self.table.host_free = (v.limits.host_capacity or 0) - int(v.h.sum())
        req: list[int] = []
        tok: list[int] = []
        swap_out: dict[int, int] = {}
        swap_in: list[int] = []
        moved = 0
        used = 0
        missed = False
        for i in rt:  # step 1: most urgent RT first (Algorithm 1, lines 5-15)
            if len(req) >= cap:
                break
            c = self._room(i, C - used, P - pre)
            if c <= 0:
                continue
            snap = self.table.snapshot()
            over = self.table.grow(i, c, True, protected=set(req))
            if over is None:
                continue
            extra = sum(t for _, t in over)
            if req and self.estimate(req + [i], tok + [c], moved + extra) > budget:
                self.table.restore(snap)
                self.table.host_free += extra
                missed = True
                break
            for j, t in over:
                swap_out[j] = swap_out.get(j, 0) + t
            moved += extra
            req.append(i)
            tok.append(c)
            used += c
            pre += 0 if self._decoding(i) else c
        fails = 0
        for j in be:  # step 2: BE by ascending swap overhead (lines 17-33)
            if j in swap_out or used >= C:
                continue
            if fails >= 8:  # eight BE requests in a row did not fit: the batch is done
                break
            h = int(v.h[j])
            need_c = int(v.S[j] - v.m[j])
            if len(req) >= cap:
                k = self._replaceable(req, tok, moved, budget)
                if k is None:
                    break
                self.table_drop_last(req[k], tok[k])
                used -= tok[k]
                del req[k], tok[k]
            c = self._fit_be(j, min(need_c, self._room(j, C - used, P - pre)), h, req, tok, moved,
                             budget)
            if c < 1:
                fails += 1
                continue
            fails = 0
            if h:
                swap_in.append(j)
                moved += h
            req.append(j)
            tok.append(c)
            used += c
            pre += 0 if self._decoding(j) else c
        if not req and not swap_out:
            return self._unblock()
        self._adapt(missed)
        self._g_before = {i: int(v.g[i]) for i in req}
        so = sorted(swap_out.items())
        return Plan(req, tok, [], [j for j, _ in so], [t for _, t in so], swap_in)

    def _decoding(self, i: int) -> bool:
        v = self.view
        return bool(v.g[i] >= 1 and v.m[i] == v.S[i] - 1)

    def _room(self, i: int, tokens_left: int, prefill_left: int) -> int:
        """Tokens request ``i`` may process within the batch's token and prefill budgets."""
        if self._decoding(i):
            return min(1, tokens_left)
        return max(0, min(int(self.view.S[i] - self.view.m[i]), tokens_left, prefill_left))

    def _fit_be(self, j: int, c: int, h: int, req, tok, moved, budget) -> int:
        """The largest chunk ``c, c/2, c/4, ...`` of BE request ``j`` (plus its ``h``
        checkpointed tokens) that finds memory and keeps the iteration within ``budget``;
        0 when none does (the table is then unchanged)."""
        c = min(c, self.table.room(j, False) - h)
        while c >= 1:
            snap = self.table.snapshot()
            if self.table.grow(j, c + h, False, protected=set()) is not None:
                if self.estimate(req + [j], tok + [c], moved + h) <= budget:
                    return c
                self.table.restore(snap)
            c //= 2
        return 0

    def table_drop_last(self, i: int, c: int) -> None:
        """Undo the slots of request ``i``'s planned entry (it is replaced by a BE request)."""
        held = self.table.held(i) - c
        self.table.release(i)
        if held > 0:
            self.table.grow(i, held, bool(self.is_rt[i]), protected=set())

    def _replaceable(self, req, tok, moved, budget) -> int | None:
        """The least urgent RT entry of the batch if it can skip this iteration."""
        est = self.estimate(req, tok, moved)
        rts = [k for k, i in enumerate(req) if self.is_rt[i]]
        if len(rts) <= 1:
            return None
        k = max(rts, key=lambda k: self.residual(req[k]))
        return k if self.residual(req[k]) >= 2 * est and k != 0 else None

    def _adapt(self, missed: bool) -> None:
        if missed:
            self.cap = self.init_batch
        else:
            self.cap = min(self.cap + 1, self.max_batch)

    def _unblock(self) -> Plan | None:
        """Nothing fits: swap out the newest resident BE request whole (host permitting) or
        evict it, else evict (recompute) the least urgent resident RT request; None when
        nothing is resident (wait)."""
        v = self.view
        host_free = (v.limits.host_capacity or 0) - int(v.h.sum())
        resident = [i for i in self.waiting if v.m[i] - v.h[i] > 0]
        # the newest BE first (LIFO), but a request in the middle of its first prefill last: it
        # is the one that just made progress, and evicting it only to refill the same chunk
        # next iteration livelocks (found by Hypothesis: M = 66, a 28-token prompt refilled
        # 26 tokens and was evicted again, forever)
        for j in sorted((i for i in resident if not self.is_rt[i]),
                        key=lambda i: (bool(v.g[i] == 0 and v.m[i] < v.S[i]), -v.arrival[i], -i)):
            t = int(v.m[j] - v.h[j])
            if 0 < t <= host_free and not self.round_robin:
                self.table.release(j)
                return Plan([], [], [], [j], [t], [])
            if v.h[j] == 0:
                self.table.release(j)
                return Plan([], [], [j])
        rts = [i for i in resident if self.is_rt[i]]
        if rts:
            i = max(rts, key=self.residual)
            self.table.release(i)
            return Plan([], [], [i])
        return None

    def _round_robin(self) -> Plan | None:
        v = self.view
        C, P = v.limits.max_batch_tokens, v.limits.prefill_budget
        cap = min(self.max_batch, v.limits.max_batch_size or self.max_batch)
        queues = [[i for i in self.waiting if self.is_rt[i]],
                  [i for i in self.waiting if not self.is_rt[i]]]
        order = queues if self.turn_rt else queues[::-1]
        for q in order:
            req: list[int] = []
            tok: list[int] = []
            used = pre = 0
            for i in q:  # FCFS (waiting is in arrival order)
                if len(req) >= cap or used >= C:
                    break
                c = self._room(i, C - used, P - pre)
                if c < 1:
                    continue
                if self.table.grow(i, c, bool(self.is_rt[i]), protected=set()) is None:
                    continue
                req.append(i)
                tok.append(c)
                used += c
                pre += 0 if self._decoding(i) else c
            if req:
                self.turn_rt = q is not queues[0]
                self._g_before = {i: int(v.g[i]) for i in req}
                return Plan(req, tok, [])
        return self._unblock()

    def on_batch_end(self, plan: Plan, finished: np.ndarray) -> None:
        v = self.view
        for i in plan.req:
            i = int(i)
            if v.g[i] > self._g_before.get(i, v.g[i]):
                self.last_token[i] = v.now
        for j in plan.evict:
            self.table.release(int(j))
        for i in finished.tolist():
            self.table.release(i)
        if len(finished) or len(plan.evict):
            gone = set(finished.tolist())
            self.waiting = [i for i in self.waiting if i not in gone]


_PAPER = "BROS (paper 003)"
_PARAMS = (
    Param("block", int, 16, "KV block slots (section 5.1)", positive),
    Param("init_batch", int, 4, "initial and reset batch-size cap (section 4.2)", positive),
    Param("max_batch", int, 256, "largest batch-size cap", positive),
)

register(
    "bros",
    "BROS: RT by time to token deadline, BE by swap overhead, adaptive batch cap, "
    "bidirectional KV blocks with lazy checkpointing (partial swap-outs)",
    f"{_PAPER}, Algorithm 1, sections 4.2 and 5",
    params=_PARAMS,
    factory=lambda block, init_batch, max_batch: Bros(block, init_batch, max_batch),
)
register(
    "bros-rr",
    "BROS's round-robin baseline: RT and BE FCFS queues in alternate iterations, no block "
    "sharing, recompute eviction",
    f"{_PAPER}, sections 2.2 and 7.1 (baseline RR)",
    params=(Param("block", int, 16, "KV block slots", positive),
            Param("max_batch", int, 256, "batch-size cap", positive)),
    factory=lambda block, max_batch: Bros(block, max_batch, max_batch, round_robin=True),
)
