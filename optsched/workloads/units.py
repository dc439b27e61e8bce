"""Units that look off by 1,000: a cost model in milliseconds, arrivals in milliseconds.

optsched's times are seconds (docs/semantics.md section 5; ``optsched.cost``). A cost model
copied from a paper's per-layer millisecond table, or a trace whose timestamps are
milliseconds, passes every validity check and silently prices an engine a thousand times
slower, or a load a thousand times lighter. These checks are warnings (a real engine or a
real trace may sit at an extreme), each naming the number that looks wrong and the unit
expected.
"""

from __future__ import annotations

import numpy as np

from ..cost import LinearCost
from ..instance import Instance

#: a one-request decode batch (1,000 cached tokens) at or above this many seconds looks like
#: milliseconds: real engines take 5-30 ms (``optsched.cost.PRESETS``: 5.5-16.4 ms)
SLOW_DECODE_SECONDS = 1.0
#: arrivals whose median gap is this many times a median request's whole service time alone
#: (its prefill and every decode) look like milliseconds: real serving traces (Azure,
#: ``docs/results/load.md``) have gaps below one request's service time, and a trace at
#: a load of 1% is no serving study
SPARSE_FACTOR = 100.0
#: ... and at least this many seconds apart (a sparse trace of short requests stays quiet)
SPARSE_MIN_GAP = 60.0


def cost_unit_warning(cm) -> str | None:
    """The warning for a linear cost model whose one-request decode batch takes a second or
    more (:data:`SLOW_DECODE_SECONDS`), else None."""
    if not isinstance(cm, LinearCost):
        return None
    t = cm.decode_batch_time(1, 1000.0)
    if t < SLOW_DECODE_SECONDS:
        return None
    return (f"cost model: a one-request decode batch (1,000 cached tokens) takes {t:.4g} s "
            f"(k0 = {cm.k0:g}); engines take milliseconds: were the coefficients given in "
            "milliseconds? optsched's cost models are in seconds")


def arrival_unit_warning(inst: Instance) -> str | None:
    """The warning for arrivals whose median gap is :data:`SPARSE_FACTOR` times a median
    request's service time alone and at least :data:`SPARSE_MIN_GAP` seconds, else None."""
    cm = inst.cost_model
    if not isinstance(cm, LinearCost) or inst.n < 3:
        return None
    gaps = np.diff(np.sort(inst.arrival))
    gaps = gaps[gaps > 0]
    if gaps.size < 2:
        return None
    gap = float(np.median(gaps))
    prompt, output = float(np.median(inst.prompt)), float(np.median(inst.output))
    prefill = cm.k0 + cm.kpb + cm.kpr + cm.k1 * prompt + cm.kpq * prompt * prompt
    decodes = max(output - 1.0, 0.0) * cm.decode_batch_time(1, prompt + output / 2)
    service = prefill + decodes
    if gap < SPARSE_MIN_GAP or gap < SPARSE_FACTOR * service:
        return None
    return (f"arrivals: the median gap between arrivals is {gap:.4g} s, {gap / service:.3g} "
            f"times a median request's service time alone ({service:.3g} s): were the "
            "arrivals given in milliseconds? optsched's arrivals are in seconds")


def unit_warnings(inst: Instance) -> list[str]:
    """Every units warning for ``inst`` (cost model, arrivals), in that order."""
    return [w for w in (cost_unit_warning(inst.cost_model), arrival_unit_warning(inst)) if w]


__all__ = ["arrival_unit_warning", "cost_unit_warning", "unit_warnings"]
