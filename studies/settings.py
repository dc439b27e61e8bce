"""The settings the studies share, each defined once.

Every study runs from the repository root as a module (``python -m studies.bounds.trace_bounds``),
so ``studies`` is importable without touching ``sys.path``. The shared data (traces, profiling
tables; never copied into the repository) is :func:`optsched.workloads.traces.shared_data`:
``$OPTSCHED_DATA`` if set, else ``../shared/data`` beside the repository.

Two settings recur:

* **seeded trace windows** (``docs/results/bounds.md``, ``serving.md``, ``claims.md``): ``size``
  consecutive requests of an Azure 2023 trace from a start row drawn by a seed
  (:func:`optsched.workloads.traces.seeded_window`, the same windows as ``optsched generate azure
  --consecutive N --seed S``), their own arrivals re-based to 0, ``M = 30,000``, ``C = 8,192``,
  InferMax's Llama-2-7B/A100 preset, requests with ``I + O - 1 > M`` dropped;
* **notebook 08's setting** (Apt-Serve; the capacity ceiling and goodput in ``serving.md``): the
  conversation trace, ``M = 10,000`` in blocks of 16, ``C = 4,096``, hidden cache, the same preset,
  TTFT SLO 1 s and P99 TBT SLO 1 s, target attainment 0.9 of every request, rates probed on
  2-64 req/s (Poisson arrivals of seed 0 scaled to each rate).
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from pathlib import Path

from optsched.cost import preset
from optsched.instance import Instance, Limits
from optsched.workloads.traces import (
    azure_trace,
    load_trace_instance,
    read_trace,
    seeded_window,
    shared_data,
    trace_to_instance,
    window_instance,
    window_start,
)

#: the shared data directory (``$OPTSCHED_DATA`` or ``../shared/data``)
DATA = shared_data()
TRACES = DATA / "traces"
PROFILING = DATA / "profiling"
#: the cost model of every trace study
PRESET = "infermax-llama2-7b-a100"

# -- seeded trace windows ----------------------------------------------------------------
M, C = 30_000, 8192
#: requests per window
WINDOW = 1200
KINDS = ("conv", "code")

# -- notebook 08's (Apt-Serve) setting -----------------------------------------------------
APTSERVE_LIMITS = Limits(kv_capacity=10_000, max_batch_tokens=4096, block_size=16, hidden_cache=True)
TTFT, TBT, TARGET = 1.0, 1.0, 0.9
#: the rates (req/s) a sustainable-rate search probes between
LO, HI = 2.0, 64.0


def trace_path(kind: str, who: str = "this study") -> Path:
    """The Azure trace of ``kind`` (``conv`` or ``code``); exits 2 with a one-line message
    naming the path when it is missing."""
    path = azure_trace(kind, DATA)
    if not path.exists():
        sys.exit(f"{who}: trace file {path} not found (set OPTSCHED_DATA)")
    return path


def window(kind: str, seed: int, size: int = WINDOW) -> Instance:
    """The seeded window of the module docstring, named ``<file stem>-seed<seed>-rows<lo>-<hi>``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the count of dropped requests
        return window_instance(trace_path(kind), size, seed, Limits(kv_capacity=M, max_batch_tokens=C),
                               preset(PRESET), format="azure", too_long="drop")


def window_row(kind: str, seed: int, size: int = WINDOW) -> int:
    """The first trace row of :func:`window` ``(kind, seed, size)``."""
    return window_start(read_trace(trace_path(kind), format="azure").n, size, seed)


def aptserve_instance(n: int) -> Instance:
    """The first ``n`` conversation requests in notebook 08's setting (prompts longer than
    ``C`` dropped, as the notebook does)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_trace_instance(str(trace_path("conv")), APTSERVE_LIMITS, preset(PRESET),
                                   limit=n, too_long="drop", name="azure-conv")


def aptserve_windows(seeds: list[int], n: int) -> list[tuple[str, Instance]]:
    """Notebook 08's instance (the first 400 conversation requests) and the seeded ``n``-request
    windows of ``seeds``, in notebook 08's setting, each with its label."""
    raw = read_trace(trace_path("conv"), format="azure")
    cost = preset(PRESET)
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out.append(("first 400 (notebook 08)",
                    trace_to_instance(raw.subset(slice(0, 400)), APTSERVE_LIMITS, cost,
                                      name="conv-400", too_long="drop")))
        for s in seeds:
            out.append((f"window seed {s} (row {window_start(raw.n, n, s)})",
                        trace_to_instance(seeded_window(raw, n, s), APTSERVE_LIMITS, cost,
                                          name=f"conv-w{s}", too_long="drop")))
    return out


def load_line() -> str:
    """The date and the machine's load averages, for the header of a study's output (times
    depend on the load)."""
    return (f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
            f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
