"""Bound ``combinatorial``: the largest of the O(n log n) rungs (``request``, ``work``,
``srpt``, ``mbt``); a maximum of valid lower bounds is one (``formulations/bounds.md`` section 3)."""

from __future__ import annotations

from .base import BoundResult, Budget, bound_methods, register_bound

CHEAP = ("request", "work", "srpt", "mbt")


@register_bound("combinatorial", "the largest of request, work, srpt and mbt", rung=3)
def combinatorial_bound(instance, objective: str, budget: Budget) -> BoundResult:
    methods = bound_methods()
    ladder: dict[str, float] = {}
    for name in CHEAP:
        if objective in methods[name].objectives:
            ladder[name] = methods[name].fn(instance, objective, budget).value
    best = max(ladder, key=lambda k: ladder[k])
    return BoundResult(ladder[best], best, objective, ladder=ladder)
