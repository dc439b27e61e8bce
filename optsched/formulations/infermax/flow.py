"""InferMax, flow variant: identical requests aggregated on a per-batch state graph.

This module owns the flow model (:class:`FlowModel`, with its own ``encode``/``decode``),
its size estimate and when it applies.

``formulations/infermax.md`` section 9 (eqs. F1-F10). Every request of a *class* (equal
arrival, prompt ``I``, output ``O``) moves through the states of semantics section 3 under
the dominance restriction of eq. 13 (only caught-up requests are evicted):

* ``W(g)``  -- not resident, ``g`` tokens generated (``m = 0``), ``0 <= g < O``;
* ``P(g,m)`` -- partially (re)filled, ``1 <= m <= S - 2`` (``g >= 1``) or ``m <= I - 1``
  (``g = 0``), where ``S = I + g``;
* ``R(g)``  -- caught up, ``m = S - 1``, ``1 <= g < O`` (the next entry is a decode);
* ``F``     -- finished.

Integer variables ``f[k, j, a]`` count the requests of class ``k`` that take arc ``a`` in
batch ``j``. A chunk ``m -> m'`` (prefill entry with ``c = m' - m``) is a path through
*in-chunk* nodes ``Q(g, m+1) .. Q(g, m')``: a start arc priced ``kpr + kpl*m`` plus one
step per token priced ``k1 + kpq*((k+1)^2 - k^2)``. The steps telescope to
``k1*c + kpq*(m'^2 - m^2) = k1*c + kpq*c^2 + 2*kpq*c*m`` -- exactly the evaluator's price
when ``kpm = 2*kpq`` (every shipped preset; unit cost and the BLIS presets have
``kpq = kpm = 0``). For any other ``kpm`` (every fitted cost model) a chunk from
``m = 0`` is still priced exactly by the chain, and a chunk that continues a partial fill
gets direct arcs ``P(g, m) -> (g, m')`` priced exactly (F2b). Decode arcs
(``R(g) -> R(g+1)``) cost ``k1 + kdm*(S-1) + kdr``. So every arc has a *constant* price,
token count and KV footprint: the model has no
products at all, and memory, token and batch-size limits are constant-coefficient rows.

Batch indicators ``y, ap, ad`` (non-empty / has a prefill / has a decode) are exact both
ways; ``t_j = k0 y + kpb ap + kdb ad + sum_a price_a f_a``. Offline makespan is
``sum_j t_j``; with arrivals, ``start_j >= end_{j-1}``, ``start_j >= a_k act_kj``. Offline
total latency is ``sum_j t_j u_j`` (``u_j`` requests unfinished before batch ``j``), exact
through ``d[j,q] = [u_j >= q]`` (eq. F10); online total latency and mean TTFT generalise it
(eqs. F11-F13, :mod:`.flow_objectives`).

Exactness: decode turns counts back into request ids (requests of a class in the same
state are interchangeable, and a chunk's remaining cost does not depend on where it
started), the schedule is replayed by ``evaluate``, and the model objective is recomputed
at the re-encoded point.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ... import milp
from ...cost import LinearCost, UnitCost
from ...evaluation import evaluate
from ...instance import Instance, Limits
from ...schedule import Schedule, ScheduleBuilder
from ...solve_types import Objective
from ..base import BuiltModel, FormulationError, Hypotheses
from .arcs import (
    CHUNK,
    DECODE,
    END,
    ENTRY_KINDS,
    EVICT,
    EVREFILL,
    IDLE,
    KIND_NAMES,
    LAYER_IN_KINDS,
    PREFILL_KINDS,
    PREFILL_TOKEN_KINDS,
    START,
    STEP,
    _Class,
    chunk_price,
)
from .flow_objectives import (
    LATENCY_OBJECTIVES,
    RankForm,
    add_latency_objective,
    fill_latency,
    rank_relabel,
    whole_prefill_class,
)
from .flow_remainder import add_remainder
from .replay import Move, folded_batches


def applicable(inst: Instance, objective: str, hyp: Hypotheses) -> str | None:
    """None if the flow variant can model this case exactly, else the reason it cannot."""
    if objective not in (Objective.MAKESPAN, Objective.TOTAL_LATENCY, Objective.MEAN_TTFT):
        return f"flow variant does not model objective {objective!r}"
    if hyp.force or hyp.forbid or hyp.order:
        return "flow variant does not support force/forbid/order hypotheses"
    cm = inst.cost_model
    if not isinstance(cm, (LinearCost, UnitCost)):
        return f"flow variant does not know cost model {type(cm).__name__}"
    return None


def _coef(cm) -> dict[str, float]:
    if isinstance(cm, UnitCost):
        return dict(k0=1.0, k1=0.0, kpq=0.0, kpm=0.0, kpl=0.0, kpr=0.0, kdm=0.0, kdr=0.0, kpb=0.0,
                    kdb=0.0)
    return dict(k0=cm.k0, k1=cm.k1, kpq=cm.kpq, kpm=cm.kpm, kpl=cm.kpl, kpr=cm.kpr, kdm=cm.kdm,
                kdr=cm.kdr, kpb=cm.kpb, kdb=cm.kdb)


def telescopes(cm) -> bool:
    """True when ``kpm = 2 kpq`` (F2): a chunk's price telescopes along the token chain from
    any start ``m``; otherwise only chunks from ``m = 0`` do, and chunks that continue a
    partial fill (``m >= 1``) get direct arcs priced exactly (F2b)."""
    k = _coef(cm)
    return abs(k["kpm"] - 2 * k["kpq"]) <= 1e-12 * max(1.0, abs(k["kpm"]), abs(k["kpq"]))


def split_remainder(cm) -> float | None:
    """F2c: ``delta = kpq - kpm/2`` when ``0 <= kpm < 2 kpq`` (every fitted cost model so far),
    else None. Chunks that continue a partial fill then run on a chain priced with
    ``kpq' = kpm/2`` (which telescopes) plus the convex remainder ``delta c^2``."""
    if not isinstance(cm, LinearCost) or telescopes(cm):
        return None
    delta = cm.kpq - cm.kpm / 2
    return delta if cm.kpm >= 0 and delta > 1e-12 * cm.kpq else None


