"""The ``reuse-work`` rung (optsched/bounds/reuse_work.py) and the reuse-aware ladder: by hand,
and below every policy on random instances whose requests share prefixes
(formulations/bounds.md B19)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

import optsched
from optsched.bounds import bound_methods
from optsched.cost import UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies import list_policies, simulate
from optsched.testing import assert_bound_valid, prefix_instances

#: the rungs valid with prefix reuse (``best`` climbs them on instances with block ids)
REUSE_RUNGS = [m.name for m in bound_methods().values() if m.reuse_aware]
REUSE_POLICIES = tuple(s.name for s in list_policies() if s.reuse_aware)


def three_sharing() -> Instance:
    """Three requests of 9 prompt tokens, 1 output token, listing blocks 1, 2 (b = 4), C = 10."""
    reqs = tuple(Request(x, 0, 9, 1, prefix=(1, 2)) for x in "abc")
    return Instance("three", Limits(kv_capacity=64, max_batch_tokens=10, block_size=4),
                    UnitCost(), reqs)


def test_reuse_work_by_hand_and_what_a_reuse_blind_bound_would_claim():
    inst = three_sharing()
    # vllm-apc: batch 1 computes `a` (9 tokens <= C = 10); batch 2 `b` and `c` hit 8 tokens
    # each and compute 1: completions 1, 2, 2 -> total latency 5, makespan 2
    ev = evaluate(inst, simulate(inst, "vllm-apc"))
    assert ev.objective("total-latency") == 5 and ev.objective("makespan") == 2
    # reuse-work, makespan: 3 * 1 unskippable tokens + the 2 blocks computed once (8) = 11
    # tokens over C = 10: 2 batches. Total latency: the k-th completion sees k * (1 + 8/3)
    # tokens (each request's share of the blocks): 1, 1, 2 batches -> 4
    assert optsched.lower_bound(inst, "makespan", "reuse-work").value == pytest.approx(2)
    assert optsched.lower_bound(inst, "total-latency", "reuse-work").value == pytest.approx(4)
    # the reuse-blind `work` rung on the same prompts without ids: 27 tokens, one prompt of
    # 9 per batch of 10 -> completions 1, 2, 3: 6 and 3, above what vllm-apc achieves. A bound
    # that ignored reuse would fail the checks of this module
    blind = inst.replace(requests=tuple(Request(r.id, 0, 9, 1) for r in inst.requests))
    assert optsched.lower_bound(blind, "total-latency", "work").value == pytest.approx(6)
    assert optsched.lower_bound(blind, "makespan", "work").value == pytest.approx(3)


def test_best_climbs_the_reuse_aware_rungs_only():
    r = optsched.lower_bound(three_sharing(), "makespan", "best")
    assert set(r.ladder) <= set(REUSE_RUNGS) and r.method in ("reuse-request", "reuse-work")
    assert r.value == pytest.approx(2)
    assert any(n.startswith("not climbed: 'combinatorial'") and "prefix reuse" in n
               for n in r.notes)


def _below(inst: Instance, policies: tuple[str, ...]) -> None:
    values = {}
    for p in policies:
        ev = evaluate(inst, simulate(inst, p))
        assert ev.feasible, p
        values[p] = ev
    for objective in ("makespan", "total-latency", "mean-ttft"):
        for rung in (r for r in REUSE_RUNGS if objective in bound_methods()[r].objectives):
            b = optsched.lower_bound(inst, objective, rung, time_limit=2.0).value
            for p, ev in values.items():
                assert_bound_valid({rung: b}, ev.objective(objective), f"policy {p}", inst)


@settings(max_examples=5, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(inst=prefix_instances(max_requests=6))
def test_reuse_rungs_below_the_reuse_aware_policies(inst):
    _below(inst, REUSE_POLICIES)


@pytest.mark.slow
@settings(max_examples=50, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(inst=prefix_instances(max_requests=8))
def test_reuse_rungs_below_every_policy(inst):
    _below(inst, tuple(s.name for s in list_policies()))
