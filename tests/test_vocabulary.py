"""Issue 27 item 5: one number-for-JSON helper and one normalised-latency function, used by
every caller (their values are checked by hand here)."""

import math

import numpy as np

from optsched.metrics.serving import normalized_latency
from optsched.solve_types import finite_or_none


def test_finite_or_none_is_null_for_missing_and_non_finite():
    assert finite_or_none(None) is None
    assert finite_or_none(math.nan) is None
    assert finite_or_none(-math.inf) is None
    assert finite_or_none(np.float32(1.5)) == 1.5 and type(finite_or_none(np.int64(3))) is float


def test_normalized_latency_over_finished_requests():
    latency = np.array([4.0, math.inf, 9.0])
    output = np.array([2, 5, 3])
    # finished: requests 0 and 2 -> (4/2 + 9/3) / 2 = (2 + 3) / 2 = 2.5
    assert normalized_latency(latency, output) == 2.5
    # one request never finished: undefined when every request must finish (hybrid RT metric)
    assert normalized_latency(latency, output, all_finished=True) is None
    assert normalized_latency(np.array([math.inf]), np.array([1])) is None
    # all finished: 6/3 = 2
    assert normalized_latency(np.array([6.0]), np.array([3]), all_finished=True) == 2.0


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
