"""Certified lower bounds on the optimum, from a whole trace down to a handful of requests.

``lower_bound(instance, "total-latency")`` climbs a ladder of methods (cheapest first) and
returns a :class:`BoundResult`: a value never above the optimum over all feasible schedules
(semantics sections 3-5), with the method that produced it. Methods register by name with
their place on the ladder (:func:`register_bound`: a ``rank`` and a ``cheap`` flag), so the
ladder is the registry (:func:`bound_methods`, :func:`rungs`); each one's validity argument
is in ``formulations/bounds.md``. The built-in ones, in ladder order:

* ``request`` -- each request's own chain of batches (B3); cheap;
* ``work`` -- the server's busy time: batch counts from tokens, the KV area and batch
  size, plus entry costs, per arrival suffix or order statistic (B4-B6); cheap;
* ``srpt`` -- preemptive shortest-remaining-work on one server (B7); cheap;
* ``mbt`` -- the mean-busy-time LP (preemptive smallest-work-first) plus per-request
  chain tails (B9, total latency); cheap;
* ``combinatorial`` -- the largest of the rungs declared ``cheap`` (the four above),
  O(sum O + n log n);
* ``events`` -- mean TTFT: busy periods, each small one by ordered completion events that
  each pay a batch's fixed time (B14);
* ``spread`` -- mean busy time plus each request's own decode at the batching its queue
  price makes worth it (uniformly spread pieces, weak duality of the mean-busy-time LP;
  B13, total latency);
* ``coupled`` -- a request's batching trades its server share against its own duration
  (memory-full batches are slow): an SRPT count per time (B10);
* ``dual`` -- the same trade-off in one interval-indexed relaxation, its Lagrangian dual
  over interval prices (B11, total latency);
* ``batches`` -- makespan: the generating batches whose KV fits together, each request held
  or dropped (refilled) between tokens, its first prefill in no more chunks than the batches
  before its first token: a small CP-SAT model (B18);
* ``exact`` -- the exhaustive search / InferMax flow model when they fit (B8), solved by the
  one solve pipeline, which the caller hands down (``exact_solve``; the top-level
  ``optsched.lower_bound`` does);
* ``reuse-request``, ``reuse-work``, ``reuse-srpt`` -- B3, B4-B6 and B7 valid with prefix reuse
  (B19: only what a hit cannot skip, shared blocks computed and held once); the only rungs
  ``best`` climbs on an instance with block ids;
* ``best`` -- the ladder within the time limit: ``combinatorial``, then every other rung that
  is not ``cheap`` and ranks below it, in rank order.

The goodput *upper* bound (B12) is another contract: :mod:`optsched.bounds.goodput`.
"""

from __future__ import annotations

from ..solve_types import BoundUnavailable
from .base import (
    BoundError,
    BoundMethod,
    BoundResult,
    Budget,
    ExactSolve,
    bound_methods,
    lower_bound,
    register_bound,
    rungs,
)
from .floors import Floors


def _subset_floor(instance, objective: str) -> float:
    """The cheap ladder, the cluster branch and bound's per-engine floor (eq. K10 of
    formulations/cluster.md)."""
    return lower_bound(instance, objective, "combinatorial").value


def _install() -> None:
    from ..formulations.cluster.bnb import set_subset_floor

    set_subset_floor(_subset_floor)


_install()

__all__ = ["BoundError", "BoundUnavailable", "BoundMethod", "BoundResult", "Budget", "ExactSolve", "Floors",
           "bound_methods", "lower_bound", "register_bound", "rungs"]
