"""Metrics computed from an evaluated schedule (beyond the objectives of ``evaluate``).

* :mod:`~optsched.metrics.serving` -- serving metrics (TTFT, TPOT, normalised latency, SLO
  attainment, goodput) of a schedule, read off its :class:`~optsched.evaluation.Evaluation`.

Just above the core in the layer contract (``pyproject.toml``): the simulator reports them, so
they sit below the policies.
"""
