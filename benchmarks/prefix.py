"""Prefix reuse at trace scale: ``optsched simulate`` of the whole Mooncake conversation trace
(12,031 requests) with ``vllm-apc`` as a whole process (wall, CPU, peak memory; targets 2 s and
500 MB), the compiled simulator and the evaluator's replay of that schedule in process (target
0.5 s), and the same for the reuse-blind ``vllm`` on the same instance.

    python -m benchmarks.prefix                     # 3 repeats, the default instance
    python -m benchmarks.prefix --repeat 1 --policies vllm-apc

The instance is ``optsched generate mooncake --trace mooncake_conversation_trace.jsonl`` (block
size 512, M = the longest request = 126,976 tokens, C = 4,096, InferMax's Llama-2-7B/A100
preset), written to a temporary file. The machine is usually shared: CPU seconds are printed
next to wall seconds, with the load average before and after. Skips (exit 0, a message) when
the shared data is missing (``$OPTSCHED_DATA``, else ``../shared/data``)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TRACE = Path(os.environ.get("OPTSCHED_DATA", Path(__file__).resolve().parents[2] / "shared" /
                            "data")) / "traces" / "mooncake_conversation_trace.jsonl"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def whole_process(args: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak resident MB of one process."""
    code = ("import resource, subprocess, sys, time\n"
            "t = time.perf_counter()\n"
            "rc = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL, "
            "stderr=subprocess.DEVNULL)\n"
            "w = time.perf_counter() - t\n"
            "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "print(rc, w, u.ru_utime + u.ru_stime, u.ru_maxrss / 1024)\n")
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         check=True).stdout.split()
    if out[0] != "0":
        raise SystemExit(f"{' '.join(args)} exited {out[0]}")
    return float(out[1]), float(out[2]), float(out[3])


def in_process(inst_path: str, policy: str, repeat: int
               ) -> list[tuple[float, float, float, float]]:
    """(simulate wall, simulate CPU, evaluate wall, evaluate CPU) per repeat, each run warm
    (a first run loads the kernels and is not counted)."""
    from optsched.evaluation import evaluate
    from optsched.instance import Instance
    from optsched.policies import simulate

    inst = Instance.load(inst_path)
    s = simulate(inst, policy)
    evaluate(inst, s)
    rows = []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        s = simulate(inst, policy)
        t1, c1 = time.perf_counter(), time.process_time()
        ev = evaluate(inst, s)
        t2, c2 = time.perf_counter(), time.process_time()
        assert ev.feasible
        rows.append((t1 - t, c1 - c, t2 - t1, c2 - c1))
    m = ev.metrics
    print(f"  {policy}: {s.n_batches} batches, {s.n_entries} entries; hit rate "
          f"{m.get('hit_rate', 0):.4f}, mean TTFT {m['mean_ttft']:.1f} s, total latency "
          f"{m['total_latency']:.6g} s, peak KV {m['peak_kv']}")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--policies", default="vllm-apc,vllm")
    ap.add_argument("--instance", help="an instance file instead of the generated one")
    a = ap.parse_args(argv)
    if a.instance is None and not TRACE.exists():
        print(f"benchmarks.prefix: skipped, no {TRACE} (set OPTSCHED_DATA)")
        return 0
    optsched = [sys.executable, "-m", "optsched"]
    with tempfile.TemporaryDirectory() as tmp:
        inst = a.instance or str(Path(tmp) / "mooncake-conv.json")
        if a.instance is None:
            subprocess.run([*optsched, "generate", "mooncake", "--trace", str(TRACE), "-o", inst],
                           check=True, stdout=subprocess.DEVNULL)
        print(f"instance {inst}; load average {load()}")
        for policy in a.policies.split(","):
            out = str(Path(tmp) / f"{policy}.npz")
            whole_process([*optsched, "simulate", inst, "--policy", policy, "-o", out])  # warm
            runs = [whole_process([*optsched, "simulate", inst, "--policy", policy, "-o", out])
                    for _ in range(a.repeat)]
            w, c, mem = zip(*runs)
            print(f"optsched simulate {policy} -o {policy}.npz, whole process: "
                  f"{min(w):.2f}-{max(w):.2f} s wall, {min(c):.2f}-{max(c):.2f} s CPU, "
                  f"{max(mem):.0f} MB peak (load {load()})")
            rows = in_process(inst, policy, a.repeat)
            sw, sc, ew, ec = zip(*rows)
            print(f"  in process: simulate {min(sw):.2f}-{max(sw):.2f} s wall, "
                  f"{min(sc):.2f}-{max(sc):.2f} s CPU; evaluate {min(ew):.2f}-{max(ew):.2f} s "
                  f"wall, {min(ec):.2f}-{max(ec):.2f} s CPU (load {load()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
