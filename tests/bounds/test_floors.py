"""Per-request floors (optsched/bounds/floors.py, formulations/bounds.md section 2), by hand."""

from __future__ import annotations

import numpy as np
import pytest

from optsched.bounds import Floors, lower_bound
from optsched.bounds.floors import block_area
from optsched.cost import LinearCost, UnitCost
from optsched.instance import Instance, Limits, Request


# --- the pieces, by hand ---------------------------------------------------------------------
def test_block_area_matches_the_sum():
    rng = np.random.default_rng(0)
    for b in (1, 2, 3, 16):
        lo = rng.integers(1, 50, 30)
        hi = lo + rng.integers(-1, 40, 30)
        want = [sum(-(-x // b) * b for x in range(a, c + 1)) for a, c in zip(lo, hi)]
        assert block_area(lo, hi, b).tolist() == want


def test_unit_floors_by_hand():
    # I=5, O=3, C=2 (P=C): prefill needs ceil(5/2)=3 batches, then 2 more tokens -> 5 batches
    inst = Instance("h", Limits(kv_capacity=20, max_batch_tokens=2), UnitCost(),
                    (Request("a", 1.0, 5, 3),))
    f = Floors(inst)
    assert f.own_batches.tolist() == [5] and f.tokens.tolist() == [7]
    assert f.area.tolist() == [5 + 6 + 7]
    assert f.chain.tolist() == [5.0] and f.prefill_chain.tolist() == [3.0]
    assert lower_bound(inst, "makespan", "request").value == pytest.approx(6.0)


def test_linear_decode_or_refill_is_the_cheaper_step():
    # a cost model where a refill is cheaper than a decode (kdm large, prefill terms cheap):
    # step g (S = I + g) costs min(kdm (S - 1), kpr + k1 S) = min(S - 1, 2 + 0.1 S)
    cm = LinearCost(kdm=1.0, kpr=2.0, k1=0.1)
    inst = Instance("h", Limits(kv_capacity=50, max_batch_tokens=50), cm, (Request("a", 0.0, 1, 4),))
    # prefill: one chunk, kpr + k1 I = 2.1; steps S = 2, 3, 4 (decode entries also pay k1):
    # min(0.1 + 1, 2.2) + min(0.1 + 2, 2.3) + min(0.1 + 3, 2.4) = 1.1 + 2.1 + 2.4 = 5.6
    assert Floors(inst).entry_cost.tolist() == [pytest.approx(7.7)]
