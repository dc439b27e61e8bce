"""The Gurobi backend (optsched/milp/backends/gurobi.py): its size-limited licence."""

from __future__ import annotations

import importlib.util
import json

import pytest

from optsched.cli import main

needs_gurobi = pytest.mark.skipif(importlib.util.find_spec("gurobipy") is None,
                                  reason="gurobipy not installed")


@needs_gurobi
def test_gurobi_size_limited_licence_falls_back_to_highs(tmp_path, capsys):
    """``solve --solver gurobi`` on a model above the pip licence's 2000 variables (16
    identical 8+8-token requests: 3032 columns, 3201 rows) was a solver failure (exit 3, no
    schedule) although HiGHS solves it in a second. Now HiGHS solves it, with one note on
    stderr and in the JSON notes; with a full licence Gurobi solves it and says nothing."""
    from optsched.milp import get_backend

    inst = tmp_path / "i.json"
    assert main(["generate", "fixed", "--n", "16", "--prompt", "8", "--output", "8",
                 "-o", str(inst)]) == 0
    capsys.readouterr()
    rc = main(["solve", str(inst), "--solver", "gurobi", "--time-limit", "30", "--json"])
    cap = capsys.readouterr()
    d = json.loads(cap.out)
    assert "Traceback" not in cap.err
    assert rc == 0 and d["status"] == "optimal", d.get("message")
    fell = [n for n in d["notes"] if "solved with highs instead" in n]
    if get_backend("gurobi").size_limit() is None:  # a full licence: Gurobi solves it
        assert d["solver"] == "gurobi" and not fell
        return
    assert d["solver"] == "highs" and len(fell) == 1
    assert "size-limited license (2000 variables, 2000 constraints)" in fell[0]
    err = [ln for ln in cap.err.splitlines() if "solved with highs instead" in ln]
    assert len(err) == 1 and err[0].startswith("optsched: note: gurobi: size-limited")
