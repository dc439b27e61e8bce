"""SVF, "Smallest Volume First" (Kong, Qi, Ye, Zhou, *Geometry-Aware Online Scheduling for LLM
Serving: From Theoretical Bound to System Practice*, arXiv 2606.22327; the SVF algorithm with
known output lengths, whose competitive ratio the paper tightens to 5).

What the paper says (abstract; the body was not reachable from here)
---------------------------------------------------------------------
Time-centric rules such as shortest-job-first ignore that a request's KV footprint grows
while it decodes: its memory use over time is a 2-D shape (a trapezoid: prompt height, one
more token per step), and SVF orders requests by the *area* of that shape, its
memory-time volume, smallest first.

What exactly is simulated
-------------------------
The **volume** of a request with ``I`` prompt tokens and (predicted) output ``O``: in our
unit-step semantics (semantics section 7, paper prompt ``s = I - 1``) it holds ``I + k`` KV
tokens after its ``k``-th batch, ``k = 0 .. O - 1``, so

    V = sum_{k=0}^{O-1} (I + k) = O * I + O * (O - 1) / 2        (tokens x batches)

which is the paper's ``o * s + o * (o + 1) / 2`` with ``s = I - 1``. Requests are admitted in
ascending ``V`` (ties: arrival, then instance order).

*Modelling choice (the paper's admission test was not reachable):* everything else is MC-SF
(:mod:`optsched.policies.mcsf`): running requests are kept, and waiting ones are admitted in
SVF order while equation (1) of the online paper -- KV <= ``M`` at every future completion
time -- holds, stopping at the first that fails. With exact lengths this never evicts, so the
order is the only difference from ``mcsf``. Token budget ``C``, ``max_batch_size``, prefill
budget and long-prompt chunking, predictions and the eviction safety net are MC-SF's.
Not built: the paper's *1-bit SVF* (one bit of length information per request) and its
"volume certificate" lower bound (the bound's statement was not reachable).
"""

from __future__ import annotations

import numpy as np

from .mcsf import MCSF
from .registry import register
from .simulator import SimView


def volume(prompt: np.ndarray, output: np.ndarray) -> np.ndarray:
    """Memory-time volume ``O * I + O * (O - 1) / 2`` of each request (module docstring),
    as exact integers (``O * (O - 1)`` is even)."""
    p = np.asarray(prompt, np.int64)
    o = np.asarray(output, np.int64)
    return o * p + o * (o - 1) // 2


class SVF(MCSF):
    """Smallest Volume First over MC-SF's memory-safe admission; see the module docstring."""

    #: this exact class runs on the compiled kernel (MC-SF's kernel with SVF's ranks;
    #: :func:`optsched.policies.fast.fast_config`); a subclass runs the Python path
    fast_kernel = "svf"

    def priority(self, view: SimView, est: np.ndarray) -> np.ndarray:
        """Admission key: the memory-time volume with the (predicted) output ``est``."""
        return volume(view.prompt, est)


register(
    "svf",
    "Smallest Volume First: keep running requests, admit waiting ones in ascending memory-time "
    "volume O*I + O(O-1)/2 while KV stays <= M at every future completion time (MC-SF's test); "
    "uses true output lengths when no predictions are given",
    "Kong, Qi, Ye, Zhou, Geometry-Aware Online Scheduling for LLM Serving, arXiv 2606.22327, "
    "SVF with known output lengths (abstract; admission test from Jaillet et al. eq. (1))",
    factory=SVF,
)

__all__ = ["SVF", "volume"]
