"""Certified lower bounds on the optimum, from a whole trace down to a handful of requests.

``lower_bound(instance, "total-latency")`` climbs a ladder of methods (cheapest first) and
returns a :class:`BoundResult`: a value never above the optimum over all feasible schedules
(semantics sections 3-5), with the method that produced it. Methods register by name
(:func:`register_bound`); each one's validity argument is in ``formulations/bounds.md``:

* ``request`` -- each request's own chain of batches (B3);
* ``work`` -- the server's busy time: batch counts from tokens, the KV area and batch
  size, plus entry costs, per arrival suffix or order statistic (B4-B6);
* ``srpt`` -- preemptive shortest-remaining-work on one server (B7);
* ``events`` -- mean TTFT: busy periods, each small one by ordered completion events that
  each pay a batch's fixed time (B14);
* ``mbt`` -- the mean-busy-time LP (preemptive smallest-work-first) plus per-request
  chain tails (B9, total latency);
* ``combinatorial`` -- the largest of the four, O(sum O + n log n);
* ``coupled`` -- a request's batching trades its server share against its own duration
  (memory-full batches are slow): an SRPT count per time (B10);
* ``dual`` -- the same trade-off in one interval-indexed relaxation, its Lagrangian dual
  over interval prices (B11, total latency);
* ``spread`` -- mean busy time plus each request's own decode at the batching its queue
  price makes worth it (uniformly spread pieces, weak duality of the mean-busy-time LP;
  B13, total latency);
* ``exact`` -- the exhaustive search / InferMax flow model when they fit (B8), solved by the
  one solve pipeline, which the caller hands down (``exact_solve``; the top-level
  ``optsched.lower_bound`` does);
* ``best`` -- the ladder within the time limit.
"""

from __future__ import annotations

from .base import (
    BoundError,
    BoundMethod,
    BoundResult,
    Budget,
    ExactSolve,
    bound_methods,
    lower_bound,
    register_bound,
)
from .floors import Floors

__all__ = ["BoundError", "BoundMethod", "BoundResult", "Budget", "ExactSolve", "Floors",
           "bound_methods", "lower_bound", "register_bound"]
