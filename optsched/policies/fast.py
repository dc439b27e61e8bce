"""Compiled fast path of the simulator for :class:`~optsched.policies.unified.UnifiedScheduler`
(vLLM, SARATHI and their Table-1 variants, the ``-ef`` variants, the ranking schedulers,
InferMax, FCFS), :class:`~optsched.policies.mcsf.MCSF` (MC-SF, and SVF and WAIT, which are
MC-SF with another admission key, or per-type queues and quotas, and A_min, MC-SF on moving
estimates) and
:class:`~optsched.policies.alpha.AlphaProtection` (alpha-greedy, alpha-beta-clearing).

One numba kernel runs the whole loop of :func:`~optsched.policies.simulator.simulate_policy`
(arrival gating, ``GETNEXTBATCH`` of InferMax Algorithm 1 as :mod:`.unified` implements it
or MC-SF's equation-(1) admissions as :mod:`.mcsf` does, or the alpha-protection rules of
:mod:`.alpha`, whose beta-clearing draws from a copy of the policy's own numpy generator, so
the draws are numpy's),
the rules of semantics section 3 applied to the plan, batch pricing with the cost model's own
arithmetic, idle-clock jumps and stated starts) and returns the schedule's columns. It is an
implementation detail: :func:`simulate_policy` uses it when :func:`fast_config` accepts the
policy and instance, and otherwise (a user policy, a subclass, another cost model, decision
statistics asked for, numba missing) runs the Python path, which stays the reference. Any
rule the kernel finds broken (a stall, a livelock, a plan exceeding ``M``) makes it give up,
and the Python path then raises its usual :class:`SimulationError`.

Identity with the Python path is tested batch for batch (``tests/policies/test_fast.py``): the
kernel mirrors each Python decision in the same order; ``_decode_block`` of the Python policy
is a vectorised form of calling ``_cand_running`` on each decode in turn (a prefix of
non-negative needs fits iff each fits after the previous), which is what the kernel does,
including its "exact" shortcut (block size 1, ``reserve="input"``: each decode reserves one
more token, ``res += 1``). That shortcut assumes ``res == m`` for a running decode, which
fails after a refill whose last chunk stops one token short (``res = S = m + 1``): the
request then holds one token more reservation than ``max(res, m + 1)`` until it finishes.
The kernel repeats it so the schedules stay identical; it only holds back admissions by a
token, never breaks ``M``.
Speed: the per-batch helpers of the unified walk are inlined
(``inline="always"``) and a running candidate that ``_cand_running`` would refuse at once
(the other phase of a non-hybrid batch, a full batch) is skipped without the call: each call
of a helper increments and decrements the reference count of every array it is passed
(atomic operations), which on the vLLM schedule of the Azure conversation trace took about
a third of the kernel's time.
Floating-point prices repeat :meth:`LinearCost.batch_times` / ``decode_batch_time``
operation for operation (numba does not contract to FMA without ``fastmath``), so the
clocks, hence arrival gating and stated starts, are equal to the last bit.
"""

from __future__ import annotations

import copy
import math
import time
from typing import Any

import numpy as np

from ..cost import LinearCost, UnitCost
from ..instance import Instance
from ..schedule import Schedule

try:  # numba is a dependency; without it every run takes the Python path
    from numba import njit
    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised only on a machine without numba
    HAVE_NUMBA = False

    def njit(*args: Any, **kwargs: Any) -> Any:  # type: ignore[no-redef]
        def wrap(f: Any) -> Any:
            return f
        return wrap

# integer parameters (``ip``)
_M, _C, _PB, _MAXBS, _B, _CAPM, _WM, _MAXSEQ, _ORDER, _HYBRID, _CHUNKED, _WEVICT, _RESERVE, \
    _COST, _MDESC, _KIND, _CAP, _BETA, _WAITQ, _AMIN = range(20)
#: WAIT's per-type FIFO queues (``wq`` rows; a linked list through ``qnext``)
_QHEAD, _QTAIL, _QLEN, _QLEFT, _QN, _QL = range(6)
#: policy kinds (``ip[_KIND]``)
_UNIFIED, _MCSF, _ALPHA = 0, 1, 2
# mutable scalar state of the batch being planned (``st``)
_USED, _NRES, _TOK, _PRE, _NB, _PHASE, _END, _NCUR, _NEV, _NADM, _NPRE, _HN, _LONE, _LONEG, \
    _NADMIT = range(15)
_BIG = 1 << 62
_ORDER_CODES = {"prefill-first": 0, "decode-first": 1, "single": 2}
_RESERVE_CODES = {"input": 0, "full": 1, "histogram": 2}
#: the compiled twins a policy class may declare as its ``fast_kernel`` (:func:`fast_config`;
#: ``PolicySpec.compiled`` lists the declarations)
KERNELS = ("unified", "mcsf", "svf", "wait", "amin", "alpha")
#: kernel exit codes: 0 = done; anything else = give up, the Python path reports the error
OK, STALLED, LIVELOCK, BROKEN = 0, 1, 2, 3


# --- the policy (unified.py, step by step) --------------------------------------------


