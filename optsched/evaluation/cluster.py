"""The replay of all engines of a cluster (docs/semantics.md section 6, "Clusters").

:func:`evaluate_cluster` judges a schedule on an instance that declares a cluster, or a
schedule that names engines: the request state of section 3 is the single-engine replay's
(:mod:`.evaluator`, over all batches in the order listed, since a transfer moves KV without
changing ``S``, ``m``, ``g``), and :mod:`.cluster_rules` adds what couples the engines:
engines of batches, holders, transfers, roles, engine limits and prices, engine clocks with
ready times, memory on both ends of a transfer. ``optsched.evaluate`` calls it.

Two paths, one answer. The reference replays every rule. When no KV moves, every batch runs
on a declared engine of role ``both`` and every request stays on one engine, the schedule is
the union of independent single-engine schedules: each engine's batches on the instance of
its requests with its limits and cost model, judged by the single-engine evaluator (and its
compiled replay above 100,000 entries) -- the router schedules of ``optsched.cluster``. That
path answers only when every engine's schedule is feasible (else the reference reports the
violations with the cluster's batch numbers); ``tests/evaluation/test_cluster.py`` checks
that both give the same evaluation.

Prefix reuse on replicas (section 6, "Clusters", prefix reuse): each engine has its own KV
cache, so the union of single-engine schedules is the definition, not a shortcut: each
engine's batches, with their hits and drops, are judged by the single-engine reuse rules
(:mod:`.prefix`) on the sub-instance of its requests, which keeps their block ids. A hit
on a block resident only on another engine is then ``HIT_NOT_RESIDENT`` on the batch's
engine; its violations come back with the cluster's batch numbers and the engine named. A
schedule that moves a request between engines (or transfers KV) is ``REUSE_MOVED``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from ..errors import InstanceError
from ..instance import Instance
from ..schedule import Schedule
from . import cluster_rules as R
from . import prefix as prefix_rules
from .evaluator import (
    Evaluation,
    Violation,
    _batch_totals,
    _BatchTotals,
    _check_cache_type,
    _check_complete,
    _check_entries,
    _check_evict_or_process,
    _check_evictions,
    _check_hidden_enabled,
    _check_host_memory,
    _check_known_requests,
    _check_once_per_batch,
    _check_positive_tokens,
    _check_swaps,
    _columns,
    _decode_entries,
    _evaluation,
    _replay,
    _Violations,
    token_gaps,
)
from .evaluator import evaluate as evaluate_engine

#: Violation codes of the cluster rules (docs/semantics.md section 6, "Clusters"), with the
#: rule each enforces; the codes of sections 3-4 keep their meaning on each engine.
CLUSTER_CODES = {
    "UNKNOWN_ENGINE": "a batch or a transfer names an engine the instance does not declare",
    "KV_NOT_ON_ENGINE": "an entry or eviction of a request that holds KV runs on an engine "
                        "that does not hold it",
    "ROLE_VIOLATION": "a decode entry on a prefill engine or a prefill entry on a decode engine",
    "NOT_READY": "a batch with a stated start touches a request before it is ready on the "
                 "engine (its transfer, or its previous batch on another engine, has not ended)",
    "TRANSFER_DISABLED": "a transfer on an instance whose cluster has no transfer link",
    "TRANSFER_NOT_RESIDENT": "a transfer names a request whose KV is not on the batch's engine "
                             "after the batch, or that finished",
    "TRANSFER_SAME_ENGINE": "a transfer's destination is the engine it is sent from",
    "DUPLICATE_TRANSFER": "a request is listed twice among one batch's transfers",
    "TRANSFER_OVERFLOW": "the destination's KV in use when a transfer starts, the transfer "
                         "included, exceeds its M",
    "REUSE_MOVED": "with prefix reuse (block ids, hits or drops), a request whose batches run "
                   "on more than one engine, or a transfer: moving cached blocks between "
                   "engines is not modelled",
}


def _empty_int() -> np.ndarray:
    return np.zeros(0, np.int64)


@dataclass(frozen=True, eq=False)
class ClusterEvaluation(Evaluation):
    """An :class:`Evaluation` of a cluster schedule: the cluster's metrics (section 6) in
    ``metrics``, one dict of per-engine metrics per engine in ``engines``, each batch's engine
    and the transfers in effect."""

    engine_ids: tuple[str, ...] = ()
    #: per batch: its engine's position in ``engine_ids`` (-1: an undeclared engine)
    batch_engine: np.ndarray = field(default_factory=_empty_int, repr=False)
    engines: tuple[dict[str, Any], ...] = ()
    #: the transfers in effect: batch, request position, source and destination engine,
    #: tokens, start and end times
    transfer_batch: np.ndarray = field(default_factory=_empty_int, repr=False)
    transfer_request: np.ndarray = field(default_factory=_empty_int, repr=False)
    transfer_source: np.ndarray = field(default_factory=_empty_int, repr=False)
    transfer_dest: np.ndarray = field(default_factory=_empty_int, repr=False)
    transfer_tokens: np.ndarray = field(default_factory=_empty_int, repr=False)
    transfer_start: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    transfer_end: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)

    def summary(self) -> str:
        lines = [super().summary()]
        for e in self.engines:
            util = e.get("utilisation")
            lines.append(f"  engine {e['id']} ({e['role']}): {e['batches']} batches, "
                         f"utilisation {'-' if util is None else f'{util:.1%}'}, "
                         f"peak KV {e['peak_kv']}, {e['completions']} completions")
        return "\n".join(lines)

    def to_dict(self, *, requests: bool = True, batches: bool = False) -> dict[str, Any]:
        d = super().to_dict(requests=requests, batches=batches)
        d["engines"] = [dict(e) for e in self.engines]
        if batches:
            for j, b in enumerate(d["batches"]):
                k = int(self.batch_engine[j])
                b["engine"] = self.engine_ids[k] if k >= 0 else None
        return d


def evaluate_cluster(instance: Instance, schedule: Schedule) -> ClusterEvaluation:
    """Replay ``schedule`` on all engines of ``instance`` (semantics section 6, "Clusters");
    never raises on a syntactically valid schedule: broken rules come back as violations."""
    reuse = instance.has_prefix or schedule.has_hits or schedule.has_drops
    done = _by_engine(instance, schedule, reuse)
    if done is not None:
        return done
    ref = _reference(instance, schedule)
    return _with_moved(instance, schedule, ref) if reuse else ref


def _with_moved(inst: Instance, s: Schedule, ref: ClusterEvaluation) -> ClusterEvaluation:
    """``ref`` with REUSE_MOVED for the first request on two engines or the first transfer
    (a reuse schedule the union of engines cannot judge; module docstring)."""
    V = _Violations(inst.ids)
    R.check_reuse_moved(inst, s, np.asarray(ref.batch_engine), V)
    if not V.counts:
        return ref
    counts = dict(ref.violation_counts)
    for c, n in V.counts.items():
        counts[c] = counts.get(c, 0) + n
    return replace(ref, feasible=False, violations=ref.violations + tuple(V.kept),
                   violation_counts=counts)


# --- the reference: every rule ------------------------------------------------------------


def _reference(inst: Instance, s: Schedule) -> ClusterEvaluation:
    n, nb = inst.n, s.n_batches
    V = _Violations(inst.ids)
    eng = R.batch_engines(inst, s, V)
    entries, evictions = _columns(inst, s)
    R.drop_unplaced(entries, eng)
    R.drop_unplaced(evictions, eng)
    _check_known_requests(entries, s.ids, V)
    _check_known_requests(evictions, s.ids, V)
    _check_positive_tokens(entries, V)
    _check_once_per_batch(entries, evictions, n, V)
    _check_evict_or_process(entries, evictions, n, V)
    _check_hidden_enabled(entries, inst.limits, V)
    ev = _replay(inst, entries, evictions, nb)
    evicted = _check_evictions(ev, V)
    live = _check_entries(ev, V)
    _check_cache_type(ev, live, V)
    decode = _decode_entries(ev, live, inst.prompt)
    gen_first = live & (ev.g_before == 0) & (ev.g_after >= 1)
    finish = live & (ev.g_before < ev.O) & (ev.g_after >= ev.O)

    tr = R.transfer_items(inst, s, eng, V)
    tl = R.timeline(ev, live, evicted, tr, eng)
    R.check_transfers(tl, ev, tr, inst, V)
    R.check_holders(tl, ev, tr, inst, V)

    E = entries.batch.size
    ent_live, ent_decode = np.zeros(E, bool), np.zeros(E, bool)
    ent_cached, ent_gen = np.zeros(E, np.int64), np.zeros(E, bool)
    src_e = ev.src[ev.is_entry]
    ent_live[src_e] = live[ev.is_entry]
    ent_decode[src_e] = decode[ev.is_entry]
    ent_cached[src_e] = ev.m_before[ev.is_entry]
    gen = live & (ev.g_after > ev.g_before) & (ev.g_before < ev.O)
    ent_gen[src_e] = gen[ev.is_entry]
    L = np.flatnonzero(ent_live)
    lb, lc, lm, ld = entries.batch[L], entries.tokens[L], ent_cached[L], ent_decode[L]
    R.check_roles(inst, lb, entries.req[L], ld, eng, V)
    dur = R.batch_durations(inst, eng, lb, lc, lm, ld, nb)
    totals = _batch_totals(lb, lc, ld, nb)
    R.check_engine_limits(inst, eng, totals, V)
    if s.has_swaps:  # a cluster has no host memory (section 6): reported as for one engine
        swaps = _check_swaps(inst, s, nb, ev, live, evicted, V)
        _check_host_memory(swaps.host_kv, None, V)

    touch_b, touch_r = R.touches(tl, tr)
    deps = R.ready_deps(tl, tr)
    end, ready = R.engine_clock(inst, s, eng, dur, touch_b, touch_r, deps, tr)
    R.check_stated_starts(inst, s, eng, dur, end, ready, touch_b, touch_r, V)
    kv = R.engine_memory(inst, eng, end, ev, live, evicted, finish, tr, V)

    first_token = np.full(n, np.nan)
    completion = np.full(n, np.nan)
    first_token[ev.req[gen_first]] = end[ev.batch[gen_first]]
    completion[ev.req[finish]] = end[ev.batch[finish]]
    g_final = np.zeros(n, np.int64)
    if ev.size:
        np.maximum.at(g_final, ev.req[live], np.minimum(ev.g_after[live], ev.O[live]))
    _check_complete(g_final, inst.output, V)
    n_evict = np.bincount(ev.req[evicted], minlength=n)
    recomputed = np.bincount(ev.req[evicted], weights=ev.m_before[evicted],
                             minlength=n).astype(np.int64)
    gaps = token_gaps(n, s, entries.req, ent_gen, end)  # section 4's max_tbt, over engines
    base = _evaluation(inst, V, n_evict, recomputed, first_token, completion, g_final, end, dur,
                       kv, totals, ent_decode, ent_cached, ent_gen=ent_gen, gaps=gaps)
    v = np.flatnonzero(tr.valid)
    moved = (tr.batch[v], tr.req[v], eng[tr.batch[v]], tr.dest[v], tr.tokens[v], tr.start[v],
             tr.end[v])
    e_req = np.where(ent_live, entries.req, -1)
    return _cluster_evaluation(inst, base, eng, entries.batch, e_req, moved)


# --- the union of single-engine schedules -------------------------------------------------


def _by_engine(inst: Instance, s: Schedule, reuse: bool = False) -> ClusterEvaluation | None:
    """The evaluation as the union of each engine's single-engine evaluation, when the
    schedule is one (module docstring), else None. With ``reuse`` (prefix reuse) an engine's
    violations are kept (the union is the definition), without it they send the schedule to
    the reference."""
    pl = s.placement
    if (pl is not None and pl.n_transfers) or s.has_swaps or s.has_hidden:
        return None
    if inst.cluster is not None and any(e.role != "both" for e in inst.cluster.engines):
        return None
    V = _Violations(inst.ids)
    eng = R.batch_engines(inst, s, V)
    if V.counts:
        return None
    idmap = np.array([inst.index.get(x, -1) for x in s.ids], np.int64)
    e_req = idmap[s.entry_req]
    v_req = idmap[s.evict_req]
    if (e_req < 0).any() or (v_req < 0).any():
        return None
    owner = np.full(inst.n, -1, np.int64)
    e_bat = s.batch_of_entry  # each computed once: they are as long as the schedule
    e_eng = eng[e_bat]
    v_eng = eng[s.batch_of_evict]
    owner[e_req] = e_eng
    owner[v_req] = v_eng
    if reuse and eng.size:
        owner[owner < 0] = 0  # no events: INCOMPLETE in engine 0's part (the union rules)
    if (owner < 0).any() or (owner[e_req] != e_eng).any() or (owner[v_req] != v_eng).any():
        return None  # a request without events (INCOMPLETE) or on two engines
    parts = []
    for k in range(inst.n_engines):
        part = _engine_part(inst, s, k, eng, owner, e_req, v_req, e_eng, v_eng, reuse)
        if part is None:
            return None
        parts.append(part)
    return _merge(inst, s, eng, e_req, parts, e_bat, reuse)


def _engine_part(inst: Instance, s: Schedule, k: int, eng, owner, e_req, v_req, e_eng, v_eng,
                 reuse: bool = False):
    """Engine ``k``'s batches on the instance of its requests (their block ids kept), with
    their hits and drops, evaluated; None for a request that does not fit the engine, or
    (without ``reuse``) an infeasible part. ``e_eng``, ``v_eng``: the engine of each entry
    and eviction."""
    reqs = np.flatnonzero(owner == k)
    bat = np.flatnonzero(eng == k)
    if not bat.size and not reqs.size:
        return reqs, bat, np.zeros(0, np.int64), None
    e = inst.engine(k)
    local = np.full(inst.n, -1, np.int64)
    local[reqs] = np.arange(reqs.size)
    pre = None
    if inst.has_prefix:
        blocks = [inst.requests[i].prefix for i in reqs.tolist()]
        ptr = np.concatenate([[0], np.cumsum([len(b) for b in blocks])]).astype(np.int64)
        pre = (ptr, np.fromiter((x for b in blocks for x in b), np.int64, count=int(ptr[-1])))
    try:
        sub = Instance.from_columns(inst.name, e.limits, e.cost_model,  # type: ignore[arg-type]
                                    [inst.ids[i] for i in reqs.tolist()], inst.arrival[reqs],
                                    inst.prompt[reqs], inst.output[reqs], prefix=pre)
    except InstanceError:
        return None
    ent = np.flatnonzero(e_eng == k)
    evs = np.flatnonzero(v_eng == k)
    bptr = np.concatenate([[0], np.cumsum(np.diff(s.batch_ptr)[bat])])
    vptr = np.concatenate([[0], np.cumsum(np.diff(s.evict_ptr)[bat])])
    drops: dict = {}
    if s.has_drops:
        nd = np.diff(s.drop_ptr)
        mine = eng[np.repeat(np.arange(nd.size), nd)] == k
        drops = {"drop_ptr": np.concatenate([[0], np.cumsum(nd[bat])]),
                 "drop_block": s.drop_block[mine]}
    sched = Schedule(sub.ids, bptr, local[e_req[ent]], s.entry_tokens[ent], vptr,
                     local[v_req[evs]], s.start[bat], entry_hit=s.entry_hit[ent], **drops)
    ev = evaluate_engine(sub, sched)
    if not ev.feasible and not reuse:
        return None
    return reqs, bat, ent, ev


def _merge(inst: Instance, s: Schedule, eng, e_req, parts, e_bat, reuse: bool = False
           ) -> ClusterEvaluation:
    """One cluster evaluation from the engines' (``parts``); with ``reuse`` their violations
    (cluster batch numbers, the engine named) and prefix-reuse figures are merged too."""
    n, nb, E = inst.n, s.n_batches, s.n_entries
    V = _Violations(inst.ids)
    g_final = inst.output.copy()
    hit_req, res_b, cac_b = np.zeros(n, np.int64), np.zeros(nb, np.int64), np.zeros(nb, np.int64)
    dropped = 0
    req_cols = {name: np.full(n, np.nan) for name in ("first_token", "completion")}
    n_evict = np.zeros(n, np.int64)
    recomputed = np.zeros(n, np.int64)
    bat_cols = {name: np.zeros(nb) for name in ("batch_end", "batch_duration")}
    kv = np.zeros(nb, np.int64)
    tot = {name: np.zeros(nb, np.int64) for name in
           ("batch_tokens", "batch_prefill_tokens", "batch_prefill_entries",
            "batch_decode_entries")}
    ent_decode, ent_cached, ent_gen = np.zeros(E, bool), np.zeros(E, np.int64), np.zeros(E, bool)
    for k, (reqs, bat, ent, ev) in enumerate(parts):
        if ev is None:
            continue
        for name in req_cols:
            req_cols[name][reqs] = getattr(ev, name)
        n_evict[reqs] = ev.evictions
        recomputed[reqs] = ev.recomputed_tokens
        for name in bat_cols:
            bat_cols[name][bat] = getattr(ev, name)
        kv[bat] = ev.batch_kv
        for name in tot:
            tot[name][bat] = getattr(ev, name)
        ent_decode[ent], ent_cached[ent] = ev.entry_decode, ev.entry_cached
        ent_gen[ent] = ev.entry_generates
        if reuse:
            _merge_reuse(inst, V, k, reqs, bat, ev, hit_req, res_b, cac_b)
            if not ev.feasible:  # tokens generated: the generating entries, at most O
                gen = np.bincount(e_req[ent][ev.entry_generates], minlength=n)
                g_final[reqs] = np.minimum(gen[reqs], inst.output[reqs])
            dropped += int(ev.metrics.get("dropped_blocks") or 0)
    totals = _BatchTotals(tot["batch_tokens"], tot["batch_prefill_tokens"],
                          tot["batch_prefill_entries"], tot["batch_decode_entries"])
    hits = None
    if reuse:
        z0 = np.zeros(nb, np.int64)
        hits = (hit_req, prefix_rules.BlockEffects(res_b, cac_b, z0))
    base = _evaluation(inst, V, n_evict, recomputed,
                       req_cols["first_token"], req_cols["completion"], g_final,
                       bat_cols["batch_end"], bat_cols["batch_duration"], kv, totals,
                       ent_decode, ent_cached, ent_gen=ent_gen,
                       gaps=token_gaps(n, s, e_req, ent_gen, bat_cols["batch_end"]), hits=hits)
    if reuse:
        base.metrics["dropped_blocks"] = dropped
    z = np.zeros(0, np.int64)
    moved = (z, z, z, z, z, np.zeros(0), np.zeros(0))
    return _cluster_evaluation(inst, base, eng, e_bat, e_req, moved)


def _merge_reuse(inst: Instance, V: _Violations, k: int, reqs, bat, ev, hit_req, res_b,
                 cac_b) -> None:
    """One engine's part of a reuse evaluation into the cluster's arrays: its violations
    with cluster batch numbers and its engine named, hit tokens per request, resident and
    cached blocks per batch (of the batch's engine)."""
    for code, cnt in ev.violation_counts.items():
        V.counts[code] = V.counts.get(code, 0) + cnt
    for v in ev.violations:
        b = None if v.batch is None else int(bat[v.batch])
        V.kept.append(Violation(v.code, b, v.request, f"engine {inst.engine_ids[k]!r}: "
                                f"{v.message}"))
    if ev.hit_tokens.size:
        hit_req[reqs] = ev.hit_tokens
    if ev.batch_resident_blocks.size:
        res_b[bat] = ev.batch_resident_blocks
        cac_b[bat] = ev.batch_cached_blocks


# --- metrics (section 6, clusters, "Metrics") -----------------------------------------------


def _cluster_evaluation(inst: Instance, base: Evaluation, eng: np.ndarray, entry_batch,
                        entry_req, moved) -> ClusterEvaluation:
    """``base`` (section 4's metrics over all batches) with the cluster's metrics and the
    per-engine ones; ``entry_req`` is -1 for an entry not in effect."""
    tb, treq, tsrc, tdst, ttok, tstart, tend = moved
    metrics = dict(base.metrics)
    engines = [inst.engine(k) for k in range(inst.n_engines)]
    cap = np.array([e.limits.kv_capacity for e in engines] + [0], np.float64)  # type: ignore
    dur, kv = base.batch_duration, base.batch_kv
    busy_cap = float((cap[eng] * dur).sum())
    metrics["kv_utilisation"] = float((kv * dur).sum() / busy_cap) if busy_cap > 0 else None
    span = _span(inst, metrics)
    link = inst.cluster.transfer if inst.cluster is not None else None
    gpus = sum(e.gpus for e in engines)
    metrics.update({
        "engines": len(engines), "gpus": gpus, "span": span,
        "transfers": int(tb.size), "transfer_tokens": int(ttok.sum()),
        "transfer_bytes": float(ttok.sum() * link.bytes_per_token) if link else 0.0,
        "transfer_time": float((tend - tstart).sum()),
    })
    if "slo_attainment" in metrics:
        met = _slo_met(inst, metrics["slo_attainment"])
        metrics["goodput"] = met / span if span else None
        metrics["goodput_per_gpu"] = met / span / gpus if span else None
    if all(e.hourly_cost is not None for e in engines) and span is not None:
        metrics["cost"] = sum(e.hourly_cost for e in engines) * span / 3600  # type: ignore
    gen = base.entry_generates & (entry_req >= 0)
    first_last = _generation_batches(entry_batch, entry_req, gen, base.request_ids)
    per = tuple(_engine_metrics(k, e, base, eng, entry_batch, entry_req, span, tsrc, tdst, ttok,
                                first_last) for k, e in enumerate(engines))
    kw = {f.name: getattr(base, f.name) for f in fields(Evaluation)}
    kw["metrics"] = metrics
    return ClusterEvaluation(**kw, engine_ids=inst.engine_ids, batch_engine=eng, engines=per,
                             transfer_batch=tb, transfer_request=treq, transfer_source=tsrc,
                             transfer_dest=tdst, transfer_tokens=ttok, transfer_start=tstart,
                             transfer_end=tend)


def _span(inst: Instance, metrics: dict[str, Any]) -> float | None:
    """Makespan minus the earliest arrival (None when it is not positive)."""
    if not inst.n:
        return None
    span = float(metrics["makespan"]) - float(inst.arrival.min())
    return span if span > 0 else None


def _slo_met(inst: Instance, attainment: float) -> int:
    """Requests meeting all their SLOs (section 4): the attainment times the requests with
    an SLO."""
    n_slo = sum(1 for r in inst.requests
                if r.ttft_slo is not None or r.tpot_slo is not None or r.deadline is not None)
    return int(round(attainment * n_slo))


def _engine_metrics(k: int, e, base: Evaluation, eng, entry_batch, entry_req, span,
                    tsrc, tdst, ttok, first_last) -> dict[str, Any]:
    """Engine ``k``'s metrics (section 6, clusters, "Metrics"); ``first_last``: each
    request's first and last generating batch (:func:`_generation_batches`)."""
    on = eng == k
    eng = np.append(eng, -1)  # index -1 (a request without a first token) hits no engine
    dur, kv = base.batch_duration[on], base.batch_kv[on]
    busy = float(dur.sum())
    M = e.limits.kv_capacity
    ent_on = (eng[:-1][entry_batch] == k) & (entry_req >= 0)
    first_b, last_b = first_last
    done = np.isfinite(base.completion)
    return {
        "id": e.id, "role": e.role, "gpus": e.gpus, "batches": int(on.sum()),
        "busy_time": busy, "utilisation": busy / span if span else None,
        "peak_kv": int(kv.max()) if kv.size else 0,
        "kv_utilisation": float((kv * dur).sum() / (M * busy)) if busy > 0 else None,
        "tokens": int(base.batch_tokens[on].sum()),
        "prefill_tokens": int(base.batch_prefill_tokens[on].sum()),
        "decode_entries": int(base.batch_decode_entries[on].sum()),
        "requests": int(np.unique(entry_req[ent_on]).size),
        "first_tokens": int((eng[first_b] == k).sum()),
        "completions": int((done & (eng[last_b] == k)).sum()),
        "transfers_out": int((tsrc == k).sum()), "transfers_in": int((tdst == k).sum()),
        "transfer_tokens_out": int(ttok[tsrc == k].sum()),
        "transfer_tokens_in": int(ttok[tdst == k].sum()),
    }


def _generation_batches(entry_batch, entry_req, gen, ids) -> tuple[np.ndarray, np.ndarray]:
    """Per request, the batch of its first and of its last generating entry (-1: none)."""
    n = len(ids)
    first = np.full(n, -1, np.int64)
    last = np.full(n, -1, np.int64)
    g = np.flatnonzero(gen)
    if g.size:  # the least and the greatest batch over each request's generating entries
        r, b = entry_req[g], entry_batch[g]
        lo = np.full(n, np.iinfo(np.int64).max, np.int64)
        np.minimum.at(lo, r, b)
        np.maximum.at(last, r, b)
        seen = last >= 0
        first[seen] = lo[seen]
    return first, last


__all__ = ["CLUSTER_CODES", "ClusterEvaluation", "evaluate_cluster"]
