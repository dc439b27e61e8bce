"""``--time-limit`` is a budget for the whole command: size a model *before* building it.

:func:`estimate_model` predicts the size of the model a formulation would build, and the
seconds it takes to build it and hand it to the solver (everything a solver time limit does
not cover), from the warm start's batch count, by asking the formulation's ``estimate``
hook (:class:`optsched.formulations.base.FormulationInfo`). :func:`plan_solve` decides,
before anything is built, whether the model fits the time left and how many seconds the
solver may use; when it does not fit, the solve pipeline (:func:`optsched.solving.pipeline.run`)
says so and falls back to bounds and heuristics.

The per-variable figures were measured on the 20-request Azure conversation slice
(``generate azure --limit 20 --kv-capacity 4000``) and its first 5 and 10 requests, tight
InferMax model, HiGHS, 10 s solver limit, on the shared 2-core machine: 42k / 286k / 1.32M
variables took 6.5 / 10.6 / 49 s beyond the limit (build, hand-over to HiGHS, presolve,
warm-start encoding, decode and replay). The model is ~47 variables and ~118 rows per
request and batch slot (``optsched.formulations.infermax.build`` on those slices; those
per-slot figures live with the model, in ``formulations/infermax/solve.py``).
"""

from __future__ import annotations

import math
import sys
import time

from ..formulations.base import FORMULATIONS, Hypotheses, SizeHint
from ..instance import Instance
from ..progress import elapsed
from ..solve_types import ModelEstimate, SolveOptions, SolvePlan, upper_gap

# ModelEstimate, SolvePlan (the plan a solve reports) and upper_gap (the gap vocabulary) are
# defined in optsched.solve_types with the result types and re-exported here

#: fixed seconds beyond the solver limit for any MILP (imports, warm start, decode, replay)
OVERHEAD_SECONDS = 3.0
#: seconds per model variable beyond the solver limit (build, hand-over, presolve): the
#: measured 3.5e-5 with a margin of 1.4 for a machine busier than at measurement
SECONDS_PER_VARIABLE = 5e-5
#: the solver gets at most this share of what is left; the rest is the estimate's margin
MIN_SOLVER_SECONDS = 1.0


def estimate_model(instance: Instance, formulation: str, objective: str, params: dict,
                   warm_batches: int, warm_objective: float | None,
                   hypotheses: Hypotheses | None = None) -> ModelEstimate | None:
    """The model ``formulation`` would build from a warm start of ``warm_batches`` batches and
    objective ``warm_objective`` (its ``estimate`` hook), priced in seconds beyond the
    solver's limit; None when no estimate is known (no hook: the exhaustive search honours
    its time limit, hindsight is sized by its own time line)."""
    size = FORMULATIONS.get(formulation).estimate(
        instance, objective, SolveOptions(params=dict(params)),
        SizeHint(int(warm_batches), warm_objective), hypotheses)
    if size is None:
        return None
    return ModelEstimate(formulation, size.columns, size.rows, _seconds(size.build_units),
                         size.detail)


#: models below this many variables (columns plus rows in :func:`plan_solve`) take
#: :data:`SMALL_OVERHEAD_SECONDS` fixed instead of :data:`OVERHEAD_SECONDS`: the warm start,
#: which the 3 s covered, is now timed on its own (:func:`optsched.solving.pipeline.run` runs it first), and a
#: small model is built, decoded and replayed in well under a second, so a short time limit
#: still solves a small instance
SMALL_MODEL_VARIABLES, SMALL_OVERHEAD_SECONDS = 20_000, 1.0
#: a small model is still built with this many seconds left (and gets half of them)
SMALL_MIN_SECONDS = 0.5


def _seconds(variables: int) -> float:
    fixed = SMALL_OVERHEAD_SECONDS if variables < SMALL_MODEL_VARIABLES else OVERHEAD_SECONDS
    return fixed + SECONDS_PER_VARIABLE * variables


