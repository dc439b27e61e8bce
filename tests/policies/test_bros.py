"""BROS (paper 003): the bidirectional block table by hand, the deadline rule, and
feasibility of bros, bros-rr and the existing policies on random RT/BE workloads."""

from __future__ import annotations

import numpy as np
import pytest
from handworked import LATE, run_feasible
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.cost import LinearCost, UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies import get_policy, list_policies, simulate
from optsched.policies.bros import BidirectionalBlocks
from optsched.workloads.hybrid import hybrid_metrics


def test_rt_shares_a_be_block_from_the_left():
    # 2 blocks of 4 slots. BE b (id 1) takes 5 slots: block 0 full (4), block 1 holds 1 from
    # the right. RT a (id 0) needs 3: no empty block, so FindPreemptBlock gives block 1
    # (3 empty slots) and a fills it from the left: 1 + 3 = 4, nothing overwritten.
    t = BidirectionalBlocks(2, 4)
    assert t.grow(1, 5, rt=False, protected=set()) == []
    assert t.blocks[1] == [0, 1] and t.be_n.tolist() == [4, 1]
    assert t.grow(0, 3, rt=True, protected=set()) == []
    assert t.rt_owner.tolist() == [-1, 0] and t.rt_n.tolist() == [0, 3]
    assert t.held(0) == 3 and t.held(1) == 5


def test_lazy_checkpoint_overwrites_only_the_slots_needed():
    # continuing: a needs 2 more slots, none is free (4 + 4 used of 8), so a overwrites 2 of
    # b's slots: first b's 1 slot in block 1, the block a already shares with b (its peer,
    # section 5.2), then 1 in block 0 (the fullest BE block, 4 of b's slots). Only those 2
    # are checkpointed: b keeps 3 slots on the GPU, all in block 0 (a now holds 4 + 1).
    # The host reserves b's whole KV (5 tokens) at its first checkpoint: 10 - 5 = 5 left.
    t = BidirectionalBlocks(2, 4)
    t.grow(1, 5, rt=False, protected=set())
    t.grow(0, 3, rt=True, protected=set())
    t.host_free = 10
    assert t.grow(0, 2, rt=True, protected=set()) == [(1, 2)]
    assert t.held(1) == 3 and t.held(0) == 5
    assert t.blocks[1] == [0] and t.rt_n.tolist() == [1, 4] and t.be_n.tolist() == [3, 0]
    assert t.preempted == {1: (0, 1), 0: (0, 1)}
    assert t.host_free == 5 and t.reserved == {1}
    # a second checkpoint of b reserves nothing more: a overwrites 1 more slot of its peer b
    # in block 0, which it now shares (before this fix an RT request whose blocks were all
    # shared could not overwrite its peer at all)
    assert t.grow(0, 1, rt=True, protected=set()) == [(1, 1)]
    assert t.host_free == 5 and t.held(1) == 2 and t.rt_n.tolist() == [2, 4]


def test_lazy_checkpoint_needs_host_room_for_the_whole_victim():
    # the same table with 4 host tokens: b holds 5, so no checkpoint of b is allowed (its
    # GPU part could not be swapped out later), a's 2 slots are not found, nothing changes
    t = BidirectionalBlocks(2, 4)
    t.grow(1, 5, rt=False, protected=set())
    t.grow(0, 3, rt=True, protected=set())
    t.host_free = 4
    assert t.grow(0, 2, rt=True, protected=set()) is None
    assert t.host_free == 4 and t.reserved == set() and t.held(1) == 5 and t.preempted == {}


def test_no_checkpoint_of_protected_be_and_rollback():
    # b is in the batch (protected): a cannot overwrite it and the table is left unchanged
    t = BidirectionalBlocks(2, 4)
    t.grow(1, 8, rt=False, protected=set())
    t.host_free = 10
    before = (t.rt_n.tolist(), t.be_n.tolist())
    assert t.grow(0, 1, rt=True, protected={1}) is None
    assert (t.rt_n.tolist(), t.be_n.tolist()) == before and t.host_free == 10


