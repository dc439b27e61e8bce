"""Policy registry: every scheduling policy is registered by name with a one-line
description, its source (paper + section/algorithm/table) and its parameters.

``get_policy(name, **params)`` returns a *fresh* policy object (policies keep per-run
state, so one object simulates one run). Parameters are declared with a type, a default
and a check; an unknown key or a bad value raises :class:`PolicyError` naming it.
A policy is *hypothetical* when it reads the true output lengths (DESIGN section 6):
eviction-free reservation, ranking by true ``O``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import OptschedError


class PolicyError(OptschedError, ValueError):
    """Unknown policy name, unknown parameter or a bad parameter value."""


class SimulationError(OptschedError, RuntimeError):
    """A policy produced a batch the simulator cannot apply (a policy bug), or stalled."""


@dataclass(frozen=True)
class Param:
    """A policy parameter: ``type`` is int, float, str or bool; ``check`` returns an error
    text for a bad value (or None)."""

    name: str
    type: type
    default: Any
    help: str
    check: Callable[[Any], str | None] | None = None

    def parse(self, value: Any, policy: str) -> Any:
        where = f"policy {policy!r}: parameter {self.name!r}"
        if isinstance(value, str) and self.type is not str:
            text = value.strip()
            try:
                if self.type is bool:
                    low = text.lower()
                    if low not in ("1", "0", "true", "false", "yes", "no"):
                        raise ValueError
                    value = low in ("1", "true", "yes")
                elif self.type is int:
                    value = int(text)
                elif self.type is float:
                    value = float(text)
            except ValueError:
                raise PolicyError(
                    f"{where}: expected {self.type.__name__}, got {value!r}"
                ) from None
        elif value is not None:
            ok = (
                isinstance(value, self.type)
                or (self.type is float and isinstance(value, int))
            ) and not (self.type is not bool and isinstance(value, bool))
            if not ok:
                raise PolicyError(f"{where}: expected {self.type.__name__}, got {value!r}")
            if self.type is float:
                value = float(value)
        if value is None and self.default is not None:
            raise PolicyError(f"{where}: a value is required")
        if self.check is not None and value is not None:
            msg = self.check(value)
            if msg:
                raise PolicyError(f"{where}: {msg}, got {value!r}")
        return value


@dataclass(frozen=True)
class PolicySpec:
    """A registered policy: how to build it and where it comes from."""

    name: str
    description: str
    source: str
    hypothetical: bool
    factory: Callable[..., Any]
    params: tuple[Param, ...] = ()
    defaults: tuple[tuple[str, Any], ...] = ()

    def parse_params(self, params: dict[str, Any]) -> dict[str, Any]:
        known = {p.name: p for p in self.params}
        out = {p.name: p.default for p in self.params}
        out.update(dict(self.defaults))
        for key, value in params.items():
            if key not in known:
                names = ", ".join(sorted(known)) or "none"
                raise PolicyError(
                    f"policy {self.name!r}: unknown parameter {key!r} (known: {names})"
                )
            out[key] = known[key].parse(value, self.name)
        return out

    def make(self, **params):
        policy = self.factory(**self.parse_params(params))
        policy.name = self.name
        policy.hypothetical = self.hypothetical
        return policy


_REGISTRY: dict[str, PolicySpec] = {}


def register(
    name: str,
    description: str,
    source: str,
    hypothetical: bool = False,
    *,
    params: tuple[Param, ...] = (),
    defaults: dict[str, Any] | None = None,
    factory: Callable[..., Any] | None = None,
):
    """Register ``factory`` (a policy class or callable taking the parameters as keywords)
    under ``name``; usable as a call (``factory=``) or as a class decorator.
    ``defaults`` overrides parameter defaults for this name (configurations)."""

    def add(f):
        if name in _REGISTRY:
            raise ValueError(f"policy {name!r} is already registered")
        _REGISTRY[name] = PolicySpec(
            name, description, source, hypothetical, f, tuple(params),
            tuple((defaults or {}).items()),
        )
        return f

    if factory is not None:
        return add(factory)
    return add


def _load_builtin() -> None:
    # importing the modules registers their policies
    from . import alpha, mcsf, unified  # noqa: F401


def get_spec(name: str) -> PolicySpec:
    _load_builtin()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise PolicyError(
            f"unknown policy {name!r}; known policies: {', '.join(sorted(_REGISTRY))}"
        ) from None


def get_policy(name: str, **params):
    """A fresh policy object for ``name`` with ``params`` (validated)."""
    return get_spec(name).make(**params)


def list_policies() -> list[PolicySpec]:
    """All registered policies, sorted by name."""
    _load_builtin()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def parse_param_args(items: list[str] | None) -> dict[str, str]:
    """``["key=value", ...]`` (the CLI's ``--param``) -> dict; values stay strings and are
    parsed by the policy's declared types."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise PolicyError(f"--param {item!r}: expected key=value")
        out[key.strip()] = value
    return out


# -- common checks ------------------------------------------------------------------------
def positive(v) -> str | None:
    return None if v > 0 else "must be > 0"


def non_negative(v) -> str | None:
    return None if v >= 0 else "must be >= 0"


def unit_interval(v) -> str | None:
    return None if 0 <= v <= 1 else "must be in [0, 1]"


def open_unit_interval(v) -> str | None:
    return None if 0 < v <= 1 else "must be in (0, 1]"


__all__ = [
    "Param",
    "PolicySpec",
    "PolicyError",
    "SimulationError",
    "register",
    "get_policy",
    "get_spec",
    "list_policies",
    "parse_param_args",
]
