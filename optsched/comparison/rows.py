"""What a comparison holds: one :class:`Row` per compared schedule, the :class:`Comparison`
they form, and the SLO goodput beside its certified upper bound (:class:`GoodputGap`).

Every row's numbers come from :func:`optsched.evaluate` (``Evaluation.objective``); how they
are computed is :mod:`optsched.comparison.logic`, how they are written
:mod:`optsched.comparison.report`.

**The gap of a maximisation objective** (the goodput table). ``compare``'s gap is
``(value - reference) / |reference|`` (:func:`optsched.comparison.logic.gap`) with the
reference on the better side. For goodput the better side is the upper bound ``U``
(``formulations/bounds.md`` B12, :func:`optsched.bounds.goodput.goodput_bound`), so the gap is
the share of the bound the schedule misses: ``(U - a) / U = -gap(a, U)``. Because
``U >= a* >= a`` (``a*`` the optimum attainment), ``(U - a) / U >= (a* - a) / a*``: the gap
bounds the schedule's shortfall relative to the optimum from above, as a minimisation gap to a
lower bound does. ``U = 0`` forces ``a = 0`` and the gap 0. Attainment is the evaluator's
``slo_attainment`` (docs/semantics.md section 4): the share of the requests with at least one
of ``ttft_slo``, ``tpot_slo``, ``deadline`` that meet all of theirs; the bound counts the same
requests.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ..bounds.goodput import GoodputBound
from ..errors import OptschedError
from ..evaluation import Evaluation
from ..formulations.base import bound_is_global
from ..instance import Instance
from ..objectives import OBJECTIVE_WORDS
from ..progress import fmt, table, value
from ..schedule import Schedule
from ..serving.load import OfferedLoad
from ..solve_types import (
    ABOVE_OPTIMAL,
    BoundResult,
    SolveReport,
    Status,
    above_optimum,
    finite_or_none,
)


class RowKind(StrEnum):
    """What a compared row holds: a simulated policy's schedule, a schedule file's, the
    schedule large-neighbourhood search found, or the solve's."""

    POLICY = "policy"
    SCHEDULE = "schedule"
    LNS = "lns"
    OPTIMUM = "optimum"


@dataclass(frozen=True, eq=False)
class Row:
    """One compared schedule (or a failed attempt to get one).

    ``status`` is the :class:`~optsched.solve_types.Status` of getting it: a policy's,
    a file's or a search's schedule is ``feasible`` or ``infeasible`` as the evaluator finds
    it, and ``error`` when the policy failed; the optimum row's is the solve's.
    :attr:`status_text` is how tables and ``report.json`` write it. ``objective`` is
    ``Evaluation.objective`` of the row's schedule, ``gap`` its gap to the comparison's
    reference. ``solve`` is the report behind the optimum row (also when the model was
    skipped: then :attr:`skipped`, and its ``fallback``); ``search_method`` the neighbourhood
    that found an ``lns`` row's schedule (:attr:`optsched.search.lns.LNSResult.method`).
    """

    label: str
    kind: RowKind
    status: Status
    schedule: Schedule | None = None
    evaluation: Evaluation | None = None
    objective: float | None = None
    runtime: float | None = None
    gap: float | None = None
    message: str | None = None
    solve: SolveReport | None = None
    search_method: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", RowKind(self.kind))
        object.__setattr__(self, "status", Status(self.status))
        if (self.solve is not None) != (self.kind == RowKind.OPTIMUM):
            raise ValueError(f"row {self.label!r}: a solve report belongs to the optimum row, "
                             "and the optimum row has one")

    def metric(self, key: str) -> Any:
        return None if self.evaluation is None else self.evaluation.metrics.get(key)

    @property
    def skipped(self) -> bool:
        """The optimum row of a solve whose model was skipped (it did not fit the budget)."""
        return self.solve is not None and self.solve.plan is not None and not self.solve.plan.build

    @property
    def status_text(self) -> str:
        """The status as the tables write it: ``feasible``, ``infeasible (N violations)``,
        ``error``; for the optimum row ``optimal``, ``best found (not proven optimal)``,
        ``skipped`` or the solve's status."""
        if self.skipped:
            return "skipped"
        if self.kind == RowKind.OPTIMUM:
            return {Status.OPTIMAL: "optimal",
                    Status.RESTRICTED_OPTIMAL: "restricted-optimal (not proven optimal)",
                    Status.FEASIBLE: "best found (not proven optimal)"}.get(self.status,
                                                                            str(self.status))
        if self.kind == RowKind.POLICY and self.status == Status.NO_SOLUTION:
            return "stopped at the time limit"
        if self.status == Status.INFEASIBLE and self.evaluation is not None:
            return f"infeasible ({sum(self.evaluation.violation_counts.values())} violations)"
        return str(self.status)

    @property
    def method(self) -> str:
        """What produced this row's schedule: ``policy``, ``schedule file``, ``solver
        (FORMULATION)`` or, for an ``lns`` row, ``lns: NEIGHBOURHOOD``."""
        if self.search_method is not None:
            return f"lns: {self.search_method}"
        if self.solve is not None:
            return f"solver ({self.solve.formulation})"
        return {RowKind.SCHEDULE: "schedule file"}.get(self.kind, str(self.kind))

    def to_dict(self) -> dict[str, Any]:
        ev = self.evaluation
        return {
            "label": self.label,
            "kind": str(self.kind),
            "status": self.status_text,
            "feasible": None if ev is None else ev.feasible,
            "violations": None if ev is None else int(sum(ev.violation_counts.values())),
            "objective": finite_or_none(self.objective),
            "gap": finite_or_none(self.gap),
            "evictions": self.metric("evictions"),
            "mean_ttft": finite_or_none(self.metric("mean_ttft")),
            "mean_tpot": finite_or_none(self.metric("mean_tpot")),
            "runtime": finite_or_none(self.runtime),
            "message": self.message,
            **self._solve_dict(),
            "method": self.method,
        }

    def _solve_dict(self) -> dict[str, Any]:
        """The optimum row's solve in ``report.json``."""
        rep = self.solve
        if rep is None:
            return {}
        if self.skipped:
            est = None if rep.plan is None else rep.plan.estimate
            return {"solver_status": "skipped", "formulation": rep.formulation,
                    "estimate": None if est is None else est.describe(),
                    "fallback": None if rep.fallback is None else rep.fallback.to_dict()}
        return {"solver_status": str(rep.status), "bound": finite_or_none(rep.bound),
                "solver_gap": finite_or_none(rep.gap), "formulation": rep.formulation,
                "solver": rep.solver, "bound_global": bound_is_global(rep),
                "restricted": rep.restricted}


