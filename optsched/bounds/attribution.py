"""Which side holds a total-latency gap: the parts of a schedule's total latency that a one-machine
view explains (docs/results/bounds.md, "Which side holds the gap"; ``studies/bounds/gap_attribution.py``).
Not a bound rung: it reads a schedule.

Split every batch's duration over its entries by tokens: request ``i`` receives its *own work*
``w_i``, the busy time spent on it, and the ``w_i`` sum to the busy time. The schedule serves
each request its own work in pieces between its arrival and its completion, on one machine
(a batch's interval can be cut into its entries' shares in any order without moving the
batch's end), so its total latency is at least the total flow time of preemptive SRPT on the
jobs ``(a_i, w_i)`` (``srpt_total_completion``, optimal for ``1 | r_j, pmtn | sum C_j``,
bounds.md B7). ``total latency - srpt(own)`` is what the schedule loses to decode stretch and
order at its own work; ``srpt(own) - bound`` what its extra work costs against a rung's work.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cost import LinearCost
from ..evaluation import evaluate
from ..instance import Instance
from ..schedule import Schedule
from .srpt import srpt_total_completion


def srpt_total_flow(release: np.ndarray, work: np.ndarray) -> float:
    """Total flow time (completion minus release, summed) of preemptive SRPT on one machine."""
    return srpt_total_completion(np.asarray(release, np.float64), np.asarray(work, np.float64)) \
        - float(np.sum(release))


def own_work(instance: Instance, schedule: Schedule) -> np.ndarray:
    """Per request (in the instance's order), its share of the busy time: each batch's duration
    (as the evaluator replays it) split over the batch's entries in proportion to their
    tokens."""
    ev = evaluate(instance, schedule)
    bd, bp = ev.batch_duration, schedule.batch_ptr
    # a schedule names its requests in its own order (``schedule.ids``)
    position = np.array([instance.index[rid] for rid in schedule.ids], np.int64)
    er, et = position[schedule.entry_req], schedule.entry_tokens
    own = np.zeros(instance.n)
    for j in range(len(bd)):
        lo, hi = bp[j], bp[j + 1]
        if hi > lo:
            np.add.at(own, er[lo:hi], bd[j] * et[lo:hi] / et[lo:hi].sum())
    return own


def alone_work(instance: Instance) -> tuple[np.ndarray, np.ndarray]:
    """Per request (seconds): its prompt prefilled alone in one batch, and its ``O - 1`` decode
    steps each alone in a batch (semantics section 5)."""
    cm = instance.cost_model
    one = np.zeros(1, np.int64)
    pre = np.array([cm.batch_times(one, np.array([i]), one, np.array([False]), 1)[0]
                    for i in instance.prompt])
    step = (cm.decode_batch_time if isinstance(cm, LinearCost)
            else lambda n, cached: cm.batch_time([1] * n, [cached], [True] * n))
    dec = np.array([sum(step(1, float(i + k)) for k in range(int(o) - 1))
                    for i, o in zip(instance.prompt, instance.output)])
    return pre, dec


@dataclass(frozen=True)
class Attribution:
    """The parts of one schedule's total latency (seconds; module docstring).

    ``total_latency = ttft + decode_span``; ``busy`` is the sum of the batch durations (and of
    the own works); ``srpt_own <= total_latency``."""

    total_latency: float
    busy: float
    ttft: float
    decode_span: float
    srpt_own: float

    def __post_init__(self) -> None:
        for name in ("total_latency", "busy", "ttft", "decode_span", "srpt_own"):
            v = getattr(self, name)
            if not np.isfinite(v) or v < 0:
                raise ValueError(f"Attribution.{name} must be a finite number >= 0, got {v!r}")


def attribute(instance: Instance, schedule: Schedule) -> Attribution:
    """The :class:`Attribution` of a feasible ``schedule`` (replayed by the evaluator)."""
    ev = evaluate(instance, schedule)
    if not ev.feasible:
        raise ValueError(f"attribute: the schedule is infeasible on {instance.name}: "
                         f"{ev.violations[:1]}")
    a = instance.arrival
    return Attribution(
        total_latency=ev.objective("total-latency"),
        busy=float(ev.batch_duration.sum()),
        ttft=float((ev.first_token - a).sum()),
        decode_span=float((ev.completion - ev.first_token).sum()),
        srpt_own=srpt_total_flow(a, own_work(instance, schedule)),
    )


__all__ = ["Attribution", "alone_work", "attribute", "own_work", "srpt_total_flow"]
