"""The simulator: runs a policy over an :class:`~optsched.instance.Instance` and returns a
:class:`~optsched.schedule.Schedule`. It computes **no metrics**; callers judge the
schedule with :func:`optsched.evaluate` (the one validator/evaluator).

The loop (InferMax Algorithm 1, lines 3-7; Vidur's "the scheduler produces the next
batch" hook):

1. **Arrival gating** (online): requests whose ``arrival <= clock`` are handed to the
   policy (:meth:`Policy.on_arrivals`); a policy never sees a request before it arrives.
2. ``plan = policy.next_batch()``: entries ``(request, c)`` and evictions, built from a
   read-only :class:`SimView` of the state (per request ``S``, ``m``, ``g``; prompt,
   arrival and the *known* output lengths; limits; clock).
3. If the plan is empty and requests are still to arrive, the clock **jumps** to the next
   arrival (the schedule then states that batch's start explicitly when the evaluator's
   default, "as early as possible", would be earlier). An empty plan with nothing left
   to arrive is a stalled policy: :class:`SimulationError`.
4. The plan is applied with the rules of semantics section 3 (evictions drop ``m``; entries add
   ``c``; ``m == S`` generates a token; ``g == O`` finishes and frees the KV) and priced
   with ``instance.cost_model.batch_times`` (the definition the evaluator uses; a
   decode-only batch under the linear model uses ``LinearCost.decode_batch_time``, see
   :func:`batch_pricer`); the clock advances by the batch's duration. The KV after
   the batch (counting requests that finish in it, in whole blocks) is checked
   against ``M``; a plan that exceeds it, or processes more tokens than are
   available, raises :class:`SimulationError` (a policy bug; schedules never leave
   the simulator infeasible in memory).
5. :meth:`Policy.on_batch_end` tells the policy which requests finished.

**What a policy may see.** ``SimView.known_output`` holds the true output lengths only
for a *hypothetical* policy (semantics section 6). For every other policy it holds
``predicted_output`` where the instance gives one and ``-1`` elsewhere -- except that a
policy class with ``output_fallback = True`` (MC-SF, which assumes accurate predictions)
gets the true length where no prediction is given; its registry description says so.
Finished requests' lengths are observable (``g`` at finish), which is what online
estimators (InferMax's histogram) use. A policy with a ``predictor`` attribute (a
:class:`~optsched.policies.predictors.Predictor`) also gets
``SimView.predict_remaining(idx)``: the predictor's answer for the tokens still to generate,
computed here from the truth the policy never sees; the ``exact`` predictor is the truth
itself and is refused on a policy that is not hypothetical.

**Decision time.** Pass a :class:`SimStats` to :func:`simulate_policy` to get the wall time
spent inside the policy's hooks (``on_arrivals``, ``next_batch``, ``on_batch_end``: the
policy's own scheduling time, EcoServe's
"scheduling time overhead") and the number of calls.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple, NoReturn

import numpy as np

from ..cost import LinearCost, UnitCost
from ..errors import OptschedError
from ..instance import Instance, Limits
from ..schedule import Schedule, ScheduleBuilder
from .errors import PolicyError, SimulationError, SimulationTimeout, UserPolicyError
from .reuse import BlockState, auto_drops


def _user_failure(policy, hook: str, batch: int | None, e: Exception) -> NoReturn:
    """Re-raise an exception raised inside a policy's ``hook``: as a :class:`UserPolicyError`
    naming the policy, the hook and the batch when the policy is a user's (its class lives
    outside ``optsched``: bad input, exit 2), else ``e`` itself (a bug of ours). optsched's
    own errors pass through unchanged."""
    if isinstance(e, OptschedError) or type(policy).__module__.split(".")[0] == "optsched":
        raise e
    where = "before the first batch" if batch is None or batch < 0 else f"at batch {batch}"
    first = str(e).splitlines()[0] if str(e) else ""
    raise UserPolicyError(f"policy {policy.name!r} ({type(policy).__qualname__}): {hook}() "
                          f"raised {type(e).__name__}{': ' + first if first else ''} {where}"
                          ) from e


class Plan(NamedTuple):
    """One batch: entries ``req[k]`` processing ``tokens[k]``, and evicted requests; optionally
    swap-outs (``swap_out[k]`` moves ``swap_out_tokens[k]`` cached tokens to host memory) and
    swap-ins (all host tokens of each request come back), applied in the order evictions,
    swap-outs, swap-ins, entries (semantics section 6, swap preemption).

    ``hidden`` (optional, one flag per entry; empty = all KV) gives each entry's cache type
    (semantics section 6, hidden cache): the request holds, or starts, a hidden cache. An
    entry's type must match the cache its request holds; switching means evicting first.

    ``hits`` (optional, one per entry; empty = none) and ``drops`` (dense block indices,
    :attr:`SimView.prefix`) are a reuse-aware policy's prefix hits and dropped blocks
    (semantics section 6, "Prefix reuse"; :mod:`optsched.policies.reuse`).

    Indices are 0-based instance positions. Arrays or lists of ints are accepted.
    """

    req: np.ndarray | Sequence[int]
    tokens: np.ndarray | Sequence[int]
    evict: np.ndarray | Sequence[int]
    swap_out: Sequence[int] = ()
    swap_out_tokens: Sequence[int] = ()
    swap_in: Sequence[int] = ()
    hidden: np.ndarray | Sequence[bool] = ()
    hits: np.ndarray | Sequence[int] = ()
    drops: np.ndarray | Sequence[int] = ()


EMPTY_PLAN = Plan(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))


def _ro(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v


class SimView:
    """Read-only view of the simulation state handed to a policy.

    ``S``, ``m``, ``g`` are live (they change after every batch) but not writable.
    ``known_output[i]`` is ``-1`` when the policy may not know request i's output length.
    """

    def __init__(self, sim: _Sim, known_output: np.ndarray):
        inst = sim.instance
        self.instance_name = inst.name
        self.n = inst.n
        self.limits = inst.limits
        self.cost_model = inst.cost_model
        self.prompt = _ro(inst.prompt)
        self.arrival = _ro(inst.arrival)
        self.known_output = _ro(known_output)
        self.S = _ro(sim.S)
        self.m = _ro(sim.m)
        self.g = _ro(sim.g)
        #: tokens of each request's KV held in host memory (swap preemption); a request with
        #: ``h > 0`` must be swapped in before it is processed
        self.h = _ro(sim.h)
        #: each request's cache type: True = hidden cache (meaningful while ``m > 0``)
        self.hidden = _ro(sim.hid)
        #: the requests' block ids as dense indices (semantics: prefix reuse), None without
        self.prefix = inst.prefix_index
        #: resident blocks and their holds, kept for a reuse-aware policy (None otherwise)
        self.blocks: BlockState | None = sim.blocks
        self._sim = sim
        # set by the simulator for a policy with a predictor
        self.predict_remaining: Callable[[np.ndarray], np.ndarray] | None = None

    # request classes ("rt", "be" or "") and SLOs (NaN where none): known at arrival, used
    # by the hybrid policies (bros); every other policy ignores them, so they are built on
    # first use (three passes over the requests, ~17 ms on the 19K-request trace)
    @cached_property
    def cls(self) -> tuple[str, ...]:
        """Each request's class: ``"rt"``, ``"be"`` or ``""``."""
        return tuple(r.cls or "" for r in self._sim.instance.requests)

    @cached_property
    def ttft_slo(self) -> np.ndarray:
        """Each request's TTFT SLO (NaN where none)."""
        return _ro(np.array([math.nan if r.ttft_slo is None else r.ttft_slo
                             for r in self._sim.instance.requests], np.float64))

    @cached_property
    def tpot_slo(self) -> np.ndarray:
        """Each request's TPOT SLO (NaN where none)."""
        return _ro(np.array([math.nan if r.tpot_slo is None else r.tpot_slo
                             for r in self._sim.instance.requests], np.float64))

    @property
    def now(self) -> float:
        """The clock: the start time of the batch being planned."""
        return self._sim.now

    @property
    def batch_index(self) -> int:
        return len(self._sim.builder)

    def fp(self, tokens):
        """KV tokens charged for ``tokens`` cached tokens (whole blocks)."""
        return self.limits.kv_footprint(tokens)

    def hit_run(self, i: int) -> int:
        """The longest prefix hit request ``i`` can take in the next batch: whole resident
        blocks from its cached tokens (a block boundary) up to its shareable blocks
        (semantics section 6, "Prefix reuse"); 0 for a reuse-blind policy."""
        if self.blocks is None:
            return 0
        return self.blocks.hit_run(i, int(self.m[i]))


