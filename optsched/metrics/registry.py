"""The metric registry: the serving metrics a search targets (``optsched capacity --metric``,
:func:`optsched.serving.rate_search.search`), found by name like every plug-in
(:mod:`optsched.plugins`).

A :class:`RateMetric` is a name, a help line, whether lower or higher is better, the settings
it needs (e.g. ``("ttft_slo", "tbt_slo")``) and a function of one run (:class:`MetricRun`:
anything whose ``metrics()`` gives the serving metrics of a simulated run,
:func:`optsched.metrics.serving.serving_metrics`). The modules of this package register theirs
on import (:mod:`optsched.metrics.rate`: the rate search's four), installed distributions
theirs through the ``optsched.metrics`` entry-point group: a new metric is one new module.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..plugins import Registry
from .serving import MetricError


class MetricRun(Protocol):
    """What a metric function reads: one simulated run
    (:class:`optsched.serving.rate_search.Run`)."""

    def metrics(self) -> dict[str, Any]:
        """The run's serving metrics (:func:`optsched.metrics.serving.serving_metrics`)."""
        ...


@dataclass(frozen=True)
class RateMetric:
    """A metric a search can target: ``better`` is ``"lower"`` or ``"higher"``; ``needs``
    names the settings it requires (e.g. ``("ttft_slo", "tbt_slo")``)."""

    name: str
    help: str
    better: str
    fn: Callable[[MetricRun], float | None]
    needs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.better not in ("lower", "higher"):
            raise MetricError(f"metric {self.name!r}: better must be 'lower' or 'higher'")

    def meets(self, value: float | None, target: float) -> bool:
        if value is None or not math.isfinite(value):
            return False
        return value <= target if self.better == "lower" else value >= target


#: every metric: the modules of ``optsched.metrics`` register theirs on import
METRICS: Registry[RateMetric] = Registry(
    "metric", packages=("optsched.metrics",), group="optsched.metrics", error=MetricError,
)


def register_metric(name: str, help: str, better: str, needs: tuple[str, ...] = ()):
    """Decorator: register ``fn(run) -> value`` as a searchable metric (:class:`RateMetric`;
    a second metric of the same name is refused)."""
    if better not in ("lower", "higher"):
        raise MetricError(f"metric {name!r}: better must be 'lower' or 'higher'")

    def add(fn: Callable[[MetricRun], float | None]) -> Callable[[MetricRun], float | None]:
        METRICS.add(name, RateMetric(name, help, better, fn, tuple(needs)), fn)
        return fn

    return add


__all__ = ["METRICS", "MetricRun", "RateMetric", "register_metric"]
