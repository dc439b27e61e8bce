"""Compiled fast path of :class:`~optsched.policies.cached.CachedScheduler` (``vllm-apc``,
``sarathi-apc``, ``lpm``): the simulator loop, the unified scheduler's walk with prefix hits
and shared memory, the LRU cache and the prefix-reuse rules of the simulator
(:func:`optsched.policies.simulator._reuse_batch`), in one numba kernel.

It mirrors the Python path decision by decision (same walk order, same memory accounting,
same LRU keys, same release order: evictions in plan order then finishers, a request's last
block first), so the schedules are equal batch for batch (``tests/policies/test_fast_cached.py``
and the CI fast-path checks). It covers the ``fcfs`` and ``lpm`` rules with the ``lru`` cache,
the ``input`` reservation, prefill-first and decode-first orders, unit and linear cost
models; anything else (``dfs``, ``k-lpm``, ``belady``, a subclass) takes the Python path.
The unified scheduler's helpers that do not touch blocks are :mod:`.fast`'s own.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..instance import Instance
from ..schedule import Schedule
from .fast import (
    _B,
    _BIG,
    _C,
    _CAPM,
    _END,
    _HN,
    _HYBRID,
    _M,
    _MAXBS,
    _MAXSEQ,
    _NADM,
    _NB,
    _NCUR,
    _NEV,
    _NPRE,
    _NRES,
    _ORDER,
    _PHASE,
    _PRE,
    _TOK,
    _USED,
    _WM,
    BROKEN,
    HAVE_NUMBA,
    LIVELOCK,
    OK,
    STALLED,
    _add,
    _build_seq,
    _decode_time,
    _fp,
    _grow,
    _heap_pop,
    _heap_push,
    _prefill_tokens,
    _price,
    _trim,
    fast_config,
    njit,
)

# block-state scalars (``bs``)
_NRESB, _NHELD, _CLOCK, _NHP, _LRUN, _NF, _NT = range(7)
# extra integer parameters (``xp``)
_RULE, _FCFS_ABOVE, _K = range(3)


@njit(cache=True, inline="always")
def _private(i, mm, P, b):
    """``BlockState.private``: the private tokens of request ``i`` in whole blocks."""
    return _fp(mm - b * min(P[i], mm // b), b)


@njit(cache=True)
def _lru_compact(lru, bs, K, resb, holds, stampv):
    """Keep the heap's valid entries only (a block nobody holds, resident, with its current
    stamp): at most ``K``, so a heap of ``2K + 16`` entries never overflows. Entries dropped
    here are stale for good (a block gets a new stamp whenever it is released again), so
    what the pops return is unchanged."""
    k = 0
    for q in range(bs[_LRUN]):
        key = lru[q]
        x = key % K
        if resb[x] and holds[x] == 0 and stampv[x] == key // K:
            lru[k] = key
            k += 1
    lru[:k] = np.sort(lru[:k])  # a sorted array is a heap
    bs[_LRUN] = k


@njit(cache=True, inline="always")
def _lru_push(lru, bs, key):
    k = bs[_LRUN]
    lru[k] = key
    bs[_LRUN] = k + 1
    while k > 0:
        p = (k - 1) >> 1
        if lru[p] <= lru[k]:
            break
        lru[p], lru[k] = lru[k], lru[p]
        k = p


@njit(cache=True, inline="always")
def _lru_pop(lru, bs):
    top = lru[0]
    n = bs[_LRUN] - 1
    bs[_LRUN] = n
    lru[0] = lru[n]
    k = 0
    while True:
        c = 2 * k + 1
        if c >= n:
            break
        if c + 1 < n and lru[c + 1] < lru[c]:
            c += 1
        if lru[k] <= lru[c]:
            break
        lru[k], lru[c] = lru[c], lru[k]
        k = c
    return top


@njit(cache=True, inline="always")
def _change_hold(x, d, holds, dh, touched, bs):
    """``CachedScheduler._change_hold``: the plan's hold count of block ``x`` moves by
    ``d``; returns the change of the number of held blocks."""
    before = holds[x] + dh[x]
    if dh[x] == 0:
        touched[bs[_NT]] = x
        bs[_NT] += 1
    dh[x] += d
    after = before + d
    return int(after > 0) - int(before > 0)


@njit(cache=True)
def _evict(i, st, ip, res, resident, evl, m, P, bptr_b, blk, holds, dh, touched, bs, freed):
    """``CachedScheduler._evict``: the unified eviction, then the request's held blocks
    released in the plan (last block first)."""
    b = ip[_B]
    f = min(P[i], m[i] // b)
    st[_USED] -= _fp(res[i], b)
    res[i] = 0
    if resident[i]:
        st[_NRES] -= 1
    resident[i] = False
    evl[st[_NEV]] = i
    st[_NEV] += 1
    st[_USED] += b * f
    for p in range(f - 1, -1, -1):
        x = blk[bptr_b[i] + p]
        d = _change_hold(x, -1, holds, dh, touched, bs)
        bs[_NHP] += d
        st[_USED] += b * d
        if d < 0:
            freed[bs[_NF]] = x
            bs[_NF] += 1


@njit(cache=True)
def _cand_running(pos, seq, seq_dec, st, ip, m, S, res, resident, cur, ctok, evl, pre_e, P,
                  bptr_b, blk, holds, dh, touched, bs, freed):
    """``UnifiedScheduler._cand_running`` with the cached scheduler's eviction."""
    i = seq[pos]
    dec = seq_dec[pos]
    ph = 2 if dec else 1
    if not ip[_HYBRID] and st[_PHASE] != 0 and st[_PHASE] != ph:
        return
    if st[_NB] >= ip[_MAXBS]:
        return
    mi = m[i]
    if dec:
        if st[_TOK] + 1 > ip[_C]:
            return
        c = 1
    else:
        c = _prefill_tokens(S[i] - mi, st, ip)
        if c <= 0:
            return
    old = res[i]
    new_res = max(old, mi + c)
    delta = _fp(new_res, ip[_B]) - _fp(old, ip[_B])
    while delta > ip[_M] - st[_USED]:
        if st[_END] - 1 > pos:
            st[_END] -= 1
            _evict(seq[st[_END]], st, ip, res, resident, evl, m, P, bptr_b, blk, holds, dh,
                   touched, bs, freed)
        else:
            _evict(i, st, ip, res, resident, evl, m, P, bptr_b, blk, holds, dh, touched, bs,
                   freed)
            return
    _add(i, c, new_res, ph, not dec, st, ip, res, cur, ctok, pre_e)


