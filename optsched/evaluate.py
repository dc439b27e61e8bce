"""The one validator/evaluator: replay a schedule under DESIGN sections 3-4.

Every schedule -- from a policy, a solver, a file, a warm start -- is judged
here. Violations are data (:class:`Violation`), never exceptions; metrics are
computed here and nowhere else (:meth:`Evaluation.objective` is what solvers
are checked against).

How the replay works (vectorised; 5 M entries replay in a few seconds)
-----------------------------------------------------------------------
Per request, events (entries and evictions) are sorted by batch. Between two
evictions a request's cached tokens ``m`` grow by the entries' ``c``; with
``S0 = I + g0`` tokens known when such a *residency segment* starts, the request
generates a token exactly at the entries whose ``m`` after the batch reaches
``S0`` and at every (one-token) entry after that. Hence in closed form, for an
entry with ``m`` before/after::

    g_before = g0 + max(0, m_before - S0 + 1)      g_after = g0 + max(0, m_after - S0 + 1)
    available = S0 - m_before  if m_before < S0  else 1

and across segments ``g0(next) = max(g0, m_end - I + 1)``, a running maximum.
That turns the sequential replay into sorts, cumulative sums and cumulative
maxima. When the schedule is infeasible the replay continues by applying each
entry as given (so later violations may be consequences of earlier ones);
entries with unknown requests, non-positive tokens, duplicates, and entries
after a request finished are reported and then ignored.

KV in use after batch ``j`` (DESIGN section 3, step 3) is a running sum of
per-batch deltas: ``+c`` (in blocks) for each entry, ``-m`` at an eviction, and
``-m`` one batch after a request finishes. Batch ends follow
``end_j = max(end_{j-1}, r_j) + d_j`` (``r_j`` = latest arrival touched or the
stated start), computed as ``D_j + cummax(r_k - D_{k-1})`` with ``D`` the
cumulative durations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .instance import Instance
from .schedule import Schedule

#: Violation codes, each with the rule of DESIGN sections 3-4 it enforces.
CODES = {
    "UNKNOWN_REQUEST": "an entry or eviction names a request the instance does not have",
    "BEFORE_ARRIVAL": "a batch with a stated start touches a request before it arrives",
    "START_TOO_EARLY": "a stated start is before the previous batch ends",
    "ZERO_TOKENS": "an entry processes fewer than 1 token",
    "TOKENS_OVER_AVAILABLE": "an entry processes more than S - m tokens",
    "DUPLICATE_ENTRY": "a request appears twice among one batch's entries",
    "DUPLICATE_EVICTION": "a request is listed twice among one batch's evictions",
    "EVICT_AND_PROCESS": "a request is evicted and processed in the same batch",
    "EVICT_NOT_RESIDENT": "an evicted request holds no KV (never processed, evicted, or finished)",
    "ENTRY_AFTER_FINISH": "an entry processes a request that already generated all its tokens",
    "KV_OVERFLOW": "KV in use after the batch exceeds the capacity M",
    "BATCH_TOKENS": "a batch processes more than C tokens",
    "PREFILL_TOKENS": "a batch processes more than P prefill tokens",
    "BATCH_SIZE": "a batch has more entries than max_batch_size",
    "INCOMPLETE": "a request does not generate all its output tokens",
}

#: At most this many violations of one code are kept as objects (all are counted).
MAX_KEPT_PER_CODE = 10_000

from .solve_types import OBJECTIVES  # noqa: E402  (the one list of objective names)


@dataclass(frozen=True)
class Violation:
    """One broken rule: ``batch`` is 0-based, ``request`` an id (None if batch-wide)."""

    code: str
    batch: int | None
    request: str | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "batch": self.batch, "request": self.request, "message": self.message}

    def __str__(self) -> str:
        where = []
        if self.batch is not None:
            where.append(f"batch {self.batch}")
        if self.request is not None:
            where.append(f"request {self.request!r}")
        head = f"{self.code} ({', '.join(where)})" if where else self.code
        return f"{head}: {self.message}"


@dataclass(frozen=True, eq=False)
class Evaluation:
    """The replay's verdict and every metric of DESIGN section 4."""

    feasible: bool
    violations: tuple[Violation, ...]
    violation_counts: dict[str, int]
    # per request (instance order)
    request_ids: tuple[str, ...]
    first_token: np.ndarray
    completion: np.ndarray
    latency: np.ndarray
    ttft: np.ndarray
    tpot: np.ndarray
    evictions: np.ndarray
    recomputed_tokens: np.ndarray
    # per batch
    batch_start: np.ndarray
    batch_end: np.ndarray
    batch_duration: np.ndarray
    batch_kv: np.ndarray
    batch_tokens: np.ndarray
    batch_prefill_tokens: np.ndarray
    batch_prefill_entries: np.ndarray
    batch_decode_entries: np.ndarray
    # per entry (schedule order): phase and cached tokens before the batch
    entry_decode: np.ndarray = field(repr=False)
    entry_cached: np.ndarray = field(repr=False)
    metrics: dict[str, Any] = field(default_factory=dict)

    def objective(self, kind: str) -> float:
        """The objective a formulation optimises, computed from this replay only."""
        key = {"makespan": "makespan", "total-latency": "total_latency", "mean-ttft": "mean_ttft"}
        if kind not in key:
            raise ValueError(f"unknown objective {kind!r}; choose one of {', '.join(OBJECTIVES)}")
        v = self.metrics[key[kind]]
        return math.nan if v is None else float(v)

    def to_dict(self, *, requests: bool = True, batches: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "feasible": self.feasible,
            "violations": [v.to_dict() for v in self.violations],
            "violation_counts": dict(self.violation_counts),
            "metrics": {k: _json_num(v) for k, v in self.metrics.items()},
        }
        if requests:
            d["requests"] = [
                {
                    "id": rid,
                    "first_token": _json_num(self.first_token[i]),
                    "completion": _json_num(self.completion[i]),
                    "latency": _json_num(self.latency[i]),
                    "ttft": _json_num(self.ttft[i]),
                    "tpot": _json_num(self.tpot[i]),
                    "evictions": int(self.evictions[i]),
                    "recomputed_tokens": int(self.recomputed_tokens[i]),
                }
                for i, rid in enumerate(self.request_ids)
            ]
        if batches:
            d["batches"] = [
                {
                    "start": float(self.batch_start[j]),
                    "end": float(self.batch_end[j]),
                    "duration": float(self.batch_duration[j]),
                    "kv": int(self.batch_kv[j]),
                    "tokens": int(self.batch_tokens[j]),
                    "prefill_tokens": int(self.batch_prefill_tokens[j]),
                    "prefill_entries": int(self.batch_prefill_entries[j]),
                    "decode_entries": int(self.batch_decode_entries[j]),
                }
                for j in range(self.batch_start.size)
            ]
        return d


