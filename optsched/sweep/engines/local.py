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
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from ..engine import EngineError, Outcome, register_engine


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
        pool = self._new_pool()
        flight: dict[Future, Any] = {}
        exhausted = False
        while True:
            while not exhausted and len(flight) < 2 * self.workers:
                try:
                    item = next(todo)
                except StopIteration:
                    exhausted = True
                    break
                flight[pool.submit(fn, item)] = item
            if not flight:
                return
            done, _ = wait(flight, return_when=FIRST_COMPLETED)
            broken = False
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

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
