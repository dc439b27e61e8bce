"""Prefix reuse at trace scale: the reuse-aware simulator and the evaluator's replay with
block ids on the Mooncake conversation trace, by size, side by side with the reuse-blind
``vllm`` on the same instances (its schedule gets the drops of every unheld block).

    python -m benchmarks.prefix                          # sizes 1000,4000,12031; 3 repeats
    python -m benchmarks.prefix --sizes 2000 --repeat 1  # quick
    python -m benchmarks.prefix --process                # also whole `optsched simulate` processes

Each size is the first N requests of ``mooncake_conversation_trace.jsonl`` read as ``optsched
generate mooncake --trace ... --limit N`` does (block size 512, ``M`` = the file's longest
request, 126,976 tokens, ``C = 4,096``, InferMax's Llama-2-7B/A100 preset). For every size
and policy: the compiled simulator (warm: a first run loads the kernels and is not counted)
and the evaluator on its schedule, wall and CPU seconds (the best of ``--repeat``), the
schedule's size and hit rate. ``--process``: ``optsched simulate`` of the whole trace as a
process (wall, CPU, peak memory; the targets are 2 s and 500 MB, and 0.5 s for the replay in
process). The machine is usually shared: CPU seconds are printed next to wall seconds, with
the load average. Skips (exit 0, a message) when the shared data is missing
(``$OPTSCHED_DATA``, else ``../shared/data``)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from optsched.progress import table
from optsched.workloads.traces import shared_data

TRACE = shared_data() / "traces" / "mooncake_conversation_trace.jsonl"
#: the policies measured: the reuse-aware ones with a compiled kernel, and the reuse-blind
#: reference
POLICIES = "vllm-apc,lpm,vllm"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def timed(fn):
    """(result, wall seconds, CPU seconds) of one call."""
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - t, time.process_time() - c


def measure(inst, policy: str, repeat: int) -> list:
    """One table row: the best wall and CPU seconds of ``repeat`` warm runs of the compiled
    simulator and of the evaluator on its schedule, and what the schedule is."""
    from optsched.evaluation import evaluate
    from optsched.policies import simulate

    with warnings.catch_warnings():  # vLLM's "prompt longer than C": said once in main
        warnings.simplefilter("ignore")
        s = simulate(inst, policy)  # warm: kernels loaded, not counted
    evaluate(inst, s)
    sim, ev_t = [], []
    for _ in range(repeat):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s, w, c = timed(lambda: simulate(inst, policy))
        sim.append((w, c))
        ev, w, c = timed(lambda s=s: evaluate(inst, s))
        ev_t.append((w, c))
        if not ev.feasible:
            raise SystemExit(f"{policy}: infeasible schedule at n = {inst.n} (a bug): "
                             f"{ev.violations[0]}")
    (sw, sc), (ew, ec) = min(sim), min(ev_t)
    m = ev.metrics
    return [inst.n, policy, s.n_batches, s.n_entries, f"{m.get('hit_rate', 0.0):.3f}",
            f"{sw:.3f}", f"{sc:.3f}", f"{ew:.3f}", f"{ec:.3f}"]


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


def processes(policies: list[str], repeat: int) -> None:
    """``optsched simulate`` of the whole trace as a process, per policy."""
    optsched = [sys.executable, "-m", "optsched"]
    with tempfile.TemporaryDirectory() as tmp:
        inst = str(Path(tmp) / "mooncake-conv.json")
        subprocess.run([*optsched, "generate", "mooncake", "--trace", str(TRACE), "-o", inst],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rows = []
        for policy in policies:
            out = str(Path(tmp) / f"{policy}.npz")
            cmd = [*optsched, "simulate", inst, "--policy", policy, "-o", out]
            whole_process(cmd)  # warm: the kernel caches on disk
            w, c, mem = zip(*(whole_process(cmd) for _ in range(repeat)))
            rows.append([policy, f"{min(w):.2f}", f"{min(c):.2f}", f"{max(mem):.0f}"])
        print(f"\noptsched simulate of the whole trace (12,031 requests) -o X.npz, whole "
              f"process, best of {repeat} (load {load()}):")
        print(table(["policy", "wall s", "CPU s", "peak MB"], rows))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,4000,12031",
                    help="first N requests of the trace, comma-separated")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--policies", default=POLICIES)
    ap.add_argument("--process", action="store_true",
                    help="also time whole `optsched simulate` processes of the whole trace")
    a = ap.parse_args(argv)
    if not TRACE.exists():
        print(f"benchmarks.prefix: skipped, no {TRACE} (set OPTSCHED_DATA)")
        return 0
    from optsched.workloads.mooncake import mooncake_instance

    policies = a.policies.split(",")
    print(f"Mooncake conversation trace, first N requests, b = 512, M = 126,976, C = 4,096, "
          f"infermax-llama2-7b-a100; compiled simulator, best of {a.repeat} warm runs "
          f"(load before: {load()}); prompts longer than C are chunked (vllm and vllm-apc "
          "warn about it, silenced here)")
    rows = []
    for n in (int(x) for x in a.sizes.split(",")):
        inst, w, c = timed(lambda n=n: mooncake_instance(TRACE, limit=n))
        print(f"  n = {inst.n}: read and built in {w:.2f} s wall, {c:.2f} s CPU; "
              f"{inst.prefix_index.n_listed} block ids", flush=True)
        rows += [measure(inst, p, a.repeat) for p in policies]
    print(table(["requests", "policy", "batches", "entries", "hit rate", "simulate s",
                 "simulate CPU s", "evaluate s", "evaluate CPU s"], rows))
    print(f"(load after: {load()})")
    if a.process:
        processes(policies, a.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