@njit(cache=True, inline="always")
def _fp(x, b):
    """``Limits.kv_footprint``: whole blocks (semantics section 3)."""
    if b == 1:
        return x
    return -((-x) // b) * b


@njit(cache=True, inline="always")
def _heap_push(heap, st, x):
    k = st[_HN]
    heap[k] = x
    st[_HN] = k + 1
    while k > 0:
        p = (k - 1) >> 1
        if heap[p] <= heap[k]:
            break
        heap[p], heap[k] = heap[k], heap[p]
        k = p


@njit(cache=True, inline="always")
def _heap_pop(heap, st):
    n = st[_HN] - 1
    st[_HN] = n
    heap[0] = heap[n]
    k = 0
    while True:
        c = 2 * k + 1
        if c >= n:
            break
        if c + 1 < n and heap[c + 1] < heap[c]:
            c += 1
        if heap[k] <= heap[c]:
            break
        heap[k], heap[c] = heap[c], heap[k]
        k = c


@njit(cache=True, inline="always")
def _evict(i, st, ip, res, resident, evl):
    """``UnifiedScheduler._evict``."""
    st[_USED] -= _fp(res[i], ip[_B])
    res[i] = 0
    if resident[i]:
        st[_NRES] -= 1
    resident[i] = False
    evl[st[_NEV]] = i
    st[_NEV] += 1


@njit(cache=True, inline="always")
def _add(i, c, new_res, phase, prefill, st, ip, res, cur, ctok, pre_e):
    """``UnifiedScheduler._add``."""
    b = ip[_B]
    st[_USED] += _fp(new_res, b) - _fp(res[i], b)
    res[i] = new_res
    k = st[_NCUR]
    cur[k] = i
    ctok[k] = c
    st[_NCUR] = k + 1
    st[_TOK] += c
    st[_NB] += 1
    if prefill:
        st[_PRE] += c
        pre_e[st[_NPRE]] = i
        st[_NPRE] += 1
    if st[_PHASE] == 0:
        st[_PHASE] = phase


@njit(cache=True, inline="always")
def _prefill_tokens(need, st, ip):
    """``UnifiedScheduler._prefill_tokens``."""
    avail = min(ip[_C] - st[_TOK], ip[_PB] - st[_PRE])
    if ip[_CHUNKED] or need > ip[_PB]:
        return max(0, min(need, avail))
    return need if need <= avail else 0


@njit(cache=True)
def _cand_running(pos, seq, seq_dec, st, ip, m, S, res, resident, cur, ctok, evl, pre_e):
    """``UnifiedScheduler._cand_running`` (steps 2-4 for a running candidate)."""
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
            _evict(seq[st[_END]], st, ip, res, resident, evl)
        else:
            _evict(i, st, ip, res, resident, evl)  # self-eviction
            return
    _add(i, c, new_res, ph, not dec, st, ip, res, cur, ctok, pre_e)


@njit(cache=True, inline="always")
def _run_seq(lo, hi, seq, seq_dec, st, ip, m, S, res, resident, cur, ctok, evl, pre_e):
    """``UnifiedScheduler._run_seq``: the running candidates ``seq[lo:hi]`` in turn."""
    pos = lo
    b = ip[_B]
    M = ip[_M]
    exact = b == 1 and ip[_RESERVE] == 0
    while pos < min(hi, st[_END]):
        if seq_dec[pos] and (ip[_HYBRID] or st[_PHASE] != 1):
            # consecutive decodes in a tight loop while each fits without eviction (the
            # Python policy's _decode_block); the first that does not goes through
            # _cand_running below, which evicts
            lim = min(hi, st[_END])
            used, tok, nb, k = st[_USED], st[_TOK], st[_NB], st[_NCUR]
            full = nb >= ip[_MAXBS] or tok + 1 > ip[_C]
            while pos < lim and seq_dec[pos]:
                if full:  # C or the batch size is reached: the other decodes are skipped
                    pos += 1
                    continue
                i = seq[pos]
                old = res[i]
                if exact:  # as _decode_block: one more reserved token per decode
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
                              pre_e)
                pos += 1
        else:
            # _cand_running's first two checks here: in a non-hybrid batch the candidates
            # of the other phase, and every candidate once the batch is full, are skipped
            # without a call (a call passes a dozen arrays, each reference-counted)
            ph = 2 if seq_dec[pos] else 1
            if (ip[_HYBRID] or st[_PHASE] == 0 or st[_PHASE] == ph) \
                    and st[_NB] < ip[_MAXBS]:
                _cand_running(pos, seq, seq_dec, st, ip, m, S, res, resident, cur, ctok, evl,
                              pre_e)
            pos += 1
    return max(pos, lo)


@njit(cache=True)
def _estimate(g, hist, hsize, quantile):
    """``UnifiedScheduler._estimate`` (InferMax histogram; ``hist`` is cumulative here)."""
    if g + 1 >= hsize:
        return g + 1
    below = hist[g]
    above = hist[hsize - 1] - below
    if above <= 0:
        return g + 1
    target = below + max(1, int(np.ceil(quantile * above)))
    return max(g + 1, np.searchsorted(hist[:hsize], target))


@njit(cache=True, inline="always")
def _cand_waiting(i, pos, seq, st, ip, S, g, prompt, known, res, resident, cur, ctok, evl,
                  pre_e, adm, cum, hsize, quantile):
    """``UnifiedScheduler._cand_waiting``: admit waiting request ``i`` (victims
    ``seq[pos:end]`` only when waiting candidates may evict)."""
    if not ip[_HYBRID] and st[_PHASE] == 2:
        return False
    if st[_NB] >= ip[_MAXBS] or st[_NRES] >= ip[_MAXSEQ]:
        return False
    Si = S[i]
    c = _prefill_tokens(Si, st, ip)
    if c <= 0:
        return False
    b = ip[_B]
    if ip[_RESERVE] == 0:
        R = Si
    else:
        if ip[_RESERVE] == 1:
            R = prompt[i] + known[i] - 1
        else:
            R = prompt[i] + _estimate(g[i], cum, hsize, quantile) - 1
        R = max(Si, min(R, ip[_CAPM]))
    delta = _fp(R, b)
    if delta <= ip[_CAPM] - ip[_WM]:
        delta += ip[_WM]
    if delta > ip[_M] - st[_USED]:
        if not ip[_WEVICT]:
            return False
        freeable = 0
        for k in range(pos, st[_END]):
            freeable += _fp(res[seq[k]], b)
        if delta > ip[_M] - st[_USED] + freeable:
            return False
        while delta > ip[_M] - st[_USED]:
            st[_END] -= 1
            _evict(seq[st[_END]], st, ip, res, resident, evl)
    _add(i, c, R, 1, True, st, ip, res, cur, ctok, pre_e)
    resident[i] = True
    st[_NRES] += 1
    adm[st[_NADM]] = i
    st[_NADM] += 1
    return True


