"""The ``exact`` rung (optsched/bounds/exact.py): it solves with the solve it is handed, and says
why it cannot run."""

from __future__ import annotations

import pytest
from paths import REPO

import optsched
from optsched.bounds import BoundError, lower_bound
from optsched.cost import UnitCost
from optsched.formulations.exhaustive import search
from optsched.instance import Instance, Limits, Request


def test_exact_reports_why_it_cannot_run():
    reqs = tuple(Request(f"r{i}", float(i), 50, 20) for i in range(30))
    inst = Instance("h", Limits(kv_capacity=200, max_batch_tokens=100), UnitCost(), reqs)
    with pytest.raises(BoundError, match="exact"):
        optsched.lower_bound(inst, "total-latency", "exact", time_limit=5)
    r = optsched.lower_bound(inst, "total-latency", "best", time_limit=5)
    assert r.method in r.ladder and "exact" not in r.ladder and any("exact" in n for n in r.notes)


def test_the_exact_rung_solves_with_the_solve_it_is_handed():
    """The bounds sit below the pipeline and import no solve: without one the exact
    rung says so and ``best`` notes it; handed one (as ``optsched.lower_bound`` hands the
    pipeline's) it calls that solve, and its bound is the exhaustive search's optimum."""
    from optsched.solving import solve

    inst = Instance.load(REPO / "instances" / "seq-unit-3.json")
    with pytest.raises(BoundError, match="no solve was handed down"):
        lower_bound(inst, "makespan", "exact", time_limit=10)
    best = lower_bound(inst, "makespan", "best", time_limit=10)
    assert "exact" not in best.ladder and any("no solve was handed down" in n for n in best.notes)
    called = []

    def counting(instance, formulation, objective, **kwargs):
        called.append(formulation)
        return solve(instance, formulation, objective, **kwargs)

    r = lower_bound(inst, "makespan", "exact", time_limit=10, exact_solve=counting)
    optimum = search(inst, "makespan").objective
    assert called == ["exhaustive"] and r.value <= optimum
    assert r.value == pytest.approx(optimum, rel=1e-8)
    assert optsched.lower_bound(inst, "makespan", "exact", time_limit=10).value == r.value
