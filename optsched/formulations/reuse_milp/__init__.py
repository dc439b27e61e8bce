"""The ``reuse-milp`` formulation: a batch-slot MILP where the prefix cache's contents are
decisions (``formulations/reuse-milp.md``). Importing this package registers it (:mod:`.solve`).

* :mod:`.model` -- the model (R1-R9) and its decoding into a schedule with hits and drops;
* :mod:`.slots` -- the certified number of batch slots (R0);
* :mod:`.solve` -- ``run``: the registered formulation.
"""

from __future__ import annotations

from .solve import run

__all__ = ["run"]
