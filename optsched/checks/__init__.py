"""Checks of the whole toolkit against independent routes to the same numbers (semantics
section 8): each one *solves* what it checks, so this package sits above the one solve
pipeline in the layer contract (``pyproject.toml``: no upward import).

* :mod:`optsched.checks.claims` -- randomised checks of published claims (``optsched check-claim``)
  against exact optima (the exhaustive search, the hindsight IP) and the per-iteration oracles
  of :mod:`optsched.oracles`;
* :mod:`optsched.checks.manifest` -- the known optima of the shipped instances and the methods
  that agree on them (``python -m optsched.checks.manifest``).
"""

from __future__ import annotations
