"""The one evaluator: every schedule is replayed here under ``docs/semantics.md`` sections 3-4.

* :mod:`~optsched.evaluation.evaluator` -- :func:`evaluate` (the validator/evaluator: one
  ``_check_*`` function per rule family), :class:`Evaluation`, :class:`Violation`,
  :data:`CODES`;
* :mod:`~optsched.evaluation.fast` -- its compiled one-pass replay of feasible schedules.

``optsched.evaluate(instance, schedule)`` is :func:`evaluate` (the top-level API).
"""

from __future__ import annotations

from .evaluator import CODES, MAX_KEPT_PER_CODE, OBJECTIVES, Evaluation, Violation, evaluate

__all__ = ["CODES", "MAX_KEPT_PER_CODE", "OBJECTIVES", "Evaluation", "Violation", "evaluate"]
