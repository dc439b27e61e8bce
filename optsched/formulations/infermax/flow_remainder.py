"""Flow model, any cost with ``0 <= kpm < 2 kpq``: the remainder of the continuing chain (F2c).

``formulations/infermax.md`` section 9, F2c. A prefill entry of ``c`` tokens over ``m``
cached ones costs ``kpr + kpl m + k1 c + kpq c^2 + kpm c m`` (docs/semantics.md section 5).
A chunk from ``m = 0`` runs on the token chain priced with the true ``kpq`` (exact: its
``kpm c m`` term is 0, and every chunk through that chain started at 0). A chunk that
continues a partial fill (``m >= 1``) runs on a second chain priced with ``kpq' = kpm/2``,
where ``kpm = 2 kpq'`` and the steps telescope to ``kpq' c^2 + kpm c m`` whatever chunk the
chain pairs a start with; what is left is ``delta c^2`` with ``delta = kpq - kpm/2 > 0``.

Per batch ``j``, class and level ``g`` the continuing chain carries ``n[j,g]`` chunks with
``s[j,g]`` tokens in all (both are sums of arc counts). Their remainder is at least
``delta * r[j,g]`` with, for every integer ``l``,

    r[j,g] >= (2 l + 1) s[j,g] - l (l + 1) n[j,g]                       (F2c)

(the sum over the chunks of the secant ``c^2 >= (2 l + 1) c - l (l + 1)``, valid at every
integer ``c``). With ``l = 0 .. S - 2`` (a continuing chunk has ``c <= S - 1``) the bound is
exact whenever the chunks of a (batch, class, level) have equal sizes, in particular when
there is one; otherwise it is below the true price and the decoded schedule is priced by
``evaluate`` (``solve`` then reports the gap honestly). ``t_j`` includes ``delta * sum r``,
so the model prices every schedule at or below the evaluator, exactly in the common case.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ... import milp
from .arcs import START, STEP

if TYPE_CHECKING:  # pragma: no cover - imported for types only (flow imports this module)
    from .flow import FlowModel


@dataclass(frozen=True, eq=False)
class FlowRemainder:
    """The columns of F2c: ``r, s, n`` per class, shape ``(J, O)``."""

    delta: float
    scale: float
    r: list[milp.VarBlock]
    s: list[milp.VarBlock]
    n: list[milp.VarBlock]
    token_arcs: list[np.ndarray]  # per class: continuing-chain start/step arcs
    start_arcs: list[np.ndarray]  # per class: continuing-chain start arcs
    levels: list[np.ndarray]  # per class: level of each arc (-1 off the continuing chain)

    def time_terms(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``delta * sum_{class, g} r[j, g]`` as COO terms of the per-batch time rows."""
        rows, cols = [], []
        for r in self.r:
            J, O = r.shape
            rows.append(np.repeat(np.arange(J), O))
            cols.append(r[:, :].ravel())
        rr, cc = np.concatenate(rows), np.concatenate(cols)
        return rr, cc, np.full(rr.size, self.delta * self.scale)

    def fill(self, x: np.ndarray, counts: list[np.ndarray], squares: list[np.ndarray]
             ) -> np.ndarray:
        """Set ``r`` (the exact sums of ``c^2``), ``s`` and ``n`` of an encoded schedule; returns
        the remainder per batch in model units (added to ``t``)."""
        extra = np.zeros(counts[0].shape[0]) if counts else np.zeros(0)
        for ci, cnt in enumerate(counts):
            lv = self.levels[ci]
            O = self.r[ci].shape[1]
            s = np.zeros((cnt.shape[0], O))
            n = np.zeros((cnt.shape[0], O))
            for g in range(O):
                s[:, g] = cnt[:, self.token_arcs[ci][lv[self.token_arcs[ci]] == g]].sum(1)
                n[:, g] = cnt[:, self.start_arcs[ci][lv[self.start_arcs[ci]] == g]].sum(1)
            x[self.r[ci][:, :].ravel()] = squares[ci].ravel()
            x[self.s[ci][:, :].ravel()] = s.ravel()
            x[self.n[ci][:, :].ravel()] = n.ravel()
            extra += self.delta * self.scale * squares[ci].sum(1)
        return extra


def add_remainder(fm: FlowModel, delta: float) -> FlowRemainder:
    """Add the F2c columns and rows to the flow model ``fm`` (its time rows take
    :meth:`FlowRemainder.time_terms`)."""
    md, J = fm.model, fm.J
    rs: list[milp.VarBlock] = []
    ss: list[milp.VarBlock] = []
    ns: list[milp.VarBlock] = []
    toks: list[np.ndarray] = []
    starts: list[np.ndarray] = []
    levels: list[np.ndarray] = []
    for ci, c in enumerate(fm.classes):
        assert c.rem_level is not None
        lv = c.rem_level
        tok = np.flatnonzero((lv >= 0) & np.isin(c.kind, (START, STEP)))
        sta = np.flatnonzero((lv >= 0) & (c.kind == START))
        O = c.O
        r = md.add_vars(f"rem_r{ci}", (J, O), lb=0.0)
        s = md.add_vars(f"rem_s{ci}", (J, O), lb=0.0)
        n = md.add_vars(f"rem_n{ci}", (J, O), lb=0.0)
        for blk, arcs, nm in ((s, tok, "tokens"), (n, sta, "chunks")):
            rows, cols, vals = [np.arange(J * O)], [blk[:, :].ravel()], [np.ones(J * O)]
            for g in range(O):
                sel = arcs[lv[arcs] == g]
                if sel.size == 0:
                    continue
                rows.append(np.repeat(np.arange(J) * O + g, sel.size))
                cols.append(fm.f[ci][:, sel].ravel())
                vals.append(-np.ones(J * sel.size))
            md.add_constraints(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals),
                               lo=0.0, hi=0.0, name=f"rem_{nm}{ci}")
        for g in range(O):
            lam = np.arange(0, max(c.I + g - 1, 1), dtype=float)  # l = 0 .. S - 2
            L = lam.size
            R = np.arange(J * L)
            jj = np.repeat(np.arange(J), L)
            ll = np.tile(lam, J)
            md.add_constraints(np.concatenate([R, R, R]),
                               np.concatenate([r[jj, g], s[jj, g], n[jj, g]]),
                               np.concatenate([np.ones(R.size), -(2 * ll + 1), ll * (ll + 1)]),
                               lo=0.0, name=f"rem_sec{ci}_{g}")
        rs.append(r)
        ss.append(s)
        ns.append(n)
        toks.append(tok)
        starts.append(sta)
        levels.append(lv)
    return FlowRemainder(delta, fm.scale, rs, ss, ns, toks, starts, levels)


def max_remainder(fm: FlowModel) -> float:
    """An upper bound (seconds) on one batch's remainder ``delta * sum r`` (F10's ``T``):
    each request has at most one chunk per batch, of at most ``S - 1`` tokens."""
    if fm.rem is None:
        return 0.0
    return fm.rem.delta * sum(c.n * (c.I + c.O - 1) ** 2 for c in fm.classes)
