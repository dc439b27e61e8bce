"""Solver-neutral MILP model built with numpy: named variable blocks and sparse constraint groups.

Columns live in named :class:`VarBlock` s; indexing a block (``x[i, j]``, slices, fancy
arrays) yields numpy arrays of global column ids. Constraints are added in groups from COO
triplets whose row ids are local to the group; the sparse matrix is assembled once (CSR) when
a backend or writer asks for :meth:`Model.arrays`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import export
from .errors import ModelError, WarmStartError

CONTINUOUS = "C"
INTEGER = "I"
BINARY = "B"
_VTYPES = {
    "C": CONTINUOUS, "continuous": CONTINUOUS,
    "I": INTEGER, "integer": INTEGER, "int": INTEGER,
    "B": BINARY, "binary": BINARY, "bin": BINARY,
}
_SENSES = {"min": "min", "minimize": "min", "max": "max", "maximize": "max"}
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")

INF = float("inf")


def _check_name(kind: str, name: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ModelError(
            f"{kind} name {name!r} is invalid: use letters, digits, '_' or '.', "
            "starting with a letter or '_'"
        )
    return name


class VarBlock:
    """A named, shaped block of consecutive columns.

    ``block[key]`` indexes the block's id array with any numpy key and returns global column
    ids (an ``np.int64`` for a scalar index, an array otherwise). ``block.ids`` is the whole
    read-only id array in the block's shape.
    """

    __slots__ = ("name", "shape", "start", "vtype", "_ids")

    def __init__(self, name: str, shape: tuple[int, ...], start: int, vtype: str):
        self.name = name
        self.shape = shape
        self.start = start
        self.vtype = vtype
        size = int(np.prod(shape, dtype=np.int64)) if shape else 1
        ids = np.arange(start, start + size, dtype=np.int64).reshape(shape)
        ids.flags.writeable = False
        self._ids = ids

    @property
    def ids(self) -> np.ndarray:
        """All column ids, shaped like the block (read-only)."""
        return self._ids

    @property
    def size(self) -> int:
        return int(self._ids.size)

    @property
    def stop(self) -> int:
        """One past the last column id."""
        return self.start + self.size

    @property
    def is_integer(self) -> bool:
        return self.vtype != CONTINUOUS

    def __getitem__(self, key: Any) -> np.ndarray:
        try:
            return self._ids[key]
        except (IndexError, TypeError, ValueError) as exc:
            raise ModelError(
                f"block {self.name!r} (shape {self.shape}): bad index {key!r}: {exc}"
            ) from None

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError(f"block {self.name!r} is a scalar")
        return self.shape[0]

    def __iter__(self):
        return iter(self._ids)

    def __array__(self, dtype=None, copy=None):
        return self._ids if dtype is None else self._ids.astype(dtype)

    def index_of(self, col: int) -> tuple[int, ...]:
        """The block index of global column ``col``."""
        if not self.start <= col < self.stop:
            raise ModelError(f"column {col} is not in block {self.name!r}")
        if not self.shape:
            return ()
        return tuple(int(i) for i in np.unravel_index(col - self.start, self.shape))

    def label(self, col: int) -> str:
        """``name[i,j]`` for column ``col`` (``name`` for a scalar block)."""
        idx = self.index_of(col)
        return f"{self.name}[{','.join(map(str, idx))}]" if idx else self.name

    def __repr__(self) -> str:
        return (
            f"VarBlock({self.name!r}, shape={self.shape}, vtype={self.vtype!r}, "
            f"cols={self.start}..{self.stop - 1})"
        )


@dataclass(frozen=True)
class ConstraintGroup:
    """A named group of consecutive rows; ``rows`` are global row ids."""

    name: str
    start: int
    size: int

    @property
    def rows(self) -> np.ndarray:
        return np.arange(self.start, self.start + self.size, dtype=np.int64)

    def label(self, row: int) -> str:
        """``name[k]`` for global row ``row`` (``name`` for a one-row group)."""
        if not self.start <= row < self.start + self.size:
            raise ModelError(f"row {row} is not in group {self.name!r}")
        return self.name if self.size == 1 else f"{self.name}[{row - self.start}]"


@dataclass(frozen=True)
class CheckViolation:
    """One violated bound, integrality requirement or row found by :meth:`Model.check`.

    ``kind`` is ``"length"``, ``"value"`` (NaN/inf), ``"bound"``, ``"integrality"`` or
    ``"row"``; ``where`` names the column (``x[1,2]``) or row (``group[k]``); ``amount`` is how
    far ``value`` lies outside ``[lo, hi]`` (distance to the nearest integer for integrality).
    """

    kind: str
    where: str
    value: float
    lo: float
    hi: float
    amount: float

    def __str__(self) -> str:
        if self.kind == "length":
            return f"values have length {int(self.value)}, the model has {int(self.lo)} columns"
        if self.kind == "value":
            return f"{self.where}: value {self.value} is not a finite number"
        if self.kind == "integrality":
            return f"{self.where}: value {self.value:g} is not integral (off by {self.amount:.3g})"
        what = "activity" if self.kind == "row" else "value"
        return (
            f"{self.kind} {self.where}: {what} {self.value:g} outside "
            f"[{self.lo:g}, {self.hi:g}] by {self.amount:.3g}"
        )


@dataclass(frozen=True, eq=False)
class ModelArrays:
    """The assembled model: dense vectors and a CSR matrix without duplicates or zeros."""

    num_vars: int
    num_rows: int
    obj: np.ndarray  # (n,) float64, in the model's own sense
    obj_constant: float
    sense: str  # "min" or "max"
    lb: np.ndarray
    ub: np.ndarray
    is_int: np.ndarray  # (n,) bool
    indptr: np.ndarray  # (m+1,) int64
    indices: np.ndarray  # (nnz,) int32
    data: np.ndarray  # (nnz,) float64
    row_lo: np.ndarray
    row_hi: np.ndarray

    @property
    def nnz(self) -> int:
        return int(self.data.size)

    @property
    def row_of_entry(self) -> np.ndarray:
        """Global row id of every CSR entry."""
        return np.repeat(np.arange(self.num_rows, dtype=np.int64), np.diff(self.indptr))

    def row_activity(self, x: np.ndarray) -> np.ndarray:
        """``A @ x`` for a full column vector ``x``."""
        return np.bincount(
            self.row_of_entry, weights=self.data * x[self.indices], minlength=self.num_rows
        )

    def csc(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The matrix column-wise: ``(colptr, row_indices, data)``."""
        order = np.argsort(self.indices, kind="stable")
        rows = self.row_of_entry[order]
        counts = np.bincount(self.indices, minlength=self.num_vars)
        colptr = np.zeros(self.num_vars + 1, dtype=np.int64)
        np.cumsum(counts, out=colptr[1:])
        return colptr, rows, self.data[order]