def test_be_never_overwrites():
    t = BidirectionalBlocks(1, 4)
    t.grow(0, 4, rt=True, protected=set())
    assert t.grow(1, 1, rt=False, protected=set()) is None


def _hybrid(reqs, M=4096, C=4096, host=4096, cost=None):
    return Instance("h", Limits(kv_capacity=M, max_batch_tokens=C, host_capacity=host),
                    cost or LinearCost(k0=0.01, k1=0.001), tuple(reqs))


def test_deadline_rule_keeps_be_out_of_an_urgent_rt_iteration():
    # cost: 0.01 s per batch + 0.001 s per token. RT a (prompt 100, TTFT 0.12 s) and BE b
    # (prompt 200) arrive at 0. Alone, a's prefill takes 0.01 + 0.1 = 0.11 s <= 0.12 s; with
    # b's whole prompt it would take 0.31 s, with half (100) 0.21 s, a quarter (50) 0.16 s,
    # 25 tokens 0.135 s, 12 tokens 0.122 s, 6 tokens 0.116 s <= 0.12: so batch 0 holds a's
    # 100 tokens and a 6-token chunk of b (the halving rule) and a meets its TTFT.
    a = Request("a", 0, 100, 2, cls="rt", ttft_slo=0.12, tpot_slo=1.0)
    b = Request("b", 0, 200, 2, cls="be")
    inst = _hybrid([a, b])
    s = simulate(inst, "bros")
    assert s.batch(0).entries == [("a", 100), ("b", 6)]
    ev = evaluate(inst, s)
    assert ev.feasible and ev.ttft[0] == pytest.approx(0.116)


def test_bros_rr_alternates_classes():
    a = Request("a", 0, 10, 3, cls="rt", ttft_slo=1.0, tpot_slo=1.0)
    b = Request("b", 0, 10, 3, cls="be")
    s = simulate(_hybrid([a, b]), "bros-rr")
    assert [sorted(r for r, _ in bt.entries) for bt in s][:4] == [["a"], ["b"], ["a"], ["b"]]


# -- RT-over-RT drop by swap-out and the admission reserve (section 5.2) ---------------------
# Unit time, 4-slot BROS blocks, host 64 tokens. x is urgent (TTFT and TPOT SLOs 2), y lax (10).
GROW = (Request("x", 0, 4, 6, cls="rt", ttft_slo=2.0, tpot_slo=2.0),
        Request("y", 0, 2, 4, cls="rt", ttft_slo=10.0, tpot_slo=10.0))


def _unit(reqs, M, host=64):
    return Instance("h", Limits(kv_capacity=M, max_batch_tokens=16, host_capacity=host),
                    UnitCost(), tuple(reqs))


def test_started_rt_request_drops_a_less_urgent_one_by_swapping_it_out():
    # M = 12: blocks 0, 1, 2. B0 [0,1]: x's prompt fills block 0; y (2 tokens) takes block 1:
    # admitted, since x (block 0 full) still finds block 2 for its next token. B1, B2: x's
    # decodes take block 2 (m 5, 6), y's fill block 1 (m 3, 4). B3, B4: x decodes (m 7, 8:
    # block 2 full); y's block is full, no block is free, and y may drop only a less urgent
    # request (its residual 3 + 10 - 3 = 10 > x's 2): y waits. B5 [5,6]: x needs a slot; y (last token at 3,
    # residual 3 + 10 - 5 = 8 > x's 2) is dropped: its 4 tokens are swapped out (section 5.2)
    # and x takes y's block for its last token (g = 6 = O, done at 6). B6 [6,7]: y's 4
    # tokens are swapped back in and its last token generated (done at 7). Nothing is
    # recomputed; with rt_victim=recompute y is evicted and refills S = 5 tokens instead.
    inst = _unit(GROW, 12)
    p = get_policy("bros", block=4)
    s = simulate(inst, p)
    ev = evaluate(inst, s)
    assert [bt.entries for bt in s] == [[("x", 4), ("y", 2)], [("x", 1), ("y", 1)],
                                        [("x", 1), ("y", 1)], [("x", 1)], [("x", 1)],
                                        [("x", 1)], [("y", 1)]]
    assert s.batch(5).swap_out == [("y", 4)] and s.batch(6).swap_in == ["y"]
    assert ev.latency.tolist() == [6.0, 7.0] and ev.metrics["evictions"] == 0
    assert p.dropped == 1
    s = simulate(inst, get_policy("bros", block=4, rt_victim="recompute"))
    assert list(s.batch(5).evict) == ["y"] and s.batch(6).entries == [("y", 5)]
    assert evaluate(inst, s).metrics["recomputed_tokens"] == 4