@njit(cache=True, inline="always")
def _build_seq(run, nrun, npartial, ip, m, S, g, seq, seq_dec):
    """The running walk order of ``UnifiedScheduler.next_batch``; returns its length."""
    nd = 0
    for k in range(nrun):
        i = run[k]
        d = npartial == 0 or (g[i] >= 1 and m[i] == S[i] - 1)
        if ip[_ORDER] == 2:
            seq[k] = i
            seq_dec[k] = d
        elif d:
            seq[nd] = i
            seq_dec[nd] = True
            nd += 1
    if ip[_ORDER] != 2 and npartial:
        k2 = nd
        for k in range(nrun):
            i = run[k]
            if not (g[i] >= 1 and m[i] == S[i] - 1):
                seq[k2] = i
                seq_dec[k2] = False
                k2 += 1
    if ip[_MDESC] and nd > 1:
        key = np.empty(nd, np.int64)
        for k in range(nd):
            key[k] = -m[seq[k]]
        o = np.argsort(key, kind="mergesort")
        seq[:nd] = seq[:nd][o]
    return nrun


# --- MC-SF (mcsf.py) -------------------------------------------------------------------


@njit(cache=True, inline="always")
def _mq_type(wq):
    """WAIT's ``_TypeQueues.head_type``: the first type that may still admit and has a
    request waiting; -1 when none (the queue's truth value is False)."""
    for j in range(wq.shape[1]):
        if wq[_QLEFT, j] > 0 and wq[_QLEN, j] > 0:
            return j
    return -1


@njit(cache=True, inline="always")
def _mq_head(ip, st, heap, idx_of_rank, wq):
    """``MCSF._head`` (``Wait._head``): the next waiting request to admit, -1 when the queue
    is empty (or, under WAIT, no type may admit)."""
    if ip[_WAITQ]:
        j = _mq_type(wq)
        return -1 if j < 0 else wq[_QHEAD, j]
    # the heap holds ranks, or under A_min estimate * n + arrival rank (its (estimate,
    # arrival, index) tuples as one integer)
    return idx_of_rank[heap[0] % idx_of_rank.size] if st[_HN] > 0 else -1


@njit(cache=True, inline="always")
def _mq_pop(ip, st, heap, idx_of_rank, wq, qnext, aseq):
    """``MCSF._pop`` (``Wait._pop``: the head type's front, one fewer it may admit;
    ``AMin._pop``: the admission counter, for its eviction ties)."""
    if ip[_AMIN]:
        st[_NADMIT] += 1
        aseq[idx_of_rank[heap[0] % idx_of_rank.size]] = st[_NADMIT]
    if ip[_WAITQ]:
        j = _mq_type(wq)
        wq[_QHEAD, j] = qnext[wq[_QHEAD, j]]
        wq[_QLEN, j] -= 1
        wq[_QLEFT, j] -= 1
    else:
        _heap_pop(heap, st)


@njit(cache=True, inline="always")
def _mq_push(i, ip, st, heap, rank_of, wq, qnext, typ, est, g):
    """``MCSF._push`` (``Wait._push``: the back of the request's type queue; ``AMin._push``:
    the estimate raised to ``g + 1``, keyed by (estimate, arrival, index))."""
    if ip[_AMIN]:
        est[i] = max(est[i], g[i] + 1)
        _heap_push(heap, st, est[i] * rank_of.size + rank_of[i])
    elif ip[_WAITQ]:
        j = typ[i]
        qnext[i] = -1
        if wq[_QLEN, j] == 0:
            wq[_QHEAD, j] = i
        else:
            qnext[wq[_QTAIL, j]] = i
        wq[_QTAIL, j] = i
        wq[_QLEN, j] += 1
    else:
        _heap_push(heap, st, rank_of[i])


@njit(cache=True)
def _wait_gate(run, nrun, typ, wq, flush):
    """``Wait.next_batch`` before MC-SF's plan: the per-type quotas
    ``min(n_j, L_j - occupied_j)``; False when the batch waits (arrivals to come and no type
    has its quota waiting), else sets what each type may admit (all, once flushing)."""
    J = wq.shape[1]
    occ = np.zeros(J, np.int64)
    for k in range(nrun):
        occ[typ[run[k]]] += 1
    ready = flush
    for j in range(J):
        need = min(wq[_QN, j], wq[_QL, j] - occ[j])
        ready = ready or wq[_QLEN, j] >= need
        wq[_QLEFT, j] = _BIG if flush else max(need, 0)
    return ready


@njit(cache=True)
def _profile_ok(base, fin, k, M, b, key):
    """``mcsf.profile_ok`` on ``base[:k]``, ``fin[:k]`` (equation (1)): at every completion
    offset ``t``, the KV of the requests still unfinished fits ``M``. The sum at the last
    request of each group of equal ``fin`` (in decreasing order) is that offset's total."""
    for q in range(k):
        key[q] = -fin[q]
    o = np.argsort(key[:k], kind="mergesort")
    acc = 0
    for q in range(k):
        acc += base[o[q]]
        t = fin[o[q]]
        if q + 1 < k and fin[o[q + 1]] == t:
            continue
        if b == 1:
            if acc + (q + 1) * t > M:
                return False
        else:
            tot = 0
            for p in range(q + 1):
                tot += _fp(base[o[p]] + t, b)
            if tot > M:
                return False
    return True


