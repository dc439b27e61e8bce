"""InferMax flow model: the latency objectives (``formulations/infermax.md`` section 12).

Total latency (offline and online) and mean TTFT (eqs. F11-F13) on the flow model of
:mod:`.flow`, and the first-token reduction of mean TTFT (eq. F12):

* (F11) ``sum_i X_i = sum_j end_j psi_j = sum_j Delta_j u_j``: ``psi_j`` counts the arcs of
  batch ``j`` that complete a request (total latency) or generate its first token (mean TTFT),
  ``u_j = N - sum_{l<j} psi_l`` and ``Delta_j = end_j - end_{j-1}`` (``end_{-1} = 0``; offline
  ``Delta_j = t_j``, online it includes the idle time before the batch). With binaries
  ``d[j,q] = [u_j >= q]`` the product is ``sum_q w[j,q]``, ``w[j,q] >= Delta_j - T (1 - d[j,q])``,
  ``w >= 0``; the objective subtracts ``sum_i a_i`` (and divides by ``N`` for mean TTFT).
* (F12) with evictions allowed, the mean-TTFT optimum equals the total-latency optimum of the
  instance with every output set to 1 (a request leaves after its first token):
  :func:`first_token_instance`, :func:`first_token_prefix` (any schedule -> a no-worse one of
  the reduced instance) and :func:`complete` (a reduced schedule -> a full one with the same
  first-token times: evict each request after its first token, then finish the requests one by
  one).
* (F13) the horizon for mean TTFT: :func:`.horizon.first_token_batches_upper_bound`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from ... import milp
from ...evaluation import evaluate
from ...instance import Instance
from ...schedule import Schedule, ScheduleBuilder
from ...solve_types import Objective, WarmStart
from ..base import Hypotheses, RawSolution
from .arcs import CHUNK, DECODE, EVREFILL, IDLE, START, STEP, _Class, chunk_price
from .encode import canonical
from .flow_remainder import max_remainder
from .merge import merge_prefills, merging_never_hurts

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .flow import FlowModel

#: the objectives priced by eq. F11
LATENCY_OBJECTIVES = ("total-latency", "mean-ttft")


# ------------------------------------------------------------------------- eq. F11
def counted_arcs(c: _Class, objective: str) -> np.ndarray:
    """The arcs whose batch ends the counted event: completion (total latency) or the first
    token (mean TTFT: an arc out of level ``g = 0`` into ``R(1)``, or into ``F`` when ``O = 1``)."""
    if objective == Objective.TOTAL_LATENCY:
        return c.finishes.copy()
    nS = len(c.states)
    level = np.array([s[1] for s in c.states] + [g for (g, _), _ in sorted(
        c.qidx.items(), key=lambda t: t[1])] + [g for (g, _), _ in sorted(  # F2c's chain
        c.qidx_b.items(), key=lambda t: t[1])])
    target = c.sidx[("F", c.O, 0)] if c.O == 1 else c.sidx[("R", 1, c.I)]
    return (level[c.src] == 0) & (c.dst == target) & (c.dst < nS)


def delta_bound(fm: FlowModel) -> float:
    """``T``: an upper bound on ``Delta_j`` for the encoding of any schedule with earliest
    starts (model units): the dearest batch plus, online, the latest arrival (an earliest
    start idles at most until the arrival of a request it touches)."""
    k = fm.k
    T = k["k0"] + k["kpb"] + k["kdb"]
    for c in fm.classes:
        T += c.n * max(float(c.price[c.kind == DECODE].max(initial=0.0)),
                       float(c.price[c.kind == CHUNK].max(initial=0.0)),
                       float(c.price[np.isin(c.kind, (START, STEP, EVREFILL))].sum()))
    T += max_remainder(fm)  # F2c: t_j includes the continuing chunks' remainder
    a_max = max((c.arrival for c in fm.classes), default=0.0)
    return (T + (a_max if fm.online else 0.0)) * fm.scale


def add_latency_objective(fm: FlowModel) -> None:
    """(F11) rows ``unfinished``, ``d_mono``, ``w_lin`` (and, online, ``idle``), and the
    objective ``weight * (sum w - sum_i a_i)`` (``weight = 1/N`` for mean TTFT); the rank form
    (F14) instead when the model has one class per request and every output is 1."""
    if rank_form_applies(fm.inst, fm.objective) and fm.per_request:
        add_rank_objective(fm)
        return
    m, J = fm.model, fm.J
    N = sum(c.n for c in fm.classes)
    fm.d = m.add_vars("d", (J, N), vtype="B")
    fm.w = m.add_vars("w", (J, N), lb=0.0)
    T = fm.T = delta_bound(fm)
    # sum_q d[l,q] + sum_{j<l} counted(j) = N
    rows, cols, vals = [np.repeat(np.arange(J), N)], [fm.d[:, :].ravel()], [np.ones(J * N)]
    for ci, c in enumerate(fm.classes):
        arcs = np.flatnonzero(counted_arcs(c, fm.objective))
        for l in range(1, J):
            rows.append(np.full(l * arcs.size, l))
            cols.append(fm.f[ci][:l, arcs].ravel())
            vals.append(np.ones(l * arcs.size))
    m.add_constraints(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals),
                      lo=float(N), hi=float(N), name="unfinished")
    if N > 1:
        R = np.arange(J * (N - 1))
        m.add_constraints(np.repeat(R, 2), np.stack([fm.d[:, 1:].ravel(),
                                                     fm.d[:, :-1].ravel()], 1).ravel(),
                          np.tile([1.0, -1.0], R.size), hi=0.0, name="d_mono")
    _w_rows(fm, N, T)
    weight = 1.0 / N if fm.objective == Objective.MEAN_TTFT else 1.0
    const = -weight * sum(c.n * c.arrival for c in fm.classes) * fm.scale
    fm.obj_terms = (fm.w[:, :].ravel(), np.full(J * N, weight), const)
    m.set_objective(fm.w[:, :].ravel(), np.full(J * N, weight), constant=const)


def _w_rows(fm: FlowModel, N: int, T: float) -> None:
    """``w[j,q] - Delta_j - T d[j,q] >= -T`` with ``Delta_j = t_j`` offline and
    ``end_j - end_{j-1}`` online, where also ``end_j - end_{j-1} - t_j <= max_k a_k``."""
    m, J = fm.model, fm.J
    R = np.arange(J * N)
    jq = np.repeat(np.arange(J), N)
    if not fm.online:
        m.add_constraints(np.repeat(R, 3),
                          np.stack([fm.w[:, :].ravel(), fm.t[jq], fm.d[:, :].ravel()], 1).ravel(),
                          np.tile([1.0, -1.0, -T], R.size), lo=-T, name="w_lin")
        return
    first = jq == 0  # Delta_0 = end_0
    r0, rl = R[first], R[~first]
    m.add_constraints(np.concatenate([np.repeat(r0, 3), np.repeat(rl, 4)]),
                      np.concatenate([
                          np.stack([fm.w[:, :].ravel()[first], fm.end[jq[first]],
                                    fm.d[:, :].ravel()[first]], 1).ravel(),
                          np.stack([fm.w[:, :].ravel()[~first], fm.end[jq[~first]],
                                    fm.end[jq[~first] - 1], fm.d[:, :].ravel()[~first]],
                                   1).ravel()]),
                      np.concatenate([np.tile([1.0, -1.0, -T], r0.size),
                                      np.tile([1.0, -1.0, 1.0, -T], rl.size)]),
                      lo=-T, name="w_lin")
    _idle_rows(fm, max(c.arrival for c in fm.classes) * fm.scale)


def _idle_rows(fm: FlowModel, a_max: float) -> None:
    """``start_j - end_{j-1} <= max_k a_k`` (``end_{-1} = 0``): valid for earliest starts."""
    m, J = fm.model, fm.J
    m.add_constraint([fm.start[0]], [1.0], hi=a_max, name="idle0")
    if J > 1:
        m.add_constraints(np.repeat(np.arange(J - 1), 2),
                          np.stack([fm.start[1:], fm.end[:-1]], 1).ravel(),
                          np.tile([1.0, -1.0], J - 1), hi=a_max, name="idle")


def fill_latency(fm: FlowModel, x: np.ndarray, counts: list[np.ndarray], t: np.ndarray) -> None:
    """The F11 columns ``d = [u_j >= q]``, ``w = d Delta_j`` of an encoded point (F14's
    columns for the rank form)."""
    if fm.rank is not None:
        fill_rank(fm, x, counts)
        return
    J = fm.J
    N = sum(c.n for c in fm.classes)
    ev = np.zeros(J)
    for ci, c in enumerate(fm.classes):
        ev += counts[ci][:, counted_arcs(c, fm.objective)].sum(1)
    u = N - np.concatenate([[0.0], np.cumsum(ev)[:-1]])
    d = (np.arange(1, N + 1)[None, :] <= u[:, None]).astype(float)
    if fm.online:
        end = x[fm.end[:]]
        delta = np.diff(np.r_[0.0, end])
    else:
        delta = t
    x[fm.d[:, :].ravel()] = d.ravel()
    x[fm.w[:, :].ravel()] = (d * delta[:, None]).ravel()


# ------------------------------------------------------------------------- eq. F12
def truncation_applies(objective: str, hyp: Hypotheses) -> bool:
    """Eq. F12 holds for mean TTFT whenever evictions are allowed (the completion evicts)."""
    return objective == Objective.MEAN_TTFT and not hyp.no_evictions


def first_token_instance(inst: Instance) -> Instance:
    """The instance whose requests leave after their first token (every output set to 1)."""
    reqs = tuple(replace(r, output=1, predicted_output=None) for r in inst.requests)
    return inst.replace(requests=reqs, name=f"{inst.name}-first-tokens")


def first_token_prefix(inst: Instance, s: Schedule) -> Schedule:
    """The part of ``s`` before each request's first token, as a schedule of
    :func:`first_token_instance` (entries and evictions of a request are kept while it has
    generated nothing; batches left empty are dropped, starts are the earliest). Its batches
    hold a subset of ``s``'s entries and KV, so each batch is no dearer and ends no later, and
    every first token comes no later (F12)."""
    S = {r.id: r.prompt for r in inst.requests}
    m = {r.id: 0 for r in inst.requests}
    g = {r.id: 0 for r in inst.requests}
    b = ScheduleBuilder(ids=inst.ids)
    for bt in s:
        entries = [(r, c) for r, c in bt.entries if g[r] == 0]
        evict = [r for r in bt.evict if g[r] == 0]
        for r in bt.evict:
            m[r] = 0
        for r, c in bt.entries:
            m[r] += c
            if m[r] == S[r]:
                g[r] += 1
                S[r] += 1
        if entries or evict:
            b.add(entries, evict)
    return b.build()


def complete(inst: Instance, prefix: Schedule) -> Schedule:
    """A schedule of ``inst`` with the first-token times of ``prefix`` (a schedule of
    :func:`first_token_instance`): each request with ``O > 1`` is evicted at the start of the
    batch after its first token (a zero-time eviction-only batch after the last one), then
    every unfinished request is refilled and run to completion alone (its peak ``I + O - 1``
    fits in ``M``, semantics section 2), in chunks of at most the prefill budget."""
    O = {r.id: r.output for r in inst.requests}
    S = {r.id: r.prompt for r in inst.requests}
    m = {r.id: 0 for r in inst.requests}
    b = ScheduleBuilder(ids=inst.ids)
    pending: list[str] = []  # first token in the previous batch, O > 1: evict now
    for bt in prefix:
        b.add(bt.entries, list(bt.evict) + pending, bt.start)
        pending = []
        for r in bt.evict:
            m[r] = 0
        for r, c in bt.entries:
            m[r] += c
            if m[r] == S[r] and O[r] > 1:
                pending.append(r)
    if pending:
        b.add([], pending)
    budget = inst.limits.prefill_budget
    for r in inst.requests:
        if r.output == 1:
            continue
        S_r, m_r, g_r = r.prompt + 1, 0, 1
        while g_r < r.output:
            c = min(S_r - m_r, budget)
            b.add([(r.id, c)])
            m_r += c
            if m_r == S_r:
                g_r, S_r = g_r + 1, S_r + 1
    return b.build()


def reduced_warm_start(inst: Instance, reduced: Instance, ws: WarmStart | None
                       ) -> WarmStart | None:
    """The warm start's first-token prefix on the reduced instance (F12)."""
    if ws is None or not ws.feasible:
        return None
    prefix = first_token_prefix(inst, ws.schedule)  # a new schedule: replayed once
    return WarmStart(prefix, evaluate(reduced, prefix), ws.source)


