"""Total latency summed over parts of the window, each bounded alone: a valid bound, measured
and **not** registered as a rung (``formulations/bounds.md``, "What did not help": parts).

Restricting any schedule to a set ``G`` of its requests (dropping the other requests' entries,
evictions and swaps, every remaining batch kept at its start) is a schedule of ``G`` alone
whose batches are no longer and whose memory is no fuller, so no request of ``G`` completes
later. Hence for any partition of the requests into parts

    sum_i (C_i - a_i) >= sum_G LB(G)                                          (eq. P1)

for any certified total-latency bound ``LB(G)`` of part ``G`` alone. The parts are contiguous
in arrival order, at most :data:`MAX_PART` requests each, cut where a reference schedule (a
quick policy run, else every request at its own chain) has the fewest requests in the system
(:func:`cut_points`); each part's bound is the largest of the cheap rungs (``combinatorial``)
and ``stretch`` (B15) on the part alone, whose prices converge on a few dozen requests. The
value is the larger of that sum and ``combinatorial`` on the whole window. Every part is first
given its cheap bound, so a time limit still certifies. On the seed-1 windows of
``studies/bounds_load`` it is -0.9% to +2.3% from whole-window ``stretch`` on conversation and
below the cheap rungs on code, so ``best`` does not climb it (no registration);
``studies/bounds_load/parts.py`` measures it.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import replace

import numpy as np

from ..errors import OptschedError
from ..evaluation import evaluate
from ..instance import Instance
from ..policies import simulate
from ..solve_types import Objective
from .base import BoundError, BoundResult, Budget
from .combinatorial import combinatorial_bound
from .floors import Floors
from .stretch import dual_bound

#: most requests in a part (of 40 and 120, the better on the seed-1 conversation windows of
#: ``studies/bounds_load``: fewer cuts cross requests in the system)
MAX_PART = 120
#: fewest requests in a part, unless the window has fewer
MIN_PART = 10
#: ``stretch``'s dual iterations on a part when no time limit stops it first
PART_ITERATIONS = 80
#: the policy whose schedule places the cuts (a quick compiled one)
REFERENCE_POLICY = "vllm"


def reference_completions(instance: Instance, budget: Budget) -> tuple[np.ndarray, str]:
    """Completion times of a quick schedule (:data:`REFERENCE_POLICY`, replayed by
    ``evaluate``), or each request's own floor ``a_i + chain_i`` (B3) when it cannot run, and
    which one. Only where the cuts go depends on it, not the bound's validity."""
    try:
        ev = evaluate(instance, simulate(instance, REFERENCE_POLICY, deadline=budget.deadline))
        if ev.feasible and np.isfinite(ev.completion).all():
            return np.asarray(ev.completion, np.float64), f"a {REFERENCE_POLICY} schedule"
    except OptschedError:
        pass
    return instance.arrival + Floors.of(instance).chain, "the own chains"


def crossings(a: np.ndarray, c: np.ndarray) -> np.ndarray:
    """For requests sorted by arrival ``a`` with completions ``c``: ``x[k]`` = how many of the
    first ``k`` are still in the system when request ``k`` arrives (``c_j > a_k``), the
    interaction a cut before ``k`` ignores (``x[0] = 0``)."""
    done: list[float] = []
    x = np.zeros(a.size, np.int64)
    for k in range(a.size):
        x[k] = k - bisect.bisect_right(done, float(a[k]))
        bisect.insort(done, float(c[k]))
    return x


def cut_points(x: np.ndarray, max_part: int = MAX_PART, min_part: int = MIN_PART) -> list[int]:
    """Start positions of the parts (in arrival order): from each start, the next cut is the
    position in ``[start + min_part, start + max_part]`` with the fewest crossings ``x``, the
    latest among ties; the rest of the window is one part once it fits in ``max_part``."""
    n = x.size
    cuts = [0]
    while n - cuts[-1] > max_part:
        lo, hi = cuts[-1] + min(min_part, max_part), cuts[-1] + max_part
        seg = x[lo:hi + 1]
        k = lo + int(np.flatnonzero(seg == seg.min())[-1])
        cuts.append(k)
    return cuts


def _sub(instance: Instance, idx: np.ndarray) -> Instance:
    return Instance(instance.name, instance.limits, instance.cost_model,
                    tuple(instance.requests[int(j)] for j in idx))


def parts_bound(instance: Instance, objective: str, budget: Budget) -> BoundResult:
    """The bound of eq. P1 (module docstring), with the arrivals as given (its value is a
    sum of latencies, so no shift changes it; :func:`optsched.bounds.lower_bound`'s relative
    safety margin is the caller's to apply). Refuses what every rung refuses (hidden cache,
    clusters) and prefix reuse, where eq. P1 fails."""
    if instance.limits.hidden_cache or instance.has_prefix:
        raise BoundError("parts: hidden cache and prefix reuse are not modelled (a dropped "
                         "request's cached blocks may be what a kept request hits)")
    instance.require_one_engine("parts")
    if objective != Objective.TOTAL_LATENCY:
        raise BoundError(f"parts: objective must be total-latency, got {objective!r}")
    t0 = time.process_time()
    whole = combinatorial_bound(instance, objective, budget).value
    order = np.argsort(instance.arrival, kind="stable")
    ref, ref_name = reference_completions(instance, budget)
    x = crossings(instance.arrival[order], ref[order])
    cuts = cut_points(x, MAX_PART, MIN_PART)
    parts = [_sub(instance, order[s:e]) for s, e in zip(cuts, cuts[1:] + [instance.n], strict=True)]
    # every part's cheap bound first: a time limit still certifies the sum (eq. P1)
    vals = [combinatorial_bound(p, objective, budget).value for p in parts]
    improved = done = 0
    for k, p in enumerate(parts):
        if budget.expired:
            break
        share = replace(budget, deadline=None if budget.deadline is None else
                        time.perf_counter() + budget.left() / (len(parts) - k))
        v = dual_bound(Floors.of(p), share, PART_ITERATIONS).value
        done += 1
        if v > vals[k]:
            vals[k], improved = v, improved + 1
    total = float(sum(vals))
    value, method = (total, "parts") if total > whole else (whole, "combinatorial")
    return BoundResult(value, "parts", objective, notes=(
        f"parts: {len(parts)} parts of <= {MAX_PART} requests ({int(x[cuts[1:]].sum())} "
        f"requests in the system at the cuts in {ref_name}); stretch ran on "
        f"{done}, above the cheap rungs on {improved}; sum {total:.6g} against "
        f"combinatorial on the whole {whole:.6g} ({method} kept; "
        f"{time.process_time() - t0:.1f} s CPU)",))
