"""Improvement search on schedules (above policies, bounds and oracles in the layer contract).

* :mod:`~optsched.search.lns` -- large-neighbourhood search (``optsched improve``): re-solve a
  window of batches exactly, keep the result when the evaluator says it is better;
* :mod:`~optsched.search.lns_decode` -- decoding a request order into a schedule for it.
"""
