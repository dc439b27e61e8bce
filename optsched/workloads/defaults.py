"""Defaults and argument checks shared by every generator (semantics section 2).

:mod:`~optsched.workloads.generators` and :mod:`~optsched.workloads.hybrid` both use them;
living here, neither has to import the other's internals.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..cost import DEFAULT_PRESET, CostModel, preset
from ..errors import InstanceError
from ..instance import Limits

#: InferMax defaults (``shared/data/README.md``): M = 100K tokens for Llama-2-7B on one
#: A100, C = 4096.
DEFAULT_KV_CAPACITY = 100_000
DEFAULT_MAX_BATCH_TOKENS = 4096


def default_limits(limits: Limits | None) -> Limits:
    """``limits``, or M = :data:`DEFAULT_KV_CAPACITY`, C = :data:`DEFAULT_MAX_BATCH_TOKENS`."""
    return limits if limits is not None else Limits(
        kv_capacity=DEFAULT_KV_CAPACITY, max_batch_tokens=DEFAULT_MAX_BATCH_TOKENS
    )


def default_cost(cost_model: CostModel | None) -> CostModel:
    """``cost_model``, or the default preset (:data:`optsched.cost.DEFAULT_PRESET`)."""
    return cost_model if cost_model is not None else preset(DEFAULT_PRESET)


def check_int(name: str, v: Any, lo: int = 1) -> int:
    """``v`` as an int if it is an integer ``>= lo`` (bools refused), else InstanceError."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise InstanceError(f"generator: {name} must be an integer >= {lo}, got {v!r}")
    return int(v)


def check_rate(rate: Any) -> float:
    """``rate`` as a float if it is a finite number ``> 0``, else InstanceError."""
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not (
        math.isfinite(rate) and rate > 0
    ):
        raise InstanceError(f"generator: rate must be a finite number > 0, got {rate!r}")
    return float(rate)


__all__ = ["DEFAULT_KV_CAPACITY", "DEFAULT_MAX_BATCH_TOKENS", "check_int", "check_rate",
           "default_cost", "default_limits"]