@njit(cache=True)
def _run_seq(lo, hi, seq, seq_dec, st, ip, m, S, res, resident, cur, ctok, evl, pre_e, P,
             bptr_b, blk, holds, dh, touched, bs, freed):
    """:func:`optsched.policies.fast._run_seq` with the cached scheduler's eviction."""
    pos = lo
    b = ip[_B]
    M = ip[_M]
    exact = b == 1
    while pos < min(hi, st[_END]):
        if seq_dec[pos] and (ip[_HYBRID] or st[_PHASE] != 1):
            lim = min(hi, st[_END])
            used, tok, nb, k = st[_USED], st[_TOK], st[_NB], st[_NCUR]
            full = nb >= ip[_MAXBS] or tok + 1 > ip[_C]
            while pos < lim and seq_dec[pos]:
                if full:
                    pos += 1
                    continue
                i = seq[pos]
                old = res[i]
                if exact:
                    new = old + 1
                else:
                    new = max(old, m[i] + 1)
                delta = _fp(new, b) - _fp(old, b)
                if delta > M - used:
                    break
                used += delta
                res[i] = new
                cur[k] = i
                ctok[k] = 1
                k += 1
                tok += 1
                nb += 1
                full = nb >= ip[_MAXBS] or tok + 1 > ip[_C]
                pos += 1
            if k > st[_NCUR] and st[_PHASE] == 0:
                st[_PHASE] = 2
            st[_USED], st[_TOK], st[_NB], st[_NCUR] = used, tok, nb, k
            if pos < lim and seq_dec[pos] and not full:
                _cand_running(pos, seq, seq_dec, st, ip, m, S, res, resident, cur, ctok, evl,
                              pre_e, P, bptr_b, blk, holds, dh, touched, bs, freed)
                pos += 1
        else:
            ph = 2 if seq_dec[pos] else 1
            if (ip[_HYBRID] or st[_PHASE] == 0 or st[_PHASE] == ph) \
                    and st[_NB] < ip[_MAXBS]:
                _cand_running(pos, seq, seq_dec, st, ip, m, S, res, resident, cur, ctok, evl,
                              pre_e, P, bptr_b, blk, holds, dh, touched, bs, freed)
            pos += 1
    return max(pos, lo)


