"""The offline park construction (optsched/serving/park.py): feasible on random online
instances (the evaluator judges it), a short request (O <= 100) is never evicted, a long one is
parked once after its first token; a bad queue order is refused. Its agreement with the online
``slo-park`` policy is in tests/policies/test_slo_park.py."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from optsched.cost import UnitCost
from optsched.instance import Instance, Limits, Request
from optsched.schedule import Schedule
from optsched.serving.park import SHORT_OUTPUT, Park
from optsched.testing import assert_feasible, online_instances


def _evictions(s: Schedule) -> dict[str, int]:
    out: dict[str, int] = {}
    for j in range(s.n_batches):
        for r in s.evict_req[s.evict_ptr[j]:s.evict_ptr[j + 1]].tolist():
            out[s.ids[r]] = out.get(s.ids[r], 0) + 1
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(inst=online_instances())
def test_feasible_and_short_requests_never_evicted(inst):
    # the construction packs up to C tokens a batch and knows no prefill budget or batch-size
    # cap (notebook 08's setting has neither): instances without them
    inst = inst.replace(limits=Limits(kv_capacity=inst.limits.kv_capacity,
                                      max_batch_tokens=inst.limits.max_batch_tokens,
                                      block_size=inst.limits.block_size))
    for order in ("arrival", "prompt"):
        s = Park(inst, order, ttft_slo=2.0).run()
        assert_feasible(inst, s)
        short = {r.id for r in inst.requests if r.output <= SHORT_OUTPUT}
        assert not set(_evictions(s)) & short  # every O here is at most 12: none is parked


def test_a_long_request_is_parked_once_after_its_first_token():
    # a: O = 101 (> 100 tokens: 100 gaps, one of which may be long), b: O = 2; M = 200 holds
    # both peaks. a's prompt (2) is whole in batch 0, b's in batch 0 too; a is evicted in the
    # batch after its first token and refilled at the end, once.
    inst = Instance("h", Limits(kv_capacity=200, max_batch_tokens=64), UnitCost(),
                    (Request("a", 0.0, 2, 101), Request("b", 0.0, 2, 2)))
    s = Park(inst, "arrival", ttft_slo=5.0).run()
    ev = assert_feasible(inst, s)
    assert _evictions(s) == {"a": 1}
    assert ev.metrics["evictions"] == 1


def test_a_bad_order_is_refused():
    inst = Instance("h", Limits(kv_capacity=8, max_batch_tokens=8), UnitCost(), (Request("a", 0.0, 1, 1),))
    with pytest.raises(ValueError, match="order must be one of arrival, prompt"):
        Park(inst, "fifo")