@dataclass
class Comparison:
    """The rows of one comparison, the solve behind the optimum row and the gap reference
    (what ``optsched.compare`` returns). ``report`` is the solve's report when its model was
    built (None when it was skipped: the optimum row's ``solve`` then holds the fallback)."""

    instance: Instance
    objective: str
    rows: list[Row]
    optimum: Row | None = None
    report: SolveReport | None = None
    #: what the gaps are measured against: ``"optimum"``, ``"bound"`` or None (no gaps)
    reference_kind: str | None = None
    reference: float | None = None
    time_limit: float | None = None
    solver: str = ""
    #: the certified lower bound (``optsched.bounds``), computed at every size
    lower_bound: BoundResult | None = None
    #: where the reference comes from, in words ("proven optimum", "bound: work", ...)
    reference_source: str | None = None
    #: what the comparison could not do within the time limit
    notes: list[str] = field(default_factory=list)
    #: SLO attainment of every row beside its certified upper bound (None: no SLO)
    goodput: GoodputGap | None = None
    #: the instance's offered load (docs/semantics.md section 4)
    offered_load: OfferedLoad | None = None

    @property
    def best(self) -> Row | None:
        """The feasible row with the smallest objective (first of equals), None if none."""
        feas = [r for r in self.rows if r.evaluation is not None and r.evaluation.feasible
                and r.objective is not None and math.isfinite(r.objective)]
        return min(feas, key=objective_key) if feas else None

    @property
    def all_feasible(self) -> bool:
        """Every row has a feasible schedule (the CLI's exit 0)."""
        return all(r.evaluation is not None and r.evaluation.feasible for r in self.rows)

    def summary(self) -> str:
        """The comparison in a few lines (``print(comparison)``): a row per schedule, what
        the gaps are measured against, the certified lower bound, the notes and the verdict."""
        gap_head = {"optimum": "above optimal", "bound": ABOVE_OPTIMAL}.get(
            self.reference_kind or "", "gap")
        rows = [(r.label, r.status_text, r.objective,
                 None if r.gap is None else f"{100 * r.gap:+.2f}%", r.method) for r in self.rows]
        lines = [f"{self.instance.name or 'instance'} ({self.instance.n} requests): "
                 f"{OBJECTIVE_WORDS.get(self.objective, self.objective)}",
                 table(["schedule", "status", "objective", gap_head, "method"], rows)]
        if self.reference_kind is not None:
            lines.append(f"gaps to the {self.reference_source} {fmt(self.reference)}")
        if self.lower_bound is not None:
            lines.append(f"certified lower bound: {fmt(self.lower_bound.value)} "
                         f"({self.lower_bound.method})")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines + [compare_verdict(self)])

    def __str__(self) -> str:
        return self.summary()


def objective_key(row: Row) -> float:
    """A row's objective for sorting (infinite without one)."""
    return math.inf if row.objective is None else row.objective


class GoodputGapError(OptschedError, ValueError):
    """An inconsistent goodput row or summary."""


