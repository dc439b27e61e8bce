"""The cluster MILP (formulations/cluster.md) against its cross-check, the exhaustive search
over assignments, on seeded random clusters; bound <= exact <= every router; refusals; the
command line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import optsched
from optsched.bounds.cluster import cluster_request_floors
from optsched.cli import main as cli_main
from optsched.cluster import disaggregate, replicate
from optsched.cluster import simulate as route
from optsched.cost import LinearCost, UnitCost
from optsched.formulations.base import FormulationError, Hypotheses, prepare_solve, solve_model
from optsched.formulations.cluster.exhaustive import cluster_optimum
from optsched.formulations.cluster.solve import ENGINE_POLICIES, ROUTERS
from optsched.instance import Cluster, Engine, Instance, Limits, Request, TransferLink
from optsched.solve_types import SolveOptions, Status
from optsched.testing import instances

LINEAR = LinearCost(k0=0.5, k1=0.01, kpq=1e-4, kpm=2e-4, kdm=1e-3, kpr=0.05, kdr=0.02)
OBJECTIVES = ("makespan", "total-latency", "mean-ttft")
KEY = {"makespan": "makespan", "total-latency": "total_latency", "mean-ttft": "mean_ttft"}


def tiny_cluster(n: int, seed: int, R: int = 2, linear: bool = False, online: bool = True,
                 M: int = 12, C: int = 6) -> Instance:
    rng = np.random.default_rng(seed)
    reqs = tuple(Request(f"q{i}", float(rng.integers(0, 3)) if online else 0.0,
                         int(rng.integers(1, 7)), int(rng.integers(1, 4))) for i in range(n))
    return replicate(Instance("c", Limits(kv_capacity=M, max_batch_tokens=C),
                              LINEAR if linear else UnitCost(), reqs), R)


def milp(inst: Instance, objective: str, limit: float = 30.0, **params):
    opts = SolveOptions(time_limit=limit, threads=1, progress=False, params=params)
    obj, opts = prepare_solve(inst, "cluster", objective, opts, Hypotheses(), None)
    return solve_model(inst, "cluster", obj, options=opts, hypotheses=Hypotheses(),
                       warm_start=None)


def _agrees(inst: Instance, objective: str) -> None:
    rep = milp(inst, objective)
    assert rep.status == Status.OPTIMAL, (rep.status, rep.message, inst.to_json(indent=None))
    # the evaluator's check inside solve_model: the model's objective is the replay's
    assert rep.evaluation is not None and rep.evaluation.feasible
    assert rep.objective == pytest.approx(rep.evaluation.objective(objective), rel=1e-9)
    assert rep.restricted and not rep.proven_optimal  # one engine per request (section 4)
    exact = cluster_optimum(inst, objective).value
    assert rep.objective == pytest.approx(exact, rel=1e-6, abs=1e-9), inst.to_json(indent=None)


@pytest.mark.parametrize("seed,linear,online,objective", [
    (0, False, True, "total-latency"), (1, False, False, "makespan"),
    (2, True, True, "makespan"), (3, True, False, "total-latency"),
    (4, False, True, "mean-ttft")])
def test_milp_equals_the_exhaustive_search(seed, linear, online, objective):
    _agrees(tiny_cluster(3, seed, linear=linear, online=online), objective)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("objective", OBJECTIVES)
def test_milp_equals_the_exhaustive_search_larger(seed, objective):
    _agrees(tiny_cluster(4, 100 + seed, linear=seed == 1, online=seed != 2), objective)


def test_engines_that_differ_are_assigned_by_what_fits_and_costs():
    # engine "big" holds both requests (M = 12), engine "small" (M = 4) only b (I + O - 1 = 3)
    base = Instance("d", Limits(12, 12), UnitCost(), (Request("a", 0.0, 6, 3),
                                                      Request("b", 0.0, 2, 2)))
    inst = base.replace(cluster=Cluster((Engine("big"), Engine("small", limits=Limits(4, 4)))))
    _agrees(inst, "total-latency")
    _agrees(inst, "makespan")


def _routers(inst: Instance, objective: str) -> list[float]:
    out = []
    for policy in ENGINE_POLICIES:
        for router in ROUTERS:
            ev = optsched.evaluate(inst, route(inst, policy, router))
            assert ev.feasible
            out.append(ev.objective(objective))
    return out


@settings(max_examples=6, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(instances(max_requests=3, max_prompt=6, max_output=3), st.sampled_from(OBJECTIVES))
def test_cluster_bound_below_the_exact_optimum_below_every_router(plain, objective):
    # B17 <= the optimum of docs/semantics.md <= the best one-engine-per-request schedule
    # (the exhaustive optimum) <= every router's schedule (routers place a request once)
    inst = replicate(plain, 2)
    exact = cluster_optimum(inst, objective).value
    floor = cluster_request_floors(inst)[KEY[objective]]
    assert floor <= exact * (1 + 1e-9) + 1e-12
    for v in _routers(inst, objective):
        assert exact <= v * (1 + 1e-9) + 1e-12


@pytest.mark.slow
@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(instances(max_requests=3, max_prompt=6, max_output=3), st.sampled_from(OBJECTIVES),
       st.integers(2, 3))
def test_cluster_bound_below_exact_below_routers_more(plain, objective, R):
    inst = replicate(plain, R)
    exact = cluster_optimum(inst, objective).value
    assert cluster_request_floors(inst)[KEY[objective]] <= exact * (1 + 1e-9) + 1e-12
    for v in _routers(inst, objective):
        assert exact <= v * (1 + 1e-9) + 1e-12


def test_disaggregated_cluster_refused_in_one_line():
    plain = Instance("pd", Limits(16, 16), UnitCost(), (Request("a", 0.0, 4, 2),))
    inst = disaggregate(plain, 1, 1, TransferLink(bytes_per_token=1.0, bandwidth=1.0))
    with pytest.raises(FormulationError, match="roles") as e:
        optsched.solve(inst, "cluster", "makespan")
    assert "\n" not in str(e.value)


def test_other_formulations_still_refuse_a_cluster():
    with pytest.raises(optsched.errors.OptschedError, match="models one engine"):
        optsched.solve(tiny_cluster(2, 0), "exhaustive", "makespan")


def test_the_slot_count_is_a_restriction_when_forced_below_jmax():
    rep = milp(tiny_cluster(3, 0), "total-latency", batches=1)
    assert any("restriction" in n for n in rep.notes)


def test_solve_command_on_a_cluster(tmp_path, capsys):
    path = tmp_path / "c.json"
    inst = tiny_cluster(3, 0)
    inst.save(path)
    code = cli_main(["solve", str(path), "--formulation", "cluster", "--objective",
                     "total-latency", "--json", "--quiet", "--time-limit", "30"])
    out = json.loads(capsys.readouterr().out)  # exactly one JSON document
    assert code == 0 and out["status"] == "optimal"
    assert out["objective"] == pytest.approx(cluster_optimum(inst, "total-latency").value)
    assert out["lower_bound"]["method"] == "cluster (B17)"
    assert out["lower_bound"]["value"] <= out["objective"] + 1e-9


def test_block_ids_on_a_cluster_refused_in_one_line():
    # the model prices every prompt token as computed: no optimum claimed with prefix reuse
    inst = Instance("p", Limits(64, 64, block_size=4), UnitCost(),
                    (Request("a", 0.0, 10, 2, prefix=(1, 2)), Request("b", 0.0, 10, 2, prefix=(1, 2))),
                    cluster=Cluster((Engine("0"), Engine("1"))))
    with pytest.raises(FormulationError, match="prefix block ids") as e:
        optsched.solve(inst, "cluster", "makespan")
    assert "\n" not in str(e.value)
