"""The ``exhaustive`` formulation: exact search over the graph of schedule states, for tiny
instances (``docs/semantics.md``, the exhaustive search).

Importing this package registers the formulation (:mod:`.solve`). Its modules:

* :mod:`.search` -- the A*/Dijkstra search itself, its pruning rules R1-R8 and restrictions:
  :func:`search` (an optimum), :func:`search_between` (a window, for large-neighbourhood
  search);
* :mod:`.solve`  -- ``run``: the registered formulation (warm-start bound, hypotheses, the
  evaluator's check of the search's cost).

It lives below the oracles and the search layer that use it (no upward import).
"""

from __future__ import annotations

from .search import DEFAULT_MAX_STATES, SearchOptions, SearchResult, search, search_between
from .solve import PARAMS, run

__all__ = ["DEFAULT_MAX_STATES", "PARAMS", "SearchOptions", "SearchResult", "run", "search",
           "search_between"]
