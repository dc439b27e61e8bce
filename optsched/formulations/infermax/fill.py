"""InferMax, fill variant: distinct requests on a per-batch state graph without chunk nodes.

``formulations/infermax.md`` section 11 (eqs. G1-G7). When no batch can run out of tokens
(``M <= min(C, P)``: a batch processes at most the KV it leaves behind, eq. G1) and chunking a
prefill never pays (``kpm >= 2 kpq``, ``kpl, kpr >= 0``, offline), every prefill segment of
some optimal schedule is ONE entry from ``m = 0`` (eq. G1's merge). A request's state before a
batch is then one of

* ``W(g)`` -- not resident, ``g`` tokens generated, ``0 <= g < O``;
* ``R(g)`` -- caught up, ``m = S - 1 = I + g - 1``, ``1 <= g < O``;
* ``F``    -- finished;

and the arcs of one batch are (eq. G2): idle; *fill* ``W(g) -> R(g+1) | F`` (``c = S``
tokens, generates a token) and *short fill* ``W(g) -> R(g)`` (``c = S - 1``, ``g >= 1``: the
refill stops one short and the next entry is a decode, semantics section 3); *decode*
``R(g) -> R(g+1) | F``; *evict* ``R(g) -> W(g)``; *evict-refill* ``R(g) -> R(g+1) | F`` and
``R(g) -> R(g)`` (an eviction in a zero-time eviction-only batch just before the batch, then
a fill from ``m = 0``). Every arc is a layer-to-layer arc with a constant price, token count
and KV footprint, so the per-class graph has ``O(O)`` arcs whatever the prompt length: the
flow model (section 9) needs ``O(O (I + O))`` per class for its token chains.

The rows are the flow model's (F1, F3-F5, F7, F10: the model is a :class:`~.flow.FlowModel`
whose classes carry these arcs): fills are ``CHUNK`` arcs (entries, prefill entries, prefill
tokens, chunk ends in the lifted F4b cut) and evict-refills ``CHUNK`` arcs out of an ``R``
state (only an evict-refill leaves ``R`` with more than one token). Columns that no schedule
within ``J`` batches can use are fixed at 0 (eq. G3: a state with ``g`` tokens generated
needs ``g`` batches to reach and ``O - g`` to finish).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ... import milp
from ...evaluation import evaluate
from ...instance import Instance, Limits
from ...schedule import Schedule, ScheduleBuilder
from ...solve_types import Objective
from ..base import FormulationError, Hypotheses
from . import flow as fl
from .flow import CHUNK, DECODE, EVICT, IDLE, FlowModel, _Class
from .flow_objectives import add_latency_objective
from .merge import merge_prefills, merging_never_hurts
from .replay import Move, folded_batches

#: ``kind`` of the arcs this module builds (flow's constants: the shared rows read them)
FILL = CHUNK


def applicable(inst: Instance, objective: str, hyp: Hypotheses) -> str | None:
    """None if the fill model is exact for this case (eq. G1's conditions), else why not."""
    if objective not in (Objective.MAKESPAN, Objective.TOTAL_LATENCY):
        return "fill variant models makespan and total latency"
    if inst.n and float(inst.arrival.max()) > 0:
        return "fill variant needs every request to arrive at time 0 (offline)"
    if hyp.force or hyp.forbid or hyp.order:
        return "fill variant does not support force/forbid/order hypotheses"
    lim = inst.limits
    if lim.swapping or getattr(lim, "hidden_cache", False):
        return "fill variant does not model swapping or hidden caches"
    return merging_never_hurts(inst)


def _build_fill_class(ids, I: int, O: int, arrival: float, k: dict[str, float],
                      limits: Limits, allow_evict: bool) -> _Class:
    """The states ``W(g), R(g), F`` and the arcs of eq. G2 for one class."""
    fp = limits.kv_footprint
    U = I + O - 1
    states: list[tuple[str, int, int]] = []
    for g in range(O):
        states.append(("W", g, 0))
        if g >= 1:
            states.append(("R", g, I + g - 1))
    states.append(("F", O, 0))
    sidx = {s: i for i, s in enumerate(states)}
    src, dst, kind, tok, price, kv, fin = [], [], [], [], [], [], []

    def arc(a, b, kd, t, p, kvv, f=False):
        src.append(a), dst.append(b), kind.append(kd), tok.append(t), price.append(p)
        kv.append(kvv), fin.append(f)

    def generated(g):
        """Node, KV and finishing flag after generating token ``g + 1``."""
        if g + 1 == O:
            return sidx[("F", O, 0)], fp(U), True
        return sidx[("R", g + 1, I + g)], fp(I + g), False

    def fill_price(c):  # a prefill entry of c tokens from m = 0 (semantics section 5)
        return fl.chunk_price(k, 0, c)

    for si, (kd_, g, m) in enumerate(states):
        S = I + g
        arc(si, si, IDLE, 0, 0.0, fp(m) if kd_ == "R" else 0)
        if kd_ == "W":
            nxt, kvn, f = generated(g)
            arc(si, nxt, FILL, S, fill_price(S), kvn, f)
            if g >= 1:
                arc(si, sidx[("R", g, S - 1)], FILL, S - 1, fill_price(S - 1), fp(S - 1))
        elif kd_ == "R":
            nxt, kvn, f = generated(g)
            arc(si, nxt, DECODE, 1, k["k1"] + k["kdm"] * (S - 1) + k["kdr"], kvn, f)
            if allow_evict:
                arc(si, sidx[("W", g, 0)], EVICT, 0, 0.0, 0)
                arc(si, nxt, FILL, S, fill_price(S), kvn, f)
                arc(si, si, FILL, S - 1, fill_price(S - 1), fp(S - 1))
    return _Class(list(ids), I, O, arrival, states, sidx, {},
                  np.array(src), np.array(dst), np.array(kind), np.array(tok),
                  np.array(price, float), np.array(kv, np.int64), np.array(fin, bool))


def _kind_mask(kinds: tuple[int, ...], kv: bool = False) -> Callable[[_Class], np.ndarray]:
    """The arcs of the given kinds (with a KV footprint after the batch, if ``kv``)."""
    def mask(c: _Class) -> np.ndarray:
        sel = np.isin(c.kind, kinds)
        return sel & (c.kv > 0) if kv else sel
    return mask


def _classes(inst: Instance, per_request: bool):
    """The flow model's classes, or one class per request (stronger indicator rows F3)."""
    if not per_request:
        return fl.classes_of(inst)
    return [([r.id], r.prompt, r.output, r.arrival)
            for r in sorted(inst.requests, key=lambda r: (r.prompt, r.output, r.id))]


class FillModel(FlowModel):
    """The flow model's rows over the classes of eq. G2 (``formulations/infermax.md`` s. 11)."""

    def __init__(self, inst: Instance, J: int, hyp: Hypotheses, ub: float | None,
                 objective: str = "makespan", restricted: bool = True,
                 per_request: bool = False):
        why = applicable(inst, objective, hyp)
        if why is not None:
            raise FormulationError(f"infermax fill: {why}")
        self.inst = inst
        self.J = J
        self.restricted = restricted
        self.objective = objective
        cm = inst.cost_model
        self.k = fl._coef(cm)
        one = cm.batch_time([1], [0], [False])
        self.scale = 1.0 / one if one > 0 else 1.0
        self.chain_continues = True
        self.classes = [_build_fill_class(ids, I, O, 0.0, self.k, inst.limits,
                                          not hyp.no_evictions)
                        for ids, I, O, _ in _classes(inst, per_request)]
        self.online = False
        self.model = milp.Model("infermax_fill")
        self._add_variables()
        for ci, c in enumerate(self.classes):
            self._conservation(ci, c)
        self._limits()
        self._cardinality_cuts()
        self._pair_covers()
        self._indicators()
        self._batch_order()
        self._time()
        if objective == Objective.TOTAL_LATENCY:  # eq. F10 (offline)
            add_latency_objective(self)
            self._latency_caps()
        else:
            cols = np.asarray(self.t[:])
            self.obj_terms = (cols, np.ones(cols.size), 0.0)
            self.model.set_objective(cols, np.ones(cols.size))
        if ub is not None:
            self._upper_bound_cut(ub)
        self._phase_memory()
        self.fixed = self._fix_unreachable()

    def batch_time_cap(self, r: int) -> float:
        """(G7) an upper bound on a batch's duration (model units) when at most ``r``
        requests are unfinished before it: at most ``r`` entries, and at most
        ``tok = min(M, sum of the r largest U)`` tokens (G1: a batch processes at most the
        KV it leaves behind) and cached tokens under its decodes; a fill is priced from
        ``m = 0`` (``kpr + k1 c + kpq c^2``, ``sum c^2 <= tok^2``), a decode
        ``k1 + kdm (S - 1) + kdr``."""
        if r <= 0:
            return 0.0
        k = self.k
        U = sorted((c.I + c.O - 1 for c in self.classes for _ in range(c.n)), reverse=True)
        tok = min(float(self.inst.limits.kv_capacity), float(sum(U[:r])))
        cap = (k["k0"] + k["kpb"] + k["kdb"] + r * max(k["kpr"], k["kdr"], 0.0)
               + k["k1"] * tok + k["kpq"] * tok * tok + k["kdm"] * tok)
        return cap * self.scale

    def _latency_caps(self) -> None:
        """(G7) ``w[j,q] >= t_j - T_{q-1} (1 - d[j,q])``: when fewer than ``q`` requests are
        unfinished (``d[j,q] = 0``) batch ``j`` lasts at most ``T_{q-1}`` (``T_0 = 0``: then
        ``w[j,1] >= t_j``). Tighter than F10's single ``T``; only added where smaller."""
        J, N = self.J, self.d.shape[1]
        jj = np.arange(J)
        for q in range(1, N + 1):
            cap = self.batch_time_cap(q - 1)
            if cap >= self.T * (1 - 1e-12):
                continue
            self.model.add_constraints(
                np.repeat(jj, 3), np.stack([self.w[:, q - 1], self.t[:], self.d[:, q - 1]],
                                           1).ravel(),
                np.tile([1.0, -1.0, -cap], J), lo=-cap, name=f"w_cap{q}")

    def _phase_memory(self) -> None:
        """(G6) the KV after batch ``j`` of the requests a fill or evict-refill arc leaves
        behind is ``<= M ap_j``, and that of the decoded requests ``<= M ad_j`` (each is part
        of the F4 memory row; a batch without a prefill has no fill)."""
        M = float(self.inst.limits.kv_capacity)
        for ind, kinds, nm in ((self.ap, (FILL,), "Mp"), (self.ad, (DECODE,), "Md")):
            r, cc, v = self._with_indicator(
                self._per_batch(_kind_mask(kinds, kv=True), lambda c: c.kv.astype(float)), ind, -M)
            self.model.add_constraints(r, cc, v, hi=0.0, name=nm)

    def _indicators(self) -> None:
        """(F3b) ``ap_j + ad_j >= y_j``; (F3) ``ind <= sum f``; (G5) per class and batch
        ``ind_j >= (sum of the class's arcs that set ind) / n_k``: at most ``n_k`` requests of
        class ``k`` take such arcs in one batch. G5 implies F3's ``ind >= f_a / n_k`` for
        every arc (a sum of non-negative counts is at least each of them), so those rows,
        one per arc and batch, are not built."""
        m, J = self.model, self.J
        jj = np.arange(J)
        m.add_constraints(np.repeat(jj, 3), np.stack([self.ap[:], self.ad[:], self.y[:]], 1).ravel(),
                          np.tile([1.0, 1.0, -1.0], J), lo=0.0, name="phase")
        for ind, kinds in ((self.y, (FILL, DECODE)), (self.ap, (FILL,)), (self.ad, (DECODE,))):
            for ci, c in enumerate(self.classes):
                sel = np.flatnonzero(np.isin(c.kind, kinds))
                if sel.size == 0:
                    continue
                rows = np.concatenate([np.repeat(jj, sel.size), jj])
                cols = np.concatenate([self.f[ci][:, sel].ravel(), ind[:]])
                vals = np.concatenate([np.full(J * sel.size, 1.0 / c.n), -np.ones(J)])
                m.add_constraints(rows, cols, vals, hi=0.0, name=f"{ind.name}_cls{ci}")
            r, cc, v = self._with_indicator(self._per_batch(_kind_mask(kinds), fl._ones), ind, -1.0)
            m.add_constraints(r, cc, v, lo=0.0, name=f"{ind.name}_ub")

    def _fix_unreachable(self) -> int:
        """(G3) an arc of batch ``j`` out of a state with ``g`` tokens generated needs
        ``g <= j`` (one token per batch; ``W(g)``, ``g >= 1``, needs an eviction too:
        ``g + 1 <= j``), and its head, ``g'`` tokens generated before batch ``j + 1``, needs
        ``O - g' <= J - j - 1`` batches to finish. Returns the number of columns fixed."""
        fixed = 0
        J = self.J
        jj = np.arange(J)[:, None]
        for ci, c in enumerate(self.classes):
            g_of = np.array([s[1] for s in c.states])
            earliest = np.array([s[1] + (1 if s[0] == "W" and s[1] >= 1 else 0)
                                 for s in c.states])
            gs, gd = earliest[c.src][None, :], g_of[c.dst][None, :]
            dead = (gs > jj) | (c.O - gd > J - 1 - jj)
            cols = self.f[ci][:, :][dead]
            if cols.size:
                self.model.set_bounds(cols, ub=np.zeros(cols.size))
                fixed += int(cols.size)
        return fixed

    # --------------------------------------------------------------- decode
    def decode(self, values: np.ndarray) -> Schedule:
        """Counts -> request ids, batch by batch (requests of a class in one state are
        interchangeable; eq. G4)."""
        flows = [np.rint(self.model.value(f, values)).astype(int) for f in self.f]
        where = []
        for c in self.classes:
            w: dict[int, list[str]] = {i: [] for i in range(len(c.states))}
            w[c.sidx[("W", 0, 0)]] = sorted(c.ids)
            where.append(w)
        b = ScheduleBuilder(ids=self.inst.ids)
        for j in range(self.J):
            entries: list[tuple[str, int]] = []
            evict: list[str] = []
            pre_evict: list[str] = []
            for ci, c in enumerate(self.classes):
                nxt: dict[int, list[str]] = {i: [] for i in range(len(c.states))}
                for a in np.flatnonzero(flows[ci][j] > 0):
                    s, cnt = int(c.src[a]), int(flows[ci][j][a])
                    if len(where[ci][s]) < cnt:
                        raise FormulationError(f"fill decode: batch {j} class {ci}: {cnt} "
                                               f"requests leave a state holding "
                                               f"{len(where[ci][s])}")
                    take, where[ci][s] = where[ci][s][:cnt], where[ci][s][cnt:]
                    kd = c.kind[a]
                    if kd == EVICT:
                        evict += take
                    elif kd != IDLE:
                        if kd == FILL and c.states[s][0] == "R":  # evict-refill
                            pre_evict += take
                        entries += [(r, int(c.tokens[a])) for r in take]
                    nxt[int(c.dst[a])] += take
                if any(where[ci].values()):
                    raise FormulationError(f"fill decode: batch {j}: unassigned requests")
                where[ci] = {s: sorted(v) for s, v in nxt.items()}
            if pre_evict:
                b.add([], pre_evict)
            if entries or evict:
                b.add(entries, evict)
        return b.build()

    # --------------------------------------------------------------- encode
    def encode(self, s: Schedule) -> np.ndarray:
        """Arc counts of ``merge_prefills(s)`` (eq. G1; an eviction-only batch folds into the
        next batch as evict-refill or plain evictions). Raises if it does not fit ``J``."""
        inst = self.inst
        if not evaluate(inst, s).feasible:
            raise FormulationError("fill encode: schedule is infeasible")
        s = merge_prefills(inst, s)
        cls_of = {r: ci for ci, c in enumerate(self.classes) for r in c.ids}
        arc_index = [{(int(c.src[a]), int(c.dst[a]), int(c.kind[a]), int(c.tokens[a])): a
                      for a in range(c.src.size)} for c in self.classes]
        counts = [np.zeros((self.J, c.src.size), int) for c in self.classes]
        j = 0  # batches with entries so far
        for moves in folded_batches(inst, s, self.J, "fill"):
            for mv in moves:
                ci = cls_of[mv.rid]
                key = self._arc(self.classes[ci], mv)
                if key not in arc_index[ci]:
                    raise FormulationError(f"fill encode: request {mv.rid!r} batch {j}: no "
                                           f"{fl.KIND_NAMES[key[2]]} arc of {key[3]} tokens")
                counts[ci][j, arc_index[ci][key]] += 1
            j += 1
        for ci, c in enumerate(self.classes):
            f_state = c.sidx[("F", c.O, 0)]
            counts[ci][j:, arc_index[ci][(f_state, f_state, IDLE, 0)]] = c.n
        x = np.zeros(self.model.num_vars)
        for ci in range(len(self.classes)):
            x[self.f[ci][:, :].ravel()] = counts[ci].ravel()
        self._fill_batch_vars(x, counts)
        return x

    @classmethod
    def _arc(cls, c: _Class, mv: Move) -> tuple[int, int, int, int]:
        """``(from, to, kind, tokens)`` of request move ``mv`` in class ``c``'s arcs (G2)."""
        here = cls._node(c, mv.g, mv.m)
        if mv.tokens:
            kind = DECODE if not mv.evicted and mv.m > 0 else FILL
            return here, cls._node(c, mv.g1, mv.m1), kind, mv.tokens
        if mv.evicted:
            return here, cls._node(c, mv.g1, 0), EVICT, 0
        return here, here, IDLE, 0

    @staticmethod
    def _node(c: _Class, g: int, m: int) -> int:
        """The layer state of ``(g, m)`` in class ``c`` (``m`` is 0 or ``S - 1`` here)."""
        if g >= c.O:
            return c.sidx[("F", c.O, 0)]
        if m == 0:
            return c.sidx[("W", g, 0)]
        key = ("R", g, m)
        if key not in c.sidx:
            raise FormulationError(f"fill encode: state g = {g}, m = {m} is not W, R or F "
                                   "(a prefill segment was not merged)")
        return c.sidx[key]


def size_estimate(inst: Instance, J: int) -> int:
    """Arc variables of the fill model with ``J`` batches (before eq. G3 fixes columns)."""
    return J * sum(7 * O for _, _, O, _ in fl.classes_of(inst))
