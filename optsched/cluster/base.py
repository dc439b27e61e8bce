"""The router layer's contract (docs/semantics.md section 6, "Clusters"): a :class:`Router`
picks the engine of each arriving request from what the engines' states say at its arrival.

Routers are plug-ins like policies: each module of :mod:`optsched.cluster` registers its
routers with :func:`register_router` on import, so a new router is one new file.
:func:`get_router` returns a fresh router (routers keep per-run state).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..errors import OptschedError
from ..instance import Instance
from ..plugins import Registry


class RouterError(OptschedError, ValueError):
    """A router that cannot run on an instance, or an unknown router name (one line)."""


class EngineState(Protocol):
    """What a router may read of one engine at the arrival time ``t`` it routes at."""

    #: the engine's position in the instance's cluster
    position: int

    def outstanding(self, t: float) -> int:
        """Requests routed here and not finished by ``t`` (waiting or running)."""
        ...

    def kv(self, t: float) -> int:
        """KV tokens in use after the engine's last batch that ended by ``t``."""
        ...

    def prefix_match(self, i: int, t: float) -> int:
        """How many of request ``i``'s shareable prefix blocks, from its first, are resident
        on the engine at ``t`` (docs/semantics.md section 6, prefix reuse; 0 without)."""
        ...


class Router(Protocol):
    """Picks an engine for each request, in arrival order (ties in the instance's order)."""

    name: str

    def bind(self, instance: Instance, engines: Sequence[EngineState]) -> None:
        """Start a run over ``instance``'s ``engines``."""
        ...

    def route(self, i: int, t: float, candidates: Sequence[int]) -> int:
        """The engine (a position) for request ``i`` arriving at ``t``, one of
        ``candidates`` (the engines whose limits fit the request, in position order)."""
        ...


@dataclass(frozen=True)
class RouterSpec:
    """A registered router: its name, a one-line description, its source and its factory."""

    name: str
    description: str
    source: str
    factory: Callable[[], Router]
    #: ``both``: routes requests among engines of role ``both`` (replicas);
    #: ``disaggregated``: places prefill and decode on ``prefill`` / ``decode`` engines
    kind: str = "both"

    def make(self) -> Router:
        router = self.factory()
        router.name = self.name
        return router


ROUTERS: Registry[RouterSpec] = Registry("router", packages=("optsched.cluster",),
                                        error=RouterError, skip=("base", "engine", "fast", "replicas"))


def register_router(name: str, description: str, source: str, *, kind: str = "both"
                    ) -> Callable[[Callable[[], Router]], Callable[[], Router]]:
    """Class decorator: register a router as ``name`` (docstring conventions as policies)."""

    def deco(factory: Callable[[], Router]) -> Callable[[], Router]:
        ROUTERS.add(name, RouterSpec(name, description, source, factory, kind), factory)
        return factory

    return deco


#: router names users ask for that the model cannot give a meaning yet, with why
REFUSED: dict[str, str] = {}


def get_router(name: str) -> RouterSpec:
    """The router registered as ``name`` (:class:`RouterError` naming the known ones, or why
    a router of :data:`REFUSED` is not available)."""
    if name in REFUSED and name not in ROUTERS.names():
        raise RouterError(f"router {name!r} is not available: {REFUSED[name]}; known routers: "
                          f"{', '.join(router_names())}")
    return ROUTERS.get(name)


def router_names() -> list[str]:
    return ROUTERS.names()


__all__ = ["REFUSED", "ROUTERS", "EngineState", "Router", "RouterError", "RouterSpec", "get_router",
           "register_router", "router_names"]
