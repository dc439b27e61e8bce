"""Exceptions of the MILP layer; every message names the block, index, group or option at fault."""

from __future__ import annotations

from ..errors import OptschedError
from ..solve_types import OptionsError  # noqa: F401  (re-exported: bad SolveOptions field)


class MilpError(OptschedError):
    """Base class of every error raised by :mod:`optsched.milp` (an :class:`OptschedError`,
    so the command line reports it in one line)."""


class ModelError(MilpError, ValueError):
    """A model was declared wrongly (bad shape, bound, index, coefficient, duplicate name)."""


class UnknownSolverError(MilpError, KeyError):
    """No backend is registered under the requested name."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class WarmStartError(MilpError, ValueError):
    """A warm start could not even be read (unknown block, wrong shape)."""


class SolverUnavailableError(MilpError):
    """The backend's library is not installed or not licensed for the model."""