class Policy(ABC):
    """Base class of scheduling policies.

    Subclasses implement :meth:`next_batch`; the hooks keep their own queues up to date.
    :meth:`bind` starts a run and sets up all per-run state, so one object can be run again
    (every registered policy is tested for this).
    ``name`` and ``hypothetical`` are set by the registry.
    """

    name: str = ""
    hypothetical: bool = False
    #: non-hypothetical policies that need output lengths may opt in to the true length
    #: where the instance gives no prediction (documented in their registry entry)
    output_fallback: bool = False
    #: a policy that states prefix hits and drops (semantics section 6, "Prefix reuse"); the
    #: others run blind to block ids and the simulator drops every unheld block for them
    reuse_aware: bool = False

    def bind(self, view: SimView) -> None:
        self.view = view

    @abstractmethod
    def on_arrivals(self, idx: list[int]) -> None:
        ...

    @abstractmethod
    def next_batch(self) -> Plan | None:
        ...

    @abstractmethod
    def on_batch_end(self, plan: Plan, finished: np.ndarray) -> None:
        ...

    def mechanisms(self) -> dict[str, float | int]:
        """What the policy's own mechanisms did in the last run (group
        sizes, pipelined share, drops, ...), for :func:`optsched.metrics.serving.mechanism_stats`;
        empty for a policy with nothing to report."""
        return {}


