"""Every registered policy is valid: on random instances (arrivals, predictions, chunking,
blocks, batch-size caps, unit and linear cost, hidden cache on or off) its schedule is
feasible by the one evaluator, deterministic (a fresh object of the policy builds the same
schedule) and re-runnable (the same object, run on another instance in between, builds it
again: ``bind`` resets all its state). The same on instances whose requests share prompt
prefixes (docs/semantics.md section 6, "Prefix reuse"): a reuse-aware policy's stated hits and
drops must follow the rules, and a reuse-blind one runs as before with the drops of every
block nobody holds, so it is safe there too (the evaluator judges both).

Parametrised over the registry (:func:`optsched.policies.list_policies`), so a policy added as
one new file is tested here with no edit."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from optsched.cost import UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies import get_policy, list_policies, simulate
from optsched.testing import policy_instances, prefix_instances

POLICIES = [s.name for s in list_policies()]
#: examples per policy (four simulations each, one of them on :data:`OTHER`)
EXAMPLES = 40
#: examples per policy on shared-prefix instances
PREFIX_EXAMPLES = 15
#: the instance run in between by the same policy object (9 requests, arrivals 0-2)
OTHER = Instance("t", Limits(20, 100), UnitCost(),
                 tuple(Request(f"r{k}", k % 3, 2 + k % 4, 1 + k % 5) for k in range(9)))


@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instance=policy_instances())
def test_policy_feasible_deterministic_rerunnable(policy, instance):
    p = get_policy(policy)
    first = simulate(instance, p)
    ev = evaluate(instance, first)
    assert ev.feasible, (policy, ev.violations[:3])
    assert simulate(instance, get_policy(policy)) == first, f"{policy}: not deterministic"
    simulate(OTHER, p)
    assert simulate(instance, p) == first, f"{policy}: state carried over from another run"


@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=PREFIX_EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(instance=prefix_instances())
def test_policy_feasible_deterministic_rerunnable_with_shared_prefixes(policy, instance):
    p = get_policy(policy)
    first = simulate(instance, p)
    ev = evaluate(instance, first)
    assert ev.feasible, (policy, [str(v) for v in ev.violations[:3]])
    # the hits the policy states are the hits the evaluator counts; a reuse-blind one states
    # none
    assert ev.metrics.get("hit_tokens", 0) == int(first.entry_hit.sum())
    if not getattr(p, "reuse_aware", False):
        assert not first.has_hits, f"{policy}: reuse-blind but states hits"
    assert simulate(instance, get_policy(policy)) == first, f"{policy}: not deterministic"
    simulate(OTHER, p)
    assert simulate(instance, p) == first, f"{policy}: state carried over from another run"


@pytest.mark.parametrize("name", POLICIES)
def test_same_policy_object_state_is_per_run(name):
    """One policy object run over two instances in turn: ``bind`` resets all its state, so the
    second run on ``i`` repeats the first exactly."""
    i = Instance("t", Limits(8, 100), UnitCost(), (Request("a", 0, 3, 4), Request("b", 1, 2, 3)))
    p = get_policy(name)
    first = simulate(i, p)
    simulate(OTHER, p)
    assert simulate(i, p) == first
