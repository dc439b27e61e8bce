"""The ground floor of the hindsight formulation (``formulations/hindsight.md``): slot
arithmetic, the area floors on completion times (H9a) and the separation intervals (H20),
shared by the start-slot heuristics (:mod:`.heuristics`), the model (:mod:`.model`) and its
deadline floors (:mod:`.deadline`), so that none imports another for them. Pure
functions of the instance.
"""

from __future__ import annotations

import numpy as np

from ...instance import Instance


def earliest_slots(instance: Instance) -> np.ndarray:
    """``e_i = ceil(a_i)`` (H7): slots are integer; a fractional arrival waits for the next slot."""
    return np.ceil(instance.arrival - 1e-9).astype(np.int64)


def footprint(instance: Instance, kv: np.ndarray) -> np.ndarray:
    """KV tokens charged for ``kv`` cached tokens (whole blocks)."""
    return instance.limits.kv_footprint(kv)


def area_lower_bounds(instance: Instance) -> np.ndarray:
    """``L_k``, a lower bound on the k-th smallest completion time, k = 1..n (H9a).

    By the k-th completion, k requests have finished; they hold at least the k smallest memory
    areas ``A_i = sum_{k<O_i} fp(I_i + k)``, and one slot holds at most ``M``; one of them needs
    at least the k-th smallest ``O`` slots; the earliest arrival is a floor.
    """
    I, O = instance.prompt, instance.output
    if instance.n == 0:
        return np.zeros(0)
    area = np.array([footprint(instance, I[i] + np.arange(O[i])).sum() for i in range(instance.n)])
    M = instance.limits.kv_capacity
    e0 = float(earliest_slots(instance).min())
    by_area = np.ceil(np.cumsum(np.sort(area)) / M)
    by_len = np.sort(O) + e0
    return np.maximum(by_area + e0, by_len)


def separation_intervals(uI: np.ndarray, uO: np.ndarray, M: int) -> tuple[np.ndarray, np.ndarray]:
    """(H20b): per unit, ``(A, B)`` such that the doubled-time intervals ``[2C - A, 2C + B)``
    of any two requests in a feasible schedule do not overlap (``C`` = completion slot).

    With ``Q = I + O - 1`` (the KV a request holds in its last slot, before block rounding),
    ``A = 2Q - M`` and ``B = 2Q - M - 2 max(0, Q + Imax - 1 - M)``; a unit takes part iff
    ``A + B > 0`` (roughly ``Q > M/2``).
    """
    Q = (uI + uO - 1).astype(np.int64)
    imax = int(uI.max()) if uI.size else 1
    A = 2 * Q - M
    B = 2 * Q - M - 2 * np.maximum(0, Q + imax - 1 - M)
    return A, B


def separation_cover(start: np.ndarray, unit: np.ndarray, prompt: np.ndarray,
                     output: np.ndarray, count: np.ndarray, M: int
                     ) -> tuple[np.ndarray, np.ndarray, int]:
    """(H20c) the rows "placements covering a maximal point of the separation interval graph
    sum to at most 1" over columns that start ``unit[c]`` at slot ``start[c]``: per nonzero its
    row and its column, and the number of rows. Rows whose placements (counted ``count`` per
    unit) cannot sum above 1 are left out."""
    A, B = separation_intervals(prompt, output, M)
    cols = np.flatnonzero(((A + B) > 0)[unit])
    if cols.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), 0
    cu = unit[cols]
    C2 = 2 * (start[cols] + output[cu])
    lo, hi = C2 - A[cu], C2 + B[cu]
    X = np.unique(lo)
    # a row at left endpoint X_k is maximal iff some interval ends in (X_k, X_{k+1}]
    ends = np.sort(hi)
    nxt = np.append(X[1:], np.iinfo(np.int64).max)
    maximal = np.searchsorted(ends, nxt, "right") > np.searchsorted(ends, X, "right")
    first = np.searchsorted(X, lo, "left")  # X[first] == lo: every interval covers its own start
    last = np.searchsorted(X, hi, "left")  # X indices first..last-1 are covered
    cnt = last - first
    rep = np.repeat(np.arange(cols.size), cnt)
    k = np.arange(rep.size) - np.repeat(np.cumsum(cnt) - cnt, cnt) + first[rep]
    keep = maximal[k]
    rep, k = rep[keep], k[keep]
    # a row binds only if its placements could sum above 1
    cap = np.zeros(X.size)
    np.add.at(cap, k, count[cu[rep]].astype(float))
    rows = np.flatnonzero(cap > 1)
    rmap = np.full(X.size, -1)
    rmap[rows] = np.arange(rows.size)
    sel = rmap[k] >= 0
    return rmap[k[sel]], cols[rep[sel]], int(rows.size)


__all__ = ["area_lower_bounds", "earliest_slots", "footprint", "separation_cover",
           "separation_intervals"]
