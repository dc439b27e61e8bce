"""Vidur's own simulator on optsched's requests, for ``benchmarks/simulate.py --vidur``.

Runs under *Vidur's* interpreter (a scratch venv with Vidur's requirements) with a Vidur
checkout first on ``PYTHONPATH``; it never imports optsched, and optsched never imports
Vidur (it is not vendored). Usage::

    python benchmarks/vidur_side.py REQUESTS.csv POLICY COST.json M BUDGET CAP

``REQUESTS.csv`` has Vidur's trace-replay columns (``arrived_at``, ``num_prefill_tokens``,
``num_decode_tokens``); ``POLICY`` is ``vllm`` or ``sarathi`` (Vidur's
``VLLMReplicaScheduler`` / ``SarathiReplicaScheduler``, unchanged); ``COST.json`` holds the
linear cost model's coefficients (optsched's preset, ``LinearCost.to_dict``), which price
every Vidur batch in place of Vidur's trained predictor (``_LinearPredictor``), so both
simulators charge the same seconds for the same batch; ``M`` is the KV capacity in tokens
(Vidur: ``num_blocks`` of ``block_size`` 1), ``BUDGET`` the tokens per batch (vLLM's
``max_tokens_in_batch``, counted by Vidur as batch size x longest entry; Sarathi's
``chunk_size``, decodes included) and ``CAP`` the running requests (``batch_size_cap``).

Vidur's whole ``Simulator`` runs: event queue, global and replica schedulers, stage
scheduler, metrics store (plots and files off). Prints one JSON line: import, set-up and
simulation times (wall and process CPU), batches, preemptions (restarts) and makespan (the
last completion).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time

T0, C0 = time.perf_counter(), time.process_time()

from vidur.config import (  # noqa: E402
    ClusterConfig,
    MetricsConfig,
    ReplicaConfig,
    SarathiSchedulerConfig,
    SimulationConfig,
    TraceRequestGeneratorConfig,
    VllmSchedulerConfig,
)
from vidur.entities import ExecutionTime  # noqa: E402
from vidur.scheduler.global_scheduler import base_global_scheduler  # noqa: E402
from vidur.simulator import Simulator  # noqa: E402

IMPORT_WALL, IMPORT_CPU = time.perf_counter() - T0, time.process_time() - C0


def batch_seconds(batch, k: dict) -> float:
    """optsched's ``LinearCost`` batch time (semantics section 4; ``cost.py``) of a Vidur
    batch: per entry ``k1 c + kpq c^2 + kpm c m + kpl m + kpr`` (prefill chunk of ``c``
    tokens over ``m`` cached) or ``k1 + kdm m + kdr`` (decode), then ``k0`` and the
    per-phase ``kpb`` / ``kdb``. ``m`` is the request's processed tokens before the batch."""
    t, pre, dec = 0.0, False, False
    for r, c in zip(batch.requests, batch.num_tokens):
        m = float(r.num_processed_tokens)
        if r.is_prefill_complete:
            dec = True
            t += k["k1"] * c + (k["kdm"] * m + k["kdr"])
        else:
            pre = True
            t += k["k1"] * c + (k["kpq"] * c * c + k["kpm"] * c * m + k["kpl"] * m + k["kpr"])
    t += k["k0"]
    if pre:
        t += k["kpb"]
    if dec:
        t += k["kdb"]
    return t


class _LinearPredictor:
    """Vidur's predictor interface (``get_execution_time(batch, stage)``) answering the linear
    cost model's seconds; the whole time goes into ``schedule_time`` (a CPU-overhead term
    Vidur adds as ms * 1e-3), every kernel term is 0."""

    def __init__(self, coeffs: dict, num_layers: int):
        self.k = coeffs
        self.layers = num_layers

    def get_execution_time(self, batch, pipeline_stage: int):
        ms = batch_seconds(batch, self.k) * 1e3
        return ExecutionTime(self.layers, *([0.0] * 14), ms, 0.0, 0.0, 0.0, 0.0)


def config(trace: str, policy: str, M: int, budget: int, cap: int, max_tokens: int,
           out: str) -> SimulationConfig:
    """One replica, one stage, block size 1, ``num_blocks = M``; requests' token totals
    unclipped (``max_tokens`` = the longest request; Vidur's memory planner only uses it
    for ``_max_batch_size``, which its vLLM and Sarathi schedulers do not read)."""
    sched_cls = VllmSchedulerConfig if policy == "vllm" else SarathiSchedulerConfig
    extra = {"max_tokens_in_batch": budget} if policy == "vllm" else {"chunk_size": budget}
    sched = sched_cls(block_size=1, num_blocks=M, batch_size_cap=cap, **extra)
    return SimulationConfig(
        cluster_config=ClusterConfig(num_replicas=1, replica_config=ReplicaConfig(),
                                     replica_scheduler_config=sched),
        request_generator_config=TraceRequestGeneratorConfig(trace_file=trace,
                                                             max_tokens=max_tokens),
        metrics_config=MetricsConfig(write_metrics=False, store_plots=False,
                                     store_request_metrics=False, store_batch_metrics=False,
                                     store_utilization_metrics=False,
                                     store_operation_metrics=False,
                                     store_token_completion_metrics=False,
                                     enable_chrome_trace=False, write_json_trace=False,
                                     output_dir=out, cache_dir=out),
    )


def main(argv: list[str]) -> int:
    trace, policy, cost_file = argv[0], argv[1], argv[2]
    M, budget, cap = int(argv[3]), int(argv[4]), int(argv[5])
    with open(cost_file) as f:
        coeffs = json.load(f)
    t0, c0 = time.perf_counter(), time.process_time()
    with open(trace) as f:  # the longest request (prompt + output), Vidur's max_tokens
        next(f)
        longest = max(int(a) + int(b) for _, a, b in (line.split(",") for line in f))
    cfg = config(trace, policy, M, budget, cap, longest, tempfile.mkdtemp(prefix="vidur_side_"))
    layers = cfg.cluster_config.replica_config.model_config.num_layers
    # the global scheduler builds its predictor through the registry: ours instead
    base_global_scheduler.ExecutionTimePredictorRegistry.get = \
        staticmethod(lambda *a, **kw: _LinearPredictor(coeffs, layers))
    batches = []
    sim = Simulator(cfg)
    replica_sched = sim.scheduler.get_replica_scheduler(0)
    inner = replica_sched._get_next_batch

    def counted():
        b = inner()
        if b is not None:
            batches.append(len(b.requests))
        return b

    replica_sched._get_next_batch = counted
    requests = [e._request for _, e in sim._event_queue]
    setup_wall, setup_cpu = time.perf_counter() - t0, time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    sim.run()
    run_wall, run_cpu = time.perf_counter() - t0, time.process_time() - c0
    sim._terminate = True
    import atexit
    atexit.unregister(sim._write_output)  # plots and files are off: nothing to write
    done = [r for r in requests if r.completed]
    print(json.dumps({
        "policy": policy, "requests": len(requests), "completed": len(done),
        "batches": len(batches), "entries": sum(batches),
        "restarts": sum(r.num_restarts for r in requests),
        "makespan": max(r.completed_at for r in done) if done else None,
        "import_wall": IMPORT_WALL, "import_cpu": IMPORT_CPU,
        "setup_wall": setup_wall, "setup_cpu": setup_cpu,
        "run_wall": run_wall, "run_cpu": run_cpu}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