def _build_class(ids, I, O, arrival, k, limits: Limits, allow_evict: bool,
                 chain_continues: bool = True, split_kpq: float | None = None) -> _Class:
    """The arcs of one class (F1); ``chain_continues=False`` gives chunks that continue a
    partial fill direct arcs ``P(g, m) -> (g, m')`` priced exactly (F2b) instead of the
    token chain; ``split_kpq = kpq'`` runs them on a second chain priced with ``kpq'`` instead
    (F2c: their remainder ``(kpq - kpq') c^2`` is priced by :mod:`.flow_remainder`)."""
    fp = limits.kv_footprint
    U = I + O - 1
    states: list[tuple[str, int, int]] = []
    for g in range(O):
        S = I + g
        states.append(("W", g, 0))
        top = S - 2 if g >= 1 else I - 1
        for m in range(1, top + 1):
            states.append(("P", g, m))
        if g >= 1:
            states.append(("R", g, S - 1))
    states.append(("F", O, 0))
    sidx = {s: i for i, s in enumerate(states)}
    qidx: dict[tuple[int, int], int] = {}
    for g in range(O):
        for kk in range(1, I + g + 1):
            qidx[(g, kk)] = len(states) + len(qidx)
    qidx_b: dict[tuple[int, int], int] = {}
    if split_kpq is not None:  # F2c: a start from m >= 1 enters at k = m + 1 >= 2
        for g in range(O):
            if (I + g - 2 if g >= 1 else I - 1) < 1:  # no partial state P(g, m) at this level
                continue
            for kk in range(2, I + g + 1):
                qidx_b[(g, kk)] = len(states) + len(qidx) + len(qidx_b)
    src, dst, kind, tok, price, kv, fin, lvl = [], [], [], [], [], [], [], []

    def arc(a, b, kd, t, p, kvv, f=False, level=-1):
        src.append(a), dst.append(b), kind.append(kd), tok.append(t), price.append(p)
        kv.append(kvv), fin.append(f), lvl.append(level)

    def state_after(g, mm):
        """Layer node reached with m = mm at level g (no token generated)."""
        S = I + g
        if g >= 1 and mm == S - 1:
            return sidx[("R", g, S - 1)]
        return sidx[("P", g, mm)]

    def generated(g):
        """Node (and KV) after generating token g+1."""
        if g + 1 == O:
            return sidx[("F", O, 0)], fp(U), True
        return sidx[("R", g + 1, I + g)], fp(I + g), False

    for si, (kd_, g, m) in enumerate(states):
        S = I + g
        kv_here = fp(m) if kd_ in ("P", "R") else 0
        arc(si, si, IDLE, 0, 0.0, kv_here)
        if kd_ == "W" or (kd_ == "P" and chain_continues):
            arc(si, qidx[(g, m + 1)], START, 1,
                k["kpr"] + k["kpl"] * m + k["k1"] + k["kpq"] * (2 * m + 1), 0)
        elif kd_ == "P" and split_kpq is not None:  # F2c: the continuing chain
            arc(si, qidx_b[(g, m + 1)], START, 1,
                k["kpr"] + k["kpl"] * m + k["k1"] + split_kpq * (2 * m + 1), 0, level=g)
        elif kd_ == "P":  # F2b: one arc per chunk end m2, priced exactly
            for m2 in range(m + 1, S + 1):
                if m2 < S:
                    arc(si, state_after(g, m2), CHUNK, m2 - m, chunk_price(k, m, m2 - m), fp(m2))
                else:
                    nxt, kvn, f = generated(g)
                    arc(si, nxt, CHUNK, m2 - m, chunk_price(k, m, m2 - m), kvn, f)
        elif kd_ == "R":
            nxt, kvn, f = generated(g)
            arc(si, nxt, DECODE, 1, k["k1"] + k["kdm"] * (S - 1) + k["kdr"], kvn, f)
            if allow_evict:
                arc(si, sidx[("W", g, 0)], EVICT, 0, 0.0, 0)
                # evict in a zero-time eviction-only batch, then start a refill chunk here
                arc(si, qidx[(g, 1)], EVREFILL, 1, k["kpr"] + k["k1"] + k["kpq"], 0)
    for (g, kk), qi in qidx.items():
        S = I + g
        if kk < S:
            arc(qi, qidx[(g, kk + 1)], STEP, 1, k["k1"] + k["kpq"] * (2 * kk + 1), 0)
            arc(qi, state_after(g, kk), END, 0, 0.0, fp(kk))
        else:  # kk == S: the chunk completes the (re)fill and generates a token
            nxt, kvn, f = generated(g)
            arc(qi, nxt, END, 0, 0.0, kvn, f)
    for (g, kk), qi in qidx_b.items():  # F2c: the same steps and ends, priced with kpq'
        assert split_kpq is not None
        S = I + g
        if kk < S:
            arc(qi, qidx_b[(g, kk + 1)], STEP, 1, k["k1"] + split_kpq * (2 * kk + 1), 0, level=g)
            arc(qi, state_after(g, kk), END, 0, 0.0, fp(kk))
        else:
            nxt, kvn, f = generated(g)
            arc(qi, nxt, END, 0, 0.0, kvn, f)
    return _Class(list(ids), I, O, arrival, states, sidx, qidx,
                  np.array(src), np.array(dst), np.array(kind), np.array(tok),
                  np.array(price, float), np.array(kv, np.int64), np.array(fin, bool),
                  qidx_b, np.array(lvl, np.int64))


