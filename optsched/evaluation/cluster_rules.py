"""The rules that couple the engines of a cluster (docs/semantics.md section 6, "Clusters"):
engines of batches, transfers, holders, roles, engine limits, engine clocks and memory on
both ends of a transfer. :mod:`.cluster` runs them around the single-engine replay of
:mod:`.evaluator`, whose request state (``S``, ``m``, ``g``) a cluster does not change.

Every ``_check_*``/``check_*`` function names the rule it applies and emits the codes of
:data:`optsched.evaluation.cluster.CLUSTER_CODES`; messages name the engine.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..instance import Engine, Instance
from ..schedule import Schedule
from .evaluator import _BatchTotals, _Events, _Items, _time_tolerance, _Violations

#: order of a request's events within one batch (semantics section 3 then section 6)
_EVICT, _ENTRY, _TRANSFER = 0, 1, 2


def batch_engines(inst: Instance, s: Schedule, V: _Violations) -> np.ndarray:
    """Each batch's engine as a position in the instance's engines: a batch naming none runs
    on the first engine; one naming an undeclared engine gets -1 (UNKNOWN_ENGINE)."""
    nb = s.n_batches
    pl = s.placement
    if pl is None:
        return np.zeros(nb, np.int64)
    pos = {e: k for k, e in enumerate(inst.engine_ids)}
    table = np.array([pos.get(e, -1) for e in pl.engines] + [0], np.int64)
    eng = table[pl.batch_engine]  # -1 (no name) picks the trailing 0: the first engine
    bad = np.flatnonzero(eng < 0)
    V.add_many("UNKNOWN_ENGINE", bad, None,
               lambda k: f"batch names engine {pl.engine_name(int(bad[k]))!r}, which the "
                         f"instance does not declare (engines: {', '.join(inst.engine_ids)}); "
                         "its entries, evictions and transfers are ignored")
    return eng


def drop_unplaced(items: _Items, eng: np.ndarray) -> None:
    """The items of batches on an undeclared engine are ignored (reported by
    :func:`batch_engines`)."""
    items.ok &= eng[items.batch] >= 0


@dataclass
class Transfers:
    """Candidate transfers (batch, request, destination) that passed the format rules, then
    the holder rule; ``valid`` marks those in effect, ``tokens`` their ``k``, ``start``/``end``
    their times once the clock has run."""

    batch: np.ndarray
    req: np.ndarray
    dest: np.ndarray
    valid: np.ndarray
    tokens: np.ndarray
    start: np.ndarray
    end: np.ndarray

    @property
    def size(self) -> int:
        return int(self.batch.size)


def transfer_items(inst: Instance, s: Schedule, eng: np.ndarray, V: _Violations) -> Transfers:
    """The schedule's transfers with UNKNOWN_REQUEST, UNKNOWN_ENGINE, TRANSFER_DISABLED,
    TRANSFER_SAME_ENGINE and DUPLICATE_TRANSFER reported and dropped (section 6, clusters,
    rule 2)."""
    pl = s.placement
    if pl is None or not pl.n_transfers:
        z = np.zeros(0, np.int64)
        return Transfers(z, z, z, np.zeros(0, bool), z, np.zeros(0), np.zeros(0))
    ids = inst.engine_ids
    pos = {e: k for k, e in enumerate(ids)}
    b = pl.batch_of_transfer
    names = [s.ids[r] for r in pl.transfer_req.tolist()]
    dnames = [pl.engines[d] for d in pl.transfer_to.tolist()]
    keep = eng[b] >= 0  # a batch on an undeclared engine: already reported
    req = np.array([inst.index.get(x, -1) for x in names], np.int64)
    dest = np.array([pos.get(x, -1) for x in dnames], np.int64)
    for k in np.flatnonzero(keep & (req < 0)).tolist():
        V.add_many("UNKNOWN_REQUEST", [b[k]], None, lambda _k, x=names[k]:
                   f"transfer names request {x!r}, which the instance does not have",
                   names=lambda _k, x=names[k]: x)
    keep &= req >= 0
    _drop(keep & (dest < 0), "UNKNOWN_ENGINE", b, req, V, keep, lambda k:
          f"transfer to engine {dnames[k]!r}, which the instance does not declare")
    link = inst.cluster.transfer if inst.cluster is not None else None
    if link is None:
        _drop(keep.copy(), "TRANSFER_DISABLED", b, req, V, keep, lambda k:
              "transfer on an instance without a transfer link (cluster.transfer)")
    _drop(keep & (dest == eng[b]), "TRANSFER_SAME_ENGINE", b, req, V, keep, lambda k:
          f"transfer to engine {dnames[k]!r}, the engine the batch runs on")
    seen: set[tuple[int, int]] = set()
    dup = np.zeros(b.size, bool)
    for k in np.flatnonzero(keep).tolist():
        key = (int(b[k]), int(req[k]))
        dup[k] = key in seen
        seen.add(key)
    _drop(dup, "DUPLICATE_TRANSFER", b, req, V, keep,
          lambda k: "request is listed twice among the batch's transfers")
    kept = np.flatnonzero(keep)
    return Transfers(b[kept], req[kept], dest[kept], np.ones(kept.size, bool),
                     np.zeros(kept.size, np.int64), np.zeros(kept.size), np.zeros(kept.size))


def _drop(bad, code, b, req, V: _Violations, keep, msg) -> None:
    idx = np.flatnonzero(bad)
    V.add_many(code, b[idx], req[idx], lambda k: msg(int(idx[k])))
    keep[idx] = False


# --- holders (rule 1) and transfers (rule 2) ----------------------------------------------


@dataclass
class Timeline:
    """Every event of every request (the entries and evictions the replay keeps, the
    candidate transfers), in the order they apply: sorted by request, batch, then eviction,
    entry, transfer. ``src`` indexes the replay's events or the transfers; ``effect`` marks
    the entries and evictions in effect (the others still touch their request, section 4)."""

    req: np.ndarray
    batch: np.ndarray
    kind: np.ndarray
    src: np.ndarray
    engine: np.ndarray
    start_of_req: np.ndarray  # position of the request's first event
    effect: np.ndarray

    @property
    def size(self) -> int:
        return int(self.req.size)


def timeline(ev: _Events, live, evicted, tr: Transfers, eng: np.ndarray) -> Timeline:
    ei = np.arange(ev.size)
    req = np.concatenate([ev.req[ei], tr.req])
    batch = np.concatenate([ev.batch[ei], tr.batch])
    kind = np.concatenate([np.where(ev.is_entry[ei], _ENTRY, _EVICT), np.full(tr.size, _TRANSFER)])
    src = np.concatenate([ei, np.arange(tr.size)])
    order = np.lexsort((kind, batch, req))
    req, batch, kind, src = req[order], batch[order], kind[order], src[order]
    first = np.ones(req.size, bool)
    first[1:] = req[1:] != req[:-1]
    pos = np.arange(req.size)
    start = np.maximum.accumulate(np.where(first, pos, 0)) if req.size else pos
    effect = np.where(kind == _TRANSFER, True,
                      (live | evicted)[np.where(kind == _TRANSFER, 0, src)] if ev.size else True)
    return Timeline(req, batch, kind, src, eng[batch], start, effect.astype(bool))


def _last_before(tl: Timeline, mask: np.ndarray) -> np.ndarray:
    """For each event, the position of the last event of its request before it with
    ``mask`` set (-1: none)."""
    pos = np.arange(tl.size)
    last = np.maximum.accumulate(np.where(mask, pos, -1)) if tl.size else pos
    before = np.concatenate([[-1], last[:-1]]) if tl.size else pos
    return np.where(before >= tl.start_of_req, before, -1)


def _holder_setters(tl: Timeline, ev: _Events, tr: Transfers):
    """Which events set the holder and to what (rule 1): an entry that finishes its request
    or an eviction to none (-1), an entry with ``m = 0`` before it to its engine, a transfer
    in effect to its destination."""
    is_ent = (tl.kind == _ENTRY) & tl.effect
    is_tr = tl.kind == _TRANSFER
    e_src = np.where(is_tr, 0, tl.src)
    fin = is_ent & (ev.g_before[e_src] < ev.O[e_src]) & (ev.g_after[e_src] >= ev.O[e_src])
    fresh = is_ent & (ev.m_before[e_src] == 0)
    t_src = np.where(is_tr, tl.src, 0)
    valid_tr = is_tr & (tr.valid[t_src] if tr.size else False)
    evict = (tl.kind == _EVICT) & tl.effect
    setter = fin | fresh | evict | valid_tr
    value = np.where(fin | evict, -1,
                     np.where(valid_tr, tr.dest[t_src] if tr.size else -1, tl.engine))
    return setter, value


def holders_before(tl: Timeline, ev: _Events, tr: Transfers) -> np.ndarray:
    """Each event's request holder just before it (rule 1; -1: none)."""
    setter, value = _holder_setters(tl, ev, tr)
    last = _last_before(tl, setter)
    return np.where(last >= 0, value[np.maximum(last, 0)], -1)


