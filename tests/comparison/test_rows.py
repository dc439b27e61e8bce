"""What a comparison holds (optsched/comparison/rows.py): frozen, typed rows whose status is a
Status, written in the tables' words, and a summary that ``print`` shows."""

from __future__ import annotations

from dataclasses import FrozenInstanceError

import pytest

import optsched
from optsched.comparison import Row, evaluated_row
from optsched.comparison.rows import RowKind
from optsched.schedule import Schedule
from optsched.solve_types import SolvePlan, SolveReport, Status


def _solve(status: str, plan: SolvePlan | None = None) -> SolveReport:
    return SolveReport(status=status, objective=None, bound=None, gap=None, runtime=0.1,
                       solver="highs", formulation="infermax", objective_kind="makespan",
                       warm_start=None, evaluation=None, schedule=None, plan=plan)


def test_a_row_is_frozen_and_typed():
    inst = optsched.load("tiny")
    row = evaluated_row("vllm", "policy", inst, optsched.simulate(inst, "vllm"), "makespan", 0.1)
    assert row.kind is RowKind.POLICY and row.status is Status.FEASIBLE
    assert row.status_text == "feasible" and row.method == "policy"
    with pytest.raises(FrozenInstanceError):
        row.gap = 0.0  # type: ignore[misc]


def test_an_infeasible_row_counts_its_violations():
    inst = optsched.load("tiny")
    row = evaluated_row("empty", "schedule", inst, Schedule.empty(), "makespan", None)
    assert row.status is Status.INFEASIBLE
    # the one request never runs: one INCOMPLETE violation
    assert row.status_text == "infeasible (1 violations)" == row.to_dict()["status"]
    assert row.method == "schedule file"


def test_the_optimum_row_words_its_solve():
    built = SolvePlan(True, 10.0, None, "the solver gets 10 s")
    skipped = SolvePlan(False, None, None, "model skipped")
    cases = [("optimal", built, "optimal"), ("feasible", built, "best found (not proven optimal)"),
             ("error", built, "error"), ("no_solution", skipped, "skipped")]
    for status, plan, text in cases:
        row = Row("opt", "optimum", status, solve=_solve(status, plan))
        assert row.status is Status(status) and row.status_text == text, status
        assert row.method == "solver (infermax)"
        assert row.skipped == (plan is skipped)
    skipped_row = Row("opt", "optimum", "no_solution", solve=_solve("no_solution", skipped))
    assert skipped_row.to_dict()["solver_status"] == "skipped"


def test_only_the_optimum_row_carries_a_solve():
    with pytest.raises(ValueError, match="optimum row"):
        Row("opt", "optimum", "optimal")
    with pytest.raises(ValueError, match="optimum row"):
        Row("vllm", "policy", "feasible", solve=_solve("optimal"))
    with pytest.raises(ValueError):
        Row("vllm", "policy", "fine")


def test_an_lns_row_names_its_neighbourhood():
    inst = optsched.load("tiny")
    row = evaluated_row("lns (vllm)", "lns", inst, optsched.simulate(inst, "vllm"), "makespan",
                        1.0, search_method="window")
    assert row.method == "lns: window" == row.to_dict()["method"]


def test_comparison_summary_lists_every_row_and_ends_with_the_verdict():
    inst = optsched.load("tiny")
    cmp = optsched.compare(inst, ["vllm", "sarathi"])
    assert isinstance(cmp, optsched.Comparison)
    assert all(isinstance(r, optsched.Row) for r in cmp.rows)
    lines = str(cmp).splitlines()
    assert lines[0].startswith("tiny (1 requests): makespan")
    assert any(line.startswith("vllm ") for line in lines)
    assert any(line.startswith("sarathi ") for line in lines)
    assert lines[-1] == optsched.comparison.compare_verdict(cmp)


def test_a_mean_ttft_optimum_that_starves_decodes_is_flagged():
    """Before: compare reported the mean-TTFT optimum that evicts every request after its
    first token (TPOT 4-32 s) without a word. Flagged when its mean TPOT is 5x the best
    policy's; quiet at 4x and for any other objective."""
    from types import SimpleNamespace as NS

    from optsched.comparison.rows import starved_decodes

    def row(kind, tpot, evictions=0):
        ev = NS(feasible=True, metrics={"mean_tpot": tpot, "evictions": evictions})
        return NS(kind=kind, evaluation=ev)

    inst = optsched.Instance.from_dict({"name": "x", "limits": {
        "kv_capacity": 8, "max_batch_tokens": 8, "max_prefill_tokens": None,
        "max_batch_size": None, "block_size": 1}, "cost_model": {"kind": "unit"},
        "requests": [{"id": "a", "arrival": 0, "prompt": 2, "output": 3}]})
    policies = [row(RowKind.POLICY, 0.05), row(RowKind.POLICY, 0.08)]
    starving = NS(objective="mean-ttft", instance=inst,
                  rows=[*policies, row(RowKind.OPTIMUM, 4.0, evictions=40)])
    text = starved_decodes(starving, policies)
    assert "starves decodes" in text and "40 evictions" in text
    fine = NS(objective="mean-ttft", instance=inst, rows=[*policies, row(RowKind.OPTIMUM, 0.2)])
    assert starved_decodes(fine, policies) == ""  # 4x the best policy's 0.05
    other = NS(objective="makespan", instance=inst, rows=starving.rows)
    assert starved_decodes(other, policies) == ""
