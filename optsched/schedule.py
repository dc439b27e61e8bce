"""Schedules: batches of entries ``(request id, tokens)``, evictions, optional starts.

Storage is columnar (CSR-like numpy arrays), so a schedule with millions of
entries costs a few arrays. A schedule knows nothing about feasibility; that is
:func:`optsched.evaluate`'s job. Constructing one only checks its
*format* (array shapes, pointer monotonicity) and raises
:class:`~optsched.errors.ScheduleFormatError` when it is malformed.

File formats: JSON for small schedules (the contract below), ``.npz`` for large::

    {"batches": [{"entries": [["a", 4], ["b", 4]], "evict": ["c"], "start": 0.0,
                  "swap_out": [["d", 16]], "swap_in": ["e"]}]}

An entry may state its cache type as a third element, ``["a", 4, "hidden"]`` (or ``"kv"``, the
default): the request holds its cache as hidden states (docs/semantics.md, "Hidden cache");
a schedule without hidden entries stores an all-false ``entry_hidden`` and its JSON and
``.npz`` are unchanged. Prefix reuse (docs/semantics.md section 6, "Prefix reuse") adds two
optional batch keys: ``"hits": [["a", 1024]]`` (the entry of ``a`` in this batch starts with a
hit of 1,024 tokens; stored per entry in ``entry_hit``, 0 = none) and ``"drop": [17, 18]``
(resident blocks dropped by the batch; ``drop_ptr``/``drop_block``). A schedule without hits
or drops stores zeros and empty arrays and its JSON and ``.npz`` are unchanged.
``evict``, ``start``, ``swap_out`` and ``swap_in`` are optional; a missing ``start``
means "as early as possible" (semantics section 4) and is stored as NaN. ``swap_out``
moves ``tokens`` of a request's cached KV to host memory and ``swap_in`` brings all of
a request's host KV back (docs/semantics.md, "Swap preemption"); a schedule without
swaps stores empty swap arrays and its JSON has no swap keys. The ``.npz`` file holds
the swap arrays only when the schedule swaps, so older files load unchanged. Its integer
arrays are stored in the smallest unsigned type that holds them and deflated at level 1
(fast to write and read; loading widens them back to int64), and files written with
``np.savez_compressed`` of int64 arrays load the same.
"""

from __future__ import annotations

import dataclasses
import json
import math
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from . import jsonio
from .errors import InputFileError, ScheduleFormatError
from .placement import NPZ_ARRAYS as _PLACEMENT_ARRAYS
from .placement import Placement, PlacementBuilder

if TYPE_CHECKING:
    from .instance import Instance

#: largest token count an entry may carry: far above any real batch, and sums of many such
#: counts stay inside int64 in the evaluator
_MAX_TOKENS = 2**40


class Batch(NamedTuple):
    """One batch as plain Python values (a view; the schedule stores arrays)."""

    entries: list[tuple[str, int]]
    evict: list[str]
    start: float | None = None
    swap_out: Sequence[tuple[str, int]] = ()
    swap_in: Sequence[str] = ()
    #: ids of the entries whose request holds hidden cache (the others are KV)
    hidden: Sequence[str] = ()
    #: ``(request id, hit tokens)`` of the entries that start with a prefix hit
    hits: Sequence[tuple[str, int]] = ()
    #: block ids dropped by the batch (prefix reuse)
    drop: Sequence[int] = ()


#: cache type names of an entry's optional third element (semantics: hidden cache)
CACHE_TYPES = ("kv", "hidden")

#: the default of the swap arrays: replaced by empty arrays of the schedule's shape
_NO_SWAPS: np.ndarray = np.zeros(0, np.int64)


def _no_swaps() -> np.ndarray:
    return _NO_SWAPS


_SWAP_ARRAYS = ("swap_out_ptr", "swap_out_req", "swap_out_tokens", "swap_in_ptr", "swap_in_req")
#: block ids are integers in 0 .. 2^62 - 1 (optsched.prefix.MAX_BLOCK_ID)
_MAX_BLOCK_ID = 2**62


