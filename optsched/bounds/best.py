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
                objectives=OBJECTIVES, rank=RANK, reuse_aware=True)
def best_bound(instance, objective: str, budget: Budget) -> BoundResult:
    ladder: dict[str, float] = {}
    notes: list[str] = []
    best: BoundResult | None = None
    # a reuse rung equals its reuse-blind twin on an instance without prefix ids (B19)
    climbed = [info for info in rungs(cheap=False, below=RANK) if objective in info.objectives
               and (info.twin_of is None or instance.has_prefix)]
    if instance.has_prefix and not any(info.reuse_aware for info in climbed):
        raise BoundError("best: no rung of the ladder models prefix reuse, and this "
                         "instance's requests list prefix block ids (docs/semantics.md "
                         "section 6, 'Prefix reuse'): cache hits skip prefill work and shared "
                         "blocks occupy memory once, so a reuse-blind bound is not a lower "
                         "bound here. Remove the 'prefix' fields to bound the problem without "
                         "reuse")
    blind = [info.name for info in climbed if instance.has_prefix and not info.reuse_aware]
    if blind:  # docs/semantics.md section 6
        notes.append(f"not climbed: {', '.join(repr(n) for n in blind)} "
                     f"{'does' if len(blind) == 1 else 'do'} not model prefix reuse, and this "
                     "instance's requests list prefix block ids (docs/semantics.md section 6): "
                     "a reuse-blind bound is not a lower bound there")
    for info in climbed:
        name = info.name
        if name in blind:
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
