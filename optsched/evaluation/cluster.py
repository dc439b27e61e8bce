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
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from ..errors import InstanceError
from ..instance import Instance
from ..schedule import Schedule
from . import cluster_rules as R
from .evaluator import (
    Evaluation,
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
    done = _by_engine(instance, schedule)
    return done if done is not None else _reference(instance, schedule)


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


def _by_engine(inst: Instance, s: Schedule) -> ClusterEvaluation | None:
    """The evaluation as the union of each engine's single-engine evaluation, when the
    schedule is one (module docstring), else None."""
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
    if (owner < 0).any() or (owner[e_req] != e_eng).any() or (owner[v_req] != v_eng).any():
        return None  # a request without events (INCOMPLETE) or on two engines
    parts = []
    for k in range(inst.n_engines):
        part = _engine_part(inst, s, k, eng, owner, e_req, v_req, e_eng, v_eng)
        if part is None:
            return None
        parts.append(part)
    return _merge(inst, s, eng, e_req, parts, e_bat)


def _engine_part(inst: Instance, s: Schedule, k: int, eng, owner, e_req, v_req, e_eng, v_eng):
    """Engine ``k``'s batches on the instance of its requests, evaluated; None unless
    feasible (or a request that does not fit the engine). ``e_eng``, ``v_eng``: the engine
    of each entry and eviction."""
    reqs = np.flatnonzero(owner == k)
    bat = np.flatnonzero(eng == k)
    if not bat.size and not reqs.size:
        return reqs, bat, np.zeros(0, np.int64), None
    e = inst.engine(k)
    local = np.full(inst.n, -1, np.int64)
    local[reqs] = np.arange(reqs.size)
    try:
        sub = Instance.from_columns(inst.name, e.limits, e.cost_model,  # type: ignore[arg-type]
                                    [inst.ids[i] for i in reqs.tolist()], inst.arrival[reqs],
                                    inst.prompt[reqs], inst.output[reqs])
    except InstanceError:
        return None
    ent = np.flatnonzero(e_eng == k)
    evs = np.flatnonzero(v_eng == k)
    bptr = np.concatenate([[0], np.cumsum(np.diff(s.batch_ptr)[bat])])
    vptr = np.concatenate([[0], np.cumsum(np.diff(s.evict_ptr)[bat])])
    sched = Schedule(sub.ids, bptr, local[e_req[ent]], s.entry_tokens[ent], vptr,
                     local[v_req[evs]], s.start[bat])
    ev = evaluate_engine(sub, sched)
    if not ev.feasible:
        return None
    return reqs, bat, ent, ev


def _merge(inst: Instance, s: Schedule, eng, e_req, parts, e_bat) -> ClusterEvaluation:
    n, nb, E = inst.n, s.n_batches, s.n_entries
    req_cols = {name: np.full(n, np.nan) for name in ("first_token", "completion")}
    n_evict = np.zeros(n, np.int64)
    recomputed = np.zeros(n, np.int64)
    bat_cols = {name: np.zeros(nb) for name in ("batch_end", "batch_duration")}
    kv = np.zeros(nb, np.int64)
    tot = {name: np.zeros(nb, np.int64) for name in
           ("batch_tokens", "batch_prefill_tokens", "batch_prefill_entries",
            "batch_decode_entries")}
    ent_decode, ent_cached, ent_gen = np.zeros(E, bool), np.zeros(E, np.int64), np.zeros(E, bool)
    for reqs, bat, ent, ev in parts:
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
    totals = _BatchTotals(tot["batch_tokens"], tot["batch_prefill_tokens"],
                          tot["batch_prefill_entries"], tot["batch_decode_entries"])
    base = _evaluation(inst, _Violations(inst.ids), n_evict, recomputed,
                       req_cols["first_token"], req_cols["completion"], inst.output.copy(),
                       bat_cols["batch_end"], bat_cols["batch_duration"], kv, totals,
                       ent_decode, ent_cached, ent_gen=ent_gen,
                       gaps=token_gaps(n, s, e_req, ent_gen, bat_cols["batch_end"]))
    z = np.zeros(0, np.int64)
    moved = (z, z, z, z, z, np.zeros(0), np.zeros(0))
    return _cluster_evaluation(inst, base, eng, e_bat, e_req, moved)


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