def check_transfers(tl: Timeline, ev: _Events, tr: Transfers, inst: Instance,
                    V: _Violations) -> None:
    """TRANSFER_NOT_RESIDENT: a transfer's request is held by the batch's engine after the
    batch (rule 2); decided in rounds by the transfer's rank within its request, since a
    transfer that is ignored leaves the holder for the next one. Sets ``tr.valid`` and
    ``tr.tokens`` (``m`` after the batch)."""
    if not tr.size:
        return
    is_tr = tl.kind == _TRANSFER
    not_tr = ~is_tr
    m_now = np.where(tl.kind == _ENTRY, ev.m_after[np.where(is_tr, 0, tl.src)], 0)
    last_state = _last_before(tl, not_tr & tl.effect)  # the m a transfer moves: after the last entry
    k_tok = np.where(last_state >= 0, m_now[np.maximum(last_state, 0)], 0)
    cs = np.cumsum(is_tr)
    rank = cs - (cs - is_tr)[tl.start_of_req] - 1  # the transfer's rank within its request
    tr.valid[:] = False
    idx_tr = np.flatnonzero(is_tr)
    for r in range(int(rank[idx_tr].max()) + 1 if idx_tr.size else 0):
        now = idx_tr[rank[idx_tr] == r]
        held = holders_before(tl, ev, tr)[now]
        t = tl.src[now]
        ok = held == tl.engine[now]
        tr.valid[t] = ok
        tr.tokens[t] = k_tok[now]
        bad = np.flatnonzero(~ok)
        V.add_many("TRANSFER_NOT_RESIDENT", tl.batch[now[bad]], tl.req[now[bad]],
                   _not_resident_message(inst.engine_ids, tl.engine[now[bad]], held[bad]))