@njit(cache=True, inline="always")
def _hit(i, hitv, hitmark, j, m, ip, H, bptr_b, blk, resb):
    """``BlockState.hit_run`` at the batch's start, computed once per batch."""
    if hitmark[i] == j:
        return hitv[i]
    b = ip[_B]
    h = 0
    if m[i] % b == 0:
        p = m[i] // b
        k = p
        while k < H[i] and resb[blk[bptr_b[i] + k]]:
            k += 1
        h = (k - p) * b
    hitmark[i] = j
    hitv[i] = h
    return h


@njit(cache=True)
def _cand_waiting(i, j, st, ip, S, m, res, resident, cur, ctok, pre_e, adm, P, H, bptr_b,
                  blk, resb, holds, dh, touched, bs, hitv, hitmark, hit_of, hit_mark):
    """``CachedScheduler._cand_waiting`` (no waiting-evicts: no registered configuration has
    it)."""
    if not ip[_HYBRID] and st[_PHASE] == 2:
        return False
    if st[_NB] >= ip[_MAXBS] or st[_NRES] >= ip[_MAXSEQ]:
        return False
    b = ip[_B]
    Si = S[i]
    h = _hit(i, hitv, hitmark, j, m, ip, H, bptr_b, blk, resb)
    c = _prefill_tokens(Si - h, st, ip)
    if c <= 0:
        return False
    R = Si
    nh = h // b
    fresh = 0
    for p in range(nh):
        x = blk[bptr_b[i] + p]
        if holds[x] + dh[x] == 0:
            fresh += 1
    delta = _fp(R, b) - h + b * fresh
    if delta <= ip[_CAPM] - ip[_WM]:
        delta += ip[_WM]
    if delta > ip[_M] - st[_USED]:
        return False
    _add(i, c, R, 1, True, st, ip, res, cur, ctok, pre_e)
    st[_USED] -= h
    for p in range(nh):
        x = blk[bptr_b[i] + p]
        d = _change_hold(x, 1, holds, dh, touched, bs)
        bs[_NHP] += d
        st[_USED] += b * d
    hit_of[i] = h
    hit_mark[i] = j
    resident[i] = True
    st[_NRES] += 1
    adm[st[_NADM]] = i
    st[_NADM] += 1
    return True


@njit(cache=True)
def _run_waiting(j, st, ip, xp, S, m, res, resident, cur, ctok, pre_e, adm, P, H, bptr_b,
                 blk, resb, holds, dh, touched, bs, hitv, hitmark, hit_of, hit_mark, heap,
                 idx_of_rank, wbuf, wkey):
    """``CachedScheduler._run_waiting``: FCFS from the heap, or LPM's order (longest hit,
    then rank) over every waiting request; the first that does not fit closes the queue."""
    nw = st[_HN]
    if xp[_RULE] == 0 or nw == 0 or (xp[_FCFS_ABOVE] > 0 and nw > xp[_FCFS_ABOVE]):
        while st[_HN] > 0:
            if not _cand_waiting(idx_of_rank[heap[0]], j, st, ip, S, m, res, resident, cur,
                                 ctok, pre_e, adm, P, H, bptr_b, blk, resb, holds, dh,
                                 touched, bs, hitv, hitmark, hit_of, hit_mark):
                break
            _heap_pop(heap, st)
        return
    ranks = np.sort(heap[:nw])
    for t in range(nw):
        i = idx_of_rank[ranks[t]]
        wbuf[t] = i
        wkey[t] = -_hit(i, hitv, hitmark, j, m, ip, H, bptr_b, blk, resb) * (nw + 1) + t
    o = np.argsort(wkey[:nw])
    taken = np.zeros(nw, np.bool_)
    for q in range(nw):
        t = o[q]
        if not _cand_waiting(wbuf[t], j, st, ip, S, m, res, resident, cur, ctok, pre_e, adm, P,
                             H, bptr_b, blk, resb, holds, dh, touched, bs, hitv, hitmark,
                             hit_of, hit_mark):
            break
        taken[t] = True
    k = 0
    for t in range(nw):  # the ranks left, ascending: a valid heap
        if not taken[t]:
            heap[k] = ranks[t]
            k += 1
    st[_HN] = k


