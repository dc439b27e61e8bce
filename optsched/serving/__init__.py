"""Serving capacity: how high an arrival rate a policy sustains within its SLO.

* :mod:`~optsched.serving.load` -- an instance's offered load: its arrival rate against the
  mix's saturated throughput, a certified and an achievable side (docs/semantics.md
  section 4);
* :mod:`~optsched.serving.rate_search` -- the highest rate at which a policy meets an SLO on a
  workload (``optsched capacity``), on the metrics of :mod:`optsched.metrics.registry`;
* :mod:`~optsched.serving.ceiling` -- the rate no policy can beat, from the goodput bound.

Above policies and bounds in the layer contract (``pyproject.toml``): it runs the first and
reads the second.
"""
