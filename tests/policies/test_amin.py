"""A_min (Chen, Ye, Zhou, arXiv 2508.14544): hand-worked schedules, unit-time cost."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optsched.cost import UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies import PolicyError, get_spec, simulate
from optsched.policies.amin import lower_ends


def inst(prompt, outputs, M):
    reqs = tuple(Request(f"r{k}", 0.0, prompt, o) for k, o in enumerate(outputs))
    return Instance("amin-hand", Limits(kv_capacity=M, max_batch_tokens=M), UnitCost(), reqs)


def entries(schedule):
    return [(sorted(b.entries), sorted(b.evict)) for b in schedule]


def test_lower_ends_by_hand():
    # ceil(0.5 * (3, 1, 4)) = (2, 1, 2); ceil(0.1 * 3) = 1; never below 1
    assert lower_ends([3, 1, 4], 0.5).tolist() == [2, 1, 2]
    assert lower_ends([3, 1], 0.1).tolist() == [1, 1]
    assert lower_ends([7], 1.0).tolist() == [7]


def test_amin_refines_and_evicts_by_hand():
    # I = 2 (paper s = 1), outputs r0..r3 = 3, 1, 3, 1, M = C = 5, alpha = 0.5:
    # lower ends (estimates) 2, 1, 2, 1 -> order r1, r3, r0, r2.
    # b0: r1 (KV 2, done at +0) and r3 (2 + 2 = 4 <= 5) prefill; r0 would make 6 tokens > C.
    #     r1, r3 finish: time 1 each.
    # b1: r0 prefill (KV 2, est. done at +1: KV 3); r2 too would give 3 + 3 = 6 > 5 at +1.
    #     r0 unfinished after g = 1: estimate max(2, 2) = 2.
    # b2: r0 decodes (KV 3, est. done at +0); r2 (KV 2, est. done at +1): 3 + 2 = 5 at +0,
    #     3 at +1 -> admitted. After: r0 g = 2 unfinished -> est. 3; r2 g = 1 -> est. 2.
    # b3: real KV after r0 and r2 decode: 4 + 3 = 7 > 5: evict the smallest estimate, r2 (2 < 3);
    #     r0 alone (KV 4) finishes: time 4. r2 requeued, est. max(2, g + 1 = 2) = 2.
    # b4: r2 recomputes prompt + 1 generated = 3 tokens (g = 2); b5: r2 decodes, done: time 6.
    # Total latency 1 + 1 + 4 + 6 = 12, with one eviction.
    i = inst(2, [3, 1, 3, 1], 5)
    s = simulate(i, "amin", alpha=0.5)
    assert entries(s) == [
        ([("r1", 2), ("r3", 2)], []), ([("r0", 2)], []), ([("r0", 1), ("r2", 2)], []),
        ([("r0", 1)], ["r2"]), ([("r2", 3)], []), ([("r2", 1)], [])]
    ev = evaluate(i, s)
    assert ev.feasible and ev.metrics["evictions"] == 1
    assert ev.objective("total-latency") == 12
    # alpha = 1 (H-SF): estimates 3, 1, 3, 1: r1, r3 at b0; r0 at b1 (r2 beside it would reach
    # 4 + 4 > 5 at +2), r0 runs to time 4, r2 is admitted only when r0's KV 4 has left
    # (b4..b6): completions 1, 1, 4, 7 -> 13 (the paper-model optimum is 12: test_claims)
    h = simulate(i, "amin", alpha=1.0)
    assert evaluate(i, h).objective("total-latency") == 13


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.lists(st.integers(1, 6), min_size=1, max_size=6),
       st.integers(0, 6))
def test_exact_intervals_are_mcsf(prompt, outputs, extra):
    # alpha = 1: estimates = true lengths; an unfinished request has g < O, so g + 1 <= O never
    # raises one; eq. (1) with exact lengths never overflows, so nothing is evicted; the
    # admission order (length, arrival, index) is MC-SF's: the schedules are equal
    i = inst(prompt, outputs, prompt + max(outputs) - 1 + extra)
    assert simulate(i, "amin", alpha=1.0) == simulate(i, "mcsf")


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.lists(st.integers(1, 8), min_size=1, max_size=6),
       st.integers(0, 6), st.sampled_from([0.05, 0.3, 0.7]))
def test_short_estimates_stay_feasible(prompt, outputs, extra, alpha):
    i = inst(prompt, outputs, prompt + max(outputs) - 1 + extra)
    ev = evaluate(i, simulate(i, "amin", alpha=alpha))
    assert ev.feasible, ev.violations[:3]


def test_registered_hypothetical_with_param():
    spec = get_spec("amin")
    assert spec.hypothetical and "2508.14544" in spec.source
    with pytest.raises(PolicyError, match="alpha"):
        simulate(inst(2, [1], 2), "amin", alpha=0.0)