def _ones(c: _Class) -> np.ndarray:
    """Weight 1 for every arc of class ``c``."""
    return np.ones(c.src.size)


def _flow_node(c: _Class, g: int, m: int) -> int:
    """The layer state of ``(g, m)`` in class ``c``: finished F, waiting W, decoding R (``m =
    I + g - 1``) or partly prefilled P (section 9)."""
    if g >= c.O:
        return c.sidx[("F", c.O, 0)]
    if m == 0:
        return c.sidx[("W", g, 0)]
    if g >= 1 and m == c.I + g - 1:
        return c.sidx[("R", g, m)]
    return c.sidx[("P", g, m)]


def classes_of(inst: Instance, per_request: bool = False
               ) -> list[tuple[list[str], int, int, float]]:
    """Classes of identical requests (equal arrival, prompt, output), or with ``per_request``
    one class per request (identical ones consecutive, in instance order: eq. F14's ranks)."""
    groups: dict[tuple[float, int, int], list[str]] = {}
    for r in inst.requests:
        groups.setdefault((r.arrival, r.prompt, r.output), []).append(r.id)
    if per_request:
        return [([r], I, O, a) for (a, I, O), ids in sorted(groups.items()) for r in ids]
    return [(ids, I, O, a) for (a, I, O), ids in sorted(groups.items())]


def size_estimate(inst: Instance, J: int, per_request: bool = False,
                  whole_prefills: bool = False) -> int:
    """Number of arc variables the flow model would have with ``J`` batches."""
    if whole_prefills:  # eq. F15: idle W, idle F, one whole-prefill arc per class
        return 3 * len(classes_of(inst, per_request)) * J
    tot = 0
    split = split_remainder(inst.cost_model) is not None
    direct = not telescopes(inst.cost_model) and not split
    for _, I, O, _ in classes_of(inst, per_request):
        per = sum(3 * (I + g) + 4 for g in range(O))
        if split:  # F2c: the continuing chain's steps and ends
            per += sum(2 * (I + g) for g in range(O))
        if direct:  # F2b: sum over partial states P(g, m) of the chunk ends m + 1 .. S
            for g in range(O):
                S, top = I + g, (I + g - 2 if g >= 1 else I - 1)
                per += sum(S - m for m in range(1, top + 1))
        tot += per
    return tot * J


