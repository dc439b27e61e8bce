"""BROS (paper 003, sections 4-5): hybrid real-time / best-effort scheduling.

* ``bros`` -- Algorithm 1 with adaptive batch sizing and bidirectional KV blocks:

  1. RT requests (``cls == "rt"``) are ordered by the time left to their next token's
     deadline (``arrival + ttft_slo`` for the first token, ``last token + tpot_slo`` after;
     section 4.1's per-token SLOs). The most urgent are added while the batch holds fewer
     than the current cap, memory can be found (:class:`BidirectionalBlocks`), and the
     iteration's estimated time (the instance's cost model; plus ``kswap`` per swapped token
     with ``overlap=false``) stays within the residual time of the most urgent request not yet late (eq. 6;
     a late request's negative residual would hold every batch to one entry).
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
  request runs again. When even that finds no room (no host space for checkpoints, or no
  BE slots left), section 5.2's **progressive drop** (``drop``, default on) frees memory
  for the RT request: resident BE requests (newest first), then RT requests less urgent
  than it (largest residual first), are dropped one at a time until it fits. A dropped
  request's KV is swapped out whole when the host has room ("swap out their cache blocks",
  section 5.2; ``rt_victim="recompute"`` evicts RT victims instead, the earlier reading),
  else evicted; a swapped-out RT request is swapped back in when it is scheduled again.
  The drop is tried only for an entry that generates a token (``c = S - m``), so every
  plan that drops makes progress (point 1 of the progress guarantee below). When nothing
  can run, a whole BE request is swapped out (host permitting) or evicted, else the least
  urgent RT request is swapped out (or evicted).

  **Admission** (``admission``; our rule, not in the paper). Scheduling an RT request that
  holds no KV on the GPU (not started, evicted, or swapped out whole) is an admission.
  With ``admission="reserve"`` (default) it is admitted only while every other RT request
  holding GPU KV whose blocks are full still finds a block without an RT owner for its
  next token, and it may drop BE work but no RT request; RT-over-RT drops are for RT
  requests already on the GPU that need room to grow. ``admission="greedy"`` is Algorithm
  1 and section 5.2 as written: any RT request takes any memory it finds and drops less
  urgent RT requests. Why the rule: on the paper-like workload at 24 RT req/s (120 RT
  requests, 2.15x the engine's saturated RT throughput; ``studies/papers36/FINDINGS.md``) the
  greedy admission without drops let 60-70 started RT requests hold all of M; a started
  request whose last block was full could then not grow, so batches held 11 entries against
  vLLM's 19 while ~25 RT requests an iteration found no memory (RT normalised latency +54% vs
  vLLM); with drops, as written, every newly urgent request dropped a request that had just
  decoded and each came back by dropping another (3,591 drops, 984K swapped tokens, +670%).
  With the reserve: 21 drops, 15.6 entries a batch, +24%.

* ``bros-rr`` -- the paper's round-robin baseline (section 2.2, 7.1): RT and BE FCFS queues
  served in alternate iterations (a class with nothing to run yields its turn), no
  bidirectional sharing (one request per block), recompute eviction of the newest
  request when a running request cannot grow.

**Block layout and M.** On instances charged token-exactly (``block_size == 1``, as the
BROS workloads are) the table has ``M // block`` blocks of ``block`` slots and, when
``block`` does not divide ``M``, one last block of the ``M % block`` remaining slots: it
holds exactly ``M`` tokens, so every request the instance admits (peak ``I + O - 1 <= M``)
can run. We chose this over refusing such instances: the paper sizes its block pool from
profiled GPU memory and never meets a request larger than it, and in our semantics the 16
slots are a layout inside the engine, not a unit the evaluator charges. On instances whose
engine pages KV in blocks of ``b > 1`` slots (``block_size = b``) the evaluator charges
every request whole blocks, which cannot express two requests sharing one block: the
table then has ``M // b`` blocks of ``b`` slots with one owner each (no bidirectional
sharing, hence no lazy checkpoints; whole swaps remain).

**Progress guarantee (drain mode).** The greedy alone can livelock when memory is tight: a
victim is evicted, refilled, and evicted again, forever (Hypothesis found such instances:
M of a few blocks, a request that cannot grow while the one just refilled holds the room;
the named regression tests are in ``tests/policies/test_bros.py``). Both policies count
*preemption plans* (plans with no entry: a whole swap-out or an eviction because nothing
fits) since the last generated token; at ``patience`` of them they enter drain mode with
one *target* -- the most urgent RT request (``bros``), else the oldest unfinished one (by
arrival; always the oldest for ``bros-rr``). Every drain plan evicts or swaps out whole
every other request holding GPU KV, swaps the target in if part of it is on the host,
and processes ``c >= 1`` of the target's tokens; drain mode ends when the target
finishes. Why every run terminates:

1. ``G = sum g`` never decreases (an eviction keeps ``g``) and ``G <= sum O``; so it is
   enough that every stretch of plans without a new token is finite.
2. In such a stretch every ``S_i`` is fixed. A plan with entries raises ``sum m`` by at
   least one (``c >= 1``), and only evictions lower it; a whole swap-out needs the request
   to be swapped in again, which happens only in a plan with entries. So a stretch with
   finitely many preemption plans is finite, and after ``patience`` of them drain mode
   starts.
3. A drain plan is always valid: a request without host KV may be evicted; one with host
   KV (a checkpoint) may not (semantics section 6, rule 3), but its GPU part can be swapped
   out because the table reserves host room for the *whole* KV of every checkpointed
   request (``optsched.policies.bros_blocks``). The target alone then fits: the table
   holds ``M`` tokens (``(M // b) * b`` with engine blocks), at least the request's
   footprint ``fp(I + O - 1)`` that instance validation guarantees, and ``m + c <= S <=
   I + O - 1`` while it is unfinished. The target is never preempted in drain mode, so it
   generates a token within ``S - m <= I + O - 1`` plans.
4. Otherwise the greedy never returns an empty plan while a request is resident (it
   preempts one) or while nothing is resident and a request waits (on an empty table the
   first RT request, or with no RT request the first BE request, always fits).

Drain mode trades the policy's latency logic for progress; it only starts after
``patience`` preemptions without a single token anywhere, which is thrashing, and the
number of drains of a run is kept in ``Bros.drains`` (the BROS notebook reports it).

**Swap transfers in the estimate** (``overlap``): the paper copies KV asynchronously,
overlapped with compute, so its iteration estimate has no transfer term (``overlap=true``,
the default); ``overlap=false`` adds ``kswap`` per swapped token, as this module did at
first. Either way the evaluator charges the transfers to the batch (semantics section 6,
one semantics: an upper bound on what BROS pays).

Our adaptations (not in the paper): BE prefills are chunked by halving to meet the
deadline, the BE pass stops after eight BE requests in a row did not fit, host room is
reserved for the whole KV of a checkpointed request, and drain mode.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .bros_blocks import BidirectionalBlocks
from .registry import Param, SimulationError, positive, register
from .simulator import Plan, Policy


@dataclass
class _Drops:
    """Requests dropped for RT requests in one iteration (section 5.2): swapped out whole
    (request -> GPU tokens) or evicted; ``moved`` the swapped tokens."""

    swapped: dict[int, int] = field(default_factory=dict)
    evicted: set[int] = field(default_factory=set)
    ids: set[int] = field(default_factory=set)
    moved: int = 0

    def merge(self, other: _Drops) -> None:
        self.swapped.update(other.swapped)
        self.evicted |= other.evicted
        self.ids |= other.ids
        self.moved += other.moved


class Bros(Policy):
    """See the module docstring; ``round_robin=True`` is ``bros-rr``."""

    def __init__(self, block: int = 16, init_batch: int = 4, max_batch: int = 256,
                 round_robin: bool = False, patience: int = 16, drop: bool = True,
                 overlap: bool = True, rt_victim: str = "swap", admission: str = "reserve"):
        self.block, self.init_batch, self.max_batch = block, init_batch, max_batch
        self.round_robin, self.patience, self.drop = round_robin, patience, drop
        self.overlap, self.rt_victim, self.admission = overlap, rt_victim, admission

    def bind(self, view) -> None:
        super().bind(view)
        n, lim = view.n, view.limits
        self.is_rt = np.array([c == "rt" for c in view.cls], bool)
        self.last_token = np.full(n, math.nan)
        self.waiting: list[int] = []  # arrived, unfinished
        self.cap = self.init_batch
        self.turn_rt = True
        self.table = self._block_table(lim)
        self.table.kv_of = lambda j: int(view.m[j])
        # the estimate's price of a swapped token: 0 when transfers overlap compute (``overlap``)
        self.kswap = 0.0 if self.overlap else float(getattr(view.cost_model, "kswap", 0.0))
        self._g_before: dict[int, int] = {}
        #: preemption plans since the last generated token; drain target (module docstring)
        self.stalls = 0
        self.target: int | None = None
        #: drain-mode episodes of this run
        self.drains = 0
        #: requests dropped for urgent RT requests (section 5.2's progressive drop)
        self.dropped = 0
        #: greedy iterations, their summed batch cap and cap resets (adaptive batch sizing)
        self._greedy = self._cap_sum = self._resets = 0
        #: why the RT pass left requests out: cap reached, budget (eq. 6) broken, RT requests
        #: that found no memory (counted per request and iteration)
        self._stops = {"cap": 0, "budget": 0, "rt_no_memory": 0}

    def _block_table(self, lim) -> BidirectionalBlocks:
        """The block table of the module docstring's "Block layout and M"."""
        if lim.block_size > 1:
            return BidirectionalBlocks(lim.kv_capacity // lim.block_size, lim.block_size,
                                       shared=False)
        return BidirectionalBlocks.for_capacity(lim.kv_capacity, self.block,
                                                shared=not self.round_robin)

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
        self._reserve_host()
        if self.target is None and self.stalls >= self.patience and self.waiting:
            self.target = self._drain_target()
            self.drains += 1
        if self.target is not None:
            return self._drain()
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
        budget = self._budget(rt)
        req: list[int] = []
        tok: list[int] = []
        swap_out: dict[int, int] = {}
        swap_in: list[int] = []
        moved = 0
        used = 0
        missed = False
        drops = _Drops()
        for i in rt:  # step 1: most urgent RT first (Algorithm 1, lines 5-15)
            if len(req) >= cap:
                self._stops["cap"] += 1
                break
            c = self._room(i, C - used, P - pre)
            if c <= 0 or i in drops.ids:
                continue
            h = int(v.h[i])  # a dropped RT request comes back from the host (section 5.2)
            snap, host = self.table.snapshot(), self.table.host_free
            new = self._admitting(i)
            if new and not self._growth_room(i, c + h):  # cannot hold after any grow either
                self._stops["rt_no_memory"] += 1
                continue
            over = self.table.grow(i, c + h, True, protected=set(req))
            dropped = None
            if over is None and self.drop:
                over, dropped = self._drop_for(i, c, h, set(req) | set(swap_out) | drops.ids,
                                               rt_victims=not new or self.admission == "greedy")
            if over is not None and new and not self._growth_room(i):
                self.table.restore(snap)
                self.table.host_free = host
                over = None
            if over is None:
                self._stops["rt_no_memory"] += 1
                continue
            extra = sum(t for _, t in over) + (dropped.moved if dropped else 0) + h
            if req and self.estimate(req + [i], tok + [c], moved + extra) > budget:
                self.table.restore(snap)
                self.table.host_free = host
                self._stops["budget"] += 1
                missed = True
                break
            if dropped:
                drops.merge(dropped)
            for j, t in over:
                swap_out[j] = swap_out.get(j, 0) + t
            if h:
                swap_in.append(i)
            moved += extra
            req.append(i)
            tok.append(c)
            used += c
            pre += 0 if self._decoding(i) else c
        fails = 0
        for j in be:  # step 2: BE by ascending swap overhead (lines 17-33)
            if j in swap_out or j in drops.ids or used >= C:
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
        swap_out.update(drops.swapped)
        so = sorted(swap_out.items())
        self.dropped += len(drops.ids)
        return Plan(req, tok, sorted(drops.evicted), [j for j, _ in so], [t for _, t in so],
                    swap_in)

    def _admitting(self, i: int) -> bool:
        """Whether request ``i`` holds no KV on the GPU (never processed, evicted, or swapped
        out whole): scheduling it is an admission."""
        return bool(self.view.m[i] == self.view.h[i])

    def _growth_room(self, i: int, slots: int = 0) -> bool:
        """``admission="reserve"``: after RT request ``i`` (not on the GPU) took its slots,
        every other RT request holding GPU KV whose own blocks are full (its next token needs
        a new block) still finds a block without an RT owner -- an empty block or a BE block
        it may share or overwrite (section 5.2). Called with ``slots`` before ``i`` takes
        anything, it assumes ``i`` will take at least ``ceil(slots / block)`` such blocks: a
        necessary condition, so that hopeless admissions are refused without trying drops.
        Always true with ``admission="greedy"``."""
        if self.admission == "greedy":
            return True
        t = self.table
        own = t.rt_owner >= 0
        free = np.bincount(t.rt_owner[own], weights=(t.slots - t.rt_n - t.be_n)[own],
                           minlength=self.view.n)
        owners = np.unique(t.rt_owner[own])
        owners = owners[owners != i]
        need = int((free[owners] == 0).sum())
        return int((~own).sum()) - -(-slots // t.size) >= need

    def _drop_for(self, i: int, c: int, h: int, keep: set[int], rt_victims: bool = True):
        """Section 5.2's progressive drop, for RT request ``i`` whose ``c`` tokens (plus its
        ``h`` tokens coming back from the host) found no memory: resident BE requests (newest
        first), then RT requests less urgent than ``i`` (largest residual first), are dropped
        one at a time until ``i`` fits. A dropped request is swapped out whole when the host
        has room, as the paper writes it ("swap out their cache blocks"), else evicted
        (recompute); a swapped-out RT request is swapped back in when it is scheduled again
        (the RT pass of :meth:`_bros`). Only for an entry that generates a token (``c = S -
        m``), so every plan that drops makes progress and the drain-mode argument of the
        module docstring still holds. Returns the slots' overwrites and the drops, or
        ``(None, None)`` with the table unchanged."""
        v = self.view
        if c != int(v.S[i] - v.m[i]):
            return None, None
        snap = self.table.snapshot()
        host = self.table.host_free
        mine = self.residual(i)
        cands = [j for j in self.waiting if j not in keep and j != i and v.m[j] - v.h[j] > 0]
        be = sorted((j for j in cands if not self.is_rt[j]), key=lambda j: (-v.arrival[j], -j))
        rt = sorted((j for j in cands if rt_victims and self.is_rt[j] and self.residual(j) > mine),
                    key=lambda j: (-self.residual(j), -j))
        victims = be + rt
        reach = self.table.room(i, True) + sum(int(v.m[j] - v.h[j]) for j in victims)
        if reach < c + h:  # even dropping every victim would not make room: try nothing
            return None, None
        d = _Drops()
        for j in victims:
            gpu = int(v.m[j] - v.h[j])
            if self._swappable(j):
                self.table.host_free -= gpu if v.h[j] == 0 else 0
                d.swapped[j] = gpu
                d.moved += gpu
            elif v.h[j] == 0:
                d.evicted.add(j)
            else:
                continue
            d.ids.add(j)
            self.table.drop(j)
            over = self.table.grow(i, c + h, True, protected=keep)
            if over is not None:
                return over, d
        self.table.restore(snap)
        self.table.host_free = host
        return None, None

    def _budget(self, rt: list[int]) -> float:
        """The iteration's time budget (eq. 6): the residual of the most urgent RT request
        that is not yet late; unbounded when every RT request is late or none waits. A late
        request (residual <= 0) is still served first, but cannot be helped by a shorter
        batch: letting its negative residual set the budget held every batch to one entry
        (91% of the iterations at 4 req/s on notebook 07's Azure setting)."""
        return next((r for r in map(self.residual, rt) if r > 0), math.inf)

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

    def mechanisms(self) -> dict[str, float | int]:
        """What BROS's mechanisms did in the run: the mean adaptive batch cap and the share of
        greedy iterations that reset it (section 4.2), drain episodes and progressive drops,
        and per greedy iteration the RT requests that found no memory and the RT passes cut
        by the cap or by the time budget (eq. 6); the partial (lazy-checkpoint) swap-outs are
        in the evaluator's swap metrics."""
        n = max(self._greedy, 1)
        return {"mean_batch_cap": self._cap_sum / n, "cap_reset_share": self._resets / n,
                "drains": self.drains, "dropped": self.dropped,
                "rt_no_memory_per_iteration": self._stops["rt_no_memory"] / n,
                "cap_stop_share": self._stops["cap"] / n,
                "budget_stop_share": self._stops["budget"] / n}

    def _adapt(self, missed: bool) -> None:
        self._greedy += 1
        self._cap_sum += self.cap
        self._resets += bool(missed)
        if missed:
            self.cap = self.init_batch
        else:
            self.cap = min(self.cap + 1, self.max_batch)

    def _reserve_host(self) -> None:
        """Host room left after reserving every checkpointed request's whole KV
        (:mod:`optsched.policies.bros_blocks`); never negative (the reservation invariant)."""
        v, t = self.view, self.table
        t.reserved = {j for j in self.waiting if v.h[j] > 0}
        t.host_free = (v.limits.host_capacity or 0) - sum(int(v.m[j]) for j in t.reserved)

    def _swappable(self, j: int) -> bool:
        """Whether request ``j``'s GPU part may go to the host whole: always for a checkpointed
        request (reserved), host room permitting for another request -- an RT request only
        with ``rt_victim="swap"`` (section 5.2: dropped requests' "cache blocks" are swapped
        out; ``"recompute"``: RT victims are evicted, the earlier reading) -- and never in
        ``bros-rr`` (recompute eviction, section 7.1)."""
        v = self.view
        if v.h[j] > 0:
            return True
        if self.round_robin or (self.is_rt[j] and self.rt_victim != "swap"):
            return False
        return int(v.m[j]) <= self.table.host_free

    def _unblock(self) -> Plan | None:
        """Nothing fits: swap out the newest resident BE request whole (host permitting) or
        evict it, else swap out (:meth:`_swappable`) or evict the least urgent resident RT
        request; None when nothing is resident (wait)."""
        v = self.view
        resident = [i for i in self.waiting if v.m[i] - v.h[i] > 0]
        # the newest BE first (LIFO), but a request in the middle of its first prefill last: it
        # is the one that just made progress, and evicting it only to refill the same chunk
        # next iteration livelocked (found by Hypothesis: M = 66, a 28-token prompt refilled
        # 26 tokens and was evicted again, forever)
        for j in sorted((i for i in resident if not self.is_rt[i]),
                        key=lambda i: (bool(v.g[i] == 0 and v.m[i] < v.S[i]), -v.arrival[i], -i)):
            if self._swappable(j):
                self.table.release(j)
                return Plan([], [], [], [j], [int(v.m[j] - v.h[j])], [])
            if v.h[j] == 0:
                self.table.release(j)
                return Plan([], [], [j])
        rts = [i for i in resident if self.is_rt[i]]
        if rts:
            i = max(rts, key=self.residual)
            self.table.release(i)
            if self._swappable(i):
                return Plan([], [], [], [i], [int(v.m[i] - v.h[i])], [])
            return Plan([], [], [i])
        return None

    # -- drain mode (the progress guarantee of the module docstring) ----------------------
    def _drain_target(self) -> int:
        """The most urgent RT request (``bros``), else the oldest waiting request."""
        v = self.view
        rt = [i for i in self.waiting if self.is_rt[i]]
        if rt and not self.round_robin:
            return min(rt, key=lambda i: (self.residual(i), v.arrival[i], i))
        return min(self.waiting, key=lambda i: (v.arrival[i], i))

    def _drain(self) -> Plan:
        """Free the GPU of every request but the target (swap out whole where allowed, else
        evict) and process the target alone, swapping it in first if needed."""
        v, t = self.view, self.table
        k = self.target
        assert k is not None
        evict: list[int] = []
        out: list[int] = []
        out_tokens: list[int] = []
        for j in self.waiting:
            gpu = int(v.m[j] - v.h[j])
            if j == k or gpu <= 0:
                continue
            if self._swappable(j):
                if v.h[j] == 0:
                    t.host_free -= int(v.m[j])
                out.append(j)
                out_tokens.append(gpu)
            else:
                evict.append(j)
            t.release(j)
        h = int(v.h[k])
        c = self._room(k, v.limits.max_batch_tokens, v.limits.prefill_budget)
        if t.grow(k, c + h, bool(self.is_rt[k]), protected=set()) is None:
            raise SimulationError(  # unreachable by the module docstring's argument, point 3
                f"policy {self.name!r}: drain target {k} ({c + h} slots) does not fit the "
                f"block table alone ({t.free_total()} free)")
        self._g_before = {k: int(v.g[k])}
        return Plan([k], [c], evict, out, out_tokens, [k] if h else [])

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
        generated = False
        for i in plan.req:
            i = int(i)
            if v.g[i] > self._g_before.get(i, v.g[i]):
                self.last_token[i] = v.now
                generated = True
        if generated:
            self.stalls = 0
        elif len(plan.req) == 0:  # a preemption plan
            self.stalls += 1
        if self.target is not None and self.target in finished:
            self.target = None
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
    Param("patience", int, 16, "preemptions without a new token before drain mode (progress "
          "guarantee, our addition)", positive),
)
_OVERLAP = Param("overlap", bool, True, "the iteration estimate treats swap transfers as "
                 "overlapped with compute (the paper); false: adds kswap per swapped token")