def test_admission_keeps_a_block_for_a_started_requests_next_token():
    # M = 8: blocks 0, 1. x (4/3) and y (3/2) arrive at 0. B0: x's prompt fills block 0, so
    # x's next token needs a new block; admitting y into block 1 would leave none, so y waits
    # (admission="reserve"): B1, B2 x decodes into block 1 and finishes at 3; B3 y's prompt,
    # B4 its last token (latencies 3 and 5). Algorithm 1 as written (admission="greedy")
    # admits y at B0 and then drops it for x's next token (y swapped out at B1 and back in at
    # B3: latencies 3 and 4, one drop): with a swap priced at 0 (unit time) the drop is free
    # here; on the paper-like workload at 24 RT req/s the same rule made 3,591 drops
    # (studies/papers36/FINDINGS.md).
    reqs = (Request("x", 0, 4, 3, cls="rt", ttft_slo=2.0, tpot_slo=2.0),
            Request("y", 0, 3, 2, cls="rt", ttft_slo=10.0, tpot_slo=10.0))
    inst = _unit(reqs, 8)
    s = simulate(inst, get_policy("bros", block=4))
    assert [bt.entries for bt in s] == [[("x", 4)], [("x", 1)], [("x", 1)], [("y", 3)],
                                        [("y", 1)]]
    assert evaluate(inst, s).latency.tolist() == [3.0, 5.0]
    p = get_policy("bros", block=4, admission="greedy")
    s = simulate(inst, p)
    assert s.batch(0).entries == [("x", 4), ("y", 3)] and s.batch(1).swap_out == [("y", 3)]
    assert evaluate(inst, s).latency.tolist() == [3.0, 4.0] and p.dropped == 1


@st.composite
def hybrid_instances(draw):
    """RT/BE workloads on small KV capacities (a few 16-slot blocks, often not a multiple of
    16) and engine blocks of 1, 2 or 16 slots: where bros used to livelock."""
    n = draw(st.integers(1, 8))
    b = draw(st.sampled_from([1, 1, 1, 2, 16]))
    M = draw(st.integers(max(8, b), 400))
    reqs = []
    for k in range(n):
        rt = draw(st.booleans())
        prompt = draw(st.integers(1, 40))
        output = draw(st.integers(1, 12))
        if -(-(prompt + output - 1) // b) * b > M:
            continue
        reqs.append(Request(f"r{k}", float(draw(st.integers(0, 5))) * 0.05, prompt, output,
                            cls="rt" if rt else "be",
                            ttft_slo=draw(st.sampled_from([0.05, 0.4])) if rt else None,
                            tpot_slo=0.2 if rt else None))
    host = draw(st.sampled_from([0, 64, 1000]))
    C = draw(st.one_of(st.integers(1, 8), st.integers(40, 128)))
    lim = Limits(kv_capacity=M, max_batch_tokens=C, block_size=b, host_capacity=host)
    return Instance("h", lim, LinearCost(k0=0.01, k1=0.001), tuple(reqs or [Request("x", 0, 1, 1, cls="be")]))


POLICIES = [p.name for p in list_policies()]


# patience=1: drain mode at the first preemption, so the drain plans themselves are exercised
@pytest.mark.parametrize("policy,params", [("bros", {}), ("bros-rr", {}),
                                           ("bros", {"patience": 1}),
                                           ("bros", {"drop": False}),
                                           ("bros", {"admission": "greedy"}),
                                           ("bros", {"rt_victim": "recompute"}),
                                           ("bros", {"overlap": False}),
                                           ("bros-rr", {"patience": 1}),
                                           ("vllm", {}), ("sarathi", {}), ("fcfs", {})])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=hybrid_instances())
