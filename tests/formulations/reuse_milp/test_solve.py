"""The reuse MILP (optsched/formulations/reuse_milp/, formulations/reuse-milp.md): optima
derived by hand (one needs hits, one needs a drop), equal to the exhaustive search with reuse
on seeded tiny instances, every reuse-aware bound rung below its optimum, the at-most
question, and the refusals (docs/semantics.md section 6, "Prefix reuse")."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import optsched
from optsched.bounds import bound_methods
from optsched.cli import main as cli_main
from optsched.cost import LinearCost, UnitCost
from optsched.errors import OptschedError
from optsched.evaluation import evaluate
from optsched.formulations.base import Hypotheses
from optsched.formulations.exhaustive import SearchOptions, search
from optsched.instance import Instance, Limits, Request
from optsched.policies import simulate
from optsched.solve_types import SolveOptions
from optsched.testing import assert_bound_valid, assert_feasible, tiny_prefix_instance

OBJS = ("makespan", "total-latency")
REUSE_RUNGS = [m.name for m in bound_methods().values() if m.reuse_aware]


def milp_opt(inst: Instance, objective: str, **hyp):
    """The MILP's answer through the one solve path (which replays and checks it)."""
    rep = optsched.solve(inst, "reuse-milp", objective, options=SolveOptions(time_limit=30),
                         hypotheses=Hypotheses(**hyp))
    return rep


def three_sharing() -> Instance:
    """As in the exhaustive tests: three requests of 3 prompt tokens and 1 output token listing
    blocks 1, 2 (b = 1), C = 4."""
    return Instance("three", Limits(kv_capacity=16, max_batch_tokens=4, block_size=1), UnitCost(),
                    tuple(Request(x, 0, 3, 1, prefix=(1, 2)) for x in "abc"))


def test_an_optimum_that_needs_hits():
    # tests/formulations/exhaustive/test_reuse.py derives it: 9 prompt tokens, C = 4, so 3
    # batches without reuse; a computes its 3 tokens, then b and c hit 2 and compute 1 each:
    # makespan 2; total latency 1 + 2 + 2 = 5
    rep = milp_opt(three_sharing(), "makespan")
    assert rep.status == "optimal" and rep.objective == 2
    assert rep.evaluation.metrics["hit_tokens"] > 0
    assert milp_opt(three_sharing(), "total-latency").objective == 5


def test_an_optimum_that_needs_a_drop_to_admit_a_request():
    # derived in the exhaustive tests: after a finishes its blocks stay cached; c needs
    # 4 + 2 tokens next to them, 4 + 4 + 2 = 10 > M = 6, so batch 2 drops both: optimum 2
    inst = Instance("drop", Limits(kv_capacity=6, max_batch_tokens=5, block_size=2), UnitCost(),
                    (Request("a", 0, 5, 1, prefix=(1, 2)), Request("c", 0, 5, 1, prefix=(7, 8))))
    rep = milp_opt(inst, "makespan")
    assert rep.status == "optimal" and rep.objective == 2
    assert rep.evaluation.metrics["dropped_blocks"] == 2


def test_at_most_answers_no_below_the_optimum_and_yes_at_it():
    inst = three_sharing()
    assert milp_opt(inst, "makespan", at_most=1.5).status == "infeasible"
    rep = milp_opt(inst, "makespan", at_most=2)
    assert rep.status == "optimal" and rep.objective <= 2


#: seeds of tiny_prefix_instance with unit time (the MILP's cost model), each < 1 s
FAST_SEEDS = (2, 5, 8, 10)


def _check_against_exhaustive(inst: Instance) -> None:
    for objective in OBJS:
        ex = search(inst, objective, SearchOptions(time_limit=5))
        rep = milp_opt(inst, objective)
        assert rep.status == "optimal", rep.message
        assert_feasible(inst, rep.schedule)
        if ex.status == "optimal":
            assert rep.objective == pytest.approx(ex.objective, rel=1e-9), (inst.name, objective)
            lb = optsched.lower_bound(inst, objective, "best", time_limit=2.0)
            assert_bound_valid({**lb.ladder, "best": lb.value}, rep.objective, "the MILP optimum",
                               inst)


@pytest.mark.parametrize("seed", FAST_SEEDS)
def test_equals_the_exhaustive_search(seed):
    inst = tiny_prefix_instance(seed)
    assert isinstance(inst.cost_model, UnitCost)
    _check_against_exhaustive(inst)


@pytest.mark.slow
@settings(max_examples=10, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.integers(0, 2**31 - 1), st.integers(2, 3))
def test_equals_the_exhaustive_search_and_bounds_stay_below(seed, n):
    inst = tiny_prefix_instance(seed, n)
    if not isinstance(inst.cost_model, UnitCost):
        inst = inst.replace(cost_model=UnitCost())
    _check_against_exhaustive(inst)


def test_refuses_what_it_does_not_model_in_one_line():
    lin = three_sharing().replace(cost_model=LinearCost(k0=0.5, k1=0.01))
    with pytest.raises(OptschedError, match="reuse-milp: models unit time only") as e:
        optsched.solve(lin, "reuse-milp", "makespan")
    assert "\n" not in str(e.value)
    with pytest.raises(OptschedError, match="does not support objective"):
        optsched.solve(three_sharing(), "reuse-milp", "mean-ttft")
    blind = Instance("blind", Limits(16, 4), UnitCost(), (Request("a", 0, 3, 1),))
    with pytest.raises(OptschedError, match="lists no prefix block ids"):
        optsched.solve(blind, "reuse-milp", "makespan")


def test_cli_at_most_than_lpm(tmp_path, capsys):
    """``optsched solve --formulation reuse-milp --at-most 0.9 --than lpm``: yes (a checked
    schedule) exactly when the hand-derived optimum 2 is at most 0.9 times lpm's makespan."""
    inst = three_sharing()
    p = tmp_path / "three.json"
    inst.save(p)
    lpm = evaluate(inst, simulate(inst, "lpm")).objective("makespan")
    code = cli_main(["solve", str(p), "--formulation", "reuse-milp", "--objective", "makespan",
                     "--at-most", "0.9", "--than", "lpm", "--json"])
    out = json.loads(capsys.readouterr().out)
    if 2 <= 0.9 * lpm:
        assert code == 0 and out["status"] == "optimal" and out["objective"] == 2
    else:
        assert code == 1 and out["status"] == "infeasible"
