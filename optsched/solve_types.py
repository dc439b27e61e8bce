"""The solve vocabulary, defined once for every layer that solves something.

* :class:`Status` -- the outcome of a solve (MILP backends, formulations, search oracles);
* :class:`Objective` -- what a formulation minimises (semantics section 4; defined in
  :mod:`optsched.objectives`, below the evaluator, which reads the same names);
* :class:`SolveOptions` -- what the caller asks of a solve: backend, budget, threads, seed,
  gaps, logging, and formulation-specific ``params``;
* :func:`relative_gap` -- the one gap formula;
* :class:`WarmStart` -- a warm-start schedule together with its evaluation, so that it is
  replayed once and every formulation reads the same verdict.

This module imports nothing of optsched but :mod:`optsched.errors` at run time (the evaluator
imports it for :data:`OBJECTIVES`; :class:`WarmStart` only names the evaluator's types).

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
from .evaluate import Evaluation
from .jsonio import finite_or_none  # noqa: F401  (re-exported: the one _num)
from .objectives import MODELLED, OBJECTIVES, Objective

if TYPE_CHECKING:
    from .schedule import Schedule


class Status(StrEnum):
    """The outcome of a solve. ``OPTIMAL``/``FEASIBLE`` carry a solution."""

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    NO_SOLUTION = "no_solution"
    ERROR = "error"

    @property
    def has_solution(self) -> bool:
        return self in (Status.OPTIMAL, Status.FEASIBLE)


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


@dataclass(frozen=True, eq=False)
class WarmStart:
    """A warm-start schedule and its replay by :func:`optsched.evaluate.evaluate`
    (evaluated once, by :func:`optsched.pipeline.run`; formulations read ``evaluation``
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


__all__ = ["MILP_DEFAULTS", "MODELLED", "OBJECTIVES", "STATUSES", "Objective", "OptionsError", "SolveOptions",
           "Status", "WarmStart", "finite_or_none", "relative_gap"]
