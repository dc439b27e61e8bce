"""The one validator/evaluator: replay a schedule under ``docs/semantics.md`` sections 3-4.

Every schedule -- from a policy, a solver, a file, a warm start -- is judged
here. Violations are data (:class:`Violation`), never exceptions; metrics are
computed here and nowhere else (:meth:`Evaluation.objective` is what solvers
are checked against).

:func:`evaluate` reads as the list of rules it applies: one ``_check_*`` function per
rule family (the way PyVRP checks one constraint per function), each citing the section
of ``docs/semantics.md`` it implements and emitting the codes of :data:`CODES`.

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

KV in use after batch ``j`` (semantics section 3, step 3) is a running sum of
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

from ..instance import Instance, Limits
from ..jsonio import finite_or_none
from ..objectives import OBJECTIVES  # the one list of objective names
from ..progress import fmt
from ..schedule import Schedule
from . import prefix as prefix_rules

#: Violation codes, each with the rule of semantics sections 3-4 it enforces (the table there).
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
    # swap preemption (semantics section 6)
    "DUPLICATE_SWAP": "a request is listed twice among one batch's swap-outs or swap-ins",
    "SWAP_OUT_NOT_RESIDENT": "a swap-out moves fewer than 1 or more tokens than the request "
                             "holds on the GPU (or the request finished)",
    "SWAP_IN_NOT_SWAPPED": "a swap-in names a request with no KV on the host",
    "SWAPPED_OUT_REQUEST": "a request is processed or evicted while part of its KV is on the host",
    "HOST_OVERFLOW": "host KV in use after the batch exceeds limits.host_capacity (0 when unset)",
    # hidden cache (semantics section 6)
    "HIDDEN_CACHE_DISABLED": "an entry uses hidden cache but the instance does not enable it "
                             "(limits.hidden_cache)",
    "CACHE_TYPE_SWITCH": "an entry's cache type differs from the cache the request holds "
                         "(a switch discards the cache: evict first, then recompute)",
    # prefix reuse (semantics section 6; the rules are in optsched/evaluation/prefix.py)
    "HIT_INVALID": "a hit is not whole blocks from a block boundary of the request's cached "
                   "tokens, or reaches past its shareable blocks",
    "HIT_NOT_RESIDENT": "a hit covers a block that is not resident when the batch's entries start",
    "DUPLICATE_DROP": "a block is listed twice among one batch's drops",
    "DROP_NOT_RESIDENT": "a drop names a block that is not resident",
    "DROP_REFERENCED": "a drop names a block that a request holds",
}

#: At most this many violations of one code are kept as objects (all are counted).
MAX_KEPT_PER_CODE = 10_000

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
    """The replay's verdict and every metric of semantics section 4."""

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
    #: per request the longest gap between consecutive generated tokens (section 4; NaN
    #: unfinished, 0 for ``O = 1``)
    max_tbt: np.ndarray
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
    #: per entry (schedule order): whether it generated a token (section 3, step 2: its
    #: request's ``m`` reached ``S``) -- a decode, a prefill's last chunk or a refill's
    entry_generates: np.ndarray = field(default_factory=lambda: np.zeros(0, bool), repr=False)
    #: prefix reuse (section 6; empty when the instance has no block ids and the schedule
    #: neither hits nor drops): hit tokens per request, resident and cached blocks per batch
    hit_tokens: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    batch_resident_blocks: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64),
                                              repr=False)
    batch_cached_blocks: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64),
                                            repr=False)

    def objective(self, kind: str) -> float:
        """The objective a formulation optimises, computed from this replay only."""
        key = {"makespan": "makespan", "total-latency": "total_latency", "mean-ttft": "mean_ttft",
               "p99-ttft": "p99_ttft"}
        if kind not in key:
            raise ValueError(f"unknown objective {kind!r}; choose one of {', '.join(OBJECTIVES)}")
        if kind == "p99-ttft" and self.metrics.get("mean_ttft") is None:
            return math.nan  # like mean TTFT: defined only when every request has a first token
        v = self.metrics[key[kind]]
        return math.nan if v is None else float(v)

    def summary(self) -> str:
        """The verdict in a few lines (``print(evaluation)``): feasible with the objectives and
        the preemptions, or infeasible with its violation counts and the first violations."""
        m = self.metrics
        if self.feasible:
            return (f"feasible: {m.get('batches')} batches, makespan {fmt(m.get('makespan'))}, "
                    f"total latency {fmt(m.get('total_latency'))}, mean TTFT "
                    f"{fmt(m.get('mean_ttft'))}, {m.get('evictions')} evictions")
        counts = ", ".join(f"{k} {v}" for k, v in sorted(self.violation_counts.items()))
        lines = [f"infeasible: {sum(self.violation_counts.values())} violations ({counts})"]
        lines += [f"  {v}" for v in self.violations[:5]]
        if len(self.violations) > 5:
            lines.append(f"  ... and {sum(self.violation_counts.values()) - 5} more")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def to_dict(self, *, requests: bool = True, batches: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "feasible": self.feasible,
            "violations": [v.to_dict() for v in self.violations],
            "violation_counts": dict(self.violation_counts),
            "metrics": {k: _json_num(v) for k, v in self.metrics.items()},
        }
        if requests:  # whole columns to Python at once (19K requests: 0.025 s, not 0.045 s)
            keys: tuple[str, ...] = ("id", "first_token", "completion", "latency", "ttft",
                                     "tpot", "max_tbt", "evictions", "recomputed_tokens")
            cols = [list(self.request_ids)] + [
                _json_list(a) for a in (self.first_token, self.completion, self.latency,
                                        self.ttft, self.tpot, self.max_tbt)] + [
                np.asarray(a).astype(np.int64).tolist()
                for a in (self.evictions, self.recomputed_tokens)]
            if self.hit_tokens.size:
                keys += ("hit_tokens",)
                cols.append(self.hit_tokens.tolist())
            d["requests"] = [dict(zip(keys, row)) for row in zip(*cols)]
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
                    **({"resident_blocks": int(self.batch_resident_blocks[j]),
                        "cached_blocks": int(self.batch_cached_blocks[j])}
                       if self.batch_resident_blocks.size else {}),
                }
                for j in range(self.batch_start.size)
            ]
        return d


def _json_list(a: np.ndarray) -> list:
    """``[_json_num(x) for x in a]`` for a float column, converted at once: the values as
    Python floats, NaN and infinities as None (JSON has neither)."""
    a = np.asarray(a)
    if a.dtype.kind in "iub":  # as _json_num: integers stay integers
        return a.tolist()
    a = a.astype(np.float64, copy=False)
    vals = a.tolist()
    for k in np.flatnonzero(~np.isfinite(a)).tolist():
        vals[k] = None
    return vals


