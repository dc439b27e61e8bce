"""The solve vocabulary, defined once for every layer that solves or bounds something.

* :class:`Status` -- the outcome of a solve (MILP backends, formulations, search oracles,
  the rows of a comparison);
* :class:`Objective` -- what a formulation minimises (semantics section 4; defined in
  :mod:`optsched.objectives`, below the evaluator, which reads the same names);
* :class:`SolveOptions` -- what the caller asks of a solve: backend, budget, threads, seed,
  gaps, logging, and formulation-specific ``params``;
* the gaps: :func:`relative_gap` (the one gap formula), :func:`upper_gap` (how far above a
  lower bound a schedule can be) and :func:`above_optimum` (the same in words);
* :class:`WarmStart` -- a warm-start schedule together with its evaluation, so that it is
  replayed once and every formulation reads the same verdict;
* the results: :class:`BoundResult` (``optsched.lower_bound``) and :class:`SolveReport`
  (``optsched.solve``: the model's answer checked by the evaluator, with the pipeline's
  :class:`SolvePlan`, lower bound and :class:`Fallback`), each with a ``summary()``.

They live here, below the formulations, the bounds and the pipeline that fill them in, so that
every layer names the same types (the layer contract counts type-only imports too). This
module imports only the floors below it: errors, objectives, progress (number words),
jsonio, and the evaluator's :class:`~optsched.evaluation.Evaluation`.

The MILP layer (:mod:`optsched.milp`) reads the solver-facing fields of
:class:`SolveOptions` and ignores ``solver``/``params`` (the backend is an argument of
:func:`optsched.milp.solve`); formulations read all of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from .errors import OptschedError
from .evaluation import Evaluation
from .jsonio import finite_or_none  # noqa: F401  (re-exported: the one _num)
from .objectives import MODELLED, OBJECTIVE_WORDS, OBJECTIVES, Objective
from .progress import fmt, pct

if TYPE_CHECKING:
    from .schedule import Schedule


class Status(StrEnum):
    """The outcome of a solve. ``OPTIMAL``/``RESTRICTED_OPTIMAL``/``FEASIBLE`` carry a
    solution.

    ``OPTIMAL`` is proven optimal for the model solved; the InferMax model's optimum under a
    batch-count horizon below its certified ``Jmax`` is ``RESTRICTED_OPTIMAL``, never read as
    a proof. Other restrictions (the hindsight model's unit slots without preemption, the
    user's hypotheses) keep ``OPTIMAL`` with :attr:`SolveReport.restricted` set; ask
    :attr:`SolveReport.proven_optimal`, which answers for every case.
    """

    OPTIMAL = "optimal"
    #: proven optimal among schedules of at most J batches with entries (the InferMax
    #: horizon below Jmax): a feasible schedule, no proof for docs/semantics.md's problem
    RESTRICTED_OPTIMAL = "restricted-optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    NO_SOLUTION = "no_solution"
    ERROR = "error"

    @property
    def has_solution(self) -> bool:
        return self in (Status.OPTIMAL, Status.RESTRICTED_OPTIMAL, Status.FEASIBLE)


#: every status name, in declaration order (for argparse choices and messages)
STATUSES: tuple[str, ...] = tuple(s.value for s in Status)


class OptionsError(OptschedError, ValueError):
    """A :class:`SolveOptions` field is out of range."""


@dataclass(frozen=True)
class SolveOptions:
    """What every solve honours (or says in its notes that it could not).

    ``solver`` names the MILP backend a formulation uses; ``time_limit`` seconds (None =
    none); ``threads`` (None = solver default); ``seed`` (None = solver default);
    ``rel_gap``/``abs_gap`` stop when the gap is below either; ``log_file`` receives the
    solver's log; ``progress`` shows a live line on stderr (None = only when stderr is a
    terminal); ``verbose`` echoes the solver's own log; ``params`` are formulation-specific
    knobs, e.g. ``{"batches": 12}`` or ``{"variant": "plain"}``.
    """

    solver: str = "highs"
    time_limit: float | None = 60.0
    threads: int | None = None
    seed: int | None = 0
    rel_gap: float = 1e-6
    abs_gap: float = 1e-9
    log_file: str | None = None
    progress: bool | None = None
    verbose: bool = False
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.time_limit is not None and not (self.time_limit > 0):
            raise OptionsError(f"time_limit must be > 0 seconds, got {self.time_limit!r}")
        if self.threads is not None and (int(self.threads) != self.threads or self.threads < 1):
            raise OptionsError(f"threads must be a positive integer, got {self.threads!r}")
        if self.seed is not None and (int(self.seed) != self.seed or self.seed < 0):
            raise OptionsError(f"seed must be a non-negative integer, got {self.seed!r}")
        for name in ("rel_gap", "abs_gap"):
            v = getattr(self, name)
            if not (v >= 0 and math.isfinite(v)):
                raise OptionsError(f"{name} must be a finite number >= 0, got {v!r}")

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


#: the defaults of a bare :func:`optsched.milp.solve` call: no time limit, the solvers'
#: usual 1e-4 relative gap, the solver's own seed
MILP_DEFAULTS = SolveOptions(time_limit=None, seed=None, rel_gap=1e-4, abs_gap=1e-6)


def relative_gap(objective: float | None, bound: float | None, *,
                 per: str = "objective") -> float | None:
    """The one gap formula, for every backend, formulation, report and chart.

    ``per="objective"`` (solvers, formulations, budget, progress charts): the MIP gap
    ``|objective - bound| / max(|objective|, 1e-10)``. ``per="bound"`` (``compare``'s rows,
    whose reference is a bound or an optimum, and the sweep report's ``ratio - 1``): the signed
    ``(objective - bound) / |bound|``, 0 when both are 0 and None for a zero bound below a
    non-zero objective. None when either value is missing or not finite.
    """
    if objective is None or bound is None:
        return None
    if not (math.isfinite(objective) and math.isfinite(bound)):
        return None
    if per == "objective":
        return abs(objective - bound) / max(abs(objective), 1e-10)
    if per != "bound":
        raise ValueError(f"relative_gap: per must be 'objective' or 'bound', got {per!r}")
    if bound == 0:
        return 0.0 if objective == 0 else None
    return (objective - bound) / abs(bound)


def upper_gap(upper: float | None, lower: float | None) -> float | None:
    """How far above a lower bound a schedule can be at most: the one gap formula
    (:func:`relative_gap`, ``(upper - lower) / |upper|``) of its objective against the bound,
    0 when the bound reaches the objective (it cannot exceed the optimum: a bound above is
    tolerance) and for a zero objective a zero bound allows."""
    if upper is None or lower is None or not math.isfinite(upper) or not math.isfinite(lower):
        return None
    if upper == 0:
        return 0.0 if lower <= 0 else None
    return relative_gap(upper, lower) if lower < upper else 0.0


#: the two names of a distance to the optimum, used identically in tables, verdicts and JSON
CERTIFIED_GAP = "certified gap"
ABOVE_OPTIMAL = "above optimal (at most)"


def certified_gap(best: float | None, bound: float | None) -> float | None:
    """The **certified gap** ``(best - bound) / best`` of the best schedule known against the
    certified lower bound (:func:`upper_gap`; the MIP gap when ``bound`` is the solver's):
    the share of ``best`` that may still be saved. JSON ``certified_gap``."""
    return upper_gap(best, bound)


def above_optimal(value: float | None, bound: float | None) -> float | None:
    """**At most x above optimal**: ``(value - bound) / bound`` of a schedule of ``value``
    against a lower bound (exact against a proven optimum), never negative
    (:func:`relative_gap` ``per="bound"``). JSON ``above_optimal``; the verdicts' "at most
    x% above optimal" and ``compare``'s column."""
    g = relative_gap(value, bound, per="bound")
    return None if g is None else max(0.0, g)


def above_optimum(v: float, lower: float | None, upper: float | None, proven: bool) -> str:
    """How far a schedule of value ``v`` is above the optimum, in words. With a proven
    optimum ``OPT = upper``, ``v / OPT - 1`` above it; otherwise ``OPT`` lies in ``[L, U]``
    (``L = lower`` the largest lower bound, ``U = upper`` the best schedule known), so ``v``
    is at least ``v / U - 1`` and at most ``v / L - 1`` above it."""
    if proven and upper is not None and upper > 0:
        return f"{pct(v / upper - 1)} above optimal"
    lo = None if upper is None or upper <= 0 else max(0.0, v / upper - 1)
    hi = None if lower is None or not lower > 0 else v / lower - 1
    if lo is not None and hi is not None:
        return f"at least {pct(lo)} and at most {pct(hi)} above optimal"
    if hi is not None:
        return f"at most {pct(hi)} above optimal"
    return "of unknown distance to the optimum (no positive lower bound)"


@dataclass(frozen=True, eq=False)
class WarmStart:
    """A warm-start schedule and its replay by :func:`optsched.evaluate`
    (evaluated once, by :func:`optsched.solving.pipeline.run`; formulations read ``evaluation``
    instead of replaying the schedule again). ``source`` names where it came from (a policy,
    a compared row's label); None for a schedule given as such."""

    schedule: Schedule
    evaluation: Evaluation
    source: str | None = None

    @property
    def feasible(self) -> bool:
        return bool(self.evaluation.feasible)

    def objective(self, objective: str) -> float:
        return self.evaluation.objective(objective)


# -- the result of a bound --------------------------------------------------------------------
class BoundError(OptschedError):
    """A bound method cannot handle this instance/objective (say why)."""


class BoundUnavailable(BoundError):
    """A bound method ran on valid input but gave no bound: it stopped at the time limit,
    its model was too large for the time left, or its solve proved nothing. Not bad input:
    ``optsched bound`` exits 4 (undecided), not 2."""


@dataclass(frozen=True)
class BoundResult:
    """A certified lower bound: ``value <= optimum`` of ``objective`` on the instance
    (``formulations/bounds.md``); what ``optsched.lower_bound`` returns."""

    value: float
    method: str  # the registered method that produced ``value``
    objective: str
    runtime: float = 0.0
    #: other methods' values (``best``: every rung that ran), method -> value
    ladder: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def __post_init__(self):
        if self.objective not in OBJECTIVES:
            raise BoundError(f"unknown objective {self.objective!r}")
        if not isinstance(self.value, (int, float)) or math.isnan(self.value):
            raise BoundError(f"{self.method}: bound must be a number, got {self.value!r}")
        object.__setattr__(self, "value", float(self.value))

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "method": self.method, "objective": self.objective,
                "runtime": self.runtime, "ladder": dict(self.ladder), "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BoundResult:
        return cls(value=d["value"], method=d["method"], objective=d["objective"],
                   runtime=d.get("runtime", 0.0), ladder=dict(d.get("ladder", {})),
                   notes=tuple(d.get("notes", ())))

    def summary(self) -> str:
        """The bound in a line, its rungs in a second (``print(bound)``)."""
        what = OBJECTIVE_WORDS.get(self.objective, self.objective)
        lines = [f"{what} >= {fmt(self.value)} (certified lower bound, method {self.method}, "
                 f"{self.runtime:.2g} s)"]
        if self.ladder:
            lines.append("rungs: " + ", ".join(f"{k} {fmt(v)}" for k, v in self.ladder.items()))
        return "\n".join(lines + [f"note: {n}" for n in self.notes])

    def __str__(self) -> str:
        return self.summary()


# -- the result of a solve --------------------------------------------------------------------
@dataclass(frozen=True)
class ModelEstimate:
    """Predicted size and overhead of a formulation's model on one instance."""

    formulation: str
    variables: int
    constraints: int
    seconds: float  # beyond the solver's own time limit
    detail: str

    def describe(self) -> str:
        return (f"{self.detail}: ~{self.variables:,} variables, ~{self.constraints:,} rows; "
                f"building and handing it to the solver takes ~{self.seconds:.0f} s")


@dataclass(frozen=True)
class SolvePlan:
    """Whether to build the model, and the solver's seconds if so
    (:func:`optsched.solving.budget.plan_solve`)."""

    build: bool
    solver_seconds: float | None
    estimate: ModelEstimate | None
    note: str

    def to_dict(self) -> dict[str, Any]:
        """The ``budget`` of ``optsched solve --json``."""
        est = self.estimate
        return {"model_built": self.build, "note": self.note,
                "estimate": None if est is None else {
                    "variables": est.variables, "constraints": est.constraints,
                    "seconds": est.seconds}}


@dataclass(frozen=True)
class WarmStartInfo:
    """Which warm start a solve started from (:attr:`SolveReport.warm_start`): the policy (or
    ``"schedule"``, or a compared row's label) and its objective; ``feasible`` for a schedule
    handed in as such (a policy's schedule is only picked when feasible); ``stopped``: the
    policies not run, or stopped, at the budget's warm-start share. ``policy`` is None when
    no candidate was feasible before the budget stopped them."""

    policy: str | None
    objective: float | None
    feasible: bool | None = None
    stopped: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "objective", finite_or_none(self.objective))
        object.__setattr__(self, "stopped", tuple(self.stopped))

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"policy": self.policy, "objective": self.objective}
        if self.feasible is not None:
            d["feasible"] = self.feasible
        if self.stopped:
            d["stopped"] = list(self.stopped)
        return d


