"""``local``: a process pool on this machine (nothing to install beyond optsched).

Workers come from a ``forkserver`` that has already imported the sweep modules (cheap to
start, and safe with solver libraries that start threads). At most ``2 x workers`` cells are
submitted at a time. When a worker dies (killed, out of memory, a crashing solver) the pool
breaks: the cells in flight are reported as failed and a fresh pool takes the rest.
Worker stdout goes to stderr, so a solver's banner never lands in ``--json`` output.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ALL_COMPLETED, FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from ..engine import EngineError, Outcome, register_engine

#: the end of the cells (``None`` may be a cell)
_NONE = object()


def _init_worker() -> None:
    os.dup2(2, 1)  # solver banners to stderr: stdout is the parent's (--json) channel


def _context():
    ctx = mp.get_context("forkserver")
    # workers fork from a server that has imported what cells use, instead of each importing it
    ctx.set_forkserver_preload(["optsched.sweep.cells", "optsched.sweep.methods", "optsched.policies",
                                "optsched.formulations", "optsched.evaluation"])
    return ctx


@register_engine("local")
class LocalEngine:
    name = "local"

    def __init__(self, workers: int | None = None, address: str | None = None):
        if address is not None:
            raise EngineError("--address is for the ray engine; the local engine runs on this machine")
        self.workers = workers or os.cpu_count() or 1
        self._pool: ProcessPoolExecutor | None = None

    def _new_pool(self) -> ProcessPoolExecutor:
        self.close()
        self._pool = ProcessPoolExecutor(self.workers, mp_context=_context(), initializer=_init_worker)
        return self._pool

    def run(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Outcome]:
        todo = iter(items)
        held: list[Any] = []  # taken from ``items`` but refused by a pool that had just broken
        pool = self._new_pool()
        flight: dict[Future, Any] = {}
        while True:
            broken = self._fill(pool, fn, todo, held, flight)
            if not flight and not held:
                return
            # a pool found broken at submit fails every future left in it: wait for all of them
            done, _ = wait(flight, return_when=ALL_COMPLETED if broken else FIRST_COMPLETED)
            for fut in done:
                item = flight.pop(fut)
                try:
                    yield Outcome(item, fut.result())
                except BrokenProcessPool:
                    broken = True
                    yield Outcome(item, error="worker process died (the pool broke) while this cell ran")
            if broken:
                for item in flight.values():
                    yield Outcome(item, error="worker process died (the pool broke) while this cell ran")
                flight.clear()
                pool = self._new_pool()

    def _fill(self, pool: ProcessPoolExecutor, fn: Callable[[Any], Any], todo: Iterator[Any],
              held: list[Any], flight: dict[Future, Any]) -> bool:
        """Submit cells until ``2 x workers`` are in flight or none is left; True if the pool
        turned out broken (a worker died since the last wait): the refused cell is ``held`` for
        the next pool, not lost."""
        while len(flight) < 2 * self.workers:
            if held:
                item = held.pop()
            else:
                item = next(todo, _NONE)
                if item is _NONE:
                    return False
            try:
                flight[pool.submit(fn, item)] = item
            except BrokenProcessPool:
                held.append(item)
                return True
        return False

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
