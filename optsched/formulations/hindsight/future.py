"""Future feasibility of a running set (``formulations/hindsight.md`` (H23)): the kernels.

A request running in slot ``tau`` with age ``a = tau - t`` holds ``m = I + a`` KV tokens
(before block rounding) and has ``r = O - a`` slots left, ``tau`` included; ``(m, r)`` is its
*type*. Every request of the running set ``R(tau)`` still runs in slot ``tau + d`` for
``d < r`` and then holds ``fp(m + d) >= m + d``, so (H23a)

    sum_{i in R(tau), r_i > d} (m_i + d) <= M        for every d >= 0.

(H23b) A multiset of types, sorted by ``r`` descending (``r_1 >= ... >= r_k``), satisfies
(H23a) -- is *future-feasible*, FF -- iff ``sum_{l <= j} m_l + j (r_j - 1) <= M`` for every
``j``: between two departures the load only grows, so it peaks in the last slot
``d = r_j - 1`` of the shortest remaining member; with ties in ``r`` the last of them
checks the full count. A dynamic program over the sorted types with state (count, sum of
``m``) enumerates exactly the FF multisets; :func:`ff_best` is its maximum weight.

(H23c) For weights ``w >= 0`` on types and ``rho = max_{FF c} w(c)``, the row
``sum_{items (i, t) running in tau} w(type) x[i, t] <= rho`` is valid in every slot: an
integer schedule puts one FF multiset in each slot. :func:`cover_cg` finds, for the
fractional type loads ``y`` of one slot, the fractional cover number by FF multisets and the
dual weights ``w`` with ``w.y`` equal to it; when it exceeds 1 the row cuts ``y`` off.

These are numba kernels (plain Python without numba, slow but the same numbers). Types are
always passed sorted by ``r`` descending.
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:
    from numba import njit
except ImportError:  # pragma: no cover - only without numba
    def njit(*args: Any, **kwargs: Any) -> Any:  # type: ignore[no-redef]
        def wrap(f: Any) -> Any:
            return f
        return wrap

#: "no FF multiset" (a value below every weight sum)
NEG = -1e18
_EPS = 1e-9


@njit(cache=True)
def _count_bound(m, M):
    """The most members an FF multiset of these types can have (each holds ``m >= 1``)."""
    mmin = M
    for j in range(m.size):
        if m[j] < mmin:
            mmin = m[j]
    return M // max(1, mmin)


@njit(cache=True)
def ff_best(m, r, w, M, force):
    """(H23b) ``max w(c)`` over FF multisets ``c`` (any multiplicity; types sorted by ``r``
    descending); with ``force >= 0`` only multisets holding type ``force`` at least once, that
    copy's weight not counted. :data:`NEG` when there is none."""
    K = _count_bound(m, M)
    cur = np.full((K + 1, M + 1), NEG)
    cur[0, 0] = 0.0
    for j in range(m.size):
        mj = m[j]
        rj = r[j]
        if j == force:  # one mandatory copy of weight 0
            nxt = np.full((K + 1, M + 1), NEG)
            for k in range(K):
                for s in range(0, M - (k + 1) * (rj - 1) - mj + 1):
                    v = cur[k, s]
                    if v != NEG and v > nxt[k + 1, s + mj]:
                        nxt[k + 1, s + mj] = v
            cur = nxt
        if w[j] <= 0.0:
            continue
        for k in range(K):  # k increasing: a state may take several copies of type j
            for s in range(0, M - (k + 1) * (rj - 1) - mj + 1):
                v = cur[k, s]
                if v != NEG and v + w[j] > cur[k + 1, s + mj]:
                    cur[k + 1, s + mj] = v + w[j]
    return cur.max()


@njit(cache=True)
def ff_argmax(m, r, w, M):
    """:func:`ff_best` without forcing, and a maximising multiset (copies per type)."""
    n = m.size
    K = _count_bound(m, M)
    V = np.full((n + 1, K + 1, M + 1), NEG)
    V[0, 0, 0] = 0.0
    for j in range(n):
        V[j + 1] = V[j]
        if w[j] <= 0.0:
            continue
        mj = m[j]
        for k in range(K):
            for s in range(0, M - (k + 1) * (r[j] - 1) - mj + 1):
                v = V[j + 1, k, s]
                if v != NEG and v + w[j] > V[j + 1, k + 1, s + mj]:
                    V[j + 1, k + 1, s + mj] = v + w[j]
    best = NEG
    bk = 0
    bs = 0
    for k in range(K + 1):
        for s in range(M + 1):
            if V[n, k, s] > best:
                best = V[n, k, s]
                bk = k
                bs = s
    mult = np.zeros(n, np.int64)
    k = bk
    s = bs
    j = n - 1
    while j >= 0:
        if V[j + 1, k, s] == V[j, k, s]:
            j -= 1
            continue
        mult[j] += 1
        s -= m[j]
        k -= 1
    return best, mult


