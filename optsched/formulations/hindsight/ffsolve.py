"""``hindsight-ff``: the hindsight IP solved by future-feasibility cuts, a certified LP bound,
reduced-cost fixing and CP-SAT (``formulations/hindsight.md`` (H23)-(H25)).

The model is the ``hindsight`` formulation's (tight variant, (H1)-(H20)): unit-time batches,
no preemption, no chunking, total latency. The method:

1. the best known starts (H8, H21): MC-SF, the other list schedules, the warm start, the local
   search;
2. the LP relaxation of the model with (H23) cut rounds (:mod:`.lpbound`) for at most
   ``cut_share`` of the time limit, and its certified bound (H24a);
3. if the bound does not meet the incumbent, CP-SAT over the starts left by reduced-cost
   fixing (H24b, (H25), :mod:`.cpsearch`) for the rest of the time.
"""

from __future__ import annotations

import importlib.util
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...instance import Instance
from ...plugins import ParamSpec, parse_params
from ...schedule import Schedule
from ...solve_types import Objective, Status, WarmStart
from ..base import FormulationError, Hypotheses, RawSolution, SolveOptions, register_formulation
from .cpsearch import search, space
from .floors import area_lower_bounds
from .lpbound import LPBound, root_bound
from .model import HindsightParams, build
from .solve import best_known_starts
from .starts import applicable, check_instance, objective_of_starts, schedule_from_starts

SOLVER = "highs+cpsat"
MODEL_NOTE = ("model: the online paper's hindsight IP (unit-time batches, no preemption, no "
              "chunking, integer start slots); status, objective and bound are all in this model; "
              "its optimum is an upper bound on the optimum under docs/semantics.md")


@dataclass(frozen=True)
class FFParams:
    """Knobs (``--param key=value``): ``search`` seconds of local search for the incumbent
    (H21; default a tenth of the time limit, ``n`` without one; the search's move budget,
    ``heuristics.MOVES_PER_REQUEST n``, may end it sooner); ``cut_share`` of the time limit for the
    (H23) rounds (default 0.5); ``rounds`` at most that many rounds."""

    search: float | None = None
    cut_share: float = 0.5
    rounds: int = 200

    def __post_init__(self) -> None:
        if not 0 < self.cut_share <= 1:
            raise FormulationError("hindsight-ff: cut_share must be in (0, 1]")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FFParams:
        return cls(**parse_params(PARAMS, d, "formulation 'hindsight-ff'", FormulationError))


PARAMS = (
    ParamSpec("search", float, None, "seconds of local search for the incumbent (H21)", lo=0),
    ParamSpec("cut_share", float, 0.5, "share of the time limit for the (H23) cut rounds", lo=0),
    ParamSpec("rounds", int, 200, "at most this many (H23) cut rounds", lo=0),
)


def _step(instance: Instance) -> float | None:
    """(H15) total latency is an integer when every arrival is."""
    return 1.0 if np.all(instance.arrival == np.round(instance.arrival)) else None


def _target(ub: float, const: float) -> float:
    """The largest objective strictly below ``ub`` (the start-sum is an integer)."""
    return math.ceil(ub - const - 1e-9) - 1 + const


@register_formulation(
    "hindsight-ff",
    "the hindsight IP (online paper, appendix B) by future-feasibility cuts, a certified LP "
    "bound, reduced-cost fixing and CP-SAT; total latency",
    objectives=(Objective.TOTAL_LATENCY,),
    needs_warm_start=False,
    params=PARAMS,
    applicable=applicable,
    restriction="the online paper's model: unit time, no preemption, no chunking, integer "
    "start slots",
)
def run(instance: Instance, objective: str, hypotheses: Hypotheses, options: SolveOptions,
        warm_start: WarmStart | None) -> RawSolution:
    """(H23)-(H25) on the hindsight model; see the module docstring."""
    t0 = time.perf_counter()
    p = FFParams.from_dict(dict(options.params))
    check_instance(instance)
    if hypotheses.force or hypotheses.forbid or hypotheses.order:
        raise FormulationError("hindsight-ff: force/forbid/order hypotheses are not supported; "
                               "use --formulation hindsight")
    notes = [MODEL_NOTE]
    if instance.n == 0:
        return RawSolution(Status.OPTIMAL, 0.0, 0.0, Schedule.empty(), solver=SOLVER,
                           restricted=True, notes=tuple(notes))
    deadline = None if options.time_limit is None else t0 + options.time_limit
    search = p.search if p.search is not None else (
        0.1 * options.time_limit if options.time_limit is not None else float(instance.n))
    ws = None if warm_start is None else warm_start.schedule
    ub_starts, src, ws_notes = best_known_starts(instance, objective, ws, search if instance.n > 1
                                                 else 0.0, seed=options.seed or 0)
    notes += ws_notes
    ub = objective_of_starts(instance, objective, ub_starts)
    if hypotheses.at_most is not None and ub > hypotheses.at_most + 1e-9:
        notes.append(f"incumbent {ub:g} breaks at_most {hypotheses.at_most:g}: it gives no "
                     "schedule, only the horizon")
    notes.append(f"incumbent {ub:g} from {src}")
    hm = build(instance, objective, None, HindsightParams(), ub_starts)
    cut_end = None if deadline is None else time.perf_counter() + p.cut_share * max(
        0.0, deadline - time.perf_counter())
    lb = root_bound(hm, deadline=cut_end, max_rounds=p.rounds)
    notes += _bound_notes(lb)
    return _finish(instance, hm, lb, ub_starts, ub, hypotheses, options, deadline, notes, t0)


