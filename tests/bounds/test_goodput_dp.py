"""B12b's vectorised interval DP (``optsched/bounds/goodput_dp.py``): the same counts as the
interval-by-interval DP on every grid, and a finer grid never forces fewer misses than the
96-quantile grid B12 used before."""

from __future__ import annotations

import numpy as np
import pytest

from optsched.bounds.goodput import interval_misses
from optsched.bounds.goodput_dp import BASE_GRID, grid_points, interval_dp


def _loop_dp(r, d, w, pts):
    """``best[b] = max(best[b-1], max_a best[a] + k(a, b))`` one interval at a time."""
    best = np.zeros(pts.size, dtype=np.int64)
    for b in range(1, pts.size):
        best[b] = max([best[b - 1]] + [best[a] + interval_misses(r, d, w, pts[a], pts[b])
                                       for a in range(b)])
    return int(best[-1])


@pytest.mark.parametrize("seed", range(40))
def test_vectorised_dp_equals_the_interval_loop(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 30))
    r = rng.integers(0, 10, n).astype(float)
    d = r + rng.integers(1, 5, n)
    w = rng.choice([0.5, 1.0, 1.5, 2.0, 3.0], n)
    pts = np.unique(np.concatenate([r, d]))
    assert interval_dp(r, d, w, pts) == _loop_dp(r, d, w, pts)


def test_hand_case_two_bursts():
    # windows [0, 1] x 3 and [10, 11] x 3, unit works: each interval of length 1 holds 3
    # units, so 2 of each burst miss; the interval [0, 11] (11 units of time) forces none
    r = np.array([0.0, 0, 0, 10, 10, 10])
    assert interval_dp(r, r + 1, np.ones(6), np.array([0.0, 1, 10, 11])) == 4


@pytest.mark.parametrize("seed", range(5))
def test_finer_grid_contains_the_base_grid(seed):
    rng = np.random.default_rng(50 + seed)
    n = 600
    r = np.sort(rng.uniform(0, 100, n))
    d = r + rng.uniform(0.1, 3, n)
    w = rng.uniform(0.01, 0.3, n)
    base = np.unique(np.quantile(np.unique(np.concatenate([r, d])),
                                 np.linspace(0, 1, BASE_GRID)))
    fine = grid_points(r, d, 300)
    assert np.isin(base, fine).all()
    assert interval_dp(r, d, w, fine) >= interval_dp(r, d, w, base)
