"""Bound ``events``: completion events of small busy periods, for mean TTFT (``formulations/bounds.md`` B14).

Any partition of the requests gives a bound: restricting a schedule to one part keeps it
feasible and no batch longer, so the first tokens of a part come no earlier than in its own
optimum, and the sum of the parts' lower bounds is a lower bound. The parts are the busy
periods of a server that would give every prompt its own batch (release dates, work
``h + p_i``, ``h = k0 + kpb`` a batch's fixed time, ``p_i`` the prompt's entry floor): they
barely interact. A part of at most :data:`ENUMERATE_UP_TO` requests is bounded by
enumerating the ordered partitions of its requests into *completion events* (the batches
that complete prompts, in time order): event ``e`` ends at ``T_e >= T_{e-1} + h`` (a later
batch, at least ``h`` long), ``T_e >= a_j + own chain_j`` for its requests, and for every
release ``t``, ``T_e >= t + sum p_j + h * #events`` over the requests of events ``<= e``
released at or after ``t`` and the events ``<= e`` whose latest request is released at or
after ``t`` (all of that work and those batches run in ``[t, T_e]`` on one server). The least
``sum_e |e| T_e`` over the orders is the part's bound; a larger part takes ``srpt`` (B7) on
its own. The result is never below ``srpt`` on the whole instance (kept as the other
candidate).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import numpy as np

from ..instance import Instance
from ..solve_types import Objective
from .base import BoundError, BoundResult, Budget, register_bound
from .floors import Floors
from .srpt import srpt_bound

#: parts up to this many requests are enumerated (541 ordered partitions at 5)
ENUMERATE_UP_TO = 5


def ordered_partitions(items: list[int]) -> Iterator[list[list[int]]]:
    """Every ordered partition of ``items`` into non-empty blocks (Fubini many)."""
    if not items:
        yield []
        return
    for r in range(1, len(items) + 1):
        for first in itertools.combinations(items, r):
            rest = [x for x in items if x not in first]
            for tail in ordered_partitions(rest):
                yield [list(first), *tail]


def event_bound(a: list[float], p: list[float], own: list[float], h: float) -> float:
    """The least ``sum_e |e| T_e`` over ordered completion events (module docstring) of the
    requests with releases ``a``, prompt work floors ``p`` and own completion floors ``own``."""
    best = np.inf
    for part in ordered_partitions(list(range(len(a)))):
        t_prev, total = -np.inf, 0.0
        members: list[int] = []
        latest: list[float] = []
        for blk in part:
            members += blk
            latest.append(max(a[j] for j in blk))
            t_e = max(t_prev + h, max(own[j] for j in blk))
            for t in {a[j] for j in members}:
                work = sum(p[j] for j in members if a[j] >= t)
                t_e = max(t_e, t + work + h * sum(1 for x in latest if x >= t))
            t_prev = t_e
            total += len(blk) * t_e
            if total >= best:
                break
        best = min(best, total)
    return float(best)


def busy_periods(a: np.ndarray, w: np.ndarray) -> list[list[int]]:
    """Requests grouped by the busy periods of one server serving work ``w`` from ``a``."""
    groups: list[list[int]] = []
    end = -np.inf
    for j in np.argsort(a, kind="stable").tolist():
        if a[j] >= end:
            groups.append([])
            end = a[j]
        groups[-1].append(j)
        end += w[j]
    return groups


@register_bound(
    "events",
    "mean TTFT: busy periods of one-batch-a-prompt serving, each small "
    "one by ordered completion events with a batch's fixed time each (B14)",
    objectives=("mean-ttft",),
    rank=110,
)
def events_bound(instance: Instance, objective: str, budget: Budget) -> BoundResult:
    if objective != Objective.MEAN_TTFT:
        raise BoundError(f"events: objective must be mean-ttft, got {objective!r}")
    f = Floors.of(instance)
    h = f.k["k0"] + f.k["kpb"]
    a = instance.arrival
    p = np.asarray(f.prefill_entry_cost, np.float64)
    own = a + f.prefill_chain
    whole = srpt_bound(instance, objective, budget)
    total, enumerated = 0.0, 0
    for g in busy_periods(a, p + h):
        sub = Instance(
            instance.name, instance.limits, instance.cost_model, tuple(instance.requests[j] for j in g)
        )
        part = srpt_bound(sub, objective, budget).value * len(g) + float(a[g].sum())
        if len(g) <= ENUMERATE_UP_TO:
            part = max(part, event_bound(a[g].tolist(), p[g].tolist(), own[g].tolist(), h))
            enumerated += len(g)
        total += part
    v = max((total - float(a.sum())) / instance.n, whole.value)
    return BoundResult(
        v,
        "events",
        objective,
        notes=(
            f"{enumerated} of {instance.n} requests in busy periods of <= {ENUMERATE_UP_TO} "
            f"enumerated; srpt on the whole {whole.value:.6g}",
        ),
    )