@njit(cache=True)
def _amin_victim(run, nrun, est, g, aseq):
    """``AMin._victim_pos``: the position of the smallest estimate, then fewest generated
    tokens, then the most recently admitted."""
    p = 0
    for k in range(1, nrun):
        a, q = run[k], run[p]
        if est[a] != est[q]:
            better = est[a] < est[q]
        elif g[a] != g[q]:
            better = g[a] < g[q]
        else:
            better = aseq[a] > aseq[q]
        if better:
            p = k
    return p


@njit(cache=True)
def _mcsf_plan(run, nrun, st, ip, m, S, g, est, heap, idx_of_rank, cur, ctok, evl, base, fin,
               key, wq, qnext, aseq):
    """``MCSF.next_batch``: the running requests (admission order) one token each, the
    safety net, then admissions by rank while equation (1) holds. Returns the running
    count after the safety net."""
    b, M, Pb = ip[_B], ip[_M], ip[_PB]
    lone = st[_LONE]
    st[_NEV] = 0
    for k in range(nrun):
        i = run[k]
        cur[k] = i
        ctok[k] = min(S[i] - m[i], Pb) if i == lone else 1
    if nrun:
        kv_after = 0
        for k in range(nrun):
            kv_after += _fp(m[run[k]] + ctok[k], b)
        while kv_after > M and nrun > 0:
            p = _amin_victim(run, nrun, est, g, aseq) if ip[_AMIN] else nrun - 1
            victim = run[p]
            kv_after -= _fp(m[victim] + ctok[p], b)
            evl[st[_NEV]] = victim
            st[_NEV] += 1
            for k in range(p, nrun - 1):  # np.delete: the others keep their order
                run[k], cur[k], ctok[k] = run[k + 1], cur[k + 1], ctok[k + 1]
            nrun -= 1
            if victim == lone:
                lone = -1
    ncur = nrun
    ntok = 0
    for k in range(nrun):
        ntok += ctok[k]
    npre = 0
    if lone < 0:
        for k in range(nrun):
            i = run[k]
            base[k] = m[i] + 1
            fin[k] = max(est[i] - g[i] - 1, 0)
        nb = nrun
        while True:
            i = _mq_head(ip, st, heap, idx_of_rank, wq)
            if i < 0:
                break
            evicted = False
            for q in range(st[_NEV]):
                evicted = evicted or evl[q] == i
            if evicted:
                break
            Si = S[i]
            if ncur == 0 and Si > Pb:  # a prompt longer than min(C, P): chunked, alone
                _mq_pop(ip, st, heap, idx_of_rank, wq, qnext, aseq)
                cur[0] = i
                ctok[0] = Pb
                ncur = 1
                lone = i
                st[_LONEG] = g[i]
                break
            if ncur + 1 > ip[_CAP] or ntok + Si > ip[_C] or npre + Si > Pb:
                break
            base[nb] = Si
            fin[nb] = max(est[i] - g[i] - 1, 0)
            if not _profile_ok(base, fin, nb + 1, M, b, key):
                break
            _mq_pop(ip, st, heap, idx_of_rank, wq, qnext, aseq)
            nb += 1
            cur[ncur] = i
            ctok[ncur] = Si
            ncur += 1
            ntok += Si
            npre += Si
    st[_NCUR] = ncur
    st[_LONE] = lone
    return nrun


@njit(cache=True)
def _mcsf_end(run, st, ip, rank_of, heap, g, cur, ncur, evl, nev, fin, nfin, finmark, stamp,
              wq, qnext, typ, est):
    """``MCSF.on_batch_end``: victims back to the queue; the batch's requests that did not
    finish run on (admission order); under A_min each of them has its estimate raised to
    ``g + 1``. Returns the running count."""
    for k in range(nev):
        _mq_push(evl[k], ip, st, heap, rank_of, wq, qnext, typ, est, g)
    for k in range(nfin):
        finmark[fin[k]] = stamp
    nrun = 0
    for k in range(ncur):
        if finmark[cur[k]] != stamp:
            run[nrun] = cur[k]
            nrun += 1
    lone = st[_LONE]
    if lone >= 0 and (finmark[lone] == stamp or g[lone] > st[_LONEG]):
        st[_LONE] = -1
    if ip[_AMIN]:
        for k in range(nrun):
            i = run[k]
            est[i] = max(est[i], g[i] + 1)
    return nrun


# --- alpha-protection greedy / beta-clearing (alpha.py) --------------------------------


@njit(cache=True)
def _alpha_running(run, nrun, ip, m, S, g, ctok, dec, take, cached, grow):
    """The running part of ``AlphaProtection.next_batch``: each running request's chunk
    (a decode 1 token, a partial prefill ``min(S - m, P)``), whether it fits the running
    prefix sums of ``C`` and ``P`` and the batch size, its held KV and growth. Returns
    ``(held, grown)``, the two sums."""
    b, Pb = ip[_B], ip[_PB]
    tokc = 0
    prec = 0
    held = 0
    grown = 0
    for k in range(nrun):
        i = run[k]
        d = g[i] >= 1 and m[i] == S[i] - 1
        c = 1 if d else min(S[i] - m[i], Pb)
        tokc += c
        if not d:
            prec += c
        t = tokc <= ip[_C] and prec <= Pb and k < ip[_MAXBS]
        ca = _fp(m[i], b)
        ctok[k], dec[k], take[k], cached[k] = c, d, t, ca
        grow[k] = _fp(m[i] + c, b) - ca if t else 0
        held += ca
        grown += grow[k]
    return held, grown


