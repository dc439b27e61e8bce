"""Formulations: optimisation models of the scheduling problem, all behind one ``solve``.

Registered formulations (each module registers itself with
:func:`~optsched.formulations.base.register_formulation`):

* ``infermax``  -- InferMax Big-M batch-indexed model (``formulations/infermax.md``);
* ``hindsight`` -- the online paper's hindsight-optimal time-indexed IP (``formulations/hindsight.md``);
* ``exhaustive`` -- exact state-graph search for tiny instances (``optsched.oracles.exhaustive``).

Adding one: a module with a ``@register_formulation`` function, listed in ``_MODULES``.
"""

from __future__ import annotations

import importlib

from .base import (
    FormulationError,
    FormulationInfo,
    Hypotheses,
    RawSolution,
    SolveOptions,
    SolveReport,
    formulations,
    register_formulation,
    solve,
)

_MODULES = ("optsched.formulations.infermax", "optsched.formulations.hindsight",
            "optsched.oracles.exhaustive")
_loaded = False


def _load_all() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for name in _MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as e:
            if not (e.name and name.startswith(e.name)):  # a real import error inside it
                raise


__all__ = [
    "FormulationError", "FormulationInfo", "Hypotheses", "RawSolution", "SolveOptions",
    "SolveReport", "formulations", "register_formulation", "solve",
]
