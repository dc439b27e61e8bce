"""``sweep report`` on a hand-made dataset whose ratios are worked out by hand below."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pyarrow", reason="sweeps need pyarrow (pip install 'optsched[sweep]')")


def _row(key, inst, kind, method, status, objective=None, bound=None, gap=None, runtime=0.5):
    return {"sweep": "hand", "key": key, "instance": inst, "instance_hash": inst, "n_requests": 3,
            "seed": 0, "generator": "online-paper", "generator_params": json.dumps({"n": 3, "seed": 0}),
            "method": method, "method_kind": kind, "method_name": method, "method_params": "{}",
            "objective_kind": "total-latency", "status": status, "objective": objective, "bound": bound,
            "gap": gap, "feasible": status in ("feasible", "optimal"), "runtime": runtime,
            "finished_at": 1.0e9}


ROWS = [
    # instance A: proven optimum 100 -> reference 100 (optimum)
    _row("a1", "A", "formulation", "exact", "optimal", 100.0, 100.0, 0.0, runtime=2.0),
    _row("a2", "A", "policy", "p", "feasible", 110.0),          # ratio 1.10
    _row("a3", "A", "policy", "q", "feasible", 95.0),           # ratio 0.95: below the reference
    # instance B: bound method 50 beats the solver's bound 40 -> reference 50 (bound)
    _row("b1", "B", "bound", "lb", "bound", None, 50.0),
    _row("b2", "B", "formulation", "exact", "feasible", 60.0, 40.0, 1 / 3, runtime=4.0),  # 1.20
    _row("b3", "B", "policy", "p", "feasible", 55.0),           # ratio 1.10
    _row("b4", "B", "policy", "q", "failed"),
]


def test_report_ratios_and_files(tmp_path, capsys):
    from optsched.cli import main
    from optsched.sweep.results import ResultStore

    store = ResultStore(tmp_path / "out")
    for r in ROWS:
        store.write([r])
    code = main(["sweep", "report", str(tmp_path / "out"), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    s = json.loads(captured.out)  # exactly one JSON document
    assert s["references"] == {"optimum": 1, "bound": 1, "restricted optimum": 0,
                               "restricted bound": 0, "none": 0}
    m = {x["method"]: x for x in s["methods"]}
    assert m["p"]["ratio"]["mean"] == pytest.approx(1.10) and m["p"]["with_ratio"] == 2
    assert m["q"]["ratio"]["max"] == pytest.approx(0.95) and m["q"]["failed"] == 1
    assert m["exact"]["ratio"]["mean"] == pytest.approx((1.0 + 1.2) / 2)
    assert m["exact"]["at_reference"] == 1
    assert m["exact"]["solver_gap_mean"] == pytest.approx((0 + 1 / 3) / 2)
    assert m["lb"]["with_ratio"] == 0
    assert s["below_reference_count"] == 1 and s["below_reference"][0]["method"] == "q"
    assert s["failed_count"] == 1
    rep = tmp_path / "out" / "report"
    for f in ("report.md", "report.json", "ratio_cdf.png", "gap_bars.png", "runtime.png"):
        assert (rep / f).stat().st_size > 0, f
    md = (rep / "report.md").read_text()
    assert "| p | policy | 2 | 0 | 2 | 0 | 1.1 |" in md
    assert "q on A: 95 < optimum 100" in md
    assert len(list((tmp_path / "out" / "cells").glob("*.parquet"))) == 1  # compacted


def test_report_of_an_empty_directory_is_exit_2(tmp_path, capsys):
    from optsched.cli import main

    code = main(["sweep", "report", str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "no sweep results" in err
