"""The one evaluator: every schedule is replayed here under ``docs/semantics.md`` sections 3-4
(and section 6, "Clusters", for several engines).

* :mod:`~optsched.evaluation.evaluator` -- the single-engine validator/evaluator (one
  ``_check_*`` function per rule family), :class:`Evaluation`, :class:`Violation`,
  :data:`CODES`;
* :mod:`~optsched.evaluation.fast` -- its compiled one-pass replay of feasible schedules;
* :mod:`~optsched.evaluation.cluster` -- the replay of all engines of a cluster
  (:class:`ClusterEvaluation`, :data:`CLUSTER_CODES`), with the rules that couple engines in
  :mod:`~optsched.evaluation.cluster_rules`.

``optsched.evaluate(instance, schedule)`` is :func:`evaluate` (the top-level API).
"""

from __future__ import annotations

from ..instance import Instance
from ..schedule import Schedule
from .cluster import CLUSTER_CODES, ClusterEvaluation, evaluate_cluster
from .evaluator import CODES, MAX_KEPT_PER_CODE, OBJECTIVES, Evaluation, Violation
from .evaluator import evaluate as evaluate_engine


def evaluate(instance: Instance, schedule: Schedule) -> Evaluation:
    """Replay ``schedule`` on ``instance`` (semantics sections 3-4); an instance that declares
    a cluster, or a schedule that names engines, is replayed on all engines (section 6,
    "Clusters") and gives a :class:`ClusterEvaluation`. Never raises on a syntactically
    valid schedule: broken rules come back as violations."""
    if instance.cluster is None and schedule.placement is None:
        return evaluate_engine(instance, schedule)
    return evaluate_cluster(instance, schedule)


__all__ = ["CLUSTER_CODES", "CODES", "MAX_KEPT_PER_CODE", "OBJECTIVES", "ClusterEvaluation",
           "Evaluation", "Violation", "evaluate", "evaluate_cluster", "evaluate_engine"]
