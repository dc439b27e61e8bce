"""Metrics computed from an evaluated schedule (beyond the objectives of ``evaluate``).

* :mod:`~optsched.metrics.serving` -- serving metrics (TTFT, TPOT, normalised latency, SLO
  attainment, goodput) of a schedule, read off its :class:`~optsched.evaluation.Evaluation`.
* :mod:`~optsched.metrics.registry` -- the metric registry (``METRICS``): the metrics a rate
  search targets, registered by name (a new one is one new module here);
* :mod:`~optsched.metrics.rate` -- the rate search's metrics (normalised latency, mean JCT, JCT
  SLO attainment, TTFT / P99 TBT attainment).

Just above the core in the layer contract (``pyproject.toml``): the simulator reports them, so
they sit below the policies.
"""