def lift(inst: Instance, raw: RawSolution) -> RawSolution:
    """The reduced instance's answer as an answer for ``inst`` (F12): same objective and bound,
    the schedule completed by :func:`complete`."""
    note = ("mean TTFT via the first-token reduction (formulations/infermax.md F12): requests "
            "leave the model after their first token; the schedule then evicts each one and "
            "finishes them one by one (that tail does not move any first token)")
    sched = None if raw.schedule is None else complete(inst, raw.schedule)
    return replace(raw, schedule=sched, notes=(note,) + tuple(raw.notes))


# ------------------------------------------------------------------------- eq. F14
def rank_form_applies(inst: Instance, objective: str) -> bool:
    """The rank form (F14) prices both latency objectives when every request has ``O = 1``
    (the first-token reduction's instances), and total latency with arrivals (for mean TTFT
    with ``O > 1`` a request works after its first token, so its own work is not weighted by
    its own ``d``; offline total latency keeps F10, measured as fast on the family)."""
    if inst.n == 0 or objective not in LATENCY_OBJECTIVES:
        return False
    if bool((inst.output == 1).all()):
        return True
    return objective == Objective.TOTAL_LATENCY and float(np.ptp(inst.arrival)) > 0


@dataclass
class RankForm:
    """The F14 columns: ``d[j,q]`` (request ``q`` unfinished before batch ``j``), ``P[j,q]``
    (its entries' price in batch ``j``), ``v`` (the products ``P[j,q'] d[j,q]`` that the rank
    order does not settle, pairs in ``pairs``), ``z[j,q] = idle_j d[j,q]`` (online)."""

    d: milp.VarBlock
    P: milp.VarBlock
    v: milp.VarBlock | None
    pairs: list[tuple[int, int]]  # (worker q', waiting q)
    z: milp.VarBlock | None
    own: np.ndarray  # weight of a request's own work: 1 + identical requests ranked after it
    #: (e, ind): e[j,q] = ind_j d[j,q] for the phase indicators ap, ad (outputs > 1)
    phase: list[tuple[milp.VarBlock, milp.VarBlock]]


