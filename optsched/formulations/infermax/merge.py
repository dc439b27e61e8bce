"""Eq. G1 of ``formulations/infermax.md``: when merging a prefill segment into one entry never
hurts, and the merge itself. Shared by the fill variant (:mod:`.fill`) and eq. F15
(:mod:`.flow_objectives`), so that neither imports the other for it.
"""

from __future__ import annotations

from ...cost import LinearCost, UnitCost
from ...instance import Instance
from ...schedule import Schedule, ScheduleBuilder
from .encode import canonical


def merging_never_hurts(inst: Instance) -> str | None:
    """None if eq. G1's conditions on the limits and the cost model hold (``M <= min(C, P)``,
    ``kpm >= 2 kpq``), so that merging a prefill segment into one entry never makes a
    schedule of requests with one common arrival worse; else why not. Shared with eq. F15."""
    lim = inst.limits
    if lim.kv_capacity > min(lim.max_batch_tokens, lim.prefill_budget):
        return (f"fill variant needs M <= min(C, P) (M = {lim.kv_capacity}, C = "
                f"{lim.max_batch_tokens}, P = {lim.prefill_budget}): otherwise merging a "
                "segment's chunks can overflow a batch")
    cm = inst.cost_model
    if isinstance(cm, UnitCost):
        return None
    if not isinstance(cm, LinearCost):
        return f"fill variant does not know cost model {type(cm).__name__}"
    # LinearCost keeps every coefficient but kdr >= 0, and merging never touches a decode entry
    k = cm.coefficients
    if k["kpm"] < 2 * k["kpq"] * (1 - 1e-12):
        return "fill variant needs kpm >= 2 kpq (otherwise chunking a prefill can pay)"
    return None


def merge_prefills(inst: Instance, s: Schedule) -> Schedule:
    """A schedule at least as good as ``s`` whose every prefill segment is one entry from
    ``m = 0`` (eq. G1): ``s`` made canonical (eq. 13 dominance, compacted), then each
    segment's prefill entries are replaced by one entry of their total in the batch of the
    last of them. Feasible when ``applicable`` holds (eq. G1's argument)."""
    s = canonical(inst, s, dominance=True, symmetry=None, compact=True)
    batches: list[tuple[dict[str, int], list[str]]] = [(dict(b.entries), list(b.evict))
                                                       for b in s]
    I = {r.id: r.prompt for r in inst.requests}
    g = {r: 0 for r in I}
    m = {r: 0 for r in I}
    run: dict[str, list[int]] = {r: [] for r in I}  # batches of the current prefill run
    for j, (entries, evict) in enumerate(batches):
        for r in evict:
            m[r], run[r] = 0, []
        for r in list(entries):
            c = entries[r]
            S = I[r] + g[r]
            if g[r] >= 1 and m[r] == S - 1:  # a decode entry ends any prefill run
                run[r] = []
            else:
                run[r].append(j)
                if len(run[r]) > 1:  # fold the earlier pieces into this entry
                    entries[r] = m[r] + c
                    for jj in run[r][:-1]:
                        batches[jj][0].pop(r)
                    run[r] = [j]
            m[r] += c
            if m[r] == S:
                g[r] += 1
    b = ScheduleBuilder(inst.ids)
    for entries, evict in batches:
        if entries or evict:
            b.add(list(entries.items()), evict)
    return b.build()


__all__ = ["merge_prefills", "merging_never_hurts"]
