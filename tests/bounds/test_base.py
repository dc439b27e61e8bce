"""Every bound is at most the optimum (bounds.md): on the shipped instances with proven
optima, on random small instances against the exhaustive search, and at most every
registered policy's objective on random instances up to 200 requests. A bound above an
optimum is a defect, not a weak bound."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from bound_checks import cheap_bounds
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import GOOD, REPO

import optsched
from optsched.bounds import BoundError, lower_bound
from optsched.cost import DEFAULT_PRESET, preset
from optsched.evaluation import OBJECTIVES, evaluate
from optsched.formulations.exhaustive import SearchOptions, search
from optsched.instance import Instance, Request
from optsched.policies import list_policies, simulate
from optsched.testing import assert_bound_valid, constrained_instances, large_instances


# --- shipped instances with proven optima ---------------------------------------------------
def _manifest_cases():
    m = json.loads((REPO / "instances" / "manifest.json").read_text())["instances"]
    for key, ent in m.items():
        for obj, o in ent["objectives"].items():
            if o.get("optimum") is not None:
                yield pytest.param(ent["file"], obj, o["optimum"], id=f"{Path(key).stem}-{obj}")


@pytest.mark.parametrize("file,objective,optimum", list(_manifest_cases()))
def test_bounds_below_manifest_optima(file, objective, optimum):
    path = REPO / file
    inst = Instance.load(path if path.exists() else REPO / "optsched" / "data" / Path(file).name)
    bounds = cheap_bounds(inst, objective)
    assert_bound_valid(bounds, optimum, "the proven optimum", inst)
    best = optsched.lower_bound(inst, objective, "best", time_limit=2)
    assert_bound_valid({"best": best.value}, optimum, "the proven optimum", inst)


# --- random small instances against the exhaustive search -----------------------------------
def _check_against_search(inst, objective, max_states):
    res = search(inst, objective, SearchOptions(max_states=max_states, time_limit=5))
    if res.status != "optimal":
        return  # too large for the oracle within the limit: nothing is claimed
    opt = evaluate(inst, res.schedule).objective(objective)
    assert_bound_valid(cheap_bounds(inst, objective), opt, "the exhaustive optimum", inst)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=constrained_instances(max_requests=3, max_prompt=6, max_output=3),
       objective=st.sampled_from(OBJECTIVES))
def test_bounds_below_exhaustive_optimum(inst, objective):
    _check_against_search(inst, objective, 3_000)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=constrained_instances(), objective=st.sampled_from(OBJECTIVES))
def test_bounds_below_exhaustive_optimum_more(inst, objective):
    _check_against_search(inst, objective, 20_000)




@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=large_instances(), objective=st.sampled_from(OBJECTIVES))
def test_bounds_below_every_policy(inst, objective):
    bounds = cheap_bounds(inst, objective)
    for spec in list_policies():
        ev = evaluate(inst, simulate(inst, spec.name))
        assert ev.feasible, f"policy {spec.name} gave an infeasible schedule"
        assert_bound_valid(bounds, ev.objective(objective), f"policy {spec.name}'s objective", inst)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=large_instances(), objective=st.sampled_from(OBJECTIVES))
def test_bounds_below_two_policies(inst, objective):
    bounds = cheap_bounds(inst, objective)
    for name in ("vllm", "sarathi"):
        ev = evaluate(inst, simulate(inst, name))
        assert_bound_valid(bounds, ev.objective(objective), f"policy {name}'s objective", inst)


















def test_unknown_method_and_objective_are_errors():
    inst = Instance.load(REPO / "instances" / "seq-unit-3.json")
    with pytest.raises(BoundError, match="unknown bound method"):
        lower_bound(inst, "makespan", "nope")
    with pytest.raises(BoundError, match="does not support"):
        lower_bound(inst, "makespan", "srpt")
    assert math.isfinite(lower_bound(inst, "mean-ttft", "combinatorial").value)


def test_own_bound_method_from_a_file(tmp_path):
    f = tmp_path / "mybound.py"
    f.write_text("from optsched.bounds import BoundResult\n"
                 "def half(instance, objective, budget):\n"
                 "    '''half the number of requests'''\n"
                 "    return BoundResult(instance.n / 2, 'half', objective)\n")
    inst = Instance.load(REPO / "instances" / "seq-unit-3.json")
    assert lower_bound(inst, "makespan", f"{f}:half").value == pytest.approx(1.5)








def test_epoch_arrivals_keep_the_bound_tight():
    """Before: the bound's relative safety margin (1e-9) was taken of the epoch time itself,
    1.7 s below the optimum at t = 1.7e9 while the whole schedule lasts 0.04 s. Shifted, the
    bound is the shifted instance's plus the offset, and still below the optimum."""
    from optsched.solving import lower_bound

    base = Instance.load(GOOD).replace(cost_model=preset(DEFAULT_PRESET))
    off = 1.7e9
    epoch = base.replace(requests=tuple(
        Request(r.id, off + r.arrival * 0.01, r.prompt, r.output) for r in base.requests))
    zero = base.replace(requests=tuple(
        Request(r.id, r.arrival * 0.01, r.prompt, r.output) for r in base.requests))
    a = lower_bound(epoch, "makespan", time_limit=10).value
    b = lower_bound(zero, "makespan", time_limit=10).value
    assert abs(a - (b + off)) < 1e-5  # a few ulps of 1.7e9 (2.4e-7 each)
    best = evaluate(epoch, simulate(epoch, "vllm")).objective("makespan")
    assert a <= best
