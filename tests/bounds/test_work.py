"""The ``work`` rung (optsched/bounds/work.py), by hand."""

from __future__ import annotations

import pytest

from optsched.bounds import lower_bound
from optsched.cost import UnitCost
from optsched.instance import Instance, Limits, Request


def test_kv_area_forces_batches():
    # 4 requests I=3, O=2 (area 3+4 = 7 each) in M = 8: one batch holds one generating request
    # at its second token (4 <= 8, two would be 8 <= 8: fine) -- area 28 / 8 -> >= 4 batches;
    # tokens 4*4 = 16 over C = 100 -> 1; own batches 2. Unit time: makespan >= 4.
    reqs = tuple(Request(f"r{i}", 0.0, 3, 2) for i in range(4))
    inst = Instance("h", Limits(kv_capacity=8, max_batch_tokens=100), UnitCost(), reqs)
    assert lower_bound(inst, "makespan", "work").value == pytest.approx(4.0)