def test_feasible_on_random_rt_be_workloads(policy, params, inst):
    ev = evaluate(inst, simulate(inst, policy, **params))
    assert ev.feasible, (policy, ev.violations[:3])
    m = hybrid_metrics(inst, ev)
    assert m["rt_requests"] + m["be_requests"] == inst.n
    if m["rt_requests"]:
        assert 0 <= m["rt_ttft_attainment"] <= 1 and 0 <= m["rt_tpot_attainment"] <= 1


HYBRID = {"bros", "bros-rr"}
#: policies that read the per-request SLOs by design (slo-park: TTFT SLO per request)
SLO_AWARE = {"slo-park"}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=hybrid_instances())
def test_every_other_policy_ignores_classes_and_slos(inst):
    """the existing policies stay feasible on RT/BE workloads and ignore the classes
    and SLOs they do not use -- the schedule is the same with them stripped."""
    plain = inst.replace(requests=tuple(Request(r.id, r.arrival, r.prompt, r.output)
                                        for r in inst.requests))
    for policy in (p for p in POLICIES if p not in HYBRID):
        s = simulate(inst, policy)
        assert evaluate(inst, s).feasible, policy
        if policy not in SLO_AWARE:
            assert s == simulate(plain, policy), policy


def test_bros_generator_shape_and_be_batches_follow_the_service_estimate(tmp_path):
    from optsched.workloads.hybrid import BE_OUTPUT, BE_PROMPT, be_batch_service_time, bros_workload

    src = Instance("src", Limits(kv_capacity=10_000, max_batch_tokens=4096), requests=(
        Request("x", 0, 100, 20), Request("y", 0, 50, 10)))
    cost = LinearCost(k0=0.01, k1=0.0001)
    inst = bros_workload(src, 20, 5.0, seed=3, be_batch=4,
                         limits=Limits(kv_capacity=10_000, max_batch_tokens=4096), cost_model=cost)
    rt = [r for r in inst.requests if r.cls == "rt"]
    be = [r for r in inst.requests if r.cls == "be"]
    assert len(rt) == 20 and all(r.ttft_slo == 0.4 and r.tpot_slo == 0.2 for r in rt)
    assert {(r.prompt, r.output) for r in rt} <= {(100, 20), (50, 10)}
    assert all(BE_PROMPT[0] <= r.prompt <= BE_PROMPT[1] and BE_OUTPUT[0] <= r.output <= BE_OUTPUT[1]
               for r in be)
    assert inst.limits.host_capacity == 40_000
    # batch k + 1 arrives when batch k would finish alone (the estimate, recomputed here)
    times = sorted({r.arrival for r in be})
    assert times[0] == 0.0 and len(be) == 4 * len(times)
    first = [r for r in be if r.arrival == times[0]]
    import numpy as np

    est = be_batch_service_time(np.array([r.prompt for r in first]),
                                np.array([r.output for r in first]), cost, 4096)
    assert times[1] == pytest.approx(est)
    # and the estimate by hand for one tiny batch: prompts 3000 and 2000 packed in order into
    # C = 4096-token batches (3000 + the first 1096 of 2000; then the other 904), then one
    # decode batch of 2 (O = 2): (0.01 + 1e-4 * 4096) + (0.01 + 1e-4 * 904) + (0.01 + 2e-4)
    assert be_batch_service_time(np.array([3000, 2000]), np.array([2, 2]), cost, 4096) == \
        pytest.approx(0.01 + 0.4096 + 0.01 + 0.0904 + 0.0102)