@dataclass(frozen=True)
class GoodputRow:
    """One schedule's attainment and its gap to the bound (None: no feasible schedule)."""

    label: str
    attainment: float | None
    gap: float | None

    def __post_init__(self) -> None:
        for name in ("attainment", "gap"):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and -1e-9 <= v <= 1 + 1e-9):
                raise GoodputGapError(f"goodput row {self.label!r}: {name} {v!r} not in [0, 1]")

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "attainment": self.attainment, "gap": self.gap}


@dataclass(frozen=True)
class GoodputGap:
    """The bound, every compared row, and the best row (largest attainment, first of equals)."""

    bound: GoodputBound
    rows: tuple[GoodputRow, ...]
    seconds: float

    def __post_init__(self) -> None:
        ub = self.bound.attainment
        if ub is None:
            raise GoodputGapError("goodput gap: no request has an SLO")
        for r in self.rows:
            if r.attainment is not None and r.attainment > ub + 1e-9:
                raise GoodputGapError(  # a bound below a schedule is a bug, never a result
                    f"goodput bound {ub:.6g} is below {r.label!r}'s attainment {r.attainment:.6g}")

    @property
    def upper(self) -> float:
        """The certified upper bound on SLO attainment (B12)."""
        ub = self.bound.attainment
        if ub is None:  # __post_init__ refuses it
            raise GoodputGapError("goodput gap: no request has an SLO")
        return ub

    @property
    def best(self) -> GoodputRow | None:
        done = [r for r in self.rows if r.attainment is not None]
        return max(done, key=lambda r: r.attainment or 0.0) if done else None

    def to_dict(self) -> dict[str, Any]:
        b = self.best
        return {"metric": "slo_attainment", "upper_bound": self.upper,
                "gap_formula": "(upper_bound - attainment) / upper_bound",
                "bound": self.bound.to_dict(), "seconds": self.seconds,
                "best": None if b is None else b.to_dict(),
                "rows": [r.to_dict() for r in self.rows]}


def compare_verdict(cmp: Any) -> str:
    """The sentence for ``optsched compare`` (``cmp`` a :class:`Comparison`):
    the best policy row against the optimum, or the interval the optimum lies in."""
    inst, what = cmp.instance, OBJECTIVE_WORDS.get(cmp.objective, cmp.objective)
    feas = [r for r in cmp.rows if r.evaluation is not None and r.evaluation.feasible
            and r.objective is not None and math.isfinite(r.objective)]
    if not feas:
        return "No feasible schedule to compare: every row failed or is infeasible."
    proven = cmp.reference_kind == "optimum"
    upper = cmp.reference if proven else min(r.objective for r in feas)
    lower = cmp.reference if cmp.reference_kind is not None else None
    policies = [r for r in feas if r.kind in ("policy", "schedule")]
    if not policies:
        best = min(feas, key=lambda r: r.objective)
        return (f"The best schedule ({best.label}) has {what} "
                f"{value(best.objective, inst)}, "
                f"{above_optimum(best.objective, lower, upper, proven)}.")
    best = min(policies, key=lambda r: r.objective)
    of = f" (the best of {len(policies)})" if len(policies) > 1 else ""
    return (f"{best.label}{of} is {above_optimum(best.objective, lower, upper, proven)} "
            f"on {what} ({value(best.objective, inst)})." + starved_decodes(cmp, policies))


#: a mean-TTFT row whose mean TPOT is this many times the best policy's starves decodes
STARVED_TPOT_FACTOR = 5.0


def starved_decodes(cmp: Any, policies: list[Row]) -> str:
    """A sentence flagging a mean-TTFT optimum (or best schedule found) that buys its first
    tokens by starving decodes, else "": mean TTFT counts no token after the first, so the
    optimum may evict every request after it (seen: TPOT 4-32 s). Flagged when its mean
    TPOT is :data:`STARVED_TPOT_FACTOR` times the lowest of the policies'."""
    if cmp.objective != "mean-ttft":
        return ""
    opt = next((r for r in cmp.rows if r.kind == RowKind.OPTIMUM and r.evaluation is not None
                and r.evaluation.feasible), None)
    seen = [r.evaluation.metrics.get("mean_tpot") for r in policies if r.evaluation is not None]
    tpots: list[float] = [float(t) for t in seen if t is not None and math.isfinite(t) and t > 0]
    if opt is None or opt.evaluation is None or not tpots:
        return ""
    mine = opt.evaluation.metrics.get("mean_tpot")
    if mine is None or not math.isfinite(mine) or mine < STARVED_TPOT_FACTOR * min(tpots):
        return ""
    ev = opt.evaluation.metrics.get("evictions", 0)
    return (f" Warning: the mean-TTFT optimum starves decodes: its mean TPOT is "
            f"{value(mine, cmp.instance)} against {value(min(tpots), cmp.instance)} for the "
            f"best policy ({ev} evictions); mean TTFT counts no token after the first.")


__all__ = ["Comparison", "GoodputGap", "GoodputGapError", "GoodputRow", "Row", "RowKind",
           "compare_verdict", "objective_key", "starved_decodes"]
