"""The ``infermax`` formulation: InferMax's batch-indexed MILP (``formulations/infermax.md``).

Importing this package registers the formulation (:mod:`.solve`). Its modules:

* :mod:`.model`   -- the Big-M model, variants ``plain`` and ``tight`` (eqs. 1-26, P1-P6):
  :func:`build` -> :class:`InfermaxModel`;
* :mod:`.remainder` -- the tight model for ``kpm < 2 kpq`` (fitted cost models, eqs. 27-27b);
* :mod:`.flow`    -- the flow variant, identical requests aggregated (section 9, eqs. F1-F10);
* :mod:`.replay`  -- the batch-by-batch replay (eviction-only batches folded) that the flow
  and fill ``encode`` share;
* :mod:`.encode`  -- schedules <-> model vectors: replay, :func:`canonical` (eqs. 13-15),
  ``encode`` / ``decode``;
* :mod:`.horizon` -- the batch horizon ``J`` and the busy-time argument (sections 4, 6, eq. 21);
* :mod:`.solve`   -- ``run``: variant and ``J`` chosen, solved, decoded, polished (section 7).

Every built model (:class:`InfermaxModel`, the flow and remainder models) reaches the solver
through :class:`~optsched.formulations.base.BuiltModel`.
"""

from __future__ import annotations

from .encode import canonical
from .horizon import batch_overhead_lower_bound, entry_batches_upper_bound, request_work_lower_bound
from .model import DEFAULT_SLACK, MAX_BATCH_SLOTS, VARIANTS, InfermaxModel, build
from .solve import FLOW_MAX_ARCS, PARAMS, run

__all__ = ["DEFAULT_SLACK", "FLOW_MAX_ARCS", "InfermaxModel", "MAX_BATCH_SLOTS", "PARAMS",
           "VARIANTS", "batch_overhead_lower_bound", "build", "canonical",
           "entry_batches_upper_bound", "request_work_lower_bound", "run"]