def test_iteration_ip_by_hand_matches_the_deadline_rule():
    from optsched.oracles.bros_ip import Entry, best_batch

    # the deadline case above as the IP sees it: RT a (100 tokens, residual 0.12 s) and BE b's
    # options 200, 100, ..., 6 tokens; T = 0.01 + 0.001 * tokens. Only the 6-token chunk fits
    # with a (0.116 s <= 0.12); b's options exclude each other, so the best batch is {a, b:6}.
    cost = LinearCost(k0=0.01, k1=0.001, kswap=0.0)
    es = [Entry(0, True, 100, 0, False, 0.12)]
    es += [Entry(1, False, c, 0, False, float("inf")) for c in (200, 100, 50, 25, 12, 6)]
    ip = best_batch(es, cost, cap=4, max_tokens=4096, free_slots=10_000)
    assert ip.status == "optimal" and ip.chosen == [0, 6] and ip.checkpoints == {}
    # without the RT request the whole 200-token prefill is best (one option per request)
    assert best_batch(es[1:], cost, cap=4, max_tokens=4096, free_slots=10_000).chosen == [0]
    # (8): 150 free slots leave 100 as the largest chunk of b
    assert best_batch(es[1:], cost, cap=4, max_tokens=4096, free_slots=150).chosen == [1]


def test_iteration_ip_checkpoints_be_slots_at_their_price():
    from optsched.oracles.bros_ip import Entry, Overwritable, best_batch

    # RT a prefills 10 tokens (residual 0.05 s), 6 slots are free, BE b (id 1) holds 8 slots
    # on the GPU and could decode 1 token. T = 0.01 + 0.001 * tokens + 0.001 * checkpointed.
    # {a, b} needs 11 slots and b cannot be overwritten while in the batch: infeasible.
    # {a} overwrites 10 - 6 = 4 of b's slots: T = 0.01 + 0.010 + 0.004 = 0.024 <= 0.05.
    cost = LinearCost(k0=0.01, k1=0.001, kswap=0.001)
    es = [Entry(0, True, 10, 0, False, 0.05), Entry(1, False, 1, 8, True, float("inf"))]
    b = (Overwritable(1, gpu_slots=8, host_cost=8),)
    ip = best_batch(es, cost, cap=4, max_tokens=64, free_slots=6, overwritable=b, host_free=8)
    assert ip.status == "optimal" and ip.chosen == [0] and ip.checkpoints == {1: 4}
    # the checkpoint's transfer counts in (6): with residual 0.022 < 0.024 no batch exists
    # (a is the most urgent RT entry and must be in it)
    es[0] = Entry(0, True, 10, 0, False, 0.022)
    ip = best_batch(es, cost, cap=4, max_tokens=64, free_slots=6, overwritable=b, host_free=8)
    assert ip.chosen == [] and ip.status != "optimal"
    # the host reservation: b's whole KV (8) must fit the host room (7 does not)
    es[0] = Entry(0, True, 10, 0, False, 0.05)
    ip = best_batch(es, cost, cap=4, max_tokens=64, free_slots=6, overwritable=b, host_free=7)
    assert ip.chosen == []
    # without overwritable slots (the paper's eq. 8 alone) a does not fit either
    assert best_batch(es, cost, cap=4, max_tokens=64, free_slots=6).chosen == []


def test_iteration_entries_leave_out_be_options_the_room_excludes():
    from optsched.oracles.bros_ip import iteration_entries
    from optsched.policies.simulator import SimView, _Sim

    # A table of two 16-slot blocks, set by hand: BE b (id 1) holds 16 + 4 slots from the
    # right of both blocks, so BE a (id 0, prompt 40) has no block whose BE side is free
    # (room 0: no option at all), and b's room is the 12 free slots of its own blocks: its
    # options are the halvings of 24 (its whole prompt) and of 12 (its room) that fit in
    # 12 -- 12, 6, 3, 1 (24 does not)
    inst = _hybrid([Request("a", 0, 40, 2, cls="be"), Request("b", 0, 24, 2, cls="be")],
                   M=64, C=64)
    p = get_policy("bros")
    p.bind(SimView(_Sim(inst), inst.output.copy()))
    p.table = BidirectionalBlocks(2, 16)
    p.waiting = [0, 1]
    assert p.table.grow(1, 20, rt=False, protected=set()) == []
    entries, free = iteration_entries(p)
    assert free == 12
    assert [(e.req, e.tokens) for e in entries] == [(1, 12), (1, 6), (1, 3), (1, 1)]