def _json_num(v):
    if v is None:
        return None
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return finite_or_none(v)
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


# --- the schedule's two columns on instance positions ------------------------------------


@dataclass
class _Items:
    """A schedule's entries or its evictions, on instance positions.

    ``ok`` marks the items still in play: a check that reports an item and drops it clears
    its flag, so later checks and the replay never see it (semantics section 3, "Violation
    codes")."""

    kind: str  # "entry" or "eviction"
    batch: np.ndarray  # 0-based batch of each item
    req: np.ndarray  # instance position of its request, -1 for an id the instance lacks
    raw: np.ndarray  # position in the schedule's own id table
    tokens: np.ndarray  # c of an entry, 0 for an eviction
    ok: np.ndarray
    hidden: np.ndarray  # an entry's cache type is hidden (False for an eviction)
    hit: np.ndarray  # an entry's prefix-hit tokens (0 for an eviction; section 6)


def _columns(inst: Instance, s: Schedule) -> tuple[_Items, _Items]:
    idmap = np.array([inst.index.get(x, -1) for x in s.ids], dtype=np.int64)
    e_r = idmap[s.entry_req] if s.n_entries else np.zeros(0, np.int64)
    v_r = idmap[s.evict_req] if s.evict_req.size else np.zeros(0, np.int64)
    entries = _Items("entry", s.batch_of_entry, e_r, s.entry_req, s.entry_tokens,
                     np.ones(e_r.size, bool), s.entry_hidden.copy(), s.entry_hit)
    evictions = _Items("eviction", s.batch_of_evict, v_r, s.evict_req,
                       np.zeros(v_r.size, np.int64), np.ones(v_r.size, bool),
                       np.zeros(v_r.size, bool), np.zeros(v_r.size, np.int64))
    return entries, evictions


# --- rules on the schedule as written (semantics section 3) --------------------------------


def _check_known_requests(items: _Items, schedule_ids: tuple[str, ...], V: _Violations) -> None:
    """UNKNOWN_REQUEST: every entry and eviction names a request of the instance (section 3)."""
    bad = np.flatnonzero(items.req < 0)
    if not bad.size:
        return
    name = lambda k: schedule_ids[items.raw[bad[k]]]  # noqa: E731
    V.add_many("UNKNOWN_REQUEST", items.batch[bad], None,
               lambda k: f"{items.kind} names request {name(k)!r}, which the instance does not have",
               names=name)
    items.ok[bad] = False


def _check_positive_tokens(entries: _Items, V: _Violations) -> None:
    """ZERO_TOKENS: an entry processes ``c >= 1`` tokens (section 3, step 2)."""
    c = entries.tokens
    bad = np.flatnonzero(entries.ok & (c <= 0))
    V.add_many("ZERO_TOKENS", entries.batch[bad], entries.req[bad],
               lambda k: f"entry processes {int(c[bad[k]])} tokens; at least 1 is required")
    entries.ok[bad] = False


def _repeats(items: _Items, n: int) -> np.ndarray:
    """Positions of the items whose (batch, request) pair occurred earlier in the column."""
    idx = np.flatnonzero(items.ok)
    key = items.batch[idx] * max(n, 1) + items.req[idx]
    order = np.argsort(key, kind="stable")
    ks = key[order]
    dup = np.zeros(idx.size, bool)
    dup[order[1:]] = ks[1:] == ks[:-1]
    return idx[dup]


def _check_once_per_batch(entries: _Items, evictions: _Items, n: int, V: _Violations) -> None:
    """DUPLICATE_ENTRY, DUPLICATE_EVICTION: a request appears at most once among a batch's
    entries and at most once among its evictions; the first occurrence stays (section 3)."""
    for items, code, what in ((entries, "DUPLICATE_ENTRY", "entries"),
                              (evictions, "DUPLICATE_EVICTION", "evictions")):
        bad = _repeats(items, n)
        V.add_many(code, items.batch[bad], items.req[bad],
                   lambda k, what=what: f"request is listed twice among the batch's {what}")
        items.ok[bad] = False


def _check_evict_or_process(entries: _Items, evictions: _Items, n: int, V: _Violations) -> None:
    """EVICT_AND_PROCESS: an evicted request is not processed in the same batch (section 3,
    step 1); the eviction is reported and ignored."""
    if not (evictions.ok.any() and entries.ok.any()):
        return
    ekey = entries.batch[entries.ok] * max(n, 1) + entries.req[entries.ok]
    vidx = np.flatnonzero(evictions.ok)
    vkey = evictions.batch[vidx] * max(n, 1) + evictions.req[vidx]
    # test the (few) eviction keys against the entry keys that can match: np.isin of a small
    # array against millions is slow, the other direction is fast
    both = vidx[np.isin(vkey, ekey[np.isin(ekey, vkey)])]
    V.add_many("EVICT_AND_PROCESS", evictions.batch[both], evictions.req[both],
               lambda k: "request is evicted and processed in the same batch")
    evictions.ok[both] = False


# --- the per-request replay in closed form (section 3; module docstring) ------------------


@dataclass
class _Events:
    """Valid entries and evictions sorted by request, then batch (evictions first), with the
    state of section 3 before and after each: ``m`` cached, ``g`` generated."""

    req: np.ndarray
    batch: np.ndarray
    is_entry: np.ndarray
    c: np.ndarray
    hit: np.ndarray  # prefix-hit tokens of an entry (section 6), applied before its c
    src: np.ndarray  # position in the entry (or eviction) column
    first: np.ndarray  # the request's first event
    m_before: np.ndarray
    m_after: np.ndarray
    g_before: np.ndarray
    g_after: np.ndarray
    g_at_evict: np.ndarray  # g when an eviction opens its segment
    S0: np.ndarray  # tokens known when the event's residency segment began
    O: np.ndarray
    hidden: np.ndarray  # cache type after the event (an entry's own; False after an eviction)
    hidden_before: np.ndarray  # cache type of the m cached tokens before the event

    @property
    def size(self) -> int:
        return int(self.req.size)


def _sorted_events(entries: _Items, evictions: _Items, nb: int):
    ei = np.flatnonzero(entries.ok)
    vi = np.flatnonzero(evictions.ok)
    req = np.concatenate([entries.req[ei], evictions.req[vi]])
    batch = np.concatenate([entries.batch[ei], evictions.batch[vi]])
    is_entry = np.concatenate([np.ones(ei.size, bool), np.zeros(vi.size, bool)])
    c = np.concatenate([entries.tokens[ei], np.zeros(vi.size, np.int64)])
    src = np.concatenate([ei, vi])
    hidden = np.concatenate([entries.hidden[ei], np.zeros(vi.size, bool)])
    hit = np.concatenate([entries.hit[ei], np.zeros(vi.size, np.int64)])
    # one int64 sort key: request, then batch, then evictions before entries (unique after dedup)
    order = np.argsort((req * (nb + 1) + batch) * 2 + is_entry, kind="stable")
    return (req[order], batch[order], is_entry[order], c[order], src[order], hidden[order],
            hit[order])


