"""Nested WAIT (optsched/policies/nested_wait.py), hand-worked."""

from __future__ import annotations

import numpy as np
import pytest
from handworked import entries, theory_instance, total

from optsched.cost import UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies import simulate
from optsched.policies.nested_wait import Segment, nested_segments


def test_nested_segments_by_hand():
    # outputs 2, 2, 6, 6 in two types: d = 2, 6; segments [0, 2) (both types alive, 4
    # requests) and [2, inf) (the long type, 2). Fluid KV per request at stage k: 1 + k, so
    # 4 * (1 + 2) + 2 * (3 + 4 + 5 + 6) = 48 = M: x = 1, limits 4 and 2, capacities
    # 4 * 2 = 8 and 2 * 4 = 8.
    segs = nested_segments(np.ones(4, np.int64), np.array([2, 2, 6, 6]), 2, 48)
    assert segs == [Segment(0, 2, 4, 8), Segment(2, None, 2, 8)]
    with pytest.raises(ValueError, match="limit"):
        Segment(0, 2, 0, 0)


def test_nested_wait_waits_for_the_first_stage_by_hand():
    # types=1, I=1, O=2 for a (t=0) and b (t=3); one open segment [0, inf): fluid KV
    # 2 * (1 + 2) = 6 = M, so limit q = 2, capacity 4. t=0: one request at stage 0 < min(2, 4):
    # no batch. t=3 (last arrival: limits off): a and b prefill, then decode: done at 5.
    # Total 5 + 2 = 7.
    i = theory_instance([("a", 0.0, 1, 2), ("b", 3.0, 1, 2)], M=6)
    s = simulate(i, "nested-wait", types=1)
    assert entries(s) == [[("a", 1), ("b", 1)]] * 2
    assert total(i, s) == (7, 0)


def test_nested_wait_last_prefill_chunk_counts_against_P():
    # Regression (found by the all-policies property test while building nested-wait): the
    # last chunk of a prefill (one token left, no token generated yet) was taken for a decode,
    # so it escaped the prefill budget: batch 1 held a's last chunk and b's prompt, 2 > P = 1.
    # a: I=2, O=2; b: I=1, O=2; C=2, P=1, types=1, all at 0 (the last arrival: limits off).
    # Batch 0: a's first chunk (P = 1 used up, b waits). Batch 1: a's last chunk (still a
    # prefill: g = 0), b waits again; a generates its first token. Batch 2: a decodes (done
    # at 3) and b prefills (its first token). Batch 3: b decodes (done at 4). Total 7.
    i = Instance("p", Limits(kv_capacity=6, max_batch_tokens=2, max_prefill_tokens=1),
                 UnitCost(), (Request("a", 0.0, 2, 2), Request("b", 0.0, 1, 2)))
    s = simulate(i, "nested-wait", types=1)
    assert entries(s) == [[("a", 1)], [("a", 1)], [("a", 1), ("b", 1)], [("b", 1)]]
    assert total(i, s) == (7, 0)


def test_nested_wait_guard_never_starves_the_oldest_holder():
    # six requests at t=0, P = 5 < every prompt, M = 30 in blocks of 2: the request at the
    # earlier stage took the prefill budget ahead of the oldest holder, grew until the guard
    # evicted it and took the budget again -- a livelock (over 7,300 batches) before the guard
    # fed the oldest holder in a batch it left with evictions only
    reqs = [(17, 4), (8, 5), (14, 9), (10, 6), (20, 9), (19, 5)]
    i = Instance("livelock", Limits(kv_capacity=30, max_batch_tokens=43, max_prefill_tokens=5,
                                    block_size=2), UnitCost(),
                 tuple(Request(f"q{k}", 0.0, p, o) for k, (p, o) in enumerate(reqs)))
    ev = evaluate(i, simulate(i, "nested-wait"))
    assert ev.feasible and bool((ev.latency < float("inf")).all())



def test_nested_wait_guard_gives_the_budget_to_a_holder_when_it_drops_every_admission():
    # M = 21, C = 9 (found by a random search over small instances; the slow step's stretch
    # test found a 41-request one): a request at an earlier stage that holds no KV sorts ahead
    # of a holder and takes the whole budget; the guard drops it for memory and, before this
    # fix, returned an empty batch with requests left and no arrivals: a stall
    i = Instance("stall", Limits(kv_capacity=21, max_batch_tokens=9), UnitCost(),
                 (Request("q0", 1.0, 14, 6), Request("q1", 2.0, 14, 7), Request("q2", 0.0, 2, 12)))
    ev = evaluate(i, simulate(i, "nested-wait"))
    assert ev.feasible and bool((ev.latency < float("inf")).all())
