"""Bound ``best``: climb the ladder within the budget, keep the largest bound and the
method that gave it (``formulations/bounds.md`` section 3).

The ladder is the registry: every rung that is not ``cheap`` and ranks below ``best``, in
rank order (:func:`~optsched.bounds.base.rungs`) -- ``combinatorial`` (the cheap rungs'
maximum) first, then ``tail`` (P99 TTFT, B16), ``events`` (mean TTFT by busy periods, B14),
``spread``, ``coupled`` and ``dual`` (batching coupled with duration, B10-B13, seconds at
1,000 requests), ``stretch`` (decode stretch paid in machine time, B15, iterating while its
share of the time allows) and ``exact``.
"""

from __future__ import annotations

from dataclasses import replace

from ..objectives import OBJECTIVES
from .base import BoundError, BoundResult, Budget, register_bound, rungs

#: ``best`` sits above every rung it climbs
RANK = 1000
#: the share of the time left that a rung iterating until its budget ends may take (the rest
#: stays for the rungs after it)
SHARE = {"stretch": 0.8}


def _share(budget: Budget, name: str) -> Budget:
    if name not in SHARE or budget.deadline is None:
        return budget
    return replace(budget, deadline=budget.deadline - (1 - SHARE[name]) * budget.left())


@register_bound("best", "every rung that fits the time limit; the largest bound",
                objectives=OBJECTIVES, rank=RANK)
def best_bound(instance, objective: str, budget: Budget) -> BoundResult:
    ladder: dict[str, float] = {}
    notes: list[str] = []
    best: BoundResult | None = None
    for info in rungs(cheap=False, below=RANK):
        name = info.name
        if objective not in info.objectives:
            continue
        if budget.expired:
            notes.append(f"{name}: not run, time limit reached")
            continue
        try:
            res = info.fn(instance, objective, _share(budget, name))
        except BoundError as e:
            notes.append(str(e))
            continue
        ladder.update(res.ladder)
        ladder[name] = res.value
        notes.extend(res.notes)
        if best is None or res.value > best.value:
            best = res
    if best is None:
        raise BoundError("best: no bound method could run: " + "; ".join(notes))
    return BoundResult(best.value, best.method, objective, ladder=ladder, notes=tuple(notes))
