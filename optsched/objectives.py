"""The objectives, named once (semantics section 4): what a formulation minimises and the
metric of :class:`optsched.evaluation.Evaluation` it reads.

At the ground floor so that the evaluator and the solve vocabulary
(:mod:`optsched.solve_types`, which re-exports both names) share one list without importing
each other.
"""

from __future__ import annotations

from enum import StrEnum


class Objective(StrEnum):
    """What a formulation minimises (metrics of semantics section 4)."""

    MAKESPAN = "makespan"
    TOTAL_LATENCY = "total-latency"
    MEAN_TTFT = "mean-ttft"
    #: the 99th percentile of the first-token times (numpy's linear interpolation between
    #: order statistics, semantics section 4): the tail of a serving run
    P99_TTFT = "p99-ttft"

    @property
    def metric(self) -> str:
        """The key of this objective in :attr:`optsched.evaluation.Evaluation.metrics`."""
        return self.value.replace("-", "_")


#: every objective name, in declaration order (for argparse choices and messages)
OBJECTIVES: tuple[str, ...] = tuple(o.value for o in Objective)
#: the objectives the exact formulations model (a maximum or a sum of event times); a
#: percentile is not one of them: formulations and bound methods support these by default
MODELLED: tuple[str, ...] = (Objective.MAKESPAN.value, Objective.TOTAL_LATENCY.value,
                             Objective.MEAN_TTFT.value)

#: how the objectives read in a sentence (the commands' verdicts, the results' summaries)
OBJECTIVE_WORDS = {"makespan": "makespan", "total-latency": "total latency",
                   "mean-ttft": "mean TTFT", "p99-ttft": "P99 TTFT"}

__all__ = ["MODELLED", "OBJECTIVES", "OBJECTIVE_WORDS", "Objective"]
