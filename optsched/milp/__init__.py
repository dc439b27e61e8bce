"""Solver-neutral MILP layer (API summary written at the end of issue 4)."""

from .backends import Backend, Features, backend_names, get_backend
from .errors import (
    MilpError,
    ModelError,
    OptionsError,
    SolverUnavailableError,
    UnknownSolverError,
    WarmStartError,
)
from .model import BINARY, CONTINUOUS, INTEGER, CheckViolation, ConstraintGroup, Model, VarBlock
from .result import STATUSES, SolveOptions, SolveResult, compute_gap
from .solve import available_backends, backend_info, choose_auto, solve, unsupported_reason

__all__ = [
    "BINARY", "CONTINUOUS", "INTEGER", "STATUSES",
    "Backend", "CheckViolation", "ConstraintGroup", "Features", "MilpError", "Model",
    "ModelError", "OptionsError", "SolveOptions", "SolveResult", "SolverUnavailableError",
    "UnknownSolverError", "VarBlock", "WarmStartError",
    "available_backends", "backend_info", "backend_names", "choose_auto", "compute_gap",
    "get_backend", "solve", "unsupported_reason",
]
