"""Where a schedule's batches run and which KV they move (docs/semantics.md section 6,
"Clusters").

A :class:`Placement` is the cluster part of a :class:`~optsched.schedule.Schedule`: the engine
of each batch and the transfers each batch lists, columnar like the schedule itself. A
schedule without one (``Schedule.placement is None``) runs every batch on the instance's first
engine and moves no KV: exactly the single-engine schedule of sections 3-4. In JSON the
placement is two optional keys of a batch::

    {"entries": [["a", 512]], "engine": "p0", "transfer": [["a", "d0"]]}

(this batch runs on engine ``p0``; after it, request ``a``'s KV moves to engine ``d0``). In a
``.npz`` file it is the arrays ``engines``, ``batch_engine``, ``transfer_ptr``, ``transfer_req``
and ``transfer_to``, present only when the schedule names engines or moves KV. Engine names are
kept as written (like request ids): the evaluator matches them with the instance's engines
and reports an undeclared one (``UNKNOWN_ENGINE``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import ScheduleFormatError

#: the arrays of a placement, as stored in a ``.npz`` schedule (``engines`` is the name table)
NPZ_ARRAYS = ("engines", "batch_engine", "transfer_ptr", "transfer_req", "transfer_to")


def _int_column(name: str, a: Any) -> np.ndarray:
    arr = np.asarray(a)
    if arr.ndim != 1:
        raise ScheduleFormatError(f"schedule: {name} must be one-dimensional")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.number) or not np.all(np.isfinite(arr)) \
                or not np.all(arr == np.round(arr)):
            raise ScheduleFormatError(f"schedule: {name} must hold integers")
    out = np.ascontiguousarray(arr, dtype=np.int64)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class Placement:
    """Engine per batch and transfers per batch (semantics section 6, "Clusters").

    ``batch_engine[j]`` is a position in ``engines`` (the schedule's own table of engine
    names) or ``-1`` for a batch that names no engine (it runs on the instance's first
    engine). Transfer ``k`` of batch ``j`` (``transfer_ptr[j] <= k < transfer_ptr[j + 1]``)
    moves request ``transfer_req[k]`` (a position in the schedule's ``ids``) to engine
    ``transfer_to[k]`` (a position in ``engines``)."""

    engines: tuple[str, ...]
    batch_engine: np.ndarray
    transfer_ptr: np.ndarray
    transfer_req: np.ndarray
    transfer_to: np.ndarray

    def __post_init__(self):
        names = tuple(self.engines)
        if not all(isinstance(e, str) and e for e in names):
            raise ScheduleFormatError("schedule: engine names must be non-empty strings")
        if len(set(names)) != len(names):
            raise ScheduleFormatError("schedule: the engine table names an engine twice")
        object.__setattr__(self, "engines", names)
        for name in ("batch_engine", "transfer_ptr", "transfer_req", "transfer_to"):
            object.__setattr__(self, name, _int_column(name, getattr(self, name)))
        be = self.batch_engine
        if be.size and (be.min() < -1 or be.max() >= len(names)):
            raise ScheduleFormatError("schedule: batch_engine refers outside the engine table")
        to = self.transfer_to
        if to.size and (to.min() < 0 or to.max() >= len(names)):
            raise ScheduleFormatError("schedule: transfer_to refers outside the engine table")
        if self.transfer_req.size != to.size:
            raise ScheduleFormatError("schedule: transfer_req and transfer_to differ in length")

    def check(self, n_batches: int, n_ids: int) -> None:
        """The placement fits a schedule of ``n_batches`` batches and ``n_ids`` request ids
        (:class:`~optsched.errors.ScheduleFormatError` otherwise)."""
        if self.batch_engine.size != n_batches:
            raise ScheduleFormatError(f"schedule: batch_engine must have n_batches = "
                                      f"{n_batches} items")
        ptr = self.transfer_ptr
        if ptr.size != n_batches + 1 or ptr[0] != 0 or ptr[-1] != self.transfer_req.size \
                or np.any(np.diff(ptr) < 0):
            raise ScheduleFormatError("schedule: transfer_ptr is not a valid offset array")
        r = self.transfer_req
        if r.size and (r.min() < 0 or r.max() >= n_ids):
            raise ScheduleFormatError("schedule: transfer_req refers outside the id table")

    # -- views ----------------------------------------------------------------------------
    @property
    def n_transfers(self) -> int:
        return int(self.transfer_req.size)

    @property
    def batch_of_transfer(self) -> np.ndarray:
        return np.repeat(np.arange(self.batch_engine.size), np.diff(self.transfer_ptr))

    def engine_name(self, j: int) -> str | None:
        """The engine batch ``j`` names (None: the instance's first engine)."""
        k = int(self.batch_engine[j])
        return None if k < 0 else self.engines[k]

    def transfers(self, j: int, ids: Sequence[str]) -> list[tuple[str, str]]:
        """Batch ``j``'s transfers as ``(request id, destination engine)`` pairs."""
        a, b = self.transfer_ptr[j], self.transfer_ptr[j + 1]
        return [(ids[r], self.engines[d]) for r, d in zip(self.transfer_req[a:b].tolist(),
                                                          self.transfer_to[a:b].tolist())]

    def canonical(self, ids: Sequence[str]) -> tuple:
        """Hashable content: each batch's engine name and its sorted transfers."""
        return tuple((self.engine_name(j), tuple(sorted(self.transfers(j, ids))))
                     for j in range(self.batch_engine.size))

    def arrays(self) -> dict[str, np.ndarray]:
        """The ``.npz`` arrays (:data:`NPZ_ARRAYS`)."""
        return {"engines": np.array(self.engines, dtype=str), "batch_engine": self.batch_engine,
                "transfer_ptr": self.transfer_ptr, "transfer_req": self.transfer_req,
                "transfer_to": self.transfer_to}

    @classmethod
    def from_arrays(cls, z: Any) -> Placement:
        """From the arrays of a ``.npz`` schedule (all of :data:`NPZ_ARRAYS`)."""
        return cls(tuple(np.asarray(z["engines"]).tolist()), z["batch_engine"],
                   z["transfer_ptr"], z["transfer_req"], z["transfer_to"])


class PlacementBuilder:
    """Collects the engine and transfers of each batch in turn (the simulators and the JSON
    reader); ``build(ids)`` returns the placement and the id table extended by requests that
    only a transfer names."""

    def __init__(self, engines: Sequence[str] = ()):
        self._names: list[str] = list(engines)
        self._pos = {e: k for k, e in enumerate(self._names)}
        self._batch: list[int] = []
        self._ptr: list[int] = [0]
        self._req: list[str | int] = []
        self._to: list[int] = []

    def _engine(self, name: Any, j: int, what: str) -> int:
        if not isinstance(name, str) or not name:
            raise ScheduleFormatError(f"batch {j}: {what} must be an engine id (a non-empty "
                                      f"string), got {name!r}")
        k = self._pos.get(name)
        if k is None:
            k = self._pos[name] = len(self._names)
            self._names.append(name)
        return k

    def add(self, engine: Any, transfers: Any, j: int) -> None:
        """Batch ``j``'s engine name (None: the first engine) and ``[request id, engine]``
        transfer pairs."""
        self._batch.append(-1 if engine is None else self._engine(engine, j, "'engine'"))
        if not isinstance(transfers, (list, tuple)):
            raise ScheduleFormatError(f"batch {j}: 'transfer' must be a list of [request id, "
                                      f"engine id] pairs, got {transfers!r}")
        for t in transfers:
            if not isinstance(t, (list, tuple)) or len(t) != 2:
                raise ScheduleFormatError(f"batch {j}: 'transfer' must be a list of [request id, "
                                          f"engine id] pairs, got {t!r}")
            rid, dest = t
            if isinstance(rid, (int, np.integer)) and not isinstance(rid, bool):
                rid = str(rid)
            if not isinstance(rid, str):
                raise ScheduleFormatError(f"batch {j}: transfer: request id must be a string, "
                                          f"got {rid!r}")
            self._req.append(rid)
            self._to.append(self._engine(dest, j, "a transfer's destination"))
        self._ptr.append(len(self._req))

    def add_indexed(self, engine: int, req: Sequence[int] = (), to: Sequence[int] = ()) -> None:
        """Fast path: engine and destinations are positions in the names given at init,
        requests positions in the schedule's id table."""
        self._batch.append(engine)
        self._req.extend(req)
        self._to.extend(to)
        self._ptr.append(len(self._req))

    @property
    def empty(self) -> bool:
        """Whether no batch names an engine and none moves KV (no placement needed)."""
        return not self._req and all(k < 0 for k in self._batch)

    def build(self, ids: Sequence[str]) -> tuple[Placement, tuple[str, ...]]:
        table = list(ids)
        pos = {r: k for k, r in enumerate(table)}
        req = []
        for r in self._req:
            if isinstance(r, str):
                k = pos.get(r)
                if k is None:
                    k = pos[r] = len(table)
                    table.append(r)
                req.append(k)
            else:
                req.append(int(r))
        placement = Placement(tuple(self._names), np.array(self._batch, np.int64),
                              np.array(self._ptr, np.int64), np.array(req, np.int64),
                              np.array(self._to, np.int64))
        return placement, tuple(table)


__all__ = ["NPZ_ARRAYS", "Placement", "PlacementBuilder"]
