"""Every registered policy yields a feasible schedule on every shipped instance (on random
instances: ``test_every_policy.py``); eviction-free policies and MC-SF (exact lengths) never
evict."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from paths import SHARED_DATA

from optsched.checks.manifest import shipped_instance_files
from optsched.cost import UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies import PolicyError, get_spec, list_policies, simulate
from optsched.testing import policy_instances
from optsched.workloads.generators import generate

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


_SETTINGS = settings(max_examples=75, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(instance=policy_instances(predictions=False))
def test_ef_and_mcsf_never_evict(instance):
    for policy in NEVER_EVICT:
        ev = evaluate(instance, simulate(instance, policy))
        assert ev.feasible, (policy, ev.violations[:3])
        assert ev.metrics["evictions"] == 0, policy


@_SETTINGS
@given(instance=policy_instances(predictions=False))
def test_exact_predictions_change_nothing_for_mcsf(instance):
    exact = instance.replace(requests=tuple(
        Request(r.id, r.arrival, r.prompt, r.output, predicted_output=r.output)
        for r in instance.requests))
    assert simulate(exact, "mcsf") == simulate(instance, "mcsf")


THEORY = ("gba", "gsa", "sorted-f", "wait", "nested-wait")


def test_registered_with_sources_and_params():
    for name, arxiv in (("gba", "2601.22996"), ("gsa", "2601.22996"),
                        ("sorted-f", "2508.06133"), ("wait", "2504.11320"),
                        ("nested-wait", "2504.11320")):
        spec = get_spec(name)
        assert arxiv in spec.source, name
        assert spec.hypothetical == (name != "gsa"), name
    for name in ("wait", "nested-wait"):
        with pytest.raises(PolicyError, match="types"):
            get_spec(name).make(types=0)
        with pytest.raises(PolicyError, match="scale"):
            get_spec(name).make(scale=1.5)


@pytest.mark.parametrize("policy", THEORY)
def test_chunked_long_prompt_and_budgets(policy):
    # a prompt longer than C = 4 (chunked alone) beside short ones, max_batch_size 2
    reqs = (Request("long", 0.0, 9, 2), Request("s1", 0.0, 2, 3), Request("s2", 1.0, 1, 4),
            Request("s3", 2.0, 3, 1))
    i = Instance("budgets", Limits(kv_capacity=12, max_batch_tokens=4, max_prefill_tokens=3,
                                   max_batch_size=2), UnitCost(), reqs)
    ev = evaluate(i, simulate(i, policy))
    assert ev.feasible, ev.violations[:3]


def _generated():
    """A small instance of every generator; those that draw from a trace need the shared data."""
    out = [generate("fixed", n=6, prompt=40, output=30),
           generate("mix", mix="SILO", n=6, seed=1),
           generate("chat-like", n=12, rate=4.0, seed=1),
           generate("online-paper", n=12, seed=2),
           generate("online-paper", n=12, seed=3, arrival="poisson", rate=0.5),
           generate("online-paper-horizon", rate=0.5, horizon=20, seed=1)]
    trace = SHARED_DATA / "traces" / "AzureLLMInferenceTrace_conv.csv"
    if trace.exists():
        out += [generate("poisson-trace", trace=str(trace), n=12, rate=2.0, seed=1),
                generate("bros", trace=str(trace), n=12, rate=2.0, seed=1)]
    return out


@pytest.mark.parametrize("policy", THEORY)
def test_runs_on_every_generator(policy):
    for i in _generated():
        ev = evaluate(i, simulate(i, policy))
        assert ev.feasible, (i.name, ev.violations[:3])
