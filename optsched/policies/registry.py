"""Policy registry: every scheduling policy is registered by name with a one-line
description, its source (paper + section/algorithm/table) and its parameters.

Policies are plug-ins (:mod:`optsched.plugins`): every module of this package registers its
policies on import, so a new policy is one new file here (or a ``file.py:Class`` reference,
or an installed ``optsched.policies`` entry point).
``get_policy(name, **params)`` returns a *fresh* policy object (policies keep per-run
state, so one object simulates one run). Parameters are declared with a type, a default
and a check; an unknown key or a bad value raises :class:`PolicyError` naming it.
A policy is *hypothetical* when it reads the true output lengths (semantics section 6):
eviction-free reservation, ranking by true ``O``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..plugins import (
    ParamSpec,
    Registry,
    _load_file,
    describe_object,
    is_reference,
    non_negative,
    open_unit_interval,
    parse_assignments,
    parse_params,
    positive,
    unit_interval,
)
from .errors import PolicyError, PolicyWarning, SimulationError, SimulationTimeout
from .simulator import Policy, check_policy

#: a policy parameter (the one parameter-spec type of all plug-ins)
Param = ParamSpec


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

    @property
    def compiled(self) -> str | None:
        """The compiled twin the policy's class declares (its own ``fast_kernel``: the kernel
        of :mod:`optsched.policies.fast` that runs exactly that class, a subclass inheriting
        nothing), or None: the Python path only. ``tests/test_fast_path.py`` holds every
        declared twin to its Python path, batch for batch. A configuration registered with a
        factory function declares the twin of the class it builds."""
        cls = self.factory if isinstance(self.factory, type) else type(self.make())
        return vars(cls).get("fast_kernel")

    def parse_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` checked by the declared :class:`ParamSpec` s, defaults filled in."""
        return parse_params(self.params, params, f"policy {self.name!r}", PolicyError,
                            dict(self.defaults))

    @property
    def reuse_aware(self) -> bool:
        """Whether the policy states prefix hits and drops (docs/semantics.md section 6,
        "Prefix reuse"); the others run blind to block ids. Asked of a policy built with
        the defaults."""
        try:
            return bool(getattr(self.make(), "reuse_aware", False))
        except PolicyError:
            return False

    def make(self, **params: Any) -> Any:
        parsed = self.parse_params(params)
        missing = sorted(getattr(self.factory, "__abstractmethods__", ()))
        if isinstance(self.factory, type) and missing:
            raise PolicyError(f"policy {self.name!r}: {self.factory.__name__} does not define "
                              f"{', '.join(missing)} (a Policy implements on_arrivals, "
                              "next_batch and on_batch_end; docs/policies.md)")
        policy = self.factory(**parsed)
        check_policy(policy)
        policy.name = self.name
        # a policy whose length predictor is the truth itself is hypothetical (docs/semantics.md section 6)
        reads_truth = bool(getattr(getattr(policy, "predictor", None), "exact", False))
        policy.hypothetical = self.hypothetical or reads_truth
        return policy


def _adapt(label: str, obj: Any) -> PolicySpec:
    """A policy class (or factory) loaded from ``file.py:Name`` / ``module:Name`` or an entry
    point: its parameters are its ``params`` attribute (:class:`ParamSpec` s)."""
    if isinstance(obj, PolicySpec):
        return obj
    if not callable(obj) or (isinstance(obj, type) and not hasattr(obj, "next_batch")):
        raise PolicyError(f"{label}: not a policy (a Policy subclass or a factory returning one)")
    return PolicySpec(
        name=label,
        description=describe_object(obj) or f"user policy {label}",
        source=str(getattr(obj, "source", "") or label),
        hypothetical=bool(getattr(obj, "hypothetical", False)),
        factory=obj,
        params=tuple(getattr(obj, "params", ()) or ()),
    )


#: every policy: the modules of ``optsched.policies`` register theirs on import; installed
#: distributions add theirs through the ``optsched.policies`` entry-point group
POLICIES: Registry[PolicySpec] = Registry(
    "policy", plural="policies", packages=("optsched.policies",), group="optsched.policies",
    error=PolicyError, adapt=_adapt, skip=("registry", "simulator", "fast", "fast_cached", "reuse"),
)


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

    def add(f: Callable[..., Any]) -> Callable[..., Any]:
        if name in POLICIES._entries:
            raise PolicyError(f"policy {name!r} is already registered")
        POLICIES.add(name, PolicySpec(
            name, description, source, hypothetical, f, tuple(params),
            tuple((defaults or {}).items()),
        ), f)
        return f

    if factory is not None:
        return add(factory)
    return add


def get_spec(name: str) -> PolicySpec:
    """The registered policy ``name``, or a ``file.py:Class`` / ``module:Class`` reference;
    a bare ``file.py`` defining one Policy subclass means that class."""
    if isinstance(name, str) and name.endswith(".py") and not is_reference(name) \
            and name not in POLICIES:
        name = _class_in_file(name)
    return POLICIES.get(name)


def _class_in_file(path: str) -> str:
    """``path:Class`` for the one :class:`Policy` subclass ``path`` defines; else a one-line
    :class:`PolicyError` suggesting the ``file.py:Class`` form with the classes it defines."""


    module = _load_file(Path(path), path, PolicyError)
    found = [obj.__name__ for obj in vars(module).values()
             if isinstance(obj, type) and issubclass(obj, Policy) and obj is not Policy
             and obj.__module__ == module.__name__]
    if len(found) == 1:
        return f"{path}:{found[0]}"
    what = f"defines Policy subclasses {', '.join(found)}" if found else \
        "defines no Policy subclass"
    raise PolicyError(f"{path}: name the class as {path}:Class ({path} {what}; "
                      "docs/policies.md)")


def get_policy(name: str, **params: Any) -> Any:
    """A fresh policy object for ``name`` with ``params`` (validated)."""
    return get_spec(name).make(**params)


def list_policies() -> list[PolicySpec]:
    """All registered policies, sorted by name."""
    return POLICIES.entries()


def parse_param_args(items: list[str] | None) -> dict[str, str]:
    """``["key=value", ...]`` (the CLI's ``--param``) -> dict; values stay strings and are
    parsed by the policy's declared types."""
    return parse_assignments(items, error=PolicyError)


__all__ = [
    "POLICIES",
    "Param",
    "ParamSpec",
    "PolicySpec",
    "PolicyError",
    "PolicyWarning",
    "SimulationError",
    "SimulationTimeout",
    "register",
    "get_policy",
    "get_spec",
    "list_policies",
    "parse_param_args",
    "positive",
    "non_negative",
    "unit_interval",
    "open_unit_interval",
]
