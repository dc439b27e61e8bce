"""Capacity planning (optsched/serving/capacity.py): configurations, a hand-worked plan, and
the branch and bound returning the brute-force sweep's answer (property)."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.cost import UnitCost
from optsched.instance import Instance, Limits, Request, TransferLink
from optsched.serving.capacity import (
    CANNOT,
    NOT_REACHED,
    SIMULATED,
    CapacityError,
    Config,
    Outcome,
    Setting,
    brute_force,
    configs,
    preset_gpus,
    search,
)
from optsched.testing import online_instances

LINK = TransferLink(bytes_per_token=1, bandwidth=8, fixed=0.5)


def test_the_configurations_of_a_count():
    assert [c.label for c in configs(3)] == ["3 replicas", "1:2", "2:1"]
    assert [c.label for c in configs(1)] == ["1 replica"]
    assert configs(2, colocated=False) == [Config(prefill=1, decode=1)]
    for bad in ({}, {"replicas": 1, "prefill": 1}, {"prefill": 2}, {"replicas": -1}):
        with pytest.raises(CapacityError):
            Config(**bad)


def test_the_gpus_of_a_preset_engine():
    assert preset_gpus("infermax-llama2-70b-4xa100") == 4
    assert preset_gpus("infermax-llama2-7b-a100") == 1
    assert preset_gpus(None) == 1


def test_a_bad_setting_is_one_line():
    with pytest.raises(CapacityError, match="--ttft-slo"):
        Setting(0, 1)
    with pytest.raises(CapacityError, match="--attainment"):
        Setting(1, 1, target=1.5)
    with pytest.raises(CapacityError, match="'pd' serves the splits"):
        Setting(1, 1, router="pd")


def test_four_one_token_requests_need_two_replicas():
    # 4 requests (I = 1, O = 1) at 0, C = 1, unit time, TTFT SLO 1, target 0.5: each engine
    # serves one request by time 1, so one engine reaches at most 1/4 and 1:1 (one prefill
    # engine makes every first token) too: both are ruled out by their ceilings (B17g) and
    # never simulated. Two replicas: ceiling 2/4, and lor meets it (one request each at 0).
    plain = Instance("w", Limits(100, 1), UnitCost(),
                     tuple(Request(f"r{i}", 0, 1, 1) for i in range(4)))
    s = Setting(1.0, 1.0, target=0.5, link=LINK)
    plan = search(plain, [1, 2, 3], s)
    assert plan.smallest == Config(replicas=2)
    got = {o.config.label: (o.status, o.ceiling, o.attainment) for o in plan.outcomes}
    assert got == {"1 replica": (CANNOT, 0.25, None), "2 replicas": (SIMULATED, 0.5, 0.5),
                   "1:1": (CANNOT, 0.25, None)}
    assert brute_force(plain, [1, 2, 3], s).smallest == Config(replicas=2)


def test_a_deadline_already_past_leaves_every_configuration_open():
    plain = Instance("w", Limits(100, 1), UnitCost(), (Request("a", 0, 1, 1),))
    plan = search(plain, [1, 2], Setting(1, 1, link=LINK), deadline=0.0)
    assert plan.stopped and plan.smallest is None and plan.best == {}
    assert [(o.status, o.ceiling) for o in plan.outcomes] == [(NOT_REACHED, None)]
    with pytest.raises(CapacityError, match="ceiling None with status 'cannot'"):
        Outcome(Config(replicas=1), 1, None, CANNOT)
    with pytest.raises(CapacityError, match="attainment None with status 'simulated'"):
        Outcome(Config(replicas=1), 1, 0.5, SIMULATED)


def test_a_plain_instance_is_required():
    plain = Instance("w", Limits(100, 1), UnitCost(), (Request("a", 0, 1, 1),))
    with pytest.raises(CapacityError, match="without a cluster"):
        search(Config(replicas=2).build(plain, None), [1], Setting(1, 1))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=online_instances(), ttft=st.sampled_from([0.6, 1.0, 2.0, 3.0, 6.0]),
       tpot=st.sampled_from([0.6, 1.0, 1.3, 2.0, 4.0]), target=st.sampled_from([0.5, 0.9, 1.0]),
       counts=st.sampled_from([[1, 2, 3], [3], [2]]), router=st.sampled_from(["rr", "lor"]))
def test_the_search_returns_the_brute_force_answer(inst, ttft, tpot, target, counts, router):
    s = Setting(ttft, tpot, target=target, router=router, link=LINK)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        smart, brute = search(inst, counts, s), brute_force(inst, counts, s)
    assert smart.smallest == brute.smallest
    assert smart.simulations <= brute.simulations
    if smart.smallest is not None:
        a, b = smart.outcome(smart.smallest), brute.outcome(brute.smallest)
        assert a is not None and b is not None and a.attainment == b.attainment
    if len(counts) == 1:  # the best configuration of the count, whether it meets or not
        assert smart.best == brute.best
    for o in brute.outcomes:  # the ceiling is certified: above what the router attains
        assert o.attainment is not None and o.attainment <= o.ceiling + 1e-12
