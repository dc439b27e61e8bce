"""The cluster floors (optsched/bounds/cluster.py, formulations/bounds.md B17): makespan,
total and mean latency, mean TTFT; hand-worked, refused on engines that differ, below every
router's schedule (property)."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.bounds.cluster import cluster_makespan_floor, cluster_request_floors
from optsched.bounds.work import makespan_floor
from optsched.cluster import replicate, simulate
from optsched.cost import UnitCost
from optsched.errors import InstanceError
from optsched.evaluation import evaluate
from optsched.instance import Cluster, Engine, Instance, Limits, Request, TransferLink
from optsched.testing import online_instances


def test_the_busy_time_is_shared_by_the_engines():
    # 8 requests (I = 1, O = 1) at 0, C = 2, unit time: at least ceil(8 / 2) = 4 batches of
    # time 1 (B4), over R = 2 engines at least 2; each request's own chain is 1 batch. Round
    # robin puts 4 on each engine, 2 batches each: makespan 2, so the bound is tight.
    inst = Instance("w", Limits(100, 2), UnitCost(),
                    tuple(Request(f"r{i}", 0, 1, 1) for i in range(8)))
    assert makespan_floor(inst) == 4.0
    c = replicate(inst, 2)
    assert cluster_makespan_floor(c) == 2.0
    assert evaluate(c, simulate(c, "vllm", "rr")).metrics["makespan"] == 2.0
    # four engines: the busy share is 1, the chain 1
    assert cluster_makespan_floor(replicate(inst, 4)) == 1.0


def test_the_chain_of_a_long_request_stays():
    # one request (I = 1, O = 5) at 3: five batches one after another on any engines: 3 + 5
    inst = Instance("c", Limits(100, 2), UnitCost(), (Request("a", 3, 1, 5),))
    assert cluster_makespan_floor(replicate(inst, 8)) == 8.0


def test_engines_that_differ_are_refused():
    inst = Instance("w", Limits(100, 2), UnitCost(), (Request("a", 0, 1, 1),),
                    cluster=Cluster((Engine("a"), Engine("b", limits=Limits(50, 2)))))
    with pytest.raises(InstanceError, match="engine 'b' differs from engine 'a'"):
        cluster_makespan_floor(inst)


def test_the_request_floors_are_each_request_s_own_chain():
    # unit time: a (I = 1, O = 5) needs 5 batches one after another, its first token the
    # first; b (I = 1, O = 2) needs 2. On any number of engines: total latency >= 5 + 2,
    # mean latency >= 3.5, mean TTFT >= (1 + 1) / 2; the makespan floor is B17's (3 + 5)
    inst = Instance("c", Limits(100, 2), UnitCost(), (Request("a", 3, 1, 5),
                                                     Request("b", 0, 1, 2)))
    assert cluster_request_floors(replicate(inst, 4)) == \
        {"total_latency": 7.0, "mean_latency": 3.5, "mean_ttft": 1.0, "makespan": 8.0}


@st.composite
def identical_clusters(draw):
    inst = draw(online_instances())
    if draw(st.booleans()):
        R = draw(st.integers(1, 4))
        return inst.replace(cluster=Cluster(tuple(Engine(str(k)) for k in range(R)))), \
            draw(st.sampled_from(["rr", "lor", "least-kv", "p2c"]))
    link = TransferLink(bytes_per_token=1, bandwidth=draw(st.sampled_from([1.0, 1e3])))
    engines = tuple(Engine(f"p{k}", "prefill") for k in range(draw(st.integers(1, 2)))) + \
        tuple(Engine(f"d{k}", "decode") for k in range(draw(st.integers(1, 2))))
    return inst.replace(cluster=Cluster(engines, link)), "pd"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=identical_clusters(), policy=st.sampled_from(["vllm", "sarathi", "fcfs", "mcsf"]))
def test_the_floor_is_below_every_router_s_makespan(case, policy):
    inst, router = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ev = evaluate(inst, simulate(inst, policy, router))
    assert ev.feasible
    floors = cluster_request_floors(inst)
    for k in ("makespan", "total_latency", "mean_latency", "mean_ttft"):
        assert floors[k] <= ev.metrics[k] * (1 + 1e-9) + 1e-9, k


def test_block_ids_on_a_cluster_are_refused_in_one_line():
    # a hit skips prefill work the floors count, and B17 has no reuse argument yet
    inst = Instance("p", Limits(64, 4096, block_size=4), UnitCost(),
                    (Request("a", 0, 10, 2, prefix=(1, 2)), Request("b", 0, 10, 2, prefix=(1, 2))),
                    cluster=Cluster((Engine("0"), Engine("1"))))
    for floor in (cluster_makespan_floor, cluster_request_floors):
        with pytest.raises(InstanceError, match="B17.*prefix reuse"):
            floor(inst)
