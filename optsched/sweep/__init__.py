"""Sweeps: grids of instances x seeds x methods, run on a local process pool or a Ray
cluster, results in a Parquet dataset, resumable.

* :mod:`.spec` -- the TOML spec and its checks (``load_spec``);
* :mod:`.cells` -- the spec expanded into cells with content keys, ``run_cell``;
* :mod:`.methods` -- what a cell runs: a policy, a formulation or a bound method;
* :mod:`.engine` -- the ``Engine`` protocol and registry; ``engines/`` holds ``local`` and ``ray``;
* :mod:`.results` -- the Parquet dataset (one part per finished cell, compacted);
* :mod:`.runner` -- ``run_sweep``; :mod:`.report` -- ``sweep report``.
"""

from __future__ import annotations

from .cells import Cell, expand, run_cell
from .engine import Engine, Outcome, engine_names, make_engine, register_engine
from .runner import RunSummary, pending, run_sweep
from .spec import MethodSpec, SpecError, SweepSpec, load_spec, parse_spec

__all__ = [
    "Cell", "expand", "run_cell", "Engine", "Outcome", "engine_names", "make_engine",
    "register_engine", "RunSummary", "pending", "run_sweep", "MethodSpec", "SpecError",
    "SweepSpec", "load_spec", "parse_spec",
]