@njit(cache=True)
def _alpha_clear(nrun, ip, alive, cached, grow, beta, rng):
    """The clearing of ``AlphaProtection.next_batch`` when the batch would overflow ``M``:
    every running request (greedy), or each with probability ``beta`` from the policy's own
    generator (the same draws, ``rng.random(alive)``), repeated until the rest fits."""
    if ip[_BETA] == 0:
        alive[:nrun] = False
        return
    for _ in range(100_000):
        na = 0
        for k in range(nrun):
            na += alive[k]
        x = rng.random(na)
        q = 0
        kv = 0
        for k in range(nrun):
            if alive[k]:
                if x[q] < beta:
                    alive[k] = False
                q += 1
            if alive[k]:
                kv += cached[k] + grow[k]
        if kv <= ip[_M]:
            return
    alive[:nrun] = False


@njit(cache=True)
def _alpha_plan(run, nrun, st, ip, m, S, g, heap, idx_of_rank, cur, ctok, evl, evmark,
                stamp, rc, cached, grow, dec, take, alive, thr, beta, rng):
    """``AlphaProtection.next_batch``: the running requests (arrival order) within ``C``,
    ``P`` and the batch size, the clearing on overflow, then FCFS admissions of whole
    prompts while the KV with the prompt stays within ``thr = (1 - alpha) M`` (the head
    alone when nothing is resident) and the KV after the batch within ``M``."""
    b, M, C, Pb = ip[_B], ip[_M], ip[_C], ip[_PB]
    held, grown = _alpha_running(run, nrun, ip, m, S, g, rc, dec, take, cached, grow)
    alive[:nrun] = True
    if held + grown > M:
        _alpha_clear(nrun, ip, alive, cached, grow, beta, rng)
    nev = 0
    ncur = 0
    kv = 0
    ntok = 0
    npre = 0
    for k in range(nrun):
        if not alive[k]:
            evl[nev] = run[k]
            evmark[run[k]] = stamp
            nev += 1
            continue
        kv += cached[k] + grow[k]
        if take[k]:
            cur[ncur] = run[k]
            ctok[ncur] = rc[k]
            ncur += 1
            ntok += rc[k]
            if not dec[k]:
                npre += rc[k]
    resident = nrun - nev
    st[_NADM] = ncur  # the kept running entries come first in the plan, then admissions
    while st[_HN] > 0 and ncur < ip[_MAXBS]:
        i = idx_of_rank[heap[0]]
        if evmark[i] == stamp:
            break
        Si = S[i]
        room = min(C - ntok, Pb - npre)
        ci = Si if Si <= room else (room if Si > Pb else 0)
        if ci <= 0:
            break
        after = kv + _fp(ci, b)
        if kv + _fp(Si, b) > thr and not (resident == 0 and ncur == 0):
            break
        if after > M:
            break
        _heap_pop(heap, st)
        cur[ncur] = i
        ctok[ncur] = ci
        ncur += 1
        kv = after
        ntok += ci
        npre += ci
    st[_NCUR] = ncur
    st[_NEV] = nev


@njit(cache=True)
def _alpha_end(run, nrun, st, rank_of, heap, cur, ncur, evl, nev, fin, nfin, mark, stamp,
               cand):
    """``AlphaProtection.on_batch_end``: cleared requests back to the queue; the running
    set is the old one and the admitted requests, less the finished and cleared, by arrival
    rank (both lists are in rank order: merged) into ``cand``. Returns ``(cand, run,
    count)``: the new running list, the old one's buffer to reuse, the running count."""
    for k in range(nev):
        _heap_push(heap, st, rank_of[evl[k]])
        mark[evl[k]] = stamp
    for k in range(nfin):
        mark[fin[k]] = stamp
    first_adm = st[_NADM]  # the admitted entries: cur[first_adm:ncur], in rank order
    nc = 0
    ka = 0
    for k in range(nrun):
        i = run[k]
        if mark[i] == stamp:
            continue
        while ka + first_adm < ncur and rank_of[cur[first_adm + ka]] < rank_of[i]:
            if mark[cur[first_adm + ka]] != stamp:
                cand[nc] = cur[first_adm + ka]
                nc += 1
            ka += 1
        cand[nc] = i
        nc += 1
    while ka + first_adm < ncur:
        if mark[cur[first_adm + ka]] != stamp:
            cand[nc] = cur[first_adm + ka]
            nc += 1
        ka += 1
    return cand, run, nc


# --- the simulator loop (simulator.simulate_policy) -----------------------------------


@njit(cache=True)
def _grow(a, k):
    out = np.empty(max(2 * a.size, 16), a.dtype)
    out[:k] = a[:k]
    return out


@njit(cache=True, inline="always")
def _decode_time(ip, fc, nent, s):
    """``LinearCost.decode_batch_time`` of ``nent`` decodes whose contexts sum to ``s``
    (``UnitCost``: 1), in its floating-point operations; ``nent > 0``."""
    if ip[_COST] == 0:
        return 1.0
    return fc[0] + fc[9] + nent * (fc[1] + fc[7]) + fc[6] * float(s)


@njit(cache=True, inline="always")
def _price(ip, fc, nent, cur, ctok, mb, decf, nd):
    """One batch's time: ``UnitCost`` (1) or ``LinearCost.batch_times`` for one batch, or its
    ``decode_batch_time`` for a decode-only batch, in the same floating-point operations."""
    if nent == 0:
        return 0.0
    if ip[_COST] == 0:
        return 1.0
    k0, k1, kpq, kpm, kpl, kpr, kdm, kdr, kpb, kdb = (fc[0], fc[1], fc[2], fc[3], fc[4],
                                                     fc[5], fc[6], fc[7], fc[8], fc[9])
    if nd == nent:
        s = 0
        for k in range(nent):
            s += mb[k]
        return _decode_time(ip, fc, nent, s)
    t = 0.0
    has_pre = False
    has_dec = False
    for k in range(nent):
        c = float(ctok[k])
        mm = float(mb[k])
        if decf[k]:
            has_dec = True
            t += k1 * c + (kdm * mm + kdr)
        else:
            has_pre = True
            t += k1 * c + (kpq * c * c + kpm * c * mm + kpl * mm + kpr)
    t += k0
    if kpb != 0.0 and has_pre:
        t += kpb
    if kdb != 0.0 and has_dec:
        t += kdb
    return t


