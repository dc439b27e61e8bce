"""One-sentence verdicts (issue 30 item 3) and progress in user units (item 4)."""

from __future__ import annotations

import io
import json

from optsched.cli import main
from optsched.milp.progress import HEARTBEAT_SECONDS, Progress
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


def test_progress_lines_in_user_units_without_a_terminal():
    s = io.StringIO()
    p = Progress("highs", True, s, scale=2.0, unit="s", lines=True)
    p.update(incumbent=10.0, bound=4.0)  # model units: 10 / 2 = 5 s, 4 / 2 = 2 s
    p.update(bound=5.0)  # bound only, within the heartbeat: no line
    p.update(incumbent=8.0)  # a new incumbent: a line
    lines = s.getvalue().splitlines()
    assert len(lines) == 2 and "\r" not in s.getvalue()
    assert "incumbent 5 s" in lines[0] and "bound 2 s" in lines[0]
    assert "incumbent 4 s" in lines[1] and "bound 2.5 s" in lines[1]
    assert HEARTBEAT_SECONDS <= 5