@njit(cache=True)
def _suffix_tables(m, r, w, M, K):
    """``G[j, k, s]``: the most weight types ``j..`` add to a multiset of ``k`` members holding
    ``s`` tokens (any copies; FF checked as in :func:`ff_best`)."""
    n = m.size
    G = np.zeros((n + 1, K + 2, M + 1))
    for j in range(n - 1, -1, -1):
        G[j] = G[j + 1]
        if w[j] <= 0.0:
            continue
        for k in range(K - 1, -1, -1):  # G[j, k + 1] is final when G[j, k] reads it
            for s in range(0, M - (k + 1) * (r[j] - 1) - m[j] + 1):
                v = w[j] + G[j, k + 1, s + m[j]]
                if v > G[j, k, s]:
                    G[j, k, s] = v
    return G


@njit(cache=True)
def ff_lift(m, r, w, M, rhs):
    """Sequential lifting in the sorted order: each type ``j`` of weight 0 gets the largest
    ``w_j`` with ``max_{FF c} w(c) <= rhs``, given the weights so far; a multiset may hold
    ``k`` copies of ``j``, so ``w_j = min_k (rhs - B_k) / k`` with ``B_k`` the best weight of
    the other members beside ``k`` copies. ``B_k`` joins the best prefix (types before ``j``,
    their lifted weights) and the best suffix (types after ``j``, not lifted yet) over the
    state (count, tokens) they meet in."""
    n = m.size
    K = _count_bound(m, M)
    G = _suffix_tables(m, r, w, M, K)
    w = w.copy()
    P = np.full((K + 1, M + 1), NEG)
    P[0, 0] = 0.0
    for j in range(n):
        mj = m[j]
        rj = r[j]
        if w[j] <= 0.0:
            best = 1e300
            for k in range(1, K + 1):
                bk = NEG
                for c in range(0, K + 1 - k):
                    for s in range(0, M - k * mj - (c + k) * (rj - 1) + 1):
                        if P[c, s] != NEG:
                            v = P[c, s] + G[j + 1, c + k, s + k * mj]
                            if v > bk:
                                bk = v
                if bk == NEG:
                    break  # k copies never fit: neither do more
                if (rhs - bk) / k < best:
                    best = (rhs - bk) / k
            if best > _EPS and best < 1e300:
                w[j] = best
        if w[j] > 0.0:
            for k in range(K):
                for s in range(0, M - (k + 1) * (rj - 1) - mj + 1):
                    v = P[k, s]
                    if v != NEG and v + w[j] > P[k + 1, s + mj]:
                        P[k + 1, s + mj] = v + w[j]
    return w


@njit(cache=True)
def greedy_cover(m, r, y, M, maxc):
    """A cover of the loads ``y`` by FF multisets, built greedily: each multiset takes, in
    sorted order, copies of every type still uncovered while it stays FF, with weight the
    smallest remaining load per copy. Returns the multisets (rows: copies per type) and their
    total weight, an upper bound on the fractional cover number (``1e18`` when ``maxc``
    multisets do not cover ``y``)."""
    n = m.size
    rem = y.copy()
    out = np.zeros((maxc, n), np.int64)
    total = 0.0
    if n == 0 or rem.max() <= _EPS:
        return out[:0], 0.0
    for c in range(maxc):
        s = 0
        k = 0
        for j in range(n):
            if rem[j] <= _EPS:
                continue
            want = int(np.ceil(rem[j] - _EPS))
            while out[c, j] < want and s + m[j] + (k + 1) * (r[j] - 1) <= M:
                s += m[j]
                k += 1
                out[c, j] += 1
        lam = 1e18
        for j in range(n):
            if out[c, j] > 0 and rem[j] / out[c, j] < lam:
                lam = rem[j] / out[c, j]
        if lam == 1e18:
            break
        total += lam
        done = True
        for j in range(n):
            rem[j] -= lam * out[c, j]
            if rem[j] > _EPS:
                done = False
        if done:
            return out[:c + 1], total
    return out[:0], 1e18


@njit(cache=True)
def _pivot(D, beta, d, basis, row, col):
    p = D[row, col]
    D[row, :] /= p
    beta[row] /= p
    for i in range(D.shape[0]):
        if i != row and D[i, col] != 0.0:
            f = D[i, col]
            D[i, :] -= f * D[row, :]
            beta[i] -= f * beta[row]
    if d[col] != 0.0:
        d[:] -= d[col] * D[row, :]
    basis[row] = col


