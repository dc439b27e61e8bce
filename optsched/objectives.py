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

    @property
    def metric(self) -> str:
        """The key of this objective in :attr:`optsched.evaluation.Evaluation.metrics`."""
        return self.value.replace("-", "_")


#: every objective name, in declaration order (for argparse choices and messages)
OBJECTIVES: tuple[str, ...] = tuple(o.value for o in Objective)

#: how the objectives read in a sentence (the commands' verdicts, the results' summaries)
OBJECTIVE_WORDS = {"makespan": "makespan", "total-latency": "total latency",
                   "mean-ttft": "mean TTFT"}

__all__ = ["OBJECTIVES", "OBJECTIVE_WORDS", "Objective"]