@dataclass(frozen=True, eq=False)
class Schedule:
    """Columnar schedule. Entry ``k`` of batch ``j`` is at ``batch_ptr[j] <= k < batch_ptr[j+1]``."""

    ids: tuple[str, ...]
    batch_ptr: np.ndarray
    entry_req: np.ndarray
    entry_tokens: np.ndarray
    evict_ptr: np.ndarray
    evict_req: np.ndarray
    start: np.ndarray
    # swap preemption (optional; not given = no swaps): swap-outs (request, tokens) and swap-ins
    swap_out_ptr: np.ndarray = field(default_factory=_no_swaps)
    swap_out_req: np.ndarray = field(default_factory=_no_swaps)
    swap_out_tokens: np.ndarray = field(default_factory=_no_swaps)
    swap_in_ptr: np.ndarray = field(default_factory=_no_swaps)
    swap_in_req: np.ndarray = field(default_factory=_no_swaps)
    # hidden cache (optional; not given = every entry on KV cache): per entry
    entry_hidden: np.ndarray = field(default_factory=_no_swaps)
    #: ``(instance name, instance content hash)`` from the file this schedule was loaded
    #: from (None: not loaded, or a file that names no instance); see :func:`instance_check`
    instance_tag: tuple[str, str] | None = field(default=None, compare=False)
    #: engine per batch and transfers (docs/semantics.md section 6, "Clusters"); None: every
    #: batch on the instance's first engine, no KV moved
    placement: Placement | None = None
    # prefix reuse (optional; not given = no hits, no drops): hit tokens per entry, and the
    # block ids each batch drops
    entry_hit: np.ndarray = field(default_factory=_no_swaps)
    drop_ptr: np.ndarray = field(default_factory=_no_swaps)
    drop_block: np.ndarray = field(default_factory=_no_swaps)

    def __post_init__(self):
        ids = tuple(self.ids)
        object.__setattr__(self, "ids", ids)
        nb0 = np.asarray(self.start).size
        if self.entry_hidden is _NO_SWAPS or self.entry_hidden is None:
            object.__setattr__(self, "entry_hidden", np.zeros(np.asarray(self.entry_req).size, bool))
        if self.entry_hit is _NO_SWAPS or self.entry_hit is None:
            object.__setattr__(self, "entry_hit", np.zeros(np.asarray(self.entry_req).size, np.int64))
        for name in _SWAP_ARRAYS + ("drop_ptr", "drop_block"):
            if getattr(self, name) is _NO_SWAPS or getattr(self, name) is None:
                empty = np.zeros(nb0 + 1 if name.endswith("_ptr") else 0, np.int64)
                object.__setattr__(self, name, empty)
        conv = {
            "batch_ptr": np.int64,
            "entry_req": np.int64,
            "entry_tokens": np.int64,
            "evict_ptr": np.int64,
            "evict_req": np.int64,
            "start": np.float64,
            **{name: np.int64 for name in _SWAP_ARRAYS},
            "entry_hit": np.int64,
            "drop_ptr": np.int64,
            "drop_block": np.int64,
        }
        for name, dt in conv.items():
            a = np.asarray(getattr(self, name))
            if a.ndim != 1:
                raise ScheduleFormatError(f"schedule: {name} must be one-dimensional")
            if a.size and not (np.issubdtype(a.dtype, np.number) or a.dtype == bool):
                raise ScheduleFormatError(f"schedule: {name} must hold numbers, got {a.dtype} data")
            if dt is np.int64 and a.size and not np.issubdtype(a.dtype, np.integer):
                if not np.all(np.isfinite(a)) or not np.all(a == np.round(a)):
                    raise ScheduleFormatError(f"schedule: {name} must hold integers")
            a = np.ascontiguousarray(a, dtype=dt)
            a.setflags(write=False)
            object.__setattr__(self, name, a)
        nb = self.start.size
        for ptr_name, arr_name in (("batch_ptr", "entry_req"), ("evict_ptr", "evict_req"),
                                   ("swap_out_ptr", "swap_out_req"), ("swap_in_ptr", "swap_in_req"),
                                   ("drop_ptr", "drop_block")):
            ptr = getattr(self, ptr_name)
            if ptr.size != nb + 1:
                raise ScheduleFormatError(f"schedule: {ptr_name} must have n_batches + 1 = {nb + 1} items")
            if ptr[0] != 0 or ptr[-1] != getattr(self, arr_name).size or np.any(np.diff(ptr) < 0):
                raise ScheduleFormatError(f"schedule: {ptr_name} is not a valid offset array")
        if self.entry_tokens.size != self.entry_req.size:
            raise ScheduleFormatError("schedule: entry_tokens and entry_req differ in length")
        h = np.asarray(self.entry_hidden)
        if h.ndim != 1 or h.size != self.entry_req.size:
            raise ScheduleFormatError("schedule: entry_hidden and entry_req differ in length")
        if h.size and not (h.dtype == bool or np.isin(h, (0, 1)).all()):
            raise ScheduleFormatError("schedule: entry_hidden must hold booleans")
        h = np.ascontiguousarray(h, dtype=bool)
        h.setflags(write=False)
        object.__setattr__(self, "entry_hidden", h)
        if self.swap_out_tokens.size != self.swap_out_req.size:
            raise ScheduleFormatError("schedule: swap_out_tokens and swap_out_req differ in length")
        if self.entry_hit.size != self.entry_req.size:
            raise ScheduleFormatError("schedule: entry_hit and entry_req differ in length")
        if self.entry_hit.size and (self.entry_hit.min() < 0 or self.entry_hit.max() > _MAX_TOKENS):
            raise ScheduleFormatError(f"schedule: entry_hit must hold token counts in 0..{_MAX_TOKENS}")
        if self.drop_block.size and (self.drop_block.min() < 0
                                     or self.drop_block.max() >= _MAX_BLOCK_ID):
            raise ScheduleFormatError("schedule: drop_block must hold block ids in 0..2^62-1")
        for arr_name in ("entry_req", "evict_req", "swap_out_req", "swap_in_req"):
            a = getattr(self, arr_name)
            if a.size and (a.min() < 0 or a.max() >= len(ids)):
                raise ScheduleFormatError(f"schedule: {arr_name} refers outside the id table")
        if self.placement is not None:
            if not isinstance(self.placement, Placement):
                raise ScheduleFormatError("schedule: placement must be a Placement")
            self.placement.check(nb, len(ids))

    # -- sizes & views ----------------------------------------------------------
    @property
    def n_batches(self) -> int:
        return int(self.start.size)

    @property
    def n_entries(self) -> int:
        return int(self.entry_req.size)

    def __len__(self) -> int:
        return self.n_batches

    @property
    def batch_of_entry(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_batches), np.diff(self.batch_ptr))

    @property
    def batch_of_evict(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_batches), np.diff(self.evict_ptr))

    @property
    def batch_of_swap_out(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_batches), np.diff(self.swap_out_ptr))

    @property
    def batch_of_swap_in(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_batches), np.diff(self.swap_in_ptr))

    @property
    def has_hidden(self) -> bool:
        """Whether any entry uses hidden cache (semantics: hidden cache)."""
        return bool(self.entry_hidden.any())

    @property
    def has_hits(self) -> bool:
        """Whether some entry starts with a prefix hit (semantics: prefix reuse)."""
        return bool(self.entry_hit.any())

    @property
    def has_drops(self) -> bool:
        """Whether some batch drops resident blocks (semantics: prefix reuse)."""
        return self.drop_block.size > 0

    @property
    def batch_of_drop(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_batches), np.diff(self.drop_ptr))

    @property
    def has_swaps(self) -> bool:
        """Whether any batch swaps KV out or in (semantics: swap preemption)."""
        return self.swap_out_req.size > 0 or self.swap_in_req.size > 0

    def batch(self, j: int) -> Batch:
        if not -self.n_batches <= j < self.n_batches:
            raise IndexError(f"batch {j} out of range (schedule has {self.n_batches})")
        j %= self.n_batches
        a, b = self.batch_ptr[j], self.batch_ptr[j + 1]
        ea, eb = self.evict_ptr[j], self.evict_ptr[j + 1]
        s = self.start[j]
        oa, ob = self.swap_out_ptr[j], self.swap_out_ptr[j + 1]
        ia, ib = self.swap_in_ptr[j], self.swap_in_ptr[j + 1]
        hk = np.flatnonzero(self.entry_hit[a:b]) + a
        return Batch(
            [(self.ids[r], int(c)) for r, c in zip(self.entry_req[a:b], self.entry_tokens[a:b])],
            [self.ids[r] for r in self.evict_req[ea:eb]],
            None if math.isnan(s) else float(s),
            [(self.ids[r], int(c)) for r, c in zip(self.swap_out_req[oa:ob],
                                                    self.swap_out_tokens[oa:ob])],
            [self.ids[r] for r in self.swap_in_req[ia:ib]],
            [self.ids[r] for r in self.entry_req[a:b][self.entry_hidden[a:b]]],
            [(self.ids[r], int(h)) for r, h in zip(self.entry_req[hk], self.entry_hit[hk])],
            self.drop_block[self.drop_ptr[j]:self.drop_ptr[j + 1]].tolist(),
        )

    def __iter__(self):
        return (self.batch(j) for j in range(self.n_batches))

    @property
    def has_evictions(self) -> bool:
        return self.evict_req.size > 0

    # -- construction -------------------------------------------------------------
    @classmethod
    def from_batches(cls, batches: Iterable[Batch | Sequence | dict]) -> Schedule:
        """Build from ``Batch`` tuples, ``(entries, evict[, start])`` or JSON-style dicts."""
        b = ScheduleBuilder()
        for j, item in enumerate(batches):
            swap_out: Any = ()
            swap_in: Any = ()
            hits: Any = ()
            drop: Any = ()
            if isinstance(item, dict):
                entries, evict, start, swap_out, swap_in, hits, drop = _parse_batch_dict(item, j)
            elif isinstance(item, Batch):
                entries, evict, start, swap_out, swap_in, hidden, hits, drop = item
                if hidden:
                    hid = set(hidden)
                    entries = [(r, c, "hidden") if r in hid else (r, c) for r, c in entries]
            else:
                if not isinstance(item, (list, tuple, Batch)):
                    raise ScheduleFormatError(
                        f"batch {j}: expected an object with 'entries' (and optional 'evict', "
                        f"'start'), got {item!r}")
                item = tuple(item)
                if len(item) not in (1, 2, 3):
                    raise ScheduleFormatError(f"batch {j}: expected (entries, evict[, start])")
                entries = item[0]
                evict = item[1] if len(item) > 1 else ()
                start = item[2] if len(item) > 2 else None
            b.add(entries, evict, start, swap_out, swap_in, hits, drop)
        return b.build()

    @classmethod
    def empty(cls) -> Schedule:
        return ScheduleBuilder().build()

    # -- equality -------------------------------------------------------------------
    def canonical(self) -> tuple:
        """Hashable content with entries and evictions sorted within each batch."""
        ids = np.array(self.ids, dtype=object)

        def per_batch(ptr, req, tok=None):
            out = []
            for j in range(self.n_batches):
                a, b = ptr[j], ptr[j + 1]
                names = ids[req[a:b]].tolist()
                if tok is None:
                    out.append(tuple(sorted(names)))
                else:
                    out.append(tuple(sorted(zip(names, tok[a:b].tolist()))))
            return tuple(out)

        starts = tuple(None if math.isnan(s) else float(s) for s in self.start)
        out: tuple[Any, ...] = (
            per_batch(self.batch_ptr, self.entry_req, self.entry_tokens),
            per_batch(self.evict_ptr, self.evict_req),
            starts,
        )
        if self.has_swaps:
            out += (per_batch(self.swap_out_ptr, self.swap_out_req, self.swap_out_tokens),
                    per_batch(self.swap_in_ptr, self.swap_in_req))
        if self.has_hidden:
            hid = np.flatnonzero(self.entry_hidden)
            out += (("hidden",) + tuple(sorted(zip(self.batch_of_entry[hid].tolist(),
                                                   ids[self.entry_req[hid]].tolist()))),)
        if self.placement is not None:
            out += (("placement",) + self.placement.canonical(self.ids),)
        if self.has_hits:
            hk = np.flatnonzero(self.entry_hit)
            out += (("hits",) + tuple(sorted(zip(self.batch_of_entry[hk].tolist(),
                                                 ids[self.entry_req[hk]].tolist(),
                                                 self.entry_hit[hk].tolist()))),)
        if self.has_drops:
            out += (("drop",) + tuple(tuple(sorted(self.drop_block[a:b].tolist()))
                                      for a, b in zip(self.drop_ptr[:-1], self.drop_ptr[1:])),)
        return out

    def __eq__(self, other):
        if not isinstance(other, Schedule):
            return NotImplemented
        if self.n_batches != other.n_batches or self.n_entries != other.n_entries:
            return False
        return self.canonical() == other.canonical()

    __hash__ = None  # type: ignore[assignment]

    def without_starts(self) -> Schedule:
        """The same batches with every start left to "as early as possible"."""
        return self.replace_starts(np.full(self.n_batches, np.nan))

    def replace_starts(self, start) -> Schedule:
        return Schedule(
            self.ids, self.batch_ptr, self.entry_req, self.entry_tokens,
            self.evict_ptr, self.evict_req, np.asarray(start, dtype=np.float64),
            self.swap_out_ptr, self.swap_out_req, self.swap_out_tokens, self.swap_in_ptr,
            self.swap_in_req, self.entry_hidden, placement=self.placement,
            entry_hit=self.entry_hit, drop_ptr=self.drop_ptr, drop_block=self.drop_block,
        )

    def with_placement(self, placement: Placement | None, ids: Sequence[str] | None = None
                       ) -> Schedule:
        """The same batches on ``placement``'s engines (semantics section 6, "Clusters");
        ``ids`` extends the id table (requests only a transfer names, ``PlacementBuilder``)."""
        return dataclasses.replace(self, ids=tuple(ids) if ids is not None else self.ids,
                                   placement=placement)

    # -- JSON / npz -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out = []
        for b in self:
            hid = set(b.hidden)
            d: dict[str, Any] = {"entries": [[r, c, "hidden"] if r in hid else [r, c]
                                             for r, c in b.entries]}
            if b.evict:
                d["evict"] = b.evict
            if b.start is not None:
                d["start"] = b.start
            if b.swap_out:
                d["swap_out"] = [[r, c] for r, c in b.swap_out]
            if b.swap_in:
                d["swap_in"] = list(b.swap_in)
            if b.hits:
                d["hits"] = [[r, h] for r, h in b.hits]
            if b.drop:
                d["drop"] = list(b.drop)
            out.append(d)
        if self.placement is not None:  # section 6, clusters: engine and transfers per batch
            pl = self.placement
            for j, d in enumerate(out):
                name = pl.engine_name(j)
                if name is not None:
                    d["engine"] = name
                moves = pl.transfers(j, self.ids)
                if moves:
                    d["transfer"] = [[r, e] for r, e in moves]
        return {"batches": out}

    def to_json(self, indent: int | None = None, instance: Instance | None = None) -> str:
        """JSON text; with ``instance``, a ``meta`` object names it and its content hash."""
        d = self.to_dict()
        if instance is not None:
            d["meta"] = {"instance": instance.name, "instance_hash": instance.content_hash}
        return json.dumps(d, indent=indent)

    @classmethod
    def from_dict(cls, d: Any) -> Schedule:
        if not isinstance(d, dict) or "batches" not in d:
            raise ScheduleFormatError("schedule: expected an object with a 'batches' list")
        extra = set(d) - {"batches", "meta"}
        if extra:
            raise ScheduleFormatError(f"schedule: unknown fields {sorted(extra)}")
        if not isinstance(d["batches"], list):
            raise ScheduleFormatError("schedule: 'batches' must be a list")
        batches, placed = _split_placement(d["batches"])
        sched = cls.from_batches(batches)
        if placed is not None:
            placement, ids = placed.build(sched.ids)
            sched = sched.with_placement(placement, ids)
        tag = _parse_meta(d.get("meta"))
        return sched if tag is None else dataclasses.replace(sched, instance_tag=tag)

    def save(self, path: str | Path, instance: Instance | None = None) -> None:
        """Write ``.npz`` (columnar) or JSON, chosen by the file suffix; with ``instance``,
        the file names it and carries its content hash (:func:`instance_check`)."""
        p = Path(path)
        if p.suffix == ".npz":
            arrays: dict[str, np.ndarray] = {
                "ids": np.array(self.ids, dtype=str), "batch_ptr": self.batch_ptr,
                "entry_req": self.entry_req, "entry_tokens": self.entry_tokens,
                "evict_ptr": self.evict_ptr, "evict_req": self.evict_req, "start": self.start}
            if self.has_swaps:
                arrays.update({name: getattr(self, name) for name in _SWAP_ARRAYS})
            if self.has_hidden:
                arrays["entry_hidden"] = self.entry_hidden
            if self.placement is not None:
                arrays.update(self.placement.arrays())
            if self.has_hits:
                arrays["entry_hit"] = self.entry_hit
            if self.has_drops:
                arrays["drop_ptr"] = self.drop_ptr
                arrays["drop_block"] = self.drop_block
            if instance is not None:
                arrays["meta_instance"] = np.array([instance.name, instance.content_hash], dtype=str)
            _write_npz(p, arrays)
        else:
            p.write_text(self.to_json(instance=instance))

    @classmethod
    def load(cls, path: str | Path) -> Schedule:
        p = Path(path)
        try:
            if p.suffix == ".npz":
                with np.load(p, allow_pickle=False) as z:
                    missing = {"ids", "batch_ptr", "entry_req", "entry_tokens", "evict_ptr",
                               "evict_req", "start"} - set(z.files)
                    if missing:
                        raise ScheduleFormatError(f"npz schedule lacks arrays {sorted(missing)}")
                    swaps = [name for name in _SWAP_ARRAYS if name in z.files]
                    if swaps and len(swaps) != len(_SWAP_ARRAYS):
                        raise ScheduleFormatError(
                            f"npz schedule has swap arrays {swaps} but lacks "
                            f"{sorted(set(_SWAP_ARRAYS) - set(swaps))}")
                    sw = [z[name] for name in swaps] if swaps else [_NO_SWAPS] * len(_SWAP_ARRAYS)
                    hidden = z["entry_hidden"] if "entry_hidden" in z.files else _NO_SWAPS
                    placed = [name for name in _PLACEMENT_ARRAYS if name in z.files]
                    if placed and len(placed) != len(_PLACEMENT_ARRAYS):
                        raise ScheduleFormatError(
                            f"npz schedule has placement arrays {placed} but lacks "
                            f"{sorted(set(_PLACEMENT_ARRAYS) - set(placed))}")
                    placement = Placement.from_arrays(z) if placed else None
                    if ("drop_ptr" in z.files) != ("drop_block" in z.files):
                        raise ScheduleFormatError("npz schedule has only one of the arrays "
                                                  "drop_ptr and drop_block")
                    reuse = {k: z[k] for k in ("entry_hit", "drop_ptr", "drop_block")
                             if k in z.files}
                    tag = None
                    if "meta_instance" in z.files:
                        meta = z["meta_instance"].tolist()
                        tag = _parse_meta({"instance": meta[0], "instance_hash": meta[1]}
                                          if isinstance(meta, list) and len(meta) == 2 else meta)
                    return cls(tuple(z["ids"].tolist()), z["batch_ptr"], z["entry_req"],
                               z["entry_tokens"], z["evict_ptr"], z["evict_req"], z["start"],
                               sw[0], sw[1], sw[2], sw[3], sw[4], hidden, tag,
                               placement=placement, **reuse)
            text = p.read_text(encoding="utf-8")
        except OSError as e:
            raise InputFileError(f"{p}: cannot read schedule file: {e.strerror or e}") from None
        except ScheduleFormatError as e:
            raise ScheduleFormatError(f"{p}: {e}") from None
        except UnicodeDecodeError as e:
            raise ScheduleFormatError(f"{p}: not a UTF-8 JSON schedule ({e.reason} at byte "
                                      f"{e.start})") from None
        except (ValueError, TypeError, EOFError, KeyError, zipfile.BadZipFile) as e:  # corrupt npz
            raise ScheduleFormatError(f"{p}: unreadable npz schedule: {e or type(e).__name__}") from None
        try:
            return cls.from_dict(jsonio.loads(text, ScheduleFormatError, "schedule"))
        except ScheduleFormatError as e:
            raise ScheduleFormatError(f"{p}: {e}") from None