@dataclass(frozen=True, eq=False)
class SearchRun:
    """Large-neighbourhood search from a fallback's warm start (:mod:`optsched.search.lns`):
    the best schedule it found, that schedule's objective (by the evaluator), its seconds and
    the neighbourhood that found it."""

    schedule: Schedule
    objective: float
    seconds: float
    method: str


@dataclass(frozen=True, eq=False)
class Fallback:
    """The answer of a solve whose model was skipped (it did not fit the budget): the warm
    start's schedule, or the search's when :attr:`search` ran from it and found a better one.
    ``gap`` is the answer's :func:`upper_gap` to the certified lower bound (None without
    one)."""

    source: str  # the warm start: a policy name, a compared row's label, or "schedule"
    start_objective: float
    start_schedule: Schedule
    gap: float | None = None
    search: SearchRun | None = None

    @property
    def improved(self) -> bool:
        """The search ran and found a better schedule than the warm start."""
        return self.search is not None and self.search.objective < self.start_objective

    @property
    def policy(self) -> str:
        """What produced the answer: the warm start, or ``lns (<warm start>)``."""
        return f"lns ({self.source})" if self.improved else self.source

    @property
    def objective(self) -> float:
        return self.search.objective if self.search is not None and self.improved \
            else self.start_objective

    @property
    def schedule(self) -> Schedule:
        return self.search.schedule if self.search is not None and self.improved \
            else self.start_schedule

    def to_dict(self) -> dict[str, Any]:
        """The ``fallback`` of ``optsched solve --json``."""
        d: dict[str, Any] = {"policy": self.policy, "objective": self.objective, "gap": self.gap}
        if self.search is not None and self.improved:
            d.update(start_objective=self.start_objective, lns_seconds=self.search.seconds)
        return d