def _json_num(v):
    if v is None:
        return None
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if not math.isfinite(v) else float(v)
    return v


class _Violations:
    """Collects violations, keeping at most MAX_KEPT_PER_CODE objects per code."""

    def __init__(self, ids):
        self.ids = ids
        self.kept: list[Violation] = []
        self.counts: dict[str, int] = {}

    def add_many(self, code, batches, reqs, make_msg, names=None):
        """``batches``/``reqs`` are arrays (reqs: instance positions, or -1 for none);
        ``make_msg(k)`` is the k-th message; ``names(k)`` overrides the request name."""
        n = len(batches)
        if n == 0:
            return
        self.counts[code] = self.counts.get(code, 0) + n
        for k in range(min(n, MAX_KEPT_PER_CODE)):
            b = batches[k]
            if names is not None:
                rname = names(k)
            else:
                r = reqs[k] if reqs is not None else -1
                rname = None if r < 0 else self.ids[int(r)]
            self.kept.append(Violation(code, None if b < 0 else int(b), rname, make_msg(k)))


def _time_tolerance(durations: np.ndarray, times: np.ndarray) -> np.ndarray:
    """How far a stated start may fall before a time it must not precede (semantics section 4):
    1e-9 of the durations involved plus four units in the last place of the time compared
    (the resolution of a float64 at that size: 2e-7 near t = 1e9), never a fraction of the
    time itself. Integer times under unit time compare exactly."""
    return 1e-9 * durations + 4 * np.spacing(np.abs(times))