def _not_resident_message(ids, source, held):
    def msg(k: int) -> str:
        if held[k] >= 0:
            return (f"transfer from engine {ids[source[k]]!r}, but the request's KV is on "
                    f"engine {ids[held[k]]!r}")
        return (f"transfer from engine {ids[source[k]]!r} of a request that holds no KV after "
                "the batch (never processed, evicted or finished)")
    return msg


def check_holders(tl: Timeline, ev: _Events, tr: Transfers, inst: Instance,
                  V: _Violations) -> None:
    """KV_NOT_ON_ENGINE: an entry with ``m > 0`` before it, or an eviction, runs on its
    request's holder (rule 1; applied as given, the holder does not change)."""
    held = holders_before(tl, ev, tr)
    src = np.where(tl.kind == _TRANSFER, 0, tl.src)
    needs = tl.effect & ((tl.kind == _EVICT) | ((tl.kind == _ENTRY) & (ev.m_before[src] > 0)))
    bad = np.flatnonzero(needs & (held != tl.engine))
    ids = inst.engine_ids

    def msg(k):
        x = bad[k]
        what = "eviction" if tl.kind[x] == _EVICT else "entry"
        where = f"engine {ids[held[x]]!r}" if held[x] >= 0 else "no engine"
        return (f"{what} on engine {ids[tl.engine[x]]!r}, but the request's KV "
                f"({int(ev.m_before[src[x]])} tokens) is on {where}")

    V.add_many("KV_NOT_ON_ENGINE", tl.batch[bad], tl.req[bad], msg)


