"""InferMax's Big-M batch-indexed MILP (paper section 5), exact, in two variants: the model.

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

This module owns :func:`build` -> :class:`InfermaxModel`; the model's ``encode(schedule)``,
``decode(values)`` and ``canonical(schedule)`` are in :mod:`.encode`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ... import milp
from ...cost import UnitCost
from ...instance import Instance, Limits
from ...schedule import Schedule
from ..base import FormulationError, Hypotheses, refuse_swaps
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
        return encode(self, s)

    # -- values -> schedule -------------------------------------------------------------
    def decode(self, values: np.ndarray) -> Schedule:
        """The schedule the solution describes (stated starts only where the model idles)."""
        return decode(self, values)


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