def _as_cols(x: Any) -> np.ndarray:
    if isinstance(x, VarBlock):
        return x.ids
    return np.asarray(x)


def _float_array(name: str, value: Any) -> np.ndarray:
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ModelError(f"{name}: not numeric ({exc})") from None


class Model:
    """A mixed-integer linear program built from numpy arrays.

    >>> m = Model("demo")
    >>> x = m.add_vars("x", (3, 4), ub=1, vtype="B")
    >>> g = m.add_constraints(rows=np.arange(3)[:, None], cols=x[:, :], coefs=1.0,
    ...                       lo=1, hi=1, name="assign")
    >>> m.set_objective(x[:, :], np.ones((3, 4)))
    """

    def __init__(self, name: str = "model"):
        if not isinstance(name, str) or not name.strip():
            raise ModelError(f"model name must be a non-empty string, got {name!r}")
        self.name = name
        #: for progress displays only: objective units per user unit, and the user unit
        self.user_scale: float = 1.0
        self.user_unit: str = ""
        self._blocks: dict[str, VarBlock] = {}
        self._block_starts: list[int] = []
        self._block_list: list[VarBlock] = []
        self._lb: list[np.ndarray] = []
        self._ub: list[np.ndarray] = []
        self._int: list[np.ndarray] = []
        self._n = 0
        self._groups: dict[str, ConstraintGroup] = {}
        self._group_list: list[ConstraintGroup] = []
        self._group_starts: list[int] = []
        self._rows: list[np.ndarray] = []
        self._cols: list[np.ndarray] = []
        self._vals: list[np.ndarray] = []
        self._lo: list[np.ndarray] = []
        self._hi: list[np.ndarray] = []
        self._m = 0
        self._entries = 0
        self._obj_cols: list[np.ndarray] = []
        self._obj_vals: list[np.ndarray] = []
        self._obj_const = 0.0
        self._sense = "min"
        self._cache: ModelArrays | None = None

    # ------------------------------------------------------------------ variables
    def add_vars(
        self,
        name: str,
        shape: int | tuple[int, ...] = (),
        lb: Any = 0.0,
        ub: Any = INF,
        vtype: str = CONTINUOUS,
    ) -> VarBlock:
        """Add a block of ``prod(shape)`` columns; ``lb``/``ub`` broadcast to ``shape``.

        ``vtype`` is ``"C"``/``"continuous"``, ``"I"``/``"integer"`` or ``"B"``/``"binary"``
        (binary = integer with bounds clipped to ``[0, 1]``). Use ``-inf``/``inf`` for free
        directions.
        """
        _check_name("block", name)
        if name in self._blocks:
            raise ModelError(f"block {name!r} already exists")
        vt = _VTYPES.get(vtype) if isinstance(vtype, str) else None
        if vt is None:
            raise ModelError(f"block {name!r}: unknown vtype {vtype!r} (use C, I or B)")
        shp = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        if any((not isinstance(s, (int, np.integer))) or s < 0 for s in shp):
            raise ModelError(f"block {name!r}: bad shape {shape!r}")
        shp = tuple(int(s) for s in shp)
        try:
            lo = np.broadcast_to(_float_array(f"block {name!r} lb", lb), shp).ravel().copy()
            hi = np.broadcast_to(_float_array(f"block {name!r} ub", ub), shp).ravel().copy()
        except ValueError as exc:
            raise ModelError(f"block {name!r}: bounds do not fit shape {shp}: {exc}") from None
        if vt == BINARY:
            lo = np.maximum(lo, 0.0)
            hi = np.minimum(hi, 1.0)
        blk = VarBlock(name, shp, self._n, vt)
        self._validate_bounds(blk, lo, hi)
        self._blocks[name] = blk
        self._block_list.append(blk)
        self._block_starts.append(blk.start)
        self._lb.append(lo)
        self._ub.append(hi)
        self._int.append(np.full(blk.size, vt != CONTINUOUS))
        self._n += blk.size
        self._cache = None
        return blk

    def set_bounds(self, cols: Any, lb: Any = None, ub: Any = None) -> None:
        """Replace the bounds of existing columns ``cols`` (``None`` keeps a side)."""
        c = _as_cols(cols).ravel()
        if c.size and (c.min() < 0 or c.max() >= self._n):
            raise ModelError(f"set_bounds: column ids must be in [0, {self._n})")
        for k, blk in enumerate(self._block_list):
            sel = c[(c >= blk.start) & (c < blk.start + blk.size)]
            if sel.size == 0:
                continue
            lo, hi = self._lb[k].copy(), self._ub[k].copy()
            if lb is not None:
                lo[sel - blk.start] = lb
            if ub is not None:
                hi[sel - blk.start] = ub
            if blk.vtype == BINARY:
                lo, hi = np.maximum(lo, 0.0), np.minimum(hi, 1.0)
            self._validate_bounds(blk, lo, hi)
            self._lb[k], self._ub[k] = lo, hi
        self._cache = None

    def add_var(
        self, name: str, lb: float = 0.0, ub: float = INF, vtype: str = CONTINUOUS
    ) -> int:
        """Add one scalar column (a block of shape ``()``); returns its column id."""
        return int(self.add_vars(name, (), lb, ub, vtype).ids)

    @staticmethod
    def _validate_bounds(blk: VarBlock, lo: np.ndarray, hi: np.ndarray) -> None:
        bad = np.isnan(lo) | np.isnan(hi) | (lo == INF) | (hi == -INF) | (lo > hi)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            col = blk.start + k
            raise ModelError(
                f"block {blk.name!r}: bad bounds at {blk.label(col)}: lb={lo[k]}, ub={hi[k]}"
                f" ({int(bad.sum())} column(s) affected)"
            )

    # ------------------------------------------------------------------ constraints
    def add_constraints(
        self,
        rows: Any,
        cols: Any,
        coefs: Any = 1.0,
        lo: Any = None,
        hi: Any = None,
        *,
        sense: str | None = None,
        rhs: Any = None,
        name: str | None = None,
        nrows: int | None = None,
    ) -> ConstraintGroup:
        """Add a group of rows ``lo <= A x <= hi`` from COO triplets.

        ``rows`` are row ids local to this group (0..nrows-1), ``cols`` global column ids
        (e.g. from indexing a :class:`VarBlock`), ``coefs`` the coefficients; the three are
        broadcast together, so ``rows=np.arange(n)[:, None], cols=x[:, :]`` sums each row of a
        2-D block. Duplicate (row, col) pairs are summed. Give either ``lo``/``hi`` (scalars or
        length-``nrows`` arrays; ``None`` = unbounded) or ``sense`` in ``<=``, ``>=``, ``==``
        with ``rhs``. ``nrows`` defaults to the length of the bound arrays or ``max(rows)+1``.
        """
        gname = self._group_name(name)
        try:
            r, c, v = np.broadcast_arrays(
                np.asarray(rows), _as_cols(cols), _float_array(f"group {gname!r} coefs", coefs)
            )
        except ValueError as exc:
            raise ModelError(
                f"group {gname!r}: rows, cols and coefs do not broadcast together: {exc}"
            ) from None
        r, c, v = r.ravel(), c.ravel(), v.ravel()
        for what, arr in (("rows", r), ("cols", c)):
            if arr.size and not np.issubdtype(arr.dtype, np.integer):
                raise ModelError(f"group {gname!r}: {what} must be integers, got {arr.dtype}")
        r = r.astype(np.int64, copy=False)
        c = c.astype(np.int64, copy=False)
        lo_a, hi_a = self._row_bounds(gname, lo, hi, sense, rhs)
        if nrows is None:
            sizes = {a.size for a in (lo_a, hi_a) if a.ndim == 1}
            if len(sizes) > 1:
                raise ModelError(f"group {gname!r}: lo and hi have different lengths {sizes}")
            nrows = sizes.pop() if sizes else (int(r.max()) + 1 if r.size else 0)
        nrows = int(nrows)
        if r.size and (r.min() < 0 or r.max() >= nrows):
            bad = int(r[(r < 0) | (r >= nrows)][0])
            raise ModelError(f"group {gname!r}: local row id {bad} outside 0..{nrows - 1}")
        if c.size and (c.min() < 0 or c.max() >= self._n):
            bad = int(c[(c < 0) | (c >= self._n)][0])
            raise ModelError(
                f"group {gname!r}: column id {bad} does not exist (model has {self._n} columns)"
            )
        if not np.isfinite(v).all():
            k = int(np.flatnonzero(~np.isfinite(v))[0])
            raise ModelError(
                f"group {gname!r}: coefficient {v[k]} of {self.col_label(int(c[k]))} in row "
                f"{gname}[{int(r[k])}] is not finite"
            )
        try:
            lo_a = np.broadcast_to(lo_a, (nrows,)).astype(np.float64, copy=True)
            hi_a = np.broadcast_to(hi_a, (nrows,)).astype(np.float64, copy=True)
        except ValueError:
            raise ModelError(
                f"group {gname!r}: bounds of length {lo_a.size}/{hi_a.size} do not fit "
                f"{nrows} rows"
            ) from None
        bad = np.isnan(lo_a) | np.isnan(hi_a) | (lo_a > hi_a) | (lo_a == INF) | (hi_a == -INF)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise ModelError(
                f"group {gname!r}: row {gname}[{k}] has bad bounds lo={lo_a[k]}, hi={hi_a[k]}"
            )
        grp = ConstraintGroup(gname, self._m, nrows)
        self._groups[gname] = grp
        self._group_list.append(grp)
        self._group_starts.append(grp.start)
        self._rows.append(r + self._m)
        self._cols.append(c.copy())
        self._vals.append(v.astype(np.float64, copy=True))
        self._lo.append(lo_a)
        self._hi.append(hi_a)
        self._m += nrows
        self._entries += int(v.size)
        self._cache = None
        return grp

    def add_constraint(
        self,
        cols: Any,
        coefs: Any = 1.0,
        lo: float | None = None,
        hi: float | None = None,
        *,
        sense: str | None = None,
        rhs: float | None = None,
        name: str | None = None,
    ) -> ConstraintGroup:
        """Add one row ``lo <= sum(coefs * x[cols]) <= hi`` (or ``sense``/``rhs``)."""
        c = _as_cols(cols)
        return self.add_constraints(
            np.zeros(1, dtype=np.int64), c, coefs, lo, hi,
            sense=sense, rhs=rhs, name=name, nrows=1,
        )

    def _group_name(self, name: str | None) -> str:
        if name is None:
            k = len(self._group_list)
            while f"c{k}" in self._groups:
                k += 1
            return f"c{k}"
        _check_name("constraint group", name)
        if name in self._groups:
            raise ModelError(f"constraint group {name!r} already exists")
        return name

    @staticmethod
    def _row_bounds(gname: str, lo: Any, hi: Any, sense: str | None, rhs: Any):
        if sense is not None or rhs is not None:
            if lo is not None or hi is not None:
                raise ModelError(f"group {gname!r}: give lo/hi or sense/rhs, not both")
            if sense is None or rhs is None:
                raise ModelError(f"group {gname!r}: sense and rhs go together")
            r = _float_array(f"group {gname!r} rhs", rhs)
            if sense in ("<=", "<", "le", "L"):
                return np.asarray(-INF), r
            if sense in (">=", ">", "ge", "G"):
                return r, np.asarray(INF)
            if sense in ("==", "=", "eq", "E"):
                return r, r
            raise ModelError(f"group {gname!r}: unknown sense {sense!r} (use <=, >= or ==)")
        lo_a = np.asarray(-INF) if lo is None else _float_array(f"group {gname!r} lo", lo)
        hi_a = np.asarray(INF) if hi is None else _float_array(f"group {gname!r} hi", hi)
        if lo_a.ndim > 1 or hi_a.ndim > 1:
            raise ModelError(f"group {gname!r}: lo/hi must be scalars or 1-D arrays")
        return lo_a, hi_a

    # ------------------------------------------------------------------ objective
    def set_objective(
        self, cols: Any = (), coefs: Any = 1.0, constant: float = 0.0, sense: str = "min"
    ) -> None:
        """Replace the objective by ``constant + sum(coefs * x[cols])``, to ``sense`` min/max."""
        s = _SENSES.get(sense)
        if s is None:
            raise ModelError(f"objective: unknown sense {sense!r} (use 'min' or 'max')")
        self._obj_cols, self._obj_vals, self._obj_const = [], [], 0.0
        self._sense = s
        self.add_objective(cols, coefs, constant)

    def add_objective(self, cols: Any, coefs: Any = 1.0, constant: float = 0.0) -> None:
        """Add terms (and a constant) to the objective; duplicate columns are summed."""
        try:
            c, v = np.broadcast_arrays(_as_cols(cols), _float_array("objective coefs", coefs))
        except ValueError as exc:
            raise ModelError(f"objective: cols and coefs do not broadcast: {exc}") from None
        c, v = c.ravel(), v.ravel()
        if c.size and not np.issubdtype(c.dtype, np.integer):
            raise ModelError(f"objective: cols must be integers, got {c.dtype}")
        c = c.astype(np.int64, copy=False)
        if c.size and (c.min() < 0 or c.max() >= self._n):
            bad = int(c[(c < 0) | (c >= self._n)][0])
            raise ModelError(f"objective: column id {bad} does not exist ({self._n} columns)")
        if not np.isfinite(v).all() or not np.isfinite(constant):
            raise ModelError("objective: coefficients and constant must be finite")
        self._obj_cols.append(c.copy())
        self._obj_vals.append(v.astype(np.float64, copy=True))
        self._obj_const += float(constant)
        self._cache = None

    @property
    def sense(self) -> str:
        return self._sense

    # ------------------------------------------------------------------ introspection
    @property
    def num_vars(self) -> int:
        return self._n

    @property
    def num_constraints(self) -> int:
        return self._m

    @property
    def num_entries(self) -> int:
        """Triplets given so far (before duplicates are summed and zeros dropped)."""
        return self._entries

    @property
    def num_integer(self) -> int:
        return int(sum(int(a.sum()) for a in self._int))

    @property
    def is_mip(self) -> bool:
        return self.num_integer > 0

    @property
    def blocks(self) -> Mapping[str, VarBlock]:
        return dict(self._blocks)

    @property
    def groups(self) -> Mapping[str, ConstraintGroup]:
        return dict(self._groups)

    def block(self, name: str | VarBlock) -> VarBlock:
        if isinstance(name, VarBlock):
            if self._blocks.get(name.name) is not name:
                raise ModelError(f"block {name.name!r} does not belong to model {self.name!r}")
            return name
        try:
            return self._blocks[name]
        except KeyError:
            raise ModelError(
                f"model {self.name!r} has no block {name!r} (blocks: {sorted(self._blocks)})"
            ) from None

    def group(self, name: str) -> ConstraintGroup:
        try:
            return self._groups[name]
        except KeyError:
            raise ModelError(f"model {self.name!r} has no constraint group {name!r}") from None

    def block_of(self, col: int) -> VarBlock:
        """The block holding global column ``col``."""
        if not 0 <= col < self._n:
            raise ModelError(f"column {col} does not exist ({self._n} columns)")
        k = int(np.searchsorted(self._block_starts, col, side="right")) - 1
        # skip empty blocks that share a start
        while self._block_list[k].size == 0:
            k -= 1
        return self._block_list[k]

    def col_label(self, col: int) -> str:
        return self.block_of(col).label(col)

    def row_label(self, row: int) -> str:
        if not 0 <= row < self._m:
            raise ModelError(f"row {row} does not exist ({self._m} rows)")
        k = int(np.searchsorted(self._group_starts, row, side="right")) - 1
        while self._group_list[k].size == 0:
            k -= 1
        return self._group_list[k].label(row)

    def __repr__(self) -> str:
        return (
            f"Model({self.name!r}: {self._n} vars ({self.num_integer} integer) in "
            f"{len(self._blocks)} blocks, {self._m} rows in {len(self._groups)} groups, "
            f"{self._entries} entries, {self._sense})"
        )

    # ------------------------------------------------------------------ assembly
    def arrays(self) -> ModelArrays:
        """Assemble (once, cached until the model changes) the CSR matrix and vectors."""
        if self._cache is None:
            self._cache = self._assemble()
        return self._cache

    def _assemble(self) -> ModelArrays:
        n, m = self._n, self._m

        def cat(parts, dtype):
            return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(
                0, dtype
            )

        rows = cat(self._rows, np.int64)
        cols = cat(self._cols, np.int64)
        vals = cat(self._vals, np.float64)
        key = rows * max(n, 1) + cols
        if key.size > 1 and not bool(np.all(key[1:] > key[:-1])):
            order = np.argsort(key, kind="stable")
            key, vals = key[order], vals[order]
            first = np.ones(key.size, dtype=bool)
            first[1:] = key[1:] != key[:-1]
            starts = np.flatnonzero(first)
            vals = np.add.reduceat(vals, starts)
            key = key[starts]
        keep = vals != 0.0
        if not keep.all():
            key, vals = key[keep], vals[keep]
        rows = key // max(n, 1)
        cols = key - rows * max(n, 1)
        indptr = np.zeros(m + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=m), out=indptr[1:])
        obj = np.zeros(n)
        if self._obj_cols:
            np.add.at(obj, np.concatenate(self._obj_cols), np.concatenate(self._obj_vals))
        arrays = ModelArrays(
            num_vars=n, num_rows=m, obj=obj, obj_constant=self._obj_const, sense=self._sense,
            lb=cat(self._lb, np.float64), ub=cat(self._ub, np.float64),
            is_int=cat(self._int, bool), indptr=indptr, indices=cols.astype(np.int32),
            data=vals, row_lo=cat(self._lo, np.float64), row_hi=cat(self._hi, np.float64),
        )
        for a in (arrays.obj, arrays.lb, arrays.ub, arrays.is_int, arrays.indptr,
                  arrays.indices, arrays.data, arrays.row_lo, arrays.row_hi):
            a.flags.writeable = False
        return arrays

    # ------------------------------------------------------------------ solutions
    def value(self, block: str | VarBlock, values: Any,
              round_integers: bool = True) -> np.ndarray | float:
        """Block-shaped solution values (integer blocks rounded to the nearest integer); a
        scalar block gives a float."""
        blk = self.block(block)
        x = self._values_vector(values)
        out = x[blk.start:blk.stop].reshape(blk.shape)
        if round_integers and blk.is_integer:
            out = np.rint(out)
        return out if blk.shape else float(out)

    def objective_value(self, values: Any) -> float:
        """Objective of a full column vector (in the model's sense, constant included)."""
        a = self.arrays()
        x = self._values_vector(values)
        return float(a.obj @ x + a.obj_constant)

    def _values_vector(self, values: Any) -> np.ndarray:
        if values is None:
            raise ModelError("no values (the solve returned no solution)")
        x = np.asarray(values, dtype=np.float64)
        if x.shape != (self._n,):
            raise ModelError(f"values have shape {x.shape}, model has {self._n} columns")
        return x

    def start_vector(self, start: Any) -> np.ndarray:
        """Turn a warm start into a length-``num_vars`` vector (NaN = not given).

        ``start`` is a full vector (NaN entries allowed) or a mapping from block (or block
        name) to an array of the block's shape.
        """
        if isinstance(start, Mapping):
            x = np.full(self._n, np.nan)
            for key, val in start.items():
                try:
                    blk = self.block(key)
                except ModelError as exc:
                    raise WarmStartError(f"warm start: {exc}") from None
                arr = np.asarray(val, dtype=np.float64)
                try:
                    x[blk.start:blk.stop] = np.broadcast_to(arr, blk.shape).ravel()
                except ValueError:
                    raise WarmStartError(
                        f"warm start for block {blk.name!r}: shape {arr.shape} does not fit "
                        f"{blk.shape}"
                    ) from None
            return x
        try:
            x = np.asarray(start, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise WarmStartError(f"warm start is not numeric: {exc}") from None
        return x

    def check(self, values: Any, tol: float = 1e-6, partial: bool = False) -> list[CheckViolation]:
        """List every violated bound, integrality requirement and row of ``values``.

        A value violates ``[lo, hi]`` when it lies outside by more than
        ``tol * max(1, |limit|)``. With ``partial=True`` NaN entries mean "not given": they are
        skipped, and so are rows that touch them.
        """
        with np.errstate(invalid="ignore", over="ignore"):
            return self._check(values, tol, partial)

    def _check(self, values: Any, tol: float, partial: bool) -> list[CheckViolation]:
        a = self.arrays()
        x = np.asarray(values, dtype=np.float64)
        if x.shape != (self._n,):
            size = x.size if x.ndim else 1
            return [CheckViolation("length", "values", float(size), float(self._n),
                                   float(self._n), float(abs(size - self._n)))]
        out: list[CheckViolation] = []
        given = ~np.isnan(x) if partial else np.ones(self._n, dtype=bool)
        bad = given & ~np.isfinite(x)
        for k in np.flatnonzero(bad):
            out.append(CheckViolation("value", self.col_label(int(k)), float(x[k]),
                                      float(a.lb[k]), float(a.ub[k]), INF))
        ok = given & ~bad
        with np.errstate(invalid="ignore"):
            below = np.where(ok, a.lb - x, 0.0)
            above = np.where(ok, x - a.ub, 0.0)
            lim_lo = tol * np.maximum(1.0, np.abs(np.where(np.isfinite(a.lb), a.lb, 0.0)))
            lim_hi = tol * np.maximum(1.0, np.abs(np.where(np.isfinite(a.ub), a.ub, 0.0)))
        for k in np.flatnonzero((below > lim_lo) | (above > lim_hi)):
            out.append(CheckViolation("bound", self.col_label(int(k)), float(x[k]),
                                      float(a.lb[k]), float(a.ub[k]),
                                      float(max(below[k], above[k]))))
        frac = np.where(ok & a.is_int, np.abs(x - np.rint(np.where(ok, x, 0.0))), 0.0)
        for k in np.flatnonzero(frac > tol):
            out.append(CheckViolation("integrality", self.col_label(int(k)), float(x[k]),
                                      float(a.lb[k]), float(a.ub[k]), float(frac[k])))
        xs = np.where(ok, x, 0.0)
        act = a.row_activity(xs)
        if partial or bad.any():
            unknown = np.bincount(a.row_of_entry, weights=(~ok[a.indices]).astype(float),
                                  minlength=a.num_rows) > 0
        else:
            unknown = np.zeros(a.num_rows, dtype=bool)
        with np.errstate(invalid="ignore"):
            r_below = a.row_lo - act
            r_above = act - a.row_hi
            r_lim_lo = tol * np.maximum(1.0, np.abs(np.where(np.isfinite(a.row_lo), a.row_lo, 0)))
            r_lim_hi = tol * np.maximum(1.0, np.abs(np.where(np.isfinite(a.row_hi), a.row_hi, 0)))
        for k in np.flatnonzero(~unknown & ((r_below > r_lim_lo) | (r_above > r_lim_hi))):
            out.append(CheckViolation("row", self.row_label(int(k)), float(act[k]),
                                      float(a.row_lo[k]), float(a.row_hi[k]),
                                      float(max(r_below[k], r_above[k]))))
        return out

    # ------------------------------------------------------------------ export
    def write_mps(self, path: str, *, split_ranges: bool = True) -> None:
        """Write free MPS readable by HiGHS, CBC and PuLP's ``LpProblem.fromMPS``.

        See :func:`optsched.milp.export.write_mps` for the conventions used.
        """
        export.write_mps(self, path, split_ranges=split_ranges)

    def write_lp(self, path: str) -> None:
        """Write CPLEX LP format (readable by HiGHS, CBC, Gurobi)."""
        export.write_lp(self, path)