@dataclass(frozen=True, eq=False)
class SolveReport:
    """The one result of a solve (``optsched.solve``, ``optsched solve``; ``--json`` is
    :meth:`to_dict`).

    The model's answer, replayed and checked by the evaluator
    (:func:`optsched.formulations.base.solve_model`): ``status``, ``objective`` (the
    evaluator's), ``bound`` (the solver's, for the model solved), ``gap`` (their
    :func:`relative_gap`), ``evaluation`` and ``schedule``. Then what the pipeline
    (:func:`optsched.solving.run`) adds: ``lower_bound`` (the certified bound, when asked
    for), ``plan`` (whether the model was built, and the solver's seconds) and ``fallback``
    (the answer when the model was skipped). ``restricted``: the model (or the hypotheses)
    restrict the problem, so ``bound`` and a proven optimum hold for the restriction only
    (:attr:`optsched.formulations.base.RawSolution.restricted`). ``model_bound``: the
    solver's own bound in the model it solved (``bound`` becomes the certified one when the
    pipeline replaces a weaker or restricted bound); ``model_restriction``: which restriction
    of docs/semantics.md the model solved (the formulation's ``restriction``), None when it
    solved the problem itself.
    """

    status: Status
    objective: float | None
    bound: float | None
    gap: float | None
    runtime: float
    solver: str
    formulation: str
    objective_kind: str
    warm_start: WarmStartInfo | None
    evaluation: Evaluation | None
    schedule: Schedule | None
    notes: tuple[str, ...] = ()
    message: str | None = None
    nodes: int | None = None
    #: solver progress ``(elapsed, incumbent, bound)``
    history: tuple[tuple[float, float | None, float | None], ...] = ()
    restricted: bool = False
    lower_bound: BoundResult | None = None
    plan: SolvePlan | None = None
    fallback: Fallback | None = None
    model_bound: float | None = None
    model_restriction: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))
        object.__setattr__(self, "notes", tuple(self.notes))
        if self.objective_kind not in OBJECTIVES:
            raise ValueError(f"unknown objective {self.objective_kind!r}")

    @property
    def global_bound(self) -> float | None:
        """``bound`` when it is a lower bound on the optimum of docs/semantics.md's problem,
        else None (restricted model or hypotheses)."""
        return None if self.restricted else self.bound

    @property
    def proven_optimal(self) -> bool:
        """``objective`` is proven optimal for the problem of docs/semantics.md (not only for
        a restricted model)."""
        return self.status == Status.OPTIMAL and self.objective is not None \
            and not self.restricted

    @property
    def answer(self) -> float | None:
        """The objective of the answer: the solver's, else the fallback's."""
        if self.objective is not None:
            return self.objective
        return None if self.fallback is None else self.fallback.objective

    @property
    def best_known(self) -> tuple[str, float] | None:
        """The best schedule this solve knows for the problem of docs/semantics.md, as
        (source, objective): the answer, or the warm start when it is better (a restricted
        model may not represent it: the hindsight model has no preemption), or the fallback."""
        cands: list[tuple[float, str]] = []
        if self.objective is not None and self.status.has_solution:
            cands.append((self.objective, self.formulation))
        ws = self.warm_start
        if ws is not None and ws.policy is not None and ws.objective is not None \
                and ws.feasible is not False:
            cands.append((ws.objective, f"warm start ({ws.policy})"))
        if self.fallback is not None:
            cands.append((self.fallback.objective, self.fallback.policy))
        if not cands:
            return None
        v, src = min(cands, key=lambda c: c[0])  # ties: the answer, listed first
        return src, v

    def model_answer(self) -> dict[str, Any]:
        """The model's own figures, named by the model they hold in (``--json``'s
        ``"model"``): its status, the evaluator's objective of its schedule, the solver's
        bound and gap *in that model*; ``restriction`` None when the model is the problem of
        docs/semantics.md itself."""
        return {"formulation": self.formulation, "restriction": self.model_restriction,
                "status": str(self.status), "objective": finite_or_none(self.objective),
                "bound": finite_or_none(self.model_bound),
                "gap": finite_or_none(relative_gap(self.objective, self.model_bound))}

    @property
    def gap_to_lower_bound(self) -> float | None:
        """(answer - lower bound) / answer: an upper bound on the answer's distance to the
        optimum (:func:`upper_gap`); None without a certified lower bound."""
        return upper_gap(self.answer, None if self.lower_bound is None else self.lower_bound.value)

    def to_dict(self, *, include_schedule: bool = True, max_entries: int = 10_000,
                pipeline: bool = True) -> dict[str, Any]:
        """JSON: the model's answer (the schedule when ``include_schedule`` or it has at most
        ``max_entries`` entries) and, with ``pipeline``, the lower bound, the gap to it, the
        budget plan and the fallback (``optsched solve --json``)."""
        sched = None
        if self.schedule is not None and (include_schedule or self.schedule.n_entries <= max_entries):
            sched = self.schedule.to_dict()
        d = {
            "status": str(self.status),
            "objective": finite_or_none(self.objective),
            "bound": finite_or_none(self.bound),
            "gap": finite_or_none(self.gap),
            "runtime": self.runtime,
            "solver": self.solver,
            "formulation": self.formulation,
            "objective_kind": self.objective_kind,
            "warm_start": None if self.warm_start is None else self.warm_start.to_dict(),
            "evaluation": self.evaluation.to_dict() if self.evaluation is not None else None,
            "schedule": sched,
            "nodes": self.nodes,
            "notes": list(self.notes),
            "message": self.message,
            "history": [list(h) for h in self.history],
            "restricted": self.restricted,
        }
        if pipeline:
            d["lower_bound"] = None if self.lower_bound is None else self.lower_bound.to_dict()
            d["gap_to_lower_bound"] = self.gap_to_lower_bound  # = certified_gap; kept for readers
            lb = None if self.lower_bound is None else self.lower_bound.value
            d["certified_gap"] = certified_gap(self.answer, lb)
            d["above_optimal"] = None if self.answer is None else above_optimal(self.answer, lb)
            d["budget"] = None if self.plan is None else self.plan.to_dict()
            d["fallback"] = None if self.fallback is None else self.fallback.to_dict()
            bk = self.best_known
            d["best_known"] = None if bk is None else {
                "source": bk[0], "objective": bk[1], "certified_gap": certified_gap(bk[1], lb),
                "above_optimal": above_optimal(bk[1], lb)}
        d["model"] = self.model_answer()
        return d

    def summary(self) -> str:
        """The answer in a few lines (``print(report)``): status, objective, bound and gap,
        the certified lower bound and how far above it the answer is, the fallback, notes."""
        what = OBJECTIVE_WORDS.get(self.objective_kind, self.objective_kind)
        head = f"{self.formulation} / {self.solver or '-'}: {self.status}"
        if self.restricted and self.status == Status.OPTIMAL:
            head += " (for the restricted model or under the hypotheses)"
        lines = [f"{head}, {what} {fmt(self.objective)}, bound {fmt(self.bound)}, gap "
                 f"{'-' if self.gap is None else pct(self.gap)}, {self.runtime:.3g} s"]
        if self.warm_start is not None:
            lines.append(f"warm start: {self.warm_start.policy or '-'} "
                         f"({fmt(self.warm_start.objective)})")
        if self.fallback is not None:
            lines.append(f"model skipped; answer: {self.fallback.policy}, {what} "
                         f"{fmt(self.fallback.objective)}")
        lb = self.lower_bound
        if lb is not None:
            tail = "" if self.answer is None else \
                f"; the answer is {above_optimum(self.answer, lb.value, None, False)}"
            lines.append(f"certified lower bound: {fmt(lb.value)} ({lb.method}){tail}")
        lines += [f"note: {n}" for n in self.notes]
        if self.message:
            lines.append(f"message: {self.message}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


__all__ = ["MILP_DEFAULTS", "MODELLED", "OBJECTIVES", "STATUSES", "BoundError", "BoundResult",
           "Fallback", "ModelEstimate", "Objective", "OptionsError", "SearchRun", "SolveOptions", "SolvePlan",
           "SolveReport", "Status", "WarmStart", "WarmStartInfo", "above_optimum",
           "finite_or_none", "relative_gap", "upper_gap"]