def known_outputs(instance: Instance, hypothetical: bool, fallback: bool) -> np.ndarray:
    """The output lengths a policy may see (``-1`` = unknown); see the module docstring."""
    if hypothetical:
        return instance.output.copy()
    pred = np.array(
        [-1 if r.predicted_output is None else r.predicted_output for r in instance.requests],
        dtype=np.int64,
    )
    if fallback:
        pred = np.where(pred < 0, instance.output, pred)
    return pred


@dataclass
class SimStats:
    """Filled by :func:`simulate_policy`: time inside ``next_batch`` and the number of calls."""

    decision_seconds: float = 0.0
    #: the same in CPU time of this thread (steadier than wall time on a shared machine)
    decision_cpu_seconds: float = 0.0
    decisions: int = 0
    batches: int = 0

    @property
    def seconds_per_decision(self) -> float:
        return self.decision_seconds / self.decisions if self.decisions else 0.0


def bind_predictor(instance: Instance, policy: Policy, view: SimView, sim: _Sim) -> None:
    """Give ``view`` the policy's predictor hook (module docstring)."""
    predictor = getattr(policy, "predictor", None)
    if predictor is None:
        return
    if predictor.exact and not policy.hypothetical:
        raise SimulationError(
            f"policy {policy.name!r} uses the exact length predictor but is not declared "
            "hypothetical"
        )
    out = instance.output.copy()
    out.flags.writeable = False
    view.predict_remaining = predictor.bind(out, view.g)


class _Sim:
    def __init__(self, instance: Instance):
        self.instance = instance
        n = instance.n
        self.S = instance.prompt.copy()
        self.m = np.zeros(n, np.int64)
        self.g = np.zeros(n, np.int64)
        self.h = np.zeros(n, np.int64)
        self.hid = np.zeros(n, bool)
        self.host_kv = 0
        self.now = 0.0
        self.blocks: BlockState | None = None

    @cached_property
    def builder(self) -> ScheduleBuilder:
        """The Python path's schedule under construction (the compiled path, which builds
        its own columns, never makes it: an id index of every request)."""
        return ScheduleBuilder(ids=self.instance.ids)


def batch_pricer(cost_model):
    """``price(tokens, cached, decode, n_decode) -> seconds`` for one batch.

    Every batch is priced by the cost model: ``batch_times`` (the evaluator's definition),
    or for decode-only batches under :class:`~optsched.cost.LinearCost` its
    ``decode_batch_time`` fast path (equal up to float rounding;
    ``tests/policies/test_simulator.py`` checks it). Only the clock, i.e. arrival gating,
    depends on this; the evaluator re-prices every batch.
    """
    bt = cost_model.batch_times
    if isinstance(cost_model, UnitCost):
        return lambda c, mb, dec, nd: 1.0
    if isinstance(cost_model, LinearCost):
        fast = cost_model.decode_batch_time

        def price(c, mb, dec, nd):
            n = c.size
            if nd == n:
                return fast(n, float(mb.sum()))
            return float(bt(np.zeros(n, np.int64), c, mb, dec, 1)[0])

        return price
    return lambda c, mb, dec, nd: float(bt(np.zeros(c.size, np.int64), c, mb, dec, 1)[0])


#: decisions between two looks at the clock when a deadline is set
DEADLINE_EVERY = 64
#: output tokens from which ``simulate_policy(fast=None)`` runs a built-in policy's compiled
#: kernel: below it the Python loop (~60 us a batch) finishes before numba is imported and
#: its cached kernels loaded (~1-2 s); benchmarks/simulate.py measures both paths
FAST_MIN_OUTPUT_TOKENS = 50_000


