"""The 2025-2026 theory policies (issue 26): GBA, GSA, Sorted-F, WAIT, Nested WAIT.
Hand-worked schedules under unit-time cost (one time unit per batch with entries; an
eviction-only batch takes no time), ``C = M`` unless said."""

from __future__ import annotations

import numpy as np
import pytest
from shared_data import SHARED_DATA  # noqa: E402

from optsched.cost import UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies import PolicyError, get_spec, simulate
from optsched.policies.nested_wait import Segment, nested_segments
from optsched.policies.sortedf import best_prefix
from optsched.policies.wait import fluid_thresholds, length_types
from optsched.workloads.generators import generate

THEORY = ("gba", "gsa", "sorted-f", "wait", "nested-wait")


def inst(reqs, M, C=None):
    return Instance("theory-hand", Limits(kv_capacity=M, max_batch_tokens=C or M), UnitCost(),
                    tuple(Request(*r) for r in reqs))


def entries(schedule):
    return [sorted(b.entries) for b in schedule]


def total(i, s):
    ev = evaluate(i, s)
    assert ev.feasible, ev.violations[:3]
    return ev.objective("total-latency"), ev.metrics["evictions"]


def test_gba_phases_by_hand():
    # a: O=1, b: O=3, c: O=2, all I=1, M=10. Phase 0 (O <= 1): {a}, done at 1. Phase 1
    # (O <= 2): {c}, batches 1-2, done at 3. Phase 2 (O <= 4): {b}, batches 3-5, done at 6.
    # Total 1 + 3 + 6 = 10: the phases serialise what one group could run together.
    i = inst([("a", 0.0, 1, 1), ("b", 0.0, 1, 3), ("c", 0.0, 1, 2)], M=10)
    s = simulate(i, "gba")
    assert entries(s) == [[("a", 1)], [("c", 1)], [("c", 1)]] + [[("b", 1)]] * 3
    assert total(i, s) == (10, 0)


def test_sorted_f_runs_the_best_prefix_by_hand():
    # Same instance: packed by O: a (1), c (2), b (3) -- KV at offsets 0, 1, 2 is 3, 4, 3
    # <= 10. F = max O / size: 1/1, 2/2, 3/3, ties to the larger: all three together.
    # a done at 1, c at 2, b at 3: total 6 (the optimum: every request at its own O).
    i = inst([("a", 0.0, 1, 1), ("b", 0.0, 1, 3), ("c", 0.0, 1, 2)], M=10)
    s = simulate(i, "sorted-f")
    assert entries(s) == [[("a", 1), ("b", 1), ("c", 1)], [("b", 1), ("c", 1)], [("b", 1)]]
    assert total(i, s) == (6, 0)
    # a: O=1, b: O=10: F({a}) = 1 < F({a, b}) = 10 / 2 = 5, so a runs alone (done at 1) and
    # b after it (batches 1-10, done at 11): 12, one more than running both at once (1 + 10).
    i = inst([("a", 0.0, 1, 1), ("b", 0.0, 1, 10)], M=20)
    s = simulate(i, "sorted-f")
    assert entries(s) == [[("a", 1)]] + [[("b", 1)]] * 10
    assert total(i, s) == (12, 0)


def test_best_prefix_by_hand():
    assert best_prefix([1, 2, 3]) == 3  # F = 1, 1, 1: ties to the longer
    assert best_prefix([1, 10]) == 1  # F = 1, 5
    assert best_prefix([4, 4, 5, 40]) == 3  # F = 4, 2, 5/3, 10


def test_gsa_restarts_by_hand():
    # r: I=1, O=3, M=10. Phase 0, slice 1: batch 0 prefills r (1 token, g = 1); the slice is
    # used, r is unfinished: batch 1 evicts it (eviction only: no time). Phase 1, slice
    # min(2, M - S + 1) with S = I + g = 2: batch 2 recomputes 2 tokens (g = 2), batch 3
    # decodes (g = 3, done at time 3).
    i = inst([("r", 0.0, 1, 3)], M=10)
    s = simulate(i, "gsa")
    assert entries(s) == [[("r", 1)], [], [("r", 2)], [("r", 1)]]
    assert [b.evict for b in s] == [[], ["r"], [], []]
    assert total(i, s) == (3, 1)


def test_wait_holds_running_requests_for_the_threshold_by_hand():
    # types=1, every request I=1, O=2: volume V = 2 + 1 = 3, count 3, M = 6: the fluid
    # threshold n = floor(6 * 3 / (3 * 3)) = 2 per batch, budget L = n * ceil(mean O) = 4.
    assert fluid_thresholds(np.ones(3, np.int64), np.full(3, 2), np.zeros(3, np.int64), 6) \
        == (pytest.approx([2]), pytest.approx([4]))
    # t=0: a, b wait (2 >= min(2, 4 - 0)): admitted (MC-SF's test: KV 2 then 4 <= 6), batch 0.
    # t=1: min(2, 4 - 2) = 2 but nobody waits: no batch -- a and b wait too -- until c
    # arrives at 5 (the last arrival: thresholds off). Batch at 5: a, b decode (done at 6),
    # c admitted; batch at 6: c decodes (done at 7). Total 6 + 6 + 2 = 14 (MC-SF: 6).
    i = inst([("a", 0.0, 1, 2), ("b", 0.0, 1, 2), ("c", 5.0, 1, 2)], M=6)
    s = simulate(i, "wait", types=1)
    assert entries(s) == [[("a", 1), ("b", 1)], [("a", 1), ("b", 1), ("c", 1)], [("c", 1)]]
    assert total(i, s) == (14, 0)
    assert total(i, simulate(i, "mcsf")) == (6, 0)


