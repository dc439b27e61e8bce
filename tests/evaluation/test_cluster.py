"""The replay of a cluster (docs/semantics.md section 6, "Clusters"): hand-worked schedules,
one test per rule and violation code, per-engine and cluster metrics, and two properties: a
one-engine cluster is the single-engine evaluator, and the union-of-engines path equals the
reference on schedules where every request stays on one engine."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import optsched
from optsched.cost import LinearCost, UnitCost
from optsched.errors import InstanceError
from optsched.evaluation import CLUSTER_CODES, CODES, ClusterEvaluation, evaluate
from optsched.evaluation.cluster import _by_engine, _reference
from optsched.instance import Cluster, Engine, Instance, Limits, Request, TransferLink
from optsched.schedule import Schedule

#: a link moving k tokens in 0.5 + k / 8 time units (4 tokens: 1.0)
LINK = TransferLink(bytes_per_token=1, bandwidth=8, fixed=0.5)


def pd_instance(reqs=(("a", 0, 4, 3),), M=16, C=64, link=LINK, roles=("prefill", "decode"),
                engines=None, cost=None):
    engines = engines or tuple(Engine(f"e{k}" if r == "both" else r[0], r)
                               for k, r in enumerate(roles))
    return Instance("pd", Limits(M, C), cost or UnitCost(), tuple(Request(*r) for r in reqs),
                    cluster=Cluster(engines, link))


def sched(*batches) -> Schedule:
    return Schedule.from_dict({"batches": list(batches)})


def codes(ev) -> list[str]:
    return sorted({v.code for v in ev.violations})


def both_paths(inst, s):
    """The evaluation, checked to be the reference's when the union path answers."""
    ev = evaluate(inst, s)
    fast = _by_engine(inst, s)
    if fast is not None:
        _same(fast, _reference(inst, s))
    return ev