def test_sampled_iterations_report_whether_the_greedy_batch_is_an_ip_point():
    from optsched.oracles.bros_ip import sample_iterations

    # the deadline case: iteration 0's greedy batch {a: 100, b: 6} is among the IP's options
    # ({a} and b's halvings 200, 100, ..., 6) and meets (6)-(8): an IP point, and the IP
    # finds the same number of BE entries (1)
    a = Request("a", 0, 100, 2, cls="rt", ttft_slo=0.12, tpot_slo=1.0)
    b = Request("b", 0, 200, 2, cls="be")
    rows = sample_iterations(_hybrid([a, b]), every=1, limit=1)
    assert rows[0]["iteration"] == 0 and rows[0]["greedy_is_ip_point"]
    assert rows[0]["greedy_be"] == rows[0]["ip_be"] == 1 and rows[0]["ip_status"] == "optimal"


def test_unblock_does_not_evict_the_request_it_just_refilled():
    """Found by Hypothesis: M = 66 with 16-slot blocks, host 64. r2 (BE, prompt 28, output 1,
    the newest) gets a 26-token chunk, nothing else fits, and the LIFO victim rule evicted r2
    itself, so the next iteration refilled the same 26 tokens: a livelock. A request in the
    middle of its first prefill is now the last victim, and the run finishes."""
    reqs = [Request("r0", 0.0, 12, 7, cls="be"), Request("r1", 0.0, 25, 9, cls="be"),
            Request("r2", 0.05, 28, 1, cls="be"), Request("r3", 0.0, 17, 11, cls="be"),
            Request("r4", 0.0, 1, 1, cls="be"), Request("r5", 0.0, 13, 1, cls="be"),
            Request("r6", 0.15, 12, 6, cls="rt", ttft_slo=0.05, tpot_slo=0.2)]
    inst = _hybrid(reqs, M=66, C=43, host=64)
    ev = evaluate(inst, simulate(inst, "bros"))
    assert ev.feasible


def test_block_layout_holds_exactly_m():
    # M = 41 with 16-slot blocks: two whole blocks and a last block of the 9 remaining slots
    # (not 41 one-slot blocks, the old gcd(16, 41) layout); engine blocks of b = 4 give
    # 41 // 4 = 10 unshared blocks of 4 (the evaluator charges each request whole blocks)
    t = BidirectionalBlocks.for_capacity(41, 16)
    assert t.slots.tolist() == [16, 16, 9] and t.capacity == 41 and t.shared
    assert t.grow(0, 41, rt=False, protected=set()) == [] and t.free_total() == 0
    p = get_policy("bros")
    p.bind(_view(Limits(kv_capacity=41, max_batch_tokens=8, block_size=4)))
    assert p.table.slots.tolist() == [4] * 10 and not p.table.shared


def _view(limits):
    from optsched.policies.simulator import SimView, _Sim

    inst = Instance("v", limits, LinearCost(k0=0.01, k1=0.001), (Request("a", 0, 1, 1),))
    return SimView(_Sim(inst), inst.output.copy())