def _bound_notes(lb: LPBound) -> list[str]:
    """The LP's first line, its last two rounds and the summary."""
    return [lb.log[0], *lb.log[1:][-2:],
            f"(H23) {lb.rounds} rounds, {lb.cuts} rows from {lb.pool} cuts in {lb.seconds:.1f} s; "
            f"(H24a) certified LP bound {lb.value:.3f}"]


def _finish(instance: Instance, hm, lb: LPBound, ub_starts: np.ndarray, ub: float,
            hypotheses: Hypotheses, options: SolveOptions, deadline: float | None,
            notes: list[str], t0: float) -> RawSolution:
    """(H24b)-(H25): the search over what reduced-cost fixing leaves, then the answer. The
    search looks for a schedule of objective at most ``target``: below the incumbent, and at
    most ``at_most`` under that hypothesis (then an incumbent above it is no answer)."""
    step = _step(instance)
    const = float(instance.output.sum()) - float(instance.arrival.sum())
    best: tuple[float, np.ndarray] | None = (ub, ub_starts)
    target = _target(ub, const)
    if hypotheses.at_most is not None:
        if ub > hypotheses.at_most + 1e-9:
            best = None
            target = math.floor(hypotheses.at_most - const + 1e-9) + const
    bound = max(lb.value, _floor(instance))  # the floor matters when the LP was cut short
    if bound > lb.value:
        notes.append(f"(H9a) the completion floors give {bound:.1f}, above the LP bound")
    proven = _rounded(bound, step) > target + 1e-9  # nothing at most target exists
    left = None if deadline is None else deadline - time.perf_counter()
    if not proven:
        res = _search(instance, hm, lb, target, left, options, notes, ub_starts)
        if res is not None:
            if res.starts is not None:
                val = objective_of_starts(instance, Objective.TOTAL_LATENCY, res.starts)
                if best is None or val < best[0] - 1e-9:
                    best = (val, res.starts)
            proven = res.status in ("infeasible", "optimal")
            if not proven and res.bound is not None:  # valid for schedules at most target
                bound = max(bound, min(target + (step or 0.0), res.bound))
    runtime = time.perf_counter() - t0
    if best is None:
        status = Status.INFEASIBLE if proven else Status.NO_SOLUTION
        return RawSolution(status, bound=None if proven else _rounded(bound, step),
                           solver=SOLVER, restricted=True, runtime=runtime, notes=tuple(notes))
    val, starts = best
    status = Status.OPTIMAL if proven else Status.FEASIBLE
    final = val if proven else min(val, _rounded(bound, step))
    return RawSolution(status, val, final, schedule_from_starts(instance, starts), runtime=runtime,
                       solver=SOLVER, restricted=True, notes=tuple(notes))


def _search(instance: Instance, hm, lb: LPBound, target: float, left: float | None,
            options: SolveOptions, notes: list[str], hint: np.ndarray):
    """(H25) when CP-SAT is installed and time is left; None otherwise (with a note)."""
    if importlib.util.find_spec("ortools") is None:
        notes.append("(H25) skipped: CP-SAT is not installed (pip install 'optsched[cpsat]')")
        return None
    if left is not None and left <= 0.05:
        notes.append("(H25) skipped: no time left")
        return None
    sp = space(hm, lb.rc, target - lb.value, hm.latest)
    res = search(instance, sp, lb.value, target, time_limit=1e9 if left is None else left,
                 threads=options.threads or 2, seed=options.seed or 0, hint=hint)
    notes.append(f"(H25) CP-SAT over {sp.size:,} starts left by reduced-cost fixing (room "
                 f"{target - lb.value:.2f} above the bound): {res.status} in {res.seconds:.1f} s")
    return res


def _floor(instance: Instance) -> float:
    """(H9a) total latency is at least the sum of the floors on the k-th smallest completion
    minus the arrivals: a bound that needs no LP."""
    return float(area_lower_bounds(instance).sum() - instance.arrival.sum())


def _rounded(bound: float, step: float | None) -> float:
    """(H15) a bound on an objective that moves in whole steps rounds up to the next step."""
    if step is None:
        return bound
    return math.ceil(bound / step - 1e-6) * step


__all__ = ["FFParams", "MODEL_NOTE", "PARAMS", "run"]
