"""Bound ``combinatorial``: the largest of the cheap rungs -- every registered rung declared
``cheap`` (the O(n log n) closed forms: ``request``, ``work``, ``srpt``, ``mbt``), taken in
rank order; a maximum of valid lower bounds is one (``formulations/bounds.md`` section 3)."""

from __future__ import annotations

from .base import BoundError, BoundResult, Budget, register_bound, rungs


@register_bound("combinatorial", "the largest of the cheap rungs (request, work, srpt, mbt, "
                "and any other registered as cheap)", rank=100)
def combinatorial_bound(instance, objective: str, budget: Budget) -> BoundResult:
    ladder: dict[str, float] = {}
    notes: list[str] = []
    for m in rungs(cheap=True):
        if objective not in m.objectives:
            continue
        try:
            ladder[m.name] = m.fn(instance, objective, budget).value
        except BoundError as e:  # a cheap rung that declines this instance claims nothing
            notes.append(str(e))
    if not ladder:
        raise BoundError(f"combinatorial: no cheap rung supports {objective!r}")
    best = max(ladder, key=lambda k: ladder[k])
    return BoundResult(ladder[best], best, objective, ladder=ladder, notes=tuple(notes))