def test_checkpointed_request_no_longer_pins_its_gpu_slots():
    """Found by Hypothesis on the pre-guard code (M = 41, C = 10, host 64): RT r0 (38 tokens)
    overwrote 26 of BE r3's 28 slots (lazy checkpoints); r3's other 2 stayed on the GPU,
    where r3 could be neither processed nor evicted (semantics section 6, rule 3), and the
    old victim rule swapped a request out only if its GPU part fit the free host room, so it
    kept evicting r5 (peak 29 + 12 - 1 = 40 > 41 - 2) and refilling it: a livelock. With
    the host reservation a checkpointed request's GPU part can always be swapped out."""
    reqs = [Request("r0", 0.05, 38, 2, cls="rt", ttft_slo=0.05, tpot_slo=0.2),
            Request("r2", 0, 1, 1, cls="be"), Request("r3", 0, 28, 2, cls="be"),
            Request("r4", 0, 1, 1, cls="be"), Request("r5", 0, 29, 12, cls="be")]
    inst = _hybrid(reqs, M=41, C=10, host=64)
    s = simulate(inst, "bros")
    ev = evaluate(inst, s)
    assert ev.feasible and ev.metrics["evictions"] == 0
    # r3's remaining GPU tokens were swapped out whole at some batch (a swap-out of r3 that
    # leaves nothing of it on the GPU)
    assert any(r == "r3" for bt in s for r, _ in bt.swap_out)


def test_bros_rr_refill_livelock_of_one_slot_blocks():
    """Found by Hypothesis on the pre-guard code (M = 3, C = 2, unit cost): q0 (1/3) and q2
    (2/1) each held part of the 3 one-slot blocks; neither could grow, q0 was evicted and
    refilled 2 tokens first (FCFS), forever. One block of 3 slots now holds one request at a
    time (no sharing in bros-rr), and the run finishes."""
    inst = Instance("x", Limits(3, 2), UnitCost(), (
        Request("q0", 0, 1, 3), Request("q1", 0, 1, 1), Request("q2", 0, 2, 1)))
    assert evaluate(inst, simulate(inst, "bros-rr")).feasible


def test_bros_rr_drain_mode_breaks_an_evict_refill_cycle():
    """M = 17 is a 16-slot block and a 1-slot block. q0 (prompt 2, arrives at t = 1) takes
    the 1-slot block for its first token; q3 (prompt 8, 10 outputs, peak 17 = M) then needs
    both blocks: it cannot grow at m = 16, is evicted (the LIFO victim rule spares q0, which
    is in the middle of its first prefill), refills 16 tokens in 8 batches (C = 2) and is
    evicted again. After ``patience`` = 2 evictions without a new token, drain mode takes
    the oldest request, q3: q0 is evicted and q3 runs alone to the end."""
    inst = Instance("x", Limits(17, 2), UnitCost(), (
        Request("q0", 1, 2, 1), Request("q1", 0, 1, 1), Request("q2", 0, 1, 1),
        Request("q3", 0, 8, 10), Request("q4", 0, 1, 1)))
    p = get_policy("bros-rr", patience=2)
    s = simulate(inst, p)
    assert evaluate(inst, s).feasible and p.drains == 1
    evictions = [(k, r) for k, bt in enumerate(s) for r in bt.evict]
    assert [r for _, r in evictions] == ["q3", "q3", "q0"]
    k = evictions[-1][0]  # the drain's first plan: q0 out, q3's first 2 tokens again
    assert s.batch(k).entries == [("q3", 2)]
    # q3 alone from there: 16 tokens in 8 batches of 2, then its last token (m = 16 -> 17)
    assert all([r for r, _ in s.batch(j).entries] == ["q3"] for j in range(k, k + 9))
    assert [r for r, _ in s.batch(k + 9).entries] == ["q0"]


def test_bros_drain_swaps_the_victim_out_and_the_target_in():
    """M = 17 (16 + 1 slots), C = 2, host 64, patience = 1. BE r5 (6/12, peak 17 = M) decodes
    alone in the 16-slot block; r3 (2/1, arrives at 0.05) takes the 1-slot block for its
    first token. At m = 16 r5 cannot grow, and the victim rule swaps r5 out whole (16
    tokens; r3 is in the middle of its first prefill, the last victim): one preemption, so
    drain mode targets the oldest request, r5: one plan swaps r3's 1 token out, swaps r5's
    16 back in and processes r5's last token (m 16 -> 17, its 12th output)."""
    inst = _hybrid([Request("r1", 0, 1, 1, cls="be"), Request("r3", 0.05, 2, 1, cls="be"),
                    Request("r4", 0, 1, 1, cls="be"), Request("r5", 0, 6, 12, cls="be")],
                   M=17, C=2, host=64)
    p = get_policy("bros", patience=1)
    s = simulate(inst, p)
    ev = evaluate(inst, s)
    assert ev.feasible and p.drains == 1 and ev.metrics["evictions"] == 0
    k = next(k for k, bt in enumerate(s) if bt.swap_in)
    assert s.batch(k - 1).swap_out == [("r5", 16)] and not s.batch(k - 1).entries
    assert s.batch(k).swap_out == [("r3", 1)] and s.batch(k).swap_in == ["r5"]
    assert s.batch(k).entries == [("r5", 1)]




