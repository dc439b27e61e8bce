"""Per-iteration oracles (semantics section 8, ``oracles/``): exact answers to the one-batch
problems that policies solve greedily, used to measure the greedy's batch against the best one.

* :mod:`optsched.oracles.aptserve` -- Apt-Serve's per-iteration problem (Definition 1), an exact
  solver and the paper's greedy;
* :mod:`optsched.oracles.bros_ip` -- BROS's per-iteration problem as an integer program.

Above policies and the MILP layer in the layer contract (``pyproject.toml``). The exhaustive
search over whole schedules is a formulation (:mod:`optsched.formulations.exhaustive`); the
claim checkers and the manifest of known optima, which solve models, are
:mod:`optsched.checks`, above the solve pipeline.
"""

from __future__ import annotations
