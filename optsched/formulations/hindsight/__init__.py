"""The hindsight-optimal time-indexed IP (``formulations/hindsight.md``; equation numbers (H0)-(H25)).

This package owns the ``hindsight`` formulation and the ``hindsight-ff`` method on the same model;
importing it registers both (:mod:`.solve`, :mod:`.ffsolve`). Its modules, each importing only
those above it in this list:

* :mod:`.floors`     -- per-request floors from the memory area and the earliest slots;
* :mod:`.deadline`   -- the deadline-cardinality floors and rows (H22);
* :mod:`.starts`     -- the domain check and the conversions between start slots and
  schedules (H0), the objective of start slots (H5);
* :mod:`.heuristics` -- the list schedules and local search that give the upper bound (H8, H21);
* :mod:`.model`      -- the knobs, :class:`HindsightModel` and the builder (one function per
  equation group, each citing its numbers);
* :mod:`.solve`      -- ``run``, which certifies the horizon (H12);
* :mod:`.future`     -- the future-feasibility kernels (H23a-c);
* :mod:`.ffcuts`     -- the (H23) cut separation on the LP;
* :mod:`.lpbound`    -- the LP with (H23) rounds, its certified bound and reduced costs (H24);
* :mod:`.cpsearch`   -- CP-SAT over the starts reduced-cost fixing leaves (H25);
* :mod:`.ffsolve`    -- ``hindsight-ff``: (H23)-(H25) after the incumbent (H21).

Jaillet, Jiang, Podimata, Zhou, "Online Scheduling for LLM Inference with KV Cache
Constraints", appendix B.1: start variables ``x[i,t]`` (H1), unit-time batches, no
preemption, no chunking. A request started at slot ``t`` is prefilled (all ``I`` tokens) in
slot ``t``, which generates token 1, then decodes one token per slot and finishes in slot
``t + O - 1`` (completion time ``t + O``); its KV after slot ``t + k`` is ``I + k`` (the
paper's ``s + j`` while generating token ``j``, with ``I = s + 1``: semantics section 7, (H0)).

Two variants (``SolveOptions.params["variant"]``):

* ``"plain"`` -- the faithful transcription: ``x`` and running ``y`` binaries over one global
  horizon ``T`` (H2)-(H6), with ``T`` from the a priori bound (H9);
* ``"tight"`` (default) -- per-request start windows (H8), identical requests aggregated into
  integer start counts (H10) or ordered (H11), the late-start bucket that certifies the
  horizon (H12)-(H13), redundant rows dropped (H14), the objective-integrality gap (H15).

``build`` returns a :class:`HindsightModel` with ``encode(schedule)`` (warm start vector that
passes ``Model.check``) and ``decode(values)`` (a :class:`~optsched.schedule.Schedule` in which
batch ``j`` is time slot ``j``, with stated starts ``j``; empty slots are empty batches).
"""


from __future__ import annotations

from . import ffsolve  # noqa: F401  (registers hindsight-ff)
from .deadline import completion_floors, deadline_rows
from .floors import area_lower_bounds, earliest_slots, footprint, separation_cover
from .heuristics import greedy_starts, improve_starts, serial_starts
from .model import (
    DENSE_MEMORY_MAX_NONZEROS,
    MEMORY_FORMS,
    PARAMS,
    VARIANTS,
    HindsightModel,
    HindsightParams,
    build,
)
from .solve import best_known_starts, run, with_params
from .starts import (
    MAX_SLOTS,
    NotRepresentable,
    check_instance,
    objective_of_starts,
    schedule_from_starts,
    starts_from_schedule,
)

__all__ = [
    "DENSE_MEMORY_MAX_NONZEROS", "MAX_SLOTS", "MEMORY_FORMS", "PARAMS", "VARIANTS",
    "HindsightModel", "HindsightParams", "NotRepresentable", "area_lower_bounds",
    "best_known_starts", "build", "check_instance", "completion_floors", "deadline_rows",
    "earliest_slots", "footprint", "greedy_starts", "improve_starts", "objective_of_starts", "run",
    "schedule_from_starts", "separation_cover", "serial_starts", "starts_from_schedule",
    "with_params",
]
