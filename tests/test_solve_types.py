"""The result types of a solve and a bound (optsched/solve_types.py): typed statuses, the JSON
shapes of ``optsched solve --json`` that the fallback, the warm start and the plan produce,
and the summaries ``print`` shows."""

from __future__ import annotations

import ast
import math
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

import optsched
from optsched.formulations.base import RawSolution
from optsched.schedule import Schedule
from optsched.solve_types import (
    BoundError,
    BoundResult,
    Fallback,
    ModelEstimate,
    SearchRun,
    SolvePlan,
    SolveReport,
    Status,
    WarmStartInfo,
)

ROOT = Path(__file__).resolve().parents[1]


def _report(**kw) -> SolveReport:
    base = dict(status="optimal", objective=10.0, bound=10.0, gap=0.0, runtime=0.5,
                solver="highs", formulation="infermax", objective_kind="makespan",
                warm_start=None, evaluation=None, schedule=None)
    return SolveReport(**{**base, **kw})


def test_no_status_field_is_a_plain_string():
    """Every ``status`` annotation in optsched names the Status enum (a class field, a named
    tuple's, a parameter): ``grep "status: str"`` finds nothing, and neither does this."""
    plain = []
    for path in sorted((ROOT / "optsched").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                name, ann = node.target.id, node.annotation
            elif isinstance(node, ast.arg) and node.annotation is not None:
                name, ann = node.arg, node.annotation
            else:
                continue
            if name == "status" and "Status" not in ast.unparse(ann):
                plain.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(ann)}")
    assert plain == []


def test_a_report_takes_a_status_name_and_refuses_an_unknown_one():
    rep = _report(status="feasible")
    assert rep.status is Status.FEASIBLE and isinstance(rep.status, Status)
    with pytest.raises(ValueError):
        _report(status="solved")
    with pytest.raises(FrozenInstanceError):
        rep.status = Status.OPTIMAL  # type: ignore[misc]


def test_a_formulation_returning_an_unknown_status_is_an_error_that_says_so():
    raw = RawSolution(status="great")  # type: ignore[arg-type]
    assert raw.status is Status.ERROR
    assert raw.message == "formulation returned unknown status 'great'"
    assert RawSolution(status="optimal").status is Status.OPTIMAL  # type: ignore[arg-type]


def test_proven_optimal_only_for_the_unrestricted_problem():
    assert _report().proven_optimal
    assert not _report(restricted=True).proven_optimal
    assert not _report(status="feasible").proven_optimal
    assert _report(restricted=True).global_bound is None and _report().global_bound == 10.0


def test_fallback_json_with_and_without_an_improving_search():
    start = Schedule.empty()
    fb = Fallback("vllm", 12.0, start, gap=0.25)
    assert fb.to_dict() == {"policy": "vllm", "objective": 12.0, "gap": 0.25}
    assert fb.schedule is start and not fb.improved
    # a search that found nothing better leaves the warm start the answer
    worse = Fallback("vllm", 12.0, start, 0.25, SearchRun(Schedule.empty(), 12.5, 3.0, "window"))
    assert worse.to_dict() == {"policy": "vllm", "objective": 12.0, "gap": 0.25}
    assert worse.schedule is start
    better_sched = Schedule.empty()
    better = Fallback("vllm", 12.0, start, 0.1, SearchRun(better_sched, 11.0, 3.0, "window"))
    assert better.to_dict() == {"policy": "lns (vllm)", "objective": 11.0, "gap": 0.1,
                                "start_objective": 12.0, "lns_seconds": 3.0}
    assert better.schedule is better_sched and better.improved


def test_warm_start_info_json_keeps_the_optional_keys_optional():
    assert WarmStartInfo("vllm", 3.0).to_dict() == {"policy": "vllm", "objective": 3.0}
    assert WarmStartInfo("schedule", 3.0, False).to_dict() == \
        {"policy": "schedule", "objective": 3.0, "feasible": False}
    assert WarmStartInfo(None, None, stopped=("warm start: mcsf not run",)).to_dict() == \
        {"policy": None, "objective": None, "stopped": ["warm start: mcsf not run"]}
    assert WarmStartInfo("vllm", float("inf")).objective is None  # JSON has no infinity


