"""Every registered policy yields a feasible schedule on every shipped instance (on random
instances: ``test_every_policy.py``); eviction-free policies and MC-SF (exact lengths) never
evict."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.checks.manifest import shipped_instance_files
from optsched.cost import LinearCost, UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies import list_policies, simulate

ROOT = Path(__file__).resolve().parents[2]
POLICIES = [s.name for s in list_policies()]
NEVER_EVICT = [s.name for s in list_policies() if s.name.endswith("-ef")] + [
    "mcsf", "svf", "gba", "sorted-f", "wait"]
def _shipped():
    # every shipped instance file; one that fails to load is a test failure, not a skip
    return [pytest.param(Instance.load(p), id=p.stem) for p in shipped_instance_files()]


@pytest.mark.parametrize("instance", _shipped())
@pytest.mark.parametrize("policy", POLICIES)
def test_policy_feasible_on_shipped_instances(policy, instance):
    ev = evaluate(instance, simulate(instance, policy))
    assert ev.feasible, ev.violations[:3]
    if policy in NEVER_EVICT and all(r.predicted_output is None for r in instance.requests):
        assert ev.metrics["evictions"] == 0


@st.composite
def instances(draw, predictions=True):
    n = draw(st.integers(1, 8))
    online = draw(st.booleans())
    reqs = []
    for i in range(n):
        arrival = draw(st.integers(0, 10)) if online else 0
        prompt, output = draw(st.integers(1, 20)), draw(st.integers(1, 10))
        pred = draw(st.one_of(st.none(), st.integers(1, 10))) if predictions else None
        reqs.append(Request(f"q{i}", float(arrival), prompt, output, predicted_output=pred))
    peak = max(r.prompt + r.output - 1 for r in reqs)
    b = draw(st.sampled_from([1, 1, 1, 2, 4]))
    M = draw(st.integers(peak, 3 * peak))
    M = -(-M // b) * b + (b if peak % b else 0)  # whole blocks, room for the largest
    C = draw(st.integers(1, 2 * peak))
    P = draw(st.one_of(st.none(), st.integers(1, C)))
    bs = draw(st.one_of(st.none(), st.integers(1, 6)))
    cost = draw(st.sampled_from([
        UnitCost(), LinearCost(k0=0.5, k1=0.01, kpq=1e-4, kpm=2e-4, kdm=1e-3, kpr=0.05, kdr=0.02),
    ]))
    # hidden cache (Apt-Serve) enabled on some: only aptserve uses it, the others must ignore it
    hidden = draw(st.booleans())
    return Instance("hyp", Limits(M, C, P, bs, b, hidden_cache=hidden), cost, tuple(reqs))


_SETTINGS = settings(max_examples=75, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(instance=instances(predictions=False))
def test_ef_and_mcsf_never_evict(instance):
    for policy in NEVER_EVICT:
        ev = evaluate(instance, simulate(instance, policy))
        assert ev.feasible, (policy, ev.violations[:3])
        assert ev.metrics["evictions"] == 0, policy


@_SETTINGS
@given(instance=instances(predictions=False))
def test_exact_predictions_change_nothing_for_mcsf(instance):
    exact = instance.replace(requests=tuple(
        Request(r.id, r.arrival, r.prompt, r.output, predicted_output=r.output)
        for r in instance.requests))
    assert simulate(exact, "mcsf") == simulate(instance, "mcsf")
