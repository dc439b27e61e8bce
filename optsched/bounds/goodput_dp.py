"""B12b's weighted-interval DP (``formulations/bounds.md`` B12b), vectorised over the left
endpoints so that a grid of every release and deadline is affordable.

For intervals ``[g_a, g_b]`` of a grid, ``k(a, b)`` is the fewest requests whose window lies
inside the interval to drop so the rest's work fits in ``g_b - g_a`` (Horn's necessary
condition), largest works first (:func:`optsched.bounds.goodput.interval_misses`); misses
add over intervals that overlap at most in an endpoint: ``best[b] = max(best[b - 1],
max_{a < b} best[a] + k(a, b))``. With the requests sorted by work, largest first, the
largest-first removal of the requests inside ``[g_a, g_b]`` is a running sum over that order
restricted to them, so every ``k(a, b)`` of one ``b`` is one cumulative sum of a
``b x n`` matrix: ``O(P^2 n)`` arithmetic in numpy instead of ``O(P^2)`` Python calls.
"""

from __future__ import annotations

import numpy as np

#: quantiles of the releases and deadlines always in the grid (the grid of B12 before the DP
#: was vectorised), so a finer grid never forces fewer misses than that one
BASE_GRID = 96
#: arithmetic budget ``P^2 n`` of one DP: the grid has at most ``sqrt(WORK / n)`` points
#: (``P ~ 600`` at 400 requests, ``~350`` at 1,200); any grid is valid, a finer one is tighter
WORK = 1.5e8


def grid_points(r: np.ndarray, d: np.ndarray, grid: int | None = None) -> np.ndarray:
    """Every release and deadline when they fit the budget (``grid`` points at most when
    given, else ``max(sqrt(WORK / n), BASE_GRID)``); else their :data:`BASE_GRID` quantiles
    joined with as many more quantiles as fit, so the grid contains the base one."""
    pts = np.unique(np.concatenate([r, d]))
    cap = max(int(np.sqrt(WORK / max(r.size, 1))), BASE_GRID) if grid is None else max(grid, 2)
    if pts.size <= cap:
        return pts
    base = np.quantile(pts, np.linspace(0, 1, min(BASE_GRID, cap)))
    more = np.quantile(pts, np.linspace(0, 1, max(cap - BASE_GRID, 2)))
    return np.unique(np.concatenate([base, more]))


def interval_dp(r: np.ndarray, d: np.ndarray, w: np.ndarray, pts: np.ndarray) -> int:
    """Most misses forced by a family of intervals on ``pts`` meeting at most in endpoints
    (module docstring); windows ``[r_i, d_i]`` of positive length, works ``w_i``."""
    order = np.argsort(-w, kind="stable")
    r, d, w = r[order], d[order], w[order]
    after = r[None, :] >= pts[:, None]  # request i's window starts at or after g_a
    best = np.zeros(pts.size, dtype=np.int64)
    for b in range(1, pts.size):
        inside = after[:b] & (d <= pts[b])[None, :]
        top = int(best[b - 1])
        if inside[0].any():
            cum = np.cumsum(np.where(inside, w, 0.0), axis=1)
            excess = cum[:, -1] - (pts[b] - pts[:b]) * (1 + 1e-12)
            first = np.argmax(cum >= excess[:, None], axis=1)
            count = np.cumsum(inside, axis=1)[np.arange(b), first]
            k = np.where(excess > 0, count, 0)
            top = max(top, int((best[:b] + k).max()))
        best[b] = top
    return int(best[-1])


__all__ = ["BASE_GRID", "WORK", "grid_points", "interval_dp"]
