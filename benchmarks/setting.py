"""The setting the trace benchmarks share: the Azure 2023 conversation trace (19,366 requests,
under :func:`optsched.workloads.traces.shared_data`: ``$OPTSCHED_DATA`` or ``../shared/data``),
its own arrivals, ``M = 100,000``, ``C = 4,096``, InferMax's Llama-2-7B/A100 cost preset
(``docs/results/speed.md``). Code that runs inside another source tree (``--before DIR``) spells
these out itself: an older tree has no ``benchmarks`` package."""

from __future__ import annotations

from optsched.workloads.traces import azure_trace

#: the full conversation trace (may be missing: each benchmark says so and skips)
TRACE = azure_trace("conv")
M, C = 100_000, 4096
PRESET = "infermax-llama2-7b-a100"
