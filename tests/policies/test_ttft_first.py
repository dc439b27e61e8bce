"""TTFT-first (optsched/policies/ttft_first.py) on tiny instances worked out by hand (unit
time). Notation: ``x: m/S/g`` is request x's cached, known and generated tokens after the
batch; ``used`` the sum of reservations (module docstring)."""

from __future__ import annotations

import pytest

from optsched.cost import UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies import get_spec, simulate


def inst(reqs, M=100, C=100):
    return Instance("hand", Limits(kv_capacity=M, max_batch_tokens=C), UnitCost(),
                    tuple(Request(*r) for r in reqs))


def batches(instance, schedule):
    ev = evaluate(instance, schedule)
    assert ev.feasible, ev.violations
    return [(sorted(b.entries), sorted(b.evict)) for b in schedule], ev


def E(*entries, evict=()):
    return (sorted(entries), sorted(evict))


# a holds 3 of M = 6 when b (prompt 4) arrives: 3 + 4 > 6
EVICT = [("a", 0, 3, 4), ("b", 1, 4, 1)]


def test_arrival_evicts_the_running_request():
    i = inst(EVICT, M=6)
    got, ev = batches(i, simulate(i, "ttft-first"))
    assert got == [
        E(("a", 3)),                # t=0: a: 3/4/1, used 3
        E(("b", 4), evict=["a"]),   # t=1: b needs 4 > 6 - 3: a evicted; b: 4/5/1 done
        E(("a", 4)),                # t=2: refill a (4 <= 6 free): a: 4/5/2
        E(("a", 1)),                # t=3: a: 5/6/3, used 5
        E(("a", 1)),                # t=4: a: 6/7/4 done, used 6 <= M
    ]
    # TTFT: a 1 - 0, b 2 - 1 -> mean 1; latency a 5, b 1 -> total 6
    assert ev.objective("mean-ttft") == pytest.approx(1.0)
    assert ev.objective("total-latency") == pytest.approx(6.0)
    assert ev.metrics["evictions"] == 1


def test_refill_is_chunked():
    """As above with refill_chunk = 2: a's refill (S = 4, 4 reserved) runs 2 + 2 tokens, the
    second chunk completes it (a: 4/5/2); then two decodes (used 5, then 6 <= M)."""
    i = inst(EVICT, M=6)
    got, _ = batches(i, simulate(i, "ttft-first", refill_chunk=2))
    assert got == [E(("a", 3)), E(("b", 4), evict=["a"]), E(("a", 2)), E(("a", 2)),
                   E(("a", 1)), E(("a", 1))]


def test_vllm_makes_the_same_arrival_wait():
    """The comparison the policy exists for: vLLM never evicts for a waiting request, so b
    waits for a: a's batches end at 1, 2, 3, 4 (a: 3/4/1, 4/5/2, 5/6/3, 6/7/4 done), then b
    runs in [4, 5]: TTFT a 1, b 5 - 1 = 4, mean 2.5 (ttft-first: 1)."""
    i = inst(EVICT, M=6)
    ev = evaluate(i, simulate(i, "vllm"))
    assert ev.objective("mean-ttft") == pytest.approx(2.5)


# a (O = 6) and b (O = 2) run when d (prompt 5) arrives; M = 8
VICTIM = [("a", 0, 2, 6), ("b", 0, 2, 2), ("d", 1, 5, 1)]


@pytest.mark.parametrize("hybrid, want", [
    (True, [
        E(("a", 2), ("b", 2)),                # a, b: 2/3/1; used 4
        # d needs 5 > 8 - 4: the lowest resident priority (arrival, ties by index) is b;
        # used 2 + 5 = 7, then a decodes (+1): 8; a: 3/4/2; d done
        E(("d", 5), ("a", 1), evict=["b"]),
        E(("a", 1), ("b", 3)),                # used 3 + 1, refill b: 4 + 3 <= 8; b done
        E(("a", 1)), E(("a", 1)), E(("a", 1)),  # a: g = 4, 5, 6 (done)
    ]),
    (False, [
        E(("a", 2), ("b", 2)),
        E(("d", 5), evict=["b"]),             # a batch with a first prefill holds nothing else
        E(("a", 1), ("b", 3)),                # used 2 + 1, refill b: 3 + 3 <= 8; a: 3/4/2
        E(("a", 1)), E(("a", 1)), E(("a", 1)), E(("a", 1)),  # a: g = 3 .. 6
    ]),
])
def test_latest_arrival_is_evicted_first(hybrid, want):
    i = inst(VICTIM, M=8)
    got, _ = batches(i, simulate(i, "ttft-first", hybrid=hybrid))
    assert got == want


@pytest.mark.parametrize("hybrid, want", [
    (True, [
        E(("a", 2), ("b", 2)),
        # remaining output: a 6 - 1 = 5, b 2 - 1 = 1 -> a is the victim; used 2 + 5 = 7,
        # b decodes (+1) and finishes
        E(("d", 5), ("b", 1), evict=["a"]),
        E(("a", 3)),                          # refill a: 3/4/2
        E(("a", 1)), E(("a", 1)), E(("a", 1)), E(("a", 1)),  # a: g = 3 .. 6
    ]),
    (False, [
        E(("a", 2), ("b", 2)),
        E(("d", 5), evict=["a"]),             # used 2 + 5 = 7; d done: 2
        E(("b", 1), ("a", 3)),                # b decodes (3) and finishes; refill a: 3 + 3
        E(("a", 1)), E(("a", 1)), E(("a", 1)), E(("a", 1)),  # a: g = 3 .. 6
    ]),
])
def test_shortest_remaining_variant_evicts_the_longest(hybrid, want):
    i = inst(VICTIM, M=8)
    got, _ = batches(i, simulate(i, "ttft-first-sr", hybrid=hybrid))
    assert got == want
    assert get_spec("ttft-first-sr").hypothetical and not get_spec("ttft-first").hypothetical


# C = 4: a (prompt 4) and b (prompt 2) arrive together
ORDER = [("a", 0, 4, 1), ("b", 0, 2, 1)]


@pytest.mark.parametrize("first, want", [
    # shortest prompt first: b whole, then 2 of a's 4 tokens (chunked, 4 reserved)
    ("prompt", [E(("b", 2), ("a", 2)), E(("a", 2))]),
    # arrival (ties by index): a fills the batch, b next
    ("arrival", [E(("a", 4)), E(("b", 2))]),
])
def test_first_prefill_order_and_chunking(first, want):
    i = inst(ORDER, C=4)
    got, _ = batches(i, simulate(i, "ttft-first", first=first))
    assert got == want


def test_decode_self_evicts_when_it_is_the_lowest_priority():
    """a (O = 3) and b (O = 3) with M = 5: both prefill 2 (used 4); a decodes (+1, used 5);
    b cannot grow and is the lowest-priority resident: it evicts itself (vLLM's recompute
    preemption); its refill waits until a has finished."""
    i = inst([("a", 0, 2, 3), ("b", 0, 2, 3)], M=5)
    got, _ = batches(i, simulate(i, "ttft-first"))
    assert got == [
        E(("a", 2), ("b", 2)),          # a, b: 2/3/1, used 4
        E(("a", 1), evict=["b"]),       # a: 3/4/2, used 5; b cannot grow: self-evicted
        E(("a", 1)),                    # a: 4/5/3 done, used 4; refill b: 4 + 3 > 5
        E(("b", 3)),                    # a freed: refill b: 3/4/2
        E(("b", 1)),                    # b: 4/5/3 done
    ]
