"""The engine interface: run a function over independent items, yield results as they finish.

An engine registers by name with :func:`register_engine` in :data:`ENGINES`, a registry of
the one plug-in mechanism (:class:`optsched.plugins.Registry`): every module in
``optsched/sweep/engines/`` is imported on first use, installed distributions add theirs
through the ``optsched.engines`` entry-point group, and ``--engine path/file.py:Class`` loads
one on demand -- so a new engine is one new file::

    @register_engine("myengine")
    class MyEngine:
        def __init__(self, workers: int | None = None, address: str | None = None): ...
        def run(self, fn, items): ...   # yields Outcome(item, result, error) as items finish
        def close(self): ...

``run`` must yield exactly one :class:`Outcome` per item, in any order; ``error`` is a
one-line text when no result came back (the worker died, the task was lost), and engines
keep at most a bounded number of items in flight, so an interrupted run loses only those.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import OptschedError
from ..plugins import Registry


class EngineError(OptschedError):
    pass


@dataclass(frozen=True)
class Outcome:
    item: Any
    result: Any = None
    error: str | None = None


class Engine(Protocol):
    name: str

    def run(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Outcome]: ...

    def close(self) -> None: ...


ENGINES: Registry[Any] = Registry("sweep engine", packages=("optsched.sweep.engines",),
                                  group="optsched.engines", error=EngineError)


def register_engine(name: str):
    """Class decorator: the engine class under ``name`` (``cls(workers=, address=)``)."""

    def deco(cls):
        cls.name = name
        ENGINES.add(name, cls, cls)
        return cls

    return deco


def engine_names() -> list[str]:
    return ENGINES.names()


def make_engine(name: str, *, workers: int | None = None, address: str | None = None) -> Engine:
    """An engine instance; unknown names and bad ``workers`` are :class:`EngineError`."""
    try:
        cls = ENGINES.get(name)
    except EngineError as e:
        raise EngineError(f"--engine: {e}") from None
    if workers is not None and workers < 1:
        raise EngineError(f"--workers {workers}: expected an integer >= 1")
    return cls(workers=workers, address=address)


__all__ = ["ENGINES", "Engine", "Outcome", "EngineError", "register_engine", "make_engine", "engine_names"]
