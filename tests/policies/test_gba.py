"""GBA (optsched/policies/gba.py), hand-worked."""

from __future__ import annotations

from handworked import entries, theory_instance, total

from optsched.policies import simulate


def test_gba_phases_by_hand():
    # a: O=1, b: O=3, c: O=2, all I=1, M=10. Phase 0 (O <= 1): {a}, done at 1. Phase 1
    # (O <= 2): {c}, batches 1-2, done at 3. Phase 2 (O <= 4): {b}, batches 3-5, done at 6.
    # Total 1 + 3 + 6 = 10: the phases serialise what one group could run together.
    i = theory_instance([("a", 0.0, 1, 1), ("b", 0.0, 1, 3), ("c", 0.0, 1, 2)], M=10)
    s = simulate(i, "gba")
    assert entries(s) == [[("a", 1)], [("c", 1)], [("c", 1)]] + [[("b", 1)]] * 3
    assert total(i, s) == (10, 0)
