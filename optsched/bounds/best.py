"""Bound ``best``: climb the ladder within the budget, keep the largest bound and the
method that gave it (``formulations/bounds.md`` section 3)."""

from __future__ import annotations

from dataclasses import replace

from ..evaluate import OBJECTIVES
from .base import BoundError, BoundResult, Budget, bound_methods, register_bound

#: the rungs ``best`` climbs, cheapest first (``combinatorial`` already runs the cheap ones;
#: ``tail`` bounds the P99 TTFT, B16; ``events`` splits mean TTFT into busy periods, B14;
#: ``spread``, ``coupled`` and ``dual`` couple batching with duration, B10-B13, seconds at
#: 1,000 requests; ``stretch`` prices decode stretch in machine time, B15, iterating while
#: its share of the time allows)
LADDER = ("combinatorial", "tail", "events", "spread", "coupled", "dual", "stretch", "exact")
#: the share of the time left that a rung iterating until its budget ends may take (the rest
#: stays for the rungs after it)
SHARE = {"stretch": 0.8}


def _share(budget: Budget, name: str) -> Budget:
    if name not in SHARE or budget.deadline is None:
        return budget
    return replace(budget, deadline=budget.deadline - (1 - SHARE[name]) * budget.left())


@register_bound("best", "every rung that fits the time limit; the largest bound",
                objectives=OBJECTIVES, rung=100)
def best_bound(instance, objective: str, budget: Budget) -> BoundResult:
    methods = bound_methods()
    ladder: dict[str, float] = {}
    notes: list[str] = []
    best: BoundResult | None = None
    for name in LADDER:
        info = methods[name]
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