def test_length_types_by_hand():
    # the median of 1, 2, 3, 10 is 2.5: two bins {1, 2}, {3, 10}
    assert length_types(np.array([1, 2, 3, 10]), 2).tolist() == [0, 0, 1, 1]
    assert length_types(np.array([5, 5, 5]), 3).tolist() == [0, 0, 0]  # equal edges merge


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
    i = inst([("a", 0.0, 1, 2), ("b", 3.0, 1, 2)], M=6)
    s = simulate(i, "nested-wait", types=1)
    assert entries(s) == [[("a", 1), ("b", 1)]] * 2
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


def test_registered_with_sources_and_params():
    for name, arxiv in (("gba", "2601.22996"), ("gsa", "2601.22996"),
                        ("sorted-f", "2508.06133"), ("wait", "2504.11320"),
                        ("nested-wait", "2504.11320")):
        spec = get_spec(name)
        assert arxiv in spec.source, name
        assert spec.hypothetical == (name != "gsa"), name
    for name in ("wait", "nested-wait"):
        with pytest.raises(PolicyError, match="types"):
            get_spec(name).make(types=0)
        with pytest.raises(PolicyError, match="scale"):
            get_spec(name).make(scale=1.5)


@pytest.mark.parametrize("policy", THEORY)
def test_chunked_long_prompt_and_budgets(policy):
    # a prompt longer than C = 4 (chunked alone) beside short ones, max_batch_size 2
    reqs = (Request("long", 0.0, 9, 2), Request("s1", 0.0, 2, 3), Request("s2", 1.0, 1, 4),
            Request("s3", 2.0, 3, 1))
    i = Instance("budgets", Limits(kv_capacity=12, max_batch_tokens=4, max_prefill_tokens=3,
                                   max_batch_size=2), UnitCost(), reqs)
    ev = evaluate(i, simulate(i, policy))
    assert ev.feasible, ev.violations[:3]


def _generated():
    """A small instance of every generator; those that draw from a trace need the shared data."""
    out = [generate("fixed", n=6, prompt=40, output=30),
           generate("mix", mix="SILO", n=6, seed=1),
           generate("chat-like", n=12, rate=4.0, seed=1),
           generate("online-paper", n=12, seed=2),
           generate("online-paper", n=12, seed=3, arrival="poisson", rate=0.5),
           generate("online-paper-horizon", rate=0.5, horizon=20, seed=1)]
    trace = SHARED_DATA / "traces" / "AzureLLMInferenceTrace_conv.csv"
    if trace.exists():
        out += [generate("poisson-trace", trace=str(trace), n=12, rate=2.0, seed=1),
                generate("bros", trace=str(trace), n=12, rate=2.0, seed=1)]
    return out


@pytest.mark.parametrize("policy", THEORY)
def test_runs_on_every_generator(policy):
    for i in _generated():
        ev = evaluate(i, simulate(i, policy))
        assert ev.feasible, (i.name, ev.violations[:3])


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


def test_gba_and_gsa_geometric_base():
    # GBA with base 4 on the first hand instance: phase 0 (O <= 1): {a}, done at 1; phase 1
    # (O <= 4): c (2) and b (3) together (KV 2, 4, 3 <= 10), batches 1-3: c done at 3, b at
    # 4. Total 1 + 3 + 4 = 8 (base 2: 10, test_gba_phases_by_hand).
    i = inst([("a", 0.0, 1, 1), ("b", 0.0, 1, 3), ("c", 0.0, 1, 2)], M=10)
    s = simulate(i, "gba", base=4.0)
    assert entries(s) == [[("a", 1)], [("b", 1), ("c", 1)], [("b", 1), ("c", 1)], [("b", 1)]]
    assert total(i, s) == (8, 0)
    # GSA with base 3 on r (I=1, O=3): slice 1 (prefill, g = 1), evicted, slice
    # min(ceil(3^1), M - S + 1) = 3 from S = 2: recompute 2 tokens (g = 2), decode (g = 3).
    # The same batches as base 2 here: the second slice is not used up either way.
    j = inst([("r", 0.0, 1, 3)], M=10)
    assert entries(simulate(j, "gsa", base=3.0)) == [[("r", 1)], [], [("r", 2)], [("r", 1)]]
    for name in ("gba", "gsa"):
        with pytest.raises(PolicyError, match="base"):
            get_spec(name).make(base=1.0)
