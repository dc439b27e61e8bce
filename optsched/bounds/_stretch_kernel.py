"""The per-request subproblems of the ``stretch`` rung (``formulations/bounds.md`` B15), compiled.

Given prices ``pi_l`` on the machine time of each interval ``l`` of a grid, request ``i``
minimises its latency plus the priced *usage* of its steps:

    min over the first-token bucket b and the completion interval L of
        max(tau_L, a + chain, s_b + dchain) - a  +  P_b  +  D_{b,L},

``P_b`` the least priced usage of its prefill pass (one unit of progress) inside ``[a, e_b]``,
``D_{b,L}`` that of its ``O - 1`` decode steps inside ``[s_b, tau_{L+1}]`` (B15 (iii)), the
larger of two valid prices: by steps (every step at the least entry floor) and by work (the
entry floors' sum at the largest floor's curve, B15 (ii)). Every
interval offers progress at a convex usage (``c_e(r) = r e / (1 - h r)``, eq. B15a), taken
here as a piecewise-linear *lower* envelope (each piece at the slope of its left end, so the
envelope never exceeds ``c``); the least cost of ``need`` units over a set of intervals is
the ``need`` cheapest units of their pieces, kept in a Fenwick tree over the pieces sorted
by price while the completion interval sweeps forward. A sweep stops once ``tau_L - a``
alone exceeds the best value found; a request whose window ends first is charged
``min(best, tau_end - a)``, a lower bound either way (every later completion costs at least
``tau_end - a``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:
    from numba import njit
except ImportError:  # pragma: no cover - numba is a dependency; kept importable without it

    def njit(*args: Any, **kwargs: Any) -> Any:  # type: ignore[no-redef]
        def wrap(f: Any) -> Any:
            return f
        return wrap


@njit(cache=True)
def _fen_add(tl, tc, i, length, cost):
    m = tl.size
    i += 1
    while i <= m:
        tl[i - 1] += length
        tc[i - 1] += cost
        i += i & (-i)


@njit(cache=True)
def _fen_cheapest(tl, tc, need, unit):
    """Cost of the ``need`` cheapest units held in the tree (pieces sorted by ``unit``
    price); ``inf`` when the tree holds fewer."""
    m = tl.size
    if need <= 0.0:
        return 0.0
    pos = 0
    got = 0.0
    cost = 0.0
    step = 1
    while step * 2 <= m:
        step *= 2
    while step > 0:
        nxt = pos + step
        if nxt <= m and got + tl[nxt - 1] <= need:
            pos = nxt
            got += tl[nxt - 1]
            cost += tc[nxt - 1]
        step //= 2
    if got >= need:
        return cost
    if pos >= m:
        return np.inf
    return cost + (need - got) * unit[pos]


@njit(cache=True)
def _bucket(a, dp, dt, b, nb):
    """First-token bucket ``b`` of ``nb``: ``[s_b, e_b)`` with ``s_b = a + dp + off_b``,
    offsets ``0, dt, 2 dt, 4 dt, ...``; the last bucket is unbounded."""
    off = 0.0
    for _ in range(b):
        off = dt if off == 0.0 else off * 2.0
    nxt = dt if off == 0.0 else off * 2.0
    if b == nb - 1:
        return a + dp + off, np.inf
    return a + dp + off, a + dp + nxt


@njit(cache=True)
def subproblems(req, tau, pi, dslope, dlen, wslope, wlen_, pslope, plen, l0, wlen, n_buckets,
                usage, vals, certified):
    """Solve every request's subproblem at prices ``pi`` (module docstring).

    ``req[i] = (a, decode steps, prefill chain, chain, decode work units)``; ``dslope/dlen``
    (``wslope/wlen_``, ``pslope/plen``) the envelope pieces of the decode usage per step (per
    work unit, of the prefill pass) per unit rate; request ``i`` looks at
    intervals ``l0[i] .. l0[i] + wlen[i] - 1``. Writes each value to ``vals``, whether its
    sweep reached its stopping rule to ``certified``, and adds the usage of each optimum to
    ``usage`` (the supergradient of the dual)."""
    n = req.shape[0]
    Kd = dslope.shape[1]
    Kp = pslope.shape[1]
    dt = tau[1] - tau[0]
    for i in range(n):
        a = req[i, 0]
        nd = req[i, 1]
        dp = req[i, 2]
        chain = req[i, 3]
        nw = req[i, 4]
        dch = chain - dp
        s0 = l0[i]
        W = wlen[i]
        end = tau[s0 + W]
        mp = W * Kp
        md = W * Kd
        pc = np.empty(mp)
        pl = np.empty(mp)
        dc = np.empty(md)
        dl = np.empty(md)
        wc = np.empty(md)
        wl = np.empty(md)
        for w in range(W):
            l = s0 + w
            ln = tau[l + 1] - max(tau[l], a)
            for k in range(Kp):
                pc[w * Kp + k] = pi[l] * pslope[i, k]
                pl[w * Kp + k] = plen[i, k] * ln
            for k in range(Kd):
                dc[w * Kd + k] = pi[l] * dslope[i, k]
                dl[w * Kd + k] = dlen[i, k]  # times the usable length, set per bucket
                wc[w * Kd + k] = pi[l] * wslope[i, k]
                wl[w * Kd + k] = wlen_[i, k]
        po = np.argsort(pc, kind="mergesort")
        do = np.argsort(dc, kind="mergesort")
        wo = np.argsort(wc, kind="mergesort")
        prank = np.empty(mp, np.int64)
        drank = np.empty(md, np.int64)
        wrank = np.empty(md, np.int64)
        for j in range(mp):
            prank[po[j]] = j
        for j in range(md):
            drank[do[j]] = j
            wrank[wo[j]] = j
        punit = pc[po]
        dunit = dc[do]
        wunit = wc[wo]
        # least prefill usage within [a, tau[l + 1]] for every window interval l
        pcost = np.full(W, np.inf)
        tl = np.zeros(mp)
        tcs = np.zeros(mp)
        for w in range(W):
            for k in range(Kp):
                j = w * Kp + k
                _fen_add(tl, tcs, prank[j], pl[j], pl[j] * pc[j])
            if tau[s0 + w + 1] >= a + dp:
                pcost[w] = _fen_cheapest(tl, tcs, 1.0, punit)
        best = np.inf
        best_b = -1
        best_w = -1
        best_by_work = False
        for b in range(n_buckets):
            sb, eb = _bucket(a, dp, dt, b, n_buckets)
            wb = np.searchsorted(tau, sb, side="right") - 1 - s0
            if wb >= W or tau[s0 + wb] - a >= best:
                break
            we = W - 1
            if eb < end:
                we = np.searchsorted(tau, eb, side="right") - 1 - s0
            pb = pcost[we]
            if pb == np.inf:
                continue
            ftl = np.zeros(md)
            ftc = np.zeros(md)
            gtl = np.zeros(md)
            gtc = np.zeros(md)
            tmin = max(a + chain, sb + dch)
            for w in range(wb, W):
                l = s0 + w
                if tau[l] - a >= best:
                    break
                ln = tau[l + 1] - max(tau[l], sb)
                for k in range(Kd):
                    j = w * Kd + k
                    _fen_add(ftl, ftc, drank[j], dl[j] * ln, dl[j] * ln * dc[j])
                    _fen_add(gtl, gtc, wrank[j], wl[j] * ln, wl[j] * ln * wc[j])
                if tau[l + 1] < tmin:
                    continue
                by_steps = _fen_cheapest(ftl, ftc, nd, dunit)
                by_work = _fen_cheapest(gtl, gtc, nw, wunit)
                v = max(tau[l], tmin) - a + pb + max(by_steps, by_work)
                if v < best:
                    best = v
                    best_b = b
                    best_w = w
                    best_by_work = by_work > by_steps
        if best > end - a:  # every completion after the window costs at least this
            vals[i] = end - a
            certified[i] = False
            continue
        vals[i] = best
        certified[i] = True
        if best_w < 0:
            continue
        # the usage of the optimum: the cheapest pieces of the chosen bucket and completion
        sb, eb = _bucket(a, dp, dt, best_b, n_buckets)
        wb = np.searchsorted(tau, sb, side="right") - 1 - s0
        we = W - 1
        if eb < end:
            we = np.searchsorted(tau, eb, side="right") - 1 - s0
        rem = 1.0
        for j in range(mp):
            s = po[j]
            w = s // Kp
            if w > we or pl[s] <= 0.0:
                continue
            take = min(rem, pl[s])
            usage[s0 + w] += take * pslope[i, s % Kp]
            rem -= take
            if rem <= 0.0:
                break
        rem = nw if best_by_work else nd
        order = wo if best_by_work else do
        for j in range(md):
            if rem <= 0.0:
                break
            s = order[j]
            w = s // Kd
            if w < wb or w > best_w:
                continue
            l = s0 + w
            if best_by_work:
                take = min(rem, wl[s] * (tau[l + 1] - max(tau[l], sb)))
                slope = wslope[i, s % Kd]
            else:
                take = min(rem, dl[s] * (tau[l + 1] - max(tau[l], sb)))
                slope = dslope[i, s % Kd]
            if take <= 0.0:
                continue
            usage[l] += take * slope
            rem -= take
