"""The CP-SAT backend (optsched/milp/backends/cpsat.py): what it can solve and what it says when it cannot."""

from __future__ import annotations

import importlib.util
import json

import pytest

from optsched.cli import main

needs_cpsat = pytest.mark.skipif(importlib.util.find_spec("ortools") is None,
                                 reason="ortools (CP-SAT) not installed")


def test_cpsat_with_a_continuous_formulation_names_the_one_to_use(capsys):
    rc = main(["solve", "tiny", "--solver", "cpsat", "--time-limit", "20"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--formulation hindsight" in err[0]


@needs_cpsat
def test_cpsat_solves_hindsight_makespan(capsys):
    """The hindsight makespan model had one continuous column (``z``, eq. H5c); every bound
    on it is an integer slot, so it is integer now and CP-SAT proves tiny's makespan. The
    value is HiGHS's on the same model (both replayed by the evaluator)."""
    out = {}
    for solver in ("cpsat", "highs"):
        rc = main(["solve", "tiny", "--solver", solver, "--formulation", "hindsight",
                   "--time-limit", "30", "--json", "--quiet"])
        d = json.loads(capsys.readouterr().out)
        assert rc == 0 and d["status"] == "optimal", d.get("message")
        out[solver] = d["objective"]
    assert out["cpsat"] == out["highs"]
