"""A test kit: property-test a policy, a bound rung or a formulation the way optsched tests its own.

Needs `Hypothesis <https://hypothesis.readthedocs.io>`_ (the ``dev`` extra:
``pip install 'optsched[dev]'``). What it offers (``docs/contributing.md`` shows a worked
example; ``tests/test_testing.py`` runs one):

* **strategies** for instances -- :func:`instances` (small, online or offline, unit or linear
  cost), :func:`constrained_instances` (every limit varied: prefill budget, batch size, KV
  blocks, random cost models), :func:`online_instances` (tight memory, predicted outputs),
  :func:`policy_instances` (every limit and hidden cache, for a policy's validity),
  :func:`large_instances` (up to 200 requests), :func:`prefix_instances` (requests sharing
  prompt prefixes: KV block ids, ``docs/semantics.md`` section 6), :func:`tiny_prefix_instances`
  (the same, small enough for the exhaustive search with reuse) -- and
  :func:`valid_schedules`: random *feasible* schedules of an instance, built by a
  deliberately naive step-by-step replay of the rules (``docs/semantics.md`` section 3),
  independent of the evaluator they are meant to check;
* **assertions** -- :func:`assert_feasible` (the one evaluator accepts a schedule) and
  :func:`assert_bound_valid` (a lower bound never exceeds an optimum or any schedule's value);
* **an oracle** -- :func:`exhaustive_optimum`: the proven optimum of a tiny instance by the exact
  search (``formulations/exhaustive``), replayed by the evaluator, or ``None`` when it is not
  proven within its limits (then nothing may be claimed: skip the example with ``assume``);
* :func:`wave_schedule`: a large valid schedule in closed form (for drawing and timing).

A sketch of a rung's validity test::

    from hypothesis import assume, given
    from optsched.testing import assert_bound_valid, exhaustive_optimum, instances

    @given(inst=instances(max_requests=3, max_prompt=6, max_output=3))
    def test_my_rung_is_below_the_optimum(inst):
        opt = exhaustive_optimum(inst, "total-latency")
        assume(opt is not None)
        assert_bound_valid({"mine": my_rung(inst)}, opt, "the exhaustive optimum", inst)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

from .cost import CostModel, LinearCost, UnitCost
from .evaluation import Evaluation, evaluate
from .instance import Instance, Limits, Request
from .schedule import Schedule, ScheduleBuilder

# -- instances ------------------------------------------------------------------------------


@st.composite
def instances(draw: Any, max_requests: int = 6, max_prompt: int = 12, max_output: int = 6,
              online: bool | None = None, linear: bool | None = None) -> Instance:
    """Small instances: up to ``max_requests`` requests, arrivals in 0..6 when ``online`` (drawn
    when ``None``), ``M`` from the largest peak ``I + O - 1`` to three times it, ``C`` from half
    the peak to twice it, KV blocks of 1 or 2, unit cost or a fixed linear one (``linear``)."""
    n = draw(st.integers(1, max_requests))
    online = draw(st.booleans()) if online is None else online
    reqs = []
    for i in range(n):
        arrival = draw(st.integers(0, 6)) if online else 0
        reqs.append(Request(f"q{i}", float(arrival), draw(st.integers(1, max_prompt)),
                            draw(st.integers(1, max_output))))
    peak = max(r.prompt + r.output - 1 for r in reqs)
    M = draw(st.integers(peak, peak * 3))
    C = draw(st.integers(max(1, peak // 2), peak * 2))
    block = draw(st.sampled_from([1, 1, 1, 2]))
    if block > 1:
        M = -(-M // block) * block + block * ((peak % block) != 0)
    lin = draw(st.booleans()) if linear is None else linear
    cost = (LinearCost(k0=0.5, k1=0.01, kpq=1e-4, kpm=2e-4, kdm=1e-3, kpr=0.05, kdr=0.02)
            if lin else UnitCost())
    return Instance("hyp", Limits(kv_capacity=M, max_batch_tokens=C, block_size=block), cost,
                    tuple(reqs))


@st.composite
def cost_models(draw: Any) -> CostModel:
    """Unit cost, or a linear cost model whose coefficients are each drawn from 0 to 1 (``kdr``
    may be negative as long as a decode token costs ``k1 + kdr >= 0``)."""
    if draw(st.booleans()):
        return UnitCost()
    coef = st.sampled_from([0.0, 0.0, 1e-4, 1e-3, 0.01, 0.1, 1.0])
    k = {name: draw(coef) for name in ("k0", "k1", "kpq", "kpm", "kdm", "kpr", "kpl", "kpb", "kdb")}
    k["kdr"] = draw(st.sampled_from([0.0, 0.02, -k["k1"]]))
    return LinearCost(**k)


@st.composite
def linear_cost_models(draw: Any) -> LinearCost:
    """Random linear cost models around the attention terms: ``kpm`` below, at and above
    ``2 kpq`` (InferMax's ``c^2 + 2cm``; a model may be exact only at ``kpm = 2 kpq``), and
    ``kpq = 0``; the other coefficients 0 or small."""
    kpq = draw(st.one_of(st.just(0.0), st.floats(1e-5, 1e-2)))
    kpm = draw(st.one_of(st.just(2 * kpq), st.just(0.0), st.floats(1e-5, 3e-2),
                         st.floats(0.1, 1.9).map(lambda r: r * kpq),
                         st.floats(2.1, 10.0).map(lambda r: r * kpq)))
    small = st.one_of(st.just(0.0), st.floats(1e-4, 1e-1))
    return LinearCost(k0=draw(st.floats(0.01, 1.0)), k1=draw(small), kpq=kpq, kpm=kpm,
                      kpl=draw(small), kpr=draw(small), kdm=draw(small), kdr=draw(small),
                      kpb=draw(small), kdb=draw(small))


@st.composite
def constrained_instances(draw: Any, max_requests: int = 4, max_prompt: int = 8,
                          max_output: int = 4) -> Instance:
    """Tiny instances with every limit varied: KV blocks of 1-3 tokens, a prefill budget ``P``
    and a batch size cap (or none), :func:`cost_models`. Small enough for
    :func:`exhaustive_optimum` at the defaults' sizes of 3 requests."""
    n = draw(st.integers(1, max_requests))
    online = draw(st.booleans())
    reqs = [Request(f"q{i}", float(draw(st.integers(0, 4))) if online else 0.0,
                    draw(st.integers(1, max_prompt)), draw(st.integers(1, max_output)))
            for i in range(n)]
    block = draw(st.sampled_from([1, 1, 2, 3]))
    peak = max(-(-(r.prompt + r.output - 1) // block) * block for r in reqs)
    M = draw(st.integers(peak, peak * 3))
    C = draw(st.integers(max(1, peak // 2), peak * 2))
    P = draw(st.one_of(st.none(), st.integers(1, C)))
    B = draw(st.one_of(st.none(), st.integers(1, n + 1)))
    lim = Limits(kv_capacity=M, max_batch_tokens=C, max_prefill_tokens=P, max_batch_size=B,
                 block_size=block)
    return Instance("hyp", lim, draw(cost_models()), tuple(reqs))


@st.composite
def online_instances(draw: Any) -> Instance:
    """Small online instances (up to 14 requests) with tight memory (evictions happen), a
    prefill budget and a batch size cap half the time, predicted outputs half the time (MC-SF
    ranks and plans by them; wrong ones trigger its safety net), and either cost model."""
    n = draw(st.integers(1, 14))
    predict = draw(st.booleans())
    reqs = [Request(f"r{i}", float(draw(st.integers(0, 12))), draw(st.integers(1, 40)),
                    draw(st.integers(1, 12)),
                    predicted_output=draw(st.integers(1, 15)) if predict else None)
            for i in range(n)]
    peak = max(r.prompt + r.output - 1 for r in reqs)
    block = draw(st.sampled_from([1, 1, 4]))
    M = -(-draw(st.integers(peak, 3 * peak)) // block) * block + block
    C = draw(st.integers(max(1, peak // 3), 2 * peak))
    P = draw(st.sampled_from([None, None, max(1, C // 2)]))
    bs = draw(st.sampled_from([None, None, 3]))
    cost = (LinearCost(k0=0.5, k1=0.01, kpq=1e-4, kpm=2e-4, kdm=1e-3, kpr=0.05, kdr=0.02,
                       kpb=0.003, kdb=0.001)
            if draw(st.booleans()) else UnitCost())
    return Instance("fast", Limits(kv_capacity=M, max_batch_tokens=C, max_prefill_tokens=P,
                                   block_size=block, max_batch_size=bs), cost, tuple(reqs))


@st.composite
def policy_instances(draw: Any, predictions: bool = True) -> Instance:
    """Instances on which every policy must give a feasible schedule: up to 8 requests, online
    or not, predicted outputs half the time (``predictions``), KV blocks of 1-4 tokens, a
    prefill budget and a batch-size cap or none, unit or a fixed linear cost, and hidden cache
    on or off (only a policy that uses it may; the others must ignore it)."""
    n = draw(st.integers(1, 8))
    online = draw(st.booleans())
    reqs = []
    for i in range(n):
        arrival = draw(st.integers(0, 10)) if online else 0
        prompt, output = draw(st.integers(1, 20)), draw(st.integers(1, 10))
        pred = draw(st.one_of(st.none(), st.integers(1, 10))) if predictions else None
        reqs.append(Request(f"q{i}", float(arrival), prompt, output, predicted_output=pred))
    peak = max(r.prompt + r.output - 1 for r in reqs)
    b = draw(st.sampled_from([1, 1, 1, 2, 4]))
    M = draw(st.integers(peak, 3 * peak))
    M = -(-M // b) * b + (b if peak % b else 0)  # whole blocks, room for the largest
    C = draw(st.integers(1, 2 * peak))
    P = draw(st.one_of(st.none(), st.integers(1, C)))
    bs = draw(st.one_of(st.none(), st.integers(1, 6)))
    cost = draw(st.sampled_from([
        UnitCost(), LinearCost(k0=0.5, k1=0.01, kpq=1e-4, kpm=2e-4, kdm=1e-3, kpr=0.05, kdr=0.02),
    ]))
    hidden = draw(st.booleans())
    return Instance("hyp", Limits(M, C, P, bs, b, hidden_cache=hidden), cost, tuple(reqs))


@st.composite
def prefix_instances(draw: Any, max_requests: int = 8) -> Instance:
    """Instances whose requests share prompt prefixes (``docs/semantics.md`` section 6,
    "Prefix reuse"), on which every policy must give a feasible schedule: up to
    ``max_requests`` requests drawing their block ids from up to three stems (system prompts,
    conversation turns), the last few blocks of a prompt its own, so the ids form a forest by
    construction; KV blocks of 1-4 tokens, ``M`` one to three peaks, a prefill budget and a
    batch-size cap or none, online or not, unit or a fixed linear cost. No hidden cache or
    swapping (the instance refuses them with block ids)."""
    b = draw(st.sampled_from([1, 2, 4]))
    stems = draw(st.integers(1, 3))
    online = draw(st.booleans())
    reqs = []
    for k in range(draw(st.integers(1, max_requests))):
        prompt, output = draw(st.integers(1, 20)), draw(st.integers(1, 8))
        stem = draw(st.integers(0, stems - 1))
        n_ids = draw(st.integers(0, prompt // b))
        own = draw(st.integers(0, n_ids))  # the last `own` blocks are the request's own
        ids = tuple(1000 * stem + p + 1 if p < n_ids - own else 100_000 + 100 * k + p
                    for p in range(n_ids))
        arrival = float(draw(st.integers(0, 8))) if online else 0.0
        reqs.append(Request(f"q{k}", arrival, prompt, output, prefix=ids))
    peak = max(-(-(r.prompt + r.output - 1) // b) * b for r in reqs)
    M = draw(st.integers(peak, 3 * peak))
    C = draw(st.integers(max(b, 2), 2 * peak + b))
    P = draw(st.one_of(st.none(), st.integers(1, C)))
    bs = draw(st.one_of(st.none(), st.integers(1, 6)))
    cost = draw(st.sampled_from([
        UnitCost(), LinearCost(k0=0.5, k1=0.01, kpq=1e-4, kpm=2e-4, kdm=1e-3, kpr=0.05, kdr=0.02),
    ]))
    return Instance("hyp-prefix", Limits(M, C, P, bs, b), cost, tuple(reqs))


def tiny_prefix_instance(seed: int, n_requests: int | None = None) -> Instance:
    """A seeded instance small enough for the exhaustive search with prefix reuse
    (``formulations/exhaustive-reuse.md``): ``n_requests`` (else 2-3) requests with prompts of
    2-5 tokens and 1-2 output tokens, each listing the first 0..floor(I / b) blocks (the first
    request at least one) of one of two stems (so the ids form a forest), KV blocks of 1 or 2
    tokens, ``M`` one to two peaks, ``C`` from ``max(b, 2)`` to a peak plus a block, arrivals
    at 0 or 1, unit or a fixed linear cost."""
    rng = np.random.default_rng(seed)
    b = int(rng.choice([1, 2]))
    n = int(rng.integers(2, 4)) if n_requests is None else n_requests
    reqs = []
    for k in range(n):
        prompt, output, stem = int(rng.integers(2, 6)), int(rng.integers(1, 3)), int(rng.integers(2))
        n_ids = int(rng.integers(0 if k else 1, prompt // b + 1))  # q0 lists >= 1 block
        reqs.append(Request(f"q{k}", float(rng.choice([0, 0, 1])), prompt, output,
                            prefix=tuple(1000 * stem + p + 1 for p in range(n_ids))))
    peak = max(-(-(r.prompt + r.output - 1) // b) * b for r in reqs)
    cost: CostModel = UnitCost() if rng.random() < 0.5 else LinearCost(
        k0=0.5, k1=0.01, kpq=1e-4, kpm=2e-4, kdm=1e-3, kpr=0.05, kdr=0.02)
    limits = Limits(int(rng.integers(peak, 2 * peak + 1)),
                    int(rng.integers(max(b, 2), peak + b + 1)), None, None, b)
    return Instance(f"tiny-prefix-{seed}", limits, cost, tuple(reqs))


def shared_prompt_instance(seed: int, n_requests: int, *, prompts: int = 3,
                           zipf: float = 1.1) -> Instance:
    """A seeded offline instance for the reuse MILP (``formulations/reuse-milp.md``):
    ``n_requests`` requests at time 0, each one of ``prompts`` system prompts of 2 blocks of
    ``b = 2`` tokens (picked with Zipf(``zipf``) popularity, as
    :func:`optsched.workloads.shared_prefix.system_prompts` does at full size) followed by a
    private message of 1-3 tokens, answers of 1-3 tokens; unit time, ``M`` = 24 tokens (room
    for about three prompts and their answers), ``C`` = 8 tokens per batch."""
    rng = np.random.default_rng(seed)
    b, system = 2, 4
    w = 1.0 / np.arange(1, prompts + 1) ** zipf
    pick = rng.choice(prompts, size=n_requests, p=w / w.sum())
    reqs = []
    for k in range(n_requests):
        user, output = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        ids = tuple(100 * int(pick[k]) + p + 1 for p in range(system // b))
        reqs.append(Request(f"r{k}", 0.0, system + user, output, prefix=ids))
    return Instance(f"shared-prompt-{seed}-n{n_requests}", Limits(24, 8, None, None, b),
                    UnitCost(), tuple(reqs))


@st.composite
def tiny_prefix_instances(draw: Any) -> Instance:
    """:func:`tiny_prefix_instance` of a drawn seed: instances with shared prefixes on which
    :func:`exhaustive_optimum` usually proves an optimum within a few seconds."""
    return tiny_prefix_instance(draw(st.integers(0, 2**32 - 1)))


@st.composite
def large_instances(draw: Any, max_requests: int = 200) -> Instance:
    """Up to ``max_requests`` requests with trace-like lengths (prompts 1-299, outputs 1-59,
    drawn by a seeded generator), all at 0 or with exponential gaps, KV blocks of 1 or 16, ``M``
    one to eight peaks, ``C`` 512 or 2,048, unit or a Llama-like linear cost."""
    n = draw(st.integers(1, max_requests))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    online = draw(st.booleans())
    block = draw(st.sampled_from([1, 16]))
    prompt = rng.integers(1, 300, n)
    output = rng.integers(1, 60, n)
    arr = np.sort(rng.exponential(0.05, n).cumsum()) if online else np.zeros(n)
    reqs = tuple(Request(f"r{i}", float(arr[i]), int(prompt[i]), int(output[i])) for i in range(n))
    peak = int((prompt + output - 1).max())
    M = -(-peak * draw(st.integers(1, 8)) // block) * block + block
    lim = Limits(kv_capacity=M, max_batch_tokens=draw(st.sampled_from([512, 2048])),
                 block_size=block)
    cm = draw(st.sampled_from([UnitCost(), LinearCost(k0=0.01, k1=6e-5, kpq=5e-9, kpm=1e-8,
                                                      kdm=3e-7, kpr=1e-4, kdr=2e-5, kpb=3e-3,
                                                      kdb=6e-4)]))
    return Instance("big", lim, cm, reqs)


# -- valid schedules ------------------------------------------------------------------------

#: batches of random walk before :func:`valid_schedules` finishes the requests one by one
DRAIN_AFTER = 300


@dataclass
class DrawnSchedule:
    """A valid schedule drawn by :func:`valid_schedules`, with what the drawing knows."""

    schedule: Schedule
    #: ``(batch, request id, tokens, tokens it could have taken)`` per entry
    entries: list = field(default_factory=list)
    #: the batch in which each request completed
    completion_batch: dict = field(default_factory=dict)


class _Walk:
    """The state of :func:`valid_schedules`'s replay: per request the tokens it has
    (``S``: prompt + generated), holds in KV (``m``) and generated (``g``)."""

    def __init__(self, inst: Instance, stated_starts: bool):
        self.inst, self.lim, self.stated = inst, inst.limits, stated_starts
        self.S = {r.id: r.prompt for r in inst.requests}
        self.m = {r.id: 0 for r in inst.requests}
        self.g = {r.id: 0 for r in inst.requests}
        self.O = {r.id: r.output for r in inst.requests}
        self.arrival = {r.id: r.arrival for r in inst.requests}
        self.done: set[str] = set()
        self.batches: list = []
        self.out = DrawnSchedule(Schedule.empty())
        self.t, self.j = 0.0, 0

    def fp(self, tokens: int) -> int:
        b = self.lim.block_size
        return -(-tokens // b) * b

    def available(self) -> list[str]:
        return [r for r in self.S if r not in self.done and self.arrival[r] <= self.t + 1e-9]

    def apply(self, entries: list[tuple[str, int]]) -> None:
        """Run the entries' tokens: a request whose tokens reach ``S`` generates one; one that
        generates its last completes (and frees its KV)."""
        finished = []
        for r, c in entries:
            self.m[r] += c
            if self.m[r] == self.S[r]:
                self.g[r] += 1
                self.S[r] += 1
                if self.g[r] == self.O[r]:
                    finished.append(r)
        for r in finished:
            self.done.add(r)
            self.m[r] = 0
            self.out.completion_batch[r] = self.j

    def close(self, entries: list[tuple[str, int]], evict: list[str]) -> None:
        """Append the batch; unit-cost batches advance the clock by their duration (a linear
        cost's batches start at once: the evaluator's start rule, not this one, decides)."""
        dur = self.inst.cost_model.batch_time([c for _, c in entries], [0] * len(entries),
                                              [False] * len(entries))
        self.batches.append((entries, evict, self.t if self.stated else None))
        self.t += dur if isinstance(self.inst.cost_model, UnitCost) else 0.0
        self.j += 1

    def drain_one(self, r: str, avail: list[str]) -> None:
        """A long random walk (e.g. ``M = 3`` with frequent evictions) may never finish: run the
        oldest available request alone, evicting the others, so every schedule completes."""
        others = [q for q in avail if q != r and self.m[q] > 0]
        for q in others:
            self.m[q] = 0
        c = min(self.S[r] - self.m[r], self.lim.max_batch_tokens)
        self.out.entries.append((self.j, r, c, self.S[r] - self.m[r]))
        self.apply([(r, c)])
        self.close([(r, c)], others)

    def random_entries(self, draw: Any, avail: list[str], evict: list[str]) -> list[tuple[str, int]]:
        """Random entries in a random order, each within the batch's token budget and the KV
        capacity (finishing requests still count in this batch); may stop after any entry."""
        kv = sum(self.fp(self.m[r]) for r in self.S if r not in self.done)
        budget = self.lim.max_batch_tokens
        entries: list[tuple[str, int]] = []
        for r in draw(st.permutations([r for r in avail if r not in evict])):
            room = self.S[r] - self.m[r]
            c_max = min(room, budget)
            if c_max <= 0:
                continue
            c = draw(st.integers(1, c_max))
            while c > 0 and kv - self.fp(self.m[r]) + self.fp(self.m[r] + c) > self.lim.kv_capacity:
                c -= 1
            if c == 0:
                continue
            kv += self.fp(self.m[r] + c) - self.fp(self.m[r])
            budget -= c
            entries.append((r, c))
            self.out.entries.append((self.j, r, c, room))
            if draw(st.booleans()) and len(entries) >= 1 and budget < self.lim.max_batch_tokens:
                break
        return entries

    def random_batch(self, draw: Any, avail: list[str], evict_prob: float) -> None:
        evict: list[str] = []
        if draw(st.floats(0, 1)) < evict_prob:
            resident = [r for r in avail if self.m[r] > 0]
            if resident:
                evict = [draw(st.sampled_from(resident))]
        for r in evict:
            self.m[r] = 0
        entries = self.random_entries(draw, avail, evict)
        if not entries:
            # memory full of partial work: evict the largest resident request to make progress
            if not evict:
                resident = [r for r in avail if self.m[r] > 0]
                # cannot be empty: with nothing resident some request fits (M >= I + O - 1)
                assert resident, "generator stuck"
                victim = max(resident, key=lambda r: self.m[r])
                self.m[victim] = 0
                evict.append(victim)
            self.batches.append((entries, evict, None))
            self.j += 1
            return
        self.apply(entries)
        self.close(entries, evict)


@st.composite
def valid_schedules(draw: Any, inst: Instance, evict_prob: float = 0.15,
                    stated_starts: bool = False) -> DrawnSchedule:
    """A random feasible schedule of ``inst`` (any cost model): random batches of random
    entries, evicting a resident request with probability ``evict_prob`` per batch, each batch
    within the limits by construction; after :data:`DRAIN_AFTER` batches the requests are
    finished one at a time. ``stated_starts``: unit-cost batches state their start times."""
    walk = _Walk(inst, stated_starts)
    while len(walk.done) < inst.n:
        avail = walk.available()
        if not avail:
            walk.t = min(walk.arrival[r] for r in walk.S if r not in walk.done)
        elif walk.j >= DRAIN_AFTER:
            walk.drain_one(avail[0], avail)
        else:
            walk.random_batch(draw, avail, evict_prob)
    walk.out.schedule = Schedule.from_batches(walk.batches)
    return walk.out


# -- assertions and the oracle ---------------------------------------------------------------


def assert_feasible(instance: Instance, schedule: Schedule) -> Evaluation:
    """The evaluator's replay of ``schedule``, asserting it is feasible (the first violations
    and the instance in the message)."""
    ev = evaluate(instance, schedule)
    assert ev.feasible, (f"infeasible schedule: {ev.violations[:3]} on "
                         f"{instance.to_json(indent=None)}")
    return ev


def assert_bound_valid(bounds: dict[str, float] | float, value: float, what: str,
                       instance: Instance) -> None:
    """A lower bound never exceeds an optimum or any feasible schedule's value (``what`` names
    ``value``, e.g. "the exhaustive optimum"): each of ``bounds`` (a value or ``{name: value}``)
    is at most ``value`` up to a relative ``1e-9`` and an absolute ``1e-12``. A bound above is
    a defect, not a weak bound: the message holds the instance to reproduce it."""
    named = bounds if isinstance(bounds, dict) else {"bound": bounds}
    for name, b in named.items():
        assert b <= value * (1 + 1e-9) + 1e-12, (
            f"bound {name} = {b!r} exceeds {what} {value!r} on {instance.to_json(indent=None)}")


def exhaustive_optimum(instance: Instance, objective: str, max_states: int = 3_000,
                       time_limit: float = 5.0, **options: Any) -> float | None:
    """The optimum of ``objective`` by the exact search over schedule states (``options``: more
    :class:`~optsched.formulations.exhaustive.SearchOptions` fields, e.g. ``no_evictions``),
    replayed by the evaluator; ``None`` when it is not proven within ``max_states`` and
    ``time_limit`` seconds (too large for the oracle: nothing may be claimed)."""
    from .formulations.exhaustive import SearchOptions, search  # lazy: the solver layer

    res = search(instance, objective, SearchOptions(max_states=max_states, time_limit=time_limit,
                                                    **options))
    if res.status != "optimal" or res.schedule is None:
        return None
    return assert_feasible(instance, res.schedule).objective(objective)


def wave_schedule(n: int, wave: int = 200, prompt: int = 10, output: int = 50
                  ) -> tuple[Instance, Schedule]:
    """``n`` identical requests at 0 (unit cost, ``M = wave * (prompt + output)``, ``C`` a
    million) served in waves of ``wave``: each wave prefilled in one batch, then decoded in
    ``output - 1`` batches; ``n * output`` entries, feasible by construction."""
    reqs = tuple(Request(f"r{i}", 0, prompt, output) for i in range(n))
    inst = Instance("waves", Limits(kv_capacity=wave * (prompt + output), max_batch_tokens=10**6),
                    requests=reqs)
    b = ScheduleBuilder([r.id for r in reqs])
    for w in range(0, n, wave):
        ids = list(range(w, min(w + wave, n)))
        b.add_indexed(ids, [prompt] * len(ids))
        for _ in range(output - 1):
            b.add_indexed(ids, [1] * len(ids))
    return inst, b.build()


__all__ = [
    "DRAIN_AFTER", "DrawnSchedule", "assert_bound_valid", "assert_feasible", "constrained_instances",
    "cost_models", "exhaustive_optimum", "instances", "large_instances", "linear_cost_models",
    "online_instances", "policy_instances", "prefix_instances", "valid_schedules",
    "wave_schedule",
]
