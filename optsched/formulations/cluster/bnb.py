"""Branch and bound over assignments (``formulations/cluster.md`` section 6), the exact
path of the ``cluster`` formulation's ``method=bnb``.

The same problem as the MILP and the exhaustive cross-check (each request on one engine,
section 4), solved assignment by assignment: every assignment up to the symmetry of
identical engines (eq. K5, :func:`.exhaustive.assignments`) gets a certified lower bound,
the combination (sum for total latency and mean TTFT, max for makespan; eq. K10) of the
cheap single-engine rungs (``combinatorial``, :mod:`optsched.bounds`, installed by that
layer through :func:`set_subset_floor`) on each engine's subset. Assignments are visited
best-first; one whose bound is at least the incumbent (at the start the best router, or the
warm start) is pruned, and so are all after it. A
survivor's engines are solved by the single-engine exhaustive search with the cutoff
``upper_bound`` = what the engine may cost for the assignment to beat the incumbent (eq.
K11): a search that exhausts under the cutoff proves the engine's optimum above it, which
prunes the assignment and raises the subset's bound; one that finishes gives the subset's
exact optimum. Both are memoised per (engine kind, subset): assignments share subsets.

Proven when every assignment is pruned or solved; at the budget's end the bound is the least
bound of the assignments left (and the incumbent's value when it is lower), the gap reported.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ...evaluation import evaluate
from ...instance import Instance
from ...schedule import Schedule
from ...solve_types import Objective, Status
from ..base import FormulationError
from ..exhaustive.search import SearchOptions, search
from .exhaustive import _engine_instance, _schedule, assignments
from .model import identical_groups

#: the certified single-engine floor ``(instance, objective) -> value`` of eq. K10; the bounds
#: layer (above this one) installs its cheap ladder with :func:`set_subset_floor` when it is
#: imported (the solve pipeline imports it); until then 0, a valid but useless floor
_FLOOR: list[Callable[[Instance, str], float]] = []


def set_subset_floor(fn: Callable[[Instance, str], float]) -> None:
    """Install the floor of eq. K10 (it must never exceed the single-engine optimum)."""
    _FLOOR[:] = [fn]


#: assignments beyond which :func:`branch_and_bound` refuses (each is bounded up front)
MAX_ASSIGNMENTS = 200_000
_REL = 1e-9


@dataclass(frozen=True)
class BnbResult:
    """The outcome: ``status`` OPTIMAL (every assignment pruned or solved) or FEASIBLE (budget
    ended: ``bound`` < ``value``), the value and schedule (the incumbent's; None when no
    assignment was solved and none was given), the certified bound, and counters."""

    status: Status
    value: float | None
    bound: float
    schedule: Schedule | None
    assignment: tuple[int, ...] | None
    counts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in (Status.OPTIMAL, Status.FEASIBLE, Status.NO_SOLUTION):
            raise ValueError(f"BnbResult: status {self.status!r}")
        if self.value is not None and self.bound > self.value * (1 + 1e-6) + 1e-6:
            raise ValueError(f"BnbResult: bound {self.bound} above value {self.value}")


class _Subsets:
    """Per (engine kind, subset): a certified lower bound, raised by cut-off searches, and the
    exact optimum with its schedule once a search finishes. Values are per-engine sums for
    mean TTFT (the search's mean times the subset's size)."""

    def __init__(self, instance: Instance, objective: str, max_states: int):
        self.inst, self.obj, self.max_states = instance, objective, max_states
        self.kind = {k: g[0] for g in identical_groups(instance) for k in g}
        self.lb: dict[tuple[int, tuple[int, ...]], float] = {}
        self.exact: dict[tuple[int, tuple[int, ...]], tuple[float, Schedule | None]] = {}
        self.failed: dict[tuple[int, tuple[int, ...]], float] = {}
        self.searches = 0

    def key(self, k: int, members: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
        return self.kind[k], members

    def bound(self, k: int, members: tuple[int, ...]) -> float:
        """The subset's best known lower bound (its optimum when solved)."""
        key = self.key(k, members)
        if key in self.exact:
            return self.exact[key][0]
        if key not in self.lb:
            if not members:
                self.exact[key] = (0.0, None)
                return 0.0
            sub = _engine_instance(self.inst, k, members)
            v = _FLOOR[0](sub, self.obj) if _FLOOR else 0.0
            self.lb[key] = max(0.0, v) * self._scale(members)
        return self.lb[key]

    def _scale(self, members: tuple[int, ...]) -> int:
        return len(members) if self.obj == Objective.MEAN_TTFT else 1

    def solve(self, k: int, members: tuple[int, ...], cutoff: float | None,
              deadline: float | None) -> bool | None:
        """Search the subset with ``cutoff`` (a per-engine sum or max; None: none): True when
        its optimum is now known (memoised), False when it is proven > ``cutoff`` (its bound
        raised), None when the search ran out of states or time (not retried with a cutoff
        as loose or looser)."""
        key = self.key(k, members)
        if key in self.exact:
            return True
        failed = self.failed.get(key)
        if failed is not None and (cutoff is None or cutoff >= failed):
            return None
        left = None if deadline is None else deadline - time.perf_counter()
        if left is not None and left <= 0:
            return None
        sub = _engine_instance(self.inst, k, members)
        ub = None if cutoff is None else cutoff / self._scale(members)
        self.searches += 1
        res = search(sub, self.obj, SearchOptions(max_states=self.max_states, time_limit=left,
                                                  upper_bound=ub))
        if res.status == Status.OPTIMAL and res.objective is not None:
            self.exact[key] = (res.objective * self._scale(members), res.schedule)
            return True
        if res.status == Status.NO_SOLUTION and (res.message or "").startswith(
                "no schedule with objective <= the upper bound"):
            self.lb[key] = max(self.lb.get(key, 0.0), cutoff or 0.0)
            return False
        self.failed[key] = math.inf if cutoff is None else cutoff
        return None