@njit(cache=True)
def simulate_unified(arr, arr_sorted, order, prompt, output, known, rank_of, idx_of_rank,
                     ip, fc, quantile, thr, beta, rng, wq, typ, last_arrival, limit):
    """The whole simulation (``thr``, ``beta`` and the generator ``rng``: the alpha
    policies' threshold, clearing probability and draws; ``wq``, ``typ``, ``last_arrival``:
    WAIT's per-type quotas, request types and last arrival); returns ``(status, batch_ptr,
    entry_req, entry_tokens, evict_ptr, evict_req, start, plans, batches, entries,
    evictions)``: the columns' buffers (used up to the counts) and the calls of the policy's walk."""
    n = prompt.size
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
    hist = np.zeros(16, np.int64)
    hsize = 16
    cum = np.zeros(16, np.int64)
    hdirty = True
    st = np.zeros(15, np.int64)
    st[_LONE] = -1
    mcsf = ip[_KIND] == _MCSF
    alpha = ip[_KIND] == _ALPHA
    if alpha:
        a_rc = np.empty(n, np.int64)
        a_cached = np.empty(n, np.int64)
        a_grow = np.empty(n, np.int64)
        a_dec = np.empty(n, np.bool_)
        a_take = np.empty(n, np.bool_)
        a_alive = np.empty(n, np.bool_)
        evmark = np.full(n, -1, np.int64)
    else:
        a_rc = a_cached = a_grow = evmark = np.empty(0, np.int64)
        a_dec = a_take = a_alive = np.empty(0, np.bool_)
    base = np.empty(n + 1, np.int64)
    finoff = np.empty(n + 1, np.int64)
    key = np.empty(n + 1, np.int64)
    finmark = np.full(n, -1, np.int64)
    qnext = np.full(n if ip[_WAITQ] else 0, -1, np.int64)
    aseq = np.zeros(n if ip[_AMIN] else 0, np.int64)
    b = ip[_B]
    M = ip[_M]
    # output columns (grown by doubling)
    cap_e = max(16, int(output.sum()) + 2 * n)
    e_req = np.empty(cap_e, np.int64)
    e_tok = np.empty(cap_e, np.int64)
    ne = 0
    v_req = np.empty(16, np.int64)
    nv = 0
    cap_b = max(16, int(output.sum()) + n)
    # np.empty, not np.zeros: these are sized for the worst case (~36 MB each on the 19K
    # request trace) and zeroing them faulted in every page; only the prefix written is read
    bptr = np.empty(cap_b + 1, np.int64)
    eptr = np.empty(cap_b + 1, np.int64)
    bptr[0] = 0
    eptr[0] = 0
    start = np.empty(cap_b, np.float64)
    nbat = 0

    nxt = 0
    next_arrival = arr_sorted[0] if n else math.inf
    done = 0
    kv = 0
    idle = False
    now = 0.0
    calls = 0
    while done < n:
        if next_arrival <= now:
            hi = np.searchsorted(arr_sorted, now, side="right")
            for k in range(nxt, hi):
                _mq_push(order[k], ip, st, heap, rank_of, wq, qnext, typ, known, g)
            nxt = hi
            next_arrival = arr_sorted[nxt] if nxt < n else math.inf
        calls += 1
        if mcsf:
            if ip[_WAITQ] and not _wait_gate(run, nrun, typ, wq, now >= last_arrival):
                st[_NCUR] = 0  # Wait.next_batch returns None: the clock jumps
                st[_NEV] = 0
            else:
                nrun = _mcsf_plan(run, nrun, st, ip, m, S, g, known, heap, idx_of_rank, cur,
                                  ctok, evl, base, finoff, key, wq, qnext, aseq)
            nseq = 0
        elif alpha:
            _alpha_plan(run, nrun, st, ip, m, S, g, heap, idx_of_rank, cur, ctok, evl, evmark,
                        calls, a_rc, a_cached, a_grow, a_dec, a_take, a_alive, thr, beta, rng)
        # -- plan (UnifiedScheduler.next_batch) --
        else:
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
            if ip[_RESERVE] == 2 and hdirty:
                hdirty = False
                acc = 0
                for k in range(hsize):
                    acc += hist[k]
                    cum[k] = acc
            if ip[_ORDER] == 0:
                while st[_HN] > 0:
                    if not _cand_waiting(idx_of_rank[heap[0]], 0, seq, st, ip, S, g, prompt, known,
                                         res, resident, cur, ctok, evl, pre_e, adm, cum, hsize,
                                         quantile):
                        break
                    _heap_pop(heap, st)
                _run_seq(0, nseq, seq, seq_dec, st, ip, m, S, res, resident, cur, ctok, evl, pre_e)
            elif ip[_ORDER] == 1:
                _run_seq(0, nseq, seq, seq_dec, st, ip, m, S, res, resident, cur, ctok, evl, pre_e)
                while st[_HN] > 0:
                    if not _cand_waiting(idx_of_rank[heap[0]], st[_END], seq, st, ip, S, g, prompt,
                                         known, res, resident, cur, ctok, evl, pre_e, adm, cum,
                                         hsize, quantile):
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
                        pos = _run_seq(pos, hi, seq, seq_dec, st, ip, m, S, res, resident, cur,
                                       ctok, evl, pre_e)
                    elif wr < _BIG:
                        if _cand_waiting(idx_of_rank[wr], pos, seq, st, ip, S, g, prompt, known,
                                         res, resident, cur, ctok, evl, pre_e, adm, cum, hsize,
                                         quantile):
                            _heap_pop(heap, st)
                        else:
                            closed = True
                    else:
                        break
        ncur = st[_NCUR]
        nev = st[_NEV]
        if ncur == 0 and nev == 0:
            if nxt < n:
                now = max(now, next_arrival)
                idle = True
                # the Python policy's plan left its state as it was: nothing to undo, the
                # walk only reads (an empty plan admitted and evicted nothing)
                continue
            return STALLED, bptr, e_req, e_tok, eptr, v_req, start, calls, 0, 0, 0
        if nbat >= limit:
            return LIVELOCK, bptr, e_req, e_tok, eptr, v_req, start, calls, 0, 0, 0
        # -- apply the plan (semantics section 3) --
        for k in range(nev):
            e = evl[k]
            if m[e] <= 0:
                return BROKEN, bptr, e_req, e_tok, eptr, v_req, start, calls, 0, 0, 0
            kv -= _fp(m[e], b)
            m[e] = 0
        nd = 0
        for k in range(ncur):
            i = cur[k]
            c = ctok[k]
            if m[i] + c > S[i] or c < 1:
                return BROKEN, bptr, e_req, e_tok, eptr, v_req, start, calls, 0, 0, 0
            mb[k] = m[i]
            decf[k] = m[i] == S[i] - 1 and g[i] >= 1
            if decf[k]:
                nd += 1
        nfin = 0
        for k in range(ncur):
            i = cur[k]
            ma = mb[k] + ctok[k]
            m[i] = ma
            kv += _fp(ma, b) - _fp(mb[k], b)
        if kv > M:
            return BROKEN, bptr, e_req, e_tok, eptr, v_req, start, calls, 0, 0, 0
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
            kv -= _fp(m[i], b)
            m[i] = 0
        done += nfin
        dur = _price(ip, fc, ncur, cur, ctok, mb, decf, nd)
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
        if nbat >= start.size:
            start = _grow(start, nbat)
        while ne + ncur > e_req.size:
            e_req = _grow(e_req, ne)
            e_tok = _grow(e_tok, ne)
        while nv + nev > v_req.size:
            v_req = _grow(v_req, nv)
        for k in range(ncur):  # loops, not slice copies: no array views to count references of
            e_req[ne + k] = cur[k]
            e_tok[ne + k] = ctok[k]
        ne += ncur
        for k in range(nev):
            v_req[nv + k] = evl[k]
        nv += nev
        start[nbat] = st_at
        nbat += 1
        bptr[nbat] = ne
        eptr[nbat] = nv
        now = now + dur
        if mcsf:
            nrun = _mcsf_end(run, st, ip, rank_of, heap, g, cur, ncur, evl, nev, fin, nfin,
                             finmark, nbat, wq, qnext, typ, known)
            continue
        if alpha:
            run, cand, nrun = _alpha_end(run, nrun, st, rank_of, heap, cur, ncur, evl, nev,
                                         fin, nfin, finmark, nbat, cand)
            continue
        # -- UnifiedScheduler.on_batch_end --
        for k in range(nfin):
            i = fin[k]
            st[_USED] -= _fp(res[i], b)
            res[i] = 0
            resident[i] = False
            st[_NRES] -= 1
        if ip[_RESERVE] == 2 and nfin:
            top_g = 0
            for k in range(nfin):
                top_g = max(top_g, g[fin[k]])
            if top_g >= hsize:
                new = max(top_g + 1, 2 * hsize)
                h2 = np.zeros(new, np.int64)
                h2[:hsize] = hist[:hsize]
                hist = h2
                cum = np.zeros(new, np.int64)
                hsize = new
            for k in range(nfin):
                hist[g[fin[k]]] += 1
            hdirty = True
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
        # the resident requests by rank: the old run (rank order; its evicted members are
        # no longer resident) merged with the admitted ones (popped from the heap, so in
        # rank order too) -- the set unified.py sorts
        na = 0
        for k in range(st[_NADM]):
            if resident[adm[k]]:
                adm[na] = adm[k]
                na += 1
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
        run, cand = cand, run
        nrun = nc
    return OK, bptr, e_req, e_tok, eptr, v_req, start, calls, nbat, ne, nv