def _grouped_cummax(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Inclusive cumulative max of ``values`` within runs of equal, sorted ``groups``."""
    if values.size == 0:
        return values.copy()
    span = int(values.max() - values.min()) + 1
    shifted = values + groups.astype(np.int64) * span
    return np.maximum.accumulate(shifted) - groups.astype(np.int64) * span


def evaluate(instance: Instance, schedule: Schedule) -> Evaluation:
    """Replay ``schedule`` on ``instance``; never raises on an infeasible schedule."""
    inst, s = instance, schedule
    n, nb = inst.n, s.n_batches
    lim = inst.limits
    I, O, arr = inst.prompt, inst.output, inst.arrival
    V = _Violations(inst.ids)

    # --- map the schedule's id table onto instance positions -------------------------
    idmap = np.array([inst.index.get(x, -1) for x in s.ids], dtype=np.int64)
    e_b = s.batch_of_entry
    e_r = idmap[s.entry_req] if s.n_entries else np.zeros(0, np.int64)
    e_c = s.entry_tokens
    v_b = s.batch_of_evict
    v_r = idmap[s.evict_req] if s.evict_req.size else np.zeros(0, np.int64)
    e_ok = np.ones(e_b.size, bool)
    v_ok = np.ones(v_b.size, bool)

    for kind, bb, rr, raw, ok in (
        ("entry", e_b, e_r, s.entry_req, e_ok),
        ("eviction", v_b, v_r, s.evict_req, v_ok),
    ):
        bad = np.flatnonzero(rr < 0)
        if bad.size:
            V.add_many(
                "UNKNOWN_REQUEST", bb[bad], None,
                lambda k, bad=bad, raw=raw, kind=kind:
                    f"{kind} names request {s.ids[raw[bad[k]]]!r}, which the instance does not have",
                names=lambda k, bad=bad, raw=raw: s.ids[raw[bad[k]]],
            )
            ok[bad] = False

    bad = np.flatnonzero(e_ok & (e_c <= 0))
    V.add_many("ZERO_TOKENS", e_b[bad], e_r[bad],
               lambda k: f"entry processes {int(e_c[bad[k]])} tokens; at least 1 is required")
    e_ok[bad] = False

    # duplicates within a batch (keep the first occurrence)
    def _dups(bb, rr, ok):
        idx = np.flatnonzero(ok)
        key = bb[idx] * max(n, 1) + rr[idx]
        order = np.argsort(key, kind="stable")
        ks = key[order]
        dup = np.zeros(idx.size, bool)
        dup[order[1:]] = ks[1:] == ks[:-1]
        return idx[dup]

    bad = _dups(e_b, e_r, e_ok)
    V.add_many("DUPLICATE_ENTRY", e_b[bad], e_r[bad],
               lambda k: "request appears twice in the batch's entries")
    e_ok[bad] = False
    bad = _dups(v_b, v_r, v_ok)
    V.add_many("DUPLICATE_EVICTION", v_b[bad], v_r[bad],
               lambda k: "request is listed twice among the batch's evictions")
    v_ok[bad] = False

    # evicted and processed in the same batch: the eviction is reported and ignored
    if v_ok.any() and e_ok.any():
        ekey = e_b[e_ok] * max(n, 1) + e_r[e_ok]
        vidx = np.flatnonzero(v_ok)
        vkey = v_b[vidx] * max(n, 1) + v_r[vidx]
        # test the (few) eviction keys against the entry keys that can match: np.isin of a
        # small array against millions is slow, the other direction is fast
        both = vidx[np.isin(vkey, ekey[np.isin(ekey, vkey)])]
        V.add_many("EVICT_AND_PROCESS", v_b[both], v_r[both],
                   lambda k: "request is evicted and processed in the same batch")
        v_ok[both] = False

    # --- per-request event replay -------------------------------------------------------
    ei = np.flatnonzero(e_ok)
    vi = np.flatnonzero(v_ok)
    ev_req = np.concatenate([e_r[ei], v_r[vi]])
    ev_batch = np.concatenate([e_b[ei], v_b[vi]])
    ev_isent = np.concatenate([np.ones(ei.size, bool), np.zeros(vi.size, bool)])
    ev_c = np.concatenate([e_c[ei], np.zeros(vi.size, np.int64)])
    ev_src = np.concatenate([ei, vi])  # index into entry or eviction arrays
    # one int64 sort key: request, then batch, then evictions before entries (unique after dedup)
    order = np.argsort((ev_req * (nb + 1) + ev_batch) * 2 + ev_isent, kind="stable")
    ev_req, ev_batch, ev_isent, ev_c, ev_src = (
        ev_req[order], ev_batch[order], ev_isent[order], ev_c[order], ev_src[order]
    )
    E = ev_req.size
    pos = np.arange(E)
    first = np.ones(E, bool)
    if E:
        first[1:] = ev_req[1:] != ev_req[:-1]
    is_ev = ~ev_isent
    reset = first | is_ev  # a residency segment starts here
    cs_excl = np.cumsum(ev_c) - ev_c
    last_reset = np.maximum.accumulate(np.where(reset, pos, 0))
    # m before each event: tokens since the last reset; for an eviction, since the previous one
    prev_reset = np.zeros(E, np.int64)
    if E:
        prev_reset[1:] = last_reset[:-1]
    base = np.where(is_ev & ~first, cs_excl[prev_reset], cs_excl[last_reset])
    m_before = np.where(is_ev & first, 0, cs_excl - base)
    m_after = m_before + ev_c

    # segments and the running maximum of tokens generated
    seg = np.cumsum(reset) - 1
    n_seg = int(seg[-1]) + 1 if E else 0
    seg_req = ev_req[reset]
    seg_end_m = np.zeros(n_seg, np.int64)
    if E:
        last_of_seg = np.ones(E, bool)
        last_of_seg[:-1] = reset[1:]
        # the segment's final m: m_after of its last event (0 for an eviction-only segment)
        seg_end_m[seg[last_of_seg]] = np.where(ev_isent[last_of_seg], m_after[last_of_seg], 0)
    seg_gain = seg_end_m - I[seg_req] + 1
    g_end = np.maximum(_grouped_cummax(seg_gain, seg_req), 0) if n_seg else seg_gain
    g_start = np.zeros(n_seg, np.int64)
    if n_seg > 1:
        same = seg_req[1:] == seg_req[:-1]
        g_start[1:] = np.where(same, g_end[:-1], 0)
    g0 = g_start[seg]
    S0 = I[ev_req] + g0
    g_before = g0 + np.maximum(0, m_before - S0 + 1)
    g_after = g0 + np.maximum(0, m_after - S0 + 1)
    # an eviction sees the g reached at the end of the previous segment
    g_at_evict = np.where(first, 0, g_start[seg])  # g_start[seg] of the segment the eviction opens
    Oe = O[ev_req]

    # evictions: not resident / after finish
    ev_bad = is_ev & ((m_before == 0) | (g_at_evict >= Oe))
    idx = np.flatnonzero(ev_bad)
    V.add_many(
        "EVICT_NOT_RESIDENT", ev_batch[idx], ev_req[idx],
        lambda k: "request already finished" if g_at_evict[idx[k]] >= Oe[idx[k]]
        else "request holds no KV",
    )
    ev_valid_evict = is_ev & ~ev_bad

    # entries after finish are reported and dropped
    after_fin = ev_isent & (g_before >= Oe)
    idx = np.flatnonzero(after_fin)
    V.add_many("ENTRY_AFTER_FINISH", ev_batch[idx], ev_req[idx],
               lambda k: "request already generated all its output tokens")
    live = ev_isent & ~after_fin

    # tokens over available
    avail = np.where(m_before < S0, S0 - m_before, 1)
    idx = np.flatnonzero(live & (ev_c > avail))
    V.add_many("TOKENS_OVER_AVAILABLE", ev_batch[idx], ev_req[idx],
               lambda k: f"processes {int(ev_c[idx[k]])} tokens but only {int(avail[idx[k]])} "
                         f"are available (S - m)")

    S_before = I[ev_req] + g_before
    decode_ev = live & (g_before >= 1) & (m_before == S_before - 1)
    gen_first = live & (g_before == 0) & (g_after >= 1)
    finish = live & (g_before < Oe) & (g_after >= Oe)

    # --- scatter back to schedule entry order --------------------------------------------
    ent_live = np.zeros(e_b.size, bool)
    ent_decode = np.zeros(e_b.size, bool)
    ent_cached = np.zeros(e_b.size, np.int64)
    src_e = ev_src[ev_isent]
    ent_live[src_e] = live[ev_isent]
    ent_decode[src_e] = decode_ev[ev_isent]
    ent_cached[src_e] = m_before[ev_isent]

    # --- batch aggregates & durations -----------------------------------------------------
    L = np.flatnonzero(ent_live)
    lb, lc, lm, ld = e_b[L], e_c[L], ent_cached[L], ent_decode[L]
    dur = inst.cost_model.batch_times(lb, lc, lm, ld, nb) if nb else np.zeros(0)
    b_tokens = np.bincount(lb, weights=lc, minlength=nb).astype(np.int64)
    b_pre_tok = np.bincount(lb, weights=np.where(ld, 0, lc), minlength=nb).astype(np.int64)
    b_pre_n = np.bincount(lb, weights=~ld, minlength=nb).astype(np.int64)
    b_dec_n = np.bincount(lb, weights=ld, minlength=nb).astype(np.int64)
    b_n = b_pre_n + b_dec_n

    j = np.flatnonzero(b_tokens > lim.max_batch_tokens)
    V.add_many("BATCH_TOKENS", j, None,
               lambda k: f"processes {int(b_tokens[j[k]])} tokens > C = {lim.max_batch_tokens}")
    if lim.max_prefill_tokens is not None:
        j = np.flatnonzero(b_pre_tok > lim.max_prefill_tokens)
        V.add_many("PREFILL_TOKENS", j, None,
                   lambda k: f"processes {int(b_pre_tok[j[k]])} prefill tokens "
                             f"> P = {lim.max_prefill_tokens}")
    if lim.max_batch_size is not None:
        j = np.flatnonzero(b_n > lim.max_batch_size)
        V.add_many("BATCH_SIZE", j, None,
                   lambda k: f"has {int(b_n[j[k]])} entries > max_batch_size = {lim.max_batch_size}")

    # --- KV in use after each batch -------------------------------------------------------
    blk = lim.block_size

    def fp(x):
        return -(-x // blk) * blk if blk > 1 else x

    delta = (
        np.bincount(ev_batch[live], weights=fp(m_after[live]) - fp(m_before[live]), minlength=nb + 1)
        - np.bincount(ev_batch[ev_valid_evict], weights=fp(m_before[ev_valid_evict]), minlength=nb + 1)
        - np.bincount(ev_batch[finish] + 1, weights=fp(m_after[finish]), minlength=nb + 1)
    )
    kv = np.rint(np.cumsum(delta)[:nb]).astype(np.int64)
    j = np.flatnonzero(kv > lim.kv_capacity)
    V.add_many("KV_OVERFLOW", j, None,
               lambda k: f"KV in use {int(kv[j[k]])} > M = {lim.kv_capacity}")

    # --- time ------------------------------------------------------------------------------
    touch_b = np.concatenate([e_b[e_ok], v_b[v_ok]])
    touch_r = np.concatenate([e_r[e_ok], v_r[v_ok]])
    arr_max = np.full(nb, -np.inf)
    if touch_b.size:
        np.maximum.at(arr_max, touch_b, arr[touch_r])
    stated = s.start
    has_stated = ~np.isnan(stated)
    r = np.maximum(np.maximum(arr_max, np.where(has_stated, stated, -np.inf)), 0.0)
    D = np.cumsum(dur)
    D_prev = D - dur
    end = D + np.maximum.accumulate(r - D_prev) if nb else np.zeros(0)
    end_prev = np.concatenate([[0.0], end[:-1]]) if nb else np.zeros(0)
    start = end - dur
    if has_stated.any():
        dur_near = np.maximum(dur, np.concatenate([[0.0], dur[:-1]]))  # batch j and j - 1
        tol = _time_tolerance(dur_near, end_prev)
        j = np.flatnonzero(has_stated & (stated < end_prev - tol))
        V.add_many("START_TOO_EARLY", j, None,
                   lambda k: f"stated start {stated[j[k]]:g} is before the previous batch ends "
                             f"at {end_prev[j[k]]:g}")
        tb = touch_b
        ta = arr[touch_r]
        early = np.flatnonzero(has_stated[tb] & (ta > stated[tb] + _time_tolerance(dur_near[tb], ta)))
        V.add_many("BEFORE_ARRIVAL", tb[early], touch_r[early],
                   lambda k: f"batch starts at {stated[tb[early[k]]]:g} before the request arrives "
                             f"at {arr[touch_r[early[k]]]:g}")

    # --- per-request metrics ------------------------------------------------------------------
    first_token = np.full(n, np.nan)
    completion = np.full(n, np.nan)
    first_token[ev_req[gen_first]] = end[ev_batch[gen_first]]
    completion[ev_req[finish]] = end[ev_batch[finish]]
    g_final = np.zeros(n, np.int64)
    if E:
        np.maximum.at(g_final, ev_req[live], np.minimum(g_after[live], Oe[live]))
    inc = np.flatnonzero(g_final < O)
    V.add_many("INCOMPLETE", np.full(inc.size, -1), inc,
               lambda k: f"generated {int(g_final[inc[k]])} of {int(O[inc[k]])} output tokens")
    n_evict = np.bincount(ev_req[ev_valid_evict], minlength=n)
    recomputed = np.bincount(ev_req[ev_valid_evict], weights=m_before[ev_valid_evict],
                             minlength=n).astype(np.int64)
    latency = completion - arr
    ttft = first_token - arr
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(O > 1, (completion - first_token) / np.maximum(O - 1, 1), np.nan)

    violations = tuple(V.kept)
    metrics = _totals(inst, g_final, completion, latency, ttft, tpot, n_evict, recomputed,
                      end, dur, kv, b_n)
    return Evaluation(
        feasible=not V.counts,
        violations=violations,
        violation_counts=V.counts,
        request_ids=inst.ids,
        first_token=first_token,
        completion=completion,
        latency=latency,
        ttft=ttft,
        tpot=tpot,
        evictions=n_evict,
        recomputed_tokens=recomputed,
        batch_start=start,
        batch_end=end,
        batch_duration=dur,
        batch_kv=kv,
        batch_tokens=b_tokens,
        batch_prefill_tokens=b_pre_tok,
        batch_prefill_entries=b_pre_n,
        batch_decode_entries=b_dec_n,
        entry_decode=ent_decode,
        entry_cached=ent_cached,
        metrics=metrics,
    )


def _stat(x: np.ndarray, fn) -> float | None:
    x = x[np.isfinite(x)]
    return float(fn(x)) if x.size else None


def _totals(inst, g_final, completion, latency, ttft, tpot, n_evict, recomputed, end, dur, kv,
            batch_entries):
    n, nb = inst.n, batch_entries.size
    all_done = n > 0 and bool(np.all(np.isfinite(completion)))
    # the latest completion: the end of the last batch that processes a token (equal on a
    # complete schedule; empty and eviction-only batches after it take no time and don't count)
    working = np.flatnonzero(batch_entries > 0)
    makespan = float(end[working[-1]]) if working.size else 0.0
    busy = float(dur.sum())
    M = inst.limits.kv_capacity
    m: dict[str, Any] = {
        "makespan": makespan,
        "total_latency": float(latency.sum()) if all_done else None,
        "mean_latency": float(latency.mean()) if all_done else None,
        "mean_ttft": _stat(ttft, np.mean) if all_done else None,
        "p50_ttft": _stat(ttft, np.median),
        "p99_ttft": _stat(ttft, lambda x: np.percentile(x, 99)),
        "mean_tpot": _stat(tpot, np.mean),
        "p50_tpot": _stat(tpot, np.median),
        "p99_tpot": _stat(tpot, lambda x: np.percentile(x, 99)),
        "tokens_per_second": float(g_final.sum()) / makespan if makespan > 0 else None,
        "evictions": int(n_evict.sum()),
        "recomputed_tokens": int(recomputed.sum()),
        "peak_kv": int(kv.max()) if nb else 0,
        "kv_utilisation": float((kv * dur).sum() / (M * busy)) if busy > 0 else None,
        "busy_time": busy,
        "batches": int(nb),
        "requests": int(n),
        "finished": int(np.isfinite(completion).sum()),
    }
    reqs = inst.requests
    has_slo = np.array([r.ttft_slo is not None or r.tpot_slo is not None or r.deadline is not None
                        for r in reqs], bool) if n else np.zeros(0, bool)
    if has_slo.any():
        met = np.isfinite(completion).copy()
        for i in np.flatnonzero(has_slo):
            r = reqs[i]
            if r.ttft_slo is not None:
                met[i] &= bool(ttft[i] <= r.ttft_slo + 1e-12)
            if r.tpot_slo is not None and r.output > 1:
                met[i] &= bool(tpot[i] <= r.tpot_slo + 1e-12)
            if r.deadline is not None:
                met[i] &= bool(completion[i] <= r.deadline + 1e-12)
        m["slo_attainment"] = float(met[has_slo].mean())
    return m
