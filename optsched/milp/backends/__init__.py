"""Backend registry. Each module in this package registers one backend with
:func:`~optsched.milp.backends.base.register`; modules are discovered on first use, so adding
a backend means adding one file."""

from __future__ import annotations

import importlib
import pkgutil

from ..errors import UnknownSolverError
from .base import _REGISTRY, Backend, BackendOutput, Features, WarmStart, register

__all__ = [
    "Backend", "BackendOutput", "Features", "WarmStart", "register",
    "backend_names", "get_backend",
]

_discovered = False
_instances: dict[str, Backend] = {}


def _discover() -> None:
    global _discovered
    if _discovered:
        return
    for mod in pkgutil.iter_modules(__path__):
        if mod.name != "base" and not mod.name.startswith("_"):
            importlib.import_module(f"{__name__}.{mod.name}")
    _discovered = True


def backend_names() -> list[str]:
    """Registered backend names, default first (installed or not)."""
    _discover()
    return [c.name for c in sorted(_REGISTRY.values(), key=lambda c: (c.order, c.name))]


def get_backend(name: str) -> Backend:
    """The (shared) backend instance registered as ``name``."""
    _discover()
    if name not in _REGISTRY:
        raise UnknownSolverError(
            f"unknown solver {name!r}; choose one of {', '.join(backend_names())} or 'auto'"
        )
    if name not in _instances:
        _instances[name] = _REGISTRY[name]()
    return _instances[name]