def simulate_policy(instance: Instance, policy: Policy, max_batches: int | None = None,
                    stats: SimStats | None = None, deadline: float | None = None, *,
                    fast: bool | None = None) -> Schedule:
    """Run ``policy`` over ``instance``; return the schedule (no metrics). ``stats``, if
    given, receives the policy's decision time. ``deadline`` (a ``time.perf_counter()``
    value) stops the run with :class:`SimulationTimeout` once passed, checked every
    :data:`DEADLINE_EVERY` decisions (a command's ``--time-limit``, optsched/solving/budget.py).

    A built-in policy that has a compiled kernel (:mod:`optsched.policies.fast`) can run
    there: the same schedule, batch for batch (``tests/policies/test_fast.py``); its ``stats``
    time the whole compiled run, an upper bound on the decision time
    (:func:`~optsched.policies.fast.simulate_fast`). ``fast=True`` asks for the kernel,
    ``fast=False`` for this Python loop (the reference, and the only path for user
    policies); ``None`` (the default) takes the kernel when the instance has at least
    :data:`FAST_MIN_OUTPUT_TOKENS` output tokens, where it pays for loading numba."""
    check_policy(policy)
    if not instance.single_engine:  # semantics section 6, clusters: a router places requests
        raise SimulationError(
            f"policy {policy.name!r} runs one engine, but the instance declares a cluster of "
            f"{instance.n_engines} engines; route it: optsched simulate --router NAME, or "
            "optsched.cluster.simulate(instance, policy, router=NAME)")
    sim = _Sim(instance)
    if instance.prefix_index is not None and policy.reuse_aware:
        sim.blocks = BlockState(instance.prefix_index)
    n = instance.n
    lim = instance.limits
    M, b = lim.kv_capacity, lim.block_size
    fp = lim.kv_footprint
    S, m, g, hid = sim.S, sim.m, sim.g, sim.hid
    n_hidden = 0  # requests holding hidden cache: the KV-only fast path applies while 0
    rho = instance.cost_model.rho
    O = instance.output
    arr = instance.arrival
    known = known_outputs(instance, policy.hypothetical, policy.output_fallback)
    view = SimView(sim, known)
    bind_predictor(instance, policy, view, sim)
    try:
        policy.bind(view)
    except Exception as e:
        _user_failure(policy, "bind", None, e)
    if getattr(policy, "view", None) is not view:
        raise SimulationError(f"policy {policy.name!r}: bind() did not call super().bind(view), "
                              "so the policy has no view of the simulation (docs/policies.md)")
    limit = max_batches if max_batches is not None else 50 * (int(O.sum()) + int(S.sum())) + 1000
    if fast is None:
        fast = int(O.sum()) >= FAST_MIN_OUTPUT_TOKENS
    if fast and sim.blocks is None:
        from .fast import simulate_fast  # lazy: numba is imported only when a kernel runs

        compiled = simulate_fast(instance, policy, known, limit, stats)
        if compiled is not None:
            return auto_drops(instance, compiled) if instance.has_prefix else compiled
    elif fast and stats is None:
        # lazy: numba is imported only when a kernel runs
        from .fast_cached import simulate_cached_fast

        compiled = simulate_cached_fast(instance, policy, limit)
        if compiled is not None:
            return compiled
    price = batch_pricer(instance.cost_model)
    builder = sim.builder
    add = builder.add_indexed
    searchsorted = np.searchsorted
    count_nonzero = np.count_nonzero

    order = np.argsort(arr, kind="stable")
    arr_sorted = arr[order]
    arr_list = arr_sorted.tolist()
    order_list = order.tolist()
    nxt = 0  # next arrival (position in order)
    next_arrival = arr_list[0] if n else math.inf
    done = 0
    kv = 0  # KV in use (blocks counted whole), finished requests excluded
    idle = False
    empty = np.zeros(0, np.int64)
    now = 0.0
    clock = time.perf_counter
    cpu_clock = time.thread_time
    decide = decide_cpu = t0 = c0 = 0.0
    calls = 0
    timing = stats is not None  # the hooks' clocks run only when their times are asked for

    while done < n:
        if next_arrival <= now:
            hi = int(searchsorted(arr_sorted, now, side="right"))
            if timing:
                t0, c0 = clock(), cpu_clock()
            try:
                policy.on_arrivals(order_list[nxt:hi])
            except Exception as e:
                _user_failure(policy, "on_arrivals", len(builder), e)
            if timing:
                decide += clock() - t0
                decide_cpu += cpu_clock() - c0
            nxt = hi
            next_arrival = arr_list[nxt] if nxt < n else math.inf
        if timing:
            t0, c0 = clock(), cpu_clock()
        try:
            plan = policy.next_batch()
        except Exception as e:
            _user_failure(policy, "next_batch", len(builder), e)
        if timing:
            decide += clock() - t0
            decide_cpu += cpu_clock() - c0
        calls += 1
        if plan is not None and not isinstance(plan, Plan):
            raise SimulationError(
                f"policy {policy.name!r}, batch {len(builder)}: next_batch returned a "
                f"{type(plan).__name__}, not a Plan (or None to wait for the next arrival)")
        if deadline is not None and calls % DEADLINE_EVERY == 0 and clock() > deadline:
            raise SimulationTimeout(
                f"policy {policy.name!r} stopped at the time limit after {len(builder)} "
                f"batches ({done} of {n} requests finished)")
        if plan is None or (len(plan.req) == 0 and len(plan.evict) == 0
                            and len(plan.swap_out) == 0 and len(plan.swap_in) == 0):
            if nxt < n:
                now = sim.now = max(now, next_arrival)
                idle = True
                continue
            raise SimulationError(
                f"policy {policy.name!r} stalled at t={now:g} with {n - done} unfinished "
                f"request(s) and no arrivals left"
            )
        j = len(builder)
        if j >= limit:
            raise SimulationError(f"policy {policy.name!r} exceeded {limit} batches (livelock?)")
        req, c, ev = checked_plan(plan, policy.name, j, instance.ids)
        if sim.blocks is not None:
            kv, fin, dur, extra = _reuse_batch(sim, plan, policy.name, j, req, c, ev, kv, price)
            done += int(fin.size)
            start = None
            if idle:
                touched = np.concatenate([req, ev])
                if touched.size == 0 or arr[touched].max() < now:
                    start = now
                idle = False
            add(req.tolist(), c.tolist(), ev.tolist(), start, **extra)
            now = sim.now = now + dur
            if timing:
                t0, c0 = clock(), cpu_clock()
            policy.on_batch_end(plan, fin)
            if timing:
                decide += clock() - t0
                decide_cpu += cpu_clock() - c0
            continue
        if ev.size:
            mev = m[ev]
            if (mev <= 0).any():
                bad = int(ev[np.flatnonzero(mev <= 0)[0]])
                raise SimulationError(
                    f"policy {policy.name!r}, batch {j}: evicts request "
                    f"{instance.ids[bad]!r}, which holds no KV"
                )
            freed, n_hidden = _release(lim, m, hid, ev, n_hidden)
            kv -= freed
        moved = 0
        if len(plan.swap_out) or len(plan.swap_in) or sim.host_kv:
            kv, moved = _apply_swaps(sim, plan, policy.name, j, kv, req, ev)
        if req.size:
            mb = m[req]
            Sb = S[req]
            ma = mb + c
            if (ma > Sb).any() or (c < 1).any():
                k = int(np.flatnonzero((c < 1) | (ma > Sb))[0])
                raise SimulationError(
                    f"policy {policy.name!r}, batch {j}: request {instance.ids[int(req[k])]!r} "
                    f"processes {int(c[k])} tokens with {int(Sb[k] - mb[k])} available"
                )
            dec = (mb == Sb - 1) & (g[req] >= 1)
            hmask = np.asarray(plan.hidden, bool) if len(plan.hidden) else None
            if hmask is not None or n_hidden:
                hmask, n_hidden = _apply_cache_types(instance, policy.name, j, req, mb, hmask,
                                                     hid, n_hidden)
            m[req] = ma
            if n_hidden and hmask is not None:  # set by _apply_cache_types
                kv += int(lim.footprint(ma, hmask).sum() - lim.footprint(mb, hmask).sum())
            else:
                kv += int(fp(ma).sum() - fp(mb).sum()) if b > 1 else int(c.sum())
            if kv > M:
                raise SimulationError(
                    f"policy {policy.name!r}, batch {j}: KV after the batch {kv} > M = {M}"
                )
            gen = req[ma == Sb]
            if gen.size:
                g[gen] += 1
                S[gen] += 1
                fin = gen[g[gen] >= O[gen]]
                if fin.size:
                    freed, n_hidden = _release(lim, m, hid, fin, n_hidden)
                    kv -= freed
                    done += int(fin.size)
            else:
                fin = empty
            dur = price(c, mb, dec, count_nonzero(dec))
            if hmask is not None and rho:
                dur += rho * float(mb[hmask].sum())  # semantics section 6: rho per cached token
        else:
            hmask = None
            fin = empty
            dur = 0.0
        if moved:
            dur += instance.cost_model.kswap * moved
        start = None
        if idle:
            touched = np.concatenate([req, ev])
            if touched.size == 0 or arr[touched].max() < now:
                start = now
            idle = False
        hflags = hmask.tolist() if hmask is not None and hmask.any() else ()
        if len(plan.swap_out) or len(plan.swap_in):
            add(req.tolist(), c.tolist(), ev.tolist(), start, list(plan.swap_out),
                list(plan.swap_out_tokens), list(plan.swap_in), hflags)
        else:
            add(req.tolist(), c.tolist(), ev.tolist(), start, hidden=hflags)
        now = sim.now = now + dur
        if timing:
            t0, c0 = clock(), cpu_clock()
        try:
            policy.on_batch_end(plan, fin)
        except Exception as e:
            _user_failure(policy, "on_batch_end", len(builder) - 1, e)
        if timing:
            decide += clock() - t0
            decide_cpu += cpu_clock() - c0
    if stats is not None:
        stats.decision_seconds = decide
        stats.decision_cpu_seconds = decide_cpu
        stats.decisions = calls
        stats.batches = len(builder)
    if instance.has_prefix and sim.blocks is None:
        return auto_drops(instance, builder.build())
    return builder.build()


