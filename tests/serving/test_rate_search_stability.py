"""The stability check of a sustainable rate (optsched/serving/rate_search.py ``confirm``,
docs/semantics.md section 4): a rate counts only if the target and the mean latency hold on
the trace repeated 3x at the same rate."""

from __future__ import annotations

import dataclasses

import pytest

from optsched.cost import UnitCost
from optsched.instance import Instance, Limits, Request
from optsched.serving.rate_search import (
    LATENCY_GROWTH,
    Check,
    Probe,
    RateSearchResult,
    search,
)


def _result(mean_1x: float, mean_3x: float, meets_3x: bool = True) -> RateSearchResult:
    at = Probe(2.0, 0.95, True, 0.1, {"mean_jct": mean_1x, "completion_rate": 1.5}, load=0.8)
    longer = Probe(2.0, 0.95 if meets_3x else 0.5, meets_3x, 0.3, {"mean_jct": mean_3x})
    return RateSearchResult("p", "ttft-tbt-attainment", 0.9, 2.0, 2.5, (at,), work_limit=3.0,
                            checks=(Check(at, longer, 3),))


def test_the_rule():
    assert LATENCY_GROWTH == 1.5
    ok = _result(10.0, 14.0)
    assert ok.latency_growth == pytest.approx(1.4) and ok.holds and ok.counted_rate == 2.0
    assert ok.confirm_factor == 3 and ok.stable_rate == 2.0
    grows = _result(10.0, 16.0)  # the attainment holds, the latency does not
    assert grows.holds is False and grows.counted_rate is None
    misses = _result(10.0, 10.0, meets_3x=False)
    assert misses.holds is False and misses.counted_rate is None
    unchecked = dataclasses.replace(ok, checks=())
    assert unchecked.holds is None and unchecked.counted_rate == 2.0
    d = grows.to_dict()
    assert d["stable"] is False and d["latency_growth"] == pytest.approx(1.6)
    assert d["load"] == 0.8 and d["throughput"] == 1.5 and d["counted_rate"] is None
    # a lower rate that holds is what counts
    low = Probe(1.0, 0.97, True, 0.1, {"mean_jct": 5.0}, load=0.4)
    low3 = Probe(1.0, 0.96, True, 0.1, {"mean_jct": 5.5})
    both = dataclasses.replace(grows, checks=grows.checks + (Check(low, low3, 3),))
    assert both.holds is False and both.stable_rate == 1.0 and both.counted_rate == 1.0


def test_a_stable_rate_holds_and_an_overloaded_one_does_not():
    # I = 1, O = 1, C = M = 1, unit time: one request a step, so mu* = 1 (both sides: one
    # token a batch). 60 requests, Poisson arrivals; every rate "meets" mean latency <= 1e9.
    reqs = tuple(Request(f"r{k}", 0.0, 1, 1) for k in range(60))
    inst = Instance("h", Limits(kv_capacity=1, max_batch_tokens=1), UnitCost(), reqs)
    calm = search(inst, "vllm", "mean-jct", 1e9, 0.25, 0.5, probes=2, progress=False)
    assert calm.sustainable_rate == 0.5 and calm.at_rate.load == pytest.approx(0.5, rel=0.3)
    assert calm.holds and calm.latency_growth <= LATENCY_GROWTH and calm.counted_rate == 0.5
    over = search(inst, "vllm", "mean-jct", 1e9, 2.0, 4.0, probes=2, progress=False)
    assert over.sustainable_rate == 4.0 and over.confirmation.meets  # the target still met
    assert over.latency_growth > 2 and over.holds is False and over.counted_rate is None


def test_below_a_failing_rate_the_highest_that_holds_counts():
    reqs = tuple(Request(f"r{k}", 0.0, 1, 1) for k in range(60))
    inst = Instance("h", Limits(kv_capacity=1, max_batch_tokens=1), UnitCost(), reqs)
    res = search(inst, "vllm", "mean-jct", 1e9, 0.5, 4.0, probes=2, progress=False)
    assert res.sustainable_rate == 4.0 and res.holds is False
    # checks: 4 (fails), 0.5 (holds), then bisection between; mu* = 1, so every rate that
    # holds is below 1 (and 0.5 holds: load 0.5)
    assert len(res.checks) == 5 and res.checks[1].rate == 0.5 and res.checks[1].holds
    assert all(c.rate > 1.0 for c in res.checks if not c.holds)
    # a rate just above mu* may pass the latency check on a short trace (it did here, 1.09:
    # x1.23); the work limit (1 a step, certified) refuses it
    assert res.work_limit == pytest.approx(1.0)
    assert 0.5 <= res.counted_rate <= 1.0