@njit(cache=True)
def _primal(D, beta, d, basis, R, W):
    """Primal simplex (Dantzig's rule, maximisation) on the first ``R`` rows; False if
    unbounded."""
    for _ in range(100000):
        col = -1
        best = _EPS
        for j in range(W):
            if d[j] > best:
                best = d[j]
                col = j
        if col < 0:
            return True
        row = -1
        ratio = 1e300
        for i in range(R):
            if D[i, col] > _EPS and beta[i] / D[i, col] < ratio - 1e-12:
                ratio = beta[i] / D[i, col]
                row = i
        if row < 0:
            return False
        _pivot(D[:R, :W], beta[:R], d[:W], basis[:R], row, col)
    return True


@njit(cache=True)
def _dual(D, beta, d, basis, R, W):
    """Dual simplex until ``beta >= 0`` (the reduced costs stay <= 0); False if infeasible."""
    for _ in range(100000):
        row = -1
        most = -1e-10
        for i in range(R):
            if beta[i] < most:
                most = beta[i]
                row = i
        if row < 0:
            return True
        col = -1
        ratio = 1e300
        for j in range(W):
            if D[row, j] < -_EPS and d[j] / D[row, j] < ratio - 1e-12:
                ratio = d[j] / D[row, j]
                col = j
        if col < 0:
            return False
        _pivot(D[:R, :W], beta[:R], d[:W], basis[:R], row, col)
    return True


@njit(cache=True)
def cover_cg(m, r, y, M, init, maxrows, early=1.0):
    """(H23c) The fractional cover number of the loads ``y`` by FF multisets, by column
    generation on its dual, the packing LP ``max y.w  s.t.  c.w <= 1`` for generated
    multisets ``c``, ``w >= 0``, priced exactly by :func:`ff_argmax` (a dense tableau: the
    rows are the multisets, ``init`` first). Returns ``(value, w, pricing max, generated multisets)``; the
    value is exact when the pricing max is ``<= 1``, and ``value <= 1`` ends early (no
    cut). With ``early < 1`` it also ends once the scaled weights ``w / max_c w(c)`` (an FF
    multiset weighs at most 1 under them) reach ``early`` of the violation the restricted LP's
    value still allows; then ``value`` is theirs, ``y . w``."""
    n = m.size
    cap = init.shape[0] + maxrows
    W = n + cap
    D = np.zeros((cap, W))
    beta = np.zeros(cap)
    d = np.zeros(W)
    basis = np.zeros(cap, np.int64)
    d[:n] = y
    gen = np.zeros((maxrows, n), np.int64)  # the multisets priced in, for the caller
    R = 0
    for q in range(init.shape[0]):
        D[R, :n] = init[q]
        D[R, n + R] = 1.0
        beta[R] = 1.0
        basis[R] = n + R
        R += 1
    while True:
        if not _primal(D, beta, d, basis, R, n + R):
            return 1e300, np.zeros(n), 1e300, gen[:0]  # a type in no multiset: cannot happen
        w = np.zeros(n)
        for i in range(R):
            if basis[i] < n:
                w[basis[i]] = beta[i]
        val = 0.0
        for j in range(n):
            val += y[j] * w[j]
        ng = R - init.shape[0]
        if val <= 1.0 + _EPS:
            return val, w, 0.0, gen[:ng]
        best, mult = ff_argmax(m, r, w, M)
        if best <= 1.0 + _EPS or R >= cap:
            return val, w, best, gen[:ng]
        # w / best is feasible: y.w / best is a lower bound on the cover number and val an
        # upper bound; stop once the lower one has half of the violation the upper one allows
        if val / best - 1.0 >= early * (val - 1.0):
            return val / best, w / best, 1.0, gen[:ng]
        # the new multiset as a row of the current tableau: mult.w + slack = 1
        gen[ng] = mult
        D[R, :] = 0.0
        rhs = 1.0
        for j in range(n):
            D[R, j] = mult[j]
        for i in range(R):
            b = basis[i]
            if b < n and mult[b] != 0:
                D[R, :n + R] -= mult[b] * D[i, :n + R]
                rhs -= mult[b] * beta[i]
        D[R, n + R] = 1.0
        beta[R] = rhs
        basis[R] = n + R
        R += 1
        if not _dual(D, beta, d, basis, R, n + R):
            return 1e300, np.zeros(n), 1e300, gen[:0]  # w = 0 is feasible: cannot happen


def is_ff(m: np.ndarray, r: np.ndarray, M: int) -> bool:
    """(H23a) checked directly, slot by slot (a reference for tests; any order)."""
    m = np.asarray(m, np.int64)
    r = np.asarray(r, np.int64)
    if m.size == 0:
        return True
    return all(int(np.sum((m + d)[r > d])) <= M for d in range(int(r.max())))


__all__ = ["NEG", "cover_cg", "ff_argmax", "ff_best", "ff_lift", "greedy_cover", "is_ff"]
