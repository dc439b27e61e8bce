"""Tight model for a linear cost with ``kpm < 2 kpq`` (every fitted cost model): eq. 27.

``formulations/infermax.md`` eq. 27. A prefill entry of ``c`` tokens over ``m`` cached ones
costs ``kpr + kpl m + k1 c + kpq c^2 + kpm c m`` (docs/semantics.md section 5). Split
``kpq = kpm/2 + delta``::

    price = [kpr + kpl m + k1 c + (kpm/2) c^2 + kpm c m] + delta c^2,   delta = kpq - kpm/2.

The bracket is the price under the cost model ``kpq' = kpm/2``, for which ``kpm = 2 kpq'``:
the tight model's telescoped pricing (eqs. 24-26) applies to it unchanged. The remainder
``delta c^2`` belongs to one entry and is convex in ``c`` (``delta > 0``). A column
``q[i,j]`` carries it through the secants of ``c^2`` between consecutive integers,

    q[i,j] >= (2 l + 1) c[i,j] - l (l + 1)     for l in a point set Lambda (l = 0 always),

which are exact at ``c in {l, l + 1}`` and below ``c^2`` everywhere else (``c`` integer), and
the objective is ``sum_j t_j + delta * sum_{i,j} (q[i,j] - dec[i,j])`` (a decode entry has
``c = 1``, ``q = 1``, and no ``kpq`` term). With ``Lambda = {0 .. Cmax - 1}`` the price is
exact; a smaller ``Lambda`` prices every schedule at or below its true price, so the model's
bound is a valid lower bound, and the price of the decoded schedule is exact when each of its
entries has ``c - 1`` or ``c`` in ``Lambda``. :func:`solve_lazily` starts from a small
``Lambda`` and adds the ``c`` values the incumbent uses until the incumbent is priced exactly
at the solver's optimum (then it is optimal for the true price), eq. 27b. The objective is
offline makespan (the only objective eqs. 24-26 serve); an objective cut (warm start ``UB``,
``at_most``) is stated on that full sum.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from ... import milp
from ...cost import LinearCost
from ...instance import Instance
from ...schedule import Schedule
from ...solve_types import Objective
from ..base import BuiltModel, FormulationError, Hypotheses
from .model import InfermaxModel, build


def remainder_coefficient(inst: Instance) -> float:
    """``delta = kpq - kpm/2`` of eq. 27 (0 when the price telescopes or is not linear)."""
    cm = inst.cost_model
    if not isinstance(cm, LinearCost):
        return 0.0
    return cm.kpq - cm.kpm / 2


def applicable(inst: Instance, objective: str, hyp: Hypotheses) -> str | None:
    """None when eq. 27 applies (offline makespan, linear cost with ``0 < kpm < 2 kpq``,
    dominance on, ``O <= 64`` as eqs. 24-26 ask), else the reason it does not."""
    cm = inst.cost_model
    if not isinstance(cm, LinearCost):
        return "eq. 27 needs a linear cost model"
    if objective != Objective.MAKESPAN or float(inst.arrival.max(initial=0.0)) > 0:
        return "eq. 27 serves offline makespan only (it moves cost between batches)"
    if hyp.force or hyp.order:
        return "eq. 27 needs the eq. 13 dominance (no force/order hypotheses)"
    if not cm.kpm > 0:
        return "eq. 27 needs kpm > 0 (kpq' = kpm/2 must be positive)"
    delta = remainder_coefficient(inst)
    if not delta > 1e-12 * cm.kpq:
        return "kpm >= 2 kpq: the price telescopes (eqs. 24-26) or the remainder is concave"
    if inst.n and int(inst.output.max()) > 64:
        return "eqs. 24-26 need O <= 64"
    return None


@dataclass(frozen=True, eq=False)
class RemainderModel:
    """The tight model of the telescoping part plus ``q`` and the secants of eq. 27."""

    base: InfermaxModel  # built on the instance with kpq' = kpm/2
    instance: Instance  # the real instance
    q: milp.VarBlock
    points: tuple[int, ...]  # Lambda

    @property
    def model(self) -> milp.Model:
        return self.base.model

    @property
    def scale(self) -> float:
        return self.base.scale

    @property
    def J(self) -> int:
        return self.base.J

    # -- the BuiltModel protocol (the base model's, with q) --------------------------------
    @property
    def objective(self) -> str:
        return self.base.objective

    @property
    def variables(self) -> Mapping[str, milp.VarBlock]:
        return self.model.blocks

    @property
    def horizon(self) -> int:
        return self.base.J

    @property
    def restricted(self) -> bool:
        return self.base.restricted

    @property
    def dominance(self) -> bool:
        return self.base.dominance

    @property
    def symmetry(self) -> list[list[int]]:
        return self.base.symmetry

    def canonical(self, s: Schedule) -> Schedule:
        return self.base.canonical(s)

    def encode(self, s: Schedule) -> np.ndarray:
        """The base model's columns for ``s`` plus ``q = c^2`` (the exact price)."""
        x = self.base.encode(s)
        c = np.rint(np.asarray(self.model.value("c", x)))
        x[self.q.ids] = c * c
        return x

    def decode(self, values: np.ndarray) -> Schedule:
        return self.base.decode(values)

    def entry_sizes(self, values: np.ndarray) -> set[int]:
        """The token counts ``c`` of the entries in a solution."""
        c = np.rint(np.asarray(self.model.value("c", values))).astype(np.int64)
        return {int(v) for v in c.ravel() if v > 0}

    def exact_at(self, sizes: set[int]) -> bool:
        """True when the secants price every entry size in ``sizes`` exactly."""
        pts = set(self.points)
        return all((v - 1) in pts or v in pts for v in sizes)