def _same(a, b) -> None:
    assert a.feasible == b.feasible
    for k, v in a.metrics.items():
        w = b.metrics[k]
        assert (v is None and w is None) or v == pytest.approx(w, rel=1e-12, abs=1e-12), k
    for name in ("batch_start", "batch_end", "batch_duration", "first_token", "completion"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(a.batch_kv, b.batch_kv)
    np.testing.assert_array_equal(a.entry_decode, b.entry_decode)
    np.testing.assert_array_equal(a.entry_cached, b.entry_cached)
    np.testing.assert_array_equal(a.entry_generates, b.entry_generates)
    assert a.engines == b.engines


# --- a disaggregated request, by hand -------------------------------------------------------


def test_prefill_transfer_decode_by_hand():
    # a: I = 4, O = 3. Batch 0 on p prefills it (t 0-1, first token at 1) and sends its 4 KV
    # tokens to d: 0.5 + 4/8 = 1.0, in flight 1-2. d decodes at 2-3 (second token) and 3-4
    # (third, a finishes). KV: p holds 4 after batch 0; d holds 4 from t = 1, 5 after batch 1,
    # 6 after batch 2 (then freed).
    inst = pd_instance()
    s = sched({"entries": [["a", 4]], "engine": "p", "transfer": [["a", "d"]]},
              {"entries": [["a", 1]], "engine": "d"},
              {"entries": [["a", 1]], "engine": "d"})
    ev = both_paths(inst, s)
    assert isinstance(ev, ClusterEvaluation) and ev.feasible
    np.testing.assert_array_equal(ev.batch_start, [0, 2, 3])
    np.testing.assert_array_equal(ev.batch_end, [1, 3, 4])
    np.testing.assert_array_equal(ev.batch_kv, [4, 5, 6])
    assert ev.first_token[0] == 1 and ev.completion[0] == 4
    m = ev.metrics
    assert (m["transfers"], m["transfer_tokens"], m["transfer_bytes"], m["transfer_time"]) \
        == (1, 4, 4.0, 1.0)
    assert (m["engines"], m["gpus"], m["span"], m["makespan"]) == (2, 2, 4.0, 4.0)
    # kv_utilisation: (4 + 5 + 6) / (16 * 3 batch-units)
    assert m["kv_utilisation"] == pytest.approx(15 / 48)
    p, d = ev.engines
    assert (p["batches"], p["busy_time"], p["utilisation"], p["first_tokens"],
            p["completions"], p["transfers_out"], p["transfer_tokens_out"]) \
        == (1, 1.0, 0.25, 1, 0, 1, 4)
    assert (d["batches"], d["peak_kv"], d["completions"], d["transfers_in"],
            d["decode_entries"]) == (2, 6, 1, 1, 2)
    assert d["kv_utilisation"] == pytest.approx((5 + 6) / (16 * 2))


def test_the_schedule_round_trips_through_json_and_npz(tmp_path):
    inst = pd_instance()
    s = sched({"entries": [["a", 4]], "engine": "p", "transfer": [["a", "d"]]},
              {"entries": [["a", 1]], "engine": "d"},
              {"entries": [["a", 1]], "engine": "d", "start": 3.5})
    for name in ("s.json", "s.npz"):
        s.save(tmp_path / name, inst)
        back = Schedule.load(tmp_path / name)
        assert back == s and back.to_dict() == s.to_dict()
        assert evaluate(inst, back).metrics == evaluate(inst, s).metrics


# --- one rule, one test ---------------------------------------------------------------------


def test_unknown_engine_of_a_batch_and_of_a_transfer():
    inst = pd_instance(roles=("both", "both"))
    ev = evaluate(inst, sched({"entries": [["a", 4]], "engine": "x"},
                              {"entries": [["a", 4]], "engine": "e0", "transfer": [["a", "y"]]},
                              {"entries": [["a", 1]], "engine": "e0"},
                              {"entries": [["a", 1]], "engine": "e0"}))
    v = {x.code: x for x in ev.violations}
    assert codes(ev) == ["UNKNOWN_ENGINE"] and ev.violation_counts["UNKNOWN_ENGINE"] == 2
    assert [x.batch for x in ev.violations] == [0, 1]
    assert "'x'" in str(ev.violations[0]) and "'y'" in str(ev.violations[1])
    assert ev.violations[1].request == "a"
    assert ev.batch_duration[0] == 0  # the undeclared engine ran nothing
    del v


def test_decode_on_an_engine_that_never_received_the_kv():
    inst = pd_instance()
    ev = evaluate(inst, sched({"entries": [["a", 4]], "engine": "p"},
                              {"entries": [["a", 1]], "engine": "d"},
                              {"entries": [["a", 1]], "engine": "d"}))
    assert codes(ev) == ["KV_NOT_ON_ENGINE"]
    v = ev.violations[0]
    assert (v.batch, v.request) == (1, "a") and "'d'" in v.message and "'p'" in v.message


def test_entry_and_eviction_on_the_source_after_the_transfer():
    inst = pd_instance(roles=("both", "both"), reqs=(("a", 0, 4, 4),))
    ev = evaluate(inst, sched({"entries": [["a", 4]], "engine": "e0", "transfer": [["a", "e1"]]},
                              {"entries": [["a", 1]], "engine": "e0"},
                              {"entries": [], "evict": ["a"], "engine": "e0"}))
    assert codes(ev) == ["INCOMPLETE", "KV_NOT_ON_ENGINE"]
    assert [(x.batch, x.code) for x in ev.violations if x.code == "KV_NOT_ON_ENGINE"] \
        == [(1, "KV_NOT_ON_ENGINE"), (2, "KV_NOT_ON_ENGINE")]


def test_a_request_without_kv_may_restart_on_any_engine():
    # evicted on e0 after its prefill, recomputed on e1: no transfer needed; e1's batch waits
    # for the end of the eviction batch (ready time) -- eviction-only batches take no time
    inst = pd_instance(roles=("both", "both"), reqs=(("a", 0, 4, 2),))
    ev = both_paths(inst, sched({"entries": [["a", 4]], "engine": "e0"},
                                {"entries": [], "evict": ["a"], "engine": "e0"},
                                {"entries": [["a", 5]], "engine": "e1"}))
    assert ev.feasible
    np.testing.assert_array_equal(ev.batch_end, [1, 1, 2])
    assert ev.metrics["recomputed_tokens"] == 4 and ev.engines[1]["completions"] == 1


def test_roles():
    inst = pd_instance(reqs=(("a", 0, 4, 3),))
    ev = evaluate(inst, sched({"entries": [["a", 4]], "engine": "p"},
                              {"entries": [["a", 1]], "engine": "p", "transfer": [["a", "d"]]},
                              {"entries": [], "evict": ["a"], "engine": "d"},
                              {"entries": [["a", 6]], "engine": "d"}))
    assert codes(ev) == ["ROLE_VIOLATION"]
    assert [(x.batch, x.message.split()[0]) for x in ev.violations] \
        == [(1, "decode"), (3, "prefill")]


def test_transfer_disabled():
    inst = pd_instance(roles=("both", "both"), link=None)
    ev = evaluate(inst, sched({"entries": [["a", 4]], "engine": "e0", "transfer": [["a", "e1"]]},
                              {"entries": [["a", 1]], "engine": "e0"},
                              {"entries": [["a", 1]], "engine": "e0"}))
    assert codes(ev) == ["TRANSFER_DISABLED"] and ev.violations[0].batch == 0
    assert ev.metrics["transfers"] == 0  # reported and ignored: a stays on e0


def test_transfer_not_resident_same_engine_and_duplicate():
    inst = pd_instance(roles=("both", "both"), reqs=(("a", 0, 4, 2), ("b", 0, 2, 1)))
    ev = evaluate(inst, sched(
        {"entries": [["a", 4]], "engine": "e0",
         "transfer": [["b", "e1"], ["a", "e0"], ["a", "e1"], ["a", "e1"]]},
        {"entries": [["a", 1], ["b", 2]], "engine": "e1", "transfer": [["b", "e0"]]}))
    got = [(x.code, x.batch, x.request) for x in ev.violations]
    assert ("TRANSFER_NOT_RESIDENT", 0, "b") in got  # b holds no KV
    assert ("TRANSFER_SAME_ENGINE", 0, "a") in got
    assert ("DUPLICATE_TRANSFER", 0, "a") in got
    assert ("TRANSFER_NOT_RESIDENT", 1, "b") in got  # b finished in batch 1
    assert ev.metrics["transfers"] == 1  # the one in effect: a to e1
    assert ev.violation_counts == {"TRANSFER_NOT_RESIDENT": 2, "TRANSFER_SAME_ENGINE": 1,
                                   "DUPLICATE_TRANSFER": 1}


def test_an_ignored_transfer_leaves_the_holder_for_the_next():
    # a's first transfer (from e1, where a is not) is ignored, so the second, from e0, is in
    # effect: the rule is applied in order, transfer by transfer
    inst = pd_instance(roles=("both", "both"), reqs=(("a", 0, 4, 2),))
    ev = evaluate(inst, sched({"entries": [["a", 4]], "engine": "e0"},
                              {"entries": [], "engine": "e1", "transfer": [["a", "e0"]]},
                              {"entries": [], "engine": "e0", "transfer": [["a", "e1"]]},
                              {"entries": [["a", 1]], "engine": "e1"}))
    assert [(x.code, x.batch) for x in ev.violations] == [("TRANSFER_NOT_RESIDENT", 1)]
    assert "on engine 'e0'" in ev.violations[0].message
    assert ev.metrics["transfers"] == 1 and ev.transfer_batch.tolist() == [2]


def test_stated_start_before_the_transfer_ends_is_not_ready():
    inst = pd_instance()
    ev = evaluate(inst, sched({"entries": [["a", 4]], "engine": "p", "transfer": [["a", "d"]]},
                              {"entries": [["a", 1]], "engine": "d", "start": 1.5},
                              {"entries": [["a", 1]], "engine": "d"}))
    assert codes(ev) == ["NOT_READY"] and ev.violations[0].batch == 1
    assert "at 2" in ev.violations[0].message
    # without the stated start the batch waits for the transfer (end 2): feasible
    ok = evaluate(inst, sched({"entries": [["a", 4]], "engine": "p", "transfer": [["a", "d"]]},
                              {"entries": [["a", 1]], "engine": "d", "start": 2.0},
                              {"entries": [["a", 1]], "engine": "d"}))
    assert ok.feasible


def test_stated_start_before_the_previous_batch_on_another_engine_ends():
    inst = pd_instance(roles=("both", "both"), reqs=(("a", 0, 4, 2),))
    ev = evaluate(inst, sched({"entries": [["a", 4]], "engine": "e0"},
                              {"entries": [], "evict": ["a"], "engine": "e0"},
                              {"entries": [["a", 5]], "engine": "e1", "start": 0.5}))
    assert codes(ev) == ["NOT_READY"] and ev.violations[0].batch == 2


def test_two_batches_of_one_engine_overlapping_but_not_of_two():
    inst = pd_instance(roles=("both", "both"), reqs=(("a", 0, 2, 1), ("b", 0, 2, 1),
                                                     ("c", 0, 2, 1)))
    ev = evaluate(inst, sched({"entries": [["a", 2]], "engine": "e0"},
                              {"entries": [["b", 2]], "engine": "e1", "start": 0},
                              {"entries": [["c", 2]], "engine": "e0", "start": 0.5}))
    assert [(x.code, x.batch) for x in ev.violations] == [("START_TOO_EARLY", 2)]
    assert "engine 'e0'" in ev.violations[0].message and "batch 0" in ev.violations[0].message


def test_transfer_to_an_engine_without_room():
    # e1 holds b's 5 tokens (M = 8) when p sends a's 4 at t = 1.5 (an empty batch with a
    # stated start): 5 + 4 > 8 at the transfer's start. e1 evicts b at t = 2 (after the
    # transfer started: too late), so no batch of e1 ever ends over M -- only the
    # transfer-start check sees it. a decodes on e1 at 2.5-3.5 (the transfer ends at
    # 1.5 + 0.5 + 4/8 = 2.5), b is recomputed (6 tokens) at 3.5-4.5.
    inst = pd_instance(reqs=(("a", 0, 4, 2), ("b", 0, 5, 2)), M=8, roles=("prefill", "both"))
    s = sched({"entries": [["a", 4]], "engine": "p"},
              {"entries": [["b", 5]], "engine": "e1"},
              {"entries": [], "engine": "p", "start": 1.5, "transfer": [["a", "e1"]]},
              {"entries": [], "evict": ["b"], "engine": "e1", "start": 2},
              {"entries": [["a", 1]], "engine": "e1"},
              {"entries": [["b", 6]], "engine": "e1"})
    ev = evaluate(inst, s)
    assert [(x.code, x.batch, x.request) for x in ev.violations] \
        == [("TRANSFER_OVERFLOW", 2, "a")]
    assert "engine 'e1'" in ev.violations[0].message and "9 > M = 8" in ev.violations[0].message
    np.testing.assert_array_equal(ev.batch_end, [1, 1, 1.5, 2, 3.5, 4.5])
    np.testing.assert_array_equal(ev.batch_kv, [4, 5, 4, 4, 5, 6])
    # sent after the eviction (t = 2.5) it fits
    s2 = sched({"entries": [["a", 4]], "engine": "p"},
               {"entries": [["b", 5]], "engine": "e1"},
               {"entries": [], "evict": ["b"], "engine": "e1", "start": 2},
               {"entries": [], "engine": "p", "start": 2.5, "transfer": [["a", "e1"]]},
               {"entries": [["a", 1]], "engine": "e1"},
               {"entries": [["b", 6]], "engine": "e1"})
    assert evaluate(inst, s2).feasible


def test_memory_on_both_ends_of_a_transfer():
    # the link is slow (0.5 + 4/0.5 = 8.5): a's 4 tokens stay on p until t = 9.5. p prefills
    # b (5 tokens) at 1-2: 4 + 5 = 9 > M = 8 although a has been sent
    link = TransferLink(bytes_per_token=1, bandwidth=0.5, fixed=0.5)
    inst = pd_instance(reqs=(("a", 0, 4, 1), ("b", 0, 5, 1)), M=8, link=link)
    s = sched({"entries": [["a", 4]], "engine": "p", "transfer": [["a", "d"]]},
              {"entries": [["b", 5]], "engine": "p"})
    ev = evaluate(inst, s)
    # a has O = 1 and finished in batch 0: that transfer is ignored
    assert codes(ev) == ["TRANSFER_NOT_RESIDENT"]
    inst = pd_instance(reqs=(("a", 0, 4, 2), ("b", 0, 5, 1)), M=8, link=link)
    ev = evaluate(inst, sched({"entries": [["a", 4]], "engine": "p", "transfer": [["a", "d"]]},
                              {"entries": [["b", 5]], "engine": "p"},
                              {"entries": [["a", 1]], "engine": "d"}))
    assert [(x.code, x.batch) for x in ev.violations] == [("KV_OVERFLOW", 1)]
    assert "engine 'p'" in ev.violations[0].message and "9 > M = 8" in ev.violations[0].message
    # after the transfer ends (t = 9.5) p has room again
    ok = evaluate(inst, sched({"entries": [["a", 4]], "engine": "p", "transfer": [["a", "d"]]},
                              {"entries": [["b", 5]], "engine": "p", "start": 9.5},
                              {"entries": [["a", 1]], "engine": "d"}))
    assert ok.feasible
    np.testing.assert_array_equal(ok.batch_kv, [4, 5, 5])


def test_a_zero_time_transfer_counts_at_its_own_batch():
    # fixed 0, 0 bytes: the transfer starts and ends at the end of batch 0; batch 0's check
    # still counts a on p (4 + 5 > 8), as section 3 counts what the batch holds
    link = TransferLink(bytes_per_token=0, bandwidth=1, fixed=0)
    inst = pd_instance(reqs=(("a", 0, 4, 2), ("b", 0, 5, 1)), M=8, link=link,
                       roles=("both", "both"))
    ev = evaluate(inst, sched({"entries": [["a", 4]], "engine": "e0", "transfer": [["a", "e1"]]},
                              {"entries": [["b", 5]], "engine": "e0"},
                              {"entries": [["a", 1]], "engine": "e1"}))
    assert ev.feasible  # a left e0 at t = 1, before b's batch ended at 2
    np.testing.assert_array_equal(ev.batch_kv, [4, 5, 5])
    ev = evaluate(inst, sched({"entries": [["a", 4], ["b", 5]], "engine": "e0",
                               "transfer": [["a", "e1"]]},
                              {"entries": [["a", 1]], "engine": "e1"}))
    assert [(x.code, x.batch) for x in ev.violations] == [("KV_OVERFLOW", 0)]


def test_engine_limits_and_prices():
    # e0 is small (C = 4) and unit-time; e1 large and linear (k0 = 0.25, k1 = 0.125/token)
    e0 = Engine("e0", limits=Limits(16, 4))
    e1 = Engine("e1", limits=Limits(32, 64), cost_model=LinearCost(k0=0.25, k1=0.125))
    inst = pd_instance(engines=(e0, e1), reqs=(("a", 0, 6, 1), ("b", 0, 6, 1)),
                       roles=None, link=None)
    ev = evaluate(inst, sched({"entries": [["a", 6]], "engine": "e0"},
                              {"entries": [["b", 6]], "engine": "e1"}))
    assert [(x.code, x.batch) for x in ev.violations] == [("BATCH_TOKENS", 0)]
    assert "engine 'e0'" in ev.violations[0].message and "C = 4" in ev.violations[0].message
    ok = both_paths(inst, sched({"entries": [["a", 4]], "engine": "e0"},
                                {"entries": [["a", 2]], "engine": "e0"},
                                {"entries": [["b", 6]], "engine": "e1"}))
    assert ok.feasible
    np.testing.assert_allclose(ok.batch_duration, [1, 1, 0.25 + 6 * 0.125])
    np.testing.assert_allclose(ok.batch_end, [1, 2, 1.0])  # e1 runs concurrently from 0


def test_makespan_is_the_latest_completion_not_the_last_listed_batch():
    # engine e0 runs a (O = 3) in three unit batches, ending at 3, listed first; engine e1 runs
    # b (O = 1) in one batch ending at 1, listed last: the makespan is 3 (section 4, section 6)
    inst = pd_instance(reqs=(("a", 0, 2, 3), ("b", 0, 2, 1)), roles=("both", "both"), link=None)
    s = sched({"entries": [["a", 2]], "engine": "e0"}, {"entries": [["a", 1]], "engine": "e0"},
              {"entries": [["a", 1]], "engine": "e0"}, {"entries": [["b", 2]], "engine": "e1"})
    ev = both_paths(inst, s)
    assert ev.feasible
    assert ev.metrics["makespan"] == 3.0 == ev.objective("makespan")


def test_batches_naming_no_engine_run_on_the_first():
    inst = pd_instance(roles=("both", "both"), reqs=(("a", 0, 4, 2),))
    ev = both_paths(inst, sched({"entries": [["a", 4]]}, {"entries": [["a", 1]]}))
    assert ev.feasible and ev.engines[0]["batches"] == 2 and ev.engines[1]["batches"] == 0
    assert ev.batch_engine.tolist() == [0, 0]


def test_goodput_and_cost():
    # two requests with TTFT SLO 1: a meets it (first token at 1), b does not (at 2)
    e = (Engine("e0", gpus=2, hourly_cost=3600.0), Engine("e1", hourly_cost=1800.0))
    inst = Instance("g", Limits(16, 64), UnitCost(),
                    (Request("a", 0, 2, 1, ttft_slo=1), Request("b", 0, 2, 1, ttft_slo=1)),
                    cluster=Cluster(e))
    ev = both_paths(inst, sched({"entries": [["a", 2]]}, {"entries": [["b", 2]]}))
    m = ev.metrics
    assert m["slo_attainment"] == 0.5 and m["span"] == 2.0
    assert m["goodput"] == 0.5 and m["goodput_per_gpu"] == pytest.approx(0.5 / 3)
    assert m["cost"] == pytest.approx((3600 + 1800) * 2 / 3600)


def test_codes_are_documented_and_disjoint():
    assert not set(CLUSTER_CODES) & set(CODES)
    assert set(CLUSTER_CODES) == {"UNKNOWN_ENGINE", "KV_NOT_ON_ENGINE", "ROLE_VIOLATION",
                                  "NOT_READY", "TRANSFER_DISABLED", "TRANSFER_NOT_RESIDENT",
                                  "TRANSFER_SAME_ENGINE", "DUPLICATE_TRANSFER",
                                  "TRANSFER_OVERFLOW", "REUSE_MOVED"}


def test_the_single_engine_evaluator_refuses_a_cluster():
    from optsched.evaluation.evaluator import evaluate as evaluate_engine

    with pytest.raises(ValueError, match="all engines"):
        evaluate_engine(pd_instance(), Schedule.empty())


# --- properties -------------------------------------------------------------------------


@st.composite
def plain_instances(draw, max_n=5):
    n = draw(st.integers(1, max_n))
    reqs = tuple(Request(f"r{i}", float(draw(st.integers(0, 4))), draw(st.integers(1, 8)),
                         draw(st.integers(1, 5))) for i in range(n))
    peak = max(r.prompt + r.output - 1 for r in reqs)
    M = draw(st.integers(peak, 2 * peak))
    C = draw(st.integers(1, 2 * peak))
    block = draw(st.sampled_from([1, 1, 2]))
    M = -(-M // block) * block + block
    cost = draw(st.sampled_from([UnitCost(), LinearCost(k0=0.5, k1=0.01, kpq=1e-4, kpm=2e-4,
                                                       kdm=1e-3, kpr=0.05, kdr=0.02)]))
    return Instance("p", Limits(M, C, block_size=block), cost, reqs)


@st.composite
def random_batches(draw, inst, max_batches=12):
    """Arbitrary (mostly infeasible) batches: entries, evictions and stated starts."""
    ids = list(inst.ids) + ["ghost"]
    out = []
    for _ in range(draw(st.integers(0, max_batches))):
        ent = draw(st.lists(st.tuples(st.sampled_from(ids), st.integers(0, 6)), max_size=3))
        ev = draw(st.lists(st.sampled_from(ids), max_size=1))
        b = {"entries": [list(e) for e in ent], "evict": ev}
        if draw(st.booleans()) and draw(st.booleans()):
            b["start"] = float(draw(st.integers(0, 12)))
        out.append(b)
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_one_engine_cluster_is_the_single_engine_evaluator(data):
    inst = data.draw(plain_instances())
    batches = data.draw(random_batches(inst))
    if data.draw(st.booleans()):  # feasible ones too: a policy's schedule
        s = optsched.simulate(inst, data.draw(st.sampled_from(["vllm", "sarathi", "fcfs"])))
    else:
        s = sched(*batches)
    one = evaluate(inst, s)
    cl = inst.replace(cluster=Cluster((Engine("solo"),)))
    for name in (None, "solo"):
        s2 = s if name is None else sched(*[{**b, "engine": name}
                                            for b in s.to_dict()["batches"]])
        for ev in (evaluate(cl, s2), _reference(cl, s2)):
            assert ev.feasible == one.feasible
            assert sorted((v.code, v.batch, v.request) for v in ev.violations) \
                == sorted((v.code, v.batch, v.request) for v in one.violations)
            for k, v in one.metrics.items():
                w = ev.metrics[k]
                assert (v is None and w is None) or (isinstance(v, float) and math.isnan(v)) \
                    or v == pytest.approx(w, rel=1e-12, abs=1e-12), k
            np.testing.assert_allclose(ev.batch_end, one.batch_end, rtol=1e-12)
            np.testing.assert_array_equal(ev.batch_kv, one.batch_kv)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_union_of_engine_schedules_is_the_reference(data):
    """Requests assigned to engines at random, each engine's requests scheduled by a policy
    on that engine's instance, the batches interleaved: both paths agree (and the schedule is
    feasible, as each engine's is)."""
    inst = data.draw(plain_instances(max_n=7))
    R = data.draw(st.integers(1, 3))
    cl = inst.replace(cluster=Cluster(tuple(Engine(f"e{k}") for k in range(R))))
    owner = [data.draw(st.integers(0, R - 1)) for _ in range(inst.n)]
    per = []
    for k in range(R):
        reqs = tuple(r for r, o in zip(inst.requests, owner) if o == k)
        sub = Instance("s", inst.limits, inst.cost_model, reqs)
        s = optsched.simulate(sub, data.draw(st.sampled_from(["vllm", "sarathi", "fcfs"]))) \
            if reqs else Schedule.empty()
        per.append([{**b, "engine": f"e{k}"} for b in s.to_dict()["batches"]])
    merged = []
    while any(per):  # a random interleaving, each engine's order kept
        k = data.draw(st.sampled_from([k for k in range(R) if per[k]]))
        merged.append(per[k].pop(0))
    s = sched(*merged)
    fast, ref = _by_engine(cl, s), _reference(cl, s)
    assert fast is not None and ref.feasible, ref.violations[:3]
    _same(fast, ref)


# --- prefix reuse on replicas (section 6, "Clusters", prefix reuse) -----------------------

# a, b: I = 10, O = 2, the same two blocks (1, 2) of b = 4 tokens (H = min(2, 9 // 4) = 2)
AB_BLOCKS = (("a", 0, 10, 2, (1, 2)), ("b", 0, 10, 2, (1, 2)))


def reuse_cluster(n=2, reqs=AB_BLOCKS) -> Instance:
    return Instance("p", Limits(kv_capacity=64, max_batch_tokens=4096, block_size=4), UnitCost(),
                    tuple(Request(*r[:4], prefix=tuple(r[4])) for r in reqs),
                    cluster=Cluster(tuple(Engine(f"e{k}") for k in range(n))))


def test_a_hit_on_another_engines_block_is_a_violation_naming_engine_request_and_batch():
    # a computes blocks 1, 2 on e0 (batch 0); b on e1 claims 8 hit tokens in batch 1: e1's
    # cache is empty, so the hit is not resident there
    s = sched({"entries": [["a", 10]], "engine": "e0"},
              {"entries": [["b", 2]], "hits": [["b", 8]], "engine": "e1"},
              {"entries": [["a", 1]], "engine": "e0"},
              {"entries": [["b", 1]], "engine": "e1"})
    ev = evaluate(reuse_cluster(), s)
    assert not ev.feasible
    assert [(v.code, v.batch, v.request) for v in ev.violations] == \
        [("HIT_NOT_RESIDENT", 1, "b")]
    assert "engine 'e1'" in ev.violations[0].message


def test_a_hit_on_the_own_engines_block_is_accepted():
    # the same batches with b on e0: the one-engine hand replay of test_prefix.py (KV 12, 16,
    # 12 on e0; b hits 8 tokens), and e1 idle
    s = sched({"entries": [["a", 10]], "engine": "e0"},
              {"entries": [["a", 1], ["b", 2]], "hits": [["b", 8]], "engine": "e0"},
              {"entries": [["b", 1]], "engine": "e0"},
              {"entries": [], "drop": [2, 1], "engine": "e0"})
    ev = evaluate(reuse_cluster(), s)
    assert ev.feasible, ev.violations
    assert ev.batch_kv.tolist() == [12, 16, 12, 0]
    assert ev.metrics["hit_tokens"] == 8 and ev.metrics["dropped_blocks"] == 2
    assert ev.hit_tokens.tolist() == [0, 8]


def test_drops_name_the_engines_blocks():
    # block 1 and 2 are resident on e0 only (a finished there); dropping them on e1 is
    # DROP_NOT_RESIDENT on e1's batch 2
    s = sched({"entries": [["a", 10]], "engine": "e0"},
              {"entries": [["a", 1]], "engine": "e0"},
              {"entries": [["b", 10]], "drop": [1], "engine": "e1"},
              {"entries": [["b", 1]], "engine": "e1"})
    ev = evaluate(reuse_cluster(), s)
    assert [(v.code, v.batch) for v in ev.violations] == [("DROP_NOT_RESIDENT", 2)]


def test_a_request_moved_between_engines_with_prefix_reuse_is_refused():
    # a prefills on e0, is evicted, recomputes on e1: legal without block ids, but its
    # cached blocks would have to move (not modelled)
    s = sched({"entries": [["a", 10]], "engine": "e0"},
              {"entries": [], "evict": ["a"], "engine": "e0"},
              {"entries": [["a", 10]], "engine": "e1"},
              {"entries": [["a", 1]], "engine": "e1"},
              {"entries": [["b", 10]], "engine": "e1"},
              {"entries": [["b", 1]], "engine": "e1"})
    ev = evaluate(reuse_cluster(), s)
    assert "REUSE_MOVED" in codes(ev)


def test_disaggregated_clusters_with_block_ids_are_refused():
    with pytest.raises(InstanceError, match="role 'decode'"):
        Instance("p", Limits(64, 4096, block_size=4), UnitCost(),
                 tuple(Request(*r[:4], prefix=tuple(r[4])) for r in AB_BLOCKS),
                 cluster=Cluster((Engine("p", "prefill"), Engine("d", "decode")), LINK))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_one_engine_cluster_with_block_ids_is_the_plain_evaluation(data):
    n = data.draw(st.integers(1, 4))
    reqs = tuple((f"r{i}", data.draw(st.integers(0, 4)), data.draw(st.integers(1, 10)),
                  data.draw(st.integers(1, 3)),
                  (1, 2, 3)[:data.draw(st.integers(0, 2))])
                 for i in range(n))
    reqs = tuple((r[0], r[1], max(r[2], 4 * len(r[4]) + 1), r[3], r[4]) for r in reqs)
    one = reuse_cluster(1, reqs)
    plain = one.replace(cluster=None)
    policy = data.draw(st.sampled_from(["vllm", "vllm-apc", "lpm"]))
    s = optsched.simulate(plain, policy)
    if data.draw(st.booleans()) and s.n_batches > 1:  # a broken one: the last batch dropped
        d = s.to_dict()
        d["batches"] = d["batches"][:-1]
        s = Schedule.from_dict(d)
    a, b = evaluate(plain, s), evaluate(one, s)
    assert a.feasible == b.feasible
    assert sorted((v.code, v.batch, v.request) for v in a.violations) == \
        sorted((v.code, v.batch, v.request) for v in b.violations)
    for k, v in a.metrics.items():
        w = b.metrics[k]
        assert (v is None and w is None) or v == pytest.approx(w, rel=1e-12, abs=1e-12), k
    np.testing.assert_array_equal(a.batch_kv, b.batch_kv)