class FlowModel:
    """The built model plus encode/decode (``formulations/infermax.md`` section 9)."""

    #: F2c: the remainder columns and the coefficient ``delta`` (None unless ``0 <= kpm < 2 kpq``;
    #: class-level defaults, so subclasses with their own ``__init__`` need not set them)
    rem: Any = None
    delta: float | None = None

    #: the objective as (columns, coefficients, constant), for the F7 cut
    obj_terms: tuple[np.ndarray, np.ndarray, float]
    #: eqs. F10-F11 (latency objectives): d[j,q] = [u_j >= q], w[j,q] = d Delta_j, T >= Delta_j
    d: milp.VarBlock
    w: milp.VarBlock
    T: float
    #: eq. F14's columns when it prices the objective
    rank: RankForm | None = None
    #: one class per request, identical ones in rank order (eq. F14; subclasses may leave it)
    per_request: bool = False

    def __init__(self, inst: Instance, J: int, hyp: Hypotheses, ub: float | None,
                 objective: str = "makespan", restricted: bool = True,
                 per_request: bool = False, whole_prefills: bool = False):
        self.inst = inst
        self.J = J
        #: optimal only among schedules with at most J batches with entries (set by ``run``)
        self.restricted = restricted
        self.objective = objective
        cm = inst.cost_model
        self.k = _coef(cm)
        one = cm.batch_time([1], [0], [False])
        self.scale = 1.0 / one if one > 0 else 1.0
        self.chain_continues = telescopes(cm)
        #: F2c remainder coefficient (None: the chain telescopes, or F2b direct arcs)
        self.delta = split_remainder(cm)
        split_kpq = None if self.delta is None else self.k["kpm"] / 2
        self.classes = [whole_prefill_class(ids, I, O, a, self.k, inst.limits) if whole_prefills
                        else _build_class(ids, I, O, a, self.k, inst.limits, not hyp.no_evictions,
                                          self.chain_continues, split_kpq)
                        for ids, I, O, a in classes_of(inst, per_request)]
        #: one class per request, identical ones in rank order (eq. F14)
        self.per_request = per_request
        self.online = any(c.arrival > 0 for c in self.classes)
        self.model = milp.Model("infermax_flow")
        self._add_variables()
        self.rem = None
        if self.delta is not None:
            self.rem = add_remainder(self, self.delta)
        for ci, c in enumerate(self.classes):
            self._conservation(ci, c)
        self._limits()
        self._cardinality_cuts()
        self._pair_covers()
        self._indicators()
        self._batch_order()
        self._time()
        if self.online:
            self._online_clock()
        if objective in LATENCY_OBJECTIVES:  # eqs. F10-F11
            add_latency_objective(self)
        else:
            cols = np.asarray([self.end[J - 1]] if self.online else self.t[:])
            self.obj_terms = (cols, np.ones(cols.size), 0.0)
            self.model.set_objective(cols, np.ones(cols.size))
        if ub is not None:
            self._upper_bound_cut(ub)

    def _add_variables(self) -> None:
        """(F1) arc counts ``f[k][j, a]`` per class, (F3) indicators ``y, ap, ad``, (F5) ``t``."""
        m, J = self.model, self.J
        self.f = [m.add_vars(f"f{ci}", (J, c.src.size), lb=0, ub=c.n, vtype="I")
                  for ci, c in enumerate(self.classes)]
        self.y = m.add_vars("y", (J,), vtype="B")
        self.ap = m.add_vars("ap", (J,), vtype="B")
        self.ad = m.add_vars("ad", (J,), vtype="B")
        self.t = m.add_vars("t", (J,), lb=0.0)

    def _conservation(self, ci: int, c: _Class) -> None:
        """(F1) flow conservation of class ``ci``: out of a layer state in batch ``j`` equals
        into it in batch ``j - 1``, chunk nodes pass their flow on; everyone waits at ``W(0)``
        before batch 0 and has finished after the last batch."""
        f, J = self.f[ci], self.J
        nS = len(c.states)
        layer_in = np.isin(c.kind, LAYER_IN_KINDS) & (c.dst < nS)
        out_mask, qin, qout = c.src < nS, c.dst >= nS, c.src >= nS
        rows, cols, vals = [], [], []
        for j in range(J):
            base = j * c.n_nodes
            rows.append(base + c.src[out_mask])  # out-arcs of layer states
            cols.append(f[j, np.flatnonzero(out_mask)])
            vals.append(np.ones(out_mask.sum()))
            if j >= 1:
                rows.append(base + c.dst[layer_in])
                cols.append(f[j - 1, np.flatnonzero(layer_in)])
                vals.append(-np.ones(layer_in.sum()))
            rows.append(base + c.dst[qin])  # chunk nodes: in - out == 0
            cols.append(f[j, np.flatnonzero(qin)])
            vals.append(np.ones(qin.sum()))
            rows.append(base + c.src[qout])
            cols.append(f[j, np.flatnonzero(qout)])
            vals.append(-np.ones(qout.sum()))
        rhs = np.zeros(J * c.n_nodes)
        rhs[c.sidx[("W", 0, 0)]] = c.n  # batch 0: everyone waits at W(0)
        self.model.add_constraints(np.concatenate(rows), np.concatenate(cols),
                                   np.concatenate(vals), lo=rhs, hi=rhs, name=f"flow{ci}")
        into_f = np.flatnonzero(layer_in & (c.dst == c.sidx[("F", c.O, 0)]))
        self.model.add_constraint(f[J - 1, into_f], np.ones(into_f.size), lo=c.n, hi=c.n,
                                  name=f"done{ci}")

    def _per_batch(self, mask_fn: Callable[[_Class], np.ndarray],
                   weight_fn: Callable[[_Class], np.ndarray]
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """COO terms of one row per batch: ``sum weight_a f_a`` over the arcs ``mask_fn``
        selects in every class."""
        rows, cols, vals = [], [], []
        jj = np.arange(self.J)
        for ci, c in enumerate(self.classes):
            sel = np.flatnonzero(mask_fn(c))
            if sel.size == 0:
                continue
            rows.append(np.repeat(jj, sel.size))
            cols.append(self.f[ci][:, sel].ravel())
            vals.append(np.tile(weight_fn(c)[sel], self.J))
        if not rows:
            return np.zeros(0, int), np.zeros(0, int), np.zeros(0)
        return np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)

    def _with_indicator(self, terms: tuple[np.ndarray, np.ndarray, np.ndarray],
                        ind: milp.VarBlock, coef: float
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-batch row terms (:meth:`_per_batch`) plus ``coef * ind_j`` in row ``j``."""
        r, cc, v = terms
        return (np.concatenate([r, np.arange(self.J)]), np.concatenate([cc, ind[:]]),
                np.concatenate([v, np.full(self.J, coef)]))

    def _limits(self) -> None:
        """(F4) tokens ``<= C``, prefill tokens ``<= P``, entries ``<= max_batch_size``, KV after
        the batch ``sum kv_a f_a <= M y_j``."""
        m, lim = self.model, self.inst.limits
        r, cc, v = self._per_batch(lambda c: c.tokens > 0, lambda c: c.tokens.astype(float))
        m.add_constraints(r, cc, v, hi=float(lim.max_batch_tokens), name="C")
        if lim.max_prefill_tokens is not None:
            r, cc, v = self._per_batch(lambda c: np.isin(c.kind, PREFILL_TOKEN_KINDS),
                                       lambda c: c.tokens.astype(float))
            m.add_constraints(r, cc, v, hi=float(lim.max_prefill_tokens), name="P")
        if lim.max_batch_size is not None:
            r, cc, v = self._per_batch(lambda c: np.isin(c.kind, ENTRY_KINDS), _ones)
            m.add_constraints(r, cc, v, hi=float(lim.max_batch_size), name="size")
        r, cc, v = self._with_indicator(
            self._per_batch(lambda c: c.kv > 0, lambda c: c.kv.astype(float)), self.y,
            -float(lim.kv_capacity))
        m.add_constraints(r, cc, v, hi=0.0, name="M")

    def _cardinality_cuts(self) -> None:
        """(F4b) at most ``q`` requests can each hold more than ``M/(q+1)`` KV after a batch
        (``q+1`` of them would exceed ``M``): ``<= q y_j``, and lifted onto the phase
        indicators, chunk ends ``<= q ap_j`` and decode arcs ``<= q ad_j``."""
        M = self.inst.limits.kv_capacity
        ntot = sum(c.n for c in self.classes)
        kvmax = max(int(c.kv.max()) for c in self.classes)
        for q in range(1, ntot + 1):
            v_q = M // (q + 1) + 1 if q < ntot else 1
            if v_q > kvmax:
                continue
            for ind, mask, nm in (
                (self.y, lambda c, v_q=v_q: c.kv >= v_q, "card"),
                (self.ap, lambda c, v_q=v_q: np.isin(c.kind, (END, CHUNK)) & (c.kv >= v_q), "cardp"),
                (self.ad, lambda c, v_q=v_q: (c.kind == DECODE) & (c.kv >= v_q), "cardd"),
            ):
                if q == ntot and nm == "card":
                    continue
                terms = self._per_batch(mask, _ones)
                if terms[0].size == 0:
                    continue
                r, cc, v = self._with_indicator(terms, ind, -float(q))
                self.model.add_constraints(r, cc, v, hi=0.0, name=f"{nm}{q}")

    def _pair_covers(self) -> None:
        """(F4c) with ``2b > M``, a request holding ``>= b`` KV ("big") excludes every other
        holding ``>= lo = max(M - b + 1, M//3 + 1)`` ("medium"), and three mediums exceed
        ``M``: ``2 #big + #medium <= 2 y_j``."""
        M = self.inst.limits.kv_capacity
        kvs = sorted({int(v) for c in self.classes for v in c.kv if v > M // 2})
        for big in kvs:
            medium = max(M - big + 1, M // 3 + 1)

            def weight(c: _Class, big: int = big, medium: int = medium) -> np.ndarray:
                return np.where(c.kv >= big, 2.0, np.where(c.kv >= medium, 1.0, 0.0))

            terms = self._per_batch(lambda c: weight(c) > 0, weight)
            if terms[0].size == 0:
                continue
            r, cc, v = self._with_indicator(terms, self.y, -2.0)
            self.model.add_constraints(r, cc, v, hi=0.0, name=f"pair{big}")

    def _indicators(self) -> None:
        """(F3b) ``ap_j + ad_j >= y_j``; (F3) ``y, ap, ad`` exact both ways: ``ind >= f_a / n_k``
        for each arc and ``ind <= sum f``."""
        m, J = self.model, self.J
        jj = np.arange(J)
        m.add_constraints(np.repeat(jj, 3), np.stack([self.ap[:], self.ad[:], self.y[:]], 1).ravel(),
                          np.tile([1.0, 1.0, -1.0], J), lo=0.0, name="phase")
        for ind, arc_mask in ((self.y, lambda c: np.isin(c.kind, ENTRY_KINDS)),
                              (self.ap, lambda c: np.isin(c.kind, PREFILL_KINDS)),
                              (self.ad, lambda c: c.kind == DECODE)):
            for ci, c in enumerate(self.classes):
                sel = np.flatnonzero(arc_mask(c))
                if sel.size == 0:
                    continue
                R = np.arange(J * sel.size)
                m.add_constraints(np.concatenate([R, R]),
                                  np.concatenate([self.f[ci][:, sel].ravel(), np.repeat(ind[:], sel.size)]),
                                  np.concatenate([np.full(R.size, 1.0 / c.n), np.full(R.size, -1.0)]),
                                  hi=0.0, name=f"{ind.name}_lb{ci}")
            r, cc, v = self._with_indicator(self._per_batch(arc_mask, _ones), ind, -1.0)
            m.add_constraints(r, cc, v, lo=0.0, name=f"{ind.name}_ub")

    def _batch_order(self) -> None:
        """(F3) evict arcs only in batches with an entry (an eviction-only batch folds into the
        next), and used batches first (``y_j >= y_{j+1}``)."""
        m, J = self.model, self.J
        for ci, c in enumerate(self.classes):
            sel = np.flatnonzero(c.kind == EVICT)
            if sel.size:
                R = np.arange(J * sel.size)
                m.add_constraints(np.concatenate([R, R]),
                                  np.concatenate([self.f[ci][:, sel].ravel(),
                                                  np.repeat(self.y[:], sel.size)]),
                                  np.concatenate([np.ones(R.size), np.full(R.size, -float(c.n))]),
                                  hi=0.0, name=f"evict_y{ci}")
        if J > 1:
            m.add_constraints(np.repeat(np.arange(J - 1), 2),
                              np.stack([self.y[1:], self.y[:-1]], 1).ravel(),
                              np.tile([1.0, -1.0], J - 1), hi=0.0, name="contig")

    def _time(self) -> None:
        """(F5) ``t_j = k0 y_j + kpb ap_j + kdb ad_j + sum_a price_a f_a`` (model units)."""
        k, sc, J = self.k, self.scale, self.J
        jj = np.arange(J)
        r, cc, v = self._per_batch(lambda c: c.price != 0, lambda c: c.price * sc)
        if self.rem is not None:  # F2c: + delta * (remainder columns) of the batch
            r, cc, v = (np.concatenate([a, b]) for a, b in zip((r, cc, v), self.rem.time_terms()))
        r = np.concatenate([r, jj, jj, jj, jj])
        cc = np.concatenate([cc, self.y[:], self.ap[:], self.ad[:], self.t[:]])
        v = np.concatenate([v, np.full(J, k["k0"] * sc), np.full(J, k["kpb"] * sc),
                            np.full(J, k["kdb"] * sc), -np.ones(J)])
        self.model.add_constraints(r, cc, v, lo=0.0, hi=0.0, name="time")

    def _online_clock(self) -> None:
        """(F5) online: ``end_j = start_j + t_j``, ``start_j >= end_{j-1}``, ``start_j >= a_k
        act_kj`` with a binary ``act_kj >= f_a / n_k`` for every non-idle arc of class ``k``
        (``f/n`` alone would let one request of a class of ``n`` start at ``a_k / n``)."""
        m, J, sc = self.model, self.J, self.scale
        jj = np.arange(J)
        self.start = m.add_vars("start", (J,), lb=0.0)
        self.end = m.add_vars("end", (J,), lb=0.0)
        m.add_constraints(np.repeat(jj, 3), np.stack([self.end[:], self.start[:], self.t[:]], 1).ravel(),
                          np.tile([1.0, -1.0, -1.0], J), lo=0.0, hi=0.0, name="end")
        if J > 1:
            m.add_constraints(np.repeat(np.arange(J - 1), 2),
                              np.stack([self.start[1:], self.end[:-1]], 1).ravel(),
                              np.tile([1.0, -1.0], J - 1), lo=0.0, name="seq")
        self.act = {}
        for ci, c in enumerate(self.classes):
            if c.arrival <= 0:
                continue
            act = self.act[ci] = m.add_vars(f"act{ci}", (J,), vtype="B")
            sel = np.flatnonzero(c.kind != IDLE)
            R = np.arange(J * sel.size)
            m.add_constraints(np.concatenate([R, R]),
                              np.concatenate([np.repeat(act[:], sel.size),
                                              self.f[ci][:, sel].ravel()]),
                              np.concatenate([np.ones(R.size), np.full(R.size, -1.0 / c.n)]),
                              lo=0.0, name=f"active{ci}")
            m.add_constraints(np.repeat(jj, 2), np.stack([self.start[:], act[:]], 1).ravel(),
                              np.tile([1.0, -c.arrival * sc], J), lo=0.0, name=f"arrive{ci}")

    def _upper_bound_cut(self, ub: float) -> None:
        """(F7) the objective is at most the warm start's ``UB``."""
        cols, coefs, const = self.obj_terms
        self.model.add_constraint(cols, coefs,
                                  hi=ub * self.scale * (1 + 1e-9) + 1e-9 - const, name="ub")

    # --------------------------------------------------------------- decode
    def decode(self, values: np.ndarray) -> Schedule:
        """Counts -> request ids, batch by batch (``formulations/infermax.md`` F9)."""
        J = self.J
        flows = [np.rint(self.model.value(f, values)).astype(int) for f in self.f]
        where: list[dict[int, list[str]]] = []  # per class: node -> list of ids
        for c in self.classes:
            w: dict[int, list[str]] = {i: [] for i in range(len(c.states))}
            w[c.sidx[("W", 0, 0)]] = sorted(c.ids)
            where.append(w)
        b = ScheduleBuilder(ids=self.inst.ids)
        pos = self.inst.index
        for j in range(J):
            entries: list[tuple[int, int]] = []
            evict: list[int] = []
            pre_evict: list[int] = []
            for ci, c in enumerate(self.classes):
                fl = flows[ci][j]
                nS = len(c.states)
                nxt: dict[int, list[str]] = {i: [] for i in range(nS)}
                chunk_start: dict[str, int] = {}
                at_q: dict[int, list[str]] = {}
                # arcs out of layer states
                for a in np.flatnonzero(fl > 0):
                    s = c.src[a]
                    if s >= nS:
                        continue
                    cnt = fl[a]
                    members = where[ci][s]
                    if len(members) < cnt:
                        raise FormulationError(f"flow decode: batch {j} class {ci}: {cnt} requests "
                                               f"leave a state holding {len(members)}")
                    take, where[ci][s] = members[:cnt], members[cnt:]
                    kd = c.kind[a]
                    _, g, m0 = c.states[s]
                    if kd == IDLE:
                        nxt[s] += take
                    elif kd in (DECODE, CHUNK):
                        entries += [(pos[r], int(c.tokens[a])) for r in take]
                        nxt[c.dst[a]] += take
                    elif kd == EVICT:
                        evict += [pos[r] for r in take]
                        nxt[c.dst[a]] += take
                    else:  # START or EVREFILL into a chunk node
                        for r in take:
                            chunk_start[r] = 0 if kd == EVREFILL else m0
                        if kd == EVREFILL:
                            pre_evict += [pos[r] for r in take]
                        at_q.setdefault(c.dst[a], []).extend(take)
                # walk chunk nodes in increasing token order
                qarcs: dict[int, list[Any]] = {}  # chunk node -> its arc indices (numpy ints)
                for a in np.flatnonzero((fl > 0) & (c.src >= nS)):
                    qarcs.setdefault(c.src[a], []).append(a)
                chain_nodes = list(c.qidx.items()) + list(c.qidx_b.items())
                for (g, kk), qi in sorted(chain_nodes, key=lambda t: (t[0][0], t[0][1])):
                    here = at_q.get(qi, [])
                    for a in sorted(qarcs.get(qi, []), key=lambda a: c.kind[a]):
                        cnt = fl[a]
                        if len(here) < cnt:
                            raise FormulationError(f"flow decode: batch {j}: chunk node ({g},{kk}) short")
                        take, here = here[:cnt], here[cnt:]
                        if c.kind[a] == STEP:
                            at_q.setdefault(c.dst[a], []).extend(take)
                        else:  # END
                            entries += [(pos[r], kk - chunk_start[r]) for r in take]
                            nxt[c.dst[a]] += take
                    if here:
                        raise FormulationError(f"flow decode: batch {j}: requests stuck in a chunk")
                for s in range(nS):
                    if where[ci][s]:
                        raise FormulationError(f"flow decode: batch {j}: unassigned requests")
                where[ci] = {s: sorted(v) for s, v in nxt.items()}
            if pre_evict:
                b.add_indexed([], [], pre_evict)
            if entries or evict:
                b.add_indexed([e[0] for e in entries], [e[1] for e in entries], evict)
        return b.build()

    # --------------------------------------------------------------- encode
    def encode(self, s: Schedule) -> np.ndarray:
        """Arc counts of a schedule (after folding eviction-only batches); raises if the
        schedule is not representable (an eviction of a request that has not caught up,
        or more batches with entries than ``J``)."""
        inst = self.inst
        ev = evaluate(inst, s)
        if not ev.feasible:
            raise FormulationError("flow encode: schedule is infeasible")
        if self.per_request:  # identical requests take their ranks in completion order (F14)
            s = rank_relabel(self, s)
        cls_of = {r: ci for ci, c in enumerate(self.classes) for r in c.ids}
        counts = [np.zeros((self.J, c.src.size), int) for c in self.classes]
        # F2c: sum of c^2 of the continuing chain's chunks per (batch, level)
        squares = [np.zeros((self.J, c.O)) for c in self.classes]
        arc_index = [{(c.src[a], c.dst[a], c.kind[a]): a for a in range(c.src.size)}
                     for c in self.classes]
        j = 0  # batches with entries so far
        for moves in folded_batches(inst, s, self.J, "flow"):
            for mv in moves:
                ci = cls_of[mv.rid]
                arcs, square = self._arcs(self.classes[ci], mv, j)
                if square:
                    squares[ci][j, mv.g] += square
                for key in arcs:
                    if key not in arc_index[ci]:
                        raise FormulationError(f"flow encode: request {mv.rid!r} batch {j}: no "
                                               f"arc {KIND_NAMES[key[2]]}")
                    counts[ci][j, arc_index[ci][key]] += 1
            j += 1
        # pad: finished requests idle in F
        for ci, c in enumerate(self.classes):
            fidx = arc_index[ci][(c.sidx[("F", c.O, 0)],) * 2 + (IDLE,)]
            for jj in range(j, self.J):
                counts[ci][jj, fidx] = c.n
        x = np.zeros(self.model.num_vars)
        for ci in range(len(self.classes)):
            x[self.f[ci][:, :].ravel()] = counts[ci].ravel()
        extra_t = None
        if self.rem is not None:
            extra_t = self.rem.fill(x, counts, squares)
        self._fill_batch_vars(x, counts, extra_t)
        return x

    def _arcs(self, c: _Class, mv: Move, j: int) -> tuple[list[tuple[int, int, int]], int]:
        """The arcs ``(from, to, kind)`` of request move ``mv`` in class ``c`` (F2-F2c, F15),
        and the ``c^2`` it adds to the continuing chain's F2c sum (0 off that chain)."""
        gg, m0, cnt = mv.g, mv.m, mv.tokens
        here = _flow_node(c, gg, m0)
        if not cnt:
            return [(here, c.sidx[("W", gg, 0)], EVICT) if mv.evicted else (here, here, IDLE)], 0
        S = c.I + gg
        square = 0
        if mv.evicted:  # pending eviction then processing: evict-refill chunk from 0
            m0 = 0
            first = (here, c.qidx[(gg, 1)], EVREFILL)
        elif gg >= 1 and m0 == S - 1:
            return [(here, _flow_node(c, gg + 1, S), DECODE)], 0
        elif (m0 >= 1 and not self.chain_continues and not c.qidx_b) or \
                (gg, m0 + 1) not in c.qidx:
            # F2b direct chunk arc, or F15's whole prefill (no chain: any other chunk is not
            # representable)
            try:
                return [(here, _flow_node(c, mv.g1, mv.m1), CHUNK)], 0
            except KeyError:
                raise FormulationError(f"flow encode: request {mv.rid!r} batch {j}: a partial "
                                       "chunk, but prefills are whole (F15)") from None
        elif m0 >= 1 and c.qidx_b:  # F2c: the continuing chain
            square = cnt * cnt
            first = (here, c.qidx_b[(gg, m0 + 1)], START)
        else:
            first = (here, c.qidx[(gg, m0 + 1)], START)
        chain = c.qidx_b if m0 >= 1 and c.qidx_b else c.qidx
        arcs = [first] + [(chain[(gg, k)], chain[(gg, k + 1)], STEP)
                          for k in range(m0 + 1, m0 + cnt)]
        arcs.append((chain[(gg, m0 + cnt)], _flow_node(c, mv.g1, mv.m1), END))
        return arcs, square

    def _fill_batch_vars(self, x: np.ndarray, counts, extra_t: np.ndarray | None = None) -> None:
        J = self.J
        ent = np.zeros(J)
        pre = np.zeros(J)
        dec = np.zeros(J)
        t = np.zeros(J)
        k = _coef(self.inst.cost_model)
        for ci, c in enumerate(self.classes):
            cnt = counts[ci]
            ent += cnt[:, np.isin(c.kind, ENTRY_KINDS)].sum(1)
            pre += cnt[:, np.isin(c.kind, PREFILL_KINDS)].sum(1)
            dec += cnt[:, c.kind == DECODE].sum(1)
            t += cnt @ (c.price * self.scale)
        y = (ent > 0).astype(float)
        ap = (pre > 0).astype(float)
        ad = (dec > 0).astype(float)
        t += (k["k0"] * y + k["kpb"] * ap + k["kdb"] * ad) * self.scale
        if extra_t is not None:  # F2c remainder (model units)
            t += extra_t
        x[self.y[:]] = y
        x[self.ap[:]] = ap
        x[self.ad[:]] = ad
        x[self.t[:]] = t
        if self.online:
            end_prev = 0.0
            arr_touch = np.zeros(J)
            for ci, c in enumerate(self.classes):
                act = counts[ci][:, c.kind != IDLE].sum(1) > 0
                if ci in self.act:
                    x[self.act[ci][:]] = act
                arr_touch = np.maximum(arr_touch, np.where(act, c.arrival * self.scale, 0.0))
            st = np.zeros(J)
            en = np.zeros(J)
            for j in range(J):
                st[j] = max(end_prev, arr_touch[j])
                en[j] = st[j] + t[j]
                end_prev = en[j]
            x[self.start[:]] = st
            x[self.end[:]] = en
        if self.objective in LATENCY_OBJECTIVES:
            fill_latency(self, x, counts, t)

    # -- the BuiltModel protocol ---------------------------------------------------------
    @property
    def instance(self) -> Instance:
        return self.inst

    @property
    def variables(self) -> Mapping[str, milp.VarBlock]:
        return self.model.blocks

    @property
    def horizon(self) -> int:
        return self.J

    def objective_seconds(self, x: np.ndarray) -> float:
        return self.model.objective_value(x) / self.scale


def entry_batches(s: Schedule) -> int:
    return int(np.count_nonzero(np.diff(s.batch_ptr) > 0))


__all__ = ["FlowModel", "applicable", "size_estimate", "classes_of", "entry_batches", "math"]


if TYPE_CHECKING:  # mypy checks that the model satisfies the solve path's protocol
    _built_model: type[BuiltModel] = FlowModel
