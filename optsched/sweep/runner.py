"""``run_sweep``: expand a spec, skip the cells already done, run the rest on an engine.

Each finished cell is written at once (:class:`~optsched.sweep.results.ResultStore`), so an
interrupted sweep loses only the cells in flight, and rerunning the same command computes
only the missing and failed cells. The dataset is compacted at the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from .cells import FAILED, Cell, expand, failed_row, run_cell
from .engine import make_engine
from .progress import Progress
from .results import ResultStore, require_pyarrow
from .spec import SweepSpec


@dataclass(frozen=True)
class RunSummary:
    sweep: str
    out: str
    engine: str
    cells: int
    already_done: int
    computed: int
    failed: int
    elapsed: float

    def to_dict(self) -> dict:
        return asdict(self)


def pending(spec: SweepSpec, out: str | Path, cells: list[Cell] | None = None
            ) -> tuple[list[Cell], list[Cell]]:
    """(all cells, the cells still to compute: missing or failed in ``OUT``)."""
    require_pyarrow()
    cells = expand(spec) if cells is None else cells
    status = ResultStore(out).status_by_key()
    todo = [c for c in cells if status.get(c.key) in (None, FAILED)]
    return cells, todo


def run_sweep(spec: SweepSpec, out: str | Path, *, engine: str = "local", workers: int | None = None,
              address: str | None = None, progress: bool = True,
              on_row: Callable[[dict], None] | None = None) -> RunSummary:
    """Compute the cells of ``spec`` missing or failed in ``out``; ``on_row`` sees each row."""
    t0 = time.perf_counter()
    cells = expand(spec)  # a spec error stops here, before anything is written
    eng = make_engine(engine, workers=workers, address=address)
    store = ResultStore(out)
    store.lock()
    try:
        store.recover()
        cells, todo = pending(spec, out, cells)
        failed = _run(spec, todo, store, eng,
                      Progress(spec.name, len(todo), skipped=len(cells) - len(todo), enabled=progress),
                      on_row)
        store.compact()
    finally:
        store.unlock()
    return RunSummary(spec.name, str(out), engine, len(cells), len(cells) - len(todo), len(todo),
                      failed, time.perf_counter() - t0)


def _run(spec: SweepSpec, todo: list[Cell], store: ResultStore, eng, bar: Progress, on_row) -> int:
    failed = 0
    try:
        for outcome in eng.run(run_cell, todo):
            row = outcome.result if outcome.error is None else failed_row(outcome.item, outcome.error)
            row["engine"] = eng.name
            store.append(row)
            failed += row["status"] == FAILED
            bar.update(row["status"] == FAILED)
            if on_row is not None:
                on_row(row)
    finally:
        store.flush()
        eng.close()
    bar.finish()
    return failed


__all__ = ["run_sweep", "pending", "RunSummary"]
