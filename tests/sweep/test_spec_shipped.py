"""The specs shipped under sweeps/ load and expand to the cells their comments announce; the
FAST variant of the online paper's experiment runs end to end with a report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sweep_helpers import cli, rows, run_json

pytest.importorskip("pyarrow", reason="sweeps need pyarrow (pip install 'optsched[sweep]')")

SWEEPS = Path(__file__).resolve().parents[2] / "sweeps"
#: spec -> cells: instances x methods, counted from each spec's grid by hand
EXPECTED = {
    "online-paper.toml": 2 * 3 * 200 * 4,      # 2 arrival models x n in {40,50,60} x 200 seeds x 4
    "online-paper-bounds.toml": 2 * 3 * 200 * 3,  # the same grid x (mcsf, fcfs, bound)
    "online-paper-fast.toml": 2 * 1 * 3 * 4,   # 2 arrival models x n = 6 x 3 seeds x 4 methods
    "infermax-mixes.toml": 4 * 2 * 5 * 10,     # 4 mixes x 2 capacities x 5 seeds x 10 methods
}


def test_every_shipped_spec_is_listed_here():
    assert sorted(p.name for p in SWEEPS.glob("*.toml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_shipped_spec_expands(name):
    from optsched.sweep import expand, load_spec

    cells = expand(load_spec(SWEEPS / name))
    assert len(cells) == EXPECTED[name]
    assert len({c.key for c in cells}) == len(cells)


@pytest.mark.slow
def test_fast_online_paper_runs_and_reports(tmp_path):
    out = tmp_path / "out"
    s = run_json("sweep", "run", str(SWEEPS / "online-paper-fast.toml"), "-o", str(out), "--workers", "2")
    assert (s["cells"], s["computed"], s["failed"]) == (24, 24, 0)
    rs = rows(out)
    assert {r["status"] for r in rs if r["method_kind"] == "formulation"} == {"optimal"}
    r = cli("sweep", "report", str(out), "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    m = {x["method"]: x for x in rep["methods"]}
    # the hindsight IP solves a restricted model (no preemption, unit slots): its optimum is
    # labelled as such, never as the optimum of docs/semantics.md
    assert rep["references"]["restricted optimum"] == 6 and rep["references"]["optimum"] == 0
    # MC-SF's schedules belong to the hindsight IP's model, so the IP's optimum bounds them
    assert m["mcsf"]["below_reference"] == 0 and m["mcsf"]["ratio"]["mean"] >= 1
    # the certified bound is below every schedule, the restricted IP's optimum included
    bounds = {r["instance_hash"]: r["bound"] for r in rs if r["method_kind"] == "bound"}
    assert len(bounds) == 6
    for r in rs:
        if r["objective"] is not None:
            assert bounds[r["instance_hash"]] <= r["objective"] + 1e-9, r
