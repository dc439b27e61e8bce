"""Simulator and evaluator speed on the Azure LLM inference trace (conversation service,
19,366 requests): optsched's compiled fast path against its Python path (the reference),
side by side in one run, with the schedules checked identical batch for batch.

Setting of issue 3 / issue 31: trace arrivals, M = 100,000, C = 4,096, InferMax's
Llama-2-7B/A100 cost preset. For each size (first N requests of the trace) and policy it
prints the batches, the simulation time of each path (wall and process CPU: other jobs on a
shared machine inflate wall times, CPU is the steadier figure), their ratio, whether the
schedules are identical, and the evaluation time (compiled one-pass replay vs the vectorised
replay, same verdict and metrics)::

    .venv/bin/python bench/bench_simulate.py [--sizes 1000,19366] [--policies vllm,...]
        [--no-python]   # skip the slow Python path (fast path and evaluation only)

The first call of each kernel in a fresh process loads it from numba's cache (or compiles
it, the very first time, ~30-70 s CPU). ``--process`` instead measures whole processes:
``optsched simulate`` on the full trace (vLLM, ``-o .npz``; warm numba cache, and with
``--cold`` once with an empty cache) and ``optsched evaluate`` of that ``.npz``, wall and
CPU, plus the start-up pieces (``import numba``, first kernel calls); ``--before DIR`` runs
the same commands on an older source tree side by side::

    git archive dca90c4 | tar -x -C /tmp/before
    .venv/bin/python bench/bench_simulate.py --process --cold --before /tmp/before
Skips with a message when ``../shared/data`` is missing.
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

ROOT = Path(__file__).resolve().parents[1]
#: ``OPTSCHED_DATA`` if set (a worktree), else ``../shared/data`` (tests/shared_data.py's rule)
DATA = Path(os.environ.get("OPTSCHED_DATA", ROOT.parent / "shared" / "data"))
TRACE = DATA / "traces" / "AzureLLMInferenceTrace_conv.csv"
SIZES = (1000, 5000, 19366)
POLICIES = ("vllm", "sarathi", "fcfs", "infermax", "mcsf")
COLUMNS = ("batch_ptr", "entry_req", "entry_tokens", "evict_ptr", "evict_req")


def _timed(f, *args, **kwargs):
    c0, t0 = time.process_time(), time.perf_counter()
    out = f(*args, **kwargs)
    return out, time.perf_counter() - t0, time.process_time() - c0


def _same(a, b) -> bool:
    return a.ids == b.ids and all(np.array_equal(getattr(a, c), getattr(b, c)) for c in COLUMNS) \
        and np.array_equal(a.start, b.start, equal_nan=True)


def _child(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float, float, int]:
    """Wall, user CPU and system CPU seconds of one child process, its peak RSS (MB) and its
    exit code (``os.wait4``'s resource usage of that child alone: CPU is the steady figure on
    a shared machine)."""
    t0 = time.perf_counter()
    # cwd outside any tree: ``python -m`` puts the cwd first on sys.path, before PYTHONPATH
    proc = subprocess.Popen(cmd, env=env, cwd=tempfile.gettempdir(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    return wall, ru.ru_utime, ru.ru_stime, ru.ru_maxrss / 1024, proc.returncode


def _process_rows(label: str, src: Path, trace: str, repeat: int, cold: bool, tmp: Path) -> None:
    """Whole-process ``optsched simulate`` (full trace, vLLM, ``-o .npz``) and ``optsched
    evaluate`` (instance JSON + that .npz) with the source tree ``src`` first on the path:
    warm numba cache ``repeat`` times; with ``cold`` all runs share a fresh numba cache
    directory and the first one (compiling the kernels) is reported as the cold run."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    py = [sys.executable, "-m", "optsched"]
    npz, inst = tmp / f"{label}.npz", tmp / "conv.json"
    sim = [*py, "simulate", "--trace", trace, "--policy", "vllm", "--kv-capacity", "100000",
           "--max-batch-tokens", "4096", "--cost-model", "infermax-llama2-7b-a100", "-o", str(npz)]
    runs = [("simulate, warm cache", sim, env)] * repeat
    if cold:  # a fresh cache for this tree: the first run compiles, the others load
        env["NUMBA_CACHE_DIR"] = str(tmp / f"nbcache-{label}")
        runs = [("simulate, cold cache", sim, env)] + runs
    runs += [("evaluate .npz, warm", [*py, "evaluate", str(inst), str(npz)], env)] * repeat
    for what, cmd, e in runs:
        wall, user, sys_, rss, rc = _child(cmd, e)
        print(f"{label:<8} {what:<22} | {wall:>7.2f} {user:>7.2f} {sys_:>6.2f} | "
              f"{user + sys_:>7.2f} {rss:>7.0f} {'ok' if rc == 0 else f'exit {rc}':>6}", flush=True)


