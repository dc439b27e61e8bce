"""One-sentence verdicts (optsched/comparison/report.py) on stderr, in JSON and in the report."""

from __future__ import annotations

import json

from optsched.cli import main
from optsched.solve_types import above_optimum


def _verdict_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("verdict: ")]
    assert len(lines) == 1, err
    return lines[0][len("verdict: "):]


def test_interval_of_a_schedule_above_an_unproven_optimum():
    # OPT in [L, U] = [1.0, 1.6]; v = 2.0 is at least 2 / 1.6 - 1 = 25% and at most
    # 2 / 1.0 - 1 = 100% above it
    assert above_optimum(2.0, 1.0, 1.6, False) == "at least 25% and at most 100% above optimal"
    # proven OPT = 1.6: exactly 25%
    assert above_optimum(2.0, 1.6, 1.6, True) == "25% above optimal"


def test_solve_verdict_on_stderr_and_in_json(capsys):
    rc = main(["solve", "tiny", "--objective", "total-latency", "--time-limit", "30", "--json"])
    out, err = capsys.readouterr()
    d = json.loads(out)
    assert rc == 0 and d["status"] == "optimal"
    assert d["verdict"] == _verdict_line(err)
    assert d["verdict"].startswith("The optimal total latency is ") and "(proven)" in d["verdict"]


def test_solve_verdict_answers_a_hypothesis_with_no(capsys):
    """tiny's optimum equals vllm's total latency (the verdict above says vllm is 0% above
    it), so no eviction-free schedule is 50% faster than vllm."""
    main(["solve", "tiny", "--objective", "total-latency", "--time-limit", "30", "--json",
          "--no-evictions", "--at-most", "0.5", "--than", "vllm"])
    out, err = capsys.readouterr()
    d = json.loads(out)
    assert d["status"] == "infeasible"
    assert d["verdict"] == _verdict_line(err) == \
        "No: no eviction-free schedule is 50% faster than vllm on total latency."


def test_bound_verdict(capsys):
    main(["bound", "tiny", "--json"])
    out, err = capsys.readouterr()
    d = json.loads(out)
    assert d["verdict"] == _verdict_line(err)
    assert "at least" in d["verdict"] and f"method {d['method']}" in d["verdict"]


def test_compare_verdict_in_report_and_on_stderr(tmp_path, capsys):
    out = tmp_path / "rep"
    main(["compare", "tiny", "--policies", "vllm,sarathi", "--optimal", "--objective",
          "total-latency", "--no-gantt", "-o", str(out)])
    err = capsys.readouterr().err
    rep = json.loads((out / "report.json").read_text())
    assert rep["verdict"] == _verdict_line(err)
    assert "above optimal on total latency" in rep["verdict"]
    assert rep["verdict"] in (out / "report.md").read_text()


def _restricted_report(status: str, objective: float, model_bound: float, ws: float):
    from optsched.solve_types import BoundResult, SolveReport, WarmStartInfo

    return SolveReport(status=status, objective=objective, bound=5.0, gap=None, runtime=1.0,
                       solver="highs", formulation="hindsight", objective_kind="total-latency",
                       warm_start=WarmStartInfo("sarathi", ws), evaluation=None, schedule=None,
                       restricted=True, model_bound=model_bound,
                       model_restriction="unit time, no preemption",
                       lower_bound=BoundResult(5.0, "work", "total-latency"))


def test_restricted_model_figures_name_their_model():
    """A restricted model's optimum (10) is an upper bound on the problem's, whose certified
    bound is 5: the verdict says each figure's model once, and names the warm start (8) as
    the best schedule the solve knows (it preempts, which the model cannot represent).
    Figures: 10 / 5 - 1 = 100% and 8 / 5 - 1 = 60% above the certified bound."""
    from optsched.comparison.report import solve_verdict
    from optsched.instance import Instance, Limits, Request

    inst = Instance("one", Limits(kv_capacity=4, max_batch_tokens=4),
                    requests=(Request("a", 0.0, 1, 1),))
    rep = _restricted_report("optimal", 10.0, 10.0, 8.0)
    assert rep.model_answer()["gap"] == 0.0 and rep.model_answer()["bound"] == 10.0
    assert rep.best_known == ("warm start (sarathi)", 8.0)
    d = rep.to_dict()
    assert d["model"]["restriction"] == "unit time, no preemption"
    assert d["best_known"]["objective"] == 8.0 and abs(d["best_known"]["above_optimal"] - 0.6) < 1e-12
    v = solve_verdict(inst, "total-latency", rep, None)
    assert v.startswith("In the hindsight model (unit time, no preemption) the best schedule has "
                        "total latency 10")
    assert "proven optimal in that model" in v and "at most 100% above optimal" in v
    assert "A better schedule outside that model: the warm start (sarathi)" in v and "60%" in v
    # unproven in the model: its own gap (10 - 9) / 10 = 10%; a worse warm start is not named
    v = solve_verdict(inst, "total-latency", _restricted_report("feasible", 10.0, 9.0, 12.0), None)
    assert "within 10% of that model's optimum" in v and "outside" not in v
