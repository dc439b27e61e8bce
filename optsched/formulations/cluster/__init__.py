"""The ``cluster`` formulation: requests assigned to replicas of role ``both`` plus InferMax's
tight batch model per engine (``formulations/cluster.md``; :mod:`.model`, :mod:`.solve`), and
its independent cross-check, the exhaustive search over assignments (:mod:`.exhaustive`)."""

from __future__ import annotations

from . import solve  # noqa: F401  (registers the formulation)