def _narrow(a: np.ndarray) -> np.ndarray:
    """``a`` in the smallest unsigned integer type holding its values when they are integers
    >= 0 (request indices, token counts, offsets); other arrays unchanged. Loading widens them
    back to int64 (``Schedule.__post_init__``), so the values read are the values written."""
    if a.dtype.kind not in "iu" or not a.size or a.min() < 0:
        return a
    top = int(a.max())
    for dt in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dt).max:
            return a.astype(dt)
    return a


def _write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """An ``.npz`` that ``np.load`` reads like ``np.savez_compressed``'s, written fast:
    integer arrays narrowed (:func:`_narrow`) and deflated at level 1. For the 4.1M-entry
    vLLM schedule of the Azure conversation trace that is ~0.15 s and 0.5 MB against ~1.6 s
    and 0.6 MB for ``np.savez_compressed`` of the int64 arrays (benchmarks/simulate.py)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        for name, a in arrays.items():
            with zf.open(f"{name}.npy", "w", force_zip64=True) as fh:
                np.lib.format.write_array(fh, np.ascontiguousarray(_narrow(a)),
                                          allow_pickle=False)


def _parse_meta(meta: Any) -> tuple[str, str] | None:
    """The ``(instance name, content hash)`` of a schedule file's ``meta`` object (None when
    the file has none: files written before it, or by hand)."""
    if meta is None:
        return None
    if not isinstance(meta, dict) or set(meta) - {"instance", "instance_hash"}:
        raise ScheduleFormatError("schedule: 'meta' must be an object with 'instance' and "
                                  "'instance_hash'")
    name, digest = meta.get("instance"), meta.get("instance_hash")
    if not isinstance(name, str) or not isinstance(digest, str):
        raise ScheduleFormatError("schedule: meta 'instance' and 'instance_hash' must be strings")
    return name, digest


def instance_check(schedule: Schedule, instance: Instance) -> dict[str, Any]:
    """Whether ``schedule`` was written for ``instance``: its file's instance name and content
    hash (:attr:`Instance.content_hash`) against the instance's. ``matches`` is None when the
    file names no instance, False when the contents differ (a replay on another instance:
    metrics are the other instance's), True otherwise; ``message`` says it in words."""
    out: dict[str, Any] = {"matches": None, "instance": instance.name,
                           "instance_hash": instance.content_hash,
                           "schedule_instance": None, "schedule_instance_hash": None}
    if schedule.instance_tag is None:
        return {**out, "message": "the schedule file names no instance (no 'meta')"}
    name, digest = schedule.instance_tag
    out.update(schedule_instance=name, schedule_instance_hash=digest)
    if digest != instance.content_hash:
        return {**out, "matches": False,
                "message": f"instance {instance.name!r} differs from the one the schedule was "
                           f"written for ({name!r}: other limits, cost model or requests); "
                           "the metrics of this replay are not the ones it had"}
    renamed = f" (named {name!r} there)" if name != instance.name else ""
    return {**out, "matches": True,
            "message": f"the schedule was written for this instance{renamed}"}


def _split_placement(batches: list) -> tuple[list, PlacementBuilder | None]:
    """The batches without their ``engine`` and ``transfer`` keys, and those keys collected
    (None when no batch has either; semantics section 6, "Clusters")."""
    if not any(isinstance(b, dict) and ("engine" in b or "transfer" in b) for b in batches):
        return batches, None
    placed = PlacementBuilder()
    rest = []
    for j, b in enumerate(batches):
        if isinstance(b, dict):
            placed.add(b.get("engine"), b.get("transfer", ()), j)
            b = {k: v for k, v in b.items() if k not in ("engine", "transfer")}
        else:
            placed.add(None, (), j)
        rest.append(b)
    return rest, placed


def _parse_batch_dict(item: dict, j: int):
    extra = set(item) - {"entries", "evict", "start", "swap_out", "swap_in", "hits", "drop"}
    if extra:
        raise ScheduleFormatError(f"batch {j}: unknown fields {sorted(extra)}")
    if "entries" not in item:
        raise ScheduleFormatError(f"batch {j}: missing field 'entries'")
    return (item["entries"], item.get("evict", ()), item.get("start"), item.get("swap_out", ()),
            item.get("swap_in", ()), item.get("hits", ()), item.get("drop", ()))


class ScheduleBuilder:
    """Append batches cheaply; ``build()`` freezes them into a :class:`Schedule`.

    Simulators and decoders use this so they never touch the array layout.
    """

    def __init__(self, ids: Sequence[str] | None = None):
        self._ids: list[str] = list(ids) if ids is not None else []
        self._pos: dict[str, int] = {r: i for i, r in enumerate(self._ids)}
        self._req: list[int] = []
        self._tok: list[int] = []
        self._bptr: list[int] = [0]
        self._ev: list[int] = []
        self._eptr: list[int] = [0]
        self._start: list[float] = []
        self._so_req: list[int] = []
        self._so_tok: list[int] = []
        self._so_ptr: list[int] = [0]
        self._si_req: list[int] = []
        self._si_ptr: list[int] = [0]
        self._hid: list[bool] = []
        self._hit: list[int] = []  # per entry (prefix reuse)
        self._drop: list[int] = []
        self._dptr: list[int] = [0]

    def _id(self, rid, where: str) -> int:
        """The index of request id ``rid``; ``where`` (batch and field) names it in an error."""
        if not isinstance(rid, str):
            if isinstance(rid, (int, np.integer)) and not isinstance(rid, bool):
                rid = str(rid)
            else:
                raise ScheduleFormatError(f"{where}: request id must be a string, got {rid!r}")
        i = self._pos.get(rid)
        if i is None:
            i = self._pos[rid] = len(self._ids)
            self._ids.append(rid)
        return i

    def _pairs(self, pairs, j: int, field: str, req: list[int], tok: list[int],
               hid: list[bool] | None = None) -> None:
        start = len(req)
        try:
            for e in pairs:
                if hid is not None and isinstance(e, (list, tuple)) and len(e) == 3:
                    rid, c, kind = e
                    if kind not in CACHE_TYPES:
                        raise ScheduleFormatError(
                            f"batch {j}: entry for request {rid!r}: cache type must be one of "
                            f"{', '.join(CACHE_TYPES)}, got {kind!r}")
                    hid.append(kind == "hidden")
                else:
                    rid, c = e
                    if hid is not None:
                        hid.append(False)
                if isinstance(c, bool) or not isinstance(c, (int, np.integer)):
                    if isinstance(c, float) and c.is_integer():
                        c = int(c)
                    else:
                        raise ScheduleFormatError(
                            f"batch {j}: tokens for request {rid!r} must be an integer, got {c!r}"
                        )
                if not -_MAX_TOKENS <= int(c) <= _MAX_TOKENS:
                    raise ScheduleFormatError(
                        f"batch {j}: tokens for request {rid!r} out of range, got {c!r}")
                req.append(self._id(rid, f"batch {j}: {field!r} entry {len(req) - start}"))
                tok.append(int(c))
        except (TypeError, ValueError) as ex:
            if isinstance(ex, ScheduleFormatError):
                raise
            raise ScheduleFormatError(
                f"batch {j}: {field} must be [request id, tokens] pairs"
                + (" (or [request id, tokens, cache type])" if hid is not None else "")) from None

    def _names(self, names, j: int, field: str, out: list[int]) -> None:
        if not isinstance(names, (list, tuple, np.ndarray)):
            raise ScheduleFormatError(
                f"batch {j}: {field!r} must be a list of request ids, got {names!r}")
        for k, rid in enumerate(names):
            out.append(self._id(rid, f"batch {j}: {field!r} item {k}"))

    def add(self, entries, evict=(), start=None, swap_out=(), swap_in=(), hits=(),
            drop=()) -> None:
        j = len(self._start)
        n0 = len(self._req)
        self._pairs(entries, j, "entries", self._req, self._tok, self._hid)
        self._hits(hits, j, n0)
        self._drops(drop, j)
        self._names(evict, j, "evict", self._ev)
        if not isinstance(swap_out, (list, tuple)):
            raise ScheduleFormatError(
                f"batch {j}: 'swap_out' must be a list of [request id, tokens] pairs, got {swap_out!r}")
        self._pairs(swap_out, j, "swap_out", self._so_req, self._so_tok)
        self._names(swap_in, j, "swap_in", self._si_req)
        if start is None:
            self._start.append(math.nan)
        else:
            if isinstance(start, bool) or not isinstance(start, (int, float, np.integer, np.floating)) \
                    or not math.isfinite(start):
                raise ScheduleFormatError(f"batch {j}: 'start' must be a finite number, got {start!r}")
            self._start.append(float(start))
        self._close_batch()

    def _hits(self, hits, j: int, n0: int) -> None:
        """This batch's ``[request id, hit tokens]`` pairs onto its entries (from ``n0``)."""
        self._hit.extend([0] * (len(self._req) - n0))
        if not isinstance(hits, (list, tuple)):
            raise ScheduleFormatError(f"batch {j}: 'hits' must be a list of [request id, tokens] "
                                      f"pairs, got {hits!r}")
        if not hits:
            return
        req: list[int] = []
        tok: list[int] = []
        self._pairs(hits, j, "hits", req, tok)
        where = {}
        for k in range(len(self._req) - 1, n0 - 1, -1):  # the first entry of a request wins
            where[self._req[k]] = k
        seen: set[int] = set()
        for r, h in zip(req, tok):
            name = self._ids[r]
            if r not in where:
                raise ScheduleFormatError(f"batch {j}: hit for request {name!r}, which has no "
                                          "entry in the batch")
            if r in seen:
                raise ScheduleFormatError(f"batch {j}: two hits for request {name!r}")
            if h < 0:
                raise ScheduleFormatError(f"batch {j}: hit for request {name!r} must be >= 0 "
                                          f"tokens, got {h}")
            seen.add(r)
            self._hit[where[r]] = h

    def _drops(self, drop, j: int) -> None:
        if isinstance(drop, np.ndarray):
            drop = drop.tolist()
        if not isinstance(drop, (list, tuple)):
            raise ScheduleFormatError(f"batch {j}: 'drop' must be a list of block ids, got {drop!r}")
        for x in drop:
            if isinstance(x, bool) or not isinstance(x, (int, np.integer)) \
                    or not 0 <= x < _MAX_BLOCK_ID:
                raise ScheduleFormatError(f"batch {j}: 'drop': block id must be an integer in "
                                          f"0..2^62-1, got {x!r}")
            self._drop.append(int(x))

    def _close_batch(self) -> None:
        self._dptr.append(len(self._drop))
        self._bptr.append(len(self._req))
        self._eptr.append(len(self._ev))
        self._so_ptr.append(len(self._so_req))
        self._si_ptr.append(len(self._si_req))

    def add_indexed(self, req_idx, tokens, evict_idx=(), start=None, swap_out_idx=(),
                    swap_out_tokens=(), swap_in_idx=(), hidden=(), hits=(), drop=()) -> None:
        """Fast path: ``req_idx``/``evict_idx``/``swap_*_idx`` are positions in the ``ids``
        given at init; ``hidden`` and ``hits`` per entry (empty = all KV, no hits);
        ``drop`` block ids."""
        n_before = len(self._req)
        self._req.extend(req_idx)
        n_new = len(self._req) - n_before
        if len(hidden):
            self._hid.extend(bool(x) for x in hidden)
        else:
            self._hid.extend([False] * n_new)
        if len(hits):
            self._hit.extend(hits)
        else:
            self._hit.extend([0] * n_new)
        if len(drop):
            self._drop.extend(drop)
        self._tok.extend(tokens)
        self._ev.extend(evict_idx)
        self._so_req.extend(swap_out_idx)
        self._so_tok.extend(swap_out_tokens)
        self._si_req.extend(swap_in_idx)
        self._start.append(math.nan if start is None else float(start))
        self._close_batch()

    def __len__(self) -> int:
        return len(self._start)

    def build(self) -> Schedule:
        return Schedule(
            tuple(self._ids),
            np.array(self._bptr, dtype=np.int64),
            np.array(self._req, dtype=np.int64),
            np.array(self._tok, dtype=np.int64),
            np.array(self._eptr, dtype=np.int64),
            np.array(self._ev, dtype=np.int64),
            np.array(self._start, dtype=np.float64),
            np.array(self._so_ptr, dtype=np.int64),
            np.array(self._so_req, dtype=np.int64),
            np.array(self._so_tok, dtype=np.int64),
            np.array(self._si_ptr, dtype=np.int64),
            np.array(self._si_req, dtype=np.int64),
            entry_hidden=np.array(self._hid, dtype=bool),
            entry_hit=np.array(self._hit, dtype=np.int64),
            drop_ptr=np.array(self._dptr, dtype=np.int64),
            drop_block=np.array(self._drop, dtype=np.int64),
        )
