"""The cluster model's independent cross-check (``formulations/cluster.md`` section 5): every
assignment of requests to engines, up to the symmetry of identical engines, times the exact
single-engine optimum of each engine's requests (the exhaustive state-graph search,
:mod:`optsched.formulations.exhaustive.search`), combined by the objective: the sum for total
latency and mean TTFT (a sum over requests), the max for makespan. Tiny instances only:
``R^n / R!`` assignments, one search per (engine kind, request set), memoised.

It solves the same problem as the MILP (each request on one engine), by a method that shares
no code with it but the evaluator: agreement on random instances is the test of both.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass

from ...evaluation import evaluate
from ...instance import Instance
from ...schedule import Schedule
from ...solve_types import Objective, Status
from ..base import FormulationError
from ..exhaustive.search import SearchOptions, search
from .model import EngineBatch, cluster_schedule, fits, identical_groups

#: assignments beyond which :func:`cluster_optimum` refuses (the search is per subset)
MAX_ASSIGNMENTS = 20_000


@dataclass(frozen=True)
class ClusterOptimum:
    """The optimum over assignments: its value, the assignment (engine position per request),
    the cluster schedule (replayed by the evaluator) and the searches run."""

    value: float
    assignment: tuple[int, ...]
    schedule: Schedule
    searches: int


def assignments(instance: Instance) -> Iterator[tuple[int, ...]]:
    """Every assignment of requests to engines that fit them, identical engines taken in the
    order of their first request (the canonical member of each symmetry class, eq. K5)."""
    n, R = instance.n, instance.n_engines
    fit = fits(instance)
    group_of = {k: tuple(g) for g in identical_groups(instance) for k in g}

    def extend(prefix: list[int], used: set[int]) -> Iterator[tuple[int, ...]]:
        i = len(prefix)
        if i == n:
            yield tuple(prefix)
            return
        for k in range(R):
            if not fit[i, k]:
                continue
            g = group_of[k]
            pos = g.index(k)
            if pos > 0 and g[pos - 1] not in used:
                continue  # eq. K5: k's predecessor in its group serves an earlier request
            yield from extend(prefix + [k], used | {k})

    yield from extend([], set())


def _engine_instance(instance: Instance, k: int, members: tuple[int, ...]) -> Instance:
    e = instance.engine(k)
    return Instance(f"{instance.name}@{e.id}", e.limits, e.cost_model,  # type: ignore[arg-type]
                    tuple(instance.requests[i] for i in members))


def cluster_optimum(instance: Instance, objective: str, *, max_states: int = 2_000_000,
                    time_limit: float | None = None) -> ClusterOptimum:
    """The optimum over assignments (module docstring); raises :class:`FormulationError`
    when a search does not finish, ``time_limit`` seconds (all searches together) pass or the
    instance is too large."""
    deadline = None if time_limit is None else time.perf_counter() + time_limit
    if objective not in (Objective.MAKESPAN, Objective.TOTAL_LATENCY, Objective.MEAN_TTFT):
        raise FormulationError(f"cluster exhaustive: objective {objective!r} is not a sum or a "
                               "max over engines")
    if instance.n_engines ** instance.n > MAX_ASSIGNMENTS * math.factorial(instance.n_engines):
        raise FormulationError(f"cluster exhaustive: {instance.n_engines}^{instance.n} "
                               "assignments; too many")
    kind = {k: g[0] for g in identical_groups(instance) for k in g}
    memo: dict[tuple[int, tuple[int, ...]], tuple[float, Schedule | None]] = {}

    def engine_opt(k: int, members: tuple[int, ...]) -> tuple[float, Schedule | None]:
        key = (kind[k], members)
        if key not in memo:
            if not members:
                memo[key] = (0.0, None)
            else:
                sub = _engine_instance(instance, k, members)
                left = None if deadline is None else deadline - time.perf_counter()
                if left is not None and left <= 0:
                    raise FormulationError(f"cluster exhaustive: time limit {time_limit} s")
                res = search(sub, objective, SearchOptions(max_states=max_states,
                                                           time_limit=left))
                if res.status != Status.OPTIMAL or res.objective is None:
                    raise FormulationError(f"cluster exhaustive: the search on engine {k} with "
                                           f"requests {members} ended {res.status}")
                # per engine: makespan as is; latency sums; mean TTFT back to a sum
                v = res.objective * (len(members) if objective == Objective.MEAN_TTFT else 1)
                memo[key] = (v, res.schedule)
        return memo[key]

    best: tuple[float, tuple[int, ...]] | None = None
    for a in assignments(instance):
        parts = [engine_opt(k, tuple(i for i in range(instance.n) if a[i] == k))[0]
                 for k in range(instance.n_engines)]
        v = max(parts) if objective == Objective.MAKESPAN else sum(parts)
        if best is None or v < best[0] - 1e-12 * max(1.0, abs(v)):
            best = (v, a)
    if best is None:
        raise FormulationError("cluster exhaustive: no assignment fits every request")
    value, a = best
    sched = _schedule(instance, a, engine_opt)
    if objective == Objective.MEAN_TTFT:
        value /= instance.n
    ev = evaluate(instance, sched)
    if not ev.feasible or abs(ev.objective(objective) - value) > 1e-6 * max(1.0, abs(value)):
        raise FormulationError(f"cluster exhaustive: internal error: searches give {value}, the "
                               f"evaluator {ev.objective(objective)} (feasible={ev.feasible})")
    return ClusterOptimum(value, a, sched, len(memo))


def _schedule(instance: Instance, a: tuple[int, ...], engine_opt) -> Schedule:
    """The cluster schedule of assignment ``a`` from each engine's searched schedule."""
    per_engine: list[list[EngineBatch]] = []
    for k in range(instance.n_engines):
        _, s = engine_opt(k, tuple(i for i in range(instance.n) if a[i] == k))
        batches: list[EngineBatch] = []
        if s is not None:
            for j in range(s.n_batches):
                lo, hi = s.batch_ptr[j], s.batch_ptr[j + 1]
                elo, ehi = s.evict_ptr[j], s.evict_ptr[j + 1]
                start = float(s.start[j])
                at = [instance.index[s.ids[r]] for r in s.entry_req[lo:hi].tolist()]
                out = [instance.index[s.ids[r]] for r in s.evict_req[elo:ehi].tolist()]
                batches.append(EngineBatch(at, s.entry_tokens[lo:hi].tolist(), out,
                                           None if math.isnan(start) else start))
        per_engine.append(batches)
    return cluster_schedule(instance, per_engine)
