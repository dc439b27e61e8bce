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