def check_roles(inst: Instance, eb: np.ndarray, er: np.ndarray, decode: np.ndarray,
                eng: np.ndarray, V: _Violations) -> None:
    """ROLE_VIOLATION: no decode entry on a prefill engine, no prefill entry on a decode
    engine (rule 3; applied as given). ``eb``, ``er``, ``decode``: the live entries' batch,
    request and phase."""
    if inst.cluster is None:
        return
    role = np.array([e.role for e in inst.cluster.engines] + ["both"])
    r = role[eng[eb]]
    bad = np.flatnonzero(((r == "prefill") & decode) | ((r == "decode") & ~decode))
    ids = inst.engine_ids
    V.add_many("ROLE_VIOLATION", eb[bad], er[bad],
               lambda k: f"{'decode' if decode[bad[k]] else 'prefill'} entry on engine "
                         f"{ids[eng[eb[bad[k]]]]!r} of role {str(r[bad[k]])!r}")


# --- engine limits and prices (rule 4) -----------------------------------------------------


def batch_durations(inst: Instance, eng: np.ndarray, lb, lc, lm, ld, nb: int) -> np.ndarray:
    """Each batch priced by its engine's cost model (rule 4; section 5)."""
    dur = np.zeros(nb)
    le = eng[lb]
    for k in range(inst.n_engines):
        sel = le == k
        cost = inst.engine(k).cost_model
        if sel.any() and cost is not None:
            dur += cost.batch_times(lb[sel], lc[sel], lm[sel], ld[sel], nb)
    return dur


def check_engine_limits(inst: Instance, eng: np.ndarray, t: _BatchTotals,
                        V: _Violations) -> None:
    """BATCH_TOKENS, PREFILL_TOKENS, BATCH_SIZE against the batch's engine's limits (rule 4)."""
    engines = [inst.engine(k) for k in range(inst.n_engines)]
    big = np.iinfo(np.int64).max
    lim = {name: np.array([getattr(e.limits, name) if getattr(e.limits, name) is not None
                           else big for e in engines] + [big], np.int64)
           for name in ("max_batch_tokens", "max_prefill_tokens", "max_batch_size")}
    ids = inst.engine_ids
    for code, have, name, what in (
            ("BATCH_TOKENS", t.tokens, "max_batch_tokens", "tokens > C"),
            ("PREFILL_TOKENS", t.prefill_tokens, "max_prefill_tokens", "prefill tokens > P"),
            ("BATCH_SIZE", t.entries, "max_batch_size", "entries > max_batch_size")):
        cap = lim[name][eng]
        j = np.flatnonzero(have > cap)
        V.add_many(code, j, None, lambda k, j=j, have=have, cap=cap, what=what:
                   f"engine {ids[eng[j[k]]]!r}: {int(have[j[k]])} {what} = {int(cap[j[k]])}")


# --- time: engine clocks and ready times ----------------------------------------------------


