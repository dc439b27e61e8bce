"""Sweep engine throughput: cells per second and per-cell overhead, local pool vs Ray.

Two specs: 200 cheap cells (policy simulations on the online paper's family, n = 10) and
20 solves (hindsight IP, n = 5, each proven optimal in about a second). For each engine the
whole ``run_sweep`` is timed from a fresh output directory (engine start, workers, Parquet
writes, compaction included), next to the same cells run serially in this process with no
engine (the cells' own cost)::

    per-cell overhead = (wall x workers - serial) / cells

i.e. worker-seconds per cell spent on anything but the cell (engine start included; "1st cell"
is the time to the first finished cell, "after 1st" the rate once running). Ray is skipped with a message
when it is not installed. Results go to stdout and ``studies/sweeps/results/sweep.json``::

    .venv/bin/python -m benchmarks.sweep [--workers 2] [--engines local,ray]

On a shared machine (other jobs on the same cores) wall times are inflated; say so when
quoting them and re-run on a quiet machine for clean figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHEAP = """
[sweep]
name = "bench-cheap"
trials = 50
objective = "total-latency"
[[instances]]
generator = "online-paper"
n = 10
[[methods]]
policy = "mcsf"
[[methods]]
policy = "fcfs"
[[methods]]
policy = "vllm"
[[methods]]
policy = "alpha-greedy"
"""

SOLVES = """
[sweep]
name = "bench-solves"
trials = 20
objective = "total-latency"
[[instances]]
generator = "online-paper"
n = 5
[[methods]]
formulation = "hindsight"
time_limit = 60
"""


def serial(spec) -> tuple[float, int]:
    from optsched.sweep import expand, run_cell

    cells = expand(spec)
    t0 = time.perf_counter()
    bad = sum(run_cell(c)["status"] == "failed" for c in cells)
    return time.perf_counter() - t0, bad


def engine_run(spec, engine: str, workers: int) -> dict:
    from optsched.sweep import run_sweep

    first: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        s = run_sweep(spec, Path(d) / "out", engine=engine, workers=workers, progress=False,
                      on_row=lambda row: first or first.append(time.perf_counter()))
        wall = time.perf_counter() - t0
    return {"wall": wall, "first": first[0] - t0, "cells": s.computed, "failed": s.failed}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--engines", default="local,ray")
    ap.add_argument("--out", default=str(ROOT / "studies" / "sweeps" / "results" / "sweep.json"))
    args = ap.parse_args(argv)
    from optsched.sweep import parse_spec

    engines = [e for e in args.engines.split(",") if e]
    if "ray" in engines:
        try:
            import ray  # noqa: F401
        except ImportError:
            print("ray: skipped (not installed; pip install 'optsched[ray]')", file=sys.stderr)
            engines.remove("ray")
    results = []
    print(f"{'spec':10s} {'engine':6s} {'cells':>5s} {'serial s':>8s} {'wall s':>7s} {'1st cell s':>10s} "
          f"{'cells/s':>7s} {'after 1st':>9s} {'overhead/cell s':>15s} {'speed-up':>8s}")
    for label, text in (("200 sims", CHEAP), ("20 solves", SOLVES)):
        spec = parse_spec(text)
        ser, bad = serial(spec)
        for eng in engines:
            r = engine_run(spec, eng, args.workers)
            n = r["cells"]
            row = {"spec": label, "engine": eng, "workers": args.workers, "cells": n,
                   "failed": r["failed"], "serial_s": ser, "wall_s": r["wall"],
                   "first_cell_s": r["first"], "cells_per_s": n / r["wall"],
                   "cells_per_s_after_first": (n - 1) / max(r["wall"] - r["first"], 1e-9),
                   "overhead_per_cell_s": (r["wall"] * args.workers - ser) / n,
                   "speedup_vs_serial": ser / r["wall"]}
            results.append(row)
            print(f"{label:10s} {eng:6s} {n:5d} {ser:8.2f} {r['wall']:7.2f} {r['first']:10.2f} "
                  f"{row['cells_per_s']:7.2f} {row['cells_per_s_after_first']:9.2f} "
                  f"{row['overhead_per_cell_s']:15.4f} {row['speedup_vs_serial']:8.2f}", flush=True)
    meta = {"cpus": os.cpu_count(), "load_avg_1m_at_end": os.getloadavg()[0],
            "note": "shared machine: other jobs ran on the same cores; wall times are inflated"}
    Path(args.out).write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    print(f"load average (1 min) at the end: {meta['load_avg_1m_at_end']:.2f} on {meta['cpus']} CPUs; "
          f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