def _hidden_before(req, is_entry, hidden, first):
    """Cache type of the tokens cached before each event (semantics: hidden cache): the
    previous event's when it is an entry of the same request, else the event's own (then
    ``m = 0`` and the type does not matter)."""
    before = hidden.copy()
    if req.size:
        prev_entry = ~first[1:] & is_entry[:-1]
        before[1:] = np.where(prev_entry, hidden[:-1], hidden[1:])
    return before


def _cached_before(req, is_entry, c):
    """``m`` before each event: tokens since the request's last eviction (section 3, steps
    1-2). Returns ``m_before``, the first-event flags and the segment-start flags."""
    E = req.size
    pos = np.arange(E)
    first = np.ones(E, bool)
    if E:
        first[1:] = req[1:] != req[:-1]
    is_ev = ~is_entry
    reset = first | is_ev  # a residency segment starts here
    cs_excl = np.cumsum(c) - c
    last_reset = np.maximum.accumulate(np.where(reset, pos, 0))
    # for an eviction, m counts since the previous reset (the one before its own)
    prev_reset = np.zeros(E, np.int64)
    if E:
        prev_reset[1:] = last_reset[:-1]
    base = np.where(is_ev & ~first, cs_excl[prev_reset], cs_excl[last_reset])
    return np.where(is_ev & first, 0, cs_excl - base), first, reset


def _segment_start_tokens(req, is_entry, m_after, reset, I):
    """``g`` when each residency segment starts: ``g0(next) = max(g0, m_end - I + 1)``, a
    running maximum per request (module docstring). Returns it per segment, and the
    segment of each event."""
    E = req.size
    seg = np.cumsum(reset) - 1
    n_seg = int(seg[-1]) + 1 if E else 0
    seg_req = req[reset]
    seg_end_m = np.zeros(n_seg, np.int64)
    if E:
        last_of_seg = np.ones(E, bool)
        last_of_seg[:-1] = reset[1:]
        # the segment's final m: m_after of its last event (0 for an eviction-only segment)
        seg_end_m[seg[last_of_seg]] = np.where(is_entry[last_of_seg], m_after[last_of_seg], 0)
    seg_gain = seg_end_m - I[seg_req] + 1
    g_end = np.maximum(_grouped_cummax(seg_gain, seg_req), 0) if n_seg else seg_gain
    g_start = np.zeros(n_seg, np.int64)
    if n_seg > 1:
        same = seg_req[1:] == seg_req[:-1]
        g_start[1:] = np.where(same, g_end[:-1], 0)
    return g_start, seg


def _replay(inst: Instance, entries: _Items, evictions: _Items, nb: int) -> _Events:
    """Apply every valid entry and eviction as given (section 3, steps 1-2; a prefix hit
    advances ``m`` before the entry's ``c``, section 6)."""
    I = inst.prompt
    req, batch, is_entry, c, src, hidden, hit = _sorted_events(entries, evictions, nb)
    adv = c + hit if hit.any() else c
    m_before, first, reset = _cached_before(req, is_entry, adv)
    m_after = m_before + adv
    g_start, seg = _segment_start_tokens(req, is_entry, m_after, reset, I)
    g0 = g_start[seg]
    S0 = I[req] + g0
    return _Events(
        req=req, batch=batch, is_entry=is_entry, c=c, hit=hit, src=src, first=first,
        m_before=m_before, m_after=m_after,
        g_before=g0 + np.maximum(0, m_before - S0 + 1),
        g_after=g0 + np.maximum(0, m_after - S0 + 1),
        # an eviction opens a segment: it sees the g reached at the end of the previous one
        g_at_evict=np.where(first, 0, g0), S0=S0, O=inst.output[req],
        hidden=hidden, hidden_before=_hidden_before(req, is_entry, hidden, first),
    )


# --- rules on the replayed state (section 3) ----------------------------------------------


def _check_hidden_enabled(entries: _Items, limits: Limits, V: _Violations) -> None:
    """HIDDEN_CACHE_DISABLED: an entry states hidden cache on an instance without
    ``limits.hidden_cache`` (section 6, hidden cache); reported, then applied as given."""
    if limits.hidden_cache:
        return
    bad = np.flatnonzero(entries.ok & entries.hidden)
    V.add_many("HIDDEN_CACHE_DISABLED", entries.batch[bad], entries.req[bad],
               lambda k: "entry uses hidden cache but the instance does not enable it "
                         "(limits.hidden_cache is false)")


def _check_cache_type(ev: _Events, live: np.ndarray, V: _Violations) -> None:
    """CACHE_TYPE_SWITCH: an entry keeps the cache type of the ``m > 0`` tokens its request
    holds (section 6, hidden cache: a switch discards the cache, i.e. an eviction, and the
    refill recomputes it in the new type); reported, then applied as given (the whole cache
    takes the entry's type)."""
    idx = np.flatnonzero(live & (ev.m_before > 0) & (ev.hidden != ev.hidden_before))
    kind = lambda h: "hidden" if h else "kv"  # noqa: E731
    V.add_many("CACHE_TYPE_SWITCH", ev.batch[idx], ev.req[idx],
               lambda k: f"entry uses {kind(ev.hidden[idx[k]])} cache but the request holds "
                         f"{int(ev.m_before[idx[k]])} tokens of {kind(ev.hidden_before[idx[k]])} "
                         "cache (evict it first)")


def _check_evictions(ev: _Events, V: _Violations) -> np.ndarray:
    """EVICT_NOT_RESIDENT: an evicted request holds KV (section 3, step 1). Returns the
    evictions that take effect."""
    is_ev = ~ev.is_entry
    finished = ev.g_at_evict >= ev.O
    bad = is_ev & ((ev.m_before == 0) | finished)
    idx = np.flatnonzero(bad)
    V.add_many("EVICT_NOT_RESIDENT", ev.batch[idx], ev.req[idx],
               lambda k: "request already finished" if finished[idx[k]] else "request holds no KV")
    return is_ev & ~bad


