"""The branch and bound over assignments (formulations/cluster.md section 6) against the
exhaustive cross-check (section 5) on seeded random clusters: equal optima, bound <= optimum
<= every router, the gap when the budget ends, and the ``method=bnb`` path of the formulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

import optsched
import optsched.bounds  # installs the per-engine floor of eq. K10
from optsched.cluster import replicate
from optsched.cluster import simulate as route
from optsched.cost import LinearCost, UnitCost
from optsched.formulations.base import FormulationError, Hypotheses, prepare_solve, solve_model
from optsched.formulations.cluster.bnb import branch_and_bound
from optsched.formulations.cluster.exhaustive import cluster_optimum
from optsched.formulations.cluster.solve import ENGINE_POLICIES, ROUTERS, best_router
from optsched.instance import Instance, Limits, Request
from optsched.solve_types import SolveOptions, Status

LINEAR = LinearCost(k0=0.5, k1=0.01, kpq=1e-4, kpm=2e-4, kdm=1e-3, kpr=0.05, kdr=0.02)


def tiny_cluster(n: int, seed: int, R: int = 2, linear: bool = False, M: int = 12,
                 C: int = 6) -> Instance:
    rng = np.random.default_rng(seed)
    reqs = tuple(Request(f"q{i}", float(rng.integers(0, 3)), int(rng.integers(1, 7)),
                         int(rng.integers(1, 4))) for i in range(n))
    return replicate(Instance("c", Limits(kv_capacity=M, max_batch_tokens=C),
                              LINEAR if linear else UnitCost(), reqs), R)


def _routers(inst: Instance, objective: str) -> list[float]:
    out = []
    for policy in ENGINE_POLICIES:
        for router in ROUTERS:
            ev = optsched.evaluate(inst, route(inst, policy, router))
            if ev.feasible:
                out.append(ev.objective(objective))
    return out


@pytest.mark.parametrize("seed,linear,n,R,objective", [
    (0, False, 5, 2, "makespan"), (1, False, 5, 2, "total-latency"),
    (2, False, 5, 2, "mean-ttft"), (3, True, 4, 2, "total-latency"),
    (4, True, 3, 2, "makespan"), (5, False, 4, 3, "total-latency"),
    (6, False, 5, 2, "total-latency"), (7, False, 4, 3, "makespan"),
])
def test_equals_the_exhaustive_cross_check(seed, linear, n, R, objective):
    inst = tiny_cluster(n, seed, R, linear)
    ws = best_router(inst, objective)
    assert ws is not None
    r = branch_and_bound(inst, objective, incumbent=(ws.objective(objective), ws.schedule))
    exact = cluster_optimum(inst, objective).value
    assert r.status == Status.OPTIMAL
    assert r.value == pytest.approx(exact, rel=1e-6, abs=1e-9), inst.to_json(indent=None)
    ev = optsched.evaluate(inst, r.schedule)
    assert ev.feasible and ev.objective(objective) == pytest.approx(r.value, rel=1e-9)
    assert r.bound <= exact * (1 + 1e-9) + 1e-9
    assert all(exact <= v * (1 + 1e-9) + 1e-9 for v in _routers(inst, objective))


def test_the_bounds_layer_installs_the_cheap_ladder_as_the_floor():
    from optsched.bounds import lower_bound
    from optsched.formulations.cluster import bnb

    inst = tiny_cluster(4, 2).replace(cluster=None)
    assert bnb._FLOOR and bnb._FLOOR[0](inst, "total-latency") == \
        lower_bound(inst, "total-latency", "combinatorial").value > 0


def test_without_an_incumbent_it_still_proves():
    inst = tiny_cluster(4, 11)
    r = branch_and_bound(inst, "total-latency")
    assert r.status == Status.OPTIMAL
    assert r.value == pytest.approx(cluster_optimum(inst, "total-latency").value)


def test_out_of_budget_reports_a_certified_gap():
    # no time: no engine search runs, so every assignment the floors cannot prune stays open;
    # the answer is the router's schedule and the bound the least open assignment's floor
    inst = tiny_cluster(6, 3)
    ws = best_router(inst, "total-latency")
    assert ws is not None
    r = branch_and_bound(inst, "total-latency", time_limit=0.0,
                         incumbent=(ws.objective("total-latency"), ws.schedule))
    exact = cluster_optimum(inst, "total-latency").value
    assert r.value == ws.objective("total-latency") and r.schedule is ws.schedule
    assert r.bound <= exact * (1 + 1e-9)
    if r.counts["open"]:
        assert r.status == Status.FEASIBLE and r.bound < r.value
    else:  # the floors alone met the router: then it is optimal
        assert r.status == Status.OPTIMAL and r.value == pytest.approx(exact)


def _solve(inst: Instance, objective: str, hyp: Hypotheses = Hypotheses(), **params):
    opts = SolveOptions(time_limit=30, threads=1, progress=False, params=params)
    obj, opts = prepare_solve(inst, "cluster", objective, opts, hyp, None)
    return solve_model(inst, "cluster", obj, options=opts, hypotheses=hyp, warm_start=None)


def test_the_formulations_method_bnb():
    inst = tiny_cluster(5, 0)
    rep = _solve(inst, "makespan", method="bnb")
    assert rep.status == Status.OPTIMAL and rep.restricted and not rep.proven_optimal
    assert rep.evaluation is not None and rep.evaluation.feasible
    assert rep.objective == pytest.approx(rep.evaluation.objective("makespan"), rel=1e-9)
    assert rep.objective == pytest.approx(cluster_optimum(inst, "makespan").value)
    assert any(n.startswith("bnb:") for n in rep.notes)
    with pytest.raises(FormulationError, match="method=bnb supports no hypotheses"):
        _solve(inst, "makespan", Hypotheses(no_evictions=True), method="bnb")


def test_refusals():
    with pytest.raises(FormulationError, match="not a sum or a max"):
        branch_and_bound(tiny_cluster(2, 0), "p99-ttft")
    big = replicate(Instance("b", Limits(4, 4), UnitCost(),
                             tuple(Request(f"r{i}", 0.0, 1, 1) for i in range(30))), 2)
    with pytest.raises(FormulationError, match="too many"):
        branch_and_bound(big, "makespan")
    assert math.isfinite(branch_and_bound(tiny_cluster(1, 0), "makespan").value or math.nan)
