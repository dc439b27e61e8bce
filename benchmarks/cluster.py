"""Time of the router layer (``optsched.cluster.simulate``) and the cluster evaluator on the
first ``n`` requests of the Azure 2023 conversation trace (its own arrivals, ``benchmarks/
setting.py``: ``M = 100,000``, ``C = 4,096``, InferMax's Llama-2-7B/A100 preset), over ``R``
identical replicas (routers ``rr``, ``lor``, ``least-kv``, ``p2c``) or ``R/2`` prefill plus
``R/2`` decode engines (``pd``, a 25 GB/s link moving Llama-2-7B's 512 KiB of KV per token),
with the certified makespan floor (B17). Each cell: the compiled router path
(:mod:`optsched.cluster.fast`; ``pd`` has none and runs Python) and, up to ``--python-max``
requests, the Python loop beside it, its schedule checked equal to the compiled one; then
evaluate (wall and CPU seconds of this process; the compiled kernels are loaded before the
first cell), batches, makespan, feasibility; the load average is printed first::

    .venv/bin/python -m benchmarks.cluster [--sizes 1000,4000] [--replicas 2,8]
        [--routers rr,lor,least-kv,p2c,pd] [--policy vllm] [--python-max 1000]
        [--profile 15] [--process 3]

``--profile K`` runs each Python simulate under :mod:`cProfile` and prints the ``K``
functions with the most time of their own (where the Python router path's time goes; the
profiler slows it). ``--process K`` then times ``optsched simulate`` of the whole trace on 8
replicas with ``lor`` as a whole process, ``K`` times after a warm-up run (wall, CPU, peak
resident memory, from ``getrusage`` of the child) and prints its phases.

Skips with a message when the trace is missing.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import subprocess
import sys
import time
import warnings

import numpy as np

from benchmarks.prefix import whole_process
from benchmarks.setting import PRESET, TRACE, C, M
from optsched.bounds.cluster import cluster_makespan_floor
from optsched.cluster import simulate
from optsched.cost import preset
from optsched.evaluation import evaluate
from optsched.instance import Cluster, Engine, Instance, Limits, TransferLink
from optsched.schedule import Schedule
from optsched.workloads.traces import load_azure

#: Llama-2-7B: 2 (K, V) x 32 layers x 4096 hidden x 2 bytes = 512 KiB a token; 25 GB/s
LINK = TransferLink(bytes_per_token=2 * 32 * 4096 * 2, bandwidth=25e9, fixed=0.0)


def cluster_of(inst: Instance, R: int, router: str) -> Instance:
    if router == "pd":
        half = max(1, R // 2)
        engines = tuple(Engine(f"p{k}", "prefill") for k in range(half)) + \
            tuple(Engine(f"d{k}", "decode") for k in range(max(1, R - half)))
        return inst.replace(cluster=Cluster(engines, LINK))
    return inst.replace(cluster=Cluster(tuple(Engine(str(k)) for k in range(R))))


def _top(prof: cProfile.Profile, k: int, batches: int) -> None:
    """The ``k`` functions with the most own time, and their microseconds per batch."""
    st = pstats.Stats(prof)
    rows = sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:k]  # type: ignore[attr-defined]
    total = sum(v[2] for v in st.stats.values())  # type: ignore[attr-defined]
    print(f"#   profile: {total:.2f} s own time in all, {1e6 * total / batches:.0f} us a batch")
    for (file, line, fn), (_, calls, own, _cum, _) in rows:
        where = f"{os.path.relpath(file) if os.path.isabs(file) else file}:{line}({fn})"
        print(f"#   {own:8.2f} s {100 * own / total:5.1f}% {1e6 * own / batches:7.1f} us/batch "
              f"{calls:>9} calls  {where}")


def _timed(fn):
    """(result, wall seconds, CPU seconds) of one call."""
    c0, w0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def _same(a: Schedule, b: Schedule) -> bool:
    """Batch for batch the same cluster schedule (entries, evictions, stated starts, engines)."""
    cols = ("batch_ptr", "entry_req", "entry_tokens", "evict_ptr", "evict_req")
    return a.ids == b.ids and all(np.array_equal(getattr(a, c), getattr(b, c)) for c in cols) \
        and np.array_equal(a.start, b.start, equal_nan=True) \
        and np.array_equal(a.placement.batch_engine, b.placement.batch_engine)  # type: ignore


def _cell(inst: Instance, n: int, R: int, router: str, args: argparse.Namespace) -> None:
    """One row: the compiled path, the Python path beside it (small sizes), the evaluator."""
    s, cw, cc = _timed(lambda: simulate(inst, args.policy, router, fast=True))
    py = "-"
    if n <= args.python_max:
        prof = cProfile.Profile() if args.profile else None
        if prof is not None:
            prof.enable()
        ref, pw, pc = _timed(lambda: simulate(inst, args.policy, router, fast=False))
        if prof is not None:
            prof.disable()
        py = f"{pw:>9.2f} {pc:>8.2f} {'yes' if _same(s, ref) else 'NO'}"
    ev, ew, ec = _timed(lambda: evaluate(inst, s))
    floor = cluster_makespan_floor(inst)
    print(f"{n:>6} {R:>3} {router:9} {cw:>9.2f} {cc:>8.2f} {py:>22} {ew:>9.2f} {ec:>8.2f} "
          f"{s.n_batches:>8} {ev.metrics['makespan']:>10.2f} {floor:>10.2f} {ev.feasible}",
          flush=True)
    if n <= args.python_max and prof is not None:
        _top(prof, args.profile, s.n_batches)


def _process(repeat: int) -> None:
    """``optsched simulate`` of the whole trace, 8 replicas, lor, as a process (best of
    ``repeat`` after a warm-up that loads the kernels' cache), and its phases' clock."""
    cmd = [sys.executable, "-m", "optsched", "simulate", "--trace", str(TRACE), "--policy",
           "vllm", "--kv-capacity", str(M), "--max-batch-tokens", str(C), "--cost-model",
           PRESET, "--replicas", "8", "--router", "lor"]
    whole_process(cmd)  # warm: numba's cache on disk
    print(f"\n$ {' '.join(['optsched', *cmd[3:]])}")
    for _ in range(repeat):
        w, c, mem = whole_process(cmd)
        print(f"# whole process: {w:.2f} s wall, {c:.2f} s CPU (user + system), peak "
              f"{mem:.0f} MB; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
              flush=True)
    err = subprocess.run(cmd, capture_output=True, text=True).stderr
    print("# phases (wall clock since the process started):")
    for line in err.splitlines():
        if line.startswith("[optsched"):
            print(f"#   {line}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,4000")
    ap.add_argument("--replicas", default="2,8")
    ap.add_argument("--routers", default="rr,lor,least-kv,p2c,pd")
    ap.add_argument("--policy", default="vllm")
    ap.add_argument("--python-max", type=int, default=1000, metavar="N",
                    help="run the Python router loop beside the compiled path up to N requests")
    ap.add_argument("--profile", type=int, default=0, metavar="K",
                    help="profile each Python simulate; print the K functions with most own time")
    ap.add_argument("--process", type=int, default=0, metavar="K",
                    help="then time optsched simulate of the whole trace (8 replicas, lor) K times")
    args = ap.parse_args(argv)
    if not TRACE.exists():
        print(f"skipped: {TRACE} not found (set OPTSCHED_DATA)")
        return 0
    print(f"# benchmarks.cluster, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
          f"policy {args.policy}; compiled path, then the Python loop (same schedule: yes/NO)")
    print(f"{'n':>6} {'R':>3} {'router':9} {'sim wall':>9} {'sim cpu':>8} {'py wall':>9} "
          f"{'py cpu':>8} {'same':>4} {'eval wall':>9} {'eval cpu':>8} {'batches':>8} "
          f"{'makespan':>10} {'floor':>10} feasible")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = load_azure(TRACE, Limits(kv_capacity=M, max_batch_tokens=C), preset(PRESET),
                          too_long="drop")
        # the compiled kernels' cache loaded before the table (a process pays it once: see
        # --process)
        simulate(cluster_of(full.replace(requests=full.requests[:50]), 2, "lor"), args.policy,
                 "lor", fast=True)
        for n in (int(x) for x in args.sizes.split(",")):
            base = full.replace(requests=full.requests[:n])
            for R in (int(x) for x in args.replicas.split(",")):
                for router in args.routers.split(","):
                    _cell(cluster_of(base, R, router), n, R, router, args)
    if args.process:
        _process(args.process)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
