"""InferMax's Big-M batch-indexed MILP (paper section 5), exact, in two variants: the model.

The mathematics, with the equation numbers cited below, is in ``formulations/infermax.md``.

* ``variant="plain"`` -- a faithful transcription of the paper's model: one blanket big-M
  for every conditional constraint, aggregated batch indicators, no cuts (the speed
  baseline, eqs. P1-P6).
* ``variant="tight"`` (default) -- the same decision space priced the same way, with
  per-constraint constants from the instance (eqs. 1-12), exact McCormick products, the
  dominance restriction on evictions (eq. 13), symmetry breaking for identical requests
  (eq. 14) and valid inequalities (eqs. 15-23).

Both price every batch exactly as :func:`optsched.evaluate` does (the quadratic prefill terms
are linearised exactly by a binary expansion of ``c``, eq. 9), so ``RawSolution.exact`` is
True. The horizon ``J`` (batch slots) is a restriction unless the notes say otherwise
(``formulations/infermax.md`` section 6).

This module owns :func:`build` -> :class:`InfermaxModel`; the model's ``encode(schedule)``,
``decode(values)`` and ``canonical(schedule)`` are in :mod:`.encode`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ... import milp
from ...cost import UnitCost
from ...instance import Instance, Limits
from ...schedule import Schedule
from ...solve_types import Objective
from ..base import BuiltModel, FormulationError, Hypotheses, refuse_prefix_reuse, refuse_swaps
from .encode import canonical, decode, encode
from .horizon import _cost_coefs, batch_overhead_lower_bound, request_work_lower_bound

VARIANTS = ("plain", "tight")
DEFAULT_SLACK = 2
#: most batch slots ``batches=J`` / ``slack=k`` may ask for: the model has O(n J) columns
MAX_BATCH_SLOTS = 100_000


# ----------------------------------------------------------------------------- helpers
class _Rows:
    """COO row builder: each term is ``(rows, cols, coef)`` broadcast together."""

    def __init__(self, model: milp.Model):
        self.model = model

    def add(self, name: str, nrows: int, terms, lo=None, hi=None):
        R, C, V = [], [], []
        for rows, cols, coef in terms:
            r, c, v = np.broadcast_arrays(np.asarray(rows), np.asarray(cols),
                                          np.asarray(coef, dtype=np.float64))
            R.append(r.ravel())
            C.append(c.ravel())
            V.append(v.ravel())
        lo_a = None if lo is None else np.broadcast_to(np.asarray(lo, float), (nrows,))
        hi_a = None if hi is None else np.broadcast_to(np.asarray(hi, float), (nrows,))
        if nrows == 0:
            return None
        return self.model.add_constraints(np.concatenate(R).astype(np.int64),
                                          np.concatenate(C).astype(np.int64),
                                          np.concatenate(V), lo=lo_a, hi=hi_a, name=name,
                                          nrows=nrows)


def _elem(shape):
    return np.arange(int(np.prod(shape))).reshape(shape)


def _identical_groups(inst: Instance, named: set[str]) -> list[list[int]]:
    """Groups (size >= 2) of interchangeable requests not named by any hypothesis (eq. 14)."""
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(inst.requests):
        if r.id in named:
            continue
        groups.setdefault((r.arrival, r.prompt, r.output), []).append(i)
    return [g for g in groups.values() if len(g) > 1]


def _built(block: milp.VarBlock | None, what: str) -> milp.VarBlock:
    """``block``, which the builder created for the reason ``what`` names."""
    if block is None:
        raise FormulationError(f"infermax build: variable block {what} was not created")
    return block


# ----------------------------------------------------------------------------- the model
@dataclass(frozen=True, eq=False)
class InfermaxModel:
    """A built model with its variable blocks; ``encode``/``decode`` map schedules."""

    instance: Instance
    objective: str
    variant: str
    J: int
    scale: float  # model time units per second
    model: milp.Model
    v: dict[str, milp.VarBlock]
    online: bool
    dominance: bool
    symmetry: list[list[int]]
    compact: bool
    bits: int
    kpq_scaled: float = 0.0
    notes: tuple[str, ...] = field(default=())
    #: optimal only among schedules that fit J batch slots (set by ``run``, section 4)
    restricted: bool = True

    # -- the BuiltModel protocol ---------------------------------------------------------
    @property
    def variables(self) -> dict[str, milp.VarBlock]:
        return self.v

    @property
    def horizon(self) -> int:
        return self.J

    # -- schedules -> values -------------------------------------------------------------
    def canonical(self, s: Schedule) -> Schedule:
        if self.variant == "plain":
            return s
        return canonical(self.instance, s, dominance=self.dominance, symmetry=self.symmetry,
                         compact=self.compact)

    def encode(self, s: Schedule) -> np.ndarray:
        """Full column vector for ``s`` (tight variant: ``s`` must be canonical)."""
        return encode(self, s)

    # -- values -> schedule -------------------------------------------------------------
    def decode(self, values: np.ndarray) -> Schedule:
        """The schedule the solution describes (stated starts only where the model idles)."""
        return decode(self, values)


# ----------------------------------------------------------------------------- the builder
@dataclass(frozen=True, eq=False)
class _Data:
    """What the builder reads: the instance's numbers in model units and the variant's switches.

    ``I, O, U, Cmax`` are per request (``formulations/infermax.md`` section 1), ``*_col`` the
    same as ``(n, 1)`` columns; ``k`` the cost coefficients in seconds, ``ks`` in model units
    (``scale`` per second); ``BIG`` the plain variant's blanket constant (eq. P1).
    """

    inst: Instance
    objective: str
    hyp: Hypotheses
    J: int
    tight: bool
    I: np.ndarray
    O: np.ndarray
    U: np.ndarray
    Cmax: np.ndarray
    online: bool
    unit_cost: bool
    k: dict[str, float]
    ks: dict[str, float]
    scale: float
    BIG: float
    dominance: bool
    compact: bool
    symmetry: list[list[int]]

    @property
    def n(self) -> int:
        return self.inst.n

    @property
    def shape(self) -> tuple[int, int]:
        return (self.inst.n, self.J)

    @property
    def I_col(self) -> np.ndarray:
        return self.I[:, None]

    @property
    def O_col(self) -> np.ndarray:
        return self.O[:, None]

    @property
    def U_col(self) -> np.ndarray:
        return self.U[:, None]

    @property
    def Cmax_col(self) -> np.ndarray:
        return self.Cmax[:, None]


def _model_data(inst: Instance, objective: str, hyp: Hypotheses, J: int, variant: str) -> _Data:
    """The instance's numbers (section 1), the time scale and the variant's switches (eqs. 13-15
    apply to the tight variant without the hypotheses that name batches or orders)."""
    tight = variant == "tight"
    lim = inst.limits
    I = inst.prompt.astype(np.int64)
    O = inst.output.astype(np.int64)
    U = I + O - 1
    unit_cost = isinstance(inst.cost_model, UnitCost)
    given = _cost_coefs(inst.cost_model)
    k = {name: given.get(name, 0.0) for name in
         ("k0", "k1", "kpq", "kpm", "kdm", "kpr", "kdr", "kpl", "kpb", "kdb")}
    # time scale: one small prefill batch ~ 1 model unit (keeps solver tolerances relative)
    ref = k["k0"] + k["k1"] + k["kpq"] + k["kpr"] + k["kpb"]
    scale = 1.0 if unit_cost or ref <= 0 else 1.0 / ref
    C, P = lim.max_batch_tokens, lim.max_prefill_tokens
    Cmax = np.minimum(np.minimum(C, P if P is not None else C), U)  # per request, eq. 4
    BIG = float(max(lim.kv_capacity, C, int(U.max()) + 1))  # plain: one blanket constant (eq. P1)
    named = {r for r, _ in (*hyp.force, *hyp.forbid)} | {r for pair in hyp.order for r in pair}
    return _Data(inst, objective, hyp, J, tight, I, O, U, Cmax,
                 online=bool(np.any(inst.arrival > 0)), unit_cost=unit_cost, k=k,
                 ks={name: val * scale for name, val in k.items()}, scale=scale, BIG=BIG,
                 dominance=tight and not hyp.force and not hyp.order,
                 compact=tight and not hyp.force and not hyp.forbid,
                 symmetry=_identical_groups(inst, named) if tight else [])


@dataclass(frozen=True, eq=False)
class _StateColumns:
    """Column ids of the per (request, batch) variables of eq. 1, ``(n, J)`` each; the state
    variables ``m, g, fin, ftk`` before (``*_before``) and after (``*_after``) batch ``j``."""

    entry: np.ndarray  # x
    tokens: np.ndarray  # c
    evict: np.ndarray  # e
    gen: np.ndarray
    dec: np.ndarray
    pre: np.ndarray
    m_before: np.ndarray
    m_after: np.ndarray
    g_before: np.ndarray
    g_after: np.ndarray
    fin_before: np.ndarray
    fin_after: np.ndarray
    ftk_before: np.ndarray
    ftk_after: np.ndarray


class _InfermaxBuilder:
    """Adds the model's variables and rows, one method per equation group of
    ``formulations/infermax.md`` (sections 2, 3 and 5), in the order :func:`build` calls them.

    Row index helpers: ``cell`` numbers the ``(request, batch)`` rows, ``batch_sum`` /
    ``request_sum`` put every term of a batch / a request in one row, ``batch_row`` is one
    row per batch.
    """

    def __init__(self, d: _Data, variant: str):
        self.d = d
        self.md = milp.Model(f"infermax_{variant}")
        self.rows = _Rows(self.md)
        self.v: dict[str, milp.VarBlock] = {}
        self.cell = _elem(d.shape)
        self.n_cells = d.n * d.J
        self.batch_sum = np.arange(d.J)[None, :]
        self.request_sum = np.arange(d.n)[:, None]
        self.batch_row = np.arange(d.J)
        self.s = self.state_variables()
        self.bits = 0  # bits of the binary expansion of c (eq. 9); 0 when not built
        self.telescope = False  # prefill priced per residency segment (eqs. 24-26)

    def big(self, tight_value: Any) -> Any:
        """Per-constraint constant (tight) or the blanket BIG (plain, eq. P1)."""
        return tight_value if self.d.tight else self.d.BIG

    def cells(self, column: np.ndarray) -> np.ndarray:
        """A per-request column broadcast to one value per ``(request, batch)`` row."""
        return np.broadcast_to(column, self.d.shape).ravel()

    def add(self, name: str, nrows: int, terms: list[tuple[Any, Any, Any]], lo: Any = None,
            hi: Any = None) -> None:
        self.rows.add(name, nrows, terms, lo, hi)

    def add_cells(self, name: str, terms: list[tuple[Any, Any]], lo: Any = None,
                  hi: Any = None) -> None:
        """One row per ``(request, batch)``: ``terms`` are ``(columns, coefficient)``."""
        self.rows.add(name, self.n_cells, [(self.cell, c, a) for c, a in terms], lo, hi)

    # -- eq. 1 ---------------------------------------------------------------------------
    def state_variables(self) -> _StateColumns:
        """(eq. 1) ``x, c, e, gen, dec, pre`` per (request, batch) and the states ``m, g,
        fin, ftk`` before every batch; index 0 is fixed empty, the termination ``g = O`` after
        the last slot (eq. 5) and ``fin = ftk = 1`` there are bounds."""
        d, md, nJ, J = self.d, self.md, self.d.shape, self.d.J
        x = md.add_vars("x", nJ, vtype="B")
        c = md.add_vars("c", nJ, ub=np.broadcast_to(d.Cmax_col, nJ), vtype="I")
        e = md.add_vars("e", nJ, ub=0.0 if d.hyp.no_evictions else 1.0, vtype="B")
        gen = md.add_vars("gen", nJ, vtype="B")
        dec = md.add_vars("dec", nJ, vtype="B")
        pre = md.add_vars("pre", nJ, vtype="B")
        states = (d.n, J + 1)
        m_ub = np.broadcast_to(d.U_col, states).astype(float).copy()
        m_ub[:, 0] = 0
        m = md.add_vars("m", states, lb=np.zeros(states), ub=m_ub)
        g_lb = np.zeros(states)
        g_ub = np.broadcast_to(d.O_col, states).astype(float).copy()
        g_ub[:, 0] = 0
        g_lb[:, J] = d.O  # termination (eq. 5)
        g = md.add_vars("g", states, lb=g_lb, ub=g_ub)
        f_ub = np.ones(states)
        f_ub[:, 0] = 0
        f_lb = np.zeros(states)
        f_lb[:, J] = 1
        fin = md.add_vars("fin", states, lb=f_lb, ub=f_ub, vtype="B")
        ftk = md.add_vars("ftk", states, lb=f_lb, ub=f_ub, vtype="B")
        self.v.update(x=x, c=c, e=e, gen=gen, dec=dec, pre=pre, m=m, g=g, fin=fin, ftk=ftk)
        return _StateColumns(x.ids, c.ids, e.ids, gen.ids, dec.ids, pre.ids,
                             m.ids[:, :-1], m.ids[:, 1:], g.ids[:, :-1], g.ids[:, 1:],
                             fin.ids[:, :-1], fin.ids[:, 1:], ftk.ids[:, :-1], ftk.ids[:, 1:])

    def paper_families(self) -> None:
        """Every constraint family of formulations/infermax.md section 2 in the model's
        order (eqs. 2-12, the batch time and clock, the hypotheses on the objective)."""
        self.memory_update()
        self.tokens_to_process()
        self.token_generation()
        self.finish_indicators()
        self.entry_phase()
        self.batch_limits()
        self.batch_indicators()
        self.prefill_products()
        self.batch_time()
        self.clock()
        self.hypotheses(self.objective())

    # -- section 2: eqs. 2-12 ----------------------------------------------------------------
    def memory_update(self) -> None:
        """(eq. 2, paper (1)) ``ma = mb - ev + c`` with ``ev = e * mb`` by the exact McCormick
        envelope; plain (eq. P1): the paper's big-M rows."""
        s, BIG, U_col = self.s, self.d.BIG, self.d.U_col
        if not self.d.tight:
            self.add_cells("p_mem_evict", [(s.m_after, 1), (s.evict, BIG)], hi=BIG)
            self.add_cells("p_mem_le", [(s.m_after, 1), (s.m_before, -1), (s.tokens, -1),
                                        (s.evict, -BIG)], hi=0)
            self.add_cells("p_mem_ge", [(s.m_after, 1), (s.m_before, -1), (s.tokens, -1),
                                        (s.evict, BIG)], lo=0)
            return
        evicted_kv = self.md.add_vars("ev", self.d.shape)
        self.v["ev"] = evicted_kv
        ev = evicted_kv.ids
        self.add_cells("mem_update", [(s.m_after, 1), (s.m_before, -1), (ev, 1), (s.tokens, -1)],
                       0, 0)
        self.add_cells("ev_le_e", [(ev, 1), (s.evict, -U_col)], hi=0)
        self.add_cells("ev_le_m", [(ev, 1), (s.m_before, -1)], hi=0)
        self.add_cells("ev_ge", [(ev, 1), (s.m_before, -1), (s.evict, -U_col)],
                       lo=-self.cells(U_col))

    def tokens_to_process(self) -> None:
        """(eqs. 3-4, paper (2)) ``x <= c <= Cmax x``, ``c <= S_before - m_before``, an evicted
        request is not processed; plain (eq. P2) with BIG."""
        s, d = self.s, self.d
        self.add_cells("c_ge_x", [(s.tokens, 1), (s.entry, -1)], lo=0)
        self.add_cells("c_le_x", [(s.tokens, 1), (s.entry, -self.big(d.Cmax_col))], hi=0)
        if d.tight:
            self.add_cells("x_or_e", [(s.entry, 1), (s.evict, 1)], hi=1)
            self.add_cells("c_avail", [(s.tokens, 1), (s.m_before, 1), (s.g_before, -1)],
                           hi=self.cells(d.I_col))
        else:
            self.add_cells("p_c_evict", [(s.tokens, 1), (s.evict, d.BIG)], hi=d.BIG)
            self.add_cells("p_c_avail", [(s.tokens, 1), (s.m_before, 1), (s.g_before, -1),
                                         (s.evict, -d.BIG)], hi=self.cells(d.I_col))

    def token_generation(self) -> None:
        """(eq. 5, paper (3)) ``gen = 1`` iff ``m_after == S_before = I + g_before`` (``m_after
        <= S_before`` always), exact both ways; sequence growth ``g_after = g_before + gen``."""
        s, I_col = self.s, self.d.I_col
        self.add_cells("gen_le", [(s.m_after, 1), (s.g_before, -1), (s.gen, -1)],
                       hi=self.cells(I_col - 1))
        big = self.big(self.d.U_col)
        self.add_cells("gen_ge", [(s.m_after, 1), (s.g_before, -1), (s.gen, -big)],
                       lo=self.cells(I_col - big))
        self.add_cells("seq_growth", [(s.g_after, 1), (s.g_before, -1), (s.gen, -1)], 0, 0)
        if self.d.tight:
            self.add_cells("gen_le_x", [(s.gen, 1), (s.entry, -1)], hi=0)

    def finish_indicators(self) -> None:
        """(eq. 6) ``fin = [g >= O]``, ``ftk = [g >= 1]``; no entry or eviction after finishing;
        evicting needs KV; tight: both indicators monotone."""
        s, O_col = self.s, self.d.O_col
        self.add_cells("fin_lo", [(s.g_after, 1), (s.fin_after, -O_col)], lo=0)
        self.add_cells("fin_hi", [(s.g_after, 1), (s.fin_after, -1)], hi=self.cells(O_col - 1))
        self.add_cells("ftk_lo", [(s.g_after, 1), (s.ftk_after, -1)], lo=0)
        self.add_cells("ftk_hi", [(s.g_after, 1), (s.ftk_after, -self.big(O_col))], hi=0)
        self.add_cells("x_after_fin", [(s.entry, 1), (s.fin_before, 1)], hi=1)
        self.add_cells("e_after_fin", [(s.evict, 1), (s.fin_before, 1)], hi=1)
        self.add_cells("e_needs_kv", [(s.evict, 1), (s.m_before, -1)], hi=0)
        if self.d.tight:
            self.add_cells("fin_mono", [(s.fin_after, 1), (s.fin_before, -1)], lo=0)
            self.add_cells("ftk_mono", [(s.ftk_after, 1), (s.ftk_before, -1)], lo=0)

    def entry_phase(self) -> None:
        """(eq. 7) an entry is a decode iff ``g_before >= 1`` and ``m_before == S_before - 1``,
        else a prefill, exact both ways (``a = S_before - m_before``, ``h = ftk_before``)."""
        s, I_col = self.s, self.d.I_col
        self.add_cells("phase", [(s.dec, 1), (s.pre, 1), (s.entry, -1)], 0, 0)
        self.add_cells("dec_h", [(s.dec, 1), (s.ftk_before, -1)], hi=0)
        big = self.big(self.d.U_col - 1)
        # dec => a = I + g_b - m_b <= 1
        self.add_cells("dec_a", [(s.g_before, 1), (s.m_before, -1), (s.dec, big)],
                       hi=self.cells(1 - I_col + big))
        # pre => a >= 2 or h == 0:  a >= 2 pre + 2 h - 2
        self.add_cells("pre_a", [(s.g_before, 1), (s.m_before, -1), (s.pre, -2),
                                 (s.ftk_before, -2)], lo=self.cells(-2 - I_col))

    def batch_limits(self) -> None:
        """(eq. 8, paper (4)) tokens ``C``, prefill tokens ``P``, batch size, and the KV after
        the batch ``<= M`` (a finished request's ``U`` subtracted); blocks of ``b > 1`` through
        an integer block count ``kb >= m_after / b``."""
        s, lim, J = self.s, self.d.inst.limits, self.d.J
        C, P, M, b = lim.max_batch_tokens, lim.max_prefill_tokens, lim.kv_capacity, lim.block_size
        self.add("C", J, [(self.batch_sum, s.tokens, 1)], hi=C)
        if P is not None and P < C:
            self.add("P", J, [(self.batch_sum, s.tokens, 1), (self.batch_sum, s.dec, -1)], hi=P)
        if lim.max_batch_size is not None:
            self.add("B", J, [(self.batch_sum, s.entry, 1)], hi=lim.max_batch_size)
        if b == 1:
            self.add("M", J, [(self.batch_sum, s.m_after, 1),
                              (self.batch_sum, s.fin_before, -self.d.U_col)], hi=M)
            return
        peak_kv = lim.kv_footprint(self.d.U)  # b * ceil(U / b)
        kb = self.md.add_vars("kb", self.d.shape, ub=np.broadcast_to((peak_kv // b)[:, None],
                                                                      self.d.shape), vtype="I")
        self.v["kb"] = kb
        self.add_cells("kb_ge", [(kb.ids, b), (s.m_after, -1)], lo=0)
        self.add("M", J, [(self.batch_sum, kb.ids, b),
                          (self.batch_sum, s.fin_before, -peak_kv[:, None])], hi=M)

    def batch_indicators(self) -> None:
        """(eq. 11) ``y, ap, ad``: the batch has an entry / a prefill / a decode entry, exact
        both ways (``ap, ad`` only where priced or tight); plain aggregates the ``>=`` side
        (eq. P5)."""
        d, s, J = self.d, self.s, self.d.J
        self.v["y"] = self.md.add_vars("y", J, vtype="B")
        if d.ks["kpb"] > 0 or d.tight:
            self.v["ap"] = self.md.add_vars("ap", J, vtype="B")
        if d.ks["kdb"] > 0 or d.tight:
            self.v["ad"] = self.md.add_vars("ad", J, vtype="B")
        for name, members in (("y", s.entry), ("ap", s.pre), ("ad", s.dec)):
            if name not in self.v:
                continue
            ind = self.v[name].ids
            if d.tight:
                self.add_cells(f"{name}_ge", [(np.broadcast_to(ind[None, :], d.shape), 1),
                                              (members, -1)], lo=0)
            else:
                self.add(f"{name}_ge", J, [(self.batch_row, ind, d.n),
                                           (self.batch_sum, members, -1)], lo=0)
            self.add(f"{name}_le", J, [(self.batch_row, ind, 1), (self.batch_sum, members, -1)],
                     hi=0)

    def prefill_products(self) -> None:
        """The prefill terms ``kpq c^2`` and ``kpm c m``: telescoped per residency segment
        (eqs. 24-26) where that is exact and allowed, else through the binary expansion of
        ``c`` (eqs. 9, 16); then the phase products (eq. 10)."""
        d = self.d
        cmax_all = int(d.Cmax.max()) if d.n else 1
        self.bits = max(1, int(cmax_all).bit_length())
        self.telescope = (d.tight and d.dominance and d.objective == Objective.MAKESPAN
                          and not d.online and not d.unit_cost and d.ks["kpq"] > 0
                          and abs(d.k["kpm"] - 2 * d.k["kpq"]) <= 1e-12 * d.k["kpm"]
                          and int(d.O.max()) <= 64)
        if self.telescope:
            self.telescoped_prefill()
            self.bits = 0
        elif not d.unit_cost and (d.ks["kpq"] > 0 or d.ks["kpm"] > 0):
            self.binary_expansion()
        else:
            self.bits = 0
        self.phase_products()

    @property
    def powers(self) -> np.ndarray:
        """``2^q`` for the bits of the expansion of ``c`` (eq. 9)."""
        return (2 ** np.arange(self.bits)).astype(float)

    def telescoped_prefill(self) -> None:
        """(eqs. 24-26) with ``kpm = 2 kpq`` the prefill attention of a residency segment
        telescopes to ``kpq P^2`` (``P`` = ``m`` after its last prefill entry, the ``ce``
        event): ``cu`` caught up after the batch (eq. 24), ``ce = pre AND cu`` once per
        segment (eq. 25), ``qq >= kpq ce m_after^2`` by tangents (eq. 26)."""
        d, s, md, nJ = self.d, self.s, self.md, self.d.shape
        I_col, U_col = d.I_col, d.U_col
        caught_up = md.add_vars("cu", nJ, vtype="B")
        segment_end = md.add_vars("ce", nJ, vtype="B")
        quad_cost = md.add_vars("qq", nJ)
        self.v.update(cu=caught_up, ce=segment_end, qq=quad_cost)
        cu, ce, qq = caught_up.ids, segment_end.ids, quad_cost.ids
        self.add_cells("cu_h", [(cu, 1), (s.ftk_after, -1)], hi=0)
        self.add_cells("cu_1", [(s.m_after, 1), (s.g_after, -1), (cu, -U_col)],
                       lo=self.cells(I_col - 1 - U_col))
        self.add_cells("cu_0", [(s.m_after, 1), (s.g_after, -1), (cu, -1), (s.ftk_after, 1)],
                       hi=self.cells(I_col - 1))
        self.add_cells("ce_pre", [(ce, 1), (s.pre, -1)], hi=0)
        self.add_cells("ce_cu", [(ce, 1), (cu, -1)], hi=0)
        self.add_cells("ce_and", [(ce, 1), (s.pre, -1), (cu, -1)], lo=-1)
        self.add("ce_count", d.n, [(self.request_sum, ce, 1), (self.request_sum, s.evict, -1)],
                 lo=1, hi=1)
        kpq = d.ks["kpq"]
        self.add_cells("qq_I", [(qq, 1), (ce, -kpq * I_col.astype(float) ** 2)], lo=0)
        for step in range(int(d.O.max()) + 1):  # tangents of m^2 at integer m = I - 1 + step
            q = (I_col - 1 + step).astype(float)
            slack = kpq * np.maximum((2 * q + 1) * U_col - q * (q + 1), 0.0)
            self.add_cells(f"qq_tan_{step}", [(qq, 1), (s.m_after, -kpq * (2 * q + 1)),
                                              (ce, -slack)],
                           lo=self.cells(-kpq * q * (q + 1) - slack))

    def binary_expansion(self) -> None:
        """(eq. 9) ``c = sum_q 2^q z_q``; ``c m_before`` (``w``) and ``c^2`` (``vq``) as sums of
        exact McCormick products ``z_q * m`` and ``z_q * c``; tight: tangent cuts (eq. 16)."""
        d, s, bits = self.d, self.s, self.bits
        shape3 = (d.n, d.J, bits)
        pw = self.powers
        z_ub = np.ones(shape3)
        z_ub[(pw[None, None, :] > d.Cmax_col[:, :, None]) * np.ones(shape3, bool)] = 0
        z = self.md.add_vars("z", shape3, ub=z_ub, vtype="B")
        self.v["z"] = z
        self.add("c_bits", self.n_cells, [(self.cell, s.tokens, 1),
                                          (self.cell[:, :, None], z.ids, -pw)], 0, 0)
        if d.ks["kpm"] > 0:
            w = self.md.add_vars("w", shape3)
            self.v["w"] = w
            self.bit_products("w", w.ids, np.broadcast_to(s.m_before[:, :, None], shape3),
                              d.U_col[:, :, None])
        if d.ks["kpq"] > 0:
            vq = self.md.add_vars("vq", shape3)
            self.v["vq"] = vq
            self.bit_products("vq", vq.ids, np.broadcast_to(s.tokens[:, :, None], shape3),
                              d.Cmax_col[:, :, None])
            if d.tight:
                self.square_tangents(vq.ids)

    def bit_products(self, name: str, product: np.ndarray, factor: np.ndarray,
                     factor_ub: np.ndarray) -> None:
        """(eq. 9) ``product = z * factor`` by the 4-inequality McCormick envelope, with the
        factor's own bound (tight) or BIG (plain, eq. P4)."""
        shape3 = (self.d.n, self.d.J, self.bits)
        rows3 = _elem(shape3)
        nrows = int(np.prod(shape3))
        z = self.v["z"].ids
        ub = np.broadcast_to(factor_ub, shape3) if self.d.tight else self.d.BIG
        self.add(f"{name}_1", nrows, [(rows3, product, 1), (rows3, z, -ub)], hi=0)
        self.add(f"{name}_2", nrows, [(rows3, product, 1), (rows3, factor, -1)], hi=0)
        self.add(f"{name}_3", nrows, [(rows3, product, 1), (rows3, factor, -1), (rows3, z, -ub)],
                 lo=-np.broadcast_to(ub, shape3).ravel())

    def square_tangents(self, vq: np.ndarray) -> None:
        """(eq. 16) ``c^2 >= (2q+1) c - q(q+1)`` for integer ``c``, at ``q`` in
        ``{I-1, Cmax/4, Cmax/2, Cmax-1}``."""
        d, s, pw = self.d, self.s, self.powers
        for k, at in enumerate((d.I - 1, d.Cmax // 4, d.Cmax // 2, d.Cmax - 1)):
            q = np.maximum(at, 0)[:, None].astype(float)
            self.add(f"sq_tan_{k}", self.n_cells, [(self.cell[:, :, None], vq, pw),
                                                   (self.cell, s.tokens, -(2 * q + 1))],
                     lo=self.cells(-q * (q + 1)))

    def phase_products(self) -> None:
        """(eq. 10) ``pm = pre m_before`` (priced by ``kpl``) and ``dm = dec m_before`` (priced
        by ``kdm``, and subtracted from ``c m`` for ``kpm``), exact McCormick with bound ``U``."""
        d, s = self.d, self.s
        if not d.unit_cost and d.ks["kpl"] > 0:
            self.v["pm"] = self.md.add_vars("pm", d.shape)
        if not d.unit_cost and (d.ks["kdm"] > 0 or (d.ks["kpm"] > 0 and not self.telescope)):
            self.v["dm"] = self.md.add_vars("dm", d.shape)
        ub = np.broadcast_to(d.U_col, d.shape) if d.tight else d.BIG
        for name, phase in (("pm", s.pre), ("dm", s.dec)):
            if name not in self.v:
                continue
            product = self.v[name].ids
            self.add_cells(f"{name}_1", [(product, 1), (phase, -ub)], hi=0)
            self.add_cells(f"{name}_2", [(product, 1), (s.m_before, -1)], hi=0)
            self.add_cells(f"{name}_3", [(product, 1), (s.m_before, -1), (phase, -ub)],
                           lo=-np.broadcast_to(ub, d.shape).ravel())

    def batch_time(self) -> None:
        """(eq. 11) ``t_j`` = the cost model term by term (``UnitCost``: ``t = y``)."""
        d, s, v, ks = self.d, self.s, self.v, self.d.ks
        per_batch, batch = self.batch_sum, self.batch_row
        # the telescoped prefill (eqs. 24-26) prices a whole residency segment, kpq P^2, in the
        # batch that ends it, which may exceed any one batch's true duration (a 2,048-token
        # prompt chunked at C = 256 was infeasible under the bound); offline makespan is
        # sum_j t_j, so no row needs it there
        ub = np.inf if self.telescope else _tmax(d.inst, d.k) * d.scale
        t = self.md.add_vars("t", d.J, ub=ub)
        v["t"] = t
        terms: list[tuple[Any, Any, Any]] = [(batch, t.ids, 1.0), (batch, v["y"].ids, -ks["k0"])]
        if not d.unit_cost:
            terms += [(per_batch, s.tokens, -ks["k1"]), (per_batch, s.pre, -ks["kpr"]),
                      (per_batch, s.dec, -ks["kdr"])]
            if "qq" in v:
                terms += [(per_batch, v["qq"].ids, -1.0)]
            if "vq" in v:  # kpq (sum c^2 - sum dec)
                terms += [(per_batch[:, :, None], v["vq"].ids, -ks["kpq"] * self.powers),
                          (per_batch, s.dec, ks["kpq"])]
            if "w" in v:  # kpm (sum c m - sum dm)
                terms += [(per_batch[:, :, None], v["w"].ids, -ks["kpm"] * self.powers),
                          (per_batch, _built(v.get("dm"), "dm (w needs it)").ids, ks["kpm"])]
            if "pm" in v:
                terms += [(per_batch, v["pm"].ids, -ks["kpl"])]
            if "dm" in v and ks["kdm"]:
                terms += [(per_batch, v["dm"].ids, -ks["kdm"])]
            if ks["kpb"]:
                terms += [(batch, _built(v.get("ap"), "ap (kpb > 0)").ids, -ks["kpb"])]
            if ks["kdb"]:
                terms += [(batch, _built(v.get("ad"), "ad (kdb > 0)").ids, -ks["kdb"])]
        self.add("time", d.J, terms, 0, 0)

    @property
    def latest_end(self) -> np.ndarray:
        """``BT_j = max_i a_i + (j+1) tmax`` (model units): no optimal schedule ends batch ``j``
        later (eq. 12); the plain variant uses ``BT_{J-1}`` throughout (eq. P4)."""
        d = self.d
        tmax = _tmax(d.inst, d.k) * d.scale
        bt = tmax * (np.arange(d.J) + 1) + float((d.inst.arrival * d.scale).max(initial=0.0))
        return bt if d.tight else np.full(d.J, float(bt[-1]))

    def clock(self) -> None:
        """(eq. 12, the paper's ``Acc_j``) batch ends; online: ``start_j >= end_{j-1}``,
        ``start_j >= a_i (x + e)``, ``end_j = start_j + t_j``; offline ``end_j = end_{j-1} +
        t_j``. Offline makespan needs no clock (it is ``sum_j t_j``)."""
        d, s, batch, t = self.d, self.s, self.batch_row, self.v["t"].ids
        if not d.online and d.objective == Objective.MAKESPAN:
            return
        bt = self.latest_end
        end = self.md.add_vars("end", d.J, ub=bt)
        self.v["end"] = end
        if not d.online:
            self.add("clock_end", d.J, [(batch, end.ids, 1), (batch[1:], end.ids[:-1], -1),
                                        (batch, t, -1)], 0, 0)
            return
        start = self.md.add_vars("start", d.J, ub=bt)
        self.v["start"] = start
        self.add("clock_end", d.J, [(batch, end.ids, 1), (batch, start.ids, -1), (batch, t, -1)],
                 0, 0)
        self.add("clock_prev", d.J - 1, [(batch[:-1], start.ids[1:], 1),
                                         (batch[:-1], end.ids[:-1], -1)], lo=0)
        arrival = d.inst.arrival * d.scale
        has = np.flatnonzero(arrival > 0)
        if has.size:
            rows = _elem((has.size, d.J))
            self.add("clock_arr", has.size * d.J,
                     [(rows, np.broadcast_to(start.ids[None, :], (has.size, d.J)), 1),
                      (rows, s.entry[has], -arrival[has][:, None]),
                      (rows, s.evict[has], -arrival[has][:, None])], lo=0)

    def objective(self) -> tuple[np.ndarray, np.ndarray, float]:
        """(eq. 12) the objective: makespan ``end_{J-1}`` (``sum_j t_j`` offline); total latency
        / mean TTFT through ``comp_i`` / ``first_i >= end_j - BT_j (1 - ind_after + ind_before)``
        with ``ind`` = ``fin`` / ``ftk``. Returns the objective as ``(cols, coefs, constant)``."""
        d, v = self.d, self.v
        if d.objective == Objective.MAKESPAN:
            if "end" in v:
                cols, coefs, const = np.atleast_1d(v["end"].ids[d.J - 1]), np.ones(1), 0.0
            else:
                cols, coefs, const = v["t"].ids, np.ones(d.J), 0.0
        else:
            which = "comp" if d.objective == Objective.TOTAL_LATENCY else "first"
            cols, coefs, const = self.completion_times(which)
        self.md.set_objective(cols, coefs, constant=const)
        return cols, coefs, const

    def completion_times(self, which: str) -> tuple[np.ndarray, np.ndarray, float]:
        """(eq. 12) ``comp_i`` (``which="comp"``, by ``fin``) or ``first_i`` (by ``ftk``) and
        the objective over them: their sum (total latency) or mean (mean TTFT) minus arrivals."""
        d, v, n = self.d, self.v, self.d.n
        bt = self.latest_end
        arrival = d.inst.arrival * d.scale
        indicator = v["fin"] if which == "comp" else v["ftk"]
        tv = self.md.add_vars(which, n, lb=arrival, ub=float(bt[-1]))
        v[which] = tv
        # tv_i >= end_j - bt_j (1 - (ind_after - ind_before))
        self.add_cells(f"{which}_def", [(np.broadcast_to(tv.ids[:, None], d.shape), 1),
                                        (np.broadcast_to(v["end"].ids[None, :], d.shape), -1),
                                        (indicator.ids[:, 1:], -bt[None, :]),
                                        (indicator.ids[:, :-1], bt[None, :])],
                       lo=np.broadcast_to(-bt[None, :], d.shape).ravel())
        div = 1.0 if which == "comp" else float(n)
        return tv.ids, np.full(n, 1.0 / div), -float(arrival.sum()) / div

    def hypotheses(self, objective: tuple[np.ndarray, np.ndarray, float]) -> None:
        """Hypotheses H1-H5 (``e = 0`` is a bound): ``at_most`` bounds the objective row;
        force / forbid fix ``x[i, j]``; order: ``fin[a, j] >= fin[b, j]`` for every ``j``."""
        d, md, J, inst = self.d, self.md, self.d.J, self.d.inst
        hyp, fin, entry = d.hyp, self.v["fin"].ids, self.s.entry
        if hyp.at_most is not None:
            cols, coefs, const = objective
            self.add("at_most", 1, [(np.zeros(len(cols), np.int64), cols, coefs)],
                     hi=hyp.at_most * d.scale - const)
        for rid, j in hyp.force:
            if j >= J:
                raise FormulationError(f"force {rid}@{j}: the model has only J = {J} batches")
            self.add(f"force_{len(md.groups)}", 1, [(0, entry[inst.index[rid], j], 1)], lo=1)
        for rid, j in hyp.forbid:
            if j < J:
                self.add(f"forbid_{len(md.groups)}", 1, [(0, entry[inst.index[rid], j], 1)], hi=0)
        for a, b in hyp.order:
            ia, ib = inst.index[a], inst.index[b]
            self.add(f"order_{len(md.groups)}", J, [(self.batch_row, fin[ia, 1:], 1),
                                                    (self.batch_row, fin[ib, 1:], -1)], lo=0)

    # -- section 3: tight only, eqs. 13-23 --------------------------------------------------
    def dominance(self) -> None:
        """(eq. 13) evict only a caught-up request (``g >= 1``, ``m_before == S_before - 1``),
        hence ``ev >= I e``."""
        s, I_col, U_col = self.s, self.d.I_col, self.d.U_col
        self.add_cells("dom_h", [(s.evict, 1), (s.ftk_before, -1)], hi=0)
        self.add_cells("dom_a", [(s.g_before, 1), (s.m_before, -1), (s.evict, U_col - 1)],
                       hi=self.cells(1 - I_col + U_col - 1))
        self.add_cells("ev_ge_I", [(self.v["ev"].ids, 1), (s.evict, -I_col)], lo=0)

    def symmetry(self) -> None:
        """(eq. 14) identical requests not named by a hypothesis finish in index order."""
        fin = self.v["fin"].ids
        for group in self.d.symmetry:
            for a, b in zip(group[:-1], group[1:]):
                self.add(f"sym_{a}_{b}", self.d.J, [(self.batch_row, fin[a, 1:], 1),
                                                    (self.batch_row, fin[b, 1:], -1)], lo=0)

    def contiguity(self) -> None:
        """(eq. 15) ``act_j`` = batch ``j`` has an entry or an eviction; used slots come first."""
        d, s, batch = self.d, self.s, self.batch_row
        act = self.md.add_vars("act", d.J, vtype="B")
        self.v["act"] = act
        every = np.broadcast_to(act.ids[None, :], d.shape)
        self.add_cells("act_x", [(every, 1), (s.entry, -1)], lo=0)
        self.add_cells("act_e", [(every, 1), (s.evict, -1)], lo=0)
        self.add("act_le", d.J, [(batch, act.ids, 1), (self.batch_sum, s.entry, -1),
                                 (self.batch_sum, s.evict, -1)], hi=0)
        self.add("act_mono", d.J - 1, [(batch[:-1], act.ids[:-1], 1),
                                       (batch[:-1], act.ids[1:], -1)], lo=0)

    def entry_counts(self) -> None:
        """(eq. 17) ``sum_j x >= O``, ``sum_j c - sum_j ev = U``; (eq. 18) ``sum_j dec + sum_j e
        >= O - 1``, ``sum_j pre - sum_j e >= 1``."""
        d, s, per_request = self.d, self.s, self.request_sum
        ev = self.v["ev"].ids
        self.add("n_entries", d.n, [(per_request, s.entry, 1)], lo=d.O)
        self.add("tokens_total", d.n, [(per_request, s.tokens, 1), (per_request, ev, -1)],
                 lo=d.U, hi=d.U)
        self.add("n_dec", d.n, [(per_request, s.dec, 1), (per_request, s.evict, 1)], lo=d.O - 1)
        self.add("n_pre", d.n, [(per_request, s.pre, 1), (per_request, s.evict, -1)], lo=1)

    def memory_floors(self) -> None:
        """(eq. 19) ``m_before >= I dec``; ``m_after >= U`` in the finishing batch;
        ``m_after >= c``; ``gen >= dec``; ``m_after >= I gen``."""
        s, I_col, U_col = self.s, self.d.I_col, self.d.U_col
        self.add_cells("dec_m", [(s.m_before, 1), (s.dec, -I_col)], lo=0)
        self.add_cells("fin_m", [(s.m_after, 1), (s.fin_after, -U_col), (s.fin_before, U_col)],
                       lo=0)
        self.add_cells("m_ge_c", [(s.m_after, 1), (s.tokens, -1)], lo=0)
        self.add_cells("gen_ge_dec", [(s.gen, 1), (s.dec, -1)], lo=0)
        self.add_cells("m_ge_gen", [(s.m_after, 1), (s.gen, -I_col)], lo=0)

    def memory_cliques(self) -> None:
        """(eq. 20) KV is held only in active slots; at most ``K_dec`` decode entries and
        ``K_fin`` finishing requests per batch (the most minimal footprints that fit in M)."""
        d, s, per_batch, batch = self.d, self.s, self.batch_sum, self.batch_row
        lim, y = d.inst.limits, self.v["y"].ids
        if d.compact and lim.block_size == 1:  # memory is only held in active batch slots
            self.add("M_act", d.J, [(per_batch, s.m_after, 1), (per_batch, s.fin_before, -d.U_col),
                                    (batch, self.v["act"].ids, -lim.kv_capacity)], hi=0)
        k_dec = _knapsack_count(d.I + 1, lim.kv_capacity, lim)
        k_fin = _knapsack_count(d.U, lim.kv_capacity, lim)
        if k_dec < d.n:
            self.add("clique_dec", d.J, [(per_batch, s.dec, 1), (batch, y, -k_dec)], hi=0)
        if k_fin < d.n:
            self.add("clique_fin", d.J, [(per_batch, s.fin_after, 1), (per_batch, s.fin_before, -1),
                                         (batch, y, -k_fin)], hi=0)

    def phase_indicators(self) -> None:
        """(eq. 22) every batch with an entry has a prefill or a decode entry: ``ap + ad >= y``,
        ``ap, ad <= y``."""
        batch, y = self.batch_row, self.v["y"].ids
        ap = _built(self.v.get("ap"), "ap (tight)").ids
        ad = _built(self.v.get("ad"), "ad (tight)").ids
        self.add("y_phase", self.d.J, [(batch, ap, 1), (batch, ad, 1), (batch, y, -1)], lo=0)
        self.add("ap_y", self.d.J, [(batch, ap, 1), (batch, y, -1)], hi=0)
        self.add("ad_y", self.d.J, [(batch, ad, 1), (batch, y, -1)], hi=0)

    def busy_time(self, ub: float | None) -> None:
        """Offline makespan: (eq. 21) busy time >= unavoidable work + per-batch overhead, and
        (eq. 23) ``sum_j t_j <= UB`` for a known upper bound."""
        d = self.d
        if d.objective != Objective.MAKESPAN or d.online:
            return
        t, y = self.v["t"].ids, self.v["y"].ids
        work = float(request_work_lower_bound(d.inst).sum()) * d.scale
        overhead = batch_overhead_lower_bound(d.inst) * d.scale
        self.add("busy_lb", 1, [(0, t, 1), (0, y, -overhead)], lo=work)
        if ub is not None:
            self.add("busy_ub", 1, [(0, t, 1)], hi=ub * d.scale * (1 + 1e-9))


def build(inst: Instance, objective: str = "makespan", hyp: Hypotheses | None = None, *,
          J: int, variant: str = "tight", ub: float | None = None,
          restricted: bool = True) -> InfermaxModel:
    """Build the InferMax MILP with ``J`` batch slots (``formulations/infermax.md``): the rows
    of section 2 (eqs. 1-12, plain: P1-P6), the hypotheses, and for the tight variant the
    restriction, symmetry and valid inequalities of section 3 (eqs. 13-26).

    ``ub`` (seconds, optional) is a known objective upper bound used only by the tight
    variant to tighten time constants; ``restricted`` says whether ``J`` may cut off the
    optimum (section 4), for :attr:`RawSolution.restricted`.
    """
    hyp = hyp or Hypotheses()
    refuse_swaps("infermax", inst)
    refuse_prefix_reuse("infermax", inst)
    if variant not in VARIANTS:
        raise FormulationError(f"infermax: unknown variant {variant!r}; choose plain or tight")
    d = _model_data(inst, objective, hyp, J, variant)
    b = _InfermaxBuilder(d, variant)
    b.paper_families()
    if d.tight:
        _tight_rows(b, ub)
    notes = []
    if b.telescope:
        notes.append("tight: quadratic prefill cost priced per residency segment "
                     "(kpm = 2 kpq telescoping, eqs. 24-26)")
    return InfermaxModel(inst, objective, variant, J, d.scale, b.md, b.v, d.online, d.dominance,
                         d.symmetry, d.compact, b.bits, d.ks["kpq"], tuple(notes), restricted)


def _tight_rows(b: _InfermaxBuilder, ub: float | None) -> None:
    """The tight variant's restriction, symmetry breaking and valid inequalities (eqs. 13-23)."""
    if b.d.dominance:
        b.dominance()
    b.symmetry()
    if b.d.compact:
        b.contiguity()
    b.entry_counts()
    b.memory_floors()
    b.memory_cliques()
    b.phase_indicators()
    b.busy_time(ub)


def _knapsack_count(sizes: np.ndarray, cap: int, limits: Limits) -> int:
    """Most items (smallest first) whose block-rounded sizes fit in ``cap`` (eq. 20)."""
    s = np.sort(limits.kv_footprint(np.asarray(sizes)))
    return int(np.searchsorted(np.cumsum(s), cap, side="right"))


def _tmax(inst: Instance, k: dict[str, float]) -> float:
    """Upper bound on one batch's duration (seconds)."""
    if isinstance(inst.cost_model, UnitCost):
        return 1.0
    C = inst.limits.max_batch_tokens
    n = inst.n
    Umax = float((inst.prompt + inst.output - 1).max())
    return (k["k0"] + k["kpb"] + k["kdb"] + k["k1"] * C + k["kpq"] * C * C
            + k["kpm"] * C * Umax + k["kpl"] * n * Umax + k["kpr"] * n
            + k["kdm"] * n * Umax + max(k["kdr"], 0.0) * n)


if TYPE_CHECKING:  # mypy checks that the model satisfies the solve path's protocol
    _built_model: type[BuiltModel] = InfermaxModel
