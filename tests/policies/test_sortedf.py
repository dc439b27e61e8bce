"""Sorted-F (optsched/policies/sortedf.py), hand-worked."""

from __future__ import annotations

from handworked import entries, theory_instance, total

from optsched.policies import simulate
from optsched.policies.sortedf import best_prefix


def test_sorted_f_runs_the_best_prefix_by_hand():
    # Same instance: packed by O: a (1), c (2), b (3) -- KV at offsets 0, 1, 2 is 3, 4, 3
    # <= 10. F = max O / size: 1/1, 2/2, 3/3, ties to the larger: all three together.
    # a done at 1, c at 2, b at 3: total 6 (the optimum: every request at its own O).
    i = theory_instance([("a", 0.0, 1, 1), ("b", 0.0, 1, 3), ("c", 0.0, 1, 2)], M=10)
    s = simulate(i, "sorted-f")
    assert entries(s) == [[("a", 1), ("b", 1), ("c", 1)], [("b", 1), ("c", 1)], [("b", 1)]]
    assert total(i, s) == (6, 0)
    # a: O=1, b: O=10: F({a}) = 1 < F({a, b}) = 10 / 2 = 5, so a runs alone (done at 1) and
    # b after it (batches 1-10, done at 11): 12, one more than running both at once (1 + 10).
    i = theory_instance([("a", 0.0, 1, 1), ("b", 0.0, 1, 10)], M=20)
    s = simulate(i, "sorted-f")
    assert entries(s) == [[("a", 1)]] + [[("b", 1)]] * 10
    assert total(i, s) == (12, 0)


def test_best_prefix_by_hand():
    assert best_prefix([1, 2, 3]) == 3  # F = 1, 1, 1: ties to the longer
    assert best_prefix([1, 10]) == 1  # F = 1, 5
    assert best_prefix([4, 4, 5, 40]) == 3  # F = 4, 2, 5/3, 10
