"""Power of two choices (optsched/cluster/p2c.py): on two engines it is lor (both engines are
always drawn, ties to the lower position); a request that fits one engine goes there; runs
reproduce; on more engines it only ever picks an engine that fits."""

from __future__ import annotations

import warnings

import numpy as np
from cluster_kit import engine_of, replicas
from hypothesis import HealthCheck, given, settings

from optsched.cluster import replicate, simulate
from optsched.instance import Cluster, Engine, Limits
from optsched.testing import online_instances


def test_p2c_on_two_engines_routes_as_lor():
    # lor's hand-worked case (tests/cluster/test_lor.py): a -> 0, b -> 1, c -> 1, d -> 1;
    # with two engines p2c draws both every time and compares them as lor does
    reqs = [("a", 0, 2, 10), ("b", 1, 2, 1), ("c", 2, 2, 1), ("d", 3, 2, 1)]
    inst = replicas(reqs)
    assert engine_of(inst, simulate(inst, "vllm", "p2c")) == \
        {"a": "0", "b": "1", "c": "1", "d": "1"}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=online_instances())
def test_p2c_equals_lor_on_two_engines(inst):
    c = replicate(inst, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert simulate(c, "vllm", "p2c").to_dict() == simulate(c, "vllm", "lor").to_dict()


def test_a_request_that_fits_one_engine_goes_there_and_runs_reproduce():
    # engines "1" and "2" hold 15 tokens; b's peak 20 + 10 - 1 = 29 fits only "0"
    reqs = [("a", 0, 1, 10), ("b", 0, 20, 10), ("c", 0, 1, 10), ("d", 1.5, 1, 10)]
    inst = replicas(reqs, R=3)
    small = Limits(15, 100)
    inst = inst.replace(cluster=Cluster((Engine("0"), Engine("1", limits=small),
                                         Engine("2", limits=small))))
    first = engine_of(inst, simulate(inst, "vllm", "p2c"))
    assert first["b"] == "0"
    assert engine_of(inst, simulate(inst, "vllm", "p2c")) == first


def test_p2c_compares_the_two_drawn_engines_by_their_routed_requests():
    # 12 requests at 0 whose decodes outlast every arrival: an engine's outstanding count is
    # the number routed to it so far, so the routing replays by hand from the same draws
    inst = replicas([(f"r{i:02d}", 0, 1, 50) for i in range(12)], R=4, M=10_000)
    rng, counts, want = np.random.default_rng(0), [0] * 4, {}
    for i in range(12):
        a, b = rng.choice(4, size=2, replace=False).tolist()
        k = min((counts[a], a), (counts[b], b))[1]
        counts[k] += 1
        want[f"r{i:02d}"] = str(k)
    assert engine_of(inst, simulate(inst, "vllm", "p2c")) == want
    assert engine_of(inst, simulate(inst, "vllm", "lor")) != want  # the draws matter
