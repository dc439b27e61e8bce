"""Bound methods of a sweep (``optsched.bounds``, when this optsched has it): the check the spec
parser runs on a ``bound = "NAME"`` method and the module the runner calls.

Apart from :mod:`~optsched.sweep.methods` so that the spec parser can check a bound method
without importing the runners, which import the spec (so the two do not import each
other).
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from ..errors import OptschedError


class BoundsUnavailable(OptschedError):
    """A ``bound`` method was asked for but this optsched has no bounds registry."""


def bounds_module() -> ModuleType:
    """``optsched.bounds`` (the bound ladder) if this optsched has it, else :class:`BoundsUnavailable`."""
    if importlib.util.find_spec("optsched.bounds") is None:
        raise BoundsUnavailable("bound methods need optsched.bounds (the bound ladder), which this "
                                "optsched does not have; use policy or formulation methods")
    return importlib.import_module("optsched.bounds")


def check_bound_method(name: str, objective: str) -> None:
    """The method is registered in ``optsched.bounds.bound_methods()`` and supports ``objective``."""
    methods = bounds_module().bound_methods()
    if name not in methods:
        raise BoundsUnavailable(f"unknown bound method {name!r}; known: {', '.join(methods)}")
    supported = getattr(methods[name], "objectives", None)
    if supported is not None and objective not in supported:
        raise BoundsUnavailable(f"bound method {name!r} does not support {objective!r} "
                                f"(supports {', '.join(supported)})")


__all__ = ["BoundsUnavailable", "bounds_module", "check_bound_method"]