def _reuse_batch(sim: _Sim, plan: Plan, name: str, j: int, req: np.ndarray, c: np.ndarray,
                 ev: np.ndarray, kv: int, price) -> tuple[int, np.ndarray, float, dict]:
    """One batch of a reuse-aware policy (semantics section 6, "Prefix reuse"): evictions
    release their blocks, drops, hits, computed tokens complete blocks, memory ``b * |R| +
    private <= M``, finishing releases after the batch. ``kv`` is the private KV in use.
    Returns it, the finished requests, the batch's time and the builder's hits and drops."""
    inst, blocks = sim.instance, sim.blocks
    assert blocks is not None
    m, S, g, O = sim.m, sim.S, sim.g, inst.output
    ids = inst.ids
    blocks.released = []
    if len(plan.swap_out) or len(plan.swap_in) or len(plan.hidden):
        raise SimulationError(f"policy {name!r}, batch {j}: swaps and hidden cache are not "
                              "modelled with prefix reuse")
    for i in ev.tolist():
        if m[i] <= 0:
            raise SimulationError(f"policy {name!r}, batch {j}: evicts request {ids[i]!r}, "
                                  "which holds no KV")
        kv -= blocks.private(i, int(m[i]))
        blocks.release(i, int(m[i]))
        m[i] = 0
    drops = _int_array(plan.drops, "drops", name, j, ids)
    if drops.size:
        blocks.apply_drops(drops, name, j)
    hits = _int_array(plan.hits, "hits", name, j, ids) if len(plan.hits) else \
        np.zeros(req.size, np.int64)
    if hits.size != req.size:
        raise SimulationError(f"policy {name!r}, batch {j}: {hits.size} hits for {req.size} "
                              "entries")
    for i, h in zip(req[hits > 0].tolist(), hits[hits > 0].tolist()):
        blocks.apply_hit(i, int(m[i]), h, name, j, ids[i])
    mb = m[req] + hits
    ma = mb + c
    bad = (c < 1) | (ma > S[req])
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise SimulationError(f"policy {name!r}, batch {j}: request {ids[int(req[k])]!r} "
                              f"processes {int(c[k])} tokens with {int(S[req[k]] - mb[k])} "
                              "available")
    dec = (hits == 0) & (mb == S[req] - 1) & (g[req] >= 1)
    for i, m0, h, m1 in zip(req.tolist(), m[req].tolist(), hits.tolist(), ma.tolist()):
        kv += blocks.private(i, m1) - blocks.private(i, m0)
        blocks.complete(i, m0 + h, m1)
    m[req] = ma
    total = kv + blocks.b * blocks.n_res
    if total > inst.limits.kv_capacity:
        raise SimulationError(f"policy {name!r}, batch {j}: KV after the batch {total} > "
                              f"M = {inst.limits.kv_capacity} ({blocks.n_res} resident blocks)")
    gen = req[ma == S[req]]
    fin = gen[:0]
    if gen.size:
        g[gen] += 1
        S[gen] += 1
        fin = gen[g[gen] >= O[gen]]
        for i in fin.tolist():
            kv -= blocks.private(i, int(m[i]))
            blocks.release(i, int(m[i]))
            m[i] = 0
    dur = price(c, mb, dec, int(np.count_nonzero(dec))) if req.size else 0.0
    extra = {"hits": hits.tolist() if hits.any() else (),
             "drop": blocks.ix.ids[drops].tolist() if drops.size else ()}
    return kv, fin, dur, extra


