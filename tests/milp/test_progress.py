"""Solver progress lines (optsched/milp/progress.py) in the user's units."""

from __future__ import annotations

import io

from optsched.milp.progress import HEARTBEAT_SECONDS, Progress


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
