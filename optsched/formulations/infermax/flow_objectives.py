"""InferMax flow model: the latency objectives (``formulations/infermax.md`` section 11).

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

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from ...instance import Instance
from ...schedule import Schedule, ScheduleBuilder
from ...solve_types import WarmStart
from ..base import Hypotheses, RawSolution

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .flow import FlowModel, _Class

#: the objectives priced by eq. F11
LATENCY_OBJECTIVES = ("total-latency", "mean-ttft")


# ------------------------------------------------------------------------- eq. F11
def counted_arcs(c: _Class, objective: str) -> np.ndarray:
    """The arcs whose batch ends the counted event: completion (total latency) or the first
    token (mean TTFT: an arc out of level ``g = 0`` into ``R(1)``, or into ``F`` when ``O = 1``)."""
    if objective == "total-latency":
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
    from .flow import CHUNK, DECODE, EVREFILL, START, STEP
    from .flow_remainder import max_remainder

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
    objective ``weight * (sum w - sum_i a_i)`` (``weight = 1/N`` for mean TTFT)."""
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
    weight = 1.0 / N if fm.objective == "mean-ttft" else 1.0
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
    """The F11 columns ``d = [u_j >= q]``, ``w = d Delta_j`` of an encoded point."""
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
    return objective == "mean-ttft" and not hyp.no_evictions


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
    return WarmStart.of(reduced, first_token_prefix(inst, ws.schedule))


def lift(inst: Instance, raw: RawSolution) -> RawSolution:
    """The reduced instance's answer as an answer for ``inst`` (F12): same objective and bound,
    the schedule completed by :func:`complete`."""
    note = ("mean TTFT via the first-token reduction (formulations/infermax.md F12): requests "
            "leave the model after their first token; the schedule then evicts each one and "
            "finishes them one by one (that tail does not move any first token)")
    sched = None if raw.schedule is None else complete(inst, raw.schedule)
    return replace(raw, schedule=sched, notes=(note,) + tuple(raw.notes))
