"""``ray``: cells as Ray tasks (``pip install 'optsched[ray]'``).

With ``address`` it connects to an existing cluster (``ray start --head`` on one machine,
``ray start --address=...`` on the others; every node needs this optsched installed); without,
it starts a local Ray instance with ``workers`` CPUs (default: all) and stops it at the end.
One CPU per cell; at most ``2 x`` the cluster's CPUs in flight; no retries (a failed cell is
a result, and a rerun of the sweep retries it). A task that raises or whose worker dies is
reported as failed with Ray's one-line reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ..engine import EngineError, Outcome, register_engine


def _ray():
    try:
        # lazy: optional dependency (the ray extra)
        import ray
    except ImportError:
        raise EngineError("--engine ray needs Ray: pip install 'optsched[ray]'") from None
    return ray


@register_engine("ray")
class RayEngine:
    name = "ray"

    def __init__(self, workers: int | None = None, address: str | None = None):
        self.ray = _ray()
        self.workers, self.address = workers, address
        self._started = False

    def _connect(self) -> int:
        ray = self.ray
        if not ray.is_initialized():
            kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                  "configure_logging": False}
            try:
                if self.address:
                    ray.init(address=self.address, **kw)
                else:
                    ray.init(address="local", num_cpus=self.workers, **kw)
            except (ConnectionError, RuntimeError, ValueError) as e:
                where = f"at {self.address}" if self.address else "locally"
                raise EngineError(f"cannot start or reach a Ray cluster {where}: {e}") from None
            self._started = True
        cpus = int(ray.cluster_resources().get("CPU", 1))
        return max(1, min(cpus, self.workers or cpus))

    def run(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[Outcome]:
        ray = self.ray
        slots = self._connect()
        task = ray.remote(num_cpus=1, max_retries=0)(fn)
        todo = iter(items)
        flight: dict[Any, Any] = {}
        exhausted = False
        while True:
            while not exhausted and len(flight) < 2 * slots:
                try:
                    item = next(todo)
                except StopIteration:
                    exhausted = True
                    break
                flight[task.remote(item)] = item
            if not flight:
                return
            ready, _ = ray.wait(list(flight), num_returns=1)
            for ref in ready:
                item = flight.pop(ref)
                try:
                    yield Outcome(item, ray.get(ref))
                except ray.exceptions.RayError as e:
                    yield Outcome(item, error=f"ray: {type(e).__name__}: {str(e).splitlines()[0][:300]}")

    def close(self) -> None:
        if self._started and self.ray.is_initialized():
            self.ray.shutdown()
        self._started = False
