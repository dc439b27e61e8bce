"""One-pass compiled replay for :func:`optsched.evaluate` (an implementation detail).

The kernel walks a schedule once, batch by batch and entry by entry, with the state of
semantics section 3 per request (``S``, ``m``, ``g``): evictions first, then entries; KV
in use after each batch (requests finishing in it still count, freed one batch later);
batch times with the cost model's own floating-point operations (``LinearCost.batch_times``
/ ``UnitCost``: per-entry terms summed in entry order, then ``k0``, ``kpb``, ``kdb``); batch
ends ``end_j = max(end_{j-1}, r_j) + d_j`` (section 4) in the evaluator's form
``D_j + max_{k<=j}(r_k - D_{k-1})``, so every array is equal to the vectorised replay's
to the last bit.

It checks every rule of the violation table that applies to a schedule without swaps or
hidden cache (with prefix reuse, :func:`replay_prefix`, also HIT_INVALID, HIT_NOT_RESIDENT,
DUPLICATE_DROP, DROP_NOT_RESIDENT and DROP_REFERENCED): UNKNOWN_REQUEST (before the
kernel), ZERO_TOKENS, TOKENS_OVER_AVAILABLE,
DUPLICATE_ENTRY, DUPLICATE_EVICTION, EVICT_AND_PROCESS, EVICT_NOT_RESIDENT,
ENTRY_AFTER_FINISH, KV_OVERFLOW, BATCH_TOKENS, PREFILL_TOKENS, BATCH_SIZE, INCOMPLETE (in
the kernel), START_TOO_EARLY and BEFORE_ARRIVAL (the evaluator's own check, after it). On
the first broken rule it stops and :func:`evaluate` runs the vectorised replay, which
reports every violation: the compiled path only ever answers for feasible schedules.
Schedules with swaps or hidden-cache entries, instances with those extensions, other cost
models and a missing numba always take the vectorised path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..cost import LinearCost, UnitCost
from ..instance import Instance
from ..schedule import Schedule

try:
    from numba import njit
    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - only without numba
    HAVE_NUMBA = False

    def njit(*args: Any, **kwargs: Any) -> Any:  # type: ignore[no-redef]
        def wrap(f: Any) -> Any:
            return f
        return wrap


@njit(cache=True)
def _fp(x, b):
    if b == 1:
        return x
    return -((-x) // b) * b


@njit(cache=True)
def replay(bptr, e_req, e_tok, vptr, v_req, stated, arr, prompt, output, M, C, P, maxbs, b,
           cost, fc):
    """The one-pass replay; returns ``ok`` and the arrays :func:`evaluate` reports (section 3
    state, section 4 clock). ``ok`` is False at the first broken rule (P, maxbs < 0: no
    limit)."""
    n = prompt.size
    nb = stated.size
    ne = e_req.size
    S = prompt.copy()
    m = np.zeros(n, np.int64)
    g = np.zeros(n, np.int64)
    seen_e = np.full(n, -1, np.int64)  # last batch with an entry / eviction of the request
    seen_v = np.full(n, -1, np.int64)
    first_b = np.full(n, -1, np.int64)
    done_b = np.full(n, -1, np.int64)
    n_evict = np.zeros(n, np.int64)
    recomputed = np.zeros(n, np.int64)
    ent_decode = np.zeros(ne, np.bool_)
    ent_cached = np.zeros(ne, np.int64)
    ent_gen = np.zeros(ne, np.bool_)  # the entry generated a token (m reached S)
    dur = np.zeros(nb, np.float64)
    kv_b = np.zeros(nb, np.int64)
    tok_b = np.zeros(nb, np.int64)
    pre_tok_b = np.zeros(nb, np.int64)
    pre_ent_b = np.zeros(nb, np.int64)
    dec_ent_b = np.zeros(nb, np.int64)
    end = np.zeros(nb, np.float64)
    k0, k1, kpq, kpm, kpl, kpr, kdm, kdr, kpb, kdb = (fc[0], fc[1], fc[2], fc[3], fc[4],
                                                     fc[5], fc[6], fc[7], fc[8], fc[9])
    kv = 0
    freed_next = 0  # KV of requests that finished in the previous batch
    D = 0.0  # cumulative durations
    run_max = -np.inf  # max_k (r_k - D_{k-1})
    bad = (False, dur, kv_b, tok_b, pre_tok_b, pre_ent_b, dec_ent_b, end, ent_decode,
           ent_cached, first_b, done_b, g, n_evict, recomputed, ent_gen)
    for j in range(nb):
        kv -= freed_next
        freed_next = 0
        r = -np.inf
        for k in range(vptr[j], vptr[j + 1]):
            i = v_req[k]
            if seen_v[i] == j or m[i] == 0 or g[i] >= output[i]:
                return bad
            seen_v[i] = j
            r = max(r, arr[i])
            kv -= _fp(m[i], b)
            n_evict[i] += 1
            recomputed[i] += m[i]
            m[i] = 0
        t = 0.0
        has_pre = False
        has_dec = False
        for k in range(bptr[j], bptr[j + 1]):
            i = e_req[k]
            c = e_tok[k]
            if c <= 0 or seen_e[i] == j or seen_v[i] == j or g[i] >= output[i]:
                return bad
            seen_e[i] = j
            mb = m[i]
            if c > S[i] - mb:
                return bad
            r = max(r, arr[i])
            dec = g[i] >= 1 and mb == S[i] - 1
            ent_decode[k] = dec
            ent_cached[k] = mb
            cf = float(c)
            mf = float(mb)
            if dec:
                has_dec = True
                dec_ent_b[j] += 1
                t += k1 * cf + (kdm * mf + kdr)
            else:
                has_pre = True
                pre_ent_b[j] += 1
                pre_tok_b[j] += c
                t += k1 * cf + (kpq * cf * cf + kpm * cf * mf + kpl * mf + kpr)
            tok_b[j] += c
            ma = mb + c
            m[i] = ma
            kv += _fp(ma, b) - _fp(mb, b)
            if ma == S[i]:
                ent_gen[k] = True
                g[i] += 1
                S[i] += 1
                if g[i] == 1:
                    first_b[i] = j
                if g[i] >= output[i]:
                    done_b[i] = j
                    freed_next += _fp(ma, b)
                    m[i] = 0
        nent = bptr[j + 1] - bptr[j]
        if kv > M or tok_b[j] > C or (P >= 0 and pre_tok_b[j] > P) \
                or (maxbs >= 0 and nent > maxbs):
            return bad
        kv_b[j] = kv
        if cost == 0:
            d = 1.0 if nent > 0 else 0.0
        else:
            d = t
            if nent > 0:
                d += k0
            if kpb != 0.0 and has_pre:
                d += kpb
            if kdb != 0.0 and has_dec:
                d += kdb
        dur[j] = d
        # section 4: r_j = max(latest arrival touched, stated start, 0)
        if not np.isnan(stated[j]):
            r = max(r, stated[j])
        r = max(r, 0.0)
        D += d
        run_max = max(run_max, r - (D - d))  # the evaluator's D_j - d_j, rounding included
        end[j] = D + run_max
    for i in range(n):
        if g[i] < output[i]:
            return bad
    return (True, dur, kv_b, tok_b, pre_tok_b, pre_ent_b, dec_ent_b, end, ent_decode,
            ent_cached, first_b, done_b, g, n_evict, recomputed, ent_gen)


@njit(cache=True)
def replay_prefix(bptr, e_req, e_tok, e_hit, vptr, v_req, dptr, d_blk, stated, arr, prompt,
                  output, M, C, P, maxbs, b, cost, fc, blk_ptr, blk, listed, shareable, K):
    """:func:`replay` with prefix reuse (docs/semantics.md section 6, "Prefix reuse"): per
    batch, evictions release their held blocks, drops (dense ids, -1 unknown) leave the
    resident set, hits hold resident blocks (checked against the set before this batch's
    entries), computed tokens complete blocks, KV = ``b * |R|`` + private tokens, finishers
    release after the batch. Also returns, per batch, the resident and cached blocks and the
    drops, and per request the hit tokens. ``ok`` is False at the first broken rule."""
    n = prompt.size
    nb = stated.size
    ne = e_req.size
    S = prompt.copy()
    m = np.zeros(n, np.int64)
    g = np.zeros(n, np.int64)
    seen_e = np.full(n, -1, np.int64)
    seen_v = np.full(n, -1, np.int64)
    first_b = np.full(n, -1, np.int64)
    done_b = np.full(n, -1, np.int64)
    n_evict = np.zeros(n, np.int64)
    recomputed = np.zeros(n, np.int64)
    hit_req = np.zeros(n, np.int64)
    ent_decode = np.zeros(ne, np.bool_)
    ent_cached = np.zeros(ne, np.int64)
    ent_gen = np.zeros(ne, np.bool_)
    dur = np.zeros(nb, np.float64)
    kv_b = np.zeros(nb, np.int64)
    tok_b = np.zeros(nb, np.int64)
    pre_tok_b = np.zeros(nb, np.int64)
    pre_ent_b = np.zeros(nb, np.int64)
    dec_ent_b = np.zeros(nb, np.int64)
    res_b = np.zeros(nb, np.int64)
    cac_b = np.zeros(nb, np.int64)
    drop_b = np.zeros(nb, np.int64)
    end = np.zeros(nb, np.float64)
    resb = np.zeros(K, np.bool_)
    holds = np.zeros(K, np.int64)
    dmark = np.full(K, -1, np.int64)
    pend = np.empty(n, np.int64)  # requests that finished in the previous batch
    npend = 0
    n_res = 0
    n_held = 0
    k0, k1, kpq, kpm, kpl, kpr, kdm, kdr, kpb, kdb = (fc[0], fc[1], fc[2], fc[3], fc[4],
                                                     fc[5], fc[6], fc[7], fc[8], fc[9])
    kv = 0  # private KV
    freed_next = 0
    D = 0.0
    run_max = -np.inf
    bad = (False, dur, kv_b, tok_b, pre_tok_b, pre_ent_b, dec_ent_b, end, ent_decode,
           ent_cached, first_b, done_b, g, n_evict, recomputed, ent_gen, hit_req, res_b, cac_b,
           drop_b)
    for j in range(nb):
        kv -= freed_next
        freed_next = 0
        for q in range(npend):  # rule 5: the finishers of the previous batch release
            i = pend[q]
            for p in range(min(listed[i], m[i] // b)):
                x = blk[blk_ptr[i] + p]
                holds[x] -= 1
                if holds[x] == 0:
                    n_held -= 1
            m[i] = 0
        npend = 0
        r = -np.inf
        for k in range(vptr[j], vptr[j + 1]):
            i = v_req[k]
            if seen_v[i] == j or m[i] == 0 or g[i] >= output[i]:
                return bad
            seen_v[i] = j
            r = max(r, arr[i])
            f = min(listed[i], m[i] // b)
            kv -= _fp(m[i] - b * f, b)
            for p in range(f):
                x = blk[blk_ptr[i] + p]
                holds[x] -= 1
                if holds[x] == 0:
                    n_held -= 1
            n_evict[i] += 1
            recomputed[i] += m[i]
            m[i] = 0
        for k in range(dptr[j], dptr[j + 1]):  # rule 2
            x = d_blk[k]
            if x < 0 or not resb[x] or holds[x] > 0 or dmark[x] == j:
                return bad
            dmark[x] = j
            resb[x] = False
            n_res -= 1
            drop_b[j] += 1
        for k in range(bptr[j], bptr[j + 1]):  # rule 3: the hits, against R after the drops
            h = e_hit[k]
            if h == 0:
                continue
            i = e_req[k]
            mi = m[i]
            if mi % b or h % b or mi + h > b * shareable[i]:
                return bad
            for p in range(mi // b, (mi + h) // b):
                x = blk[blk_ptr[i] + p]
                if not resb[x]:
                    return bad
        t = 0.0
        has_pre = False
        has_dec = False
        for k in range(bptr[j], bptr[j + 1]):
            i = e_req[k]
            c = e_tok[k]
            h = e_hit[k]
            if c <= 0 or seen_e[i] == j or seen_v[i] == j or g[i] >= output[i]:
                return bad
            seen_e[i] = j
            m0 = m[i]
            mb = m0 + h
            if c > S[i] - mb:
                return bad
            r = max(r, arr[i])
            dec = h == 0 and g[i] >= 1 and mb == S[i] - 1
            ent_decode[k] = dec
            ent_cached[k] = mb
            cf = float(c)
            mf = float(mb)
            if dec:
                has_dec = True
                dec_ent_b[j] += 1
                t += k1 * cf + (kdm * mf + kdr)
            else:
                has_pre = True
                pre_ent_b[j] += 1
                pre_tok_b[j] += c
                t += k1 * cf + (kpq * cf * cf + kpm * cf * mf + kpl * mf + kpr)
            tok_b[j] += c
            hit_req[i] += h
            ma = mb + c
            f0 = min(listed[i], m0 // b)
            f2 = min(listed[i], ma // b)
            for p in range(f0, f2):  # hit blocks held, completed blocks join R
                x = blk[blk_ptr[i] + p]
                if not resb[x]:
                    resb[x] = True
                    n_res += 1
                if holds[x] == 0:
                    n_held += 1
                holds[x] += 1
            kv += _fp(ma - b * f2, b) - _fp(m0 - b * f0, b)
            m[i] = ma
            if ma == S[i]:
                ent_gen[k] = True
                g[i] += 1
                S[i] += 1
                if g[i] == 1:
                    first_b[i] = j
                if g[i] >= output[i]:
                    done_b[i] = j
                    freed_next += _fp(ma - b * f2, b)
                    pend[npend] = i
                    npend += 1
        nent = bptr[j + 1] - bptr[j]
        total = kv + b * n_res
        if total > M or tok_b[j] > C or (P >= 0 and pre_tok_b[j] > P) \
                or (maxbs >= 0 and nent > maxbs):
            return bad
        kv_b[j] = total
        res_b[j] = n_res
        cac_b[j] = n_res - n_held
        if cost == 0:
            d = 1.0 if nent > 0 else 0.0
        else:
            d = t
            if nent > 0:
                d += k0
            if kpb != 0.0 and has_pre:
                d += kpb
            if kdb != 0.0 and has_dec:
                d += kdb
        dur[j] = d
        if not np.isnan(stated[j]):
            r = max(r, stated[j])
        r = max(r, 0.0)
        D += d
        run_max = max(run_max, r - (D - d))
        end[j] = D + run_max
    for i in range(n):
        if g[i] < output[i]:
            return bad
    return (True, dur, kv_b, tok_b, pre_tok_b, pre_ent_b, dec_ent_b, end, ent_decode,
            ent_cached, first_b, done_b, g, n_evict, recomputed, ent_gen, hit_req, res_b, cac_b,
            drop_b)


@njit(cache=True)
def token_gaps(e_req, bptr, ent_gen, end, n):
    """Per request the longest gap between its consecutive generated tokens (0 with fewer
    than two) and every gap of the run in schedule order: one pass over the entries, whose
    batches are in order (semantics section 4, ``max_tbt`` / ``p99_tbt``)."""
    last = np.full(n, -1.0)
    seen = np.zeros(n, np.bool_)
    longest = np.zeros(n, np.float64)
    gaps = np.empty(bptr[-1], np.float64)
    ng = 0
    for j in range(bptr.size - 1):
        t = end[j]
        for k in range(bptr[j], bptr[j + 1]):
            if not ent_gen[k]:
                continue
            i = e_req[k]
            if seen[i]:
                gap = t - last[i]
                gaps[ng] = gap
                ng += 1
                if gap > longest[i]:
                    longest[i] = gap
            seen[i] = True
            last[i] = t
    return longest, gaps[:ng]


def applies(inst: Instance, s: Schedule) -> bool:
    """Whether the compiled replay may answer for ``s`` (module docstring)."""
    lim = inst.limits
    return (HAVE_NUMBA and type(inst.cost_model) in (UnitCost, LinearCost)
            and not s.has_swaps and not s.has_hidden and not lim.hidden_cache
            and not lim.swapping)


def cost_params(inst: Instance) -> tuple[int, np.ndarray]:
    cm = inst.cost_model
    if isinstance(cm, LinearCost):
        return 1, np.array([cm.k0, cm.k1, cm.kpq, cm.kpm, cm.kpl, cm.kpr, cm.kdm, cm.kdr,
                            cm.kpb, cm.kdb], np.float64)
    return 0, np.zeros(10)


__all__ = ["replay", "replay_prefix", "applies", "cost_params", "token_gaps", "HAVE_NUMBA"]