def test_the_solve_json_holds_the_pipeline_keys_and_the_report_json_does_not():
    plan = SolvePlan(False, None, ModelEstimate("infermax", 100, 50, 4.0, "a model"), "skipped")
    lb = BoundResult(8.0, "work", "makespan")
    fb = Fallback("vllm", 12.0, Schedule.empty(), gap=(12.0 - 8.0) / 12.0)
    rep = _report(status="no_solution", objective=None, bound=None, gap=None, lower_bound=lb,
                  plan=plan, fallback=fb)
    d = rep.to_dict(include_schedule=False)
    # the answer is the fallback's 12 against the bound 8: (12 - 8) / 12
    assert d["gap_to_lower_bound"] == pytest.approx(1 / 3) == rep.gap_to_lower_bound
    assert d["budget"] == {"model_built": False, "note": "skipped",
                           "estimate": {"variables": 100, "constraints": 50, "seconds": 4.0}}
    assert d["fallback"] == fb.to_dict() and d["lower_bound"] == lb.to_dict()
    assert d["status"] == "no_solution" and type(d["status"]) is str
    model_only = rep.to_dict(include_schedule=False, pipeline=False)
    assert set(d) - set(model_only) == {"lower_bound", "gap_to_lower_bound", "budget", "fallback",
                                        "certified_gap", "above_optimal", "best_known"}
    # the best schedule the solve knows: the fallback's 12, (12 - 8) / 12 above the bound
    assert d["best_known"]["source"] == "vllm" and d["best_known"]["objective"] == 12.0
    assert d["best_known"]["certified_gap"] == pytest.approx(1 / 3)
    # the model's own figures: no answer, no bound, no restriction (the problem itself)
    assert model_only["model"] == {"formulation": "infermax", "restriction": None,
                                   "status": "no_solution", "objective": None, "bound": None,
                                   "gap": None}
    # the two named distances: (12 - 8) / 12 and (12 - 8) / 8
    assert d["certified_gap"] == pytest.approx(1 / 3) and d["above_optimal"] == pytest.approx(0.5)


def test_summaries_say_the_numbers():
    rep = _report(objective=12.0, bound=11.0, gap=1 / 12, lower_bound=BoundResult(10.0, "work",
                                                                                   "makespan"))
    text = str(rep)
    assert text == rep.summary()
    assert text.startswith("infermax / highs: optimal, makespan 12, bound 11, gap 8.33%")
    # 12 / 10 - 1 = 20%
    assert "certified lower bound: 10 (work); the answer is at most 20% above optimal" in text
    bound = BoundResult(10.0, "best", "total-latency", 0.01, {"work": 9.0, "srpt": 10.0})
    assert str(bound).splitlines() == [
        "total latency >= 10 (certified lower bound, method best, 0.01 s)",
        "rungs: work 9, srpt 10"]
    with pytest.raises(BoundError):
        BoundResult(float("nan"), "work", "makespan")


def test_summary_of_an_evaluation_feasible_and_not():
    inst = optsched.load("tiny")
    ev = optsched.evaluate(inst, optsched.simulate(inst, "vllm"))
    m = ev.metrics
    assert str(ev) == (f"feasible: {m['batches']} batches, makespan {m['makespan']:.6g}, total "
                       f"latency {m['total_latency']:.6g}, mean TTFT {m['mean_ttft']:.6g}, "
                       f"{m['evictions']} evictions")
    bad = optsched.evaluate(inst, Schedule.empty())  # nothing runs: the request is incomplete
    assert not bad.feasible and str(bad).startswith("infeasible: 1 violations (INCOMPLETE 1)")


def test_one_gap_formula_per_objective_and_per_bound():
    from optsched.comparison import gap
    from optsched.solve_types import relative_gap

    # per objective (the MIP gap): |110 - 100| / 110 = 1/11
    assert relative_gap(110.0, 100.0) == 10 / 110
    # per bound (compare's rows, the sweep report's ratio - 1): (110 - 100) / 100 = 0.1, signed:
    # a restricted optimum as reference can lie above a schedule, (90 - 100) / 100 = -0.1
    assert relative_gap(110.0, 100.0, per="bound") == 10 / 100
    assert relative_gap(90.0, 100.0, per="bound") == -10 / 100
    # zero reference: 0 when the value is 0 too, undefined otherwise
    assert relative_gap(0.0, 0.0, per="bound") == 0.0 and relative_gap(1.0, 0.0, per="bound") is None
    # missing or not finite: None either way
    for per in ("objective", "bound"):
        assert relative_gap(None, 1.0, per=per) is None
        assert relative_gap(math.inf, 1.0, per=per) is None and relative_gap(1.0, math.nan, per=per) is None
    # compare.gap is that formula, not a copy of it
    assert gap(110.0, 100.0) == relative_gap(110.0, 100.0, per="bound")
    assert gap(None, 100.0) is None


def test_relative_gap_names_a_bad_denominator():
    import pytest

    from optsched.solve_types import relative_gap

    with pytest.raises(ValueError, match="per must be"):
        relative_gap(1.0, 1.0, per="reference")
