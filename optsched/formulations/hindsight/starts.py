"""Start slots and schedules for the ``hindsight`` formulation (``formulations/hindsight.md``,
(H0), (H5)): the domain check, the conversions between a request's start slot and a
:class:`~optsched.schedule.Schedule`, and the objective of start slots priced as the evaluator
prices the schedule."""

from __future__ import annotations

import math

import numpy as np

from ...cost import UnitCost
from ...evaluation import evaluate
from ...instance import Instance
from ...schedule import Schedule, ScheduleBuilder
from ...solve_types import Objective
from ..base import (
    FormulationError,
    arrival_origin,
    refuse_prefix_reuse,
    refuse_swaps,
    shift_instance,
)

#: longest time line (slots) the time-indexed model accepts; the list schedules and rows
#: allocate per slot
MAX_SLOTS = 1_000_000


class NotRepresentable(FormulationError):
    """A schedule the hindsight model cannot express (chunked prefill, eviction, idle gap...)."""



def applicable(instance: Instance, objective: str, options: object,
               hypotheses: object) -> str | None:
    """Why the model cannot represent ``instance`` (:func:`check_instance` on the instance the
    model sees: arrivals shifted to start at 0), asked before any bound or warm start is
    computed, so a refusal is immediate; None when it can."""
    try:
        check_instance(shift_instance(instance, arrival_origin(instance)))
    except FormulationError as e:
        return str(e).removeprefix("hindsight: ")
    return None


def check_instance(instance: Instance) -> None:
    """The model's domain: unit time, every prompt fits one batch (no chunking), no swapping."""
    refuse_swaps("hindsight", instance)
    refuse_prefix_reuse("hindsight", instance)
    if not isinstance(instance.cost_model, UnitCost):
        raise FormulationError(
            "hindsight: the time-indexed IP needs the unit-time cost model (every batch takes 1); "
            f"this instance uses {instance.cost_model.kind!r}"
        )
    lim = instance.limits
    P = lim.prefill_budget
    for r in instance.requests:
        if r.prompt > P:
            raise FormulationError(
                f"hindsight: request {r.id!r} has prompt {r.prompt} > prefill budget {P}; the model "
                "has no chunked prefill (use the infermax formulation)"
            )
    if instance.n:
        O = instance.output
        slots = math.ceil(float(instance.arrival.max())) + int(O.sum()) + int(O.max())
        if slots > MAX_SLOTS:
            raise FormulationError(
                f"hindsight: the time-indexed model would span about {slots:,} slots (latest arrival "
                f"{float(instance.arrival.max()):g} plus the total output); it handles at most "
                f"{MAX_SLOTS:,}: shift the arrivals to start near 0 or use the infermax formulation")


def schedule_from_starts(instance: Instance, starts: np.ndarray) -> Schedule:
    """The schedule of start slots ``t_i`` (H0): slot ``t`` = batch ``t`` with stated start ``t``."""
    n = instance.n
    builder = ScheduleBuilder(instance.ids)
    if n == 0:
        return builder.build()
    starts = np.asarray(starts, dtype=np.int64)
    O, I = instance.output, instance.prompt
    end = int((starts + O).max())
    # entries of slot tau: (request, tokens); sort by slot
    req = np.repeat(np.arange(n), O)
    k = np.arange(req.size) - np.repeat(np.cumsum(O) - O, O)
    slot = starts[req] + k
    tok = np.where(k == 0, I[req], 1)
    order = np.lexsort((req, slot))
    slot, req, tok = slot[order], req[order], tok[order]
    ptr = np.searchsorted(slot, np.arange(end + 1))
    for tau in range(end):
        a, b = ptr[tau], ptr[tau + 1]
        builder.add_indexed(req[a:b].tolist(), tok[a:b].tolist(), (), float(tau))
    return builder.build()


def starts_from_schedule(instance: Instance, schedule: Schedule) -> np.ndarray:
    """Start slots of a schedule the model can represent; raises :class:`NotRepresentable`.

    Representable: feasible under the evaluator, unit-time, no eviction, every request prefilled
    whole (``c = I``) in one batch starting at an integer time, then one decode per batch in
    consecutive unit slots.
    """
    refuse_swaps("hindsight", instance, schedule)
    check_instance(instance)
    ev = evaluate(instance, schedule)
    if not ev.feasible:
        raise NotRepresentable("schedule is infeasible: " + "; ".join(map(str, ev.violations[:3])))
    if ev.metrics["evictions"]:
        raise NotRepresentable("schedule evicts; the hindsight model has no preemption")
    bs = ev.batch_start
    nonempty = ev.batch_duration > 0
    if np.any(np.abs(bs[nonempty] - np.round(bs[nonempty])) > 1e-9):
        raise NotRepresentable("a batch starts at a non-integer time")
    n = instance.n
    idmap = np.array([instance.index.get(x, -1) for x in schedule.ids], dtype=np.int64)
    e_req = idmap[schedule.entry_req]
    e_slot = np.round(bs[schedule.batch_of_entry]).astype(np.int64)
    e_tok = schedule.entry_tokens
    order = np.lexsort((e_slot, e_req))
    e_req, e_slot, e_tok = e_req[order], e_slot[order], e_tok[order]
    first = np.searchsorted(e_req, np.arange(n))
    counts = np.bincount(e_req, minlength=n)
    O, I = instance.output, instance.prompt
    if np.any(counts != O):
        i = int(np.flatnonzero(counts != O)[0])
        raise NotRepresentable(f"request {instance.ids[i]!r} has {counts[i]} entries, not O = {O[i]} "
                               "(chunked prefill or refill)")
    starts = e_slot[first]
    k = np.arange(e_req.size) - first[e_req]
    if np.any(e_slot != starts[e_req] + k):
        i = int(e_req[np.flatnonzero(e_slot != starts[e_req] + k)[0]])
        raise NotRepresentable(f"request {instance.ids[i]!r} is not processed in consecutive slots")
    if np.any(e_tok != np.where(k == 0, I[e_req], 1)):
        raise NotRepresentable("a prompt is not prefilled whole in one batch")
    return starts


def objective_of_starts(instance: Instance, objective: str, starts: np.ndarray) -> float:
    """(H5): the objective of start slots, priced exactly as the evaluator prices the schedule."""
    t = np.asarray(starts, dtype=np.float64)
    if instance.n == 0:
        return 0.0
    if objective == Objective.TOTAL_LATENCY:
        return float(np.sum(t + instance.output - instance.arrival))
    if objective == Objective.MEAN_TTFT:
        return float(np.mean(t + 1 - instance.arrival))
    if objective == Objective.MAKESPAN:
        return float(np.max(t + instance.output))
    raise FormulationError(f"hindsight: unknown objective {objective!r}")
