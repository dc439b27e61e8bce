"""The result dataset: one Parquet row per cell under ``OUT/cells/``.

Every finished cell is written at once as its own small part file (written to a hidden
temporary name, then renamed, so a killed run leaves no half-written file), so killing a
sweep loses only the cells in flight. :meth:`ResultStore.compact` folds the parts into one
file, keeping the newest row of each key (a failed cell that was rerun keeps its new row);
``sweep run`` and ``sweep report`` compact at their end. Readers see a plain Parquet
directory: ``pandas.read_parquet("OUT/cells")`` or DuckDB's
``read_parquet('OUT/cells/*.parquet')``. Hidden files (``.tmp-*``) are never ``*.parquet``.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

from ..errors import OptschedError

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError:  # pragma: no cover - the sweep extra is not installed
    pa = pq = None

CELLS_DIR = "cells"


class ResultsError(OptschedError):
    pass


def require_pyarrow() -> None:
    if pa is None:
        raise ResultsError("sweeps write Parquet and need pyarrow: pip install 'optsched[sweep]'")


def schema():
    require_pyarrow()
    s, f, i, b = pa.string(), pa.float64(), pa.int64(), pa.bool_()
    ts = pa.timestamp("ms", tz="UTC")
    return pa.schema([
        ("sweep", s), ("key", s), ("instance", s), ("instance_hash", s), ("n_requests", i),
        ("seed", i), ("generator", s), ("generator_params", s),
        ("method", s), ("method_kind", s), ("method_name", s), ("method_params", s),
        ("objective_kind", s), ("status", s), ("objective", f), ("bound", f), ("gap", f),
        ("feasible", b), ("evictions", i), ("runtime", f), ("error", s),
        ("optsched_version", s), ("solver", s), ("solver_version", s), ("host", s), ("pid", i),
        ("engine", s), ("started_at", ts), ("finished_at", ts),
    ])


def _normalise(row: dict[str, Any]) -> dict[str, Any]:
    out = {name: row.get(name) for name in schema().names}
    for k in ("started_at", "finished_at"):
        if isinstance(out[k], (int, float)):
            out[k] = int(out[k] * 1000)
    return out


class ResultStore:
    """The Parquet directory ``OUT/cells`` of one output directory ``OUT``."""

    def __init__(self, out: str | Path):
        require_pyarrow()
        self.out = Path(out)
        self.dir = self.out / CELLS_DIR

    def _write(self, table, prefix: str) -> Path:
        self.dir.mkdir(parents=True, exist_ok=True)
        name = f"{prefix}-{time.time_ns()}-{uuid.uuid4().hex[:8]}.parquet"
        tmp = self.dir / f".tmp-{name}"
        pq.write_table(table, tmp)
        os.replace(tmp, self.dir / name)
        return self.dir / name

    def write(self, rows: list[dict[str, Any]]) -> Path:
        """One part file holding ``rows`` (one finished cell each)."""
        return self._write(pa.Table.from_pylist([_normalise(r) for r in rows], schema=schema()), "part")

    def files(self) -> list[Path]:
        if not self.dir.is_dir():
            return []
        return sorted(p for p in self.dir.iterdir() if p.suffix == ".parquet" and not p.name.startswith("."))

    def read(self, files: list[Path] | None = None):
        """Every row, newest per key (by finish time, then file order), as a pyarrow Table."""
        files = self.files() if files is None else files
        if not files:
            return schema().empty_table()
        tables = []
        for p in files:
            try:
                tables.append(pq.read_table(p, schema=schema()))
            except (OSError, pa.ArrowInvalid) as e:
                raise ResultsError(f"{p}: not a readable result file ({e})") from None
        return _latest_per_key(pa.concat_tables(tables))

    def status_by_key(self) -> dict[str, str]:
        t = self.read()
        return dict(zip(t.column("key").to_pylist(), t.column("status").to_pylist()))

    def compact(self):
        """Fold every part into one file (newest row per key); returns the table."""
        files = self.files()
        table = self.read(files)
        if len(files) <= 1:
            return table
        self._write(table, "cells")
        for p in files:  # only the files read: parts written meanwhile stay
            p.unlink(missing_ok=True)
        return table


def _latest_per_key(table):
    if table.num_rows == 0:
        return table
    keys = table.column("key").to_pylist()
    done = table.column("finished_at").to_pylist()
    best: dict[str, int] = {}
    for i, (k, t) in enumerate(zip(keys, done)):
        j = best.get(k)
        if j is None or (t is not None and (done[j] is None or t >= done[j])):
            best[k] = i
    return table.take(sorted(best.values()))


def read_results(out: str | Path):
    """The dataset of ``OUT`` (a sweep's output directory), newest row per cell."""
    store = ResultStore(out)
    if not store.files():
        raise ResultsError(f"{out}: no sweep results here (expected Parquet files in {store.dir})")
    return store.read()


__all__ = ["ResultStore", "ResultsError", "read_results", "schema", "CELLS_DIR", "require_pyarrow"]
