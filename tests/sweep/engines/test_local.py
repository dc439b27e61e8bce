"""The local engine on a tiny spec: one row per cell, values equal to the library's own
answers, reruns compute nothing, failed cells are recorded and recomputed."""

from __future__ import annotations

import json

import pytest
from sweep_helpers import TINY, rows, run_json, write_spec

pytest.importorskip("pyarrow", reason="sweeps need pyarrow (pip install 'optsched[sweep]')")


def test_local_tiny_spec_matches_the_library(tmp_path):
    from optsched.evaluation import evaluate
    from optsched.policies import simulate
    from optsched.workloads.generators import online_paper_random

    spec, out = write_spec(tmp_path), tmp_path / "out"
    s = run_json("sweep", "run", str(spec), "-o", str(out), "--workers", "2")
    assert (s["cells"], s["computed"], s["failed"], s["already_done"]) == (12, 12, 0, 0)
    rs = rows(out)
    assert len(rs) == 12 and len({r["key"] for r in rs}) == 12
    for r in rs:
        inst = online_paper_random(r["n_requests"], r["seed"])
        assert r["instance"] == inst.name and json.loads(r["generator_params"])["seed"] == r["seed"]
        if r["method_kind"] == "policy":  # the cell's value is simulate + evaluate's
            ev = evaluate(inst, simulate(inst, r["method_name"]))
            assert r["status"] == "feasible" and r["feasible"]
            assert r["objective"] == ev.objective("total-latency")
        else:
            assert r["status"] == "optimal", r
            assert r["bound"] == r["objective"] and r["gap"] == 0
            assert r["solver_version"].startswith("highs ")
    # MC-SF's schedule is one of the hindsight model's schedules: the optimum is at most it
    opt = {r["instance_hash"]: r["objective"] for r in rs if r["method_kind"] == "formulation"}
    for r in rs:
        if r["method_name"] == "mcsf":
            assert opt[r["instance_hash"]] <= r["objective"]
    again = run_json("sweep", "run", str(spec), "-o", str(out))
    assert (again["computed"], again["already_done"]) == (0, 12)
    assert len(rows(out)) == 12
    files = list((out / "cells").glob("*.parquet"))
    assert len(files) == 1  # compacted


def test_failed_cells_are_recorded_and_retried(tmp_path):
    # hindsight's variant parameter only knows a few names: the cells fail at run time
    text = TINY + '\n[[methods]]\nformulation = "hindsight"\nlabel = "bad"\nparams = {variant = "nope"}\n'
    spec, out = write_spec(tmp_path, text), tmp_path / "out"
    s = run_json("sweep", "run", str(spec), "-o", str(out))
    assert (s["cells"], s["computed"], s["failed"]) == (16, 16, 4)
    bad = [r for r in rows(out) if r["method"] == "bad"]
    assert len(bad) == 4
    assert all(r["status"] == "failed" and "variant" in r["error"] for r in bad)
    ok = [r for r in rows(out) if r["method"] != "bad"]
    assert all(r["status"] in ("feasible", "optimal") for r in ok)
    again = run_json("sweep", "run", str(spec), "-o", str(out))
    assert (again["computed"], again["already_done"], again["failed"]) == (4, 12, 4)
    assert len(rows(out)) == 16


def test_dry_run_counts(tmp_path):
    spec = write_spec(tmp_path)
    d = run_json("sweep", "run", str(spec), "-o", str(tmp_path / "out"), "--dry-run")
    assert (d["cells"], d["to_compute"], d["instances"], d["methods"]) == (12, 12, 4, 3)


def test_bound_methods_resolve_through_the_bound_ladder(tmp_path):
    import importlib
    import importlib.util

    if importlib.util.find_spec("optsched.bounds") is None:
        pytest.skip("optsched.bounds (the bound ladder) is not in this optsched yet")
    from optsched.workloads.generators import online_paper_random

    lower_bound = importlib.import_module("optsched.bounds").lower_bound

    text = TINY + '\n[[methods]]\nbound = "combinatorial"\n'
    out = tmp_path / "out"
    s = run_json("sweep", "run", str(write_spec(tmp_path, text)), "-o", str(out))
    assert s["failed"] == 0
    rs = rows(out)
    for b in (r for r in rs if r["method_kind"] == "bound"):
        inst = online_paper_random(b["n_requests"], b["seed"])
        assert b["status"] == "bound" and b["objective"] is None
        assert b["bound"] == lower_bound(inst, "total-latency", "combinatorial").value
        for r in rs:  # a certified bound is below every schedule of the same instance
            if r["instance_hash"] == b["instance_hash"] and r["objective"] is not None:
                assert b["bound"] <= r["objective"]


SERIAL_ENGINE = '''
from optsched.sweep.engine import Outcome


class SerialEngine:
    """Every cell in this process, one after the other: the whole Engine protocol."""

    name = "serial"

    def __init__(self, workers=None, address=None):
        pass

    def run(self, fn, items):
        for item in items:
            yield Outcome(item, fn(item))

    def close(self):
        pass
'''


def test_an_engine_is_one_file(tmp_path):
    """A class in a file of one's own, given as --engine FILE.py:Class, runs a sweep (the
    registry is the one plug-in mechanism); its results equal the local pool's."""
    from sweep_helpers import stable

    (tmp_path / "my_engine.py").write_text(SERIAL_ENGINE)
    spec = write_spec(tmp_path, TINY.replace("n = [4, 5]", "n = 4"))
    a = run_json("sweep", "run", str(spec), "-o", str(tmp_path / "a"), "--engine",
                 f"{tmp_path / 'my_engine.py'}:SerialEngine")
    b = run_json("sweep", "run", str(spec), "-o", str(tmp_path / "b"), "--workers", "2")
    assert a["computed"] == b["computed"] == 6 and a["failed"] == 0
    ra = rows(tmp_path / "a")
    assert {r["engine"] for r in ra} == {"serial"}
    assert stable(ra) == stable(rows(tmp_path / "b"))
