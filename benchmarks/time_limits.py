"""Wall time of ``optsched`` commands against their ``--time-limit`` (the whole command's budget).

    .venv/bin/python -m benchmarks.time_limits [--checkout DIR] [--only solve-200,bound-400]

Each case runs ``python -m optsched ...`` as a subprocess (interpreter start-up included, as a
user measures it) with the code of ``--checkout`` (default: this one) first on the path, and
prints the instance size, the limit, the wall time, the ratio and whether it holds the
promise of ``tests/solving/test_budget.py`` (10% + 1 s). Instances are the tests': trace-like
requests every 0.3 s (prompts 50-1500, outputs 10-170, M = 30,000) and identical requests
(I = 8, O = 4, M = 1,024) at time 0. Run it on the old code with
``git archive <commit> | tar -x -C /tmp/old`` and ``--checkout /tmp/old``; a case the old code
cannot finish is cut at ``--kill`` seconds and shown as ``> kill``. Bytecode is cached in a
temporary directory (as in the tests: an environment with PYTHONDONTWRITEBYTECODE compiles
numpy and matplotlib in every process); ``start-up s`` is ``optsched --version``'s wall time,
the floor of every case.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from optsched.cost import preset
from optsched.instance import Instance, Limits, Request


def trace_like(n: int, seed: int = 0) -> Instance:
    rng = np.random.default_rng(seed)
    reqs = tuple(Request(f"r{i}", 0.3 * i, int(rng.integers(50, 1500)),
                         int(rng.integers(10, 170))) for i in range(n))
    return Instance(f"trace-like-{n}", Limits(kv_capacity=30000, max_batch_tokens=4096),
                    preset("infermax-llama2-7b-a100"), reqs)


def identical(n: int) -> Instance:
    reqs = tuple(Request(f"r{i}", 0.0, 8, 4) for i in range(n))
    return Instance(f"identical-{n}", Limits(kv_capacity=1024, max_batch_tokens=4096),
                    preset("infermax-llama2-7b-a100"), reqs)


#: name -> (instance maker, size, command arguments after the instance, limit)
CASES = {
    "solve-200": (trace_like, 200, ["solve", "--objective", "total-latency", "--json"], 5),
    "solve-1000": (trace_like, 1000, ["solve", "--objective", "total-latency", "--json"], 5),
    "solve-200-T30": (trace_like, 200, ["solve", "--objective", "total-latency", "--json"], 30),
    "compare-1000": (trace_like, 1000, ["compare", "--policies", "vllm,sarathi", "--optimal",
                                        "--objective", "total-latency", "-o", "{tmp}/rep"], 5),
    "bound-400": (identical, 400, ["bound", "--json"], 3),
    "bound-1000": (identical, 1000, ["bound", "--json"], 3),
    "improve-200": (trace_like, 200, ["improve", "--from", "vllm", "--objective",
                                      "total-latency", "--json"], 5),
}


def timed(cmd: list[str], checkout: Path, tmp: Path, kill: float) -> float:
    """Wall seconds of ``optsched *cmd`` (inf when cut at ``kill``)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(checkout), PYTHONPYCACHEPREFIX=str(tmp / "pycache"))
    t0 = time.perf_counter()
    try:
        subprocess.run([sys.executable, "-m", "optsched", *cmd], env=env, capture_output=True,
                       stdin=subprocess.DEVNULL, timeout=kill, cwd=checkout)  # -m: cwd first
    except subprocess.TimeoutExpired:
        return float("inf")
    return time.perf_counter() - t0


def run_case(name: str, checkout: Path, tmp: Path, kill: float) -> tuple[int, float, float]:
    make, n, args, limit = CASES[name]
    path = tmp / f"{name}.json"
    make(n).save(path)
    cmd = [args[0], str(path), *[a.format(tmp=tmp) for a in args[1:]],
           "--time-limit", str(limit)]
    return n, float(limit), timed(cmd, checkout, tmp, kill)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkout", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--only", default=",".join(CASES))
    ap.add_argument("--kill", type=float, default=150.0, help="seconds before a run is cut")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        timed(["plot", "--help"], Path(a.checkout), Path(d), a.kill)  # fills the cache
        start = timed(["--version"], Path(a.checkout), Path(d), a.kill)
        print(f"checkout {a.checkout}; load average {os.getloadavg()[0]:.1f}; "
              f"start-up s {start:.1f}")
        print(f"{'case':<15} {'requests':>8} {'limit s':>8} {'wall s':>8} {'wall/limit':>10}  "
              "holds")
        for name in a.only.split(","):
            n, limit, took = run_case(name, Path(a.checkout), Path(d), a.kill)
            wall = f"> {a.kill:g}" if took == float("inf") else f"{took:.1f}"
            ratio = took / limit
            ok = took <= 1.1 * limit + 1
            print(f"{name:<15} {n:>8} {limit:>8g} {wall:>8} {ratio:>10.2f}  {'yes' if ok else 'NO'}",
                  flush=True)


if __name__ == "__main__":
    main()