@njit(cache=True)
def _release(i, mm, P, b, bptr_b, blk, holds, stampv, bs, lru, K, resb):
    """``BlockState.release``: the request's held blocks, last first; a block nobody holds
    any more gets the next stamp and enters the LRU heap."""
    f = min(P[i], mm // b)
    for p in range(f - 1, -1, -1):
        x = blk[bptr_b[i] + p]
        holds[x] -= 1
        if holds[x] == 0:
            bs[_NHELD] -= 1
            bs[_CLOCK] += 1
            stampv[x] = bs[_CLOCK]
            if bs[_LRUN] == lru.size:
                _lru_compact(lru, bs, K, resb, holds, stampv)
            _lru_push(lru, bs, bs[_CLOCK] * K + x)


@njit(cache=True, inline="always")
def _hold(x, holds, bs):
    if holds[x] == 0:
        bs[_NHELD] += 1
    holds[x] += 1


@njit(cache=True)
def _choose_drops(st, ip, bs, lru, K, resb, holds, dh, stampv, freed, drops):
    """``CachedScheduler._drops`` (LRU): how many cached blocks must go, oldest first, then
    those this batch's evictions freed; returns their count."""
    b = ip[_B]
    cached = bs[_NRESB] - bs[_NHP]
    k = cached - max(0, (ip[_M] - st[_USED]) // b)
    nd = 0
    while nd < k and bs[_LRUN] > 0:
        key = _lru_pop(lru, bs)
        x = key % K
        if resb[x] and holds[x] == 0 and stampv[x] == key // K and holds[x] + dh[x] == 0:
            drops[nd] = x
            nd += 1
    for q in range(bs[_NF]):
        if nd >= k:
            break
        x = freed[q]
        if holds[x] + dh[x] == 0:
            drops[nd] = x
            nd += 1
    return max(nd, 0)


@njit(cache=True, inline="always")
def _steady_steps(ncur, cur, used0, m, g, res, output, P, ip, bs):
    """How many batches from now repeat the last one, given that the last batch was
    *steady* (``simulate_cached``): it decoded running requests, one token each, and did
    nothing else (no admission, eviction, drop, finish, prefill, reservation growth; the
    running list unchanged), and no arrival came since (the caller stops at the next one).
    Then the walk sees the same state again -- the same waiting heap, resident blocks and
    holds, the same memory in use ``used0``, the other running requests (refused, for
    instance a prefill in a decode batch) as they were -- so it plans the same decodes,
    until one of them would grow its reservation by a block (at context ``fp(res)``; block
    size 1 always does) or finish (the general path's), as long as its decodes keep
    ``used0`` (their shared prompt blocks all counted: ``m // b >= P``) and the drop rule
    asks for none (no surplus of cached blocks over free memory, or no LRU entry left to
    pop, as in the last batch). 0: none."""
    b = ip[_B]
    if b == 1:
        return 0
    if bs[_NRESB] - bs[_NHELD] - max(0, (ip[_M] - used0) // b) > 0 and bs[_LRUN] > 0:
        return 0
    t = _BIG
    for k in range(ncur):
        i = cur[k]
        if m[i] // b < P[i]:
            return 0
        t = min(t, _fp(res[i], b) - m[i], output[i] - g[i] - 1)
    return max(t, 0)


@njit(cache=True)
def simulate_cached(arr, arr_sorted, order, prompt, output, rank_of, idx_of_rank, ip, xp, fc,
                    bptr_b, blk, P, H, K, limit):
    """The whole simulation; returns ``(status, batch_ptr, entry_req, entry_tokens,
    entry_hit, evict_ptr, evict_req, drop_ptr, drop_block, start, batches, entries,
    evictions, drops)`` (buffers used up to the counts)."""
    n = prompt.size
    b = ip[_B]
    M = ip[_M]
    S = prompt.copy()
    m = np.zeros(n, np.int64)
    g = np.zeros(n, np.int64)
    res = np.zeros(n, np.int64)
    resident = np.zeros(n, np.bool_)
    partial = np.zeros(n, np.bool_)
    npartial = 0
    heap = np.empty(n + 1, np.int64)
    run = np.empty(n, np.int64)
    nrun = 0
    seq = np.empty(n, np.int64)
    seq_dec = np.empty(n, np.bool_)
    cur = np.empty(n, np.int64)
    ctok = np.empty(n, np.int64)
    chit = np.empty(n, np.int64)
    mb = np.empty(n, np.int64)
    decf = np.empty(n, np.bool_)
    evl = np.empty(n, np.int64)
    adm = np.empty(n, np.int64)
    pre_e = np.empty(n, np.int64)
    fin = np.empty(n, np.int64)
    cand = np.empty(n, np.int64)
    wbuf = np.empty(n, np.int64)
    wkey = np.empty(n, np.int64)
    hitv = np.zeros(n, np.int64)
    hitmark = np.full(n, -1, np.int64)
    hit_of = np.zeros(n, np.int64)
    hit_mark = np.full(n, -1, np.int64)
    st = np.zeros(15, np.int64)
    # blocks
    resb = np.zeros(K, np.bool_)
    holds = np.zeros(K, np.int64)
    stampv = np.zeros(K, np.int64)
    dh = np.zeros(K, np.int64)
    touched = np.empty(blk.size + K + 16, np.int64)
    freed = np.empty(blk.size + 16, np.int64)
    drops = np.empty(K + 16, np.int64)
    lru = np.empty(2 * K + 16, np.int64)
    bs = np.zeros(8, np.int64)
    # output columns (grown by doubling)
    cap_e = max(16, int(output.sum()) + 2 * n)
    e_req = np.empty(cap_e, np.int64)
    e_tok = np.empty(cap_e, np.int64)
    e_hit = np.empty(cap_e, np.int64)
    ne = 0
    v_req = np.empty(16, np.int64)
    nv = 0
    d_blk = np.empty(16, np.int64)
    ndr = 0
    cap_b = max(16, int(output.sum()) + n)
    bptr = np.empty(cap_b + 1, np.int64)
    eptr = np.empty(cap_b + 1, np.int64)
    dptr = np.empty(cap_b + 1, np.int64)
    bptr[0] = 0
    eptr[0] = 0
    dptr[0] = 0
    start = np.empty(cap_b, np.float64)
    nbat = 0
    nxt = 0
    next_arrival = arr_sorted[0] if n else math.inf
    done = 0
    kv = 0  # private KV in use
    idle = False
    now = 0.0
    steady = False
    ncur = 0
    used0 = 0
    while done < n:
        if next_arrival <= now:
            hi = np.searchsorted(arr_sorted, now, side="right")
            for k in range(nxt, hi):
                _heap_push(heap, st, rank_of[order[k]])
            nxt = hi
            next_arrival = arr_sorted[nxt] if nxt < n else math.inf
            steady = False
        if steady:
            # -- the last batch again, ``_steady_steps`` times at most: recorded and priced
            # batch by batch as the general path below would (same operations), its
            # decodes applied to the state at the end --
            steps = min(_steady_steps(ncur, cur, used0, m, g, res, output, P, ip, bs),
                        limit - nbat)
            while nbat + steps >= bptr.size:
                bptr = _grow(bptr, nbat + 1)
                eptr = _grow(eptr, nbat + 1)
                dptr = _grow(dptr, nbat + 1)
            while nbat + steps > start.size:
                start = _grow(start, nbat)
            while ne + steps * ncur > e_req.size:
                e_req = _grow(e_req, ne)
                e_tok = _grow(e_tok, ne)
                e_hit = _grow(e_hit, ne)
            ctx = 0
            for k in range(ncur):
                ctx += m[cur[k]]
            t = 0
            while t < steps and next_arrival > now:
                for k in range(ncur):
                    e_req[ne + k] = cur[k]
                    e_tok[ne + k] = 1
                    e_hit[ne + k] = 0
                ne += ncur
                start[nbat] = math.nan
                nbat += 1
                bptr[nbat] = ne
                eptr[nbat] = nv
                dptr[nbat] = ndr
                now = now + _decode_time(ip, fc, ncur, ctx)
                ctx += ncur
                t += 1
            for k in range(ncur):
                i = cur[k]
                m0 = m[i]
                res[i] = max(res[i], m0 + t)
                kv += _private(i, m0 + t, P, b) - _private(i, m0, P, b)
                m[i] = m0 + t
                g[i] += t
                S[i] += t
            if kv + b * bs[_NRESB] > M:
                return (BROKEN, bptr, e_req, e_tok, e_hit, eptr, v_req, dptr, d_blk, start, 0,
                        0, 0, 0)
            if t > 0:
                continue
        steady = False
        j = nbat  # the batch being planned (the hit caches' mark)
        # -- CachedScheduler.next_batch: used from the state at the batch's start --
        for q in range(bs[_NT]):
            dh[touched[q]] = 0
        bs[_NT] = 0
        bs[_NF] = 0
        bs[_NHP] = bs[_NHELD]
        used = b * bs[_NHELD]
        for k in range(nrun):
            i = run[k]
            used += _fp(res[i], b) - b * min(P[i], m[i] // b)
        st[_USED] = used
        used0 = used
        nseq = _build_seq(run, nrun, npartial, ip, m, S, g, seq, seq_dec)
        st[_END] = nseq
        st[_TOK] = 0
        st[_PRE] = 0
        st[_NB] = 0
        st[_PHASE] = 0
        st[_NCUR] = 0
        st[_NEV] = 0
        st[_NADM] = 0
        st[_NPRE] = 0
        if ip[_ORDER] == 0:
            _run_waiting(j, st, ip, xp, S, m, res, resident, cur, ctok, pre_e, adm, P, H,
                         bptr_b, blk, resb, holds, dh, touched, bs, hitv, hitmark, hit_of,
                         hit_mark, heap, idx_of_rank, wbuf, wkey)
            _run_seq(0, nseq, seq, seq_dec, st, ip, m, S, res, resident, cur, ctok, evl, pre_e,
                     P, bptr_b, blk, holds, dh, touched, bs, freed)
        else:
            _run_seq(0, nseq, seq, seq_dec, st, ip, m, S, res, resident, cur, ctok, evl, pre_e,
                     P, bptr_b, blk, holds, dh, touched, bs, freed)
            _run_waiting(j, st, ip, xp, S, m, res, resident, cur, ctok, pre_e, adm, P, H,
                         bptr_b, blk, resb, holds, dh, touched, bs, hitv, hitmark, hit_of,
                         hit_mark, heap, idx_of_rank, wbuf, wkey)
        ncur = st[_NCUR]
        nev = st[_NEV]
        nd = _choose_drops(st, ip, bs, lru, K, resb, holds, dh, stampv, freed, drops)
        if ncur == 0 and nev == 0 and nd == 0:
            if nxt < n:
                now = max(now, next_arrival)
                idle = True
                continue
            return (STALLED, bptr, e_req, e_tok, e_hit, eptr, v_req, dptr, d_blk, start, 0, 0,
                    0, 0)
        if nbat >= limit:
            return (LIVELOCK, bptr, e_req, e_tok, e_hit, eptr, v_req, dptr, d_blk, start, 0, 0,
                    0, 0)
        # -- apply the plan (simulator._reuse_batch) --
        for k in range(nev):
            e = evl[k]
            if m[e] <= 0:
                return (BROKEN, bptr, e_req, e_tok, e_hit, eptr, v_req, dptr, d_blk, start, 0,
                        0, 0, 0)
            kv -= _private(e, m[e], P, b)
            _release(e, m[e], P, b, bptr_b, blk, holds, stampv, bs, lru, K, resb)
            m[e] = 0
        for q in range(nd):
            resb[drops[q]] = False
            bs[_NRESB] -= 1
        for k in range(ncur):
            i = cur[k]
            h = hit_of[i] if hit_mark[i] == j else 0
            chit[k] = h
            for p in range(m[i] // b, (m[i] + h) // b):
                x = blk[bptr_b[i] + p]
                if not resb[x]:
                    return (BROKEN, bptr, e_req, e_tok, e_hit, eptr, v_req, dptr, d_blk, start,
                            0, 0, 0, 0)
                _hold(x, holds, bs)
        ndec = 0
        for k in range(ncur):
            i = cur[k]
            mb[k] = m[i] + chit[k]
            if mb[k] + ctok[k] > S[i] or ctok[k] < 1:
                return (BROKEN, bptr, e_req, e_tok, e_hit, eptr, v_req, dptr, d_blk, start, 0,
                        0, 0, 0)
            decf[k] = chit[k] == 0 and mb[k] == S[i] - 1 and g[i] >= 1
            if decf[k]:
                ndec += 1
        for k in range(ncur):
            i = cur[k]
            m0 = m[i]
            m1 = mb[k] + ctok[k]
            kv += _private(i, m1, P, b) - _private(i, m0, P, b)
            for p in range(min(P[i], mb[k] // b), min(P[i], m1 // b)):
                x = blk[bptr_b[i] + p]
                if not resb[x]:
                    resb[x] = True
                    bs[_NRESB] += 1
                _hold(x, holds, bs)
            m[i] = m1
        if kv + b * bs[_NRESB] > M:
            return (BROKEN, bptr, e_req, e_tok, e_hit, eptr, v_req, dptr, d_blk, start, 0, 0,
                    0, 0)
        nfin = 0
        for k in range(ncur):
            i = cur[k]
            if m[i] == S[i]:
                g[i] += 1
                S[i] += 1
                if g[i] >= output[i]:
                    fin[nfin] = i
                    nfin += 1
        for k in range(nfin):
            i = fin[k]
            kv -= _private(i, m[i], P, b)
            _release(i, m[i], P, b, bptr_b, blk, holds, stampv, bs, lru, K, resb)
            m[i] = 0
        done += nfin
        dur = _price(ip, fc, ncur, cur, ctok, mb, decf, ndec)
        st_at = math.nan
        if idle:
            top = -math.inf
            for k in range(ncur):
                top = max(top, arr[cur[k]])
            for k in range(nev):
                top = max(top, arr[evl[k]])
            if ncur + nev == 0 or top < now:
                st_at = now
            idle = False
        # -- record the batch --
        if nbat + 1 >= bptr.size:
            bptr = _grow(bptr, nbat + 1)
            eptr = _grow(eptr, nbat + 1)
            dptr = _grow(dptr, nbat + 1)
        if nbat >= start.size:
            start = _grow(start, nbat)
        while ne + ncur > e_req.size:
            e_req = _grow(e_req, ne)
            e_tok = _grow(e_tok, ne)
            e_hit = _grow(e_hit, ne)
        while nv + nev > v_req.size:
            v_req = _grow(v_req, nv)
        while ndr + nd > d_blk.size:
            d_blk = _grow(d_blk, ndr)
        for k in range(ncur):
            e_req[ne + k] = cur[k]
            e_tok[ne + k] = ctok[k]
            e_hit[ne + k] = chit[k]
        ne += ncur
        for k in range(nev):
            v_req[nv + k] = evl[k]
        nv += nev
        for q in range(nd):
            d_blk[ndr + q] = drops[q]
        ndr += nd
        start[nbat] = st_at
        nbat += 1
        bptr[nbat] = ne
        eptr[nbat] = nv
        dptr[nbat] = ndr
        now = now + dur
        # -- UnifiedScheduler.on_batch_end --
        for k in range(nfin):
            i = fin[k]
            res[i] = 0
            resident[i] = False
            st[_NRES] -= 1
        for k in range(nev):
            i = evl[k]
            _heap_push(heap, st, rank_of[i])
            if partial[i]:
                partial[i] = False
                npartial -= 1
        for k in range(st[_NPRE]):
            i = pre_e[k]
            if resident[i] and not (g[i] >= 1 and m[i] == S[i] - 1):
                if not partial[i]:
                    partial[i] = True
                    npartial += 1
            elif partial[i]:
                partial[i] = False
                npartial -= 1
        na = 0
        for k in range(st[_NADM]):
            if resident[adm[k]]:
                adm[na] = adm[k]
                na += 1
        for k in range(1, na):  # admissions in rank order (LPM admits out of rank order)
            x = adm[k]
            q = k - 1
            while q >= 0 and rank_of[adm[q]] > rank_of[x]:
                adm[q + 1] = adm[q]
                q -= 1
            adm[q + 1] = x
        nc = 0
        ka = 0
        for k in range(nrun):
            i = run[k]
            if not resident[i]:
                continue
            while ka < na and rank_of[adm[ka]] < rank_of[i]:
                cand[nc] = adm[ka]
                nc += 1
                ka += 1
            cand[nc] = i
            nc += 1
        while ka < na:
            cand[nc] = adm[ka]
            nc += 1
            ka += 1
        # steady: a pure decode step of every running request, nothing else (``_repeats``)
        steady = ncur > 0 and ndec == ncur and nc == nrun and nev == 0 and nd == 0 \
            and nfin == 0 and st[_NADM] == 0 and st[_NPRE] == 0 and st[_USED] == used0
        run, cand = cand, run
        nrun = nc
    return (OK, bptr, e_req, e_tok, e_hit, eptr, v_req, dptr, d_blk, start, nbat, ne, nv, ndr)


_RULE_CODES = {"fcfs": 0, "lpm": 1}


def simulate_cached_fast(instance: Instance, policy: Any, limit: int) -> Schedule | None:
    """Run the kernel for a bound cached ``policy`` (module docstring); None when it does not
    apply (the Python path runs) or gives up (the Python path reports the error)."""
    ix = instance.prefix_index
    # the class itself names this kernel (not a subclass, which may change the rules)
    if not HAVE_NUMBA or ix is None or vars(type(policy)).get("fast_kernel") != "cached" \
            or policy.rule not in _RULE_CODES or policy.cache != "lru" \
            or policy.reserve != "input" or policy.order == "single" \
            or policy.decode_sort is not None or policy.waiting_evicts \
            or any(h in vars(policy) for h in ("bind", "on_arrivals", "next_batch",
                                               "on_batch_end")):
        return None
    cfg = fast_config(instance, _AsUnified(policy))
    if cfg is None:
        return None
    ip, fc = cfg
    xp = np.array([_RULE_CODES[policy.rule], policy.fcfs_above, policy.k], np.int64)
    arr = np.ascontiguousarray(instance.arrival, dtype=np.float64)
    order = np.argsort(arr, kind="stable")
    from ..runtime.numba_load import call

    out = call(simulate_cached, arr, arr[order], order,
               np.ascontiguousarray(instance.prompt, np.int64),
               np.ascontiguousarray(instance.output, np.int64),
               np.ascontiguousarray(policy.rank_of, np.int64),
               np.ascontiguousarray(policy.idx_of_rank, np.int64), ip, xp, fc,
               ix.ptr, ix.block, ix.listed, ix.shareable, ix.n_blocks, int(limit))
    (status, bptr, e_req, e_tok, e_hit, eptr, v_req, dptr, d_blk, start, nbat, ne, nv,
     ndr) = out
    if status != OK:
        return None
    e_hit = _trim(e_hit, ne)
    return Schedule(tuple(instance.ids), _trim(bptr, nbat + 1), _trim(e_req, ne),
                    _trim(e_tok, ne), _trim(eptr, nbat + 1), _trim(v_req, nv),
                    _trim(start, nbat), entry_hit=e_hit, drop_ptr=_trim(dptr, nbat + 1),
                    drop_block=ix.ids[_trim(d_blk, ndr)])


class _AsUnified:
    """A bound cached policy seen by :func:`optsched.policies.fast.fast_config` as the
    unified configuration it extends (for its integer and cost parameters)."""

    fast_kernel = "unified"

    def __init__(self, policy: Any):
        self.__dict__.update(vars(policy))


__all__ = ["simulate_cached", "simulate_cached_fast"]
