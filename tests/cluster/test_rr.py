"""Round robin (optsched/cluster/rr.py), hand-worked."""

from __future__ import annotations

from cluster_kit import engine_of, replicas

from optsched.cluster import simulate

# a (I=1, O=10) and b (I=20) and c (I=1) at 0, d at 1.5: the k-th arrival goes to engine k mod 2
# whatever the engines' states
REQS = [("a", 0, 1, 10), ("b", 0, 20, 10), ("c", 0, 1, 10), ("d", 1.5, 1, 10)]


def test_rr_cycles_through_the_engines_in_arrival_order():
    inst = replicas(REQS)
    assert engine_of(inst, simulate(inst, "vllm", "rr")) == \
        {"a": "0", "b": "1", "c": "0", "d": "1"}


def test_rr_skips_an_engine_the_request_does_not_fit():
    # engine "1" holds 15 tokens: b (peak 20 + 10 - 1 = 29) only fits engine "0"; the counter
    # still moves, so c (third arrival, 2 mod 2 = 0) goes to "0" and d (3 mod 2) to "1"
    from optsched.instance import Cluster, Engine, Limits

    inst = replicas(REQS)
    inst = inst.replace(cluster=Cluster((Engine("0"), Engine("1", limits=Limits(15, 100)))))
    assert engine_of(inst, simulate(inst, "vllm", "rr")) == \
        {"a": "0", "b": "0", "c": "0", "d": "1"}