def _check_entries(ev: _Events, V: _Violations) -> np.ndarray:
    """ENTRY_AFTER_FINISH (reported and dropped; section 3, step 4) and TOKENS_OVER_AVAILABLE
    (``c <= S - m``, applied as given; step 2). Returns the entries that take effect."""
    after_fin = ev.is_entry & (ev.g_before >= ev.O)
    idx = np.flatnonzero(after_fin)
    V.add_many("ENTRY_AFTER_FINISH", ev.batch[idx], ev.req[idx],
               lambda k: "request already generated all its output tokens")
    live = ev.is_entry & ~after_fin
    avail = np.where(ev.m_before < ev.S0, ev.S0 - ev.m_before, 1)
    idx = np.flatnonzero(live & (ev.c + ev.hit > avail))
    h = ev.hit

    def msg(k: int) -> str:
        x = idx[k]
        if h[x]:  # section 6: the hit advances m first, then c <= S - m
            return (f"processes {int(ev.c[x])} tokens after a hit of {int(h[x])} but only "
                    f"{int(avail[x] - h[x])} are available (S - m after the hit)")
        return f"processes {int(ev.c[x])} tokens but only {int(avail[x])} are available (S - m)"

    V.add_many("TOKENS_OVER_AVAILABLE", ev.batch[idx], ev.req[idx], msg)
    return live


def _decode_entries(ev: _Events, live: np.ndarray, I: np.ndarray) -> np.ndarray:
    """Entry phase (section 3): decode when ``g >= 1`` and ``m = S - 1`` before the batch
    (an entry with a prefix hit is a prefill entry, section 6)."""
    S_before = I[ev.req] + ev.g_before
    return live & (ev.g_before >= 1) & (ev.m_before == S_before - 1) & (ev.hit == 0)


@dataclass
class _BatchTotals:
    """Per batch: tokens, prefill tokens, prefill and decode entries (live entries only)."""

    tokens: np.ndarray
    prefill_tokens: np.ndarray
    prefill_entries: np.ndarray
    decode_entries: np.ndarray

    @property
    def entries(self) -> np.ndarray:
        return self.prefill_entries + self.decode_entries


def _batch_totals(lb, lc, ld, nb: int) -> _BatchTotals:
    return _BatchTotals(
        np.bincount(lb, weights=lc, minlength=nb).astype(np.int64),
        np.bincount(lb, weights=np.where(ld, 0, lc), minlength=nb).astype(np.int64),
        np.bincount(lb, weights=~ld, minlength=nb).astype(np.int64),
        np.bincount(lb, weights=ld, minlength=nb).astype(np.int64),
    )


def _check_batch_limits(t: _BatchTotals, lim, V: _Violations) -> None:
    """BATCH_TOKENS, PREFILL_TOKENS, BATCH_SIZE: per batch at most ``C`` tokens, ``P``
    prefill tokens and ``max_batch_size`` entries (section 3)."""
    j = np.flatnonzero(t.tokens > lim.max_batch_tokens)
    V.add_many("BATCH_TOKENS", j, None,
               lambda k: f"processes {int(t.tokens[j[k]])} tokens > C = {lim.max_batch_tokens}")
    if lim.max_prefill_tokens is not None:
        p = np.flatnonzero(t.prefill_tokens > lim.max_prefill_tokens)
        V.add_many("PREFILL_TOKENS", p, None,
                   lambda k: f"processes {int(t.prefill_tokens[p[k]])} prefill tokens "
                             f"> P = {lim.max_prefill_tokens}")
    if lim.max_batch_size is not None:
        n_entries = t.entries
        b = np.flatnonzero(n_entries > lim.max_batch_size)
        V.add_many("BATCH_SIZE", b, None,
                   lambda k: f"has {int(n_entries[b[k]])} entries > max_batch_size = "
                             f"{lim.max_batch_size}")


def _kv_in_use(ev: _Events, live, evicted, finish, limits: Limits, nb: int,
               prefix=None) -> np.ndarray:
    """KV after each batch (section 3, steps 3-4), in whole blocks: a running sum of ``+c``
    per entry, ``-m`` at an eviction and ``-m`` one batch after a request finishes; a hidden
    cache counts ``limits.hidden_ratio`` of its KV, in whole blocks (section 6, hidden
    cache). With prefix reuse (``prefix``: the instance's index) each request counts only its
    private tokens ``m - b*f(m)`` (section 6, "Prefix reuse", rule 4; the evaluator adds the
    resident blocks)."""
    h, hb = ev.hidden, ev.hidden_before
    if prefix is not None:
        def private_fp(m, hid, r):
            return limits.footprint(prefix_rules.private_tokens(prefix, r, m), hid)
        return _kv_deltas(ev, live, evicted, finish, nb, private_fp)
    fp = limits.footprint  # by cache type (semantics: hidden cache, rule "memory")

    delta = (
        np.bincount(ev.batch[live], weights=fp(ev.m_after[live], h[live])
                    - fp(ev.m_before[live], hb[live]), minlength=nb + 1)
        - np.bincount(ev.batch[evicted], weights=fp(ev.m_before[evicted], hb[evicted]),
                      minlength=nb + 1)
        - np.bincount(ev.batch[finish] + 1, weights=fp(ev.m_after[finish], h[finish]),
                      minlength=nb + 1)
    )
    return np.rint(np.cumsum(delta)[:nb]).astype(np.int64)


def _kv_deltas(ev: _Events, live, evicted, finish, nb: int, fp) -> np.ndarray:
    """:func:`_kv_in_use` with a footprint ``fp(m, hidden, request)`` (prefix reuse)."""
    h, hb, r = ev.hidden, ev.hidden_before, ev.req
    delta = (
        np.bincount(ev.batch[live], weights=fp(ev.m_after[live], h[live], r[live])
                    - fp(ev.m_before[live], hb[live], r[live]), minlength=nb + 1)
        - np.bincount(ev.batch[evicted], weights=fp(ev.m_before[evicted], hb[evicted],
                                                    r[evicted]), minlength=nb + 1)
        - np.bincount(ev.batch[finish] + 1, weights=fp(ev.m_after[finish], h[finish],
                                                       r[finish]), minlength=nb + 1)
    )
    return np.rint(np.cumsum(delta)[:nb]).astype(np.int64)


def _check_prefix_reuse(inst: Instance, s: Schedule, nb: int, ev: _Events, evicted, finish,
                        live, V: _Violations) -> prefix_rules.BlockEffects:
    """HIT_INVALID, HIT_NOT_RESIDENT, DUPLICATE_DROP, DROP_NOT_RESIDENT, DROP_REFERENCED: the
    resident blocks, hits and drops of section 6, "Prefix reuse" (rules 1-3 and 5), walked
    batch by batch by :func:`optsched.evaluation.prefix.replay_blocks`; returns the resident and
    cached blocks after each batch (rule 4 adds ``b`` per resident block to the KV)."""
    return prefix_rules.replay_blocks(inst, s, nb, ev.req, ev.batch, ev.m_before, ev.hit,
                                      ev.m_after, evicted, finish, live, V)


def _check_memory(kv: np.ndarray, M: int, V: _Violations) -> None:
    """KV_OVERFLOW: the KV in use after a batch fits in ``M`` (section 3, step 3)."""
    j = np.flatnonzero(kv > M)
    V.add_many("KV_OVERFLOW", j, None, lambda k: f"KV in use {int(kv[j[k]])} > M = {M}")


