"""The solve vocabulary (optsched/solve_types.py): the one gap formula and its errors."""

from __future__ import annotations

import math


def test_one_gap_formula_per_objective_and_per_bound():
    from optsched.comparison import gap
    from optsched.solve_types import relative_gap

    # per objective (the MIP gap): |110 - 100| / 110 = 1/11
    assert relative_gap(110.0, 100.0) == 10 / 110
    # per bound (compare's rows, the sweep report's ratio - 1): (110 - 100) / 100 = 0.1, signed:
    # a restricted optimum as reference can lie above a schedule, (90 - 100) / 100 = -0.1
    assert relative_gap(110.0, 100.0, per="bound") == 10 / 100
    assert relative_gap(90.0, 100.0, per="bound") == -10 / 100
    # zero reference: 0 when the value is 0 too, undefined otherwise
    assert relative_gap(0.0, 0.0, per="bound") == 0.0 and relative_gap(1.0, 0.0, per="bound") is None
    # missing or not finite: None either way
    for per in ("objective", "bound"):
        assert relative_gap(None, 1.0, per=per) is None
        assert relative_gap(math.inf, 1.0, per=per) is None and relative_gap(1.0, math.nan, per=per) is None
    # compare.gap is that formula, not a copy of it
    assert gap(110.0, 100.0) == relative_gap(110.0, 100.0, per="bound")
    assert gap(None, 100.0) is None


def test_relative_gap_names_a_bad_denominator():
    import pytest

    from optsched.solve_types import relative_gap

    with pytest.raises(ValueError, match="per must be"):
        relative_gap(1.0, 1.0, per="reference")