def plan_solve(estimate: ModelEstimate | None, seconds_left: float) -> SolvePlan:
    """Build only if the estimated overhead leaves the solver at least a second; the solver
    gets what is left after the overhead."""
    if not math.isfinite(seconds_left):
        return SolvePlan(True, None, estimate, "no time limit")
    if estimate is None:
        return SolvePlan(True, max(MIN_SOLVER_SECONDS, seconds_left - OVERHEAD_SECONDS), None,
                         "model size unknown in advance; the solver gets the time left")
    solver = seconds_left - estimate.seconds
    if solver < MIN_SOLVER_SECONDS \
            and estimate.variables + estimate.constraints < SMALL_MODEL_VARIABLES \
            and seconds_left >= SMALL_MIN_SECONDS:
        # a small model is built and solved in a fraction of a second: it gets half of what
        # is left rather than nothing (an overrun stays within the 10% + 1 s slack)
        return SolvePlan(True, seconds_left / 2, estimate,
                         f"{estimate.describe()}; small, so the solver gets half of the "
                         f"{seconds_left:.1f} s left")
    if solver < MIN_SOLVER_SECONDS:
        return SolvePlan(False, None, estimate,
                         f"model skipped: {estimate.describe()}, more than the "
                         f"{max(0.0, seconds_left):.0f} s left of the time limit")
    return SolvePlan(True, solver, estimate,
                     f"{estimate.describe()}; the solver gets {solver:.0f} s")


#: the bound ladder's share of what is left when ``solve`` and ``compare`` start it (the rest:
#: the warm start, the model or its LNS fallback, the report)
LADDER_SHARE = 1 / 3
#: the warm start's share of the budget: its policies stop there (the rest goes to the bound,
#: the model or, when the model is skipped, to large-neighbourhood search)
WARM_SHARE = 0.5
#: seconds kept back from any stage for what follows it (replay, report, output)
RESERVE_SECONDS = 0.5
#: a run may end this late: ``RUN_SLACK_SHARE * limit + RUN_SLACK_SECONDS`` past its limit
#: before it says that it overran (within 10% + 1 s of ``--time-limit``)
RUN_SLACK_SHARE, RUN_SLACK_SECONDS = 0.1, 1.0


def overrun_note(what: str, started: float, limit: float | None) -> str | None:
    """A note (also written to stderr) when ``what`` took longer than ``limit`` seconds plus
    the slack of :data:`RUN_SLACK_SHARE` and :data:`RUN_SLACK_SECONDS`; None when in time."""
    if limit is None or not math.isfinite(limit):
        return None
    took = time.perf_counter() - started
    if took <= limit * (1 + RUN_SLACK_SHARE) + RUN_SLACK_SECONDS:
        return None
    note = f"{what} overran its time limit: {took:.1f} s for a limit of {limit:g} s"
    print(f"optsched: warning: {note}", file=sys.stderr, flush=True)
    return note


#: LNS is not started with less than this many seconds left
MIN_LNS_SECONDS = 1.0


def command_seconds(time_limit: float) -> float:
    """What is left of a command's ``--time-limit`` at this point: the limit counts from the
    command's start, which for ``optsched ...`` run as a program is the process start
    (interpreter start-up and imports are part of the wall time a user sees,
    :func:`optsched.progress.process_age`); at least a tenth of a second."""
    return max(0.1, float(time_limit) - elapsed())


__all__ = ["LADDER_SHARE", "MIN_LNS_SECONDS", "MIN_SOLVER_SECONDS", "OVERHEAD_SECONDS", "RESERVE_SECONDS",
           "RUN_SLACK_SECONDS", "RUN_SLACK_SHARE", "SECONDS_PER_VARIABLE", "SMALL_MIN_SECONDS",
           "SMALL_MODEL_VARIABLES", "SMALL_OVERHEAD_SECONDS", "WARM_SHARE", "ModelEstimate",
           "SolvePlan", "command_seconds", "estimate_model", "overrun_note", "plan_solve",
           "upper_gap"]
