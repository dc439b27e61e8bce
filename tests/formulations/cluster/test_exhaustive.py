"""The cross-check of the cluster model (formulations/cluster.md section 5): assignments up to
engine symmetry times each engine's exhaustive optimum; hand-derived optima, and the instance
on which re-routing after an eviction beats every one-engine-per-request schedule."""

from __future__ import annotations

import math

import pytest

import optsched
from optsched.cluster import replicate
from optsched.cost import UnitCost
from optsched.formulations.base import FormulationError
from optsched.formulations.cluster.exhaustive import assignments, cluster_optimum
from optsched.instance import Cluster, Engine, Instance, Limits, Request
from optsched.schedule import Schedule


def _plain(reqs, M, C) -> Instance:
    return Instance("t", Limits(kv_capacity=M, max_batch_tokens=C), UnitCost(),
                    tuple(Request(*r) for r in reqs))


def test_assignments_up_to_symmetry():
    # 2 identical engines: the first request goes to engine 0, the others anywhere: 2^(n-1)
    inst = replicate(_plain([(f"r{i}", 0.0, 1, 1) for i in range(4)], 4, 4), 2)
    got = list(assignments(inst))
    assert len(got) == 2 ** 3 and all(a[0] == 0 for a in got) and len(set(got)) == len(got)
    # 3 identical engines: set partitions into at most 3 blocks (Stirling S(4,1..3) = 1+7+6)
    assert len(list(assignments(replicate(inst.replace(cluster=None), 3)))) == 14
    # engines that differ are not interchangeable: all 2^4
    differ = inst.replace(cluster=Cluster((Engine("a"), Engine("b", limits=Limits(5, 4)))))
    assert len(list(assignments(differ))) == 16


def test_two_requests_that_cannot_share_an_engine_batch():
    # I = 2, O = 1 each, M = 2: an engine holds one of them per batch. Two engines serve both
    # in one unit batch each: makespan 1, total latency 1 + 1 = 2 (one engine: 2 and 3)
    inst = replicate(_plain([("a", 0.0, 2, 1), ("b", 0.0, 2, 1)], 2, 2), 2)
    ms = cluster_optimum(inst, "makespan")
    assert ms.value == 1.0 and sorted(ms.assignment) == [0, 1]
    assert cluster_optimum(inst, "total-latency").value == 2.0
    assert cluster_optimum(inst, "mean-ttft").value == 1.0
    one = cluster_optimum(replicate(inst.replace(cluster=None), 1), "total-latency")
    assert one.value == 3.0


def test_rerouting_after_an_eviction_beats_every_fixed_assignment():
    # three requests I = 10, O = 2 at 0, M = 15, C = 11, two unit-time engines. Two of them
    # never fit in one engine together after a prefill (10 + 10 > 15), so with each request on
    # one engine some engine serves two one after the other: 4 batches, makespan 4. Prefilling
    # c on engine 1 first, evicting it and recomputing its 11 tokens on engine 0 at step 3
    # (where the token that ends it is generated) finishes all three by 3.
    inst = replicate(Instance("reroute", Limits(kv_capacity=15, max_batch_tokens=11),
                              UnitCost(), tuple(Request(x, 0.0, 10, 2) for x in "abc")), 2)
    assert cluster_optimum(inst, "makespan").value == 4.0
    moved = Schedule.from_dict({"batches": [
        {"entries": [["a", 10]], "engine": "0"}, {"entries": [["c", 10]], "engine": "1"},
        {"entries": [["a", 1]], "engine": "0"},
        {"entries": [["b", 10]], "evict": ["c"], "engine": "1"},
        {"entries": [["c", 11]], "engine": "0"}, {"entries": [["b", 1]], "engine": "1"}]})
    ev = optsched.evaluate(inst, moved)
    assert ev.feasible and ev.objective("makespan") == 3.0


def test_refuses_what_it_cannot_enumerate():
    inst = replicate(_plain([(f"r{i}", 0.0, 1, 1) for i in range(30)], 4, 4), 2)
    with pytest.raises(FormulationError, match="too many"):
        cluster_optimum(inst, "makespan")
    with pytest.raises(FormulationError, match="not a sum or a max"):
        cluster_optimum(replicate(_plain([("a", 0.0, 1, 1)], 4, 4), 2), "p99-ttft")
    assert math.isfinite(cluster_optimum(replicate(_plain([("a", 0.0, 1, 1)], 4, 4), 2),
                                         "makespan").value)