_DROP = Param("drop", bool, True, "section 5.2's progressive drop: an RT request that finds no "
              "memory drops BE, then less urgent RT requests (false: it waits)")
_VICTIM = Param("rt_victim", str, "swap", "what a dropped or unblocked RT request loses: swap = "
                "its KV goes to the host and comes back when it is scheduled (section 5.2), "
                "recompute = it is evicted (the earlier reading)",
                choices=("swap", "recompute"))
_ADMISSION = Param("admission", str, "reserve", "reserve = an RT request not yet started is "
                   "admitted only while every started RT request can still take a block for "
                   "its next token, and drops only BE work (our rule: module docstring); "
                   "greedy = it takes any memory it finds and may drop less urgent RT requests "
                   "(Algorithm 1 and section 5.2 as written)", choices=("reserve", "greedy"))

register(
    "bros",
    "BROS: RT by time to token deadline, BE by swap overhead, adaptive batch cap, "
    "bidirectional KV blocks with lazy checkpointing (partial swap-outs)",
    f"{_PAPER}, Algorithm 1, sections 4.2 and 5",
    params=(*_PARAMS, _DROP, _OVERLAP, _VICTIM, _ADMISSION),
    factory=lambda block, init_batch, max_batch, patience, drop, overlap, rt_victim, admission:
    Bros(block, init_batch, max_batch, patience=patience, drop=drop, overlap=overlap,
         rt_victim=rt_victim, admission=admission),
)
register(
    "bros-rr",
    "BROS's round-robin baseline: RT and BE FCFS queues in alternate iterations, no block "
    "sharing, recompute eviction",
    f"{_PAPER}, sections 2.2 and 7.1 (baseline RR)",
    params=(*(p for p in _PARAMS if p.name != "init_batch"),),
    factory=lambda block, max_batch, patience: Bros(block, max_batch, max_batch,
                                                    round_robin=True, patience=patience),
)
