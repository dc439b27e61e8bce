"""The prefix-aware router (optsched/cluster/prefix.py) and reuse-aware policies behind
routers, hand-worked."""

from __future__ import annotations

import pytest
from cluster_kit import engine_of

from optsched.cluster import simulate
from optsched.cost import UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Cluster, Engine, Instance, Limits, Request


def reuse_replicas(reqs, R=2, M=100, C=100, b=4) -> Instance:
    """``R`` engines "0".."R-1", unit time, blocks of ``b``; ``reqs``: (id, a, I, O, blocks)."""
    return Instance("rep", Limits(M, C, block_size=b), UnitCost(),
                    tuple(Request(*r[:4], prefix=tuple(r[4])) for r in reqs),
                    cluster=Cluster(tuple(Engine(str(k)) for k in range(R))))


# a (I = 10, O = 1, blocks 1, 2; H = min(2, 9 // 4) = 2) at 0: both routers send it to "0"
# (no load, no match anywhere); its prefill [0, 1] finishes it, blocks 1, 2 stay cached on "0"
# (vllm-apc keeps unheld blocks until memory is needed: M = 100 is roomy).
# d (I = 4, O = 5, no blocks) at 1: loads 0, 0 -> "0" for both (lor's tie; prefix: no blocks).
# c (I = 10, O = 1, blocks 1, 2) at 2: "0" has d outstanding, "1" nothing.
#   lor -> "1": "1" never saw blocks 1, 2, so c computes all 10 tokens, 0 hits.
#   prefix -> "0": match 2 of c's 2 shareable blocks (ratio 1 > 0.5), loads 1 vs 0 balanced
#   (1 - 0 <= 32) -> c hits 8 tokens (2 blocks of 4) and computes 2.
HAND = [("a", 0, 10, 1, (1, 2)), ("d", 1, 4, 5, ()), ("c", 2, 10, 1, (1, 2))]


def test_prefix_routes_to_the_cached_prefix_and_beats_lor_on_hits():
    inst = reuse_replicas(HAND)
    by = {r: simulate(inst, "vllm-apc", r) for r in ("lor", "prefix")}
    assert engine_of(inst, by["lor"]) == {"a": "0", "d": "0", "c": "1"}
    assert engine_of(inst, by["prefix"]) == {"a": "0", "d": "0", "c": "0"}
    hits = {r: evaluate(inst, s).metrics["hit_tokens"] for r, s in by.items()}
    assert hits == {"lor": 0, "prefix": 8}


def test_prefix_falls_back_to_lor_when_the_match_is_short():
    # c now lists 4 shareable blocks (I = 20, blocks 1, 2, 3, 4: H = min(4, 19 // 4) = 4) of
    # which "0" holds the first 2: ratio 2 / 4 = 0.5, not above the threshold -> lor -> "1"
    inst = reuse_replicas(HAND[:2] + [("c", 2, 20, 1, (1, 2, 3, 4))])
    assert engine_of(inst, simulate(inst, "vllm-apc", "prefix"))["c"] == "1"


def test_prefix_obeys_the_balance_guard():
    # the guard: imbalanced when max - min > balance_abs and max > balance_rel * min. With
    # balance_abs lowered to 0, "0"'s 1 outstanding request (d) against "1"'s 0 is
    # imbalanced (1 - 0 > 0 and 1 > 1.0001 * 0): c goes by lor to "1" despite its match
    from optsched.cluster.prefix import PrefixAware

    inst = reuse_replicas(HAND)
    old = PrefixAware.balance_abs
    PrefixAware.balance_abs = 0
    try:
        assert engine_of(inst, simulate(inst, "vllm-apc", "prefix"))["c"] == "1"
    finally:
        PrefixAware.balance_abs = old


@pytest.mark.parametrize("policy", ["vllm", "vllm-apc", "sarathi-apc", "lpm"])
@pytest.mark.parametrize("router", ["rr", "prefix"])
def test_every_reuse_policy_behind_every_router_is_feasible(policy, router):
    # reuse-aware policies hit on their engine's own cache; reuse-blind vllm gets the drops
    # of its engine's unheld blocks (the single-engine rule per engine): all feasible
    reqs = [(f"r{k}", k // 2, 9 + k % 3, 1 + k % 2, (1, 2)[:1 + k % 2]) for k in range(8)]
    inst = reuse_replicas(reqs, R=3, M=40)
    ev = evaluate(inst, simulate(inst, policy, router))
    assert ev.feasible, ev.violations


def test_prefix_on_an_instance_without_block_ids_is_lor():
    reqs = [("a", 0, 2, 10), ("b", 1, 2, 1), ("c", 2, 2, 1), ("d", 3, 2, 1)]
    inst = Instance("rep", Limits(100, 100), UnitCost(), tuple(Request(*r) for r in reqs),
                    cluster=Cluster((Engine("0"), Engine("1"))))
    assert engine_of(inst, simulate(inst, "vllm", "prefix")) == \
        engine_of(inst, simulate(inst, "vllm", "lor"))