def cmax(inst: Instance) -> np.ndarray:
    """``Cmax_i`` (eq. 4): no entry processes more tokens."""
    c = np.minimum(inst.prompt + inst.output - 1, inst.limits.max_batch_tokens)
    if inst.limits.max_prefill_tokens is not None:
        c = np.minimum(c, inst.limits.max_prefill_tokens)
    return c.astype(np.int64)


def initial_points(inst: Instance, grid: int = 64) -> set[int]:
    """A first ``Lambda``: ``0 .. 7``, every ``Cmax/grid``-th size, and the sizes of a whole
    (re)fill, ``I + g - 1`` and ``I + g`` for ``g = 0 .. O`` (where ``c = S``)."""
    top = int(cmax(inst).max()) if inst.n else 1
    pts = set(range(min(8, top)))
    step = max(1, top // grid)
    pts |= set(range(0, top, step))
    for I, O in {(int(r.prompt), int(r.output)) for r in inst.requests}:
        pts |= {I + g + d for g in range(O + 1) for d in (-1, 0)}
    return {p for p in pts if 0 <= p < top}


def build_remainder(inst: Instance, hyp: Hypotheses, *, J: int, ub: float | None,
                    points: set[int] | None = None, restricted: bool = True) -> RemainderModel:
    """The eq. 27 model: :func:`.model.build` on ``kpq' = kpm/2`` plus ``q`` and its secants
    at ``points`` (default :func:`initial_points`; ``range(Cmax)`` is exact everywhere)."""
    why = applicable(inst, "makespan", hyp)
    if why is not None:
        raise FormulationError(f"infermax eq. 27: {why}")
    cm = inst.cost_model
    assert isinstance(cm, LinearCost)
    delta = remainder_coefficient(inst)
    tele = inst.replace(cost_model=replace(cm, kpq=cm.kpm / 2, preset=None))
    # the objective cut goes on the full objective below, not on the base model's sum t
    base = build(tele, "makespan", replace(hyp, at_most=None), J=J, variant="tight", ub=None,
                 restricted=restricted)
    if "qq" not in base.v:
        raise FormulationError("infermax eq. 27: the base model did not telescope (eqs. 24-26)")
    md = base.model
    # eqs. 24-26 charge a segment's kpq' P^2 to one batch, which can exceed the per-batch
    # duration bound build() puts on t (e.g. C much smaller than U); offline makespan needs
    # no upper bound on t, so it is lifted
    md.set_bounds(base.v["t"].ids, ub=np.inf)
    n = inst.n
    top = cmax(inst)
    pts = sorted(({0} | set(points if points is not None else initial_points(inst)))
                 & set(range(int(top.max()) if n else 1)))
    q = md.add_vars("q", (n, J), lb=0.0, ub=np.broadcast_to(top[:, None] ** 2, (n, J)).astype(float))
    c_ids, dec_ids = base.v["c"].ids.ravel(), base.v["dec"].ids.ravel()
    nJ = n * J
    for lam in pts:  # q >= (2 l + 1) c - l (l + 1), exact at c in {l, l + 1}
        r = np.arange(nJ)
        md.add_constraints(np.concatenate([r, r]), np.concatenate([q.ids.ravel(), c_ids]),
                           np.concatenate([np.ones(nJ), np.full(nJ, -(2.0 * lam + 1))]),
                           lo=-float(lam * (lam + 1)), name=f"rem_sec{lam}")
    _generation_packing(md, base, inst)
    _batches_or_evictions(md, base, inst)
    ds = delta * base.scale
    md.add_objective(np.concatenate([q.ids.ravel(), dec_ids]),
                     np.concatenate([np.full(nJ, ds), np.full(nJ, -ds)]))
    cut = hyp.at_most if ub is None else (ub if hyp.at_most is None else min(ub, hyp.at_most))
    if cut is not None:
        t_ids = base.v["t"].ids
        md.add_constraint(np.concatenate([t_ids, q.ids.ravel(), dec_ids]),
                          np.concatenate([np.ones(J), np.full(nJ, ds), np.full(nJ, -ds)]),
                          hi=cut * base.scale * (1 + 1e-9) + 1e-9, name="rem_cut")
    return RemainderModel(base, inst, q, tuple(pts))


def half_capacity_weight(footprint: np.ndarray, M: int) -> np.ndarray:
    """The dual-feasible function of eq. 27c: 1 above ``M/2``, 1/2 at ``M/2``, 0 below; any
    footprints summing to at most ``M`` have weights summing to at most 1."""
    f = np.asarray(footprint, float)
    return np.where(2 * f > M, 1.0, np.where(2 * f == M, 0.5, 0.0))


def _generation_packing(md: milp.Model, base: InfermaxModel, inst: Instance) -> None:
    """(eq. 27c) per batch, the requests that generate a token hold at least ``I`` KV after it
    (the first token) or ``I + 1`` (later tokens), all within ``M``, so
    ``sum_i w(I_i + 1) gen + (w(I_i) - w(I_i + 1)) (ftk_after - ftk_before) <= y_j`` with the
    weights of :func:`half_capacity_weight`. Summed over batches this is a lower bound on
    the number of batches (``k0`` dominates fitted cost models) that the LP otherwise misses."""
    lim = inst.limits
    M = lim.kv_capacity
    w_first = half_capacity_weight(lim.kv_footprint(inst.prompt), M)
    w_later = half_capacity_weight(lim.kv_footprint(inst.prompt + 1), M)
    if not (w_first.any() or w_later.any()):
        return
    gen, ftk, y = base.v["gen"].ids, base.v["ftk"].ids, base.v["y"].ids
    n, J = gen.shape
    jj = np.broadcast_to(np.arange(J), (n, J))
    a = np.broadcast_to(w_later[:, None], (n, J))
    b = np.broadcast_to((w_first - w_later)[:, None], (n, J))
    md.add_constraints(np.concatenate([jj.ravel()] * 3 + [np.arange(J)]),
                       np.concatenate([gen.ravel(), ftk[:, 1:].ravel(), ftk[:, :-1].ravel(), y]),
                       np.concatenate([a.ravel(), b.ravel(), -b.ravel(), -np.ones(J)]),
                       hi=0.0, name="gen_pack")


def one_generator_per_batch(inst: Instance) -> bool:
    """True when eq. 27d applies: every request has ``O >= 2``, a first token (KV ``I`` after
    the batch) never fits beside another request's later token (KV ``>= I + 1``), and no three
    first tokens fit together. Checked on the smallest prompt, a lower bound for any pair."""
    if inst.n < 2 or int(inst.output.min()) < 2:
        return False
    lim = inst.limits
    M = lim.kv_capacity
    i0 = int(inst.prompt.min())
    first, later = (int(v) for v in lim.kv_footprint(np.array([i0, i0 + 1])))
    return first + later > M and 3 * first > M


def _batches_or_evictions(md: milp.Model, base: InfermaxModel, inst: Instance) -> None:
    """(eq. 27d) when :func:`one_generator_per_batch` holds, ``sum_j y_j + sum_{i,j} e_ij >=
    sum_i O_i``: each later token (``O_i - 1`` per request, evictions or not) has a batch with
    no other token; at most two first tokens share a batch, and two that do force an eviction
    (both hold their KV until one generates again, which needs ``I + 1`` beside the other's
    ``I``), so batches with entries >= ``sum (O_i - 1) + n - #evictions``."""
    if not one_generator_per_batch(inst):
        return
    e, y = base.v["e"].ids, base.v["y"].ids
    md.add_constraint(np.concatenate([y, e.ravel()]), np.ones(y.size + e.size),
                      lo=float(inst.output.sum()), name="batches_or_evictions")


if TYPE_CHECKING:  # mypy checks that the model satisfies the solve path's protocol
    _built_model: type[BuiltModel] = RemainderModel
