"""The process around a command: what the solvers' C code may write, and the compiled kernels.

* :mod:`~optsched.runtime.stdout_guard` -- keeps a solver library's C-level output off stdout
  (machine-readable output is one JSON document there);
* :mod:`~optsched.runtime.numba_load` -- calls a numba kernel from its on-disk cache without
  importing the compiler when it can.
"""
