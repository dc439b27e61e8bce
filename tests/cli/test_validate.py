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


@pytest.mark.parametrize("command", ["validate", "evaluate"])
def test_many_violations_print_a_summary_per_code_then_a_sample(tmp_path, capsys, command):
    """Before: every violation a line (thousands on a trace), no count per code. Forty
    batches of ``a`` (2-token prompt, 2 outputs, GOOD's M = C = 8): batch 0 breaks the token
    and KV limits, ``a`` finishes within it, so batches 1-39 give one ENTRY_AFTER_FINISH each
    for ``a`` and 36 for ``b`` after its own finish; ``c`` never runs."""
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"batches": [{"entries": [["a", 50], ["b", 1]]}] * 40}))
    rc, out, _ = run_cli(capsys, command, GOOD, f)
    assert rc == 1
    lines = out.splitlines()
    head = lines[0]
    total = int(head.split("infeasible: ")[1].split(" ")[0])
    counts = dict(part.rsplit(" x ", 1) for part in head.split(": ", 2)[2].split(", "))
    assert sum(map(int, counts.values())) == total > 20
    assert list(counts)[0] == "ENTRY_AFTER_FINISH"  # most frequent first
    listed = [ln for ln in lines[1:] if ln.startswith("  ") and "(" in ln and "..." not in ln]
    assert len(listed) == 20
    # every code shows up in the sample, the rare ones too
    assert {ln.split()[0] for ln in listed} == set(counts)
    assert f"... and {total - 20} more (--all lists them)" in out
    rc, out_all, _ = run_cli(capsys, command, GOOD, f, "--all")
    assert rc == 1 and "... and" not in out_all
    assert sum(1 for ln in out_all.splitlines() if ln.startswith("  ") and "):" in ln) == total
