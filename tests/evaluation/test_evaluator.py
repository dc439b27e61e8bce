"""The one evaluator: hand-worked replays, one test per violation code, properties."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from handworked import SWAP_ROUND_TRIP, hidden_instance, swap_instance
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from optsched.cost import (
    LinearCost,
    UnitCost,
)
from optsched.evaluation import CODES, evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies import simulate
from optsched.schedule import Schedule
from optsched.testing import instances, valid_schedules
from optsched.workloads.generators import infermax_mix


def inst_of(reqs, M=16, C=4096, P=None, size=None, block=1, cost=None):
    return Instance(
        "t",
        Limits(kv_capacity=M, max_batch_tokens=C, max_prefill_tokens=P, max_batch_size=size,
               block_size=block),
        cost or UnitCost(),
        tuple(Request(*r) for r in reqs),
    )


def sched(*batches):
    return Schedule.from_batches(batches)


def codes(ev):
    return sorted({v.code for v in ev.violations})


# --- hand-worked feasible replays -------------------------------------------------------


def test_two_requests_unit_cost_by_hand():
    # a: I=4, O=3; b: I=2, O=2, both at t=0.
    # batch0: a prefill 4 (m=4=S -> token 1, S=5), b prefill 2 (m=2=S -> token 1, S=3); KV 6
    # batch1: a decode (m=5 -> token 2), b decode (m=3 -> token 2 = O, done); KV 5+3 = 8
    # batch2: a decode (m=6 -> token 3 = O, done); KV 6 (b freed)
    inst = inst_of([("a", 0, 4, 3), ("b", 0, 2, 2)])
    ev = evaluate(inst, sched(([("a", 4), ("b", 2)],), ([("a", 1), ("b", 1)],), ([("a", 1)],)))
    assert ev.feasible
    assert ev.batch_kv.tolist() == [6, 8, 6]
    assert ev.batch_end.tolist() == [1, 2, 3]
    assert ev.first_token.tolist() == [1, 1]
    assert ev.completion.tolist() == [3, 2]
    assert ev.tpot.tolist() == [1.0, 1.0]  # a: (3-1)/2, b: (2-1)/1
    assert ev.metrics["makespan"] == 3
    assert ev.metrics["total_latency"] == 5
    assert ev.metrics["peak_kv"] == 8
    assert ev.entry_decode.tolist() == [False, False, True, True, True]
    assert ev.batch_prefill_entries.tolist() == [2, 0, 0]
    assert ev.batch_decode_entries.tolist() == [0, 2, 1]


def test_eviction_and_refill_by_hand():
    # a: I=3, O=3. batch0: a 3 -> token 1 (S=4, m=3). batch1: evict a (m:=0).
    # batch2: refill 2 of S=4 (m=2, no token). batch3: refill 2 more (m=4=S -> token 2, S=5).
    # batch4: decode (m=5 -> token 3 = O). Recomputed tokens = m at eviction = 3.
    inst = inst_of([("a", 0, 3, 3)])
    s = sched(([("a", 3)],), ([], ["a"]), ([("a", 2)],), ([("a", 2)],), ([("a", 1)],))
    ev = evaluate(inst, s)
    assert ev.feasible, ev.violations
    assert ev.batch_kv.tolist() == [3, 0, 2, 4, 5]
    # the eviction-only batch takes no time
    assert ev.batch_duration.tolist() == [1, 0, 1, 1, 1]
    assert ev.completion.tolist() == [4]
    assert ev.evictions.tolist() == [1]
    assert ev.recomputed_tokens.tolist() == [3]
    assert ev.metrics["recomputed_tokens"] == 3
    # refill chunks are prefill entries; the last entry is a decode
    assert ev.entry_decode.tolist() == [False, False, False, True]


def test_linear_cost_by_hand():
    k = dict(k0=1.0, k1=0.1, kpq=0.01, kpm=0.001, kdm=0.002, kpr=0.5, kdr=0.25)
    cost = LinearCost(**k)
    inst = inst_of([("a", 0, 4, 2), ("b", 0, 6, 2)], M=32, cost=cost)
    # batch0: a prefill c=4 m=0; b chunk c=3 m=0 (no token yet)
    # batch1: a decode c=1 m=4 (token 2 = O, done); b chunk c=3 m=3 (m=6=S -> token 1)
    # batch2: b decode c=1 m=6 -> done
    s = sched(([("a", 4), ("b", 3)],), ([("a", 1), ("b", 3)],), ([("b", 1)],))
    ev = evaluate(inst, s)
    assert ev.feasible, ev.violations
    t0 = 1.0 + 0.1 * 7 + 0.01 * (16 + 9) + 0.5 * 2
    t1 = 1.0 + 0.1 * 4 + (0.01 * 9 + 0.001 * 3 * 3 + 0.5) + (0.002 * 4 + 0.25)
    t2 = 1.0 + 0.1 * 1 + (0.002 * 6 + 0.25)
    assert ev.batch_duration == pytest.approx([t0, t1, t2])
    assert ev.completion == pytest.approx([t0 + t1, t0 + t1 + t2])
    assert ev.first_token == pytest.approx([t0, t0 + t1])


def test_linear_cost_batch_biases_and_prefill_linear_term():
    cost = LinearCost(k0=1.0, kpb=0.5, kdb=0.25, kpl=0.01)
    inst = inst_of([("a", 0, 4, 2), ("b", 0, 2, 3)], M=32, cost=cost)
    # batch0: a chunk 2 (prefill, m=0), b prefill 2 -> 1 + 0.5 (prefill bias)
    # batch1: a chunk 2 (prefill, m=2 -> kpl*2), b decode -> 1 + 0.5 + 0.25 + 0.02
    # batch2: a decode, b decode -> 1 + 0.25
    s = sched(([("a", 2), ("b", 2)],), ([("a", 2), ("b", 1)],), ([("a", 1), ("b", 1)],))
    ev = evaluate(inst, s)
    assert ev.feasible, ev.violations
    assert ev.batch_duration == pytest.approx([1.5, 1.77, 1.25])


def test_arrivals_idle_and_stated_start():
    # a arrives at 0, b at 5. Batches start at the latest arrival they touch.
    inst = inst_of([("a", 0, 1, 1), ("b", 5, 1, 2)])
    ev = evaluate(inst, sched(([("a", 1)],), ([("b", 1)],), ([("b", 1)], [], 9.0)))
    assert ev.feasible, ev.violations
    assert ev.batch_start.tolist() == [0, 5, 9]  # idle until 5; deliberate idling to 9
    assert ev.completion.tolist() == [1, 10]
    assert ev.latency.tolist() == [1, 5]
    assert ev.ttft.tolist() == [1, 1]
    assert math.isnan(ev.tpot[0])  # O = 1: TPOT undefined
    assert ev.tpot[1] == 4.0


def test_block_size_rounds_kv_up():
    inst = inst_of([("a", 0, 3, 2)], M=4, block=2)
    ev = evaluate(inst, sched(([("a", 3)],), ([("a", 1)],)))
    assert ev.feasible
    assert ev.batch_kv.tolist() == [4, 4]


def test_finished_request_kv_counts_in_its_last_batch():
    # a finishes in batch 1 with m=5; b's prefill of 4 in batch 1 must fit together with it.
    inst = inst_of([("a", 0, 4, 2), ("b", 0, 4, 1)], M=8)
    ev = evaluate(inst, sched(([("a", 4)],), ([("a", 1), ("b", 4)],)))
    assert codes(ev) == ["KV_OVERFLOW"]
    assert ev.violations[0].batch == 1


def test_slo_attainment():
    reqs = (Request("a", 0, 1, 2, ttft_slo=1.0, tpot_slo=1.0), Request("b", 0, 1, 2, ttft_slo=0.5))
    inst = Instance("slo", Limits(16, 16), UnitCost(), reqs)
    ev = evaluate(inst, sched(([("a", 1), ("b", 1)],), ([("a", 1), ("b", 1)],)))
    assert ev.metrics["slo_attainment"] == 0.5  # b's TTFT 1 > 0.5


# --- one test per violation code --------------------------------------------------------

ONE = [("a", 0, 2, 2)]


def test_unknown_request():
    ev = evaluate(inst_of(ONE), sched(([("a", 2), ("zz", 1)],), ([("a", 1)],)))
    assert codes(ev) == ["UNKNOWN_REQUEST"]
    assert ev.violations[0].request == "zz" and ev.violations[0].batch == 0


def test_before_arrival():
    inst = inst_of([("a", 3, 2, 1)])
    ev = evaluate(inst, sched(([("a", 2)], [], 1.0)))
    assert codes(ev) == ["BEFORE_ARRIVAL"]
    assert ev.violations[0].request == "a"


def test_start_too_early():
    ev = evaluate(inst_of(ONE), sched(([("a", 2)], [], 0.0), ([("a", 1)], [], 0.5)))
    assert codes(ev) == ["START_TOO_EARLY"]
    assert ev.violations[0].batch == 1


def test_zero_tokens():
    ev = evaluate(inst_of(ONE), sched(([("a", 2)],), ([("a", 0)],), ([("a", 1)],)))
    assert codes(ev) == ["ZERO_TOKENS"]
    assert ev.violations[0].batch == 1


def test_tokens_over_available():
    ev = evaluate(inst_of(ONE), sched(([("a", 2)],), ([("a", 2)],)))
    assert "TOKENS_OVER_AVAILABLE" in codes(ev)
    v = [v for v in ev.violations if v.code == "TOKENS_OVER_AVAILABLE"][0]
    assert (v.batch, v.request) == (1, "a")


def test_duplicate_entry():
    ev = evaluate(inst_of(ONE), sched(([("a", 1), ("a", 1)],), ([("a", 1)],), ([("a", 1)],)))
    assert "DUPLICATE_ENTRY" in codes(ev)


def test_duplicate_eviction():
    # a: I=2, O=3. Batch 1 lists "a" twice among its evictions: the second one is reported
    # and ignored, the first drops a's 2 cached tokens; the refill of S = 3 then finishes it.
    s = sched(([("a", 2)],), ([], ["a", "a"]), ([("a", 3)],), ([("a", 1)],))
    ev = evaluate(inst_of([("a", 0, 2, 3)]), s)
    assert codes(ev) == ["DUPLICATE_EVICTION"]
    assert (ev.violations[0].batch, ev.violations[0].request) == (1, "a")
    assert ev.evictions.tolist() == [1] and ev.recomputed_tokens.tolist() == [2]


def test_evict_and_process():
    ev = evaluate(inst_of(ONE), sched(([("a", 2)],), ([("a", 1)], ["a"])))
    assert codes(ev) == ["EVICT_AND_PROCESS"]


def test_evict_not_resident():
    ev = evaluate(inst_of(ONE), sched(([], ["a"]), ([("a", 2)],), ([("a", 1)],)))
    assert codes(ev) == ["EVICT_NOT_RESIDENT"]
    assert ev.violations[0].batch == 0


def test_entry_after_finish():
    ev = evaluate(inst_of(ONE), sched(([("a", 2)],), ([("a", 1)],), ([("a", 1)],)))
    assert codes(ev) == ["ENTRY_AFTER_FINISH"]
    assert ev.violations[0].batch == 2


def test_kv_overflow():
    ev = evaluate(inst_of([("a", 0, 3, 2), ("b", 0, 3, 2)], M=5), sched(([("a", 3), ("b", 3)],),
                                                                       ([("a", 1), ("b", 1)],)))
    assert "KV_OVERFLOW" in codes(ev)


def test_batch_tokens():
    ev = evaluate(inst_of([("a", 0, 3, 1), ("b", 0, 3, 1)], C=5), sched(([("a", 3), ("b", 3)],)))
    assert codes(ev) == ["BATCH_TOKENS"]


def test_prefill_tokens():
    ev = evaluate(inst_of([("a", 0, 3, 1), ("b", 0, 3, 1)], C=8, P=4), sched(([("a", 3), ("b", 3)],)))
    assert codes(ev) == ["PREFILL_TOKENS"]


def test_batch_size():
    ev = evaluate(inst_of([("a", 0, 1, 1), ("b", 0, 1, 1)], size=1), sched(([("a", 1), ("b", 1)],)))
    assert codes(ev) == ["BATCH_SIZE"]


def test_incomplete():
    ev = evaluate(inst_of([("a", 0, 2, 2), ("b", 0, 1, 1)]), sched(([("a", 2)],)))
    assert codes(ev) == ["INCOMPLETE"]
    assert sorted(v.request for v in ev.violations) == ["a", "b"]
    assert ev.metrics["total_latency"] is None


def test_every_code_has_a_test():
    # the prefix-reuse codes are tested next to their rules (test_prefix.py)
    from pathlib import Path

    here = open(__file__).read() + (Path(__file__).parent / "test_prefix.py").read_text()
    for code in CODES:
        assert f"def test_{code.lower()}" in here, code


# --- round trips ---------------------------------------------------------------------


def test_schedule_json_and_npz_round_trip(tmp_path):
    s = sched(([("a", 2), ("b", 1)], ["c"], 0.5), ([("a", 1)],))
    assert Schedule.from_dict(s.to_dict()) == s
    for name in ("s.json", "s.npz"):
        s.save(tmp_path / name)
        assert Schedule.load(tmp_path / name) == s
    assert s.without_starts() != s


def test_npz_narrowed_arrays_read_back_exactly(tmp_path):
    """Schedule.save narrows integer arrays (uint8/16/32 by their largest value) and deflates
    at level 1; loading widens them to int64 with the same values. Token counts 255, 256,
    65,535, 65,536 and 2**32 sit on both sides of each narrowing boundary."""
    tokens = [255, 256, 65_535, 65_536, 2**32]
    s = sched(*[([("a", t)], ["a"] if k == 1 else [], float(k)) for k, t in enumerate(tokens)])
    s.save(tmp_path / "s.npz")
    back = Schedule.load(tmp_path / "s.npz")
    assert back == s and back.entry_tokens.tolist() == tokens
    assert back.entry_tokens.dtype == back.batch_ptr.dtype == np.int64
    with np.load(tmp_path / "s.npz") as z:  # 2**32 does not fit uint32; 5 batches fit uint8
        assert z["entry_tokens"].dtype == np.int64 and z["batch_ptr"].dtype == np.uint8
    # files written before (np.savez_compressed of int64 arrays) still load
    np.savez_compressed(tmp_path / "old.npz", ids=np.array(s.ids), batch_ptr=s.batch_ptr,
                        entry_req=s.entry_req, entry_tokens=s.entry_tokens,
                        evict_ptr=s.evict_ptr, evict_req=s.evict_req, start=s.start)
    assert Schedule.load(tmp_path / "old.npz") == s


def test_instance_json_round_trip(tmp_path):
    reqs = (Request("a", 0.5, 4, 3, predicted_output=5, cls="rt", ttft_slo=2.0), Request("b", 0, 1, 1))
    inst = Instance("x", Limits(16, 8, 4, 3, 2), LinearCost(k0=1, kdr=0.5), reqs)
    inst.save(tmp_path / "i.json")
    assert Instance.load(tmp_path / "i.json") == inst
    assert Instance.from_json(inst.to_json()) == inst


# --- properties: random valid schedules are accepted, mutations rejected -------------------

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(st.data())
def test_random_valid_schedules_are_accepted(data):
    inst = data.draw(instances())
    trace = data.draw(valid_schedules(inst))
    assume(len(trace.completion_batch) == inst.n)
    ev = evaluate(inst, trace.schedule)
    assert ev.feasible, [str(v) for v in ev.violations]
    # completion happens at the end of the batch the naive replay finished the request in
    for i, rid in enumerate(inst.ids):
        assert ev.completion[i] == pytest.approx(ev.batch_end[trace.completion_batch[rid]])
    assert ev.metrics["peak_kv"] <= inst.limits.kv_capacity
    # every processed token is a first computation or a recomputation
    total = int(trace.schedule.entry_tokens.sum())
    assert total == int((inst.prompt + inst.output - 1).sum()) + ev.metrics["recomputed_tokens"]


@SETTINGS
@given(st.data())
def test_one_token_too_many_is_rejected(data):
    inst = data.draw(instances())
    trace = data.draw(valid_schedules(inst))
    assume(len(trace.completion_batch) == inst.n)
    full = [k for k, (_, _, c, room) in enumerate(trace.entries) if c == room]
    assume(full)
    k = data.draw(st.sampled_from(full))
    s = trace.schedule
    tokens = s.entry_tokens.copy()
    # entries are stored in the generator's order, so entry k is trace.entries[k]
    tokens[k] += 1
    bad = Schedule(s.ids, s.batch_ptr, s.entry_req, tokens, s.evict_ptr, s.evict_req, s.start)
    ev = evaluate(inst, bad)
    assert not ev.feasible
    assert "TOKENS_OVER_AVAILABLE" in ev.violation_counts or "ENTRY_AFTER_FINISH" in ev.violation_counts


@SETTINGS
@given(st.data())
def test_batch_moved_before_an_arrival_is_rejected(data):
    inst = data.draw(instances(online=True, linear=False))
    assume(inst.arrival.max() > 0)
    trace = data.draw(valid_schedules(inst, stated_starts=True))
    assume(len(trace.completion_batch) == inst.n)
    assert evaluate(inst, trace.schedule).feasible
    s = trace.schedule
    # pick a batch that touches a late request and state a start before that arrival
    late = {rid for rid in inst.ids if inst.request(rid).arrival > 0}
    cands = [j for j in range(s.n_batches) if any(r in late for r, _ in s.batch(j).entries)]
    assume(cands)
    j = data.draw(st.sampled_from(cands))
    a = max(inst.request(r).arrival for r, _ in s.batch(j).entries)
    start = s.start.copy()
    start[j] = a - 0.5
    ev = evaluate(inst, s.replace_starts(start))
    assert not ev.feasible
    assert {"BEFORE_ARRIVAL", "START_TOO_EARLY"} & set(ev.violation_counts)


@SETTINGS
@given(st.data())
def test_dropped_batch_is_rejected(data):
    inst = data.draw(instances())
    trace = data.draw(valid_schedules(inst))
    assume(len(trace.completion_batch) == inst.n)
    # drop a batch in which some request completes: it can never finish afterwards
    j = data.draw(st.sampled_from(sorted(set(trace.completion_batch.values()))))
    batches = [b for k, b in enumerate(trace.schedule) if k != j]
    ev = evaluate(inst, Schedule.from_batches(batches))
    assert not ev.feasible
    assert "INCOMPLETE" in ev.violation_counts


def test_kv_with_eviction_and_partial_refill_by_hand():
    inst = inst_of([("a", 0, 3, 3), ("b", 0, 2, 4)], M=10)
    s = sched(([("a", 3), ("b", 1)],), ([("a", 1), ("b", 1)],), ([("b", 1)], ["a"]),
              ([("a", 4), ("b", 1)],), ([("a", 1), ("b", 1)],))
    ev = evaluate(inst, s)
    assert ev.feasible, [str(v) for v in ev.violations]
    # a: m 3 (token 1, S=4) | 4 (token 2, S=5) | evicted: 0 | refill 4 of S=5: 4 | 5 (token 3, done)
    # b: m 1 | 2 (token 1, S=3) | 3 (token 2) | 4 (token 3) | 5 (token 4 = O, done)
    assert ev.batch_kv.tolist() == [4, 6, 3, 8, 10]
    assert ev.recomputed_tokens.tolist() == [4, 0]
    assert ev.completion.tolist() == [5, 5]


# --- edge cases: no surviving entries, tolerance at large times, empty batches --------------

LINEAR = LinearCost(k0=0.5, k1=0.25, kpq=0.01, kdm=0.001)


@pytest.mark.parametrize("cost", [UnitCost(), LINEAR], ids=["unit", "linear"])
@pytest.mark.parametrize(
    "batches, expected",
    [
        ([{"entries": []}], ["INCOMPLETE"]),
        ([{"entries": [["a", 0]]}], ["INCOMPLETE", "ZERO_TOKENS"]),
        ([{"entries": [["zz", 1]]}], ["INCOMPLETE", "UNKNOWN_REQUEST"]),
        ([{"entries": [], "evict": ["zz"]}], ["INCOMPLETE", "UNKNOWN_REQUEST"]),
    ],
    ids=["empty", "zero-tokens", "unknown-id", "unknown-eviction"],
)
def test_schedule_without_a_surviving_entry_returns_violations(cost, batches, expected):
    # no entry survives validation, so every batch is empty: durations 0 under both models
    ev = evaluate(inst_of(ONE, cost=cost), Schedule.from_dict({"batches": batches}))
    assert codes(ev) == expected
    assert ev.batch_duration.tolist() == [0.0]
    assert ev.metrics["makespan"] == 0.0


def _any_schedule(ids):
    """Syntactically valid schedules: known and unknown ids, any token count, any start."""
    rid = st.sampled_from([*ids, "zz"])
    batch = st.fixed_dictionaries(
        {"entries": st.lists(st.tuples(rid, st.integers(-2, 8)), max_size=4)},
        optional={"evict": st.lists(rid, max_size=3),
                  "start": st.floats(-10, 1e12, allow_nan=False)},
    )
    return st.lists(batch, max_size=8).map(lambda b: Schedule.from_dict({"batches": b}))


@SETTINGS
@given(st.data())
def test_evaluator_never_raises_on_a_valid_schedule_file(data):
    inst = data.draw(instances())
    s = data.draw(_any_schedule(inst.ids))
    ev = evaluate(inst, s)
    assert ev.feasible == (not ev.violation_counts)
    assert ev.batch_end.size == s.n_batches
    assert set(ev.violation_counts) <= set(CODES)


@pytest.mark.parametrize("t", [1e9, 1e12])
def test_start_half_a_unit_early_at_a_large_time_is_a_violation(t):
    inst = inst_of([("a", t, 2, 2)])
    # batch 0 stated half a unit before a's arrival
    ev = evaluate(inst, sched(([("a", 2)], [], t - 0.5), ([("a", 1)],)))
    assert codes(ev) == ["BEFORE_ARRIVAL"]
    # batch 0 runs [t, t+1]; batch 1 stated half a unit before t + 1
    ev = evaluate(inst, sched(([("a", 2)], [], t), ([("a", 1)], [], t + 0.5)))
    assert codes(ev) == ["START_TOO_EARLY"]
    # the exact starts are accepted and kept
    ev = evaluate(inst, sched(([("a", 2)], [], t), ([("a", 1)], [], t + 1)))
    assert ev.feasible and ev.batch_start.tolist() == [t, t + 1]


def test_start_tolerance_is_relative_to_durations_not_to_time():
    # linear cost: batch 0 (prefill c = 2, m = 0) takes k0 + 2*k1 + 4*kpq = 0.5 + 0.5 + 0.04
    inst = inst_of([("a", 1e9, 2, 2)], cost=LINEAR)
    d0 = 0.5 + 2 * 0.25 + 0.01 * 4
    end0 = 1e9 + d0
    # a microsecond early at t = 1e9 is far above 1e-9 of a ~1 s batch (and above the
    # float resolution there, 1.2e-7): a violation; the old rule (1e-9 * t = 1 s) accepted it
    ev = evaluate(inst, sched(([("a", 2)],), ([("a", 1)], [], end0 - 1e-6)))
    assert codes(ev) == ["START_TOO_EARLY"]
    # one unit in the last place early is rounding, not an early start
    ev = evaluate(inst, sched(([("a", 2)],), ([("a", 1)], [], float(np.nextafter(end0, 0)))))
    assert ev.feasible, [str(v) for v in ev.violations]


def test_empty_batch_takes_no_time_and_only_states_a_later_start():
    inst = inst_of([("a", 0, 2, 2), ("b", 0, 1, 1)])
    # unit time. batch 0: a prefill [0, 1] (token 1); batch 1: empty, stated start 5, takes
    # no time [5, 5]; batch 2: a decode [5, 6] (token 2, done) and b prefill (done);
    # batch 3: empty, stated start 100: trailing, it moves no completion
    s = sched(([("a", 2)],), ([], [], 5.0), ([("a", 1), ("b", 1)],), ([], [], 100.0))
    ev = evaluate(inst, s)
    assert ev.feasible, [str(v) for v in ev.violations]
    assert ev.batch_start.tolist() == [0, 5, 5, 100]
    assert ev.batch_duration.tolist() == [1, 0, 1, 0]
    assert ev.completion.tolist() == [6, 6]
    # makespan is the latest completion (6), not the trailing empty batch's time (100)
    assert ev.metrics["makespan"] == 6.0
    assert ev.metrics["tokens_per_second"] == pytest.approx(3 / 6)


@SETTINGS
@given(st.data())
def test_makespan_is_the_latest_completion(data):
    inst = data.draw(instances())
    trace = data.draw(valid_schedules(inst))
    assume(len(trace.completion_batch) == inst.n)
    # append a trailing empty batch stated far in the future: it must not move the makespan
    late = Schedule.from_batches([*trace.schedule, ([], [], 1e6)])
    for s in (trace.schedule, late):
        ev = evaluate(inst, s)
        assert ev.feasible
        assert ev.metrics["makespan"] == ev.completion.max()


# --- swap preemption: one test per code (docs/semantics.md section 6) --------------------
# a: I=4, O=3 swaps out and back; every case breaks exactly one swap rule.


def _swap_inst(host=8, M=16):
    return Instance("t", Limits(kv_capacity=M, max_batch_tokens=64, host_capacity=host),
                    UnitCost(), (Request("a", 0, 4, 3), Request("b", 0, 2, 2)))


def _swap_sched(*batches):
    return Schedule.from_dict({"batches": list(batches)})


def test_duplicate_swap():
    ev = evaluate(_swap_inst(), _swap_sched(
        {"entries": [["a", 4]]},
        {"entries": [], "swap_out": [["a", 2], ["a", 2]]},
        {"entries": [["a", 1]], "swap_in": ["a"]},
        {"entries": [["a", 1]]}, {"entries": [["b", 2]]}, {"entries": [["b", 1]]}))
    assert codes(ev) == ["DUPLICATE_SWAP"]
    assert (ev.violations[0].batch, ev.violations[0].request) == (1, "a")


def test_swap_out_not_resident():
    # a holds 4 tokens after batch 0; swapping out 5 is more than it holds
    ev = evaluate(_swap_inst(), _swap_sched(
        {"entries": [["a", 4]]}, {"entries": [], "swap_out": [["a", 5]]},
        {"entries": [["a", 1]]}, {"entries": [["a", 1]]},
        {"entries": [["b", 2]]}, {"entries": [["b", 1]]}))
    assert codes(ev) == ["SWAP_OUT_NOT_RESIDENT"]
    assert ev.violations[0].batch == 1


def test_swap_in_not_swapped():
    ev = evaluate(_swap_inst(), _swap_sched(
        {"entries": [["a", 4]]}, {"entries": [["a", 1]], "swap_in": ["a"]},
        {"entries": [["a", 1]]}, {"entries": [["b", 2]]}, {"entries": [["b", 1]]}))
    assert codes(ev) == ["SWAP_IN_NOT_SWAPPED"]
    assert ev.violations[0].batch == 1


def test_swapped_out_request():
    # a's 4 tokens go to the host at batch 1 and a decodes at batch 2 without a swap-in
    ev = evaluate(_swap_inst(), _swap_sched(
        {"entries": [["a", 4]]}, {"entries": [["b", 2]], "swap_out": [["a", 4]]},
        {"entries": [["a", 1], ["b", 1]]}, {"entries": [["a", 1]], "swap_in": ["a"]}))
    assert "SWAPPED_OUT_REQUEST" in codes(ev)
    v = next(v for v in ev.violations if v.code == "SWAPPED_OUT_REQUEST")
    assert (v.batch, v.request) == (2, "a")


def test_host_overflow():
    # host_capacity 3 < the 4 tokens swapped out at batch 1
    ev = evaluate(_swap_inst(host=3), _swap_sched(
        {"entries": [["a", 4]]}, {"entries": [["b", 2]], "swap_out": [["a", 4]]},
        {"entries": [["b", 1]]}, {"entries": [["a", 1]], "swap_in": ["a"]},
        {"entries": [["a", 1]]}))
    assert codes(ev) == ["HOST_OVERFLOW"]
    assert ev.violations[0].batch == 1
    # without host_capacity the instance has no host memory: the same swap overflows it
    no_host = _swap_inst().replace(limits=Limits(kv_capacity=16, max_batch_tokens=64))
    ev = evaluate(no_host, _swap_sched(
        {"entries": [["a", 4]]}, {"entries": [["b", 2]], "swap_out": [["a", 4]]},
        {"entries": [["b", 1]]}, {"entries": [["a", 1]], "swap_in": ["a"]},
        {"entries": [["a", 1]]}))
    assert codes(ev) == ["HOST_OVERFLOW"] and "not set" in ev.violations[0].message


# --- hidden cache (semantics section 6) -----------------------------------------------------


def _hidden_inst(enabled=True):
    return Instance("h", Limits(kv_capacity=16, max_batch_tokens=64, hidden_cache=enabled),
                    UnitCost(), (Request("a", 0, 4, 2),))


def test_hidden_cache_disabled():
    # a prefills 4 tokens on hidden cache and decodes once: feasible when the instance enables
    # hidden cache, one violation (batch 0, the first hidden entry) when it does not
    s = Schedule.from_dict({"batches": [{"entries": [["a", 4, "hidden"]]},
                                        {"entries": [["a", 1, "hidden"]]}]})
    assert evaluate(_hidden_inst(), s).feasible
    ev = evaluate(_hidden_inst(enabled=False), s)
    assert codes(ev) == ["HIDDEN_CACHE_DISABLED"]
    assert ev.violation_counts["HIDDEN_CACHE_DISABLED"] == 2
    assert ev.violations[0].batch == 0 and ev.violations[0].request == "a"


def test_cache_type_switch():
    # a prefills on KV, then decodes stating hidden cache without discarding its KV first
    ev = evaluate(_hidden_inst(), Schedule.from_dict(
        {"batches": [{"entries": [["a", 4]]}, {"entries": [["a", 1, "hidden"]]}]}))
    assert codes(ev) == ["CACHE_TYPE_SWITCH"]
    assert ev.violations[0].batch == 1 and ev.violations[0].request == "a"
    # the legal switch: evict (discard), then recompute all S = 5 known tokens as hidden cache
    ev = evaluate(_hidden_inst(), Schedule.from_dict(
        {"batches": [{"entries": [["a", 4]]}, {"entries": [], "evict": ["a"]},
                     {"entries": [["a", 5, "hidden"]]}]}))
    assert ev.feasible, ev.violations


def test_evaluator_charges_a_grouped_query_hidden_cache_by_its_ratio():
    # a (I = 5, O = 1) prefilled on hidden cache, M = 8: 5 * 1/2 -> 3 fits; 5 * 2 = 10 > 8.
    s = Schedule.from_batches([([("a", 5, "hidden")], [])])
    for ratio, ok in ((0.5, True), (2.0, False)):
        lim = Limits(kv_capacity=8, max_batch_tokens=8, hidden_cache=True, hidden_ratio=ratio)
        ev = evaluate(Instance("h", lim, UnitCost(), (Request("a", 0, 5, 1),)), s)
        assert ev.feasible is ok
    # the ratio is part of the instance's JSON only when it is not the default
    lim = Limits(kv_capacity=8, max_batch_tokens=8, hidden_cache=True, hidden_ratio=2.0)
    assert lim.to_dict()["hidden_ratio"] == 2.0 and Limits.from_dict(lim.to_dict()) == lim
    assert "hidden_ratio" not in Limits(kv_capacity=8, max_batch_tokens=8).to_dict()


def _reference_rows(ev) -> list[dict]:
    def num(v):
        if isinstance(v, np.integer):
            return int(v)
        return None if not math.isfinite(v) else float(v)

    return [{"id": rid, "first_token": num(ev.first_token[i]), "completion": num(ev.completion[i]),
             "latency": num(ev.latency[i]), "ttft": num(ev.ttft[i]), "tpot": num(ev.tpot[i]),
             "max_tbt": num(ev.max_tbt[i]), "evictions": int(ev.evictions[i]),
             "recomputed_tokens": int(ev.recomputed_tokens[i])}
            for i, rid in enumerate(ev.request_ids)]


@pytest.mark.parametrize("policy", ["vllm", "sarathi", "fcfs"])
@pytest.mark.parametrize("truncate", [False, True])
def test_request_rows_equal_the_element_by_element_conversion(policy, truncate):
    inst = infermax_mix("LILO", 30, seed=2)
    s = simulate(inst, policy)
    if truncate:  # the first half of the batches: some requests never finish
        d = s.to_dict()
        d["batches"] = d["batches"][: len(d["batches"]) // 2]
        s = Schedule.from_dict(d)
    ev = evaluate(inst, s)
    rows = ev.to_dict()["requests"]
    assert json.dumps(rows) == json.dumps(_reference_rows(ev))
    if truncate:
        assert any(r["completion"] is None for r in rows)
        assert all(type(r["evictions"]) is int for r in rows)


def test_hidden_memory_and_cost_by_hand():
    # cost: k0 = 1 s per batch with entries, rho = 0.25 s per cached hidden token per batch.
    # b0: a prefills 5 on hidden cache -> m_a = 5, charged ceil(5/2) = 3; b prefills 4 on KV -> 4.
    #     memory 3 + 4 = 7; no cached tokens before the batch, so no extra: 1 s
    # b1: a decodes (m = 5 before: extra 0.25 * 5 = 1.25 s), b decodes and finishes.
    #     m_a = 6 -> 3, m_b = 5 -> 5: memory 8; 1 + 1.25 = 2.25 s
    # b2: a decodes (m = 6: extra 1.5 s) and finishes: m_a = 7 -> 4 (b was freed): 2.5 s
    s = Schedule.from_dict({"batches": [
        {"entries": [["a", 5, "hidden"], ["b", 4]]},
        {"entries": [["a", 1, "hidden"], ["b", 1]]},
        {"entries": [["a", 1, "hidden"]]},
    ]})
    ev = evaluate(hidden_instance(), s)
    assert ev.feasible, ev.violations
    assert ev.batch_kv.tolist() == [7, 8, 4]
    assert ev.batch_duration.tolist() == [1.0, 2.25, 2.5]
    assert ev.batch_end.tolist() == [1.0, 3.25, 5.75]
    assert ev.metrics["hidden_entries"] == 3 and ev.metrics["hidden_time"] == 2.75
    # the same on KV cache: memory 5 + 4 = 9, 6 + 5 = 11, 7 and no extra time
    kv = evaluate(hidden_instance(), Schedule.from_dict({"batches": [
        {"entries": [["a", 5], ["b", 4]]}, {"entries": [["a", 1], ["b", 1]]},
        {"entries": [["a", 1]]}]}))
    assert kv.feasible and kv.batch_kv.tolist() == [9, 11, 7]
    assert kv.batch_duration.tolist() == [1.0, 1.0, 1.0] and kv.metrics["hidden_time"] == 0.0


def test_hidden_memory_in_whole_blocks():
    # block_size 4: a block holds 4 KV tokens or 8 hidden tokens. a: 5 hidden tokens -> 1 block
    # (4); after the decode 6 -> still 4; b: 4 KV -> 4, then 5 -> 8.
    s = Schedule.from_dict({"batches": [
        {"entries": [["a", 5, "hidden"], ["b", 4]]},
        {"entries": [["a", 1, "hidden"], ["b", 1]]},
    ]})
    ev = evaluate(hidden_instance(block=4, reqs=(Request("a", 0, 5, 9), Request("b", 0, 4, 2))), s)
    assert ev.batch_kv.tolist() == [8, 12]
    lim = Limits(kv_capacity=64, max_batch_tokens=8, block_size=4, hidden_cache=True)
    # 8 hidden tokens fill one block exactly, 9 need two; 1 hidden token takes a whole block
    assert [lim.hidden_footprint(x) for x in (1, 8, 9, 16, 17)] == [4, 4, 8, 8, 12]


def test_hidden_memory_lets_a_batch_fit_that_kv_cannot():
    # M = 8: two 5-token prompts need 10 on KV (overflow), 3 + 3 = 6 on hidden cache
    reqs = (Request("a", 0, 5, 1), Request("b", 0, 5, 1))
    kv = evaluate(hidden_instance(M=8, reqs=reqs),
                  Schedule.from_dict({"batches": [{"entries": [["a", 5], ["b", 5]]}]}))
    assert [v.code for v in kv.violations] == ["KV_OVERFLOW"]
    hid = evaluate(hidden_instance(M=8, reqs=reqs), Schedule.from_dict(
        {"batches": [{"entries": [["a", 5, "hidden"], ["b", 5, "hidden"]]}]}))
    assert hid.feasible and hid.batch_kv.tolist() == [6]


def test_switch_discards_and_recomputes_by_hand():
    # a (I = 5, O = 3) prefills on KV, is evicted (an eviction-only batch takes no time), and
    # recomputes all S = 6 known tokens as hidden cache, then decodes on hidden cache.
    # b0: prefill 5 on KV -> m 5, g 1; memory 5; 1 s
    # b1: evict a (0 s); memory 0; 5 tokens recomputed
    # b2: refill 6 hidden (m before 0: no extra) -> m 6, g 2; memory 3; 1 s
    # b3: decode (extra 0.25 * 6 = 1.5) -> m 7, g 3 = O; memory ceil(7/2) = 4; 2.5 s
    s = Schedule.from_dict({"batches": [
        {"entries": [["a", 5]]}, {"entries": [], "evict": ["a"]},
        {"entries": [["a", 6, "hidden"]]}, {"entries": [["a", 1, "hidden"]]}]})
    ev = evaluate(hidden_instance(reqs=(Request("a", 0, 5, 3),)), s)
    assert ev.feasible, ev.violations
    assert ev.batch_kv.tolist() == [5, 0, 3, 4]
    assert ev.batch_duration.tolist() == [1.0, 0.0, 1.0, 2.5]
    assert ev.metrics["recomputed_tokens"] == 5 and ev.metrics["evictions"] == 1
    assert ev.completion.tolist() == [4.5]


def test_unit_time_prices_hidden_cache_only_with_a_stated_rho():
    s = Schedule.from_dict({"batches": [{"entries": [["a", 4, "hidden"]]},
                                        {"entries": [["a", 1, "hidden"]]}]})
    reqs = (Request("a", 0, 4, 2),)
    assert evaluate(hidden_instance(UnitCost(), reqs=reqs), s).batch_duration.tolist() == [1, 1]
    # rho = 0.5 time units per cached token: the decode with m = 4 takes 1 + 2
    assert evaluate(hidden_instance(UnitCost(rho=0.5), reqs=reqs), s).batch_duration.tolist() == [1, 3]


def test_swap_out_and_in_priced_and_counted_by_hand():
    # cost: k0 = 1 s per batch with entries, kswap = 0.5 s per token moved.
    # b0: a prefill 4 -> m_a=4, g_a=1; GPU 4; 1 s
    # b1: a's 4 tokens to host (h_a=4, GPU 0), b prefill 4 -> GPU 4, host 4; 1 + 0.5*4 = 3 s
    # b2: b decodes -> m_b=5, g_b=2=O: GPU 5 (b counts in the batch that finishes it); 1 s
    # b3: a's 4 tokens back (GPU 4 after b is freed), a decodes -> m_a=5; GPU 5; 1 + 2 = 3 s
    # b4: a decodes -> m_a=6, g_a=3=O; GPU 6; 1 s
    ev = evaluate(swap_instance(), Schedule.from_dict(SWAP_ROUND_TRIP))
    assert ev.feasible, ev.violations
    assert ev.batch_duration.tolist() == [1, 3, 1, 3, 1]
    assert ev.batch_kv.tolist() == [4, 4, 5, 5, 6]
    assert ev.batch_end.tolist() == [1, 4, 5, 8, 9]
    assert ev.completion.tolist() == [9, 5]
    assert ev.evictions.tolist() == [0, 0] and ev.metrics["recomputed_tokens"] == 0
    assert ev.metrics["swap_out_tokens"] == 4 and ev.metrics["swap_in_tokens"] == 4
    assert ev.metrics["peak_host_kv"] == 4
    # the swapped-in decode is a decode entry (m = S - 1 again), not a refill
    assert ev.entry_decode.tolist() == [False, False, True, True, True]


def test_partial_swap_out_lazy_checkpoint_by_hand():
    # Only 3 of a's 4 tokens go to the host (BROS's lazy checkpointing of overwritten slots).
    # b0: a prefill 4: GPU 4. b1: swap out 3 -> GPU 1, host 3; b prefills 4 -> GPU 5; 1 + 1.5 s
    # b2: b decodes, finishes: GPU 6. b3: swap in 3 -> a holds 4 on GPU, decodes -> 5; 1 + 1.5
    d = {"batches": [dict(b) for b in SWAP_ROUND_TRIP["batches"]]}
    d["batches"][1]["swap_out"] = [["a", 3]]
    ev = evaluate(swap_instance(), Schedule.from_dict(d))
    assert ev.feasible, ev.violations
    assert ev.batch_kv.tolist() == [1 + 3, 1 + 4, 1 + 5, 5, 6]
    assert ev.batch_duration.tolist() == [1, 2.5, 1, 2.5, 1]
    assert ev.metrics["swap_out_tokens"] == 3 and ev.metrics["peak_host_kv"] == 3


def test_swap_kv_counts_whole_blocks_on_the_gpu():
    # block 4: a holds 6 tokens = 2 blocks; swapping out 2 leaves 4 = 1 block on the GPU
    inst = Instance("t", Limits(kv_capacity=16, max_batch_tokens=16, host_capacity=8, block_size=4),
                    UnitCost(), (Request("a", 0, 6, 2),))
    ev = evaluate(inst, Schedule.from_dict({"batches": [
        {"entries": [["a", 6]]}, {"entries": [], "swap_out": [["a", 2]]},
        {"entries": [["a", 1]], "swap_in": ["a"]}]}))
    assert ev.feasible, ev.violations
    assert ev.batch_kv.tolist() == [8, 4, 8]
    # unit time: swaps are free unless kswap is stated; the swap-only batch takes 0
    assert ev.batch_duration.tolist() == [1, 0, 1]
# -- time between tokens (semantics section 4: max_tbt, p99_tbt) -------------------------------
def test_max_tbt_and_p99_tbt_by_hand():
    # unit time; a (I = 1, O = 4) and b (I = 1, O = 1) at 0. B0 [0,1] a's prefill and b
    # (a's first token at 1, b done); B1 [1,2] a's token 2; B2 stated start 30 -> [30,31]
    # token 3; B3 [31,32] token 4. a's gaps 1, 29, 1: max_tbt 29; b has no gap (0).
    # p99 over the run's gaps [1, 1, 29] (linear): h = 0.99 * 2 = 1.98 -> 1 + 0.98 * 28.
    inst = Instance("h", Limits(kv_capacity=16, max_batch_tokens=8), UnitCost(),
                    (Request("a", 0, 1, 4), Request("b", 0, 1, 1)))
    s = Schedule.from_batches([([("a", 1), ("b", 1)], []), ([("a", 1)], []),
                               ([("a", 1)], [], 30.0), ([("a", 1)], [])])
    ev = evaluate(inst, s)
    assert ev.feasible, ev.violations
    assert ev.max_tbt.tolist() == [29.0, 0.0]
    m = ev.metrics
    assert m["max_tbt"] == 29.0 and m["mean_max_tbt"] == 29.0
    assert m["p99_tbt"] == pytest.approx(1 + 0.98 * 28) == np.percentile([1, 1, 29], 99)
    assert ev.to_dict()["requests"][0]["max_tbt"] == 29.0


def test_a_refill_token_counts_as_a_gap_and_unfinished_requests_have_none():
    # a (I = 2, O = 3): B0 prefill (token 1 at 1), B1 evicts a and refills its S = 3 tokens
    # (token 2 at 2), B2 decode (token 3 at 3): gaps 1, 1. Cut after B1: a unfinished -> NaN.
    inst = Instance("h", Limits(kv_capacity=16, max_batch_tokens=8), UnitCost(),
                    (Request("a", 0, 2, 3),))
    full = Schedule.from_batches([([("a", 2)], []), ([], ["a"]), ([("a", 3)], []),
                                  ([("a", 1)], [])])
    ev = evaluate(inst, full)
    assert ev.feasible and ev.max_tbt.tolist() == [1.0] and ev.metrics["p99_tbt"] == 1.0
    cut = evaluate(inst, Schedule.from_batches([([("a", 2)], []), ([], ["a"]),
                                                ([("a", 3)], [])]))
    assert math.isnan(cut.max_tbt[0]) and cut.metrics["max_tbt"] is None


def test_compiled_token_gaps_equal_the_sorted_ones():
    from optsched.evaluation import fast
    from optsched.evaluation.evaluator import token_gaps
    from optsched.policies import simulate
    from optsched.workloads.generators import infermax_mix

    inst = infermax_mix("LILO", 40, seed=3)
    inst = inst.replace(limits=Limits(kv_capacity=4096, max_batch_tokens=4096))  # evictions
    for policy in ("vllm", "sarathi"):
        s = simulate(inst, policy)
        ev = evaluate(inst, s)
        assert ev.evictions.sum() > 0 or policy == "sarathi"
        e_req = np.array([inst.index[x] for x in s.ids])[s.entry_req]
        longest, gaps = token_gaps(inst.n, s, e_req, ev.entry_generates, ev.batch_end)
        k_longest, k_gaps = fast.token_gaps(e_req, s.batch_ptr, ev.entry_generates,
                                            ev.batch_end, inst.n)
        assert np.array_equal(longest, k_longest)
        assert np.array_equal(np.sort(gaps), np.sort(k_gaps))
        assert gaps.size == int((inst.output - 1).sum())
