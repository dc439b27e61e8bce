"""The router layer (optsched/cluster/__init__.py): a one-engine cluster is the single-engine
simulator, batch for batch, under every router; every router's schedule is feasible under the
cluster evaluator; bad input is one line."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.cluster import (
    RouterError,
    default_link,
    disaggregate,
    replicate,
    router_names,
    simulate,
)
from optsched.cost import UnitCost
from optsched.errors import InstanceError
from optsched.evaluation import evaluate
from optsched.instance import Cluster, Engine, TransferLink
from optsched.policies import PolicyError, simulate_policy
from optsched.policies.registry import get_spec
from optsched.testing import online_instances

POLICIES = ["vllm", "sarathi", "fcfs", "orca", "rank-o", "mcsf"]
REPLICA_ROUTERS = ["rr", "lor", "least-kv", "p2c"]


def _batches(schedule) -> list[dict]:
    return [{k: v for k, v in b.items() if k != "engine"} for b in schedule.to_dict()["batches"]]


def test_every_router_is_registered_with_a_source():
    assert set(router_names()) >= {"rr", "lor", "least-kv", "p2c", "pd"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=online_instances(), policy=st.sampled_from(POLICIES),
       router=st.sampled_from(REPLICA_ROUTERS))
def test_one_engine_cluster_is_the_single_engine_simulator(inst, policy, router):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = simulate_policy(inst, get_spec(policy).make(), fast=False)
        ours = simulate(replicate(inst, 1), policy, router)
    assert _batches(ours) == _batches(one)
    assert evaluate(replicate(inst, 1), ours).metrics["makespan"] == \
        pytest.approx(evaluate(inst, one).metrics["makespan"], rel=1e-12)


@st.composite
def clusters(draw):
    """A replica cluster (1-3 engines, some with less memory or another cost model) or a
    prefill/decode one (1-2 of each, a link), around an online instance; and a router."""
    inst = draw(online_instances())
    if draw(st.booleans()):
        R = draw(st.integers(1, 3))
        return inst.replace(cluster=Cluster(tuple(Engine(str(k)) for k in range(R)))), \
            draw(st.sampled_from(REPLICA_ROUTERS))
    link = TransferLink(bytes_per_token=draw(st.sampled_from([0, 1, 64])),
                        bandwidth=draw(st.sampled_from([1.0, 8.0, 1e3])),
                        fixed=draw(st.sampled_from([0.0, 0.5])))
    engines = tuple(Engine(f"p{k}", "prefill") for k in range(draw(st.integers(1, 2)))) + \
        tuple(Engine(f"d{k}", "decode") for k in range(draw(st.integers(1, 2))))
    return inst.replace(cluster=Cluster(engines, link)), "pd"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=clusters(), policy=st.sampled_from(POLICIES))
def test_every_router_s_schedule_is_feasible(case, policy):
    inst, router = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = simulate(inst, policy, router)
    ev = evaluate(inst, s)
    assert ev.feasible, (router, policy, ev.violation_counts)
    assert ev.metrics["engines"] == inst.n_engines
    assert sum(e["completions"] for e in ev.engines) == inst.n


def test_bad_input_is_one_line():
    import optsched

    inst = optsched.load("demo")
    with pytest.raises(RouterError, match="unknown router 'nope'; known routers: .*lor"):
        simulate(inst, "vllm", "nope")
    with pytest.raises(PolicyError):
        simulate(inst, "vllm", "rr", params={"nope": 1})
    with pytest.raises(InstanceError, match="replicas must be an integer"):
        replicate(inst, 0)
    with pytest.raises(InstanceError, match="without a cluster"):
        replicate(replicate(inst, 2), 2)
    with pytest.raises(RouterError, match="router 'prefix' routes over engines of role 'both'"):
        simulate(disaggregate(inst, 1, 1), "vllm", "prefix")


def test_disaggregate_builds_prefill_and_decode_engines_on_the_model_s_link():
    import optsched

    inst = optsched.load("demo")  # InferMax's Llama-2-7B preset
    c = disaggregate(inst, 2, 3).cluster
    assert [(e.id, e.role) for e in c.engines] == \
        [("p0", "prefill"), ("p1", "prefill"), ("d0", "decode"), ("d1", "decode"),
         ("d2", "decode")]
    # 1,000 tokens of Llama-2-7B KV (524,288 bytes each) over 25 GB/s: 0.0209715 s
    assert c.transfer.time(1000) == pytest.approx(1000 * 524_288 / 25e9, rel=1e-12)
    link = default_link(inst, bandwidth=1e9, fixed=0.01, bytes_per_token=100)
    assert disaggregate(inst, 1, 1, link).cluster.transfer == link
    with pytest.raises(InstanceError, match="without a cluster"):
        disaggregate(replicate(inst, 2), 1, 1)
    with pytest.raises(InstanceError, match="decode replicas must be an integer"):
        disaggregate(inst, 1, 0)
    with pytest.raises(InstanceError, match="give --transfer-bytes-per-token"):
        default_link(inst.replace(cost_model=UnitCost()))


def test_the_load_per_replica_divides_both_sides_by_r():
    import optsched
    from optsched.cluster import identical_replicas, replica_load
    from optsched.instance import Limits
    from optsched.serving.load import OfferedLoad

    inst = optsched.load("demo")
    assert identical_replicas(replicate(inst, 3)) == 3
    assert identical_replicas(inst) is None and identical_replicas(disaggregate(inst, 1, 1)) is None
    odd = inst.replace(cluster=Cluster((Engine("a"), Engine("b", limits=Limits(50, 8)))))
    assert identical_replicas(odd) is None
    # arrivals 8/s against mu_cert 5 and mu_ach 4: one engine's load in [1.6, 2]; over 4
    # replicas [0.4, 0.5], stable; over 1, certified overloaded
    one = OfferedLoad(requests=10, arrival_rate=8.0, certified_rate=5.0, achievable_rate=4.0,
                      reference="vllm")
    doc, line, warning = replica_load(one, 4)
    assert (doc["lower"], doc["point"], doc["upper"]) == (0.4, 0.5, 0.5) and warning is None
    assert line == "load per replica of 4: 0.4 certified .. 0.5 (one engine's: 2)"
    assert "overloaded (certified: load per replica >= 1.6)" in replica_load(one, 1)[2]
    # mu_ach 3: one engine's load in [1.6, 2.67]; over 2 replicas [0.8, 1.33]: overloaded
    # against the reference only
    slow = OfferedLoad(requests=10, arrival_rate=8.0, certified_rate=5.0, achievable_rate=3.0,
                       reference="vllm")
    assert "overloaded against vllm's rate (load per replica 1.33, not certified)" in \
        replica_load(slow, 2)[2]
