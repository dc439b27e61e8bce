"""InferMax's Big-M batch-indexed MILP (paper section 5), exact, in two variants.

The mathematics, with the equation numbers cited below, is in ``formulations/infermax.md``.

* ``variant="plain"`` -- a faithful transcription of the paper's model: one blanket big-M
  for every conditional constraint, aggregated batch indicators, no cuts (the speed
  baseline, eqs. P1-P6).
* ``variant="tight"`` (default) -- the same decision space priced the same way, with
  per-constraint constants from the instance (eqs. 1-12), exact McCormick products, the
  dominance restriction on evictions (eq. 13), symmetry breaking for identical requests
  (eq. 14) and valid inequalities (eqs. 15-23).

Both price every batch exactly as :mod:`optsched.evaluate` does (the quadratic prefill terms
are linearised exactly by a binary expansion of ``c``, eq. 9), so ``RawSolution.exact`` is
True. The horizon ``J`` (batch slots) is a restriction unless the notes say otherwise
(``formulations/infermax.md`` section 6).

Public helpers: :func:`build` -> :class:`InfermaxModel` with ``encode(schedule)``,
``decode(values)`` and ``canonical(schedule)``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .. import milp
from ..cost import LinearCost, UnitCost
from ..evaluate import evaluate
from ..instance import Instance, Limits
from ..plugins import ParamSpec, parse_params
from ..schedule import Schedule, ScheduleBuilder
from ..solve_types import WarmStart
from .base import (
    FormulationError,
    Hypotheses,
    RawSolution,
    SolveOptions,
    refuse_swaps,
    register_formulation,
)

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


def _cost_coefs(cost) -> dict[str, float]:
    if isinstance(cost, UnitCost):
        return {"k0": 1.0}
    if isinstance(cost, LinearCost):
        return cost.coefficients
    raise FormulationError(f"infermax: unsupported cost model {type(cost).__name__}")


def request_work_lower_bound(inst: Instance) -> np.ndarray:
    """Per request, a lower bound on the summed entry costs in ANY feasible schedule (eq. 21)."""
    k = _cost_coefs(inst.cost_model)
    g = lambda name: k.get(name, 0.0)  # noqa: E731
    if isinstance(inst.cost_model, UnitCost):
        return np.zeros(inst.n)
    I = inst.prompt.astype(float)
    O = inst.output.astype(float)
    # first prefill: sum c = I, sum c*m = (I^2 - sum c^2)/2, sum c^2 in [I, I^2]
    a = g("kpq") - g("kpm") / 2
    sq = np.where(a >= 0, I, I * I)
    quad = a * sq + g("kpm") * I * I / 2
    per_gen_i = np.minimum(g("kdr") + g("kdm") * I, g("kpr"))
    return g("k1") * (I + O - 1) + g("kpr") + quad + (O - 1) * per_gen_i


def _built(block: milp.VarBlock | None, what: str) -> milp.VarBlock:
    """``block``, which the builder created for the reason ``what`` names."""
    if block is None:
        raise FormulationError(f"infermax build: variable block {what} was not created")
    return block


def batch_overhead_lower_bound(inst: Instance) -> float:
    """Every batch with an entry costs at least this beyond its entries (eq. 21)."""
    if isinstance(inst.cost_model, UnitCost):
        return 1.0
    if not isinstance(inst.cost_model, LinearCost):
        raise FormulationError(f"infermax: unsupported cost model {type(inst.cost_model).__name__}")
    k = inst.cost_model.coefficients
    return k["k0"] + min(k["kpb"], k["kdb"])


def entry_batches_upper_bound(inst: Instance, objective: str, ub: float | None) -> int | None:
    """Max number of batches with entries in a schedule whose objective is <= ub (sec. 6)."""
    if ub is None or not math.isfinite(ub):
        return None
    ovh = batch_overhead_lower_bound(inst)
    if ovh <= 0:
        return None
    if objective == "makespan":
        busy = ub
    elif objective == "total-latency":
        busy = ub + float(inst.arrival.max(initial=0.0))
    else:
        return None
    work = float(request_work_lower_bound(inst).sum())
    return max(0, int(math.floor((busy - work) / ovh + 1e-9)))


# ----------------------------------------------------------------------------- replay
@dataclass(frozen=True, eq=False)
class _Replay:
    """Per (request, batch) state of a schedule (semantics section 3), model-shaped."""

    x: np.ndarray
    c: np.ndarray
    e: np.ndarray
    gen: np.ndarray
    dec: np.ndarray
    m: np.ndarray  # (n, J+1): m[:, j] before batch j
    g: np.ndarray  # (n, J+1)
    end: np.ndarray  # (J,) seconds
    start: np.ndarray  # (J,)
    dur: np.ndarray


def _replay(inst: Instance, s: Schedule, J: int) -> _Replay:
    n = inst.n
    if s.n_batches > J:
        raise FormulationError(f"schedule has {s.n_batches} batches > the model's J = {J}")
    ev = evaluate(inst, s)
    if not ev.feasible:
        raise FormulationError("cannot encode an infeasible schedule: "
                               + "; ".join(str(v) for v in ev.violations[:3]))
    idx = np.array([inst.index[r] for r in s.ids], dtype=np.int64)
    x = np.zeros((n, J), bool)
    c = np.zeros((n, J), np.int64)
    e = np.zeros((n, J), bool)
    gen = np.zeros((n, J), bool)
    dec = np.zeros((n, J), bool)
    m = np.zeros((n, J + 1), np.int64)
    g = np.zeros((n, J + 1), np.int64)
    I, O = inst.prompt, inst.output
    cur_m = np.zeros(n, np.int64)
    cur_g = np.zeros(n, np.int64)
    for j in range(s.n_batches):
        m[:, j], g[:, j] = cur_m, cur_g
        for r in idx[s.evict_req[s.evict_ptr[j]:s.evict_ptr[j + 1]]]:
            e[r, j] = True
            cur_m[r] = 0
        a, b = s.batch_ptr[j], s.batch_ptr[j + 1]
        for k in range(a, b):
            r = idx[s.entry_req[k]]
            tok = int(s.entry_tokens[k])
            S = I[r] + cur_g[r]
            x[r, j] = True
            c[r, j] = tok
            dec[r, j] = cur_g[r] >= 1 and cur_m[r] == S - 1
            if bool(dec[r, j]) != bool(ev.entry_decode[k]) or cur_m[r] != ev.entry_cached[k]:
                raise FormulationError("internal: replay disagrees with the evaluator")
            cur_m[r] += tok
            if cur_m[r] == S:
                gen[r, j] = True
                cur_g[r] += 1
    m[:, s.n_batches:], g[:, s.n_batches:] = cur_m[:, None], cur_g[:, None]
    if not np.all(cur_g == O):
        raise FormulationError("internal: replay does not finish every request")
    pad = J - s.n_batches
    end = np.concatenate([ev.batch_end, np.full(pad, ev.batch_end[-1] if s.n_batches else 0.0)])
    start = np.concatenate([ev.batch_start, end[s.n_batches:]])
    dur = np.concatenate([ev.batch_duration, np.zeros(pad)])
    return _Replay(x, c, e, gen, dec, m, g, end, start, dur)


def canonical(inst: Instance, s: Schedule, *, dominance: bool = True,
              symmetry: list[list[int]] | None = None, compact: bool = True) -> Schedule:
    """A schedule at least as good as ``s`` that the tight model can represent (eqs. 13-15).

    * dominance: an eviction of a request whose current residency segment generated no
      token is deleted together with that segment's entries (section 4.1's argument);
    * symmetry: identical requests are relabelled so they complete in index order (eq. 14);
    * compact: batches with neither entries nor evictions are dropped (eq. 15).
    """
    batches = [[list(b.entries), list(b.evict), b.start] for b in s]
    if dominance:
        I = {r.id: r.prompt for r in inst.requests}
        changed = True
        while changed:
            changed = False
            m = {r: 0 for r in I}
            g = {r: 0 for r in I}
            seg: dict[str, list[int]] = {r: [] for r in I}  # batches of the current segment
            gen_in_seg = {r: False for r in I}
            for j, (entries, evict, _) in enumerate(batches):
                for r in evict:
                    if not gen_in_seg[r]:
                        for jj in seg[r]:
                            batches[jj][0] = [(q, t) for q, t in batches[jj][0] if q != r]
                        batches[j][1] = [q for q in batches[j][1] if q != r]
                        changed = True
                        break
                    m[r], seg[r], gen_in_seg[r] = 0, [], False
                if changed:
                    break
                for r, t in entries:
                    S = I[r] + g[r]
                    seg[r].append(j)
                    m[r] += t
                    if m[r] == S:
                        g[r] += 1
                        gen_in_seg[r] = True
    if compact:
        batches = [b for b in batches if b[0] or b[1]]
    b = ScheduleBuilder(inst.ids)
    for entries, evict, start in batches:
        b.add(entries, evict, start)
    out = b.build()
    if symmetry:
        comp_batch = {k: _finish_batch(out, rid, inst) for k, rid in enumerate(inst.ids)}
        rename: dict[str, str] = {}
        for grp in symmetry:
            order = sorted(grp, key=lambda k: (comp_batch[k], k))
            for new, old in zip(grp, order):
                rename[inst.ids[old]] = inst.ids[new]
        if any(a != b_ for a, b_ in rename.items()):
            bb = ScheduleBuilder(inst.ids)
            for bt in out:
                bb.add([(rename.get(r, r), t) for r, t in bt.entries],
                       [rename.get(r, r) for r in bt.evict], bt.start)
            out = bb.build()
    return out


def _finish_batch(s: Schedule, rid: str, inst: Instance) -> int:
    r = inst.request(rid)
    m = g = 0
    for j, bt in enumerate(s):
        if rid in bt.evict:
            m = 0
        for q, t in bt.entries:
            if q == rid:
                S = r.prompt + g
                m += t
                if m == S:
                    g += 1
                    if g == r.output:
                        return j
    return s.n_batches


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
    v: dict[str, Any]
    online: bool
    dominance: bool
    symmetry: list[list[int]]
    compact: bool
    bits: int
    kpq_scaled: float = 0.0
    notes: tuple[str, ...] = field(default=())

    # -- schedules -> values -------------------------------------------------------------
    def canonical(self, s: Schedule) -> Schedule:
        if self.variant == "plain":
            return s
        return canonical(self.instance, s, dominance=self.dominance, symmetry=self.symmetry,
                         compact=self.compact)

    def encode(self, s: Schedule) -> np.ndarray:
        """Full column vector for ``s`` (tight variant: ``s`` must be canonical)."""
        refuse_swaps("infermax", schedule=s)
        inst, J, v = self.instance, self.J, self.v
        rp = _replay(inst, s, J)
        O = inst.output[:, None]
        vals: dict[str, Any] = {}  # arrays or numpy scalars; start_vector takes np.asarray of each
        mb = rp.m[:, :-1]
        ma = rp.m[:, 1:]
        ma = rp.m[:, 1:]
        vals["x"] = rp.x
        vals["c"] = rp.c
        vals["e"] = rp.e
        vals["gen"] = rp.gen
        vals["dec"] = rp.dec
        vals["pre"] = rp.x & ~rp.dec
        vals["m"] = rp.m
        vals["g"] = rp.g
        vals["fin"] = rp.g >= O
        vals["ftk"] = rp.g >= 1
        if "ev" in v:
            vals["ev"] = rp.e * mb
        if "z" in v:
            bits = (rp.c[:, :, None] >> np.arange(self.bits)) & 1
            vals["z"] = bits
            if "w" in v:
                vals["w"] = bits * mb[:, :, None]
            if "vq" in v:
                vals["vq"] = bits * rp.c[:, :, None]
        if "pm" in v:
            vals["pm"] = vals["pre"] * mb
        if "dm" in v:
            vals["dm"] = rp.dec * mb
        if "kb" in v:
            b = inst.limits.block_size
            vals["kb"] = -(-ma // b)
        vals["y"] = rp.x.any(axis=0)
        if "act" in v:
            vals["act"] = rp.x.any(axis=0) | rp.e.any(axis=0)
        if "ap" in v:
            vals["ap"] = vals["pre"].any(axis=0)
        if "ad" in v:
            vals["ad"] = rp.dec.any(axis=0)
        if "cu" in v:
            ga = rp.g[:, 1:]
            I_ = inst.prompt[:, None]
            vals["cu"] = (ma == I_ + ga - 1) & (ga >= 1)
            vals["ce"] = vals["pre"] & vals["cu"]
            vals["qq"] = self.kpq_scaled * vals["ce"] * ma.astype(float) ** 2
        vals["t"] = rp.dur * self.scale
        if "end" in v:
            vals["end"] = rp.end * self.scale
        if "start" in v:
            vals["start"] = rp.start * self.scale
        if "comp" in v or "first" in v:
            ev = evaluate(inst, s)
            if "comp" in v:
                vals["comp"] = ev.completion * self.scale
            if "first" in v:
                vals["first"] = ev.first_token * self.scale
        x = self.model.start_vector({k: np.asarray(a, float) for k, a in vals.items()})
        if "qq" in v:  # telescoped pricing moves cost between batches: t from its own row
            a = self.model.arrays()
            rows = self.model.group("time").rows
            xt = x.copy()
            xt[v["t"].ids] = 0.0
            act = np.array([a.data[a.indptr[r]:a.indptr[r + 1]]
                            @ xt[a.indices[a.indptr[r]:a.indptr[r + 1]]] for r in rows])
            x[v["t"].ids] = -act
        return x

    # -- values -> schedule -------------------------------------------------------------
    def decode(self, values: np.ndarray) -> Schedule:
        """The schedule the solution describes (stated starts only where the model idles)."""
        inst, md = self.instance, self.model
        x = np.asarray(md.value("x", values)) > 0.5
        c = np.asarray(md.value("c", values)).astype(np.int64)
        e = np.asarray(md.value("e", values)) > 0.5
        J = self.J
        active = np.asarray(x.any(axis=0) | e.any(axis=0))
        starts = np.full(J, np.nan)
        if "start" in self.v:
            mstart = np.asarray(md.value("start", values)) / self.scale
            mdur = np.asarray(md.value("t", values)) / self.scale
            prev_end = 0.0
            arr = inst.arrival
            for j in range(J):
                touched = x[:, j] | e[:, j]
                earliest = max(prev_end, float(arr[touched].max(initial=0.0)))
                s_j = earliest
                if mstart[j] > earliest + 1e-7 * max(1.0, abs(earliest)):
                    s_j = float(mstart[j])
                    starts[j] = s_j
                prev_end = s_j + max(float(mdur[j]), 0.0)
        last = -1
        for j in range(J):
            if active[j] or not math.isnan(starts[j]):
                last = j
        b = ScheduleBuilder(inst.ids)
        ids = inst.ids
        for j in range(last + 1):
            entries = [(ids[i], int(c[i, j])) for i in np.flatnonzero(x[:, j])]
            evict = [ids[i] for i in np.flatnonzero(e[:, j])]
            st = None if math.isnan(starts[j]) else float(starts[j])
            b.add(entries, evict, st)
        return b.build()


def build(inst: Instance, objective: str = "makespan", hyp: Hypotheses | None = None, *,
          J: int, variant: str = "tight", ub: float | None = None) -> InfermaxModel:
    """Build the InferMax MILP with ``J`` batch slots (``formulations/infermax.md``).

    ``ub`` (seconds, optional) is a known objective upper bound used only by the tight
    variant to tighten time constants.
    """
    hyp = hyp or Hypotheses()
    refuse_swaps("infermax", inst)
    if variant not in VARIANTS:
        raise FormulationError(f"infermax: unknown variant {variant!r}; choose plain or tight")
    tight = variant == "tight"
    n = inst.n
    lim = inst.limits
    Cb, Mcap = lim.max_batch_tokens, lim.kv_capacity
    P = lim.max_prefill_tokens
    blk = lim.block_size
    I = inst.prompt.astype(np.int64)
    O = inst.output.astype(np.int64)
    U = I + O - 1
    arr = inst.arrival.astype(float)
    online = bool(np.any(arr > 0))
    unit = isinstance(inst.cost_model, UnitCost)
    k = _cost_coefs(inst.cost_model)
    kk = {name: k.get(name, 0.0) for name in
          ("k0", "k1", "kpq", "kpm", "kdm", "kpr", "kdr", "kpl", "kpb", "kdb")}
    # time scale: one small prefill batch ~ 1 model unit (keeps solver tolerances relative)
    if unit:
        scale = 1.0
    else:
        ref = kk["k0"] + kk["k1"] + kk["kpq"] + kk["kpr"] + kk["kpb"]
        scale = 1.0 / ref if ref > 0 else 1.0
    ks = {name: val * scale for name, val in kk.items()}
    Cmax = np.minimum(np.minimum(Cb, P if P is not None else Cb), U)  # per request, eq. 4
    Umax = int(U.max())
    BIG = float(max(Mcap, Cb, Umax + 1))  # plain: one blanket constant (eq. P1)

    named = {r for r, _ in (*hyp.force, *hyp.forbid)} | {r for pair in hyp.order for r in pair}
    dominance = tight and not hyp.force and not hyp.order
    compact = tight and not hyp.force and not hyp.forbid
    symmetry = _identical_groups(inst, named) if tight else []

    md = milp.Model(f"infermax_{variant}")
    R = _Rows(md)
    nJ = (n, J)
    E2 = _elem(nJ)
    pj = np.arange(J)[None, :]  # per-batch sum rows
    pi = np.arange(n)[:, None]  # per-request sum rows
    Ic, Oc, Uc, Cc_ = I[:, None], O[:, None], U[:, None], Cmax[:, None]

    # ---- variables (eq. 1) ---------------------------------------------------------------
    x = md.add_vars("x", nJ, vtype="B")
    c = md.add_vars("c", nJ, ub=np.broadcast_to(Cc_, nJ), vtype="I")
    e_ub = 0.0 if hyp.no_evictions else 1.0
    e = md.add_vars("e", nJ, ub=e_ub, vtype="B")
    gen = md.add_vars("gen", nJ, vtype="B")
    dec = md.add_vars("dec", nJ, vtype="B")
    pre = md.add_vars("pre", nJ, vtype="B")
    m_lb = np.zeros((n, J + 1))
    m_ub = np.broadcast_to(Uc, (n, J + 1)).astype(float).copy()
    m_ub[:, 0] = 0
    m = md.add_vars("m", (n, J + 1), lb=m_lb, ub=m_ub)
    g_lb = np.zeros((n, J + 1))
    g_ub = np.broadcast_to(Oc, (n, J + 1)).astype(float).copy()
    g_ub[:, 0] = 0
    g_lb[:, J] = O  # termination (eq. 5)
    g = md.add_vars("g", (n, J + 1), lb=g_lb, ub=g_ub)
    f_ub = np.ones((n, J + 1))
    f_ub[:, 0] = 0
    f_lb = np.zeros((n, J + 1))
    f_lb[:, J] = 1
    fin = md.add_vars("fin", (n, J + 1), lb=f_lb, ub=f_ub, vtype="B")
    ftk = md.add_vars("ftk", (n, J + 1), lb=f_lb, ub=f_ub, vtype="B")
    v: dict[str, Any] = dict(x=x, c=c, e=e, gen=gen, dec=dec, pre=pre, m=m, g=g, fin=fin, ftk=ftk)

    X, Cv, Ev_, Gen, Dec, Pre = x.ids, c.ids, e.ids, gen.ids, dec.ids, pre.ids
    Mb, Ma = m.ids[:, :-1], m.ids[:, 1:]
    Gb, Ga = g.ids[:, :-1], g.ids[:, 1:]
    Fb, Fa = fin.ids[:, :-1], fin.ids[:, 1:]
    Hb, Ha = ftk.ids[:, :-1], ftk.ids[:, 1:]
    NR = n * J

    def bigm(tight_val):
        """Per-constraint constant (tight) or the blanket BIG (plain)."""
        return tight_val if tight else BIG

    # ---- memory update (paper eq. (1); here eq. 2) -----------------------------------------
    if tight:
        evv = md.add_vars("ev", nJ)  # ev = e * m_before, exact McCormick (eq. 2b)
        v["ev"] = evv
        EV = evv.ids
        R.add("mem_update", NR, [(E2, Ma, 1), (E2, Mb, -1), (E2, EV, 1), (E2, Cv, -1)], 0, 0)
        R.add("ev_le_e", NR, [(E2, EV, 1), (E2, Ev_, -Uc)], hi=0)
        R.add("ev_le_m", NR, [(E2, EV, 1), (E2, Mb, -1)], hi=0)
        R.add("ev_ge", NR, [(E2, EV, 1), (E2, Mb, -1), (E2, Ev_, -Uc)], lo=-np.broadcast_to(Uc, nJ).ravel())
    else:
        R.add("p_mem_evict", NR, [(E2, Ma, 1), (E2, Ev_, BIG)], hi=BIG)
        R.add("p_mem_le", NR, [(E2, Ma, 1), (E2, Mb, -1), (E2, Cv, -1), (E2, Ev_, -BIG)], hi=0)
        R.add("p_mem_ge", NR, [(E2, Ma, 1), (E2, Mb, -1), (E2, Cv, -1), (E2, Ev_, BIG)], lo=0)

    # ---- tokens to process (paper eq. (2); eq. 3-4) ---------------------------------------
    R.add("c_ge_x", NR, [(E2, Cv, 1), (E2, X, -1)], lo=0)
    R.add("c_le_x", NR, [(E2, Cv, 1), (E2, X, -bigm(Cc_))], hi=0)
    if tight:
        R.add("x_or_e", NR, [(E2, X, 1), (E2, Ev_, 1)], hi=1)
        R.add("c_avail", NR, [(E2, Cv, 1), (E2, Mb, 1), (E2, Gb, -1)],
              hi=np.broadcast_to(Ic, nJ).ravel())
    else:
        R.add("p_c_evict", NR, [(E2, Cv, 1), (E2, Ev_, BIG)], hi=BIG)
        R.add("p_c_avail", NR, [(E2, Cv, 1), (E2, Mb, 1), (E2, Gb, -1), (E2, Ev_, -BIG)],
              hi=np.broadcast_to(Ic, nJ).ravel())
    # ---- token generation (paper eq. (3); eq. 5) ------------------------------------------
    # gen = 1  <=>  m_after == S_before = I + g_before  (m_after <= S_before always)
    R.add("gen_le", NR, [(E2, Ma, 1), (E2, Gb, -1), (E2, Gen, -1)],
          hi=np.broadcast_to(Ic - 1, nJ).ravel())
    Mg = bigm(Uc)
    R.add("gen_ge", NR, [(E2, Ma, 1), (E2, Gb, -1), (E2, Gen, -Mg)],
          lo=np.broadcast_to(Ic - Mg, nJ).ravel())
    R.add("seq_growth", NR, [(E2, Ga, 1), (E2, Gb, -1), (E2, Gen, -1)], 0, 0)
    if tight:
        R.add("gen_le_x", NR, [(E2, Gen, 1), (E2, X, -1)], hi=0)
    # ---- finished / first token indicators (eq. 6) ----------------------------------------
    R.add("fin_lo", NR, [(E2, Ga, 1), (E2, Fa, -Oc)], lo=0)
    R.add("fin_hi", NR, [(E2, Ga, 1), (E2, Fa, -1)], hi=np.broadcast_to(Oc - 1, nJ).ravel())
    R.add("ftk_lo", NR, [(E2, Ga, 1), (E2, Ha, -1)], lo=0)
    R.add("ftk_hi", NR, [(E2, Ga, 1), (E2, Ha, -bigm(Oc))], hi=0)
    R.add("x_after_fin", NR, [(E2, X, 1), (E2, Fb, 1)], hi=1)
    R.add("e_after_fin", NR, [(E2, Ev_, 1), (E2, Fb, 1)], hi=1)
    R.add("e_needs_kv", NR, [(E2, Ev_, 1), (E2, Mb, -1)], hi=0)
    if tight:
        R.add("fin_mono", NR, [(E2, Fa, 1), (E2, Fb, -1)], lo=0)
        R.add("ftk_mono", NR, [(E2, Ha, 1), (E2, Hb, -1)], lo=0)

    # ---- entry phase: decode iff g_before >= 1 and m_before == S_before - 1 (eq. 7) -------
    R.add("phase", NR, [(E2, Dec, 1), (E2, Pre, 1), (E2, X, -1)], 0, 0)
    R.add("dec_h", NR, [(E2, Dec, 1), (E2, Hb, -1)], hi=0)
    Md = bigm(Uc - 1)
    # dec => a = I + g_b - m_b <= 1
    R.add("dec_a", NR, [(E2, Gb, 1), (E2, Mb, -1), (E2, Dec, Md)],
          hi=np.broadcast_to(1 - Ic + Md, nJ).ravel())
    # pre => a >= 2 or h == 0:  a >= 2 pre + 2 h - 2
    R.add("pre_a", NR, [(E2, Gb, 1), (E2, Mb, -1), (E2, Pre, -2), (E2, Hb, -2)],
          lo=np.broadcast_to(-2 - Ic, nJ).ravel())

    # ---- batch constraints (paper eq. (4); eq. 8) -----------------------------------------
    R.add("C", J, [(pj, Cv, 1)], hi=Cb)
    if P is not None and P < Cb:
        R.add("P", J, [(pj, Cv, 1), (pj, Dec, -1)], hi=P)
    if lim.max_batch_size is not None:
        R.add("B", J, [(pj, X, 1)], hi=lim.max_batch_size)
    if blk == 1:
        R.add("M", J, [(pj, Ma, 1), (pj, Fb, -Uc)], hi=Mcap)
    else:
        Ublk = -(-U // blk)
        kb = md.add_vars("kb", nJ, ub=np.broadcast_to(Ublk[:, None], nJ), vtype="I")
        v["kb"] = kb
        R.add("kb_ge", NR, [(E2, kb.ids, blk), (E2, Ma, -1)], lo=0)
        R.add("M", J, [(pj, kb.ids, blk), (pj, Fb, -(blk * Ublk)[:, None])], hi=Mcap)

    # ---- batch indicators -----------------------------------------------------------------
    y = md.add_vars("y", J, vtype="B")
    v["y"] = y
    need_ap = ks["kpb"] > 0 or tight
    need_ad = ks["kdb"] > 0 or tight
    ap = md.add_vars("ap", J, vtype="B") if need_ap else None
    ad = md.add_vars("ad", J, vtype="B") if need_ad else None
    if ap is not None:
        v["ap"] = ap
    if ad is not None:
        v["ad"] = ad
    for name, ind, src in (("y", y, X), ("ap", ap, Pre), ("ad", ad, Dec)):
        if ind is None:
            continue
        Y = np.broadcast_to(ind.ids[None, :], nJ)
        if tight:
            R.add(f"{name}_ge", NR, [(E2, Y, 1), (E2, src, -1)], lo=0)
        else:
            R.add(f"{name}_ge", J, [(np.arange(J), ind.ids, n), (pj, src, -1)], lo=0)
        R.add(f"{name}_le", J, [(np.arange(J), ind.ids, 1), (pj, src, -1)], hi=0)

    # ---- prefill products, exact (eq. 9-10) --------------------------------------------------
    cmax_all = int(Cmax.max()) if n else 1
    bits = max(1, int(cmax_all).bit_length())
    pw = (2 ** np.arange(bits)).astype(float)
    telescope = (tight and dominance and objective == "makespan" and not online and not unit
                 and ks["kpq"] > 0 and abs(kk["kpm"] - 2 * kk["kpq"]) <= 1e-12 * kk["kpm"]
                 and int(O.max()) <= 64)
    if telescope:
        # eq. 24-26: with kpm = 2 kpq the prefill attention of a residency segment
        # telescopes to kpq * P^2 (P = m after its last prefill entry, the "ce" event)
        cu = md.add_vars("cu", nJ, vtype="B")
        ce = md.add_vars("ce", nJ, vtype="B")
        qq = md.add_vars("qq", nJ)
        v.update(cu=cu, ce=ce, qq=qq)
        CU, CE, QQ = cu.ids, ce.ids, qq.ids
        R.add("cu_h", NR, [(E2, CU, 1), (E2, Ha, -1)], hi=0)
        R.add("cu_1", NR, [(E2, Ma, 1), (E2, Ga, -1), (E2, CU, -Uc)],
              lo=np.broadcast_to(Ic - 1 - Uc, nJ).ravel())
        R.add("cu_0", NR, [(E2, Ma, 1), (E2, Ga, -1), (E2, CU, -1), (E2, Ha, 1)],
              hi=np.broadcast_to(Ic - 1, nJ).ravel())
        R.add("ce_pre", NR, [(E2, CE, 1), (E2, Pre, -1)], hi=0)
        R.add("ce_cu", NR, [(E2, CE, 1), (E2, CU, -1)], hi=0)
        R.add("ce_and", NR, [(E2, CE, 1), (E2, Pre, -1), (E2, CU, -1)], lo=-1)
        R.add("ce_count", n, [(pi, CE, 1), (pi, Ev_, -1)], lo=1, hi=1)
        kq = ks["kpq"]
        R.add("qq_I", NR, [(E2, QQ, 1), (E2, CE, -kq * Ic.astype(float) ** 2)], lo=0)
        for d in range(int(O.max()) + 1):  # tangents of m^2 at integer m = I - 1 + d
            q = (Ic - 1 + d).astype(float)
            bq = kq * np.maximum((2 * q + 1) * Uc - q * (q + 1), 0.0)
            R.add(f"qq_tan_{d}", NR, [(E2, QQ, 1), (E2, Ma, -kq * (2 * q + 1)), (E2, CE, -bq)],
                  lo=np.broadcast_to(-kq * q * (q + 1) - bq, nJ).ravel())
        bits = 0
    elif not unit and (ks["kpq"] > 0 or ks["kpm"] > 0):
        z_ub = np.ones((n, J, bits))
        z_ub[(pw[None, None, :] > Cc_[:, :, None]) * np.ones((n, J, bits), bool)] = 0
        z = md.add_vars("z", (n, J, bits), ub=z_ub, vtype="B")
        v["z"] = z
        E3 = _elem((n, J, bits))
        R.add("c_bits", NR, [(E2, Cv, 1), (E2[:, :, None], z.ids, -pw)], 0, 0)
        Z = z.ids

        def mccormick(name, Wv, Yv, ub_y):
            ub3 = np.broadcast_to(ub_y, (n, J, bits)) if tight else BIG
            R.add(f"{name}_1", n * J * bits, [(E3, Wv, 1), (E3, Z, -ub3)], hi=0)
            R.add(f"{name}_2", n * J * bits, [(E3, Wv, 1), (E3, Yv, -1)], hi=0)
            R.add(f"{name}_3", n * J * bits, [(E3, Wv, 1), (E3, Yv, -1), (E3, Z, -ub3)],
                  lo=-np.broadcast_to(ub3, (n, J, bits)).ravel())

        if ks["kpm"] > 0:
            w = md.add_vars("w", (n, J, bits))
            v["w"] = w
            mccormick("w", w.ids, np.broadcast_to(Mb[:, :, None], (n, J, bits)), Uc[:, :, None])
        if ks["kpq"] > 0:
            vq = md.add_vars("vq", (n, J, bits))
            v["vq"] = vq
            mccormick("vq", vq.ids, np.broadcast_to(Cv[:, :, None], (n, J, bits)),
                      Cc_[:, :, None])
            if tight:
                # c^2 >= (2q+1) c - q(q+1) for integer c (tangent cuts, eq. 16)
                for kq, qv in enumerate((I - 1, Cmax // 4, Cmax // 2, Cmax - 1)):
                    q = np.maximum(qv, 0)[:, None].astype(float)
                    R.add(f"sq_tan_{kq}", NR, [(E2[:, :, None], vq.ids, pw),
                                               (E2, Cv, -(2 * q + 1))],
                          lo=np.broadcast_to(-q * (q + 1), nJ).ravel())
    else:
        bits = 0
    pmv = dmv = None
    if not unit and ks["kpl"] > 0:
        pmv = md.add_vars("pm", nJ)
        v["pm"] = pmv
    if not unit and (ks["kdm"] > 0 or (ks["kpm"] > 0 and not telescope)):
        dmv = md.add_vars("dm", nJ)
        v["dm"] = dmv
    for blkv, bin_ in ((pmv, Pre), (dmv, Dec)):
        if blkv is None:
            continue
        W = blkv.ids
        ub2 = np.broadcast_to(Uc, nJ) if tight else BIG
        nm = blkv.name
        R.add(f"{nm}_1", NR, [(E2, W, 1), (E2, bin_, -ub2)], hi=0)
        R.add(f"{nm}_2", NR, [(E2, W, 1), (E2, Mb, -1)], hi=0)
        R.add(f"{nm}_3", NR, [(E2, W, 1), (E2, Mb, -1), (E2, bin_, -ub2)],
              lo=-np.broadcast_to(ub2, nJ).ravel())

    # ---- batch time (cost model, eq. 11) --------------------------------------------------
    tmax = _tmax(inst, kk) * scale
    t = md.add_vars("t", J, ub=tmax)
    v["t"] = t
    jj = np.arange(J)
    terms: list[tuple[Any, Any, Any]] = [(jj, t.ids, 1.0), (jj, y.ids, -ks["k0"])]
    if not unit:
        terms += [(pj, Cv, -ks["k1"]), (pj, Pre, -ks["kpr"]), (pj, Dec, -ks["kdr"])]
        if "qq" in v:
            terms += [(pj, v["qq"].ids, -1.0)]
        if "vq" in v:
            terms += [(pj[:, :, None], v["vq"].ids, -ks["kpq"] * pw), (pj, Dec, ks["kpq"])]
        if "w" in v:
            terms += [(pj[:, :, None], v["w"].ids, -ks["kpm"] * pw),
                      (pj, _built(dmv, "dm (w needs it)").ids, ks["kpm"])]
        if pmv is not None:
            terms += [(pj, pmv.ids, -ks["kpl"])]
        if dmv is not None and ks["kdm"]:
            terms += [(pj, dmv.ids, -ks["kdm"])]
        if ks["kpb"]:
            terms += [(jj, _built(ap, "ap (kpb > 0)").ids, -ks["kpb"])]
        if ks["kdb"]:
            terms += [(jj, _built(ad, "ad (kdb > 0)").ids, -ks["kdb"])]
    R.add("time", J, terms, 0, 0)

    # ---- clock, completion, first token (eq. 12) -------------------------------------------
    arr_s = arr * scale
    bt = tmax * (np.arange(J) + 1) + float(arr_s.max(initial=0.0))  # end_j <= bt_j
    if not tight:
        bt = np.full(J, float(bt[-1]))
    need_end = online or objective != "makespan"
    if need_end:
        end = md.add_vars("end", J, ub=bt)
        v["end"] = end
        if online:
            start = md.add_vars("start", J, ub=bt)
            v["start"] = start
            R.add("clock_end", J, [(jj, end.ids, 1), (jj, start.ids, -1), (jj, t.ids, -1)], 0, 0)
            R.add("clock_prev", J - 1, [(jj[:-1], start.ids[1:], 1), (jj[:-1], end.ids[:-1], -1)],
                  lo=0)
            has = np.flatnonzero(arr_s > 0)
            if has.size:
                Ea = _elem((has.size, J))
                R.add("clock_arr", has.size * J,
                      [(Ea, np.broadcast_to(start.ids[None, :], (has.size, J)), 1),
                       (Ea, X[has], -arr_s[has][:, None]), (Ea, Ev_[has], -arr_s[has][:, None])],
                      lo=0)
        else:
            R.add("clock_end", J, [(jj, end.ids, 1), (jj[1:], end.ids[:-1], -1), (jj, t.ids, -1)],
                  0, 0)
    obj_cols: list = []
    obj_coefs: list = []
    const = 0.0
    if objective == "makespan":
        if need_end:
            obj_cols, obj_coefs = [end.ids[J - 1]], [1.0]
        else:
            obj_cols, obj_coefs = [t.ids], [np.ones(J)]
    else:
        which = "comp" if objective == "total-latency" else "first"
        ind = fin if which == "comp" else ftk
        tv = md.add_vars(which, n, lb=arr_s, ub=float(bt[-1]))
        v[which] = tv
        # tv_i >= end_j - bt_j (1 - (ind_a - ind_b))
        Fa_, Fb_ = ind.ids[:, 1:], ind.ids[:, :-1]
        R.add(f"{which}_def", NR, [(E2, np.broadcast_to(tv.ids[:, None], nJ), 1),
                                   (E2, np.broadcast_to(end.ids[None, :], nJ), -1),
                                   (E2, Fa_, -bt[None, :]), (E2, Fb_, bt[None, :])],
              lo=np.broadcast_to(-bt[None, :], nJ).ravel())
        div = 1.0 if which == "comp" else float(n)
        obj_cols, obj_coefs = [tv.ids], [np.full(n, 1.0 / div)]
        const = -float(arr_s.sum()) / div
    md.set_objective(np.concatenate([np.atleast_1d(a) for a in obj_cols]),
                     np.concatenate([np.atleast_1d(a) for a in obj_coefs]), constant=const)

    # ---- hypotheses (eq. H1-H5) --------------------------------------------------------------
    if hyp.at_most is not None:
        R.add("at_most", 1, [(np.zeros(len(np.concatenate([np.atleast_1d(a) for a in obj_cols])),
                                       np.int64),
                              np.concatenate([np.atleast_1d(a) for a in obj_cols]),
                              np.concatenate([np.atleast_1d(a) for a in obj_coefs]))],
              hi=hyp.at_most * scale - const)
    for rid, j in hyp.force:
        if j >= J:
            raise FormulationError(f"force {rid}@{j}: the model has only J = {J} batches")
        R.add(f"force_{len(md.groups)}", 1, [(0, X[inst.index[rid], j], 1)], lo=1)
    for rid, j in hyp.forbid:
        if j < J:
            R.add(f"forbid_{len(md.groups)}", 1, [(0, X[inst.index[rid], j], 1)], hi=0)
    for a, b in hyp.order:
        ia, ib = inst.index[a], inst.index[b]
        R.add(f"order_{len(md.groups)}", J, [(jj, fin.ids[ia, 1:], 1), (jj, fin.ids[ib, 1:], -1)],
              lo=0)

    # ---- tight only: restriction, symmetry and valid inequalities (eqs. 13-23) --------------
    if tight:
        if dominance:
            # eq. 13: evict only a caught-up request (g >= 1, m_before == S_before - 1)
            R.add("dom_h", NR, [(E2, Ev_, 1), (E2, Hb, -1)], hi=0)
            R.add("dom_a", NR, [(E2, Gb, 1), (E2, Mb, -1), (E2, Ev_, Uc - 1)],
                  hi=np.broadcast_to(1 - Ic + Uc - 1, nJ).ravel())
            R.add("ev_ge_I", NR, [(E2, v["ev"].ids, 1), (E2, Ev_, -Ic)], lo=0)
        for grp in symmetry:  # eq. 14
            for a_, b_ in zip(grp[:-1], grp[1:]):
                R.add(f"sym_{a_}_{b_}", J, [(jj, fin.ids[a_, 1:], 1), (jj, fin.ids[b_, 1:], -1)],
                      lo=0)
        if compact:  # eq. 15: batch slots are used contiguously
            act = md.add_vars("act", J, vtype="B")
            v["act"] = act
            A = np.broadcast_to(act.ids[None, :], nJ)
            R.add("act_x", NR, [(E2, A, 1), (E2, X, -1)], lo=0)
            R.add("act_e", NR, [(E2, A, 1), (E2, Ev_, -1)], lo=0)
            R.add("act_le", J, [(jj, act.ids, 1), (pj, X, -1), (pj, Ev_, -1)], hi=0)
            R.add("act_mono", J - 1, [(jj[:-1], act.ids[:-1], 1), (jj[:-1], act.ids[1:], -1)], lo=0)
        # eq. 17: every request needs >= O entries; token count identity
        R.add("n_entries", n, [(pi, X, 1)], lo=O)
        R.add("tokens_total", n, [(pi, Cv, 1), (pi, v["ev"].ids, -1)], lo=U, hi=U)
        # eq. 18: decode entries and prefill entries vs evictions
        R.add("n_dec", n, [(pi, Dec, 1), (pi, Ev_, 1)], lo=O - 1)
        R.add("n_pre", n, [(pi, Pre, 1), (pi, Ev_, -1)], lo=1)
        # eq. 19: a decode entry holds >= I before, the finishing batch holds U
        R.add("dec_m", NR, [(E2, Mb, 1), (E2, Dec, -Ic)], lo=0)
        R.add("fin_m", NR, [(E2, Ma, 1), (E2, Fa, -Uc), (E2, Fb, Uc)], lo=0)
        R.add("m_ge_c", NR, [(E2, Ma, 1), (E2, Cv, -1)], lo=0)
        R.add("gen_ge_dec", NR, [(E2, Gen, 1), (E2, Dec, -1)], lo=0)
        R.add("m_ge_gen", NR, [(E2, Ma, 1), (E2, Gen, -Ic)], lo=0)
        if compact and blk == 1:  # memory is only held in active batch slots
            R.add("M_act", J, [(pj, Ma, 1), (pj, Fb, -Uc), (jj, v["act"].ids, -Mcap)], hi=0)
        # eq. 20: memory cliques
        kdec = _knapsack_count(I + 1, Mcap, inst.limits)
        kfin = _knapsack_count(U, Mcap, inst.limits)
        if kdec < n:
            R.add("clique_dec", J, [(pj, Dec, 1), (jj, y.ids, -kdec)], hi=0)
        if kfin < n:
            R.add("clique_fin", J, [(pj, Fa, 1), (pj, Fb, -1), (jj, y.ids, -kfin)], hi=0)
        # eq. 22: every batch with an entry has a prefill or a decode entry
        ap, ad = _built(ap, "ap (tight)"), _built(ad, "ad (tight)")
        R.add("y_phase", J, [(jj, ap.ids, 1), (jj, ad.ids, 1), (jj, y.ids, -1)], lo=0)
        R.add("ap_y", J, [(jj, ap.ids, 1), (jj, y.ids, -1)], hi=0)
        R.add("ad_y", J, [(jj, ad.ids, 1), (jj, y.ids, -1)], hi=0)
        # eq. 21: busy time >= unavoidable work + per-batch overhead
        if objective == "makespan" and not online:
            work = float(request_work_lower_bound(inst).sum()) * scale
            ovh = batch_overhead_lower_bound(inst) * scale
            R.add("busy_lb", 1, [(0, t.ids, 1), (0, y.ids, -ovh)], lo=work)
        if ub is not None and objective == "makespan" and not online:
            R.add("busy_ub", 1, [(0, t.ids, 1)], hi=ub * scale * (1 + 1e-9))

    notes = []
    if telescope:
        notes.append("tight: quadratic prefill cost priced per residency segment "
                     "(kpm = 2 kpq telescoping, eqs. 24-26)")
    return InfermaxModel(inst, objective, variant, J, scale, md, v, online, dominance, symmetry,
                         compact, bits, ks["kpq"], tuple(notes))


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


# ----------------------------------------------------------------------------- run
def _sequential_batches(inst: Instance) -> int:
    """Batches of the trivially feasible one-request-at-a-time schedule."""
    cap = inst.limits.prefill_budget
    return int(sum(-(-r.prompt // cap) + r.output - 1 for r in inst.requests))


def _polish(im: InfermaxModel, sched: Schedule, obj: float | None, notes: list[str]):
    """The model's objective at the exact point of the decoded schedule (section 7).

    Continuous columns bounded only from one side (time, products) may carry solver slack;
    re-encoding the decoded schedule and checking it against every row gives the model's
    own price of that schedule, which is what ``solve`` compares with the evaluator.
    """
    try:
        x = im.encode(sched)
    except FormulationError as exc:
        notes.append(f"objective not polished: {exc}")
        return obj
    bad = im.model.check(x)
    if bad:
        notes.append(f"objective not polished: re-encoded solution violates {bad[0]}")
        return obj
    val = im.model.objective_value(x) / im.scale
    if obj is not None and abs(val - obj) > 1e-9 * max(1.0, abs(obj)):
        notes.append(f"solver objective {obj:.10g} polished to {val:.10g} (slack removed)")
    return val


def _solve_built(built, ws: Schedule | None, options: SolveOptions, notes: list[str]):
    """Encode the warm start, solve ``built.model`` (times scaled by ``built.scale``) with the
    requested backend, and record sizes and solver notes (shared by every variant)."""
    notes.append(f"model: {built.model.num_vars} variables ({built.model.num_integer} integer), "
                 f"{built.model.num_constraints} constraints")
    start = None
    if ws is not None:
        try:
            start = built.encode(ws)
        except FormulationError as exc:
            notes.append(f"warm start not encodable: {exc}")
    mopts = replace(options, abs_gap=options.abs_gap * built.scale)
    res = milp.solve(built.model, options.solver, mopts, warm_start=start)
    notes += [f"{options.solver}: {n_}" for n_ in res.notes]
    return res


def _horizon(base_J: int, jmax: int | None, J_param, slack: int) -> int:
    """Batch slots J (section 4): the warm start's batches plus ``slack``, raised to the
    proven bound ``jmax`` when that is affordable; ``batches=J`` overrides."""
    if J_param is not None:
        return max(int(J_param), 1)
    J = base_J + slack
    if jmax is not None and base_J <= jmax <= 2 * base_J + 4:
        J = max(J, jmax)
    return max(J, 1)


def _raw(res, scale: float, sched, obj, notes: list[str], J: int, jmax, J_param) -> RawSolution:
    """The solver result in seconds as a RawSolution (shared by every variant)."""
    status = res.status if res.status in ("optimal", "feasible", "infeasible", "no_solution",
                                          "error") else "error"
    if status == "infeasible" and (J_param is not None or jmax is None or J < jmax):
        notes.append(f"infeasible within J = {J} batch slots (a larger J might be feasible)")
    sec = lambda v: None if v is None else v / scale  # noqa: E731
    return RawSolution(status=status, objective=obj, bound=sec(res.bound), schedule=sched,
                       runtime=res.runtime or 0.0, solver=res.solver, nodes=res.nodes,
                       exact=True, restricted=jmax is None or J < jmax,
                       notes=tuple(notes), message=res.message,
                       history=tuple((t, sec(a), sec(b)) for t, a, b in res.history))


#: the ``--param`` knobs
PARAMS = (
    ParamSpec("variant", str, "auto", "auto (flow model where it applies, else tight), flow, "
              "tight or plain", choices=("auto", "flow") + VARIANTS),
    ParamSpec("batches", int, None, "batch slots J (default: from the warm start)",
              lo=1, hi=MAX_BATCH_SLOTS),
    ParamSpec("slack", int, DEFAULT_SLACK, "batch slots added to the warm start's count",
              lo=0, hi=MAX_BATCH_SLOTS),
)


@register_formulation(
    "infermax",
    "InferMax Big-M batch-indexed MILP (paper section 5), exact pricing; variant=tight|plain, "
    "batches=J, slack=k (formulations/infermax.md)",
    params=PARAMS,
)
def run(instance: Instance, objective: str, hyp: Hypotheses, options: SolveOptions,
        warm_start: WarmStart | None) -> RawSolution:
    """The registered ``infermax`` formulation (``formulations/infermax.md``)."""
    params = parse_params(PARAMS, options.params, "formulation 'infermax'", FormulationError)
    variant, J_param, slack = params["variant"], params["batches"], params["slack"]
    inst = instance
    if variant in ("flow", "auto"):
        from . import infermax_flow

        why = infermax_flow.applicable(inst, objective, hyp)
        if why is None and inst.n:
            return _run_flow(inst, objective, hyp, options, warm_start, J_param, slack,
                             forced=variant == "flow")
        if variant == "flow":
            raise FormulationError(f"infermax: {why}")
        variant = "tight"
    notes: list[str] = [f"infermax variant {variant}"]
    if inst.n == 0:
        return RawSolution("optimal", 0.0, 0.0, Schedule.empty(), solver=options.solver,
                           notes=tuple(notes))
    tight = variant == "tight"
    named = {r for r, _ in (*hyp.force, *hyp.forbid)} | {r for pair in hyp.order for r in pair}
    ws = None
    ws_obj = None
    if warm_start is not None:
        ws, ev = warm_start.schedule, warm_start.evaluation
        bad = hyp.broken_by(inst, ws, ev, objective) if ev.feasible else ["infeasible"]
        if not ev.feasible or bad:
            notes.append("warm start ignored: " + "; ".join(bad))
            ws = None
        elif tight:  # the canonical form is a new schedule: replayed once more
            ws = canonical(inst, ws, dominance=not hyp.force and not hyp.order,
                           symmetry=_identical_groups(inst, named),
                           compact=not hyp.force and not hyp.forbid)
            ev2 = evaluate(inst, ws)
            if not ev2.feasible or hyp.broken_by(inst, ws, ev2, objective):
                ws = None  # pragma: no cover - canonical keeps feasibility
            else:
                ev = ev2
        if ws is not None:
            ws_obj = ev.objective(objective)
    ub = ws_obj
    if hyp.at_most is not None:
        ub = hyp.at_most if ub is None else min(ub, hyp.at_most)
    jmax = entry_batches_upper_bound(inst, objective, ub)
    base_J = ws.n_batches if ws is not None else _sequential_batches(inst)
    forced = max((j for _, j in hyp.force), default=-1)
    J = max(_horizon(base_J, jmax, J_param, slack), forced + 1)
    if jmax is not None and J >= jmax:
        notes.append(
            f"J = {J} batch slots; any schedule with objective <= {ub:.6g} has at most "
            f"{jmax} batches with entries (busy-time argument, formulations/infermax.md "
            "section 6), so the optimum is global among schedules whose eviction-only "
            "batches (no entries) fit in the remaining slots")
    else:
        notes.append(
            f"restriction: optimal among schedules with at most J = {J} batches "
            + (f"(a schedule within the bound could have up to {jmax} batches with entries)"
               if jmax is not None else "(no bound on the batch count is known for this "
               "objective)"))
    im = build(inst, objective, hyp, J=J, variant=variant, ub=ub if tight else None)
    if tight:
        if im.dominance:
            notes.append("tight: evictions restricted to caught-up requests (dominance, eq. 13)")
        if im.symmetry:
            notes.append(f"tight: symmetry breaking over {len(im.symmetry)} group(s) of "
                         "identical requests (eq. 14)")
    res = _solve_built(im, ws, options, notes)
    sched = None
    obj = None if res.objective is None else res.objective / im.scale
    if res.values is not None and res.status in ("optimal", "feasible"):
        sched = im.decode(res.values)
        obj = _polish(im, sched, obj, notes)
    return _raw(res, im.scale, sched, obj, notes, J, jmax, J_param)


#: largest flow model (arc variables) the auto variant builds before falling back to tight
FLOW_MAX_ARCS = 45_000


def _run_flow(inst: Instance, objective: str, hyp: Hypotheses, options: SolveOptions,
              warm_start: WarmStart | None, J_param, slack: int, forced: bool) -> RawSolution:
    """The flow variant (``formulations/infermax.md`` section 9)."""
    from . import infermax_flow as fl

    notes: list[str] = ["infermax variant flow (identical requests aggregated, eqs. F1-F10)"]
    ws, ub = None, None
    if warm_start is not None:
        ev = warm_start.evaluation
        if ev.feasible and not hyp.broken_by(inst, warm_start.schedule, ev, objective):
            # the canonical form is a new schedule: replayed once more
            ws = canonical(inst, warm_start.schedule, dominance=True, symmetry=None, compact=True)
            ev2 = evaluate(inst, ws)
            ub = ev2.objective(objective) if ev2.feasible else None
            if ub is None:
                ws = None
    if hyp.at_most is not None:
        ub = hyp.at_most if ub is None else min(ub, hyp.at_most)
    jmax = entry_batches_upper_bound(inst, objective, ub)
    base_J = fl.entry_batches(ws) if ws is not None else _sequential_batches(inst)
    J = _horizon(base_J, jmax, J_param, slack)
    size = fl.size_estimate(inst, J)
    if not forced and size > FLOW_MAX_ARCS:
        return run(inst, objective, hyp, replace(options, params={**options.params,
                                                                  "variant": "tight"}), warm_start)
    if jmax is not None and J >= jmax:
        notes.append(f"J = {J} batch slots; any schedule with objective <= {ub:.6g} has at most "
                     f"{jmax} batches with entries (formulations/infermax.md section 6) and "
                     "eviction-only batches are represented by evict-refill arcs, so the "
                     "optimum is global (under the eq. 13 dominance, which loses no optimum)")
    else:
        notes.append(f"restriction: optimal among schedules with at most J = {J} batches with "
                     "entries" + (f" (a schedule within the bound could have up to {jmax})"
                                  if jmax is not None else ""))
    fm = fl.FlowModel(inst, J, hyp, ub, objective)
    t_solve = time.perf_counter()
    res = _solve_built(fm, ws, options, notes)
    left = None if options.time_limit is None else \
        options.time_limit - (time.perf_counter() - t_solve)
    if ws is not None and _values_disagree(fm, res) and (left is None or left >= 1.0):
        # seen with HiGHS 1.16: a MIP start accepted "in the reduced space" at a lower
        # objective than its own, and the start's values returned with that objective
        notes.append(f"{res.solver}: returned values priced {fm.objective_seconds(res.values):.10g} "
                     f"against its objective {res.objective / fm.scale:.10g}; re-solved without "
                     "the warm start")
        res = _solve_built(fm, None, replace(options, time_limit=left), notes)
    sched, obj = None, None
    if res.values is not None and res.status in ("optimal", "feasible"):
        sched = fm.decode(res.values)
        obj = res.objective / fm.scale
        try:  # polish: the model objective at the exact re-encoded point
            x2 = fm.encode(sched)
            bad = fm.model.check(x2)
            if bad:
                notes.append(f"objective not polished: re-encoded solution violates {bad[0]}")
            else:
                obj = fm.objective_seconds(x2)
        except FormulationError as exc:
            notes.append(f"objective not polished: {exc}")
    raw = _raw(res, fm.scale, sched, obj, notes, J, jmax, J_param)
    if raw.status == "optimal" and obj is not None and raw.bound is not None \
            and obj > raw.bound + 1e-6 * max(1.0, abs(obj)):  # never claim a proof we lack
        raw = replace(raw, status="feasible", notes=raw.notes + (
            f"decoded schedule {obj:.10g} is above the solver's bound {raw.bound:.10g}: "
            "reported as feasible",))
    return raw


def _values_disagree(fm, res) -> bool:
    """True when the solver's values are not priced at the objective it reports."""
    if res.values is None or res.objective is None or res.status not in ("optimal", "feasible"):
        return False
    own = fm.objective_seconds(res.values)
    rep = res.objective / fm.scale
    return abs(own - rep) > 1e-6 * max(1.0, abs(rep))


__all__ = ["InfermaxModel", "build", "canonical", "run", "VARIANTS",
           "request_work_lower_bound", "entry_batches_upper_bound"]
