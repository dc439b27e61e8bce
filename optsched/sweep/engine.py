"""The engine interface: run a function over independent items, yield results as they finish.

An engine registers by name with :func:`register_engine`; every module in
``optsched/sweep/engines/`` is imported on first use, so a new engine is one new file::

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

import importlib
import pkgutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import OptschedError


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


_ENGINES: dict[str, Callable[..., Engine]] = {}
_loaded = False


def register_engine(name: str):
    def deco(cls):
        if name in _ENGINES:
            raise EngineError(f"engine {name!r} is already registered")
        cls.name = name
        _ENGINES[name] = cls
        return cls

    return deco


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    from . import engines

    for mod in pkgutil.iter_modules(engines.__path__):
        importlib.import_module(f"{engines.__name__}.{mod.name}")


def engine_names() -> list[str]:
    _load()
    return sorted(_ENGINES)


def make_engine(name: str, *, workers: int | None = None, address: str | None = None) -> Engine:
    _load()
    if name not in _ENGINES:
        raise EngineError(f"--engine {name!r}: unknown engine; known: {', '.join(sorted(_ENGINES))}")
    if workers is not None and workers < 1:
        raise EngineError(f"--workers {workers}: expected an integer >= 1")
    return _ENGINES[name](workers=workers, address=address)


__all__ = ["Engine", "Outcome", "EngineError", "register_engine", "make_engine", "engine_names"]