def check_policy(policy: object) -> None:
    """A policy object must be a :class:`Policy` (docs/policies.md): a one-line
    :class:`PolicyError` naming it otherwise, before the run starts."""
    if not isinstance(policy, Policy):
        name = getattr(policy, "name", "") or type(policy).__name__
        raise PolicyError(f"policy {name!r}: {type(policy).__name__} is not a Policy subclass; "
                          "derive it from optsched.policies.Policy (docs/policies.md)")


_NO_INTS = np.zeros(0, np.int64)
_NO_INTS.flags.writeable = False


def _int_array(values, what: str, name: str, j: int, ids: Sequence[str],
               req: np.ndarray | None = None) -> np.ndarray:
    """``values`` of a plan as int64, refusing fractions rather than flooring them
    (a schedule file refuses them too); the error names the policy, the batch and, for token
    counts, the request."""
    if isinstance(values, np.ndarray) and values.dtype == np.int64 and values.ndim == 1:
        return values  # the common cases first: this runs for every batch
    if not len(values):
        return _NO_INTS
    a = np.asarray(values)
    if a.dtype.kind in "iu" and a.ndim == 1:
        return a.astype(np.int64, copy=False)
    if a.ndim != 1 or a.dtype.kind not in "fO":
        raise SimulationError(f"policy {name!r}, batch {j}: {what} must be a list of integers, "
                              f"got {values!r}")
    try:
        f = a.astype(np.float64)
    except (TypeError, ValueError):
        raise SimulationError(f"policy {name!r}, batch {j}: {what} must be integers, "
                              f"got {values!r}") from None
    bad = np.flatnonzero(~np.isfinite(f) | (f != np.round(f)) | np.array(
        [isinstance(x, (bool, np.bool_)) for x in a.tolist()], bool))
    if bad.size:
        k = int(bad[0])
        whose = f" of request {ids[int(req[k])]!r}" if req is not None and k < req.size \
            and 0 <= req[k] < len(ids) else ""
        raise SimulationError(f"policy {name!r}, batch {j}: {what}{whose} must be integers, "
                              f"got {a.tolist()[k]!r}")
    return f.astype(np.int64)