def rank_groups(fm: FlowModel) -> list[list[int]]:
    """Consecutive classes (one request each) with equal arrival, prompt and output: ranks in
    class order, so a group's first class gets its first token first."""
    groups: list[list[int]] = []
    for ci, c in enumerate(fm.classes):
        if groups and _key(fm.classes[groups[-1][0]]) == _key(c):
            groups[-1].append(ci)
        else:
            groups.append([ci])
    return groups


def _key(c: _Class) -> tuple[float, int, int]:
    return (c.arrival, c.I, c.O)


def rank_relabel(fm: FlowModel, s: Schedule) -> Schedule:
    """``s`` with identical requests relabelled so that ranks follow completion order (F14;
    the relabelling of eq. 14)."""
    pos = fm.inst.index
    groups = [[pos[fm.classes[ci].ids[0]] for ci in g] for g in rank_groups(fm) if len(g) > 1]
    if not groups:
        return s
    return canonical(fm.inst, s, dominance=False, symmetry=groups, compact=False)


def _max_batch_work(fm: FlowModel, c: _Class) -> float:
    """An upper bound on one request's entry prices in one batch (model units)."""
    chain = float(c.price[np.isin(c.kind, (START, EVREFILL))].max(initial=0.0)) + \
        float(c.price[c.kind == STEP].sum())
    rem = 0.0 if fm.rem is None else fm.rem.delta * (c.I + c.O - 1) ** 2  # F2c remainder
    return (max(chain, float(c.price[np.isin(c.kind, (CHUNK, DECODE))].max(initial=0.0)))
            + rem) * fm.scale


