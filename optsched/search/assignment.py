"""Local search over a cluster's request-to-engine assignment (``optsched improve`` on a
cluster instance; docs/semantics.md section 6, "Clusters" and "Routers").

A router is a policy that picks an engine per request; the engine policy then schedules each
engine. This search keeps the engine policy and changes the assignment: from the start (the
assignment of a router's schedule, or of a schedule file: the engine of each request's first
entry), a candidate **moves** one request to another engine that fits it, or **swaps** two
requests on different engines (each must fit the other's engine); half the draws pick the
request by its latency. A candidate re-simulates the engine policy on the engines whose
request sets changed (:func:`simulate_engine`; the others keep their batches) and is scored
from every request's first-token and completion times (:func:`engine_times`,
:func:`objective_of`: section 4's objectives, equal to the evaluator's on these schedules, a
tested property); it is accepted when strictly better than the current one (first
improvement, seeded proposals). Each accepted candidate that beats the best so far is merged
into one cluster schedule (:func:`optsched.cluster.replicas.merge`) and replayed by the one
evaluator (:func:`optsched.evaluate`), which alone decides whether it becomes the best. The
answer is the best schedule the evaluator confirmed, the start schedule itself included, so it
is never worse than the start.

Only replicas of role ``both`` are searched (engines may differ in limits and cost model): on a
disaggregated cluster a request's placement is two engines and a transfer time, which a move of
one request does not express, so it is refused.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import OptschedError
from ..evaluation import OBJECTIVES, Evaluation, evaluate
from ..instance import Instance
from ..policies.errors import SimulationError
from ..policies.simulator import Policy
from ..schedule import Schedule


class AssignmentSearchError(OptschedError, ValueError):
    """The cluster search cannot run on this instance or start schedule (one line)."""


@dataclass(frozen=True)
class AssignmentOptions:
    """Knobs of :func:`improve_assignment`."""

    time_limit: float = 10.0
    seed: int = 0
    #: stop after this many candidates (with it, a run is reproducible on any machine)
    max_moves: int | None = None
    #: share of the proposals that swap two requests (the rest move one)
    swap_share: float = 0.5

    def __post_init__(self):
        if not self.time_limit > 0:
            raise AssignmentSearchError(f"time_limit must be > 0, got {self.time_limit!r}")
        if self.max_moves is not None and self.max_moves < 0:
            raise AssignmentSearchError(f"max_moves must be >= 0, got {self.max_moves!r}")
        if not 0.0 <= self.swap_share <= 1.0:
            raise AssignmentSearchError(f"swap_share must be in [0, 1], got {self.swap_share!r}")


@dataclass(frozen=True)
class AssignmentResult:
    """Outcome of :func:`improve_assignment`: the best cluster schedule the evaluator confirmed."""

    schedule: Schedule
    objective: float
    start_objective: float
    objective_kind: str
    #: engine position of each request in the result ("start": the start schedule's own)
    assignment: tuple[int, ...]
    moves_tried: int
    moves_accepted: int
    #: candidates whose simulation failed or whose schedule the evaluator found infeasible
    moves_rejected_infeasible: int
    runtime: float
    seed: int
    #: "start" (nothing better found), "re-simulated start", or "moves"
    method: str = "start"
    history: list[tuple[float, float]] = field(default_factory=list)  # (seconds, objective)

    def to_dict(self) -> dict:
        return {"objective": self.objective, "start_objective": self.start_objective,
                "objective_kind": self.objective_kind, "moves_tried": self.moves_tried,
                "moves_accepted": self.moves_accepted,
                "moves_rejected_infeasible": self.moves_rejected_infeasible,
                "method": self.method, "runtime": self.runtime, "seed": self.seed,
                "history": [list(h) for h in self.history]}


def check_cluster_supported(instance: Instance) -> None:
    """Refuse (one line) a cluster this search does not model: any engine whose role is not
    ``both`` (module docstring), or requests with prefix block ids."""
    roles = sorted({instance.engine(k).role for k in range(instance.n_engines)})
    if roles != ["both"]:
        raise AssignmentSearchError(
            f"improve: the cluster has engines of roles {roles}; the assignment search moves "
            "requests between replicas of role 'both' only (a disaggregated placement is two "
            "engines and a transfer); simulate it with 'optsched simulate --router pd'")
    if instance.has_prefix:
        raise AssignmentSearchError(
            "improve: the requests list prefix block ids; the assignment search on a cluster "
            "does not model prefix reuse yet (simulate it with a router)")


def assignment_of(instance: Instance, schedule: Schedule) -> np.ndarray:
    """Engine position of each request: the engine of its first entry in ``schedule`` (a batch
    naming no engine runs on the first engine, section 6)."""
    n = instance.n
    pos = {e: k for k, e in enumerate(instance.engine_ids)}
    index = {r: i for i, r in enumerate(instance.ids)}
    pl = schedule.placement
    engine_of_batch = np.zeros(schedule.n_batches, np.int64)
    if pl is not None:
        for j, b in enumerate(pl.batch_engine.tolist()):
            name = pl.engines[b] if b >= 0 else instance.engine_ids[0]
            if name not in pos:
                raise AssignmentSearchError(f"improve: batch {j} runs on engine {name!r}, which "
                                            "the instance does not declare")
            engine_of_batch[j] = pos[name]
    out = np.full(n, -1, np.int64)
    batch_of_entry = np.repeat(np.arange(schedule.n_batches), np.diff(schedule.batch_ptr))
    for r, j in zip(schedule.entry_req.tolist()[::-1], batch_of_entry.tolist()[::-1]):
        i = index.get(schedule.ids[r])
        if i is not None:
            out[i] = engine_of_batch[j]  # walking backwards: the first entry is written last
    if (out < 0).any():
        raise AssignmentSearchError(f"improve: request {instance.ids[int(np.argmax(out < 0))]!r}"
                                    " has no entry in the start schedule")
    return out


def simulate_engine(instance: Instance, k: int, requests: Sequence[int],
                    make_policy: Callable[[], Policy]) -> list:
    """The batches engine ``k`` runs when ``requests`` (instance indices) are routed to it at
    their arrivals (in arrival order, ties in the instance's order), as
    :func:`optsched.cluster.replicas.run_replicas` drives each engine."""
    from ..cluster.engine import EngineRun  # lazy: the cluster layer sits above search

    e = EngineRun(instance.for_engine(k), make_policy(), k)
    arr = instance.arrival
    for i in sorted(requests, key=lambda i: (float(arr[i]), i)):
        e.run_until(float(arr[i]))
        e.arrive(i)
    e.finish()
    return e.batches


def engine_times(instance: Instance, batches: Sequence, requests: Sequence[int]
                 ) -> tuple[np.ndarray, np.ndarray]:
    """First-token and completion times of ``requests`` (instance indices) from one engine's
    simulated ``batches`` (section 4: the ends of the batches that generate the first token and
    the last; a batch applies its evictions, then its entries, section 3): what the evaluator
    would compute for them, without replaying the cluster (checked against it in the tests)."""
    I = instance.prompt
    m: dict[int, int] = {}
    first: dict[int, float] = {}
    done: dict[int, float] = {}
    for b in batches:
        for r in b.evict:
            m[r] = 0
        for r, c in zip(b.req, b.tokens):
            m[r] = m.get(r, 0) + c
            if r not in first and m[r] >= I[r]:
                first[r] = b.end
        for r in b.finished:
            done[r] = b.end
    nan = math.nan
    return (np.array([first.get(r, nan) for r in requests], float),
            np.array([done.get(r, nan) for r in requests], float))


def objective_of(instance: Instance, first: np.ndarray, completion: np.ndarray,
                 kind: str) -> float:
    """``kind`` from every request's first-token and completion times as section 4 defines it
    (inf when some request is unfinished)."""
    if not np.isfinite(completion).all():
        return math.inf
    if kind == "makespan":
        return float(completion.max()) if completion.size else 0.0
    if kind == "total-latency":
        return float((completion - instance.arrival).sum())
    ttft = first - instance.arrival
    return float(ttft.mean() if kind == "mean-ttft" else np.percentile(ttft, 99))


def _objective(ev: Evaluation, kind: str) -> float:
    v = ev.objective(kind) if ev.feasible else math.nan
    return math.inf if math.isnan(v) else v


class _Search:
    """The current assignment, its per-engine batches, times and objective."""

    def __init__(self, instance: Instance, make_policy: Callable[[], Policy], kind: str):
        from ..cluster.replicas import fitting_engines, merge  # lazy, as above

        self.inst, self.make, self.kind, self._merge = instance, make_policy, kind, merge
        self.fits = fitting_engines(instance)
        n = instance.n
        self.assign = np.zeros(n, np.int64)
        self.batches: list[list] = [[] for _ in range(instance.n_engines)]
        self.first = np.full(n, math.nan)
        self.completion = np.full(n, math.nan)
        self.value = math.inf

    def build(self, assign: np.ndarray, engines: Sequence[int]) -> tuple | None:
        """Re-simulate ``engines`` under ``assign`` (the others keep their batches): the
        batches, times and the objective computed from them (None: a simulation failed)."""
        per, first, comp = list(self.batches), self.first.copy(), self.completion.copy()
        try:
            for k in engines:
                reqs = np.flatnonzero(assign == k).tolist()
                per[k] = simulate_engine(self.inst, k, reqs, self.make)
                first[reqs], comp[reqs] = engine_times(self.inst, per[k], reqs)
        except SimulationError:
            return None
        return assign, per, first, comp, objective_of(self.inst, first, comp, self.kind)

    def take(self, built: tuple) -> None:
        self.assign, self.batches, self.first, self.completion, self.value = built

    def schedule(self) -> Schedule:
        """The current cluster schedule (every engine's batches merged)."""
        return self._merge(self.inst, self.batches)

    def propose(self, rng: np.random.Generator, swap_share: float
                ) -> tuple[np.ndarray, list[int]] | None:
        """A moved or swapped copy of the assignment and the engines it changes (None: the
        draw found no legal move). Half the draws pick the first request by its latency
        (a request that waits long is the likeliest to gain from another engine)."""
        n, a = self.inst.n, self.assign
        if rng.random() < 0.5:
            w = np.nan_to_num(self.completion - self.inst.arrival, nan=0.0)
            i = int(rng.choice(n, p=w / w.sum())) if w.sum() > 0 else int(rng.integers(n))
        else:
            i = int(rng.integers(n))
        if rng.random() < swap_share:
            j = int(rng.integers(n))
            ki, kj = int(a[i]), int(a[j])
            if ki == kj or kj not in self.fits[i] or ki not in self.fits[j]:
                return None
            b = a.copy()
            b[i], b[j] = kj, ki
            return b, [ki, kj]
        others = [k for k in self.fits[i] if k != a[i]]
        if not others:
            return None
        b = a.copy()
        b[i] = others[int(rng.integers(len(others)))]
        return b, [int(a[i]), int(b[i])]


def improve_assignment(instance: Instance, schedule: Schedule,
                       make_policy: Callable[[], Policy], objective: str = "total-latency",
                       options: AssignmentOptions | None = None) -> AssignmentResult:
    """Local search over the assignment of ``schedule``'s requests to engines, each engine
    scheduled by a fresh ``make_policy()`` (module docstring). Never worse than ``schedule``."""
    opts = options or AssignmentOptions()
    t0 = time.perf_counter()
    deadline = t0 + opts.time_limit
    if objective not in OBJECTIVES:
        raise AssignmentSearchError(f"unknown objective {objective!r}; choose one of "
                                    f"{', '.join(OBJECTIVES)}")
    check_cluster_supported(instance)
    ev0 = evaluate(instance, schedule)
    if not ev0.feasible:
        raise AssignmentSearchError(f"improve: the start schedule is infeasible: "
                                    f"{ev0.violations[0]}")
    start = _objective(ev0, objective)
    if math.isinf(start):
        raise AssignmentSearchError(f"improve: objective {objective} is undefined on the start "
                                    "schedule")
    s = _Search(instance, make_policy, objective)
    assign0 = assignment_of(instance, schedule)
    best, best_value, best_assign, method = schedule, start, assign0, "start"
    history = [(0.0, start)]
    # the search needs every engine's batches once; not started when the budget is spent
    built = s.build(assign0, range(instance.n_engines)) \
        if time.perf_counter() < deadline and (opts.max_moves is None or opts.max_moves > 0) \
        else None
    if built is not None:
        s.take(built)
        best, best_value, best_assign, method = _confirm(
            s, (best, best_value, best_assign, method), "re-simulated start", history, t0)
    rng = np.random.default_rng(opts.seed)
    tried = accepted = infeasible = 0
    while built is not None and time.perf_counter() < deadline and \
            (opts.max_moves is None or tried < opts.max_moves):
        prop = s.propose(rng, opts.swap_share)
        if prop is None:
            if all(len(f) < 2 for f in s.fits):
                break  # no request can go anywhere else
            continue
        tried += 1
        cand = s.build(*prop)
        if cand is None or math.isinf(cand[-1]):
            infeasible += 1
            continue
        if cand[-1] < s.value - _tol(s.value):
            accepted += 1
            s.take(cand)
            best, best_value, best_assign, method = _confirm(
                s, (best, best_value, best_assign, method), "moves", history, t0)
    return AssignmentResult(best, best_value, start, objective,
                            tuple(int(k) for k in best_assign), tried, accepted, infeasible,
                            time.perf_counter() - t0, opts.seed, method, history)


def _confirm(s: _Search, incumbent: tuple, method: str, history: list, t0: float) -> tuple:
    """The better of ``incumbent`` (schedule, value, assignment, method) and the search's
    current schedule, the latter as the one evaluator replays it (a current schedule the
    evaluator finds infeasible or not better is not kept)."""
    if not s.value < incumbent[1] - _tol(incumbent[1]):
        return incumbent
    sched = s.schedule()
    value = _objective(evaluate(s.inst, sched), s.kind)
    if not value < incumbent[1] - _tol(incumbent[1]):
        return incumbent
    history.append((time.perf_counter() - t0, value))
    return sched, value, s.assign, method


def _tol(v: float) -> float:
    return 1e-9 * max(1.0, abs(v))


__all__ = ["AssignmentOptions", "AssignmentResult", "AssignmentSearchError", "assignment_of",
           "check_cluster_supported", "engine_times", "improve_assignment", "objective_of",
           "simulate_engine"]
