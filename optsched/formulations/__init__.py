"""Formulations: optimisation models of the scheduling problem, all behind one ``solve``.

Every module of this package registers its formulation with
:func:`~optsched.formulations.base.register_formulation` and is discovered on first use
(:data:`FORMULATIONS`, an :class:`optsched.plugins.Registry`), so adding one is one new file:

* ``infermax``  -- InferMax Big-M batch-indexed model and its flow variant, a package
  (``formulations/infermax.md``);
* ``hindsight`` -- the online paper's hindsight-optimal time-indexed IP (``formulations/hindsight.md``);
* ``exhaustive`` -- exact state-graph search for tiny instances, a package (:mod:`.exhaustive`).

Installed distributions add formulations through the ``optsched.formulations`` entry-point
group; ``solve(instance, "my_model.py:run")`` loads a ``run`` function from a file.

``optsched.formulations.solve`` is :func:`optsched.pipeline.solve` (the one solve pipeline,
one floor up: it picks the warm start, sizes the model and falls back); the name is kept
here for the code written against it, resolved on first use (PEP 562) so that this package
does not import the floor above it.
"""

from __future__ import annotations

from typing import Any

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


def __getattr__(name: str) -> Any:
    """``solve``: :func:`optsched.pipeline.solve` (module docstring)."""
    if name == "solve":
        from ..pipeline import solve

        return solve
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "FORMULATIONS", "FormulationError", "FormulationInfo", "Hypotheses", "ModelSize",
    "RawSolution", "SizeHint", "SolveOptions", "SolveReport", "formulations",
    "register_formulation", "solve",
]