# --- time (section 4) ---------------------------------------------------------------------


def _batch_clock(arr, stated, touch_b, touch_r, dur):
    """Batch ends ``end_j = max(end_{j-1}, r_j) + d_j``, with ``r_j`` the latest arrival the
    batch touches or its stated start (section 4), as ``D_j + cummax(r_k - D_{k-1})``."""
    nb = dur.size
    if not nb:
        return np.zeros(0), np.zeros(0)
    arr_max = np.full(nb, -np.inf)
    if touch_b.size:
        np.maximum.at(arr_max, touch_b, arr[touch_r])
    r = np.maximum(np.maximum(arr_max, np.where(np.isnan(stated), -np.inf, stated)), 0.0)
    D = np.cumsum(dur)
    end = D + np.maximum.accumulate(r - (D - dur))
    return end, np.concatenate([[0.0], end[:-1]])


def _check_stated_starts(arr, stated, touch_b, touch_r, dur, end_prev, V: _Violations) -> None:
    """START_TOO_EARLY, BEFORE_ARRIVAL: a stated start is not before the previous batch's end
    nor before an arrival it touches, up to :func:`_time_tolerance` (section 4)."""
    has_stated = ~np.isnan(stated)
    if not has_stated.any():
        return
    dur_near = np.maximum(dur, np.concatenate([[0.0], dur[:-1]]))  # batch j and j - 1
    j = np.flatnonzero(has_stated & (stated < end_prev - _time_tolerance(dur_near, end_prev)))
    V.add_many("START_TOO_EARLY", j, None,
               lambda k: f"stated start {stated[j[k]]:g} is before the previous batch ends "
                         f"at {end_prev[j[k]]:g}")
    ta = arr[touch_r]
    early = np.flatnonzero(has_stated[touch_b]
                           & (ta > stated[touch_b] + _time_tolerance(dur_near[touch_b], ta)))
    V.add_many("BEFORE_ARRIVAL", touch_b[early], touch_r[early],
               lambda k: f"batch starts at {stated[touch_b[early[k]]]:g} before the request "
                         f"arrives at {arr[touch_r[early[k]]]:g}")


def _check_complete(g_final: np.ndarray, O: np.ndarray, V: _Violations) -> None:
    """INCOMPLETE: every request generates all ``O`` tokens (section 3, step 4)."""
    inc = np.flatnonzero(g_final < O)
    V.add_many("INCOMPLETE", np.full(inc.size, -1), inc,
               lambda k: f"generated {int(g_final[inc[k]])} of {int(O[inc[k]])} output tokens")


# --- the evaluator ------------------------------------------------------------------------

#: schedules with at least this many entries are first replayed by the compiled one-pass
#: kernel (:mod:`optsched.evaluation.fast`), which answers only when it finds no violation;
#: below it the vectorised replay is faster than loading the kernel
COMPILED_MIN_ENTRIES = 100_000


def _compiled(inst: Instance, s: Schedule) -> Evaluation | None:
    """The evaluation of a feasible schedule by the one-pass kernel, or None (a broken rule,
    or a case the kernel does not cover): then the vectorised replay below answers."""
    # lazy: numba loads only when the compiled replay runs
    from ..runtime.numba_load import call
    from . import fast

    if not fast.applies(inst, s):
        return None
    if s.ids == inst.ids:  # the usual case (the schedule of this instance): no lookups
        idmap = np.arange(len(s.ids), dtype=np.int64)
    else:
        idmap = np.array([inst.index.get(x, -1) for x in s.ids], dtype=np.int64)
    if (idmap < 0).any():  # UNKNOWN_REQUEST: only if the schedule names one
        e_req = idmap[s.entry_req]
        v_req = idmap[s.evict_req]
        if (e_req < 0).any() or (v_req < 0).any():
            return None
    else:
        e_req, v_req = idmap[s.entry_req], idmap[s.evict_req]
    lim = inst.limits
    cost, fc = fast.cost_params(inst)
    P = -1 if lim.max_prefill_tokens is None else lim.max_prefill_tokens
    bs = -1 if lim.max_batch_size is None else lim.max_batch_size
    hits = None
    if inst.has_prefix or s.has_hits or s.has_drops:  # section 6, prefix reuse
        ix = inst.prefix_index or prefix_rules.empty_index(inst)
        (ok, dur, kv, tok, pre_tok, pre_ent, dec_ent, end, ent_decode, ent_cached, first_b,
         done_b, g, n_evict, recomputed, ent_gen, hit_req, res_b, cac_b, drop_b) = call(
            fast.replay_prefix, s.batch_ptr, e_req, s.entry_tokens, s.entry_hit, s.evict_ptr,
            v_req, s.drop_ptr, ix.dense(s.drop_block), s.start, inst.arrival, inst.prompt,
            inst.output, lim.kv_capacity, lim.max_batch_tokens, P, bs, lim.block_size, cost, fc,
            ix.ptr, ix.block, ix.listed, ix.shareable, ix.n_blocks)
        hits = (hit_req, prefix_rules.BlockEffects(res_b, cac_b, drop_b))
    else:
        (ok, dur, kv, tok, pre_tok, pre_ent, dec_ent, end, ent_decode, ent_cached, first_b,
         done_b, g, n_evict, recomputed, ent_gen) = call(
            fast.replay, s.batch_ptr, e_req, s.entry_tokens, s.evict_ptr, v_req, s.start,
            inst.arrival, inst.prompt, inst.output, lim.kv_capacity, lim.max_batch_tokens, P,
            bs, lim.block_size, cost, fc)
    if not ok:
        return None
    V = _Violations(inst.ids)
    stated = np.flatnonzero(~np.isnan(s.start))
    if stated.size:  # START_TOO_EARLY, BEFORE_ARRIVAL on the batches that state a start
        end_prev = np.concatenate([[0.0], end[:-1]])
        touch_b, touch_r = _touched(s, stated, e_req, v_req)
        _check_stated_starts(inst.arrival, s.start, touch_b, touch_r, dur, end_prev, V)
        if V.counts:
            return None
    first_token = np.where(first_b >= 0, end[first_b], np.nan)
    completion = np.where(done_b >= 0, end[done_b], np.nan)
    g_final = np.minimum(g, inst.output)
    totals = _BatchTotals(tok, pre_tok, pre_ent, dec_ent)
    gaps = call(fast.token_gaps, e_req, s.batch_ptr, ent_gen, end, inst.n)
    return _evaluation(inst, V, n_evict, recomputed, first_token, completion, g_final, end, dur,
                       kv, totals, ent_decode, ent_cached, ent_gen=ent_gen, gaps=gaps,
                       hits=hits)


