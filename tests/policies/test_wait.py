"""WAIT (optsched/policies/wait.py), hand-worked."""

from __future__ import annotations

import numpy as np
import pytest
from handworked import entries, theory_instance, total

from optsched.policies import simulate
from optsched.policies.wait import fluid_thresholds, length_types


def test_wait_holds_running_requests_for_the_threshold_by_hand():
    # types=1, every request I=1, O=2: volume V = 2 + 1 = 3, count 3, M = 6: the fluid
    # threshold n = floor(6 * 3 / (3 * 3)) = 2 per batch, budget L = n * ceil(mean O) = 4.
    assert fluid_thresholds(np.ones(3, np.int64), np.full(3, 2), np.zeros(3, np.int64), 6) \
        == (pytest.approx([2]), pytest.approx([4]))
    # t=0: a, b wait (2 >= min(2, 4 - 0)): admitted (MC-SF's test: KV 2 then 4 <= 6), batch 0.
    # t=1: min(2, 4 - 2) = 2 but nobody waits: no batch -- a and b wait too -- until c
    # arrives at 5 (the last arrival: thresholds off). Batch at 5: a, b decode (done at 6),
    # c admitted; batch at 6: c decodes (done at 7). Total 6 + 6 + 2 = 14 (MC-SF: 6).
    i = theory_instance([("a", 0.0, 1, 2), ("b", 0.0, 1, 2), ("c", 5.0, 1, 2)], M=6)
    s = simulate(i, "wait", types=1)
    assert entries(s) == [[("a", 1), ("b", 1)], [("a", 1), ("b", 1), ("c", 1)], [("c", 1)]]
    assert total(i, s) == (14, 0)
    assert total(i, simulate(i, "mcsf")) == (6, 0)


def test_length_types_by_hand():
    # the median of 1, 2, 3, 10 is 2.5: two bins {1, 2}, {3, 10}
    assert length_types(np.array([1, 2, 3, 10]), 2).tolist() == [0, 0, 1, 1]
    assert length_types(np.array([5, 5, 5]), 3).tolist() == [0, 0, 0]  # equal edges merge