def _startup_rows(src: Path, cache: Path | None) -> None:
    """Start-up pieces in a fresh process: ``import numba``, then the first call of each kernel
    (numba's cached-kernel load: target initialisation, index check, unpickling)."""
    code = (
        "import time;t=time.perf_counter();import numba;a=time.perf_counter()-t\n"
        "from optsched.instance import Instance,Limits,Request;from optsched.cost import PRESETS\n"
        "from optsched.policies import simulate;from optsched import evaluate as E\n"
        "i=Instance('x',Limits(kv_capacity=1000,max_batch_tokens=64),"
        "PRESETS['infermax-llama2-7b-a100'],tuple(Request(f'r{k}',k*0.01,5,3) for k in range(50)))\n"
        "t=time.perf_counter();s=simulate(i,'vllm',fast=True);b=time.perf_counter()-t\n"
        "t=time.perf_counter();E._compiled(i,s);c=time.perf_counter()-t\n"
        "import optsched;print(f'{a:.2f} {b:.2f} {c:.2f} {optsched.__file__}')")
    env = {**os.environ, "PYTHONPATH": str(src)}
    if cache is not None:
        env["NUMBA_CACHE_DIR"] = str(cache)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=tempfile.gettempdir())
    parts = out.stdout.split()
    if out.returncode or len(parts) != 4:
        print(f"start-up pieces: failed ({out.stderr.strip().splitlines()[-1:]})")
        return
    print(f"start-up pieces (wall, fresh process, warm cache): import numba {parts[0]} s, "
          f"first simulate kernel call (cache load) {parts[1]} s, first evaluate kernel call "
          f"{parts[2]} s (optsched from {Path(parts[3]).parent.parent})")