def _touched(s: Schedule, batches: np.ndarray, e_req: np.ndarray, v_req: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray]:
    """(batch, request) of every entry and eviction of ``batches``."""
    tb, tr = [], []
    for ptr, req in ((s.batch_ptr, e_req), (s.evict_ptr, v_req)):
        lo, hi = ptr[batches], ptr[batches + 1]
        tb.append(np.repeat(batches, hi - lo))
        tr.append(np.concatenate([req[a:b] for a, b in zip(lo.tolist(), hi.tolist())])
                  if batches.size else np.zeros(0, np.int64))
    return np.concatenate(tb), np.concatenate(tr).astype(np.int64)



def evaluate(instance: Instance, schedule: Schedule) -> Evaluation:
    """Replay ``schedule`` on ``instance`` (semantics sections 3-4); never raises on a
    syntactically valid schedule: broken rules come back as violations."""
    inst, s = instance, schedule
    if inst.cluster is not None or s.placement is not None:  # section 6, clusters
        raise ValueError("a cluster instance or a schedule that names engines is replayed on all "
                         "engines by optsched.evaluate (optsched.evaluation.evaluate_cluster)")
    n, nb, lim = inst.n, s.n_batches, inst.limits
    V = _Violations(inst.ids)
    if s.n_entries >= COMPILED_MIN_ENTRIES:
        done = _compiled(inst, s)
        if done is not None:
            return done

    entries, evictions = _columns(inst, s)
    _check_known_requests(entries, s.ids, V)
    _check_known_requests(evictions, s.ids, V)
    _check_positive_tokens(entries, V)
    _check_once_per_batch(entries, evictions, n, V)
    _check_evict_or_process(entries, evictions, n, V)

    _check_hidden_enabled(entries, lim, V)
    ev = _replay(inst, entries, evictions, nb)
    evicted = _check_evictions(ev, V)
    live = _check_entries(ev, V)
    _check_cache_type(ev, live, V)
    decode = _decode_entries(ev, live, inst.prompt)
    gen_first = live & (ev.g_before == 0) & (ev.g_after >= 1)
    finish = live & (ev.g_before < ev.O) & (ev.g_after >= ev.O)

    # per entry, in schedule order: in effect, decode phase, m before the batch
    ent_live = np.zeros(entries.batch.size, bool)
    ent_decode = np.zeros(entries.batch.size, bool)
    ent_cached = np.zeros(entries.batch.size, np.int64)
    ent_hidden = entries.hidden
    src_e = ev.src[ev.is_entry]
    ent_live[src_e] = live[ev.is_entry]
    ent_decode[src_e] = decode[ev.is_entry]
    ent_cached[src_e] = (ev.m_before + ev.hit)[ev.is_entry]  # hits are context (section 6)
    ent_gen = np.zeros(entries.batch.size, bool)
    gen = live & (ev.g_after > ev.g_before) & (ev.g_before < ev.O)
    ent_gen[src_e] = gen[ev.is_entry]

    L = np.flatnonzero(ent_live)
    lb, lc, lm, ld = entries.batch[L], entries.tokens[L], ent_cached[L], ent_decode[L]
    dur = inst.cost_model.batch_times(lb, lc, lm, ld, nb) if nb else np.zeros(0)
    hidden_dur = inst.cost_model.hidden_times(lb, lm, ent_hidden[L], nb) if nb else np.zeros(0)
    dur = dur + hidden_dur
    totals = _batch_totals(lb, lc, ld, nb)
    _check_batch_limits(totals, lim, V)
    reuse = inst.has_prefix or s.has_hits or s.has_drops
    kv = _kv_in_use(ev, live, evicted, finish, lim, nb, inst.prefix_index if reuse else None)
    blocks = None
    if reuse:  # section 6, "Prefix reuse": resident blocks count once, cached ones too
        blocks = _check_prefix_reuse(inst, s, nb, ev, evicted, finish, live, V)
        kv = kv + lim.block_size * blocks.resident
    swaps = _check_swaps(inst, s, nb, ev, live, evicted, V) if s.has_swaps else None
    if swaps is not None:
        kv = kv + np.cumsum(swaps.gpu_delta)
        dur = dur + inst.cost_model.swap_times(np.arange(nb), swaps.moved, nb)
        _check_host_memory(swaps.host_kv, lim.host_capacity, V)
    _check_memory(kv, lim.kv_capacity, V)

    touch_b = np.concatenate([entries.batch[entries.ok], evictions.batch[evictions.ok]])
    touch_r = np.concatenate([entries.req[entries.ok], evictions.req[evictions.ok]])
    end, end_prev = _batch_clock(inst.arrival, s.start, touch_b, touch_r, dur)
    _check_stated_starts(inst.arrival, s.start, touch_b, touch_r, dur, end_prev, V)

    first_token = np.full(n, np.nan)
    completion = np.full(n, np.nan)
    first_token[ev.req[gen_first]] = end[ev.batch[gen_first]]
    completion[ev.req[finish]] = end[ev.batch[finish]]
    g_final = np.zeros(n, np.int64)
    if ev.size:
        np.maximum.at(g_final, ev.req[live], np.minimum(ev.g_after[live], ev.O[live]))
    _check_complete(g_final, inst.output, V)
    hidden = (ent_hidden[L], hidden_dur) if lim.hidden_cache or s.has_hidden else None
    n_evict = np.bincount(ev.req[evicted], minlength=n)
    recomputed = np.bincount(ev.req[evicted], weights=ev.m_before[evicted],
                             minlength=n).astype(np.int64)
    hits = None
    if blocks is not None:
        hit_req = np.bincount(ev.req[live], weights=ev.hit[live], minlength=n).astype(np.int64)
        hits = (hit_req, blocks)
    gaps = token_gaps(inst.n, s, entries.req, ent_gen, end)
    return _evaluation(inst, V, n_evict, recomputed, first_token, completion, g_final, end, dur,
                       kv, totals, ent_decode, ent_cached, swaps, hidden, ent_gen, gaps, hits)


