"""Backend registry. Each module in this package registers one backend with
:func:`~optsched.milp.backends.base.register`; modules are discovered on first use
(:data:`BACKENDS`, an :class:`optsched.plugins.Registry`), so adding a backend means adding one
file. Installed distributions add backends through the ``optsched.backends`` entry points."""

from __future__ import annotations

from typing import Any

from ..errors import UnknownSolverError
from .base import BACKENDS, Backend, BackendOutput, ColumnStart, Features, register

__all__ = [
    "BACKENDS", "Backend", "BackendOutput", "ColumnStart", "Features", "register",
    "backend_names", "get_backend",
]

_instances: dict[str, Backend] = {}


def __getattr__(name: str) -> Any:
    """The deprecated ``WarmStart`` (now :class:`ColumnStart`), resolved with a warning."""
    if name == "WarmStart":
        # lazy: only for the deprecated name
        from . import base

        return base.__getattr__(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def backend_names() -> list[str]:
    """Registered backend names, default first (installed or not)."""
    return [c.name for c in sorted(BACKENDS.entries(), key=lambda c: (c.order, c.name))]


def get_backend(name: str) -> Backend:
    """The (shared) backend instance registered as ``name`` (or a ``module:Class``)."""
    if name not in BACKENDS and ":" not in name:
        raise UnknownSolverError(
            f"unknown solver {name!r}; choose one of {', '.join(backend_names())} or 'auto'"
        )
    if name not in _instances:
        _instances[name] = BACKENDS.get(name)()
    return _instances[name]
