"""The cluster goodput ceiling (optsched/bounds/cluster_goodput.py, formulations/bounds.md
B17g): hand-worked on replicas and on a prefill/decode pair, refused on mixed roles, and at
or above the attainment of every router and policy (property)."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.bounds.cluster_goodput import cluster_goodput_bound
from optsched.cluster import replicate, simulate
from optsched.cost import UnitCost
from optsched.errors import InstanceError
from optsched.evaluation import evaluate
from optsched.instance import Cluster, Engine, Instance, Limits, Request, TransferLink
from optsched.testing import online_instances


def test_the_counting_argument_shares_the_work_over_the_replicas():
    # 4 requests (I = 1, O = 1) at 0, C = 1, unit time, TTFT SLO 1: every batch holds one
    # request and lasts 1, so by time 1 each engine has served one: at most R of 4 meet
    # (B12b's interval [0, 1] holds work 4 / R per unit of capacity). lor reaches it.
    inst = Instance("w", Limits(100, 1), UnitCost(),
                    tuple(Request(f"r{i}", 0, 1, 1) for i in range(4))).with_default_slos(1.0)
    for R, meet in ((1, 1), (2, 2), (4, 4)):
        c = replicate(inst, R)
        assert cluster_goodput_bound(c).both == meet
        assert evaluate(c, simulate(c, "vllm", "lor")).metrics["slo_attainment"] == meet / 4


def test_the_transfer_sits_between_the_first_and_second_token():
    # two requests (I = 1, O = 2) on one prefill and one decode engine; the link moves 1 token
    # in 0.5 + 1 / 8 = 0.625, and the decode step lasts 1 (unit time): C - F >= 1.625, so a
    # TPOT SLO of 1.0 rules out both, 1.7 rules out none (pd meets it for both)
    link = TransferLink(bytes_per_token=1, bandwidth=8, fixed=0.5)
    inst = Instance("pd", Limits(100, 8), UnitCost(),
                    tuple(Request(f"r{i}", 0, 1, 2) for i in range(2)),
                    cluster=Cluster((Engine("p", "prefill"), Engine("d", "decode")), link))
    assert cluster_goodput_bound(inst, 5.0, 1.0).both == 0
    assert cluster_goodput_bound(inst, 5.0, 1.7).both == 2
    ev = evaluate(inst.with_default_slos(5.0, 1.7), simulate(inst, "vllm", "pd"))
    assert ev.metrics["slo_attainment"] == 1.0
    # the same pair on two replicas needs no transfer: C - F >= 1 meets TPOT 1.0
    assert cluster_goodput_bound(replicate(inst.replace(cluster=None), 2), 5.0, 1.0).both == 2


def test_mixed_roles_are_refused():
    link = TransferLink(bytes_per_token=1, bandwidth=8)
    inst = Instance("m", Limits(100, 8), UnitCost(), (Request("a", 0, 1, 2),),
                    cluster=Cluster((Engine("b"), Engine("d", "decode")), link))
    with pytest.raises(InstanceError, match="role 'both' beside"):
        cluster_goodput_bound(inst, 1.0, 1.0)


@st.composite
def clusters_with_slos(draw):
    inst = draw(online_instances()).with_default_slos(
        draw(st.sampled_from([0.6, 1.0, 1.5, 2.0, 3.0, 6.0])),
        draw(st.sampled_from([0.6, 1.0, 1.3, 2.0, 4.0])))
    if draw(st.booleans()):
        R = draw(st.integers(1, 3))
        return replicate(inst, R), draw(st.sampled_from(["rr", "lor", "least-kv", "p2c"]))
    link = TransferLink(bytes_per_token=1, bandwidth=draw(st.sampled_from([1.0, 1e3])),
                        fixed=draw(st.sampled_from([0.0, 0.3])))
    engines = tuple(Engine(f"p{k}", "prefill") for k in range(draw(st.integers(1, 2)))) + \
        tuple(Engine(f"d{k}", "decode") for k in range(draw(st.integers(1, 2))))
    return inst.replace(cluster=Cluster(engines, link)), "pd"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=clusters_with_slos(), policy=st.sampled_from(["vllm", "sarathi", "fcfs", "mcsf"]))
def test_the_ceiling_is_above_every_router_s_attainment(case, policy):
    inst, router = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = evaluate(inst, simulate(inst, policy, router))
    assert ev.feasible
    gb = cluster_goodput_bound(inst)
    met = round(ev.metrics["slo_attainment"] * inst.n)
    assert met <= gb.both <= gb.ttft <= gb.ttft_own
