"""A_min (Chen, Ye, Zhou, *Adaptively Robust LLM Inference Optimization under Prediction
Uncertainty*, arXiv 2508.14544): shortest-first scheduling on the *lower end* of an interval
prediction of the output length, refined while the request runs.

What the paper says (abstract and its model; the pseudo-code was not reachable from here)
-----------------------------------------------------------------------------------------
Every request's output lies in a predicted interval ``[l, u]`` (``alpha = l / u`` measures
the prediction's accuracy). ``A_max`` plans with ``u`` and never overflows; ``A_min`` "initially
treats the predicted lower bound as the output length and dynamically refines this estimate
during inferencing", cancelling (restarting) jobs when memory would overflow; its competitive
ratio is ``O(log(1 / alpha))``. The model has identical prompts, all jobs at time 0, unit-time
rounds, no preemption other than cancellation. With exact predictions (``alpha = 1``) A_min is
the hindsight shortest-first H-SF (the claim ``amin-hsf-optimal`` checks its optimality).

What exactly is simulated
-------------------------
* **Interval.** The instance format has no interval predictions, so the lower end is made
  from the true length: ``l_i = max(1, ceil(alpha * O_i))`` (``alpha`` a parameter). This reads
  the truth, so the policy is *hypothetical* (semantics section 6); nothing else reads ``O``.
* **Estimate.** ``o~_i = l_i`` at arrival. A request that has generated ``g`` tokens and has not
  finished is known to have ``O > g``, so after every batch a running request's estimate
  becomes ``max(o~_i, g + 1)``, and so does an evicted request's.
* **Admission** is MC-SF's (:mod:`optsched.policies.mcsf`) with ``o~`` as the lengths: running
  requests are kept, waiting ones are admitted in ascending ``o~`` (ties: arrival, instance
  order) while equation (1) of the online paper holds with the estimates (KV <= ``M`` at every
  estimated completion time); the scan stops at the first that fails. Budgets, long-prompt
  chunking: as MC-SF.
* **Overflow.** Estimates may be short, so the running requests' real KV after the next batch
  can exceed ``M``; the paper detects the overflow and cancels jobs, our semantics never
  exceed ``M`` (semantics section 3), so the cancellation happens in the batch that would
  overflow: running requests are evicted (recompute) in *ascending estimate* (ties: fewer
  generated tokens, then the most recently admitted) until the batch fits. *Our reading:*
  the reachable text does not say which jobs are cancelled; the smallest estimate is the
  least sunk work when prompts are equal. Evicted requests keep their generated tokens (our
  recompute semantics) and rejoin the queue with their raised estimate.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from ..plugins import ParamSpec, open_unit_interval
from .mcsf import MCSF
from .registry import register
from .simulator import Plan, SimView


def lower_ends(output: np.ndarray, alpha: float) -> np.ndarray:
    """``l_i = max(1, ceil(alpha * O_i))``: the interval's lower end made from the truth."""
    return np.array([max(1, math.ceil(alpha * int(o) - 1e-9)) for o in output], np.int64)


class AMin(MCSF):
    """A_min; see the module docstring."""

    #: this exact class runs on the compiled kernel (MC-SF's kernel with A_min's estimates and victims;
    #: :func:`optsched.policies.fast.fast_config`); a subclass runs the Python path
    fast_kernel = "amin"

    def __init__(self, alpha: float = 0.5):
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha!r}")
        self.alpha = alpha

    def bind(self, view: SimView) -> None:
        super().bind(view)
        capM = (self.M // self.b) * self.b
        # the estimate o~ starts at the interval's lower end (capped like MC-SF's predictions)
        self.est = np.minimum(lower_ends(view.known_output, self.alpha),
                              capM - view.prompt + 1).astype(np.int64)
        self.arrival = view.arrival.tolist()
        self.qheap: list[tuple[int, float, int]] = []
        self.waiting = self.qheap  # MC-SF's loop tests the queue for emptiness
        self.seq = np.zeros(view.n, np.int64)  # admission counter, for eviction ties
        self.nadmit = 0

    def _push(self, i: int) -> None:
        self.est[i] = max(int(self.est[i]), int(self.view.g[i]) + 1)
        heapq.heappush(self.qheap, (int(self.est[i]), self.arrival[i], i))

    def _head(self) -> int:
        return self.qheap[0][2]

    def _pop(self) -> None:
        i = heapq.heappop(self.qheap)[2]
        self.nadmit += 1
        self.seq[i] = self.nadmit

    def _victim_pos(self, run: np.ndarray) -> int:
        """Smallest estimate, then fewest generated tokens, then most recently admitted."""
        keys = np.lexsort((-self.seq[run], self.view.g[run], self.est[run]))
        return int(keys[0])

    def on_batch_end(self, plan: Plan, finished: np.ndarray) -> None:
        super().on_batch_end(plan, finished)
        g = self.view.g
        for i in self.running:  # unfinished after g tokens: O >= g + 1
            self.est[i] = max(int(self.est[i]), int(g[i]) + 1)


register(
    "amin",
    "A_min: shortest-first on the lower end l = ceil(alpha*O) of an interval prediction, raising "
    "a request's estimate to g + 1 while it outlives it; admits while KV <= M at every estimated "
    "completion (MC-SF's test), evicts smallest-estimate running requests when memory would "
    "overflow (lower end made from the true length: hypothetical)",
    "Chen, Ye, Zhou, Adaptively Robust LLM Inference Optimization under Prediction Uncertainty, "
    "arXiv 2508.14544, algorithm A_min (abstract and model; eviction order our reading)",
    hypothetical=True,
    params=(ParamSpec("alpha", float, 0.5, "lower end of the interval as a fraction of the true "
                      "output length (the paper's l/u accuracy); 1 = exact lengths (H-SF)",
                      check=open_unit_interval),),
    factory=AMin,
)

__all__ = ["AMin", "lower_ends"]