def add_rank_objective(fm: FlowModel) -> None:
    """(F14) ``sum_j Delta_j u_j`` with ``u_j = sum_q d[j,q]`` and, offline,
    ``Delta_j = t_j = (k0 + kpb) y_j + sum_q P[j,q]``:

    ``(k0 + kpb) sum_{j,q} d[j,q] + sum_q own_q sum_j P[j,q] + sum_{(q',q)} sum_j v[j,(q',q)]``
    (+ ``sum z`` online), because ``y_j d[j,q] = d[j,q]`` (an unfinished request needs a
    batch), a request works only while unfinished (``P[j,q] d[j,q] = P[j,q]``), and an identical
    request ranked after ``q'`` is unfinished whenever ``q'`` works. The remaining products
    ``v >= P[j,q'] - Pbar_{q'} (1 - d[j,q])`` use the small bound ``Pbar`` on one request's
    work in one batch instead of F11's bound on a whole batch."""
    m, J, sc, k = fm.model, fm.J, fm.scale, fm.k
    N = len(fm.classes)
    d = m.add_vars("rank_d", (J, N), lb=0.0, ub=1.0)
    P = m.add_vars("rank_P", (J, N), lb=0.0)
    jj = np.arange(J)
    for q, c in enumerate(fm.classes):
        fin = np.flatnonzero(c.finishes)
        # d[j,q] + sum_{l<j} finishing(l) = 1
        rows = [jj] + [np.full(l * fin.size, l) for l in range(1, J)]
        cols = [d[:, q]] + [fm.f[q][:l, fin].ravel() for l in range(1, J)]
        m.add_constraints(np.concatenate(rows), np.concatenate(cols),
                          np.ones(sum(r.size for r in rows)), lo=1.0, hi=1.0, name=f"rank_u{q}")
        sel = np.flatnonzero(c.price != 0)
        rows, cols, vals = [np.repeat(jj, sel.size), jj], [fm.f[q][:, sel].ravel(), P[:, q]], \
            [np.tile(-c.price[sel] * sc, J), np.ones(J)]
        if fm.rem is not None:  # F2c: the request's remainder delta * r belongs to its work
            r = fm.rem.r[q]
            rows.append(np.repeat(jj, r.shape[1]))
            cols.append(r[:, :].ravel())
            vals.append(np.full(r.size, -fm.rem.delta * sc))
        m.add_constraints(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals),
                          lo=0.0, hi=0.0, name=f"rank_P{q}")
    groups = rank_groups(fm)
    rank_of = {ci: (gi, r) for gi, g in enumerate(groups) for r, ci in enumerate(g)}
    own = np.ones(N)
    for g in groups:
        for r, ci in enumerate(g):
            own[ci] += len(g) - 1 - r
            if r + 1 < len(g):  # rank order: d[j, g[r]] <= d[j, g[r+1]]
                m.add_constraints(np.repeat(jj, 2), np.stack([d[:, ci], d[:, g[r + 1]]], 1).ravel(),
                                  np.tile([1.0, -1.0], J), hi=0.0, name=f"rank_order{ci}")
    pairs = [(w, q) for w in range(N) for q in range(N) if w != q and not (
        rank_of[w][0] == rank_of[q][0] and rank_of[q][1] > rank_of[w][1])]
    v = None
    obj_cols = [d[:, :].ravel(), P[:, :].ravel()]
    extra: list[tuple[milp.VarBlock, milp.VarBlock]] = []  # (ind AND d, ind)
    if bool((fm.inst.output == 1).all()):  # every entry a prefill entry: ap_j = y_j, ad_j = 0
        obj_vals = [np.full(J * N, (k["k0"] + k["kpb"]) * sc), np.tile(own, J)]
    else:  # k0 y_j d = k0 d; kpb ap_j d and kdb ad_j d by exact products of binaries
        obj_vals = [np.full(J * N, k["k0"] * sc), np.tile(own, J)]
        for ind, coef, nm in ((fm.ap, k["kpb"], "ap"), (fm.ad, k["kdb"], "ad")):
            if coef <= 0:
                continue
            e = m.add_vars(f"rank_{nm}d", (J, N), lb=0.0)
            R = np.arange(J * N)
            m.add_constraints(np.repeat(R, 3), np.stack([
                e[:, :].ravel(), np.repeat(ind[:], N), d[:, :].ravel()], 1).ravel(),
                np.tile([1.0, -1.0, -1.0], R.size), lo=-1.0, name=f"rank_{nm}d")
            obj_cols.append(e[:, :].ravel())
            obj_vals.append(np.full(R.size, coef * sc))
            extra.append((e, ind))
    if pairs:
        v = m.add_vars("rank_v", (J, len(pairs)), lb=0.0)
        R = np.arange(J * len(pairs))
        wq = np.array(pairs)
        pbar = np.array([_max_batch_work(fm, fm.classes[w]) for w, _ in pairs])
        m.add_constraints(np.repeat(R, 3), np.stack([
            v[:, :].ravel(), P[:, :][:, wq[:, 0]].ravel(), d[:, :][:, wq[:, 1]].ravel()], 1).ravel(),
            np.stack([np.ones(R.size), -np.ones(R.size), -np.tile(pbar, J)], 1).ravel(),
            lo=-np.tile(pbar, J), name="rank_v")
        obj_cols.append(v[:, :].ravel())
        obj_vals.append(np.ones(R.size))
    z = None
    if fm.online:
        A = max(c.arrival for c in fm.classes) * sc
        _idle_rows(fm, A)
        z = m.add_vars("rank_z", (J, N), lb=0.0)
        R = np.arange(J * N)
        jq = np.repeat(jj, N)
        prev = np.r_[-1, fm.end[:-1]][jq]
        first = jq == 0
        m.add_constraints(np.concatenate([np.repeat(R, 3), R[~first]]),
                          np.concatenate([np.stack([z[:, :].ravel(), fm.start[jq],
                                                    d[:, :].ravel()], 1).ravel(), prev[~first]]),
                          np.concatenate([np.tile([1.0, -1.0, -A], R.size),
                                          np.ones(int((~first).sum()))]),
                          lo=-A, name="rank_z")
        obj_cols.append(z[:, :].ravel())
        obj_vals.append(np.ones(R.size))
    weight = 1.0 / N if fm.objective == Objective.MEAN_TTFT else 1.0
    const = -weight * sum(c.arrival for c in fm.classes) * sc
    cols_all = np.concatenate(obj_cols)
    vals_all = np.concatenate(obj_vals) * weight
    fm.obj_terms = (cols_all, vals_all, const)
    m.set_objective(cols_all, vals_all, constant=const)
    fm.rank = RankForm(d, P, v, pairs, z, own, extra)


