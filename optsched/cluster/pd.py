"""Prefill/decode disaggregation (DistServe, OSDI'24; Splitwise, ISCA'24): prompts run on
``prefill`` engines, each under its own copy of the policy; a request's KV then moves over the
transfer link to a ``decode`` engine, which runs its decodes (docs/semantics.md section 6,
"Clusters").

* **Prefill.** Each arrival goes to the prefill engine with the fewest outstanding prompts
  (Vidur's LOR among the engines whose limits hold the prompt). Prefill engines run the
  policy on the *prefill stage*: every request with one output token, so a request leaves the
  policy when its prompt is done and its first token generated. Its KV stays on the engine
  (lingering, :class:`~optsched.cluster.engine.EngineRun`) until its transfer ends; a batch
  that would not fit with it waits.
* **Transfer.** Requests whose prompt is done wait, first come first served, for a decode
  engine with room: the one with the fewest outstanding requests among those whose reserved
  KV plus the request's peak ``fp_d(I + O - 1)`` fits ``M_d``. The transfer of ``k = I``
  tokens is listed on the prefill engine's batch ending at the decision (or, when that engine
  is idle, on a batch with no entries at the decision time), so ``ts`` is that batch's end
  and ``te = ts + transfer_time(I)``.
* **Decode.** A decode engine reserves each admitted request's KV peak from the decision to
  its last token, so neither ``TRANSFER_OVERFLOW`` nor ``KV_OVERFLOW`` can occur and no
  decode is ever evicted: this reads the true output length ``O`` (like the ``*-full``
  reservations; DistServe's decode instances use vLLM's paged memory instead). Its batches
  run, as soon as one is ready (``te`` passed), every admitted request in admission order up
  to ``C`` tokens and ``max_batch_size``, one decode token each (continuous batching).

The cluster must have engines of roles ``prefill`` and ``decode`` only (and so a link).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..instance import Instance
from ..policies.errors import SimulationError
from ..policies.simulator import Policy, batch_pricer
from ..schedule import Schedule
from .base import EngineState, RouterError, register_router
from .engine import Batch, EngineRun
from .replicas import merge

#: the gap (relative, at least absolute 1e-9) between a decode batch's end, where it frees
#: KV, and a transfer that counts on that KV: the evaluator recomputes the batch's end from
#: its own clock, which may differ from the router's in the last bits
GAP = 1e-9


def _after(x: float) -> float:
    """A time clearly after ``x`` (by :data:`GAP`), robust to rounding of ``x``."""
    return x + GAP * max(1.0, abs(x))


@register_router(
    "pd", "prefill/decode disaggregation: prompts on prefill engines (least outstanding), KV "
    "moved to the decode engine with room and the fewest outstanding requests, decodes "
    "there by continuous batching with the KV peak reserved (reads O)",
    "DistServe (OSDI'24) sections 3-4; Splitwise (ISCA'24) section 4", kind="disaggregated")
class Disaggregated:
    name = "pd"

    def bind(self, instance: Instance, engines: Sequence[EngineState]) -> None:
        self.engines = engines

    def route(self, i: int, t: float, candidates: Sequence[int]) -> int:
        return min(candidates, key=lambda k: (self.engines[k].outstanding(t), k))


@dataclass
class _Decoder:
    """A decode engine: admitted requests (position, ready time te), reserved KV, releases."""

    position: int
    M: int
    C: int
    max_bs: int
    price: Callable
    fp: Callable
    now: float = 0.0
    reserved: int = 0
    running: list[list] = field(default_factory=list)  # [request, te, m, g, O]
    releases: list[tuple[float, int]] = field(default_factory=list)
    batches: list[Batch] = field(default_factory=list)
    n_routed: int = 0
    #: end times of the batches that finished a request, one per request (non-decreasing)
    finished_at: list[float] = field(default_factory=list)

    def outstanding(self, t: float) -> int:
        """Requests sent here and not finished by ``t``."""
        return self.n_routed - bisect.bisect_right(self.finished_at, t)

    def reserved_before(self, ts: float) -> int:
        """KV reserved at ``ts``: releases clearly before it (:func:`_after`) are free (at
        equal times a transfer arrives before a batch frees, section 6)."""
        return self.reserved - sum(tok for r, tok in self.releases if _after(r) <= ts)

    def settle(self, t: float) -> None:
        """Forget releases clearly before ``t``."""
        keep = []
        for r, tok in self.releases:
            if _after(r) <= t:
                self.reserved -= tok
            else:
                keep.append((r, tok))
        self.releases = keep

    def next_time(self) -> float:
        if not self.running:
            return math.inf
        return max(self.now, min(x[1] for x in self.running))

    def step(self) -> float:
        """Run one decode batch; returns its end (the time its finished requests free)."""
        start = self.next_time()
        ready = [x for x in self.running if x[1] <= start][: self.max_bs][: self.C]
        m = np.array([x[2] for x in ready], np.int64)
        c = np.ones(m.size, np.int64)
        dur = self.price(c, m, np.ones(m.size, bool), m.size)
        end = start + dur
        fin = []
        for x in ready:
            x[2] += 1
            x[3] += 1
            if x[3] >= x[4]:
                fin.append(x[0])
                self.releases.append((end, x[5]))
                self.finished_at.append(end)
        done = set(fin)
        self.running = [x for x in self.running if x[0] not in done]
        self.batches.append(Batch(start, False, [x[0] for x in ready], c.tolist(), [], fin, end))
        self.now = end
        return end


def run_disaggregated(instance: Instance, make_policy: Callable[[], Policy], router
                      ) -> Schedule:
    """Prefill engines, transfers and decode engines (module docstring)."""
    cl = instance.cluster
    roles = [instance.engine(k).role for k in range(instance.n_engines)]
    if cl is None or cl.transfer is None or set(roles) != {"prefill", "decode"}:
        raise RouterError(f"router {router.name!r} needs a cluster of 'prefill' and 'decode' "
                          f"engines with a transfer link; this instance has roles {sorted(set(roles))}")
    link = cl.transfer
    pre = [k for k, r in enumerate(roles) if r == "prefill"]
    dec = [k for k, r in enumerate(roles) if r == "decode"]
    ones = np.ones(instance.n, np.int64)
    P = {k: EngineRun(_stage(instance, k, ones), make_policy(), k) for k in pre}
    D = {}
    for k in dec:
        e = instance.engine(k)
        lim = e.limits
        D[k] = _Decoder(k, lim.kv_capacity, lim.max_batch_tokens,  # type: ignore[union-attr]
                        lim.max_batch_size or 1 << 60, batch_pricer(e.cost_model),  # type: ignore
                        lim.kv_footprint)  # type: ignore[union-attr]
    router.bind(instance, [P.get(k) or D[k] for k in range(instance.n_engines)])
    run = _Run(instance, P, D, link)
    arr = instance.arrival
    for i in np.argsort(arr, kind="stable").tolist():
        t = float(arr[i])
        run.advance(t)
        cand = [k for k in pre if P[k].instance.limits.kv_footprint(int(instance.prompt[i]))
                <= P[k].instance.limits.kv_capacity]
        k = router.route(i, t, cand)
        P[k].arrive(i)
    run.advance(math.inf)
    if run.queue or any(e.busy for e in P.values()) or any(d.running for d in D.values()):
        raise SimulationError(
            f"router {router.name!r} stalled with requests left: queue {len(run.queue)}, "
            f"prefill {[(e.n_routed - e.n_done, e.blocked, e.parked) for e in P.values()]}, "
            f"decode {[len(d.running) for d in D.values()]}")
    per = [P[k].batches if k in P else D[k].batches for k in range(instance.n_engines)]
    return merge(instance, per, run.transfers)


def _stage(instance: Instance, k: int, ones: np.ndarray) -> Instance:
    """The prefill stage on engine ``k``: every request with one output token."""
    e = instance.engine(k)
    return Instance.from_columns(f"{instance.name}-prefill-{e.id}", e.limits,  # type: ignore
                                 e.cost_model, instance.ids, instance.arrival,  # type: ignore
                                 instance.prompt, ones)


class _Run:
    """The event loop of the prefill engines, the transfer queue and the decode engines."""

    def __init__(self, instance: Instance, P: dict, D: dict, link):
        self.inst, self.P, self.D, self.link = instance, P, D, link
        self.queue: list[tuple[float, int, int]] = []  # (prompt done at, request, engine) FIFO
        self.q_at = math.inf  # when the queue's head is tried next
        self.transfers: dict[tuple[int, int], list[tuple[int, int]]] = {}
        self.idle_batch: dict[int, int] = {}

    def advance(self, t: float) -> None:
        """Process every event before ``t`` (all of them when ``t`` is inf)."""
        while True:
            events = []
            if self.queue:
                events.append((self.q_at, 0, -1))
            for k, d in self.D.items():
                events.append((d.next_time(), 1, k))
            for k, e in self.P.items():
                if e.busy and not e.blocked and not e.parked:
                    events.append((e.now, 2, k))
            events = [x for x in events if x[0] < t and math.isfinite(x[0])]
            if not events:
                return
            when, kind, k = min(events)
            if kind == 0:
                self._decide(when)
            elif kind == 1:
                end = self.D[k].step()
                if self.D[k].releases:
                    self.q_at = min(self.q_at, _after(end)) if self.queue else self.q_at
            else:
                e = self.P[k]
                before = len(e.batches)
                if not e.step(t):
                    if e.blocked and not self.queue:
                        raise SimulationError(f"prefill engine {self.inst.engine_ids[k]!r} "
                                              "blocked by lingering KV with no transfer pending")
                    continue
                if len(e.batches) > before:
                    self._prompts_done(k)

    def _prompts_done(self, k: int) -> None:
        e = self.P[k]
        b = e.batches[-1]
        O = self.inst.output
        for i in b.finished:
            if O[i] > 1:
                e.linger(i, int(e.instance.limits.kv_footprint(int(self.inst.prompt[i]))))
                self.queue.append((b.end, i, k))
                self.q_at = min(self.q_at, b.end)

    def _decide(self, T: float) -> None:
        """Start the transfers of the queue's head requests that a decode engine has room
        for at ``T`` (first come first served)."""
        self.q_at = math.inf
        inst = self.inst
        while self.queue and self.queue[0][0] <= T:
            _, i, k = self.queue[0]
            e = self.P[k]
            ts = e.batches[-1].end if e.batches and e.batches[-1].end >= T else T  # _carrier's
            I, O = int(inst.prompt[i]), int(inst.output[i])
            best = None
            for d in self.D.values():
                peak = int(d.fp(I + O - 1))
                if d.reserved_before(ts) + peak <= d.M and peak <= d.M:
                    key = (d.outstanding(T), d.position)
                    if best is None or key < best[0]:
                        best = (key, d, peak)
            if best is None:  # tried again once a decode engine frees KV
                later = [r for d in self.D.values() for r, _ in d.releases if _after(r) > ts]
                self.q_at = _after(min(later)) if later else math.inf
                return
            self.queue.pop(0)
            _, d, peak = best
            d.settle(T)  # not ts: a later decision may start its transfer earlier
            d.reserved += peak
            d.n_routed += 1
            j = self._carrier(k, T)
            ts = e.batches[j].end
            te = ts + float(self.link.time(I))
            e.linger(i, int(e.instance.limits.kv_footprint(I)), te)
            d.running.append([i, te, I, 1, O, peak])
            self.transfers.setdefault((k, j), []).append((i, d.position))
        if self.queue:
            self.q_at = max(T, self.queue[0][0]) if self.queue[0][0] > T else math.inf

    def _carrier(self, k: int, T: float) -> int:
        """The batch of prefill engine ``k`` that lists a transfer decided at ``T``: the one
        running at ``T`` (or ending there), else a new batch without entries at ``T``."""
        e = self.P[k]
        if e.batches and e.batches[-1].end >= T:
            return len(e.batches) - 1
        e.batches.append(Batch(T, True, [], [], [], [], T))
        e.now = e._sim.now = max(e.now, T)
        return len(e.batches) - 1


__all__ = ["Disaggregated", "run_disaggregated"]