def test_bros_a_late_request_does_not_set_the_batch_time_budget():
    inst = Instance("hand", Limits(kv_capacity=100, max_batch_tokens=10), UnitCost(), tuple(LATE))
    got, ev = run_feasible(inst, get_policy("bros"))
    # B0 [0,1]: x's prefill alone (a, b not arrived).  At t = 1 a's residual is
    # 0.2 + 0.5 - 1 = -0.3 (late), b's 0.2 + 10 - 1 = 9.2: b sets the budget (9.2 >= 1), so
    # B1 [1,2] holds a (most urgent), b and x.  B2 [2,3]: a and b decode their last token, x
    # its third: all finish at 3 (latencies x 3, a and b 2.8).
    # Before the fix the budget was a's -0.3: B1 held a alone, B2 a, b, x and B3 b, x
    # (x finished at 4, b at 4: latency 3.8).
    assert got == [[("x", 2)], [("a", 1), ("b", 1), ("x", 1)], [("a", 1), ("b", 1), ("x", 1)]]
    assert np.allclose(ev.latency, [3.0, 2.8, 2.8])


# -- BROS progressive drop (section 5.2) --------------------------------
# x (BE, I = 6, O = 3) at 0; a (RT, I = 4, O = 2, TTFT and TPOT SLOs 10) at 0.5. M = 8 in two
# BROS blocks of 4 slots; no host memory (a dropped request is evicted and recomputed).
DROP = (Request("x", 0, 6, 3, cls="be"),
        Request("a", 0.5, 4, 2, cls="rt", ttft_slo=10.0, tpot_slo=10.0))


def test_bros_urgent_rt_request_drops_be_work_when_no_memory_is_left():
    inst = Instance("hand", Limits(kv_capacity=8, max_batch_tokens=10), UnitCost(), DROP)
    policy = get_policy("bros", block=4, drop=True)
    got, ev = run_feasible(inst, policy)
    # B0 [0,1]: x's prompt: 6 slots (block 0 full, 2 of block 1); x: 6/7/1.
    # t = 1: a needs 4 slots, 2 are free and x's slots cannot be checkpointed (no host): x is
    #   dropped (evicted) and B1 [1,2] is a's prompt (4 <= 8): a: 4/5/1.
    # B2 [2,3]: a decodes its last token (5 slots); x's refill of S = 7 gets the 3 free slots
    #   (x: 3/7/1).  B3 [3,4]: a's slots are free: x's last 4 tokens (x: 7/8/2).  B4 [4,5]:
    #   x's last token.  Latencies: a 3 - 0.5 = 2.5, x 5.
    # Before the fix a waited for x (B1, B2 decode x; x finishes at 3), then B3 a's prompt and
    # B4 its decode: a's latency 5 - 0.5 = 4.5.
    assert got == [[("x", 6)], [("a", 4)], [("a", 1), ("x", 3)], [("x", 4)], [("x", 1)]]
    assert [list(b.evict) for b in simulate(inst, get_policy("bros", block=4, drop=True))][1] \
        == ["x"]
    assert ev.latency.tolist() == [5.0, 2.5] and policy.dropped == 1
    # drop=false keeps the old behaviour: a waits
    _, kept = run_feasible(inst, get_policy("bros", block=4, drop=False))
    assert kept.latency.tolist() == [3.0, 4.5]
