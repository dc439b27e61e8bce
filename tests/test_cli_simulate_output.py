"""``optsched simulate -o``: the schedule's file format (issue 31: large schedules as .npz by
default, JSON on request)."""

from __future__ import annotations

from test_cli_bad_input import GOOD

from optsched.cli import main
from optsched.cli import simulate as sim_cli
from optsched.evaluation import evaluate
from optsched.instance import Instance
from optsched.schedule import Schedule


def _run(capsys, out):
    assert main(["simulate", str(GOOD), "--policy", "fcfs", "-o", str(out)]) == 0
    return capsys.readouterr()


def test_no_suffix_small_schedule_is_json(capsys, tmp_path):
    cap = _run(capsys, tmp_path / "s")
    assert (tmp_path / "s.json").is_file() and not (tmp_path / "s").exists()
    assert "has no suffix; writing" in cap.err and "s.json" in cap.out


def test_no_suffix_large_schedule_is_npz_and_evaluates_the_same(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(sim_cli, "JSON_SCHEDULE_LIMIT", 1)  # every schedule counts as large
    cap = _run(capsys, tmp_path / "s")
    assert (tmp_path / "s.npz").is_file() and "s.npz" in cap.err
    _run(capsys, tmp_path / "ref.json")  # an explicit suffix is kept, whatever the size
    inst = Instance.load(GOOD)
    a, b = Schedule.load(tmp_path / "s.npz"), Schedule.load(tmp_path / "ref.json")
    assert a == b and evaluate(inst, a).metrics == evaluate(inst, b).metrics