def _combine(objective: str, parts: list[float]) -> float:
    """Eq. K10: the cluster objective of per-engine values (max for makespan, else sum)."""
    return max(parts, default=0.0) if objective == Objective.MAKESPAN else sum(parts)


def _cutoff(objective: str, incumbent: float, others: list[float]) -> float:
    """Eq. K11: the most one engine may cost while the assignment can still beat
    ``incumbent``, the other engines at their bounds ``others``."""
    return incumbent if objective == Objective.MAKESPAN else incumbent - sum(others)


def _below(v: float, inc: float) -> bool:
    """``v`` beats the incumbent ``inc`` (by more than a relative 1e-9; any finite value
    beats none)."""
    return not math.isfinite(inc) or v < inc - _REL * max(1.0, abs(inc))


def _members(a: tuple[int, ...], R: int) -> list[tuple[int, ...]]:
    return [tuple(i for i, e in enumerate(a) if e == k) for k in range(R)]


def branch_and_bound(instance: Instance, objective: str, *, incumbent: tuple[float, Schedule]
                     | None = None, time_limit: float | None = None,
                     max_states: int = 2_000_000) -> BnbResult:
    """The optimum over assignments by branch and bound (module docstring). ``incumbent``:
    a feasible cluster schedule and its evaluator value (e.g. the best router's)."""
    t0 = time.perf_counter()
    deadline = None if time_limit is None else t0 + time_limit
    if objective not in (Objective.MAKESPAN, Objective.TOTAL_LATENCY, Objective.MEAN_TTFT):
        raise FormulationError(f"cluster bnb: objective {objective!r} is not a sum or a max "
                               "over engines")
    if instance.n_engines ** instance.n > MAX_ASSIGNMENTS * math.factorial(instance.n_engines):
        raise FormulationError(f"cluster bnb: {instance.n_engines}^{instance.n} assignments; "
                               "too many")
    n, R = instance.n, instance.n_engines
    scale = n if objective == Objective.MEAN_TTFT else 1
    subs = _Subsets(instance, objective, max_states)
    inc = math.inf if incumbent is None else incumbent[0] * scale
    best_a: tuple[int, ...] | None = None

    def bound_of(a: tuple[int, ...]) -> float:
        return _combine(objective, [subs.bound(k, m) for k, m in enumerate(_members(a, R))])

    queue = sorted(((bound_of(a), a) for a in assignments(instance)), key=lambda t: t[0])
    counts = {"assignments": len(queue), "pruned": 0, "solved": 0, "open": 0}
    left: list[float] = []
    for _, a in queue:
        lb = bound_of(a)  # raised by searches since sorting
        if not _below(lb, inc):
            counts["pruned"] += 1
            continue
        outcome = _settle(subs, objective, a, R, inc, deadline)
        if outcome is None:
            counts["open"] += 1
            left.append(bound_of(a))
        elif outcome is False:
            counts["pruned"] += 1
        else:
            counts["solved"] += 1
            v = bound_of(a)
            if _below(v, inc):
                inc, best_a = v, a
    counts["searches"] = subs.searches
    return _result(instance, objective, subs, inc, best_a, incumbent, left, scale, counts)


