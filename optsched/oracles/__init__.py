"""Exact algorithms and claim checkers (semantics section 8, ``oracles/``): independent routes
to the numbers the formulations, bounds and policies produce, used to check them.

* :mod:`optsched.oracles.aptserve` -- Apt-Serve's per-iteration problem (Definition 1), an exact
  solver and the paper's greedy;
* :mod:`optsched.oracles.bros_ip` -- BROS's per-iteration problem as an integer program, to
  measure the greedy's batch against the best one;
* :mod:`optsched.oracles.claims` -- randomised checks of published claims (``optsched check-claim``);
* :mod:`optsched.oracles.manifest` -- the known optima of the shipped instances and the methods
  that agree on them (``python -m optsched.oracles.manifest``).

Above formulations, bounds and policies in the layer contract (``pyproject.toml``): an oracle
may run what it checks.
"""

from __future__ import annotations
