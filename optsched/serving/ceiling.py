"""Certified capacity ceiling: the arrival rates at which the goodput
*upper* bound (``formulations/bounds.md`` B12) still allows a target attainment.

The workload is :func:`optsched.serving.rate_search.at_rate`'s: the trace's requests with one seeded
Poisson draw of arrivals scaled to the probed rate, the same draw the policies' sustainable
rate search probes. At a rate where the bound's attainment is below the target, *no*
schedule of that workload reaches the target; the search bisects geometrically like
:func:`optsched.serving.rate_search.search` and reports every probe, so a non-monotone bound is
visible. The certified statement is per probed rate: "at ``ruled_out_rate`` no scheduler
serves ``target`` of the requests within their SLOs".
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from ..bounds.goodput import GoodputBound, GoodputUpperBound, goodput_bound
from ..instance import Instance
from .rate_search import RateSearchError, at_rate


@dataclass(frozen=True)
class CeilingProbe:
    """The bound at one rate: ``value`` is its attainment share, ``allows`` value >= target."""

    rate: float
    value: float
    allows: bool
    seconds: float
    bound: GoodputBound

    def __post_init__(self) -> None:
        if not (self.rate > 0 and 0 <= self.value <= 1):
            raise RateSearchError(f"ceiling probe: rate {self.rate!r}, share {self.value!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"rate": self.rate, "value": self.value, "allows": self.allows,
                "seconds": self.seconds, "bound": self.bound.to_dict()}


@dataclass(frozen=True)
class CeilingResult:
    """``allowed_rate``: the highest probed rate the bound allows (None: not even ``lo``);
    ``ruled_out_rate``: the lowest probed rate it rules out (None: not even ``hi``)."""

    target: float
    allowed_rate: float | None
    ruled_out_rate: float | None
    probes: tuple[CeilingProbe, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "allowed_rate": self.allowed_rate,
                "ruled_out_rate": self.ruled_out_rate,
                "probes": [p.to_dict() for p in self.probes]}


def bound_share(instance: Instance, ttft_slo: float | None, tbt_slo: float | None,
                tpot_slo: float | None = None, over: str = "all",
                upper: GoodputUpperBound = goodput_bound) -> tuple[float, GoodputBound]:
    """The goodput bound's share: of every request (``over="all"``: Apt-Serve's
    ``ttft_tbt_attainment``) or of those with an SLO (``"with_slo"``: the evaluator's
    ``slo_attainment``). ``upper``: the goodput upper bound
    (:class:`~optsched.bounds.goodput.GoodputUpperBound`; B12 by default)."""
    gb = upper(instance, ttft=ttft_slo, tpot=tpot_slo, tbt=tbt_slo)
    share = gb.share if over == "all" else gb.attainment
    return (1.0 if share is None else float(share)), gb


def ceiling(instance: Instance, target: float, lo: float, hi: float, *, probes: int = 12,
            seed: int = 0, ttft_slo: float | None = None, tbt_slo: float | None = None,
            tpot_slo: float | None = None, over: str = "all",
            upper: GoodputUpperBound = goodput_bound) -> CeilingResult:
    """Bisect ``[lo, hi]`` for the rate where the goodput bound ``upper`` (B12 by default)
    falls below ``target`` (module docstring)."""
    if not (math.isfinite(target) and 0 < target <= 1):
        raise RateSearchError(f"--target for a ceiling is a share in (0, 1], got {target!r}")
    if not (0 < lo < hi and math.isfinite(hi)):
        raise RateSearchError(f"rates must satisfy 0 < LO < HI, got {lo!r}:{hi!r}")
    if probes < 2:
        raise RateSearchError(f"probes must be >= 2, got {probes!r}")
    if over not in ("all", "with_slo"):
        raise RateSearchError(f"over must be 'all' or 'with_slo', got {over!r}")
    done: list[CeilingProbe] = []

    def run(rate: float) -> bool:
        t0 = time.perf_counter()
        value, gb = bound_share(at_rate(instance, rate, seed), ttft_slo, tbt_slo, tpot_slo, over,
                                upper)
        done.append(CeilingProbe(rate, value, value >= target - 1e-12,
                                 time.perf_counter() - t0, gb))
        return done[-1].allows

    good: float | None = None
    bad: float | None = None
    if not run(lo):
        bad = lo
    elif run(hi):
        good = hi
    else:
        good, bad = lo, hi
    while good is not None and bad is not None and len(done) < probes:
        mid = math.sqrt(good * bad)
        if run(mid):
            good = mid
        else:
            bad = mid
    return CeilingResult(float(target), good, bad, tuple(done))


__all__ = ["CeilingProbe", "CeilingResult", "bound_share", "ceiling"]
