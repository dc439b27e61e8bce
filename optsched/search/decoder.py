"""Key decoders: the contract, and the one registry the key search and LNS share.

A *key decoder* turns a priority key -- one number per request, smallest first (ties by
arrival, then instance order, as the policies rank) -- into a whole schedule of one instance.
Its schedules are judged like any other by :func:`optsched.evaluate`, so a decoder
only has to build feasible schedules; how good they are is the search's business.

* :class:`Decoder`: bound to one instance, ``decode(key)`` is the schedule (or None when it
  gives up on that key, e.g. a compiled kernel's stall);
* :class:`ResumableDecoder`: also ``resume(key, prefix, j0, deadline)``, the schedule that
  replays ``prefix``'s first ``j0`` batches and decodes from the state they leave (LNS's
  time-window moves, :class:`optsched.search.lns_decode.Resume`).

A decoder class registers a :class:`DecoderSpec` with :func:`register_decoder` into
:data:`DECODERS`: its name, how to build it for an instance, for which objectives the key
search (:func:`optsched.search.keysearch.key_search`) and LNS's priority phase
(:func:`optsched.search.lns.improve`) try it by default, and its ``rank`` (they try their
decoders in rank order). A new decoder is one new module in ``optsched/search/``: tried
(:func:`default_decoders`), listed (``DECODERS.names()``) and validity-tested
(``tests/search/test_every_decoder.py``: feasible, deterministic, resumable where declared).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..errors import OptschedError
from ..instance import Instance
from ..objectives import OBJECTIVES
from ..plugins import Registry, describe_object
from ..schedule import Schedule


class DecoderError(OptschedError):
    """A decoder that cannot decode this instance (no compiled kernel for its cost model, no
    numba, ...) or an unknown decoder name."""


class Decoder(Protocol):
    """A key decoder bound to one instance (module docstring)."""

    def decode(self, key: np.ndarray) -> Schedule | None:
        """The schedule ``key`` decodes to, or None when the decoder gives up on it."""
        ...


class ResumableDecoder(Decoder, Protocol):
    """A decoder that can take over after a replayed prefix (module docstring)."""

    def resume(self, key: np.ndarray, prefix: Schedule | None, j0: int,
               deadline: float | None) -> Schedule:
        """The schedule after ``prefix``'s first ``j0`` batches (the whole decode when
        ``prefix`` is None or ``j0 <= 0``); past ``deadline`` (a ``time.perf_counter()``
        value) the simulator raises ``SimulationTimeout``."""
        ...


#: the searches that try decoders by default
SEARCHES = ("key", "lns")


@dataclass(frozen=True)
class DecoderSpec:
    """A registered decoder. ``make(instance, name)`` builds it (raising
    :class:`DecoderError` when it cannot decode that instance); ``resumable(instance,
    name)``, when given, builds its :class:`ResumableDecoder` form (the one LNS runs).
    ``key_search`` / ``lns``: the objectives for which that search tries it by default;
    ``rank``: the order they try their decoders in (ties by name)."""

    name: str
    description: str
    make: Callable[[Instance, str], Decoder]
    resumable: Callable[[Instance, str], ResumableDecoder] | None = None
    key_search: tuple[str, ...] = ()
    lns: tuple[str, ...] = ()
    rank: int = 1000

    def __post_init__(self) -> None:
        for field in ("key_search", "lns"):
            unknown = [o for o in getattr(self, field) if o not in OBJECTIVES]
            if unknown:
                raise DecoderError(f"decoder {self.name!r}: {field} objectives must be some "
                                   f"of {', '.join(OBJECTIVES)}, got {unknown!r}")
        if self.lns and self.resumable is None:
            raise DecoderError(f"decoder {self.name!r}: LNS tries only resumable decoders")
        if isinstance(self.rank, bool) or not isinstance(self.rank, int):
            raise DecoderError(f"decoder {self.name!r}: rank must be an integer, "
                               f"got {self.rank!r}")

    def tried_by(self, search: str) -> tuple[str, ...]:
        """The objectives for which ``search`` (``"key"`` or ``"lns"``) tries it by default."""
        if search not in SEARCHES:
            raise DecoderError(f"unknown search {search!r}; choose one of {', '.join(SEARCHES)}")
        return self.key_search if search == "key" else self.lns


def _adapt(label: str, obj: Any) -> DecoderSpec:
    """A decoder loaded from ``file.py:Name`` / an entry point: a :class:`DecoderSpec`, or a
    class built as ``Name(instance, name)`` (tried by no search unless named)."""
    if isinstance(obj, DecoderSpec):
        return obj
    if not callable(obj):
        raise DecoderError(f"{label}: not a decoder (a DecoderSpec or a class taking "
                           "(instance, name))")
    return DecoderSpec(label, describe_object(obj) or f"user decoder {label}", obj)


#: every key decoder: the modules of ``optsched.search`` register theirs on import; installed
#: distributions add theirs through the ``optsched.decoders`` entry-point group
DECODERS: Registry[DecoderSpec] = Registry(
    "key decoder", packages=("optsched.search",), group="optsched.decoders",
    error=DecoderError, adapt=_adapt,
)


def register_decoder(name: str, description: str, *, rank: int,
                     key_search: tuple[str, ...] = (), lns: tuple[str, ...] = (),
                     resumable: Callable[[Instance, str], ResumableDecoder] | None = None):
    """Decorator: ``@register_decoder("mine", "...", rank=40, key_search=("total-latency",))``
    on a decoder class (built as ``Class(instance, name)``) registers it in
    :data:`DECODERS` (:class:`DecoderSpec`); ``resumable``: its resumable form, when it has
    one (the class itself, if it implements :class:`ResumableDecoder`)."""

    def deco(make: Callable[[Instance, str], Decoder]) -> Any:
        DECODERS.add(name, DecoderSpec(name, description, make, resumable, tuple(key_search),
                                       tuple(lns), rank))
        return make

    return deco


def get_decoder(name: str) -> DecoderSpec:
    """The decoder registered as ``name`` (or a ``file.py:Name`` reference)."""
    return DECODERS.get(name)


def default_decoders(objective: str, search: str) -> tuple[str, ...]:
    """The decoders ``search`` (``"key"``: the key search, ``"lns"``: LNS's priority phase)
    tries for ``objective`` when none are named, in rank order."""
    specs = [s for s in DECODERS.entries() if objective in s.tried_by(search)]
    return tuple(s.name for s in sorted(specs, key=lambda s: (s.rank, s.name)))


def resumable_decoders() -> tuple[str, ...]:
    """The registered decoders that can resume after a prefix, in rank order."""
    specs = [s for s in DECODERS.entries() if s.resumable is not None]
    return tuple(s.name for s in sorted(specs, key=lambda s: (s.rank, s.name)))


__all__ = ["DECODERS", "Decoder", "DecoderError", "DecoderSpec", "ResumableDecoder",
           "SEARCHES", "default_decoders", "get_decoder", "register_decoder",
           "resumable_decoders"]