def fill_rank(fm: FlowModel, x: np.ndarray, counts: list[np.ndarray]) -> None:
    """The F14 columns of an encoded point (``d``, ``P``, exact products ``v``, ``z``)."""
    rf = fm.rank
    assert rf is not None
    J, N = fm.J, len(fm.classes)
    d = np.zeros((J, N))
    P = np.zeros((J, N))
    for q, c in enumerate(fm.classes):
        fin = counts[q][:, c.finishes].sum(1)
        d[:, q] = 1.0 - np.concatenate([[0.0], np.cumsum(fin)[:-1]])
        P[:, q] = counts[q] @ (c.price * fm.scale)
        if fm.rem is not None:  # F2c: read back the remainder columns the flow model filled
            P[:, q] += fm.rem.delta * fm.scale * x[fm.rem.r[q][:, :]].sum(1)
    x[rf.d[:, :].ravel()] = d.ravel()
    x[rf.P[:, :].ravel()] = P.ravel()
    if rf.v is not None:
        wq = np.array(rf.pairs)
        x[rf.v[:, :].ravel()] = (P[:, wq[:, 0]] * d[:, wq[:, 1]]).ravel()
    for e, ind in rf.phase:
        x[e[:, :].ravel()] = (x[ind[:]][:, None] * d).ravel()
    if rf.z is not None:
        end = x[fm.end[:]]
        idle = x[fm.start[:]] - np.r_[0.0, end[:-1]]
        x[rf.z[:, :].ravel()] = (idle[:, None] * d).ravel()