def ready_deps(tl: Timeline, tr: Transfers) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(batch, earlier batch, extra)``: batch ``b`` may not start before ``end[earlier] +
    extra``. The event after a transfer in effect waits for its end (``extra`` the transfer
    time is added by the clock); an event after one on another engine waits for it."""
    touch = tl.kind != _TRANSFER
    if tr.size:
        touch = touch | tr.valid[np.where(tl.kind == _TRANSFER, tl.src, 0)]
    idx = np.flatnonzero(touch)
    if not idx.size:
        z = np.zeros(0, np.int64)
        return z, z, z
    prev = np.concatenate([[-1], idx[:-1]])
    same = np.zeros(idx.size, bool)
    same[1:] = tl.req[idx[1:]] == tl.req[idx[:-1]]
    p = np.where(same, prev, 0)
    after_tr = same & (tl.kind[p] == _TRANSFER)
    cross = same & (after_tr | (tl.engine[p] != tl.engine[idx]))
    k = np.flatnonzero(cross)
    # extra: -1 = none, else the transfer's index (its end is the bound)
    extra = np.where(after_tr[k], tl.src[p[k]], -1)
    return tl.batch[idx[k]], tl.batch[p[k]], extra


def touches(tl: Timeline, tr: Transfers) -> tuple[np.ndarray, np.ndarray]:
    """``(batch, request)`` of every event in effect: entries, evictions, transfers."""
    keep = tl.kind != _TRANSFER
    if tr.size:
        keep = keep | tr.valid[np.where(tl.kind == _TRANSFER, tl.src, 0)]
    return tl.batch[keep], tl.req[keep]


def engine_clock(inst: Instance, s: Schedule, eng: np.ndarray, dur: np.ndarray,
                 touch_b, touch_r, deps, tr: Transfers) -> tuple[np.ndarray, np.ndarray]:
    """Batch ends (section 6, clusters, "Time"): each engine's batches in order, a batch
    starting at the latest of its engine's previous end, the arrivals it touches, its stated
    start and the ready times of ``deps``; transfers start at their batch's end and take
    :meth:`TransferLink.time`. Returns ``(end, ready)`` with ``ready[j]`` the latest ready
    time of batch ``j`` (-inf without one)."""
    nb = dur.size
    arr_max = np.full(nb, -np.inf)
    if touch_b.size:
        np.maximum.at(arr_max, touch_b, inst.arrival[touch_r])
    stated = np.where(np.isnan(s.start), -np.inf, s.start)
    rel = np.maximum(np.maximum(arr_max, stated), 0.0)
    link = inst.cluster.transfer if inst.cluster is not None else None
    tt = link.time(tr.tokens.astype(np.float64)) if tr.size and link is not None \
        else np.zeros(tr.size)
    end = np.zeros(nb)
    ready = np.full(nb, -np.inf)
    db, dp, dx = deps
    if not db.size:
        for k in range(inst.n_engines):
            sel = np.flatnonzero(eng == k)
            if sel.size:
                D = np.cumsum(dur[sel])
                end[sel] = D + np.maximum.accumulate(rel[sel] - (D - dur[sel]))
    else:
        end, ready = _clock_loop(eng, dur, rel, db, dp, dx, tt, inst.n_engines)
    if tr.size:
        tr.start[:] = end[tr.batch]
        tr.end[:] = tr.start + tt
    return end, ready


def _clock_loop(eng, dur, rel, db, dp, dx, tt, n_engines):
    """:func:`engine_clock` batch by batch, for schedules whose requests cross engines."""
    nb = dur.size
    order = np.argsort(db, kind="stable")
    db, dp, dx = db[order].tolist(), dp[order].tolist(), dx[order].tolist()
    end = [0.0] * nb
    ready = [-np.inf] * nb
    clock = [0.0] * (n_engines + 1)
    eng_l, dur_l, rel_l, tt_l = eng.tolist(), dur.tolist(), rel.tolist(), tt.tolist()
    q = 0
    for j in range(nb):
        e = eng_l[j]
        r = -np.inf
        while q < len(db) and db[q] == j:
            t = end[dp[q]] + (tt_l[dx[q]] if dx[q] >= 0 else 0.0)
            r = max(r, t)
            q += 1
        ready[j] = r
        if e < 0:  # an undeclared engine runs nothing
            end[j] = 0.0
            continue
        start = max(clock[e], rel_l[j], r)
        end[j] = clock[e] = start + dur_l[j]
    return np.array(end), np.array(ready)


def check_stated_starts(inst: Instance, s: Schedule, eng, dur, end, ready, touch_b, touch_r,
                        V: _Violations) -> None:
    """START_TOO_EARLY (before the end of the engine's previous batch), BEFORE_ARRIVAL and
    NOT_READY, each with section 4's tolerance (section 6, clusters, "Time")."""
    stated = s.start
    has = ~np.isnan(stated) & (eng >= 0)
    if not has.any():
        return
    nb = stated.size
    prev = np.full(nb, -1, np.int64)  # the engine's previous batch
    for k in range(inst.n_engines):
        sel = np.flatnonzero(eng == k)
        prev[sel[1:]] = sel[:-1]
    end_prev = np.where(prev >= 0, end[np.maximum(prev, 0)], 0.0)
    dur_near = np.maximum(dur, np.where(prev >= 0, dur[np.maximum(prev, 0)], 0.0))
    ids = inst.engine_ids
    j = np.flatnonzero(has & (stated < end_prev - _time_tolerance(dur_near, end_prev)))
    V.add_many("START_TOO_EARLY", j, None, lambda k: (
        f"engine {ids[eng[j[k]]]!r}: stated start {stated[j[k]]:g} is before its previous "
        f"batch (batch {int(prev[j[k]])}) ends at {end_prev[j[k]]:g}" if prev[j[k]] >= 0 else
        f"engine {ids[eng[j[k]]]!r}: stated start {stated[j[k]]:g} is before 0"))
    ta = inst.arrival[touch_r]
    early = np.flatnonzero(has[touch_b] & (ta > stated[touch_b]
                                           + _time_tolerance(dur_near[touch_b], ta)))
    V.add_many("BEFORE_ARRIVAL", touch_b[early], touch_r[early],
               lambda k: f"engine {ids[eng[touch_b[early[k]]]]!r}: batch starts at "
                         f"{stated[touch_b[early[k]]]:g} before the request arrives at "
                         f"{ta[early[k]]:g}")
    fin = np.isfinite(ready)
    j = np.flatnonzero(has & fin & (stated < np.where(fin, ready, 0)
                                    - _time_tolerance(dur_near, np.where(fin, ready, 0))))
    V.add_many("NOT_READY", j, None,
               lambda k: f"engine {ids[eng[j[k]]]!r}: stated start {stated[j[k]]:g} is before "
                         f"a request it touches is ready there at {ready[j[k]]:g} (its KV "
                         "transfer, or its previous batch on another engine, ends then)")


# --- memory on both ends of a transfer -------------------------------------------------------


def _fp(engine: Engine, tokens: np.ndarray) -> np.ndarray:
    assert engine.limits is not None
    return engine.limits.kv_footprint(tokens)


def engine_memory(inst: Instance, eng: np.ndarray, end: np.ndarray, ev: _Events, live,
                  evicted, finish, tr: Transfers, V: _Violations) -> np.ndarray:
    """KV in use after each batch on its engine, with transfers in flight counted on both
    ends (section 6, clusters, "Memory"); KV_OVERFLOW after a batch, TRANSFER_OVERFLOW when
    a transfer starts. Returns the KV after each batch (0 for an undeclared engine)."""
    nb = end.size
    engines = [inst.engine(k) for k in range(inst.n_engines)]
    order_in_engine = np.zeros(nb, np.int64)
    for k in range(inst.n_engines):
        sel = np.flatnonzero(eng == k)
        order_in_engine[sel] = np.arange(sel.size)
    cols: list[tuple] = []  # (engine, time, seq, delta, check id); check id -1: none

    def fp_by(b_eng, tokens):
        out = np.zeros(tokens.size, np.int64)
        for k, e in enumerate(engines):
            sel = b_eng == k
            out[sel] = _fp(e, tokens[sel])
        return out

    # batch deltas (entries' growth, evictions) and their check; finishes freed after it
    le = eng[ev.batch]
    grow = np.where(live, fp_by(le, ev.m_after) - fp_by(le, ev.m_before), 0) \
        - np.where(evicted, fp_by(le, ev.m_before), 0)
    delta = np.bincount(ev.batch, weights=grow, minlength=nb).astype(np.int64)
    freed = np.bincount(ev.batch[finish], weights=fp_by(le[finish], ev.m_after[finish]),
                        minlength=nb).astype(np.int64)
    placed = np.flatnonzero(eng >= 0)
    seq = 2 + 2 * order_in_engine[placed]
    cols.append((eng[placed], end[placed], seq, delta[placed], placed))
    cols.append((eng[placed], end[placed], seq + 1, -freed[placed], np.full(placed.size, -1)))
    if tr.size:
        v = np.flatnonzero(tr.valid)
        src = eng[tr.batch[v]]
        dst = tr.dest[v]
        k_src = fp_by(src, tr.tokens[v])
        k_dst = fp_by(dst, tr.tokens[v])
        zero = tr.end[v] <= tr.start[v]  # leaves after its own batch's check
        leave_seq = np.where(zero, 3 + 2 * order_in_engine[tr.batch[v]], 0)
        cols.append((src, tr.end[v], leave_seq, -k_src, np.full(v.size, -1)))
        cols.append((dst, tr.start[v], np.ones(v.size, np.int64), k_dst, np.full(v.size, -1)))
        big = np.full(v.size, np.iinfo(np.int64).max)
        cols.append((dst, tr.start[v], big, np.zeros(v.size, np.int64), nb + v))
    e_, t_, s_, d_, c_ = (np.concatenate([c[i] for c in cols]) for i in range(5))
    order = np.lexsort((s_, t_, e_))
    e_, d_, c_ = e_[order], d_[order], c_[order]
    level = np.cumsum(d_)  # per engine: less the level before the engine's first event
    is_start = np.ones(e_.size, bool)
    is_start[1:] = e_[1:] != e_[:-1]
    gs = np.maximum.accumulate(np.where(is_start, np.arange(e_.size), 0)) if e_.size else e_
    level = level - np.where(gs > 0, level[np.maximum(gs - 1, 0)], 0)
    cap = np.array([e.limits.kv_capacity for e in engines], np.int64)  # type: ignore[union-attr]
    kv = np.zeros(nb, np.int64)
    chk = c_ >= 0
    bj = c_[chk & (c_ < nb)]
    kv[bj] = level[chk & (c_ < nb)]
    ids = inst.engine_ids
    j = np.flatnonzero((eng >= 0) & (kv > cap[np.maximum(eng, 0)]))
    V.add_many("KV_OVERFLOW", j, None, lambda k: f"engine {ids[eng[j[k]]]!r}: KV in use "
               f"{int(kv[j[k]])} > M = {int(cap[eng[j[k]]])}")
    tsel = chk & (c_ >= nb)
    if tsel.any():
        v = c_[tsel] - nb  # the transfer (its index in tr)
        at = level[tsel]
        over = np.flatnonzero(at > cap[tr.dest[v]])
        V.add_many("TRANSFER_OVERFLOW", tr.batch[v[over]], tr.req[v[over]], lambda k: (
            f"transfer of {int(tr.tokens[v[over[k]]])} tokens to engine "
            f"{ids[tr.dest[v[over[k]]]]!r} at {tr.start[v[over[k]]]:g}: its KV in use would be "
            f"{int(at[over[k]])} > M = {int(cap[tr.dest[v[over[k]]]])}"))
    return kv


def check_reuse_moved(inst: Instance, s: Schedule, eng: np.ndarray, V: _Violations) -> None:
    """REUSE_MOVED (section 6, "Clusters", prefix reuse on replicas): with prefix reuse a
    request stays on one engine and no KV moves; reports the first transfer, or else the
    first request whose entries or evictions run on a second engine (``eng``: each batch's
    engine position, -1 undeclared)."""
    pl = s.placement
    if pl is not None and pl.n_transfers:
        V.add_many("REUSE_MOVED", [-1], [-1], lambda k: "the schedule transfers KV between "
                   "engines, which prefix reuse does not model")
        return
    idmap = np.array([inst.index.get(x, -1) for x in s.ids], np.int64)
    seen: dict[int, int] = {}
    for col, bcol in ((s.entry_req, s.batch_of_entry), (s.evict_req, s.batch_of_evict)):
        order = np.argsort(bcol, kind="stable")
        for r, b in zip(idmap[col[order]].tolist(), bcol[order].tolist()):
            k = int(eng[b]) if b < eng.size else -1
            if r < 0 or k < 0 or seen.setdefault(r, k) == k:
                continue
            msg = f"runs on engine {inst.engine_ids[k]!r} after engine {inst.engine_ids[seen[r]]!r}"
            V.add_many("REUSE_MOVED", [b], [r], lambda _, m=msg: m)
            return


__all__ = ["Transfers", "Timeline", "batch_engines", "drop_unplaced", "transfer_items",
           "timeline", "holders_before", "check_transfers", "check_holders", "check_roles",
           "batch_durations", "check_engine_limits", "ready_deps", "touches", "engine_clock",
           "check_stated_starts", "engine_memory", "check_reuse_moved"]
