"""Time of the router layer (``optsched.cluster.simulate``) and the cluster evaluator on the
first ``n`` requests of the Azure 2023 conversation trace (its own arrivals, ``benchmarks/
setting.py``: ``M = 100,000``, ``C = 4,096``, InferMax's Llama-2-7B/A100 preset), over ``R``
identical replicas (routers ``rr``, ``lor``, ``least-kv``) or ``R/2`` prefill plus ``R/2``
decode engines (``pd``, a 25 GB/s link moving Llama-2-7B's 512 KiB of KV per token), with the
certified makespan floor (B17). The router layer runs the Python loop (no compiled path
yet). Each cell: simulate, evaluate (wall and CPU seconds of this process), batches, makespan,
feasibility; the load average is printed first::

    .venv/bin/python -m benchmarks.cluster [--sizes 1000,4000] [--replicas 2,8]
        [--routers rr,lor,least-kv,p2c,pd] [--policy vllm] [--profile 15]

``--profile K`` runs each simulate under :mod:`cProfile` and prints the ``K`` functions with
the most time of their own (where the router path's time goes; the profiler slows it).

Skips with a message when the trace is missing.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time
import warnings

from benchmarks.setting import PRESET, TRACE, C, M
from optsched.bounds.cluster import cluster_makespan_floor
from optsched.cluster import simulate
from optsched.cost import preset
from optsched.evaluation import evaluate
from optsched.instance import Cluster, Engine, Instance, Limits, TransferLink
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,4000")
    ap.add_argument("--replicas", default="2,8")
    ap.add_argument("--routers", default="rr,lor,least-kv,p2c,pd")
    ap.add_argument("--policy", default="vllm")
    ap.add_argument("--profile", type=int, default=0, metavar="K",
                    help="profile each simulate; print the K functions with most own time")
    args = ap.parse_args(argv)
    if not TRACE.exists():
        print(f"skipped: {TRACE} not found (set OPTSCHED_DATA)")
        return 0
    print(f"# benchmarks.cluster, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, "
          f"policy {args.policy}")
    print(f"{'n':>6} {'R':>3} {'router':9} {'sim wall':>9} {'sim cpu':>8} {'eval wall':>9} "
          f"{'eval cpu':>8} {'batches':>8} {'makespan':>10} {'floor':>10} feasible")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = load_azure(TRACE, Limits(kv_capacity=M, max_batch_tokens=C), preset(PRESET),
                          too_long="drop")
    for n in (int(x) for x in args.sizes.split(",")):
        base = full.replace(requests=full.requests[:n])
        for R in (int(x) for x in args.replicas.split(",")):
            for router in args.routers.split(","):
                inst = cluster_of(base, R, router)
                c0, w0 = time.process_time(), time.perf_counter()
                prof = cProfile.Profile() if args.profile else None
                if prof is not None:
                    prof.enable()
                s = simulate(inst, args.policy, router)
                if prof is not None:
                    prof.disable()
                sw, sc = time.perf_counter() - w0, time.process_time() - c0
                c0, w0 = time.process_time(), time.perf_counter()
                ev = evaluate(inst, s)
                ew, ec = time.perf_counter() - w0, time.process_time() - c0
                floor = cluster_makespan_floor(inst)
                print(f"{n:>6} {R:>3} {router:9} {sw:>9.2f} {sc:>8.2f} {ew:>9.2f} {ec:>8.2f} "
                      f"{s.n_batches:>8} {ev.metrics['makespan']:>10.2f} {floor:>10.2f} "
                      f"{ev.feasible}", flush=True)
                if prof is not None:
                    _top(prof, args.profile, s.n_batches)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
