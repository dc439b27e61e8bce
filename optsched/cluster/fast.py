"""Compiled fast path of the router layer (:mod:`optsched.cluster.replicas`): replicas running
a policy of the unified family (vLLM, SARATHI and their Table-1 variants, FCFS, ... : the
policies whose compiled twin is :mod:`optsched.policies.fast`'s unified kernel, except
InferMax's histogram reservation) behind the routers ``rr``, ``lor``, ``least-kv`` and
``p2c``.

One numba driver runs the whole cluster: at each arrival (arrival order, ties in the
instance's order) it advances every engine to the arrival time batch by batch, then routes
the request from the engines' states, as :func:`~optsched.cluster.replicas.run_replicas` does
with its Python :class:`~optsched.cluster.engine.EngineRun` objects. The engines' state
lives in arrays: per request (``m``, ``S``, ``g``, reservations; a request lives on one
engine, so one row serves all) and per engine (one row each: the waiting heap, the running
list, the scalars of :mod:`optsched.policies.fast`'s ``st`` vector, clock, KV, counts). An
engine's turn is the single-engine kernel's loop body (the same helpers, imported), with
arrivals read from the requests routed to it.

The routers' rules are those of their modules (``rr.py``, ``lor.py``, ``least_kv.py``,
``p2c.py``): a router class opts in by naming its compiled rule (``fast_router``, on the
class itself, so a subclass that changes the rule falls back). ``p2c``'s draws are numpy's:
the number of engines that fit a request does not depend on the engines' state, so the
pairs are drawn before the run, in arrival order, from the router's own generator.

It is an implementation detail like the single-engine kernel: :func:`simulate_replicas_fast`
returns None when it does not apply (another policy, another cost model, block ids, a router
without a compiled rule, numba missing) or when the kernel gives up (a
stall, a livelock, a rule broken), and the Python path then runs and reports. Identity with
the Python path is tested batch for batch (``tests/cluster/test_fast.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..instance import Instance
from ..placement import Placement
from ..policies.fast import (
    _B,
    _BIG,
    _END,
    _HN,
    _KIND,
    _LONE,
    _M,
    _NADM,
    _NB,
    _NCUR,
    _NEV,
    _NPRE,
    _NRES,
    _ORDER,
    _PHASE,
    _PRE,
    _RESERVE,
    _TOK,
    _UNIFIED,
    _USED,
    BROKEN,
    HAVE_NUMBA,
    LIVELOCK,
    OK,
    STALLED,
    _build_seq,
    _cand_waiting,
    _fp,
    _grow,
    _heap_pop,
    _heap_push,
    _price,
    _run_seq,
    fast_config,
    njit,
)
from ..policies.simulator import Policy, known_outputs
from ..schedule import Schedule
from .base import Router

#: the compiled routing rules (a router class's ``fast_router``)
ROUTER_CODES = {"rr": 0, "lor": 1, "least-kv": 2, "p2c": 3}
#: kernel exit code: a request no engine fits (the Python path reports it)
NO_ENGINE = 4
#: per-engine scalars (``es`` columns): routed, handed to the policy, finished, finished by
#: the last batch, running count, partial prefills, idle flag, batches run
_ROUTED, _HANDED, _DONE, _LAST, _NRUN, _NPART, _IDLE, _NBAT = range(8)


# --- one engine's turn (simulator loop body, EngineRun.step) -----------------------------


@njit(cache=True, inline="always")
def _plan(st, heap, run, nrun, npartial, ip, m, S, g, prompt, known, res, resident, rank_of,
          idx_of_rank, seq, seq_dec, seq_rank, cur, ctok, evl, adm, pre_e, cum):
    """``UnifiedScheduler.next_batch`` on one engine (the single-engine kernel's plan step;
    ``cum`` is empty: no histogram reservation here, :func:`simulate_replicas_fast`)."""
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
        while st[_HN] > 0:
            if not _cand_waiting(idx_of_rank[heap[0]], 0, seq, st, ip, S, g, prompt, known, res,
                                 resident, cur, ctok, evl, pre_e, adm, cum, 0, 0.5):
                break
            _heap_pop(heap, st)
        _run_seq(0, nseq, seq, seq_dec, st, ip, m, S, res, resident, cur, ctok, evl, pre_e)
    elif ip[_ORDER] == 1:
        _run_seq(0, nseq, seq, seq_dec, st, ip, m, S, res, resident, cur, ctok, evl, pre_e)
        while st[_HN] > 0:
            if not _cand_waiting(idx_of_rank[heap[0]], st[_END], seq, st, ip, S, g, prompt,
                                 known, res, resident, cur, ctok, evl, pre_e, adm, cum, 0, 0.5):
                break
            _heap_pop(heap, st)
    else:
        for k in range(nseq):
            seq_rank[k] = rank_of[seq[k]]
        pos = 0
        closed = False
        while True:
            wr = heap[0] if (st[_HN] > 0 and not closed) else _BIG
            hi = min(np.searchsorted(seq_rank[:nseq], wr), st[_END])
            if pos < hi:
                pos = _run_seq(pos, hi, seq, seq_dec, st, ip, m, S, res, resident, cur, ctok,
                               evl, pre_e)
            elif wr < _BIG:
                if _cand_waiting(idx_of_rank[wr], pos, seq, st, ip, S, g, prompt, known, res,
                                 resident, cur, ctok, evl, pre_e, adm, cum, 0, 0.5):
                    _heap_pop(heap, st)
                else:
                    closed = True
            else:
                break


@njit(cache=True, inline="always")
def _batch_end(st, heap, run, nrun, npartial, ip, m, S, g, res, resident, partial, rank_of,
               cur, evl, adm, pre_e, fin, nfin, cand):
    """``UnifiedScheduler.on_batch_end`` on one engine; returns ``(running, partial)``
    counts (the new running list is written back into ``run``)."""
    b = ip[_B]
    for k in range(nfin):
        i = fin[k]
        st[_USED] -= _fp(res[i], b)
        res[i] = 0
        resident[i] = False
        st[_NRES] -= 1
    for k in range(st[_NEV]):
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
    nc = 0
    ka = 0
    for k in range(nrun):  # the old run and the admitted, both in rank order: merged
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
    for k in range(nc):
        run[k] = cand[k]
    return nc, npartial


# --- routing (rr.py, lor.py, least_kv.py, p2c.py) ----------------------------------------


@njit(cache=True, inline="always")
def _outstanding(es, now, k, t):
    """``EngineRun.outstanding``: routed, not finished by ``t`` (the last batch's finishes
    count once it ended)."""
    late = es[k, _LAST] if now[k] > t else 0
    return es[k, _ROUTED] - es[k, _DONE] + late


@njit(cache=True)
def _route(code, i, t, fit, es, now, kv, kv_prev, Mcap, counter, pairs):
    """The engine for request ``i`` arriving at ``t`` (-1: no engine fits it)."""
    E = fit.shape[1]
    first = -1
    for k in range(E):
        if fit[i, k]:
            first = k
            break
    if first < 0:
        return -1
    if code == 0:  # rr: engine counter mod R, else the next (cyclically) that fits
        k = counter % E
        if fit[i, k]:
            return k
        for c in range(k + 1, E):
            if fit[i, c]:
                return c
        return first
    if code == 3:  # p2c: the two drawn candidates (pairs[i] = positions among candidates)
        if pairs[i, 0] < 0:
            return first
        a = b = -1
        q = 0
        for c in range(E):
            if fit[i, c]:
                if q == pairs[i, 0]:
                    a = c
                if q == pairs[i, 1]:
                    b = c
                q += 1
        oa, ob = _outstanding(es, now, a, t), _outstanding(es, now, b, t)
        if oa < ob or (oa == ob and a < b):
            return a
        return b
    best = -1
    bo = 0
    bl = 0.0
    for c in range(E):  # lor: (outstanding, position); least-kv: (KV / M, outstanding, position)
        if not fit[i, c]:
            continue
        o = _outstanding(es, now, c, t)
        load = 0.0
        if code == 2:
            load = (kv_prev[c] if now[c] > t else kv[c]) / Mcap[c]
        if best < 0 or load < bl or (load == bl and o < bo):
            best, bo, bl = c, o, load
    return best


# --- the driver ------------------------------------------------------------------------


@njit(cache=True)
def _simulate_cluster(arr, order, prompt, output, known, rank_of, idx_of_rank, ip2, fc2, Mcap,
                      fit, code, pairs, limit):
    """Route and run every request (module docstring). Returns ``(status, engine, start,
    stated, bptr, e_req, e_tok, eptr, v_req, nbat, ne, nv)``: the batches in the order they
    ran (each engine's in its own order), their columns' buffers used up to the counts."""
    n = prompt.size
    E = ip2.shape[0]
    S = prompt.copy()
    m = np.zeros(n, np.int64)
    g = np.zeros(n, np.int64)
    res = np.zeros(n, np.int64)
    resident = np.zeros(n, np.bool_)
    partial = np.zeros(n, np.bool_)
    # per engine rows
    heap = np.empty((E, n + 1), np.int64)
    run = np.empty((E, n), np.int64)
    pend = np.empty((E, n), np.int64)  # requests routed to the engine, in arrival order
    st = np.zeros((E, 15), np.int64)
    st[:, _LONE] = -1
    es = np.zeros((E, 8), np.int64)
    now = np.zeros(E, np.float64)
    kv = np.zeros(E, np.int64)
    kv_prev = np.zeros(E, np.int64)
    # per batch scratch (one engine plans at a time)
    seq = np.empty(n, np.int64)
    seq_dec = np.empty(n, np.bool_)
    seq_rank = np.empty(n, np.int64)
    cur = np.empty(n, np.int64)
    ctok = np.empty(n, np.int64)
    mb = np.empty(n, np.int64)
    decf = np.empty(n, np.bool_)
    evl = np.empty(n, np.int64)
    adm = np.empty(n, np.int64)
    pre_e = np.empty(n, np.int64)
    fin = np.empty(n, np.int64)
    cand = np.empty(n, np.int64)
    cum = np.empty(0, np.int64)
    # output: batches in the order they ran
    cap_b = max(16, int(output.sum()) + n)
    b_eng = np.empty(cap_b, np.int64)
    b_start = np.empty(cap_b, np.float64)
    b_stated = np.empty(cap_b, np.bool_)
    bptr = np.empty(cap_b + 1, np.int64)
    eptr = np.empty(cap_b + 1, np.int64)
    bptr[0] = 0
    eptr[0] = 0
    e_req = np.empty(max(16, int(output.sum()) + 2 * n), np.int64)
    e_tok = np.empty(e_req.size, np.int64)
    v_req = np.empty(16, np.int64)
    nbat = 0
    ne = 0
    nv = 0
    counter = 0
    for a in range(n + 1):
        t = arr[order[a]] if a < n else math.inf
        for k in range(E):
            ipk = ip2[k]
            stk = st[k]
            heapk = heap[k]
            runk = run[k]
            pendk = pend[k]
            b = ipk[_B]
            while now[k] < t and es[k, _DONE] < es[k, _ROUTED]:
                # hand over the routed requests that have arrived (EngineRun._hand_arrivals)
                p = es[k, _HANDED]
                while p < es[k, _ROUTED] and arr[pendk[p]] <= now[k]:
                    _heap_push(heapk, stk, rank_of[pendk[p]])
                    p += 1
                es[k, _HANDED] = p
                _plan(stk, heapk, runk, es[k, _NRUN], es[k, _NPART], ipk, m, S, g, prompt, known,
                      res, resident, rank_of, idx_of_rank, seq, seq_dec, seq_rank, cur, ctok,
                      evl, adm, pre_e, cum)
                ncur = stk[_NCUR]
                nev = stk[_NEV]
                if ncur == 0 and nev == 0:
                    if p < es[k, _ROUTED]:  # idle: the clock jumps to the next routed arrival
                        nxt = arr[pendk[p]]
                        now[k] = max(now[k], nxt)
                        es[k, _IDLE] = 1
                        if nxt < t:
                            continue
                    break  # parked: the policy waits for a request not yet routed here
                if es[k, _NBAT] >= limit:
                    return LIVELOCK, b_eng, b_start, b_stated, bptr, e_req, e_tok, eptr, \
                        v_req, 0, 0, 0
                # -- apply the plan (semantics section 3; EngineRun._apply) --
                kvk = kv[k]
                for q in range(nev):
                    e = evl[q]
                    if m[e] <= 0:
                        return BROKEN, b_eng, b_start, b_stated, bptr, e_req, e_tok, eptr, \
                            v_req, 0, 0, 0
                    kvk -= _fp(m[e], b)
                    m[e] = 0
                nd = 0
                for q in range(ncur):
                    i = cur[q]
                    c = ctok[q]
                    if m[i] + c > S[i] or c < 1:
                        return BROKEN, b_eng, b_start, b_stated, bptr, e_req, e_tok, eptr, \
                            v_req, 0, 0, 0
                    mb[q] = m[i]
                    decf[q] = m[i] == S[i] - 1 and g[i] >= 1
                    if decf[q]:
                        nd += 1
                for q in range(ncur):
                    i = cur[q]
                    ma = mb[q] + ctok[q]
                    m[i] = ma
                    kvk += _fp(ma, b) - _fp(mb[q], b)
                if kvk > ipk[_M]:
                    return BROKEN, b_eng, b_start, b_stated, bptr, e_req, e_tok, eptr, \
                        v_req, 0, 0, 0
                nfin = 0
                for q in range(ncur):
                    i = cur[q]
                    if m[i] == S[i]:
                        g[i] += 1
                        S[i] += 1
                        if g[i] >= output[i]:
                            fin[nfin] = i
                            nfin += 1
                for q in range(nfin):
                    i = fin[q]
                    kvk -= _fp(m[i], b)
                    m[i] = 0
                dur = _price(ipk, fc2[k], ncur, cur, ctok, mb, decf, nd)
                start = now[k]
                stated = False
                if es[k, _IDLE]:
                    top = -math.inf
                    for q in range(ncur):
                        top = max(top, arr[cur[q]])
                    for q in range(nev):
                        top = max(top, arr[evl[q]])
                    stated = top < start
                    es[k, _IDLE] = 0
                # -- record the batch --
                if nbat + 1 >= bptr.size:
                    bptr = _grow(bptr, nbat + 1)
                    eptr = _grow(eptr, nbat + 1)
                if nbat >= b_eng.size:
                    b_eng = _grow(b_eng, nbat)
                    b_start = _grow(b_start, nbat)
                    b_stated = _grow(b_stated, nbat)
                while ne + ncur > e_req.size:
                    e_req = _grow(e_req, ne)
                    e_tok = _grow(e_tok, ne)
                while nv + nev > v_req.size:
                    v_req = _grow(v_req, nv)
                for q in range(ncur):
                    e_req[ne + q] = cur[q]
                    e_tok[ne + q] = ctok[q]
                ne += ncur
                for q in range(nev):
                    v_req[nv + q] = evl[q]
                nv += nev
                b_eng[nbat] = k
                b_start[nbat] = start
                b_stated[nbat] = stated
                nbat += 1
                bptr[nbat] = ne
                eptr[nbat] = nv
                es[k, _NBAT] += 1
                kv_prev[k] = kv[k]
                kv[k] = kvk
                es[k, _DONE] += nfin
                es[k, _LAST] = nfin
                now[k] = start + dur
                es[k, _NRUN], es[k, _NPART] = _batch_end(
                    stk, heapk, runk, es[k, _NRUN], es[k, _NPART], ipk, m, S, g, res, resident,
                    partial, rank_of, cur, evl, adm, pre_e, fin, nfin, cand)
        if a == n:
            break
        i = order[a]
        k = _route(code, i, t, fit, es, now, kv, kv_prev, Mcap, counter, pairs)
        counter += 1
        if k < 0:
            return NO_ENGINE, b_eng, b_start, b_stated, bptr, e_req, e_tok, eptr, v_req, 0, 0, 0
        pend[k, es[k, _ROUTED]] = i
        es[k, _ROUTED] += 1
    for k in range(E):
        if es[k, _DONE] < es[k, _ROUTED]:
            return STALLED, b_eng, b_start, b_stated, bptr, e_req, e_tok, eptr, v_req, 0, 0, 0
    return OK, b_eng, b_start, b_stated, bptr, e_req, e_tok, eptr, v_req, nbat, ne, nv


@njit(cache=True)
def _merge(E, b_eng, b_start, b_stated, bptr, e_req, e_tok, eptr, v_req, nbat, ne, nv):
    """The batches by start time, then engine position, then each engine's own order
    (:func:`optsched.cluster.replicas.merge`), as a schedule's columns with the starts
    stated only where they must be (NaN elsewhere); plus each batch's engine."""
    cnt = np.zeros(E + 1, np.int64)
    for j in range(nbat):
        cnt[b_eng[j] + 1] += 1
    for k in range(E):
        cnt[k + 1] += cnt[k]
    byeng = np.empty(nbat, np.int64)  # each engine's batches, in its order
    fill = cnt[:E].copy()
    for j in range(nbat):
        k = b_eng[j]
        byeng[fill[k]] = j
        fill[k] += 1
    head = cnt[:E].copy()
    hs = np.full(E, math.inf)  # the start of each engine's next batch (inf: none left)
    for k in range(E):
        if head[k] < cnt[k + 1]:
            hs[k] = b_start[byeng[head[k]]]
    o_bptr = np.empty(nbat + 1, np.int64)
    o_eptr = np.empty(nbat + 1, np.int64)
    o_req = np.empty(ne, np.int64)
    o_tok = np.empty(ne, np.int64)
    o_ev = np.empty(nv, np.int64)
    o_start = np.empty(nbat, np.float64)
    o_eng = np.empty(nbat, np.int64)
    o_bptr[0] = 0
    o_eptr[0] = 0
    pe = 0
    pv = 0
    for out in range(nbat):
        best = 0
        for k in range(1, E):  # the lowest (start, position) among the engines' next batches
            if hs[k] < hs[best]:
                best = k
        j = byeng[head[best]]
        head[best] += 1
        hs[best] = b_start[byeng[head[best]]] if head[best] < cnt[best + 1] else math.inf
        for q in range(bptr[j], bptr[j + 1]):
            o_req[pe] = e_req[q]
            o_tok[pe] = e_tok[q]
            pe += 1
        for q in range(eptr[j], eptr[j + 1]):
            o_ev[pv] = v_req[q]
            pv += 1
        o_bptr[out + 1] = pe
        o_eptr[out + 1] = pv
        o_start[out] = b_start[j] if b_stated[j] else math.nan
        o_eng[out] = best
    return o_bptr, o_req, o_tok, o_eptr, o_ev, o_start, o_eng


# --- the entry point ---------------------------------------------------------------------


def _fits(instance: Instance, fits: Sequence[Sequence[int]]) -> np.ndarray:
    out = np.zeros((instance.n, instance.n_engines), np.bool_)
    for i, ks in enumerate(fits):
        out[i, list(ks)] = True
    return out


def _pairs(router: Router, fit: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``p2c``'s draws, made before the run: per request (arrival order) with more than one
    engine that fits it, the two positions among those engines (-1: no draw), from a
    generator seeded as the router seeds its own (:class:`~optsched.cluster.p2c.PowerOfTwo`)."""
    pairs = np.full((fit.shape[0], 2), -1, np.int64)
    if router.name != "p2c":
        return pairs
    rng = np.random.default_rng(router.seed)  # type: ignore[attr-defined]
    counts = fit.sum(axis=1)
    for i in order.tolist():
        if counts[i] > 1:
            pairs[i] = rng.choice(int(counts[i]), size=2, replace=False)
    return pairs


def simulate_replicas_fast(instance: Instance, policies: Sequence[Policy], router: Router,
                           fits: Sequence[Sequence[int]]) -> Schedule | None:
    """The cluster schedule of ``policies`` (one per engine, bound to
    ``instance.for_engine(k)``) behind ``router``, or None when the compiled path does not
    apply or gives up (module docstring)."""
    code = ROUTER_CODES.get(vars(type(router)).get("fast_router", ""))
    if not HAVE_NUMBA or code is None or instance.has_prefix:
        return None  # block ids: the Python path decides what a cluster does with them
    cfgs = [fast_config(instance.for_engine(k), p) for k, p in enumerate(policies)]
    if any(c is None or c[0][_KIND] != _UNIFIED or c[0][_RESERVE] == 2 for c in cfgs):
        return None
    p0 = policies[0]
    known = known_outputs(instance, p0.hypothetical, p0.output_fallback)
    for p in policies[1:]:  # one walk order and one view of outputs for every engine
        if (p.hypothetical, p.output_fallback) != (p0.hypothetical, p0.output_fallback):
            return None
    ip2 = np.stack([c[0] for c in cfgs])  # type: ignore[index]
    fc2 = np.stack([c[1] for c in cfgs])  # type: ignore[index]
    arr = np.ascontiguousarray(instance.arrival, dtype=np.float64)
    order = np.argsort(arr, kind="stable")
    fit = _fits(instance, fits)
    Mcap = np.array([instance.engine(k).limits.kv_capacity  # type: ignore[union-attr]
                     for k in range(instance.n_engines)], np.int64)
    limit = 50 * (int(instance.output.sum()) + int(instance.prompt.sum())) + 1000
    from ..runtime.numba_load import call

    out = call(_simulate_cluster, arr, order, np.ascontiguousarray(instance.prompt, np.int64),
               np.ascontiguousarray(instance.output, np.int64),
               np.ascontiguousarray(known, np.int64),
               np.ascontiguousarray(p0.rank_of, np.int64),  # type: ignore[attr-defined]
               np.ascontiguousarray(p0.idx_of_rank, np.int64),  # type: ignore[attr-defined]
               ip2, fc2, Mcap, fit, code, _pairs(router, fit, order), int(limit))
    status, b_eng, b_start, b_stated, bptr, e_req, e_tok, eptr, v_req, nbat, ne, nv = out
    if status != OK:
        return None
    cols = call(_merge, instance.n_engines, b_eng, b_start, b_stated, bptr, e_req, e_tok, eptr,
                v_req, nbat, ne, nv)
    o_bptr, o_req, o_tok, o_eptr, o_ev, o_start, o_eng = cols
    sched = Schedule(tuple(instance.ids), o_bptr, o_req, o_tok, o_eptr, o_ev, o_start)
    placement = Placement(tuple(instance.engine_ids), o_eng, np.zeros(nbat + 1, np.int64),
                          np.zeros(0, np.int64), np.zeros(0, np.int64))
    return sched.with_placement(placement)


__all__ = ["ROUTER_CODES", "simulate_replicas_fast"]
