"""Issue targets of the prefix-reuse walk at trace scale, in one run: ``optsched simulate``
of the whole Mooncake conversation trace with ``vllm-apc`` as a process (CPU seconds, peak
memory; targets 2 s and 500 MB), the same command split into its phases in process (reading
the instance, the compiled simulator, the evaluator's replay -- target 0.5 s --, writing the
``.npz``), the schedule's digest and objective values (to compare before/after a change: they
must not move), and ``optsched bound`` with each reuse-aware rung and ``best`` on a seeded
1,000-request window of both Mooncake traces (target 60 s each).

    python -m benchmarks.prefix_speed                 # everything (~3-5 min on a quiet machine)
    python -m benchmarks.prefix_speed --no-bounds     # the simulate part only
    python -m benchmarks.prefix_speed --no-process --no-bounds   # phases in process only

The machine is usually shared: CPU seconds (user + system) are the figure to trust; wall
seconds and the load average are printed next to them. Skips (exit 0, a message) when the
shared data is missing (``$OPTSCHED_DATA``, else ``../shared/data``). Feeds
``docs/results/prefix.md``, "Speed of the reuse walk"."""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from benchmarks.prefix import load, whole_process
from optsched.progress import table
from optsched.workloads.traces import shared_data

TRACES = {"conversation": "mooncake_conversation_trace.jsonl",
          "synthetic": "mooncake_synthetic_trace.jsonl"}
#: the rungs valid with block ids (formulations/bounds.md B19) and the whole ladder
BOUND_METHODS = ("reuse-request", "reuse-work", "reuse-srpt", "best")
OPTSCHED = [sys.executable, "-m", "optsched"]
GENERATE = ["--cost-model", "infermax-llama2-7b-a100"]


def digest(s) -> str:
    """sha1 of every column of a schedule (equal digests: the same schedule)."""
    h = hashlib.sha1()
    for a in (s.batch_ptr, s.entry_req, s.entry_tokens, s.entry_hit, s.evict_ptr, s.evict_req,
              s.drop_ptr, s.drop_block, s.start):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:12]


def phases(inst_path: str, out: str) -> None:
    """The simulate command's parts in this process, CPU and wall seconds each (the first
    calls load the compiled kernels from numba's cache; the warm rows repeat them)."""
    rows = []

    def step(name, fn):
        t, c = time.perf_counter(), time.process_time()
        r = fn()
        rows.append([name, f"{time.process_time() - c:.3f}", f"{time.perf_counter() - t:.3f}"])
        return r

    from optsched.data import load_instance
    from optsched.evaluation import evaluate
    from optsched.policies import get_spec, simulate_policy

    inst = step("read the instance JSON", lambda: load_instance(inst_path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # vLLM's "prompt longer than C" note
        s = step("simulate (first: kernel load)",
                 lambda: simulate_policy(inst, get_spec("vllm-apc").make()))
        step("simulate (warm)", lambda: simulate_policy(inst, get_spec("vllm-apc").make()))
    ev = step("evaluate (first: kernel load)", lambda: evaluate(inst, s))
    step("evaluate (warm)", lambda: evaluate(inst, s))
    step("save .npz", lambda: s.save(out, inst))
    print(f"\nin process, vllm-apc on the whole trace (load {load()}):")
    print(table(["part", "CPU s", "wall s"], rows))
    m = ev.metrics
    print(f"schedule {digest(s)}: {s.n_batches:,} batches, {s.n_entries:,} entries; "
          f"total latency {m['total_latency']!r}, mean TTFT {m['mean_ttft']!r}, makespan "
          f"{m['makespan']!r}, hit tokens {m.get('hit_tokens')!r}")


def bounds(tmp: str, trace_dir: Path, n: int, seed: int, time_limit: float) -> None:
    """``optsched bound`` per method on a seeded ``n``-request window of each trace, as a
    process: value, method that gave it, CPU and wall seconds."""
    rows = []
    for name, file in TRACES.items():
        inst = str(Path(tmp) / f"{name}-{n}-{seed}.json")
        subprocess.run([*OPTSCHED, "generate", "mooncake", "--trace", str(trace_dir / file),
                        "--consecutive", str(n), "--seed", str(seed), *GENERATE, "-o", inst],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for method in BOUND_METHODS:
            for objective in ("total-latency", "mean-ttft"):
                cmd = [*OPTSCHED, "bound", inst, "--method", method, "--objective", objective,
                       "--time-limit", str(time_limit), "--json"]
                t, c = time.perf_counter(), _children_cpu()
                p = subprocess.run(cmd, capture_output=True, text=True)
                w, cpu = time.perf_counter() - t, _children_cpu() - c
                try:
                    d = json.loads(p.stdout)
                    val, how = d.get("value"), d.get("method") or d.get("rung") or ""
                except json.JSONDecodeError:
                    val, how = None, (p.stderr.strip().splitlines() or ["?"])[-1][:60]
                rows.append([name, method, objective, p.returncode,
                             "n/a" if val is None else f"{val:.6g}", how, f"{cpu:.1f}",
                             f"{w:.1f}"])
                print(f"  {name} {method} {objective}: {cpu:.1f} s CPU", file=sys.stderr,
                      flush=True)
    print(f"\noptsched bound --time-limit {time_limit:g} on a {n}-request window (--consecutive "
          f"{n} --seed {seed}) of each Mooncake trace, one process each (load {load()}):")
    print(table(["trace", "method", "objective", "exit", "value", "rung", "CPU s", "wall s"],
                rows))


def _children_cpu() -> float:
    import resource

    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="processes per command (best kept)")
    ap.add_argument("--no-process", action="store_true")
    ap.add_argument("--no-phases", action="store_true")
    ap.add_argument("--no-bounds", action="store_true")
    ap.add_argument("--window", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-limit", type=float, default=60.0)
    a = ap.parse_args(argv)
    trace_dir = shared_data() / "traces"
    if not (trace_dir / TRACES["conversation"]).exists():
        print(f"benchmarks.prefix_speed: skipped, no {trace_dir} (set OPTSCHED_DATA)")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        inst = str(Path(tmp) / "mooncake-conv.json")
        subprocess.run([*OPTSCHED, "generate", "mooncake", "--trace",
                        str(trace_dir / TRACES["conversation"]), *GENERATE, "-o", inst],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out = str(Path(tmp) / "vllm-apc.npz")
        if not a.no_process:
            cmd = [*OPTSCHED, "simulate", inst, "--policy", "vllm-apc", "-o", out]
            whole_process(cmd)  # warm: numba's cache on disk
            w, c, mem = zip(*(whole_process(cmd) for _ in range(a.repeat)))
            print(f"optsched simulate of the whole conversation trace (12,031 requests), "
                  f"vllm-apc, -o X.npz, best of {a.repeat} processes (load {load()}):")
            print(table(["wall s", "CPU s (user+sys)", "peak MB", "target"],
                        [[f"{min(w):.2f}", f"{min(c):.2f}", f"{min(mem):.0f}",
                          "2 s, 500 MB"]]))
        if not a.no_phases:
            phases(inst, out)
        if not a.no_bounds:
            bounds(tmp, trace_dir, a.window, a.seed, a.time_limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
