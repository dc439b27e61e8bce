"""One engine of a cluster, stepped batch by batch: the single-engine simulator's loop
(:func:`optsched.policies.simulator.simulate_policy`, InferMax Algorithm 1) with its arrivals
handed over by a router instead of read from the instance, so that a router can look at every
engine's state at each arrival (docs/semantics.md section 6, "Clusters").

The rules applied are section 3's on the engine's own limits and cost model (KV only: a
cluster has no host memory and no hidden cache, section 6). The engine also holds *lingering*
KV: requests it no longer schedules whose KV stays until a transfer ends (the prefill engines
of :mod:`optsched.cluster.pd`); a batch whose KV after it, lingering included, would exceed
``M`` waits (a stated start) until enough of it has left. The router layer judges nothing:
the cluster schedule goes to the one evaluator (:mod:`optsched.evaluation.cluster`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..instance import Instance
from ..policies.errors import SimulationError
from ..policies.reuse import BlockState
from ..policies.simulator import (
    Plan,
    Policy,
    SimView,
    _release,
    _reuse_batch,
    _Sim,
    batch_pricer,
    bind_predictor,
    check_policy,
    checked_plan,
    known_outputs,
)


@dataclass(frozen=True)
class Batch:
    """A batch an engine ran: its start (``stated``: a start the schedule must state), its
    entries, evictions, the requests it finished and its end."""

    start: float
    stated: bool
    req: list[int]
    tokens: list[int]
    evict: list[int]
    finished: list[int]
    end: float
    #: prefix reuse (section 6): hit tokens per entry (empty: none) and dropped block ids
    hits: list[int] = field(default_factory=list)
    drop: list[int] = field(default_factory=list)


class EngineRun:
    """Engine ``position`` of a cluster running ``policy`` on ``instance`` (the requests on the
    engine's limits and cost model, :meth:`Instance.for_engine`); requests reach the policy
    only through :meth:`arrive`."""

    def __init__(self, instance: Instance, policy: Policy, position: int):
        check_policy(policy)
        self.position = position
        self.instance = instance
        self.policy = policy
        sim = _Sim(instance)
        if instance.prefix_index is not None and policy.reuse_aware:
            sim.blocks = BlockState(instance.prefix_index)  # this engine's own cache
        self.batches: list[Batch] = []
        sim.__dict__["builder"] = self.batches  # SimView.batch_index counts this engine's
        self._sim = sim
        view = SimView(sim, known_outputs(instance, policy.hypothetical, policy.output_fallback))
        bind_predictor(instance, policy, view, sim)
        policy.bind(view)
        if getattr(policy, "view", None) is not view:
            raise SimulationError(f"policy {policy.name!r}: bind() did not call "
                                  "super().bind(view) (docs/policies.md)")
        self.routed = np.zeros(instance.n, bool)
        self.pending: list[int] = []  # routed, not yet handed to the policy (arrival order)
        self._next = 0
        self.now = 0.0
        self.idle = False
        self.kv_now = 0  # KV the policy's requests hold (finished excluded)
        self._kv_prev = 0  # the same before the last batch
        self.n_routed = 0
        self.n_done = 0
        self._last_done = 0  # requests the last batch finished
        #: lingering KV per request: (time it leaves, inf while undecided; tokens)
        self.lingering: dict[int, tuple[float, int]] = {}
        #: a planned batch waiting for an undecided transfer's KV to leave
        self._held: Plan | None = None
        self.blocked = False
        #: the policy waits for a request not yet routed here
        self.parked = False
        self._private = 0  # with a reuse-aware policy: KV outside resident blocks
        self._price = batch_pricer(instance.cost_model)
        self._limit = 50 * (int(instance.output.sum()) + int(instance.prompt.sum())) + 1000

    # -- what a router reads (optsched.cluster.base.EngineState) ----------------------------
    def outstanding(self, t: float) -> int:
        """Routed and not finished by ``t`` (the last batch's finishes count once it ended)."""
        late = self._last_done if self.now > t else 0
        return self.n_routed - self.n_done + late

    def kv(self, t: float) -> int:
        return self._kv_prev if self.now > t else self.kv_now

    def prefix_match(self, i: int, t: float) -> int:
        """How many of request ``i``'s shareable blocks, from its first, are resident here
        (held or cached; a batch under way at ``t`` counts): a reuse-aware policy's cache
        (:class:`~optsched.policies.reuse.BlockState`), or for a reuse-blind one (whose
        unheld blocks are dropped after each batch) the blocks its requests hold."""
        ix = self.instance.prefix_index
        if ix is None:
            return 0
        mine = ix.blocks_of(i)[:int(ix.shareable[i])]
        blocks = self._sim.blocks
        if blocks is not None:
            res = blocks.resident[mine]
        else:
            held = np.zeros(ix.n_blocks, bool)
            live = np.flatnonzero(self._sim.m > 0)
            for r, h in zip(live.tolist(), ix.held(live, self._sim.m[live]).tolist()):
                held[ix.blocks_of(r)[:h]] = True
            res = held[mine]
        return int(res.argmin()) if not res.all() else int(res.size)

    @property
    def blocks(self) -> BlockState | None:
        """The engine's resident blocks (a reuse-aware policy's; None otherwise)."""
        return self._sim.blocks

    def reuse_batch(self, plan: Plan, req: np.ndarray, c: np.ndarray, ev: np.ndarray
                    ) -> tuple[int, list[int], float, dict]:
        """A reuse-aware policy's batch on this engine's cache (the single-engine rules,
        :func:`~optsched.policies.simulator._reuse_batch`): KV after it (private plus ``b``
        per resident block), the finished requests, its time, its hits and drops."""
        sim, j = self._sim, len(self.batches)
        private, fin, dur, extra = _reuse_batch(sim, plan, self.policy.name, j, req, c, ev,
                                                self._private, self._price)
        self._private = private
        assert sim.blocks is not None
        return private + sim.blocks.b * sim.blocks.n_res, fin.tolist(), dur, extra

    # -- driving -----------------------------------------------------------------------------
    def arrive(self, i: int) -> None:
        """Request ``i`` is routed here (in arrival order)."""
        self.routed[i] = True
        self.parked = False
        self.pending.append(i)
        self.n_routed += 1

    @property
    def busy(self) -> bool:
        """Whether some routed request is unfinished."""
        return self.n_done < self.n_routed

    def run_until(self, t: float) -> None:
        """Run batches while the clock is before ``t`` and there is work."""
        while self.now < t and self.busy:
            if not self.step(t):
                break

    def finish(self) -> None:
        """Run until every routed request has finished."""
        while self.busy:
            if not self.step(math.inf):
                raise SimulationError(
                    f"policy {self.policy.name!r} on engine {self.instance.name!r} position "
                    f"{self.position} stalled at t={self.now:g} with "
                    f"{self.n_routed - self.n_done} unfinished request(s)")

    def _hand_arrivals(self) -> None:
        arr = self.instance.arrival
        k = self._next
        while k < len(self.pending) and arr[self.pending[k]] <= self.now:
            k += 1
        if k > self._next:
            self.policy.on_arrivals(self.pending[self._next:k])
            self._next = k

    def step(self, horizon: float) -> bool:
        """One turn of the loop; False when the policy waits for a request not yet routed
        here (or routed to arrive at or after ``horizon``), or when its batch waits for
        lingering KV whose transfer is not yet decided (:attr:`blocked`)."""
        plan = self._held
        if plan is None:
            self._hand_arrivals()
            plan = self.policy.next_batch()
            if plan is not None and not isinstance(plan, Plan):
                raise SimulationError(f"policy {self.policy.name!r}: next_batch returned a "
                                      f"{type(plan).__name__}, not a Plan")
            if plan is None or (len(plan.req) == 0 and len(plan.evict) == 0):
                if plan is not None and (len(plan.swap_out) or len(plan.swap_in)):
                    raise SimulationError(f"policy {self.policy.name!r} swaps, but a cluster "
                                          "has no host memory (docs/semantics.md section 6)")
                if self._next < len(self.pending):
                    nxt = float(self.instance.arrival[self.pending[self._next]])
                    self.now = self._sim.now = max(self.now, nxt)
                    self.idle = True
                    return nxt < horizon
                self.parked = True
                return False
        return self._apply(plan)

    # -- lingering KV (transfers from here, optsched.cluster.pd) ---------------------------
    def linger(self, i: int, tokens: int, until: float = math.inf) -> None:
        """Request ``i``'s ``tokens`` of KV stay here until ``until`` (inf: its transfer is
        not decided yet)."""
        self.lingering[i] = (until, tokens)
        self.blocked = False

    def _room_at(self, peak: int) -> float | None:
        """The earliest start, from :attr:`now`, at which ``peak`` plus the lingering KV not
        yet left fits ``M`` (None: only once an undecided transfer is decided)."""
        M = self.instance.limits.kv_capacity
        left = sorted((u, t) for u, t in self.lingering.values() if u > self.now)
        held = sum(t for _, t in left)
        at = self.now
        for u, t in left:
            if peak + held <= M:
                break
            if math.isinf(u):
                return None
            at, held = u, held - t
        return at if peak + held <= M else None

    def _apply(self, plan: Plan) -> bool:
        name, inst, sim = self.policy.name, self.instance, self._sim
        j = len(self.batches)
        if j >= self._limit:
            raise SimulationError(f"policy {name!r} exceeded {self._limit} batches (livelock?)")
        if len(plan.swap_out) or len(plan.swap_in) or len(plan.hidden):
            raise SimulationError(f"policy {name!r} swaps or holds hidden cache, which a cluster "
                                  "does not have (docs/semantics.md section 6)")
        req, c, ev = checked_plan(plan, name, j, inst.ids)
        touched = np.concatenate([req, ev])
        if touched.size and not self.routed[touched].all():
            bad = int(touched[~self.routed[touched]][0])
            raise SimulationError(f"policy {name!r}, engine position {self.position}, batch {j}: "
                                  f"schedules request {inst.ids[bad]!r}, not routed here")
        if sim.blocks is not None:
            return self._apply_reuse(plan, req, c, ev, touched)
        lim, S, m, g, O = inst.limits, sim.S, sim.m, sim.g, inst.output
        fp = lim.kv_footprint
        if ev.size and (m[ev] <= 0).any():
            bad = int(ev[np.flatnonzero(m[ev] <= 0)[0]])
            raise SimulationError(f"policy {name!r}, batch {j}: evicts request "
                                  f"{inst.ids[bad]!r}, which holds no KV")
        kv = self.kv_now - (int(fp(m[ev]).sum()) if ev.size else 0)
        if req.size:
            mb, Sb = m[req], S[req]
            ma = mb + c
            if (ma > Sb).any() or (c < 1).any():
                k = int(np.flatnonzero((c < 1) | (ma > Sb))[0])
                raise SimulationError(f"policy {name!r}, batch {j}: request "
                                      f"{inst.ids[int(req[k])]!r} processes {int(c[k])} tokens "
                                      f"with {int(Sb[k] - mb[k])} available")
            kv += int(fp(ma).sum() - fp(mb).sum())
            if kv > lim.kv_capacity:
                raise SimulationError(f"policy {name!r}, batch {j}: KV after the batch {kv} > "
                                      f"M = {lim.kv_capacity}")
        at = self._room_at(kv) if self.lingering else self.now
        if at is None:
            self._held, self.blocked = plan, True
            return False
        self._held, self.blocked = None, False
        stated = at > self.now
        self.now = sim.now = at
        if ev.size:
            _release(lim, m, sim.hid, ev, 0)
        fin: list[int] = []
        dur = 0.0
        if req.size:
            dec = (mb == Sb - 1) & (g[req] >= 1)
            m[req] = ma
            gen = req[ma == Sb]
            if gen.size:
                g[gen] += 1
                S[gen] += 1
                done = gen[g[gen] >= O[gen]]
                if done.size:
                    kv -= _release(lim, m, sim.hid, done, 0)[0]
                    fin = done.tolist()
            dur = self._price(c, mb, dec, int(np.count_nonzero(dec)))
        start = self.now
        if self.idle:
            if touched.size == 0 or inst.arrival[touched].max() < start:
                stated = True
            self.idle = False
        self.batches.append(Batch(start, stated, req.tolist(), c.tolist(), ev.tolist(), fin,
                                  start + dur))
        self._kv_prev, self.kv_now = self.kv_now, kv
        self.n_done += len(fin)
        self._last_done = len(fin)
        self.now = sim.now = start + dur
        self.policy.on_batch_end(plan, np.asarray(fin, np.int64))
        return True

    def _apply_reuse(self, plan: Plan, req, c, ev, touched) -> bool:
        """:meth:`_apply` for a reuse-aware policy (no lingering KV: replicas only)."""
        kv, fin, dur, extra = self.reuse_batch(plan, req, c, ev)
        start, stated = self.now, False
        if self.idle:
            if touched.size == 0 or self.instance.arrival[touched].max() < start:
                stated = True
            self.idle = False
        self.batches.append(Batch(start, stated, req.tolist(), c.tolist(), ev.tolist(), fin,
                                  start + dur, list(extra["hits"]), list(extra["drop"])))
        self._kv_prev, self.kv_now = self.kv_now, kv
        self.n_done += len(fin)
        self._last_done = len(fin)
        self.now = self._sim.now = start + dur
        self.policy.on_batch_end(plan, np.asarray(fin, np.int64))
        return True


__all__ = ["Batch", "EngineRun"]
