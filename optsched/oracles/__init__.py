"""Exact algorithms and claim checkers (semantics section 8, ``oracles/``).

* :mod:`optsched.oracles.exhaustive` -- exact state-graph search (formulation ``exhaustive``);
* :mod:`optsched.oracles.aptserve` -- Apt-Serve's per-iteration problem (Definition 1), an exact
  solver and the paper's greedy;
* :mod:`optsched.oracles.claims` -- randomised checks of published claims (``optsched check-claim``).
"""

from __future__ import annotations