def token_gaps(n: int, s: Schedule, e_req: np.ndarray, ent_gen: np.ndarray,
               end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per request the longest gap between consecutive generated tokens (0 with fewer than
    two tokens) and every gap of the run (section 4: ``max_tbt``, ``p99_tbt``). A token's time
    is the end of the batch whose entry generated it (section 3, step 2: a decode, a
    prefill's last chunk, a refill). ``e_req``: each entry's request (instance order);
    ``ent_gen``: whether it generated a token. Large schedules: one compiled pass
    (:func:`optsched.evaluation.fast.token_gaps`); else a stable sort by request."""
    if ent_gen.size >= COMPILED_MIN_ENTRIES:
        # lazy: numba loads only when the compiled pass runs
        from ..runtime.numba_load import call
        from . import fast

        if fast.HAVE_NUMBA:
            return call(fast.token_gaps, e_req, s.batch_ptr, ent_gen, end, n)
    k = np.flatnonzero(ent_gen)
    r, t = e_req[k], end[s.batch_of_entry[k]]
    order = np.argsort(r, kind="stable")  # a request's tokens stay in batch order
    r, t = r[order], t[order]
    same = r[1:] == r[:-1]
    gaps = np.diff(t)[same]
    longest = np.zeros(n)
    np.maximum.at(longest, r[1:][same], gaps)
    return longest, gaps


def _p99(x: np.ndarray) -> float | None:
    """``np.percentile(x, 99)`` (linear interpolation) by partitioning: O(len(x)), for the
    millions of gaps of a full trace."""
    if x.size == 0:
        return None
    h = 0.99 * (x.size - 1)
    lo = int(np.floor(h))
    hi = min(lo + 1, x.size - 1)
    part = np.partition(x, (lo, hi))
    return float(part[lo] + (h - lo) * (part[hi] - part[lo]))


def _tbt_metrics(O: np.ndarray, completion: np.ndarray, longest: np.ndarray,
                 gaps: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
    """Per-request ``max_tbt`` (NaN unfinished; 0 for ``O = 1``) and the run's figures."""
    max_tbt = np.where(np.isfinite(completion), longest, np.nan)
    some = np.isfinite(max_tbt) & (O > 1)
    return max_tbt, {
        "max_tbt": float(max_tbt[some].max()) if some.any() else None,
        "mean_max_tbt": float(max_tbt[some].mean()) if some.any() else None,
        "p99_tbt": _p99(gaps),
    }


def _evaluation(inst, V, n_evict, recomputed, first_token, completion, g_final, end, dur, kv,
                totals, ent_decode, ent_cached, swaps=None, hidden=None,
                ent_gen=None, gaps=None, hits=None) -> Evaluation:
    """Per-request and summary metrics (section 4) around the replay's arrays."""
    O = inst.output
    latency = completion - inst.arrival
    ttft = first_token - inst.arrival
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(O > 1, (completion - first_token) / np.maximum(O - 1, 1), np.nan)
    metrics = _totals(inst, g_final, completion, latency, ttft, tpot, n_evict, recomputed,
                      end, dur, kv, totals.entries)
    if gaps is None:
        gaps = (np.zeros(inst.n), np.zeros(0))
    max_tbt, tbt = _tbt_metrics(O, completion, *gaps)
    metrics.update(tbt)
    if swaps is not None or inst.limits.swapping:
        metrics.update(_swap_metrics(swaps, dur.size))
    if hidden is not None:  # section 6, hidden cache: how much of it, at what price
        metrics["hidden_entries"] = int(hidden[0].sum())
        metrics["hidden_time"] = float(hidden[1].sum())
    reuse: dict[str, Any] = {}
    if hits is not None:  # section 6, prefix reuse
        metrics.update(_reuse_metrics(hits[0], hits[1], totals))
        reuse = {"hit_tokens": hits[0], "batch_resident_blocks": hits[1].resident,
                 "batch_cached_blocks": hits[1].cached}
    return Evaluation(
        feasible=not V.counts,
        violations=tuple(V.kept),
        violation_counts=V.counts,
        request_ids=inst.ids,
        first_token=first_token,
        completion=completion,
        latency=latency,
        ttft=ttft,
        tpot=tpot,
        max_tbt=max_tbt,
        evictions=n_evict,
        recomputed_tokens=recomputed,
        batch_start=end - dur,
        batch_end=end,
        batch_duration=dur,
        batch_kv=kv,
        batch_tokens=totals.tokens,
        batch_prefill_tokens=totals.prefill_tokens,
        batch_prefill_entries=totals.prefill_entries,
        batch_decode_entries=totals.decode_entries,
        entry_decode=ent_decode,
        entry_cached=ent_cached,
        metrics=metrics,
        entry_generates=np.zeros(ent_decode.size, bool) if ent_gen is None else ent_gen,
        **reuse,
    )


def _reuse_metrics(hit_req: np.ndarray, blocks, totals: _BatchTotals) -> dict[str, Any]:
    """Section 6, "Prefix reuse", metrics: hit tokens and rate, computed prefill tokens, drops,
    peak resident and cached blocks."""
    hit = int(hit_req.sum())
    pre = int(totals.prefill_tokens.sum())
    return {"hit_tokens": hit, "hit_rate": hit / (hit + pre) if hit + pre else None,
            "prefill_tokens": pre, "dropped_blocks": int(blocks.dropped.sum()),
            "peak_resident_blocks": int(blocks.resident.max()) if blocks.resident.size else 0,
            "peak_cached_blocks": int(blocks.cached.max()) if blocks.cached.size else 0}


# --- swap preemption (semantics section 6, "Swap preemption") ------------------------------
# Swaps are invisible to the closed-form replay above: a swap-out moves tokens of ``m`` to
# host memory and the swap-in brings them back before the request is processed again, so
# ``S``, ``m`` and ``g`` evolve exactly as without the swap. What the swap changes is where
# the KV lives (GPU KV in use, host KV in use) and the batch's transfer time. The rules
# below walk, request by request, the few requests that swap.

_SWAP_ORDER = {"evict": 0, "swap_out": 1, "swap_in": 2, "entry": 3}  # within one batch


@dataclass(frozen=True)
class _SwapEffects:
    """What the swaps add to the replay: per batch, tokens moved (either direction), the
    change of GPU KV in use, host KV in use after the batch; per request, tokens moved."""

    moved: np.ndarray
    gpu_delta: np.ndarray
    host_kv: np.ndarray
    out_tokens: np.ndarray
    in_tokens: np.ndarray


def _check_swap_items(inst: Instance, s: Schedule, V: _Violations):
    """Swap-outs ``(batch, request, tokens)`` and swap-ins ``(batch, request)`` (section 6) with unknown
    requests (UNKNOWN_REQUEST) and repeats within a batch (DUPLICATE_SWAP) reported and dropped."""
    out: list[tuple[int, int, int]] = []
    inn: list[tuple[int, int]] = []
    for kind, batches, reqs, toks in (
        ("swap_out", s.batch_of_swap_out, s.swap_out_req, s.swap_out_tokens),
        ("swap_in", s.batch_of_swap_in, s.swap_in_req, None),
    ):
        seen: set[tuple[int, int]] = set()
        for k in range(reqs.size):
            b, name = int(batches[k]), s.ids[reqs[k]]
            r = inst.index.get(name, -1)
            if r < 0:
                V.add_many("UNKNOWN_REQUEST", [b], None,
                           lambda _k, kind=kind, name=name:
                               f"{kind} names request {name!r}, which the instance does not have",
                           names=lambda _k, name=name: name)
                continue
            if (b, r) in seen:
                V.add_many("DUPLICATE_SWAP", [b], [r],
                           lambda _k, kind=kind: f"request is listed twice in the batch's {kind}")
                continue
            seen.add((b, r))
            if toks is None:
                inn.append((b, r))
            else:
                out.append((b, r, int(toks[k])))
    return out, inn


def _swap_timelines(out, inn, ev: _Events, live, valid_evict):
    """Per swapping request (section 6), its events in batch order: ``(batch, kind, event index or
    swap tokens)``; replay events are found by binary search in the request-sorted arrays."""
    lines: dict[int, list[tuple[int, int, str, int]]] = {}
    for b, r, tok in out:
        lines.setdefault(r, []).append((b, _SWAP_ORDER["swap_out"], "swap_out", tok))
    for b, r in inn:
        lines.setdefault(r, []).append((b, _SWAP_ORDER["swap_in"], "swap_in", 0))
    for r, line in lines.items():
        lo, hi = np.searchsorted(ev.req, [r, r + 1])
        for k in range(lo, hi):
            if ev.is_entry[k] and live[k]:
                line.append((int(ev.batch[k]), _SWAP_ORDER["entry"], "entry", k))
            elif not ev.is_entry[k] and valid_evict[k]:
                line.append((int(ev.batch[k]), _SWAP_ORDER["evict"], "evict", k))
        line.sort(key=lambda e: (e[0], e[1]))
    return lines


def _check_swaps(inst: Instance, s: Schedule, nb: int, ev: _Events, live, valid_evict,
                 V: _Violations) -> _SwapEffects:
    """The swap rules of section 6: a swap-out moves ``1 <= t <= m - h`` tokens of GPU KV to host
    (SWAP_OUT_NOT_RESIDENT otherwise); a swap-in brings back all ``h`` host tokens
    (SWAP_IN_NOT_SWAPPED when ``h = 0``); a request with ``h > 0`` may not be processed or
    evicted (SWAPPED_OUT_REQUEST; an eviction then drops the host copy too). GPU KV counts
    ``fp(m - h)`` instead of the replay's ``fp(m)``."""
    n = inst.n
    fp = inst.limits.kv_footprint
    O = inst.output
    moved = np.zeros(nb, np.int64)
    gpu_delta = np.zeros(nb + 1, np.int64)
    host_delta = np.zeros(nb + 1, np.int64)
    out_tok = np.zeros(n, np.int64)
    in_tok = np.zeros(n, np.int64)
    out, inn = _check_swap_items(inst, s, V)
    lines = _swap_timelines(out, inn, ev, live, valid_evict)
    for r, line in lines.items():
        m = h = 0
        hid = False  # the request's cache is hidden states (section 6: those are not swapped)
        finished_at = -1
        for b, _, kind, x in line:
            corr_before = fp(m - h) - fp(m)
            if kind == "entry":
                if h > 0:
                    V.add_many("SWAPPED_OUT_REQUEST", [b], [r], lambda _k, h=h:
                               f"request is processed while {h} of its KV tokens are on the host")
                m = int(ev.m_after[x])
                hid = bool(ev.hidden[x])
                if ev.g_after[x] >= O[r]:
                    finished_at = b
            elif kind == "evict":
                if h > 0:
                    V.add_many("SWAPPED_OUT_REQUEST", [b], [r], lambda _k, h=h:
                               f"request is evicted while {h} of its KV tokens are on the host "
                               f"(swap it in first)")
                    host_delta[b] -= h
                    h = 0
                m, hid = 0, False
            elif kind == "swap_out":
                on_gpu = m - h
                if finished_at >= 0 and finished_at < b:
                    why = "request already finished"
                elif hid:
                    why = "request holds hidden cache, not KV (hidden cache is not swapped)"
                elif not 1 <= x <= on_gpu:
                    why = f"swaps out {x} tokens but holds {on_gpu} on the GPU"
                else:
                    why = ""
                if why:
                    V.add_many("SWAP_OUT_NOT_RESIDENT", [b], [r], lambda _k, why=why: why)
                    continue
                h += x
                host_delta[b] += x
                moved[b] += x
                out_tok[r] += x
            else:  # swap_in
                if h == 0:
                    V.add_many("SWAP_IN_NOT_SWAPPED", [b], [r],
                               lambda _k: "swap-in of a request with no KV on the host")
                    continue
                host_delta[b] -= h
                moved[b] += h
                in_tok[r] += h
                h = 0
            gpu_delta[b] += (fp(m - h) - fp(m)) - corr_before
        if finished_at >= 0 and h > 0:  # finished while swapped (already reported): free both
            host_delta[finished_at + 1] -= h
            gpu_delta[finished_at + 1] -= fp(m - h) - fp(m)
    return _SwapEffects(moved, gpu_delta[:nb], np.cumsum(host_delta)[:nb], out_tok, in_tok)


def _check_host_memory(host_kv: np.ndarray, capacity: int | None, V: _Violations) -> None:
    """HOST_OVERFLOW: host KV after a batch exceeds ``limits.host_capacity`` (0 when unset;
    section 6, swap preemption rule 4)."""
    cap = 0 if capacity is None else capacity
    j = np.flatnonzero(host_kv > cap)
    unset = " (the instance has no host memory: limits.host_capacity is not set)" \
        if capacity is None else ""
    V.add_many("HOST_OVERFLOW", j, None,
               lambda k: f"host KV in use {int(host_kv[j[k]])} > host_capacity = {cap}{unset}")


def _swap_metrics(swaps: _SwapEffects | None, nb: int) -> dict[str, Any]:
    """Swap volume (section 6): tokens moved out and in, and the host peak."""
    if swaps is None:
        return {"swap_out_tokens": 0, "swap_in_tokens": 0, "peak_host_kv": 0}
    return {"swap_out_tokens": int(swaps.out_tokens.sum()),
            "swap_in_tokens": int(swaps.in_tokens.sum()),
            "peak_host_kv": int(swaps.host_kv.max()) if nb else 0}


def _stat(x: np.ndarray, fn) -> float | None:
    x = x[np.isfinite(x)]
    return float(fn(x)) if x.size else None


def _totals(inst, g_final, completion, latency, ttft, tpot, n_evict, recomputed, end, dur, kv,
            batch_entries):
    n, nb = inst.n, batch_entries.size
    all_done = n > 0 and bool(np.all(np.isfinite(completion)))
    # the latest completion: the latest end of a batch that processes a token (equal on a
    # complete schedule; empty and eviction-only batches after it take no time and don't count).
    # The latest, not the last listed: a cluster's engines run concurrently (section 6)
    working = np.flatnonzero(batch_entries > 0)
    makespan = float(end[working].max()) if working.size else 0.0
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
        "completion_rate": float(np.isfinite(completion).sum()) / makespan
        if makespan > 0 else None,
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