# ------------------------------------------------------------------------- eq. F15
def whole_prefills_apply(inst: Instance, objective: str) -> bool:
    """Eq. F15's conditions: a latency objective, every ``O = 1``, one common arrival, and
    eq. G1's conditions on the limits and cost (:func:`.fill.merging_never_hurts`)."""
    if not rank_form_applies(inst, objective) or not bool((inst.output == 1).all()) or \
            np.ptp(inst.arrival) > 0:
        return False
    return merging_never_hurts(inst) is None


def whole_prefill_class(ids, I: int, O: int, arrival: float, k: dict[str, float],
                        limits) -> _Class:
    """(F15) a class whose requests (``O = 1``) are prefilled in one entry: states ``W(0)``
    and ``F``, arcs idle, idle and the whole prefill ``W(0) -> F`` (``I`` tokens, KV
    ``fp(I)``, price ``kpr + k1 I + kpq I^2``)."""
    if O != 1:
        raise ValueError("whole-prefill classes need O = 1")
    states = [("W", 0, 0), ("F", O, 0)]
    return _Class(list(ids), I, O, arrival, states, {s: i for i, s in enumerate(states)}, {},
                  np.array([0, 1, 0]), np.array([0, 1, 1]), np.array([IDLE, IDLE, CHUNK]),
                  np.array([0, 0, I]), np.array([0.0, 0.0, chunk_price(k, 0, I)]),
                  np.array([0, 0, limits.kv_footprint(I)], np.int64),
                  np.array([False, False, True]))


def whole_prefills(inst: Instance, s: Schedule) -> Schedule:
    """(F15) ``s`` (a schedule of an instance with every ``O = 1``) with each request's
    prefill moved whole into the batch that completes it. This is eq. G1's merge
    (:func:`.fill.merge_prefills`) for ``O = 1``, where each request has one prefill segment;
    under :func:`whole_prefills_apply` it is feasible and no worse (formulations/infermax.md
    F15, G1)."""
    return merge_prefills(inst, s)
