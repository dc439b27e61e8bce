"""CBC ending without a solution file (``PulpSolverError`` at the time limit, 3 of 5 runs
once) is reported with CBC's own last words and the best objective its log
showed, not as a bare PuLP exception. A stand-in ``cbc`` on PATH crashes the way CBC does
in coin-or/pulp#670 (a ``CoinError`` after an incumbent was found)."""

from __future__ import annotations

import importlib.util
import os
import stat

import numpy as np
import pytest

from optsched.milp import Model, SolveOptions, solve

pytestmark = pytest.mark.skipif(importlib.util.find_spec("pulp") is None,
                                reason="pulp not installed")

FAKE_CBC = """#!/bin/sh
echo "Welcome to the CBC MILP Solver"
echo "Version: 2.10.fake"
case "$*" in *-stop*) exit 0;; esac
echo "Cbc0012I Integer solution of 7 found by DiveCoefficient after 0 iterations and 0 nodes (0.00 seconds)"
echo "terminate called after throwing an instance of 'CoinError'"
exit 134
"""


def test_a_cbc_crash_is_reported_with_its_own_message(tmp_path, monkeypatch):
    from optsched.milp.backends.cbc import CbcBackend

    exe = tmp_path / "cbc"
    exe.write_text(FAKE_CBC)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setattr(CbcBackend, "_version", None)
    m = Model("crash")
    x = m.add_vars("x", (3,), ub=5, vtype="I")
    m.add_constraint(x[:], np.ones(3), lo=2, hi=10, name="cover")
    m.set_objective(x[:], np.array([3.0, 4.0, 5.0]))
    r = solve(m, "cbc", SolveOptions(time_limit=5, progress=False))
    assert r.status == "error" and r.values is None
    assert "CoinError" in r.message and "without writing a solution" in r.message
    # the incumbent CBC logged (objective 7, minimisation: the sign is kept) is in the notes
    assert any("best objective CBC reported before it stopped: 7" in n for n in r.notes)