def _settle(subs: _Subsets, objective: str, a: tuple[int, ...], R: int, inc: float,
            deadline: float | None) -> bool | None:
    """Solve ``a``'s engines, the highest bound first (the likeliest to prune): True when all
    are exact, False when one is proven too dear, None when a search ran out."""
    mem = _members(a, R)
    order = sorted(range(R), key=lambda k: -subs.bound(k, mem[k]))
    for k in order:
        if not mem[k]:
            continue
        others = [subs.bound(j, mem[j]) for j in range(R) if j != k]
        if not _below(_combine(objective, [subs.bound(k, mem[k])] + others), inc):
            return False
        cut = _cutoff(objective, inc, others) if math.isfinite(inc) else None
        got = subs.solve(k, mem[k], cut, deadline)
        if got is not True:
            return got
    return True


def _result(instance: Instance, objective: str, subs: _Subsets, inc: float,
            best_a: tuple[int, ...] | None, incumbent: tuple[float, Schedule] | None,
            left: list[float], scale: int, counts: dict[str, int]) -> BnbResult:
    """Decode the incumbent (a solved assignment, else the given schedule), replay it with the
    evaluator and check the value; the bound is the least open bound, capped at the value."""
    if best_a is not None:
        def engine_opt(k: int, members: tuple[int, ...]) -> tuple[float, Schedule | None]:
            return subs.exact[subs.key(k, members)]
        sched: Schedule | None = _schedule(instance, best_a, engine_opt)
    else:
        sched = None if incumbent is None else incumbent[1]
    value = None if sched is None else inc / scale
    if sched is not None and value is not None:
        ev = evaluate(instance, sched)
        if not ev.feasible or abs(ev.objective(objective) - value) > 1e-6 * max(1.0, abs(value)):
            raise FormulationError(f"cluster bnb: internal error: searches give {value}, the "
                                   f"evaluator {ev.objective(objective)} "
                                   f"(feasible={ev.feasible})")
    bound = min(left + [inc]) / scale if math.isfinite(min(left + [inc])) else \
        (min(left) / scale if left else 0.0)
    if value is None:
        status = Status.NO_SOLUTION
    else:
        status = Status.FEASIBLE if left and bound < value - 1e-9 * max(1.0, value) \
            else Status.OPTIMAL
        bound = min(bound, value)
    return BnbResult(status, value, bound, sched, best_a, counts)


__all__ = ["BnbResult", "branch_and_bound", "MAX_ASSIGNMENTS", "set_subset_floor"]
