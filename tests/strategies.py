"""Hypothesis strategies shared by the test suite: random instances and random
*valid* schedules built by an independent, deliberately naive step-by-step
replay of semantics section 3 (so the vectorised evaluator is checked against a
second reading of the rules, not against itself)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from optsched.cost import LinearCost, UnitCost
from optsched.instance import Instance, Limits, Request
from optsched.schedule import Schedule


@st.composite
def instances(draw, max_requests=6, max_prompt=12, max_output=6, online=None, linear=None):
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
    return Instance("hyp", Limits(kv_capacity=M, max_batch_tokens=C, block_size=block), cost, tuple(reqs))


@dataclass
class Trace:
    """A valid schedule plus facts the generator knows about each entry."""

    schedule: Schedule
    #: (batch, request id, tokens, tokens available before the batch)
    entries: list = field(default_factory=list)
    completion_batch: dict = field(default_factory=dict)


#: batches of random walk before the generator finishes the requests one by one
DRAIN_AFTER = 300


@st.composite
def valid_schedules(draw, inst: Instance, evict_prob=0.15, stated_starts=False):
    """A random feasible schedule for ``inst`` (unit or linear cost)."""
    lim = inst.limits
    b = lim.block_size
    fp = lambda m: -(-m // b) * b  # noqa: E731
    S = {r.id: r.prompt for r in inst.requests}
    m = {r.id: 0 for r in inst.requests}
    g = {r.id: 0 for r in inst.requests}
    O = {r.id: r.output for r in inst.requests}
    arrival = {r.id: r.arrival for r in inst.requests}
    done: set[str] = set()
    batches = []
    trace = Trace(Schedule.empty())
    t = 0.0
    j = 0
    while len(done) < inst.n:
        avail = [r for r in S if r not in done and arrival[r] <= t + 1e-9]
        if not avail:
            t = min(arrival[r] for r in S if r not in done)
            continue
        if j >= DRAIN_AFTER:
            # a long random walk (e.g. M = 3 with frequent evictions) may never finish: run the
            # oldest available request alone to its end, so every drawn schedule is complete
            r = avail[0]
            others = [q for q in avail if q != r and m[q] > 0]
            for q in others:
                m[q] = 0
            c = min(S[r] - m[r], lim.max_batch_tokens)
            trace.entries.append((j, r, c, S[r] - m[r]))
            dur = inst.cost_model.batch_time([c], [0], [False])
            batches.append(([(r, c)], others, t if stated_starts else None))
            m[r] += c
            if m[r] == S[r]:
                g[r] += 1
                S[r] += 1
                if g[r] == O[r]:
                    done.add(r)
                    m[r] = 0
                    trace.completion_batch[r] = j
            t += dur if isinstance(inst.cost_model, UnitCost) else 0.0
            j += 1
            continue
        evict = []
        if draw(st.floats(0, 1)) < evict_prob:
            resident = [r for r in avail if m[r] > 0]
            if resident:
                evict = [draw(st.sampled_from(resident))]
        for r in evict:
            m[r] = 0
        kv = sum(fp(m[r]) for r in S if r not in done)
        budget = lim.max_batch_tokens
        entries = []
        order = draw(st.permutations([r for r in avail if r not in evict]))
        for r in order:
            room = S[r] - m[r]
            c_max = min(room, budget)
            if c_max <= 0:
                continue
            c = draw(st.integers(1, c_max))
            # memory after adding c (finishing requests still count in this batch)
            while c > 0 and kv - fp(m[r]) + fp(m[r] + c) > lim.kv_capacity:
                c -= 1
            if c == 0:
                continue
            kv += fp(m[r] + c) - fp(m[r])
            budget -= c
            entries.append((r, c))
            trace.entries.append((j, r, c, room))
            if draw(st.booleans()) and len(entries) >= 1 and budget < lim.max_batch_tokens:
                break
        if not entries:
            # memory full of partial work: evict the largest resident request to make progress
            if not evict:
                resident = [r for r in avail if m[r] > 0]
                # cannot be empty: with nothing resident some request fits (M >= I + O - 1)
                assert resident, "generator stuck"
                victim = max(resident, key=lambda r: m[r])
                m[victim] = 0
                evict.append(victim)
            batches.append((entries, evict, None))
            j += 1
            continue
        finished = []
        for r, c in entries:
            m[r] += c
            if m[r] == S[r]:
                g[r] += 1
                S[r] += 1
                if g[r] == O[r]:
                    finished.append(r)
        for r in finished:
            done.add(r)
            m[r] = 0
            trace.completion_batch[r] = j
        dur = inst.cost_model.batch_time([c for _, c in entries], [0] * len(entries),
                                         [False] * len(entries))
        batches.append((entries, evict, t if stated_starts else None))
        t += dur if isinstance(inst.cost_model, UnitCost) else 0.0
        j += 1
    trace.schedule = Schedule.from_batches(batches)
    return trace
