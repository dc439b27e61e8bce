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
