"""The knobs and the outcome of the exhaustive searches (:mod:`.search`, :mod:`.reuse`)."""

from __future__ import annotations

from dataclasses import dataclass

from ...schedule import Schedule
from ...solve_types import Status

DEFAULT_MAX_STATES = 200_000


@dataclass(frozen=True)
class SearchOptions:
    """Knobs of :func:`search` (``params`` of the ``exhaustive`` formulation)."""

    max_states: int = DEFAULT_MAX_STATES
    time_limit: float | None = None
    no_evictions: bool = False
    no_chunking: bool = False
    no_pausing: bool = False
    #: a known objective value (e.g. a feasible warm start's); nodes with f > bound are pruned
    upper_bound: float | None = None
    #: False switches off R3, R4, R6 (h = 0) and R8 -- for cross-checking the rules in tests
    pruning: bool = True

    @property
    def restricted(self) -> bool:
        return self.no_evictions or self.no_chunking or self.no_pausing


@dataclass(frozen=True)
class SearchResult:
    """Outcome of :func:`search`. ``objective`` is the search's own path cost (objective units)."""

    status: Status  # OPTIMAL, INFEASIBLE (no schedule under the restrictions) or NO_SOLUTION
    objective: float | None
    schedule: Schedule | None
    expanded: int
    generated: int
    runtime: float
    message: str | None = None


def state_path(nodes: dict, key) -> list:
    """The search nodes from the root to ``key``, root first (a node's third field is its
    parent's key, None at the root)."""
    path = []
    while key is not None:
        path.append(nodes[key])
        key = nodes[key][2]
    path.reverse()
    return path