def checked_plan(plan: Plan, name: str, j: int, ids: Sequence[str]
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A plan's requests, token counts and evictions as int64 arrays, checked: integers,
    requests that exist, one token count per entry (docs/policies.md, "Errors"). Runs once
    per batch, so the common case (integer lists or arrays in range) costs one conversion
    per field and one reduction per non-empty index array."""
    req = _int_array(plan.req, "request indices", name, j, ids)
    ev = _int_array(plan.evict, "evictions", name, j, ids) if len(plan.evict) else _NO_INTS
    n = len(ids)
    # as unsigned, a negative index is huge: one reduction finds both kinds of outsiders
    if req.size and req.view(np.uint64).max() >= n:
        _outside(req, "entries", name, j, n)
    if ev.size and ev.view(np.uint64).max() >= n:
        _outside(ev, "evictions", name, j, n)
    c = _int_array(plan.tokens, "tokens", name, j, ids, req)
    if c.size != req.size:
        raise SimulationError(f"policy {name!r}, batch {j}: {req.size} entries but {c.size} "
                              "token counts")
    return req, c, ev


def _outside(arr: np.ndarray, what: str, name: str, j: int, n: int) -> None:
    bad = int(arr[(arr < 0) | (arr >= n)][0])
    raise SimulationError(f"policy {name!r}, batch {j}: {what} refer to request index {bad}, "
                          f"outside 0..{n - 1}")


def _release(lim: Limits, m: np.ndarray, hid: np.ndarray, idx: np.ndarray, n_hidden: int
             ) -> tuple[int, int]:
    """Drop the caches of requests ``idx`` (evicted or finished): ``m = 0``, KV again; returns
    the memory freed (KV or hidden footprint, semantics section 6) and the hidden count left."""
    held = m[idx]
    if n_hidden:
        freed = int(lim.footprint(held, hid[idx]).sum())
        n_hidden -= int(hid[idx].sum())
        hid[idx] = False
    else:
        freed = int(lim.kv_footprint(held).sum())
    m[idx] = 0
    return freed, n_hidden


def _apply_cache_types(inst: Instance, name: str, j: int, req: np.ndarray, mb: np.ndarray,
                       hmask: np.ndarray | None, hid: np.ndarray, n_hidden: int
                       ) -> tuple[np.ndarray, int]:
    """The entries' cache types (semantics section 6, hidden cache): ``hmask`` per entry (None
    = all KV), checked against the instance and the caches held, then recorded in ``hid``.
    Returns the per-entry mask and the number of requests holding hidden cache. A plan that
    breaks a rule is a policy bug: SimulationError."""
    if hmask is None:
        hmask = np.zeros(req.size, bool)
    if hmask.size != req.size:
        raise SimulationError(f"policy {name!r}, batch {j}: hidden has {hmask.size} flags for "
                              f"{req.size} entries")
    if hmask.any() and not inst.limits.hidden_cache:
        raise SimulationError(f"policy {name!r}, batch {j}: uses hidden cache, which the "
                              "instance does not enable (limits.hidden_cache)")
    clash = (mb > 0) & (hmask != hid[req])
    if clash.any():
        r = int(req[np.flatnonzero(clash)[0]])
        raise SimulationError(f"policy {name!r}, batch {j}: request {inst.ids[r]!r} changes "
                              "cache type without discarding its cache (evict it first)")
    n_hidden += int(hmask[mb == 0].sum())
    hid[req] = hmask
    return hmask, n_hidden


def _apply_swaps(sim: _Sim, plan: Plan, name: str, j: int, kv: int, req, ev) -> tuple[int, int]:
    """Swap-outs then swap-ins of ``plan`` (semantics section 6): GPU KV in use counts
    ``fp(m - h)`` per request, host KV ``sum h <= host_capacity``. Returns the GPU KV in use
    and the tokens moved. A plan that breaks a swap rule is a policy bug: SimulationError."""
    inst, m, h = sim.instance, sim.m, sim.h
    fp = inst.limits.kv_footprint
    ids = inst.ids
    moved = 0
    if ev.size and (h[ev] > 0).any():
        raise SimulationError(f"policy {name!r}, batch {j}: evicts a request with KV on the host")
    so = np.asarray(plan.swap_out, dtype=np.int64)
    st = np.asarray(plan.swap_out_tokens, dtype=np.int64)
    if so.size != st.size:
        raise SimulationError(f"policy {name!r}, batch {j}: swap_out and swap_out_tokens differ "
                              "in length")
    for r, t in zip(so.tolist(), st.tolist()):
        if sim.hid[r] and m[r] > 0:
            raise SimulationError(f"policy {name!r}, batch {j}: swaps out request {ids[r]!r}, "
                                  "which holds hidden cache (only KV is swapped)")
        if not 1 <= t <= m[r] - h[r]:
            raise SimulationError(f"policy {name!r}, batch {j}: swaps out {t} tokens of request "
                                  f"{ids[r]!r}, which holds {int(m[r] - h[r])} on the GPU")
        kv += fp(int(m[r] - h[r] - t)) - fp(int(m[r] - h[r]))
        h[r] += t
        sim.host_kv += t
        moved += t
    for r in np.asarray(plan.swap_in, dtype=np.int64).tolist():
        if h[r] <= 0:
            raise SimulationError(f"policy {name!r}, batch {j}: swaps in request {ids[r]!r}, "
                                  "which has no KV on the host")
        kv += fp(int(m[r])) - fp(int(m[r] - h[r]))
        moved += int(h[r])
        sim.host_kv -= int(h[r])
        h[r] = 0
    cap = inst.limits.host_capacity or 0
    if sim.host_kv > cap:
        raise SimulationError(f"policy {name!r}, batch {j}: host KV {sim.host_kv} > "
                              f"host_capacity = {cap}")
    if req.size and (h[req] > 0).any():
        bad = int(req[np.flatnonzero(h[req] > 0)[0]])
        raise SimulationError(f"policy {name!r}, batch {j}: processes request {ids[bad]!r} "
                              "while part of its KV is on the host")
    return kv, moved


__all__ = ["Plan", "EMPTY_PLAN", "Policy", "SimView", "SimStats", "simulate_policy",
           "known_outputs", "batch_pricer", "check_policy", "checked_plan"]
