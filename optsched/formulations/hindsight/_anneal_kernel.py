"""The compiled inner loop of (H21) (``formulations/hindsight.md``): serial schedule generation
(H21a) and simulated-annealing moves over priority lists (H21b).

:func:`serial_decode` places the requests of a list one by one, each at the earliest slot at or
after its earliest slot where its whole profile fits beside those already placed: KV (the
block-rounded profile ``prof``), tokens ``C`` and prefill ``P`` when they can bind, batch size
``B`` (``B < 0``: none). It computes exactly what ``heuristics._SlotLoad`` checks, slot by slot
instead of by windows. :func:`anneal_chunk` runs ``moves`` moves of (H21b) at one temperature
and returns the state, so that the caller keeps the clock (numba has none).

Plain Python without numba: the same numbers, slowly.
"""

from __future__ import annotations

import numpy as np

from .future import njit  # numba's, or a pass-through without numba

#: objective codes of :func:`objective_value`
TOTAL_LATENCY, MEAN_TTFT, MAKESPAN = 0, 1, 2


@njit(cache=True)
def _oldest_age(i, room, prof, off, O):
    """The largest age ``g`` at which request ``i``'s profile (nondecreasing) is at most
    ``room``; -1 when none."""
    lo, hi = 0, O[i]  # prof[off + g] <= room for g < lo; > room for g >= hi
    while lo < hi:
        mid = (lo + hi) // 2
        if prof[off[i] + mid] <= room:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


@njit(cache=True)
def _next_start(i, s, prof, off, I, O, M, C, P, B, kv, tok, pre, cnt, tok_binds, pre_binds):
    """``s`` when request ``i`` fits starting at slot ``s``; else a later start below which
    none fits. A KV conflict in slot ``u`` rules out every start that reaches ``u`` older than
    the oldest age fitting there (the profile only grows); a slot whose tokens or batch size are
    full rules out every start that reaches it."""
    if pre_binds and pre[s] + I[i] > P:
        return s + 1
    if tok_binds and tok[s] + I[i] > C:
        return s + 1
    nxt = s
    for g in range(O[i]):
        u = s + g
        if (tok_binds and g > 0 and tok[u] + 1 > C) or (B >= 0 and cnt[u] + 1 > B):
            nxt = max(nxt, u + 1)
        elif kv[u] + prof[off[i] + g] > M:
            nxt = max(nxt, u - _oldest_age(i, M - kv[u], prof, off, O))
    return nxt


@njit(cache=True)
def serial_decode(order, e, prof, off, I, O, M, C, P, B, kv, tok, pre, cnt, starts):
    """(H21a) into ``starts``; ``kv``, ``tok``, ``pre``, ``cnt`` are scratch of the horizon's
    length (zeroed here). Returns False (``starts`` incomplete) when a request finds no slot
    within the scratch: the caller's horizon was too short."""
    kv[:] = 0
    tok[:] = 0
    pre[:] = 0
    cnt[:] = 0
    tok_binds = C < M
    pre_binds = P < min(C, M)
    for k in range(order.size):
        i = order[k]
        s = e[i]
        while True:
            if s + O[i] > kv.size:
                return False
            nxt = _next_start(i, s, prof, off, I, O, M, C, P, B, kv, tok, pre, cnt, tok_binds,
                              pre_binds)
            if nxt == s:
                break
            s = nxt
        starts[i] = s
        for g in range(O[i]):
            kv[s + g] += prof[off[i] + g]
            cnt[s + g] += 1
            tok[s + g] += 1
        tok[s] += I[i] - 1
        pre[s] += I[i]
    return True


@njit(cache=True)
def objective_value(kind, starts, O, a):
    """(H5) for total latency, mean TTFT or makespan (the codes above)."""
    n = starts.size
    if n == 0:
        return 0.0
    if kind == TOTAL_LATENCY:
        v = 0.0
        for i in range(n):
            v += starts[i] + O[i] - a[i]
        return v
    if kind == MEAN_TTFT:
        v = 0.0
        for i in range(n):
            v += starts[i] + 1 - a[i]
        return v / n
    m = 0.0
    for i in range(n):
        m = max(m, float(starts[i] + O[i]))
    return m


@njit(cache=True)
def anneal_chunk(kind, moves, temp, seed, order, cur, best, best_starts, e, prof, off, I, O, a,
                 M, C, P, B, kv, tok, pre, cnt):
    """``moves`` moves of (H21b) at temperature ``temp`` from list ``order`` of value ``cur``:
    swap two requests or move one to another position; accept when not worse, or with
    probability ``exp(-delta / temp)``. ``order`` and ``best_starts`` are updated in place;
    returns ``(cur, best)``."""
    np.random.seed(seed)
    n = order.size
    cand = np.empty_like(order)
    starts = np.empty_like(best_starts)
    for _ in range(moves):
        x = np.random.randint(0, n)
        y = np.random.randint(0, n)
        cand[:] = order
        if np.random.random() < 0.5:
            cand[x], cand[y] = order[y], order[x]
        else:  # move the request at x to position y
            v = order[x]
            if x < y:
                cand[x:y] = order[x + 1:y + 1]
            elif y < x:
                cand[y + 1:x + 1] = order[y:x]
            cand[y] = v
        if not serial_decode(cand, e, prof, off, I, O, M, C, P, B, kv, tok, pre, cnt, starts):
            continue  # cannot happen with the caller's horizon; never accepted
        val = objective_value(kind, starts, O, a)
        if val <= cur or (temp > 0 and np.random.random() < np.exp(-(val - cur) / temp)):
            order[:] = cand
            cur = val
            if val < best - 1e-9:
                best = val
                best_starts[:] = starts
    return cur, best
