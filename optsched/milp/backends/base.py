"""The interface every backend implements, its feature flags and the registry."""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ...plugins import Registry
from ...solve_types import Status
from ..errors import UnknownSolverError

if TYPE_CHECKING:
    from ...solve_types import SolveOptions
    from ..model import Model
    from ..progress import Progress

def _adapt(label: str, obj: object) -> type[Backend]:
    """A backend class loaded from an entry point or a ``module:Class`` reference."""
    if isinstance(obj, type) and issubclass(obj, Backend):
        return obj
    raise UnknownSolverError(f"{label}: not a MILP backend (a Backend subclass)")


#: every MILP backend: the modules of this package register theirs on import; installed
#: distributions add theirs through the ``optsched.backends`` entry-point group
BACKENDS: Registry[type[Backend]] = Registry(
    "solver", packages=("optsched.milp.backends",), group="optsched.backends",
    error=UnknownSolverError, adapt=_adapt,
)


def register(cls: type[Backend]) -> type[Backend]:
    """Class decorator: make ``cls`` available under ``cls.name``."""
    BACKENDS.add(cls.name, cls, cls)
    return cls


@dataclass(frozen=True)
class Features:
    """What a backend can do.

    ``continuous``: accepts continuous columns; ``warm_start``: uses a complete start;
    ``partial_start``: uses a start that gives only some columns; ``bound``: reports a proven
    dual bound; ``threads``/``seed``: honours those options; ``progress``: can feed the live
    progress line; ``unbounded``: can prove unboundedness.
    """

    continuous: bool = True
    warm_start: bool = True
    partial_start: bool = True
    bound: bool = True
    threads: bool = True
    seed: bool = True
    progress: bool = True
    unbounded: bool = True


@dataclass(frozen=True, eq=False)
class ColumnStart:
    """A checked warm start handed to a backend: a full column vector, NaN where not given.

    Formerly ``WarmStart``; renamed so that :class:`optsched.solve_types.WarmStart` (a schedule
    and its evaluation) is the one warm start of the solve vocabulary. The old name still
    resolves here, with a :class:`DeprecationWarning`.
    """

    values: np.ndarray
    partial: bool

    @property
    def given(self) -> np.ndarray:
        """Column ids that have a value."""
        return np.flatnonzero(~np.isnan(self.values))


@dataclass
class BackendOutput:
    """What a backend returns; :func:`optsched.milp.solve` turns it into a SolveResult."""

    status: Status
    objective: float | None = None
    bound: float | None = None
    runtime: float | None = None
    nodes: int | None = None
    values: np.ndarray | None = None
    version: str = ""
    notes: list[str] = field(default_factory=list)
    message: str | None = None


class Backend(ABC):
    """Base class: subclasses set ``name``, ``order``, ``features`` and implement the rest."""

    name: ClassVar[str] = ""
    order: ClassVar[int] = 100
    features: ClassVar[Features] = Features()

    @abstractmethod
    def unavailable_reason(self) -> str | None:
        """Why the backend cannot run at all (library missing), or None."""
        ...

    def is_available(self) -> bool:
        return self.unavailable_reason() is None

    @abstractmethod
    def version(self) -> str:
        ...

    def license_status(self) -> str:
        """A human-readable licence description."""
        reason = self.unavailable_reason()
        return reason if reason else "no license needed (open-source solver)"

    def size_limit(self) -> tuple[int, int] | None:
        """(max variables, max constraints) the licence allows, or None when unlimited."""
        return None

    def model_size(self, model: Model) -> tuple[int, int]:
        """(variables, constraints) of ``model`` as this backend would build it."""
        return model.num_vars, model.num_constraints

    def unsupported_reason(self, model: Model) -> str | None:
        """Why this backend cannot solve ``model`` (missing, unlicensed, unsupported), or None."""
        reason = self.unavailable_reason()
        if reason:
            return reason
        limit = self.size_limit()
        if limit is not None:
            nv, nc = self.model_size(model)
            if nv > limit[0] or nc > limit[1]:
                return (
                    f"{self.name}: size-limited license ({limit[0]} variables, {limit[1]} "
                    f"constraints); the model has {nv} variables and {nc} constraints"
                )
        if not self.features.continuous and model.num_integer < model.num_vars:
            return (
                f"{self.name}: needs an all-integer model; {model.name!r} has "
                f"{model.num_vars - model.num_integer} continuous variables"
            )
        return None

    @abstractmethod
    def solve(self, model: Model, options: SolveOptions, start: ColumnStart | None,
              progress: Progress) -> BackendOutput:
        ...


def __getattr__(name: str) -> Any:
    """``WarmStart`` is the deprecated name of :class:`ColumnStart` (one name per concept:
    :class:`optsched.solve_types.WarmStart` is the evaluated warm-start schedule)."""
    if name == "WarmStart":
        warnings.warn("optsched.milp.backends.WarmStart is deprecated; use ColumnStart",
                      DeprecationWarning, stacklevel=2)
        return ColumnStart
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
