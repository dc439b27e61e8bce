"""The ``mbt`` rung (optsched/bounds/mbt.py, formulations/bounds.md B9), by hand."""

from __future__ import annotations

import numpy as np
import pytest

from optsched.bounds import lower_bound
from optsched.cost import UnitCost
from optsched.instance import Instance, Limits, Request


def test_mbt_hand_worked():
    # one request at 0, unit time, I = 1, O = 3, M = C = 10 (10 entries per batch): the
    # optimum is 3 batches. Mix "count" (0, 0, 1): prefill work Wp = 1/10, each of the two
    # decode steps 1/10, w = 0.3; alone, MB = w / 2 = 0.15. Chain floors c_1 = c_2 = 1:
    # D = 2, tail_1 = 1, tail_2 = 0. T = [Wp (D + Wp/2) + 0.1 (1 + 0.05) + 0.1 (0 + 0.05)] / w
    # = (0.205 + 0.105 + 0.005) / 0.3 = 1.05; bound 0.15 + 1.05 = 1.2 (the "tokens" mix gives
    # the same, "kv" (KV 1, 2, 3 over 10) gives 0.3 + 0.47 / 0.6 = 1.0833).
    inst = Instance("h", Limits(kv_capacity=10, max_batch_tokens=10), UnitCost(),
                    (Request("a", 0.0, 1, 3),))
    assert lower_bound(inst, "total-latency", "mbt").value == pytest.approx(1.2)


def test_pswf_mean_busy_by_hand():
    from optsched.bounds.mbt import pswf_mean_busy_sum

    # (release, work) = (0, 3), (1, 1): smallest work first preempts at 1: job 1 runs [0, 1)
    # and [2, 4), job 2 runs [1, 2). MB_1 = (0.5 * 1 + 3 * 2) / 3 = 6.5 / 3, MB_2 = 1.5.
    got = pswf_mean_busy_sum(np.array([0.0, 1.0]), np.array([3.0, 1.0]))
    assert got == pytest.approx(6.5 / 3 + 1.5)
