"""Workloads: where instances come from (semantics section 2).

* :mod:`~optsched.workloads.generators` -- synthetic and paper workloads (``optsched generate``);
* :mod:`~optsched.workloads.traces` -- real traces (Azure, BurstGPT, ...), the seeded window;
* :mod:`~optsched.workloads.hybrid` -- BROS's RT/BE hybrid workload and its closed loop;
* :mod:`~optsched.workloads.chat_lengths` -- chat prompt/output length distributions;
* :mod:`~optsched.workloads.fit` -- a linear cost model fitted to profiling data;
* :mod:`~optsched.workloads.capacity` -- the KV capacity ``M`` from model size and GPU memory.

Above the policies in the layer contract (``pyproject.toml``): the hybrid workload's closed
loop runs a policy to decide when the next request arrives.
"""
