"""GSA (optsched/policies/gsa.py), hand-worked, and the geometric base it shares with GBA."""

from __future__ import annotations

import pytest
from handworked import entries, theory_instance, total

from optsched.policies import PolicyError, get_spec, simulate


def test_gsa_restarts_by_hand():
    # r: I=1, O=3, M=10. Phase 0, slice 1: batch 0 prefills r (1 token, g = 1); the slice is
    # used, r is unfinished: batch 1 evicts it (eviction only: no time). Phase 1, slice
    # min(2, M - S + 1) with S = I + g = 2: batch 2 recomputes 2 tokens (g = 2), batch 3
    # decodes (g = 3, done at time 3).
    i = theory_instance([("r", 0.0, 1, 3)], M=10)
    s = simulate(i, "gsa")
    assert entries(s) == [[("r", 1)], [], [("r", 2)], [("r", 1)]]
    assert [b.evict for b in s] == [[], ["r"], [], []]
    assert total(i, s) == (3, 1)


def test_gba_and_gsa_geometric_base():
    # GBA with base 4 on the first hand instance: phase 0 (O <= 1): {a}, done at 1; phase 1
    # (O <= 4): c (2) and b (3) together (KV 2, 4, 3 <= 10), batches 1-3: c done at 3, b at
    # 4. Total 1 + 3 + 4 = 8 (base 2: 10, test_gba_phases_by_hand).
    i = theory_instance([("a", 0.0, 1, 1), ("b", 0.0, 1, 3), ("c", 0.0, 1, 2)], M=10)
    s = simulate(i, "gba", base=4.0)
    assert entries(s) == [[("a", 1)], [("b", 1), ("c", 1)], [("b", 1), ("c", 1)], [("b", 1)]]
    assert total(i, s) == (8, 0)
    # GSA with base 3 on r (I=1, O=3): slice 1 (prefill, g = 1), evicted, slice
    # min(ceil(3^1), M - S + 1) = 3 from S = 2: recompute 2 tokens (g = 2), decode (g = 3).
    # The same batches as base 2 here: the second slice is not used up either way.
    j = theory_instance([("r", 0.0, 1, 3)], M=10)
    assert entries(simulate(j, "gsa", base=3.0)) == [[("r", 1)], [], [("r", 2)], [("r", 1)]]
    for name in ("gba", "gsa"):
        with pytest.raises(PolicyError, match="base"):
            get_spec(name).make(base=1.0)
