"""``optsched validate`` and ``optsched evaluate``: feasibility verdicts and exit codes, a schedule
checked against the instance it was made for."""

from __future__ import annotations

import json

import pytest
from cli_helpers import other_arrivals, run_cli
from paths import GOOD

from optsched.schedule import Schedule


@pytest.mark.parametrize("command, suffix", [("validate", ".json"), ("evaluate", ".json"),
                                             ("validate", ".npz")])
def test_schedule_replayed_on_another_instance_is_flagged(tmp_path, capsys, command, suffix):
    """Before: a schedule file carried nothing tying it to its instance; replayed on one
    with other arrivals it was "feasible" with new metrics and no word."""
    sched = tmp_path / f"s{suffix}"
    rc, _, err = run_cli(capsys, "simulate", GOOD, "--policy", "fcfs", "-o", sched)
    assert rc == 0, err
    tag = Schedule.load(sched).instance_tag
    assert tag is not None and tag[0] == "arrivals-unit-3" and len(tag[1]) == 64
    rc, _, err = run_cli(capsys, command, GOOD, sched)
    assert "differ" not in err
    other = other_arrivals(tmp_path)
    rc, out, err = run_cli(capsys, command, other, sched, "--json")
    assert "warning:" in err and "differs" in err
    assert json.loads(out)["instance_check"]["matches"] is False


def test_an_infeasible_schedule_still_exits_1(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"batches": [{"entries": [["a", 2], ["b", 2], ["c", 2]]}]}))
    rc, _, err = run_cli(capsys, "validate", GOOD, f)
    assert rc == 1 and "Traceback" not in err
