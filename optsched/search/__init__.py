"""Improvement search on schedules (above policies, bounds and oracles in the layer contract).

* :mod:`~optsched.search.lns` -- large-neighbourhood search (``optsched improve``): re-solve a
  window of batches exactly, keep the result when the evaluator says it is better;
* :mod:`~optsched.search.keysearch` -- priority-key search on the compiled simulator kernels;
* :mod:`~optsched.search.decoder` -- the key-decoder contract and the registry both share
  (a new decoder is one new module here); :mod:`~optsched.search.lns_decode`,
  :mod:`~optsched.search.one_prompt` and :mod:`~optsched.search.prefill_phase` hold decoders.
"""