def process_bench(args) -> None:
    """The whole-process table: this tree, and ``--before`` (an older source tree) if given."""
    from optsched.cost import PRESETS
    from optsched.instance import Limits
    from optsched.workloads.traces import load_azure

    with tempfile.TemporaryDirectory(prefix="bench_simulate_") as d:
        tmp = Path(d)
        load_azure(args.trace, Limits(kv_capacity=100_000, max_batch_tokens=4096),
                   PRESETS["infermax-llama2-7b-a100"]).save(tmp / "conv.json")
        head = (f"{'tree':<8} {'command':<22} | {'wall s':>7} {'user s':>7} {'sys s':>6} | "
                f"{'CPU s':>7} {'peak MB':>7} {'status':>6}")
        print(head)
        print("-" * len(head))
        trees = [("after", ROOT)] + ([("before", Path(args.before))] if args.before else [])
        for label, src in trees:
            _process_rows(label, src, args.trace, args.repeat, args.cold, tmp)
        for label, src in trees:
            print(f"{label}: ", end="")
            _startup_rows(src, tmp / f"nbcache-{label}" if args.cold else None)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--trace", default=str(TRACE))
    ap.add_argument("--no-python", action="store_true", help="skip the Python path")
    ap.add_argument("--process", action="store_true",
                    help="whole-process simulate / evaluate table only (child processes)")
    ap.add_argument("--before", metavar="DIR",
                    help="with --process: an older source tree (e.g. `git archive` of a commit) "
                    "measured the same way, side by side")
    ap.add_argument("--repeat", type=int, default=2, help="with --process: warm runs per command")
    ap.add_argument("--cold", action="store_true",
                    help="with --process: also one run with an empty numba cache (compiles)")
    args = ap.parse_args(argv)
    if not Path(args.trace).exists():
        print(f"skipped: trace {args.trace} not found (../shared/data missing)")
        return 0
    if args.process:
        process_bench(args)
        return 0
    from optsched import evaluate as E
    from optsched.cost import PRESETS
    from optsched.instance import Limits
    from optsched.policies import simulate
    from optsched.workloads.traces import load_azure

    limits = Limits(kv_capacity=100_000, max_batch_tokens=4096)
    cost = PRESETS["infermax-llama2-7b-a100"]
    full, t_load, _ = _timed(lambda: load_azure(args.trace, limits, cost))
    print(f"trace {Path(args.trace).name}: {full.n} requests loaded in {t_load:.2f} s; "
          f"M=100,000, C=4,096, cost preset {cost.preset}")
    # first calls load the kernels from numba's cache (compile them the very first time)
    tiny = full.replace(requests=full.requests[:50])
    _, t_sim0, c_sim0 = _timed(lambda: simulate(tiny, "vllm"))
    big = simulate(full.replace(requests=full.requests[:2000]), "vllm")
    inst2k = full.replace(requests=full.requests[:2000])
    _, t_ev0, c_ev0 = _timed(lambda: E._compiled(inst2k, big))
    print(f"first kernel calls (cache load or compile): simulate {t_sim0:.2f} s wall "
          f"{c_sim0:.2f} s CPU, evaluate {t_ev0:.2f} s wall {c_ev0:.2f} s CPU")
    head = (f"{'policy':<10} {'requests':>8} {'batches':>8} {'entries':>9} | "
            f"{'fast s':>7} {'cpu':>6} | {'python s':>8} {'cpu':>6} | {'ratio':>6} "
            f"{'same':>5} | {'eval1 s':>7} {'cpu':>6} | {'evalvec s':>9} {'cpu':>6} | "
            f"{'ratio':>6} {'same':>5}")
    print(head)
    print("-" * len(head))
    for policy in args.policies.split(","):
        for n in (int(x) for x in args.sizes.split(",")):
            inst = full if n >= full.n else full.replace(requests=full.requests[:n])
            s, t_f, c_f = _timed(simulate, inst, policy, fast=True)
            if args.no_python:
                t_p = c_p = float("nan")
                same = "-"
            else:
                r, t_p, c_p = _timed(simulate, inst, policy, fast=False)
                same = str(_same(s, r))
            ev1, t_e1, c_e1 = _timed(E._compiled, inst, s)
            saved = E.COMPILED_MIN_ENTRIES
            E.COMPILED_MIN_ENTRIES = 1 << 62
            try:
                ev2, t_e2, c_e2 = _timed(E.evaluate, inst, s)
            finally:
                E.COMPILED_MIN_ENTRIES = saved
            same_ev = ev1 is not None and ev1.metrics == ev2.metrics
            print(f"{policy:<10} {inst.n:>8} {s.n_batches:>8} {s.n_entries:>9} | "
                  f"{t_f:>7.3f} {c_f:>6.3f} | {t_p:>8.2f} {c_p:>6.2f} | {c_p / c_f:>5.0f}x "
                  f"{same:>5} | {t_e1:>7.3f} {c_e1:>6.3f} | {t_e2:>9.2f} {c_e2:>6.2f} | "
                  f"{c_e2 / c_e1:>5.0f}x {str(same_ev):>5}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
