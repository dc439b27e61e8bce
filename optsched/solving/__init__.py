"""The one solve: every solve of optsched goes through :func:`run`.

* :mod:`~optsched.solving.pipeline` -- :func:`solve` (the top-level ``optsched.solve``),
  :func:`run` (the whole pipeline: bound, warm start, plan, model, fallback),
  :func:`lower_bound` (the top-level ``optsched.lower_bound``: the bound ladder with this
  solve for its ``exact`` rung);
* :mod:`~optsched.solving.budget` -- ``--time-limit`` as the budget of the whole command:
  the model is sized before it is built.

A package named ``solving`` (not ``solve``): a submodule ``optsched.solve`` would be bound on
``optsched`` as soon as it is imported and hide the top-level ``optsched.solve`` function.
"""

from __future__ import annotations

from .pipeline import AUTO_POLICIES, lower_bound, pick_warm_start, run, solve

__all__ = ["AUTO_POLICIES", "lower_bound", "pick_warm_start", "run", "solve"]
