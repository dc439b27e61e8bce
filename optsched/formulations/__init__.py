"""Formulations: optimisation models of the scheduling problem, all behind one ``solve``.

Every module of this package registers its formulation with
:func:`~optsched.formulations.base.register_formulation` and is discovered on first use
(:data:`FORMULATIONS`, an :class:`optsched.plugins.Registry`), so adding one is one new file:

* ``infermax``  -- InferMax Big-M batch-indexed model and its flow variant, a package
  (``formulations/infermax.md``);
* ``hindsight`` -- the online paper's hindsight-optimal time-indexed IP, a package
  (``formulations/hindsight.md``);
* ``exhaustive`` -- exact state-graph search for tiny instances, a package (:mod:`.exhaustive`).
* ``reuse-milp`` -- batch-slot MILP with the prefix cache as decisions, unit time, a package
  (``formulations/reuse-milp.md``).

Installed distributions add formulations through the ``optsched.formulations`` entry-point
group; ``solve(instance, "my_model.py:run")`` loads a ``run`` function from a file.

A model is solved by :func:`optsched.solving.pipeline.solve` (the top-level ``optsched.solve``), one
floor up: it picks the warm start, sizes the model and falls back. The old alias
``optsched.formulations.solve`` is gone (this package does not import the floor above it).
"""

from __future__ import annotations

from .base import (
    FORMULATIONS,
    FormulationError,
    FormulationInfo,
    Hypotheses,
    ModelSize,
    RawSolution,
    SizeHint,
    SolveOptions,
    SolveReport,
    formulations,
    register_formulation,
)

__all__ = [
    "FORMULATIONS", "FormulationError", "FormulationInfo", "Hypotheses", "ModelSize",
    "RawSolution", "SizeHint", "SolveOptions", "SolveReport", "formulations",
    "register_formulation",
]