# --- the entry point ------------------------------------------------------------------


def fast_config(instance: Instance, policy: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """The kernel's integer and float parameters for a *bound* ``policy`` on ``instance``,
    or None when the fast path does not apply (the Python path runs)."""
    # the class itself names its kernel (not a subclass, which may change the rules), so the
    # kernel needs no import of the policies that import the simulator that imports it.
    # SVF is MC-SF with another admission key: bind() turns the key into the ranks the MC-SF
    # kernel reads (rank_of, idx_of_rank), and SVF overrides nothing else; WAIT is MC-SF with
    # per-type FIFO queues and quotas (its next_batch gate and queue hooks are mirrored by
    # _wait_gate and the _mq_* helpers); A_min is MC-SF with a queue keyed by its moving
    # estimates and its own victim order (_amin_victim)
    kernel = vars(type(policy)).get("fast_kernel")
    if kernel == "cached" and not instance.has_prefix:
        kernel = "unified"  # without block ids a prefix-caching policy is its unified config
    if not HAVE_NUMBA or kernel not in KERNELS:
        return None
    if getattr(policy, "predictor", None) is not None:
        return None
    if any(hook in vars(policy) for hook in ("bind", "on_arrivals", "next_batch",
                                             "on_batch_end")):
        return None  # a hook replaced on the object (a spy, a patch): it must run
    if kernel == "unified" and policy.order == "single" \
            and policy.decode_sort is not None:
        return None  # no registered policy; the kernel's walk order does not cover it
    cm = instance.cost_model
    if type(cm) is UnitCost:
        cost, fc = 0, np.zeros(10)
    elif type(cm) is LinearCost:
        cost = 1
        fc = np.array([cm.k0, cm.k1, cm.kpq, cm.kpm, cm.kpl, cm.kpr, cm.kdm, cm.kdr, cm.kpb,
                       cm.kdb], np.float64)
    else:
        return None
    p = policy
    if kernel in ("mcsf", "svf", "wait", "amin"):
        ip = np.array([p.M, p.C, p.Pb, p.maxbs, p.b, 0, 0, _BIG, 0, 1, 0, 0, 0, cost, 0, _MCSF,
                       p.cap, 0, int(kernel == "wait"), int(kernel == "amin")], np.int64)
        return ip, fc
    if kernel == "alpha":
        ip = np.array([p.M, p.C, p.Pb, p.maxbs, instance.limits.block_size, 0, 0, _BIG, 0, 1,
                       0, 0, 0, cost, 0, _ALPHA, 0, int(p.beta is not None), 0, 0], np.int64)
        return ip, fc
    ip = np.array([p.M, p.C, p.Pb, p.maxbs, p.b, p.capM, p.wm, p.max_num_seqs,
                   _ORDER_CODES[p.order], int(p.hybrid), int(p.chunked),
                   int(p.waiting_evicts), _RESERVE_CODES[p.reserve], cost,
                   int(p.decode_sort == "m_desc"), _UNIFIED, 0, 0, 0, 0], np.int64)
    return ip, fc


#: the generator argument of a policy that draws nothing (the kernel's signature is one)
_NO_RNG = np.random.default_rng(0)


def simulate_fast(instance: Instance, policy: Any, known: np.ndarray, limit: int,
                  stats: Any = None) -> Schedule | None:
    """Run the kernel for a bound ``policy``; None when it does not apply or gives up.

    ``stats`` (a :class:`~optsched.policies.simulator.SimStats`) gets the calls of the
    policy's walk, the batches, and as decision time the kernel's whole run (wall and
    thread CPU): the policy's decisions and the simulator's bookkeeping together, an upper
    bound on the decision time, which compiled code cannot time per hook without costing
    more than it measures."""
    cfg = fast_config(instance, policy)
    if cfg is None:
        return None
    ip, fc = cfg
    t0, c0 = time.perf_counter(), time.thread_time()
    arr = np.ascontiguousarray(instance.arrival, dtype=np.float64)
    order = np.argsort(arr, kind="stable")
    mcsf = ip[_KIND] == _MCSF  # MC-SF ranks by its capped estimates, which it reads as "known"
    known = policy.est if mcsf else known
    rank_of, idx_of_rank = policy.rank_of, policy.idx_of_rank
    if ip[_AMIN]:  # the kernel moves A_min's estimates (a copy) and keys its heap by arrival
        known = policy.est.copy()
        idx_of_rank = np.lexsort((np.arange(instance.n), arr))
        rank_of = np.empty(instance.n, np.int64)
        rank_of[idx_of_rank] = np.arange(instance.n)
    from ..runtime.numba_load import call

    out = call(simulate_unified, arr, arr[order], order,
                           np.ascontiguousarray(instance.prompt, np.int64),
                           np.ascontiguousarray(instance.output, np.int64),
                           np.ascontiguousarray(known, np.int64),
                           np.ascontiguousarray(rank_of, np.int64),
                           np.ascontiguousarray(idx_of_rank, np.int64),
                           ip, fc, float(getattr(policy, "quantile", 0.5)),
                           float(getattr(policy, "threshold", 0.0)),
                           float(getattr(policy, "beta", None) or 0.0),
                           _rng_copy(policy), *_wait_queues(policy, instance.n), int(limit))
    status, bptr, e_req, e_tok, eptr, v_req, start, calls, nbat, ne, nv = out
    if status != OK:
        return None
    bptr, eptr, start = _trim(bptr, nbat + 1), _trim(eptr, nbat + 1), _trim(start, nbat)
    e_req, e_tok, v_req = _trim(e_req, ne), _trim(e_tok, ne), _trim(v_req, nv)
    if stats is not None:
        stats.decision_seconds = time.perf_counter() - t0
        stats.decision_cpu_seconds = time.thread_time() - c0
        stats.decisions = int(calls)
        stats.batches = int(start.size)
    return Schedule(tuple(instance.ids), bptr, e_req, e_tok, eptr, v_req, start)


def _wait_queues(policy: Any, n: int) -> tuple[np.ndarray, np.ndarray, float]:
    """WAIT's kernel arguments ``(wq, typ, last_arrival)``: empty per-type queues with each
    type's ``n_j`` and ``L_j``, the request types, the last arrival; placeholders for the
    other policies (the kernel's signature is one)."""
    if vars(type(policy)).get("fast_kernel") != "wait":
        return np.zeros((6, 0), np.int64), np.zeros(n, np.int64), math.inf
    J = len(policy.n_j)
    wq = np.zeros((6, J), np.int64)
    wq[_QN], wq[_QL] = policy.n_j, policy.L_j
    return wq, np.ascontiguousarray(policy.typ, np.int64), float(policy.last_arrival)


def _rng_copy(policy: Any) -> np.random.Generator:
    """A copy of the policy's generator (the alpha policies'): the kernel draws from it what
    the Python path would, and a kernel that gives up leaves the policy's own generator
    untouched for the Python path that then runs."""
    rng = getattr(policy, "rng", None)
    return copy.deepcopy(rng) if isinstance(rng, np.random.Generator) else _NO_RNG


def _trim(buf: np.ndarray, k: int) -> np.ndarray:
    """The first ``k`` items of a kernel buffer: a view when the buffer is mostly used (the
    entry columns, sized by sum O), else a copy, so a schedule never holds more than twice
    its size."""
    return buf[:k] if 2 * k >= buf.size else buf[:k].copy()


__all__ = ["simulate_fast", "fast_config", "HAVE_NUMBA"]
