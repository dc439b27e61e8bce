"""Simulator and evaluator speed on the Azure LLM inference trace (conversation service,
19,366 requests): optsched's compiled fast path against its Python path (the reference),
side by side in one run, with the schedules checked identical batch for batch.

Setting (:mod:`benchmarks.setting`): trace arrivals, M = 100,000, C = 4,096, InferMax's
Llama-2-7B/A100 cost preset. For each size (first N requests of the trace) and policy it
prints the batches, the simulation time of each path (wall and process CPU: other jobs on a
shared machine inflate wall times, CPU is the steadier figure), their ratio, whether the
schedules are identical, and the evaluation time (compiled one-pass replay vs the vectorised
replay, same verdict and metrics)::

    .venv/bin/python -m benchmarks.simulate [--sizes 1000,19366] [--policies vllm,...]
        [--no-python]   # skip the slow Python path (fast path and evaluation only)

The first call of each kernel in a fresh process loads it from numba's cache (or compiles
it, the very first time, ~30-70 s CPU). ``--process`` instead measures whole processes:
``optsched simulate`` on the full trace (vLLM, ``-o .npz``; warm numba cache, and with
``--cold`` once with an empty cache) and ``optsched evaluate`` of that ``.npz``, wall and
CPU, plus the start-up pieces (``import numba``, first kernel calls); ``--before DIR`` runs
the same commands on an older source tree side by side::

    git archive dca90c4 | tar -x -C /tmp/before
    .venv/bin/python -m benchmarks.simulate --process --cold --before /tmp/before

``--vidur PATH`` runs Vidur's own simulator (its vLLM and Sarathi replica schedulers, the
same requests and cost model: ``benchmarks/vidur_side.py`` under Vidur's interpreter,
``--vidur-python``) interleaved with optsched's fast path, Python path and whole
``optsched simulate`` process, in one table (``studies/speed/results/simulate-vidur.txt`` says what
differs between the two)::

    git -C /work/.mirror/microsoft+vidur/repo archive HEAD vidur | tar -x -C /tmp/vidur-src
    uv venv /tmp/vidur-venv && uv pip install --python /tmp/vidur-venv/bin/python numpy pandas \
        scikit-learn wandb kaleido ddsketch plotly_express matplotlib seaborn fasteners pyyaml
    .venv/bin/python -m benchmarks.simulate --vidur /tmp/vidur-src --repeat 2

Skips with a message when the trace is missing.
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

from benchmarks.setting import PRESET, TRACE, C, M

#: the source tree measured (the one this benchmark is in)
ROOT = Path(__file__).resolve().parents[1]
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


def _peak_wrapped(cmd: list[str], tmp: str) -> tuple[list[str], Path | None]:
    """``cmd`` under ``/usr/bin/time -f %M`` when it exists: a child forked from a large
    parent (this bench after a Python-path run) inherits the parent's RSS high-water mark in
    ``ru_maxrss``; ``time`` forks the command from a small process, so its figure is the
    command's own."""
    if not Path("/usr/bin/time").exists():
        return cmd, None
    out = Path(tmp) / f"peak-{os.getpid()}-{time.perf_counter_ns()}.txt"
    return ["/usr/bin/time", "-f", "%M", "-o", str(out), *cmd], out


def _peak_mb(path: Path | None, ru) -> float:
    if path is not None and path.exists():
        try:
            return int(path.read_text().split()[-1]) / 1024
        except (ValueError, IndexError):
            pass
    return ru.ru_maxrss / 1024


def _child(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float, float, int]:
    """Wall, user CPU and system CPU seconds of one child process, its peak RSS (MB) and its
    exit code (``os.wait4``'s resource usage of that child alone: CPU is the steady figure on
    a shared machine)."""
    cmd, peak = _peak_wrapped(cmd, tempfile.gettempdir())
    t0 = time.perf_counter()
    # cwd outside any tree: ``python -m`` puts the cwd first on sys.path, before PYTHONPATH
    proc = subprocess.Popen(cmd, env=env, cwd=tempfile.gettempdir(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    return wall, ru.ru_utime, ru.ru_stime, _peak_mb(peak, ru), proc.returncode


def _process_runs(label: str, src: Path, trace: str, repeat: int, cold: bool, tmp: Path
                  ) -> list[tuple[str, str, list[str], dict[str, str]]]:
    """Whole-process ``optsched simulate`` (full trace, vLLM, ``-o .npz``) and ``optsched
    evaluate`` (instance JSON + that .npz) with the source tree ``src`` first on the path:
    warm numba cache ``repeat`` times (simulate then evaluate, in turn); with ``cold`` all
    runs share a fresh numba cache directory and the first one (compiling the kernels) is
    the cold run."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    py = [sys.executable, "-m", "optsched"]
    npz, inst = tmp / f"{label}.npz", tmp / "conv.json"
    sim = [*py, "simulate", "--trace", trace, "--policy", "vllm", "--kv-capacity", "100000",
           "--max-batch-tokens", "4096", "--cost-model", "infermax-llama2-7b-a100", "-o", str(npz)]
    ev = [*py, "evaluate", str(inst), str(npz)]
    runs = [(label, "simulate, warm cache", sim, env), (label, "evaluate .npz, warm", ev, env)]
    runs = runs * repeat
    if cold:  # a fresh cache for this tree: the first run compiles, the others load
        env["NUMBA_CACHE_DIR"] = str(tmp / f"nbcache-{label}")
        runs = [(label, "simulate, cold cache", sim, env)] + runs
    return runs


def _process_rows(trees_runs: list[list[tuple[str, str, list[str], dict[str, str]]]]) -> None:
    """Run the trees' commands interleaved (tree A's k-th run, then tree B's: both see the
    same load on a shared machine) and print one row per run."""
    longest = max(len(r) for r in trees_runs)
    for k in range(longest):
        for runs in trees_runs:
            if k >= len(runs):
                continue
            label, what, cmd, e = runs[k]
            wall, user, sys_, rss, rc = _child(cmd, e)
            print(f"{label:<8} {what:<22} | {wall:>7.2f} {user:>7.2f} {sys_:>6.2f} | "
                  f"{user + sys_:>7.2f} {rss:>7.0f} {'ok' if rc == 0 else f'exit {rc}':>6}",
                  flush=True)


def _startup_rows(src: Path, cache: Path | None) -> None:
    """Start-up pieces in a fresh process: ``import numba``, then the first call of each kernel
    (numba's cached-kernel load: target initialisation, index check, unpickling)."""
    code = (
        "import time;t=time.perf_counter();import numba;a=time.perf_counter()-t\n"
        "from optsched.instance import Instance,Limits,Request;from optsched.cost import PRESETS\n"
        "from optsched.policies import simulate;from optsched.evaluation import evaluator as E\n"
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
        load_azure(args.trace, Limits(kv_capacity=M, max_batch_tokens=C),
                   PRESETS[PRESET]).save(tmp / "conv.json")
        head = (f"{'tree':<8} {'command':<22} | {'wall s':>7} {'user s':>7} {'sys s':>6} | "
                f"{'CPU s':>7} {'peak MB':>7} {'status':>6}")
        print(head)
        print("-" * len(head))
        trees = [("after", ROOT)] + ([("before", Path(args.before))] if args.before else [])
        _process_rows([_process_runs(label, src, args.trace, args.repeat, args.cold, tmp)
                       for label, src in trees])
        for label, src in trees:
            print(f"{label}: ", end="")
            _startup_rows(src, tmp / f"nbcache-{label}" if args.cold else None)


def _clipped(full, C: int):
    """The side-by-side instance, as Vidur's trace replay reads a trace with its default
    ``max_tokens`` = ``C``: a request with prompt + output > ``C`` has its prompt shortened
    to ``C - output`` (1,612 of the 19,366 conversation requests; no output exceeds 1,000).
    Vidur's vLLM never schedules an entry above its batch budget, including a preempted
    request's recomputation of prompt + generated tokens, so without this it stalls on the
    full trace; optsched chunks such prompts (with a warning). Both simulators get these
    same requests."""
    import dataclasses

    return full.replace(name=full.name + f"-vidur-max-tokens-{C}", requests=tuple(
        dataclasses.replace(r, prompt=min(r.prompt, C - r.output)) for r in full.requests))


def _vidur_row(vpy: str, vpath: str, csv: Path, policy: str, cost: Path, M: int,
               budget: int, cap: int) -> dict:
    """One Vidur process (``benchmarks/vidur_side.py`` under Vidur's interpreter): its JSON line
    plus the child's wall, CPU and peak RSS."""
    import json

    env = {**os.environ, "PYTHONPATH": vpath}
    cmd = [vpy, str(Path(__file__).resolve().parent / "vidur_side.py"), str(csv), policy, str(cost), str(M),
           str(budget), str(cap)]
    cmd, peak = _peak_wrapped(cmd, tempfile.gettempdir())
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=tempfile.gettempdir(), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    out = proc.stdout.read() if proc.stdout else ""
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0 or not out.strip():
        return {"error": f"exit {os.waitstatus_to_exitcode(status)}"}
    row = json.loads(out.strip().splitlines()[-1])
    row.update(proc_wall=wall, proc_cpu=ru.ru_utime + ru.ru_stime, peak_mb=_peak_mb(peak, ru))
    return row


def vidur_bench(args) -> None:
    """optsched (fast path, Python path, whole ``optsched simulate`` process) and Vidur's own
    simulator with its vLLM / Sarathi replica schedulers, interleaved, on the same requests
    priced by the same cost model: one table."""
    import json

    from optsched.cost import PRESETS
    from optsched.evaluation import evaluate
    from optsched.instance import Limits
    from optsched.policies import simulate
    from optsched.workloads.traces import load_azure

    P, cap = 512, 256
    full = load_azure(args.trace, Limits(kv_capacity=M, max_batch_tokens=C), PRESETS[PRESET])
    inst = _clipped(full, C)
    if args.vidur_requests:
        inst = inst.replace(requests=inst.requests[:args.vidur_requests])
    budgets = {"vllm": C, "sarathi": P}  # Vidur: vLLM max_tokens_in_batch, Sarathi chunk_size
    with tempfile.TemporaryDirectory(prefix="bench_vidur_") as d:
        tmp = Path(d)
        csv, cost, ijson = tmp / "requests.csv", tmp / "cost.json", tmp / "instance.json"
        with open(csv, "w") as f:
            f.write("arrived_at,num_prefill_tokens,num_decode_tokens\n")
            for r in inst.requests:
                f.write(f"{r.arrival!r},{r.prompt},{r.output}\n")
        cost.write_text(json.dumps(inst.cost_model.to_dict()))
        inst.save(ijson)
        vpy = args.vidur_python
        tiny = inst.replace(requests=inst.requests[:20])
        for policy in args.policies.split(","):  # kernels loaded before the table (cache)
            _, tw, tc = _timed(simulate, tiny, policy, fast=True)
            print(f"{policy}: kernel loaded from numba's cache in {tw:.2f} s wall {tc:.2f} s "
                  "CPU (once per process; in 'proc' below, not in 'sim')")
        vver = (Path(args.vidur) / "COMMIT").read_text().strip() \
            if (Path(args.vidur) / "COMMIT").exists() else "?"
        print(f"{inst.name}: {inst.n} requests, M={M:,}, C={C:,} (Sarathi P={P}, Vidur "
              f"chunk_size={P}), {cap} running requests at most, cost preset "
              f"{inst.cost_model.preset} on both sides; Vidur {vver} from {args.vidur}")
        head = (f"{'rep':>3} {'policy':<8} {'simulator':<23} | {'batches':>8} {'entries':>9} "
                f"{'evict':>6} {'makespan s':>11} | {'sim wall':>8} {'sim CPU':>7} | "
                f"{'proc wall':>9} {'proc CPU':>8} {'peak MB':>7}")
        print(head)
        print("-" * len(head))
        for rep in range(args.repeat):
            for policy in args.policies.split(","):
                rows = []
                s, tw, tc = _timed(simulate, inst, policy, fast=True)
                ev = evaluate(inst, s)
                rows.append(("optsched fast", s.n_batches, s.n_entries,
                             int(ev.metrics["evictions"]), ev.metrics["makespan"], tw, tc))
                r, tw, tc = _timed(simulate, inst, policy, fast=False)
                rows.append(("optsched python", r.n_batches, r.n_entries,
                             int(ev.metrics["evictions"]), ev.metrics["makespan"], tw, tc))
                same = _same(s, r)
                py = [sys.executable, "-m", "optsched", "simulate", str(ijson), "--policy",
                      policy, "-o", str(tmp / "s.npz")]
                pw, pu, ps, prss, prc = _child(py, {**os.environ, "PYTHONPATH": str(ROOT)})
                v = _vidur_row(vpy, args.vidur, csv, policy, cost, M, budgets[policy], cap)
                for name, nb, ne, evc, mk, tw, tc in rows:
                    proc = (f"{pw:>9.2f} {pu + ps:>8.2f} {prss:>7.0f}" if name == "optsched fast"
                            else f"{'':>9} {'':>8} {'':>7}")
                    print(f"{rep:>3} {policy:<8} {name:<23} | {nb:>8} {ne:>9} {evc:>6} "
                          f"{mk:>11.3f} | {tw:>8.3f} {tc:>7.3f} | {proc}", flush=True)
                if "error" in v:
                    print(f"{rep:>3} {policy:<8} {'vidur':<23} | {v['error']}")
                    continue
                print(f"{rep:>3} {policy:<8} {'vidur (whole Simulator)':<23} | {v['batches']:>8} "
                      f"{v['entries']:>9} {v['restarts']:>6} {v['makespan']:>11.3f} | "
                      f"{v['run_wall']:>8.3f} {v['run_cpu']:>7.3f} | {v['proc_wall']:>9.2f} "
                      f"{v['proc_cpu']:>8.2f} {v['peak_mb']:>7.0f}")
                fast_cpu, py_cpu = rows[0][6], rows[1][6]
                print(f"{'':>3} {policy:<8} ratios: Vidur/optsched simulation CPU "
                      f"{v['run_cpu'] / fast_cpu:.0f}x (fast) {v['run_cpu'] / py_cpu:.1f}x "
                      f"(python); whole process CPU {v['proc_cpu'] / (pu + ps):.1f}x, wall "
                      f"{v['proc_wall'] / pw:.1f}x; batches {v['batches'] / rows[0][1] - 1:+.2%}, "
                      f"makespan {v['makespan'] / rows[0][4] - 1:+.3%}; fast == python: {same}",
                      flush=True)


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
    ap.add_argument("--vidur", metavar="PATH",
                    help="a Vidur checkout (its 'vidur' package inside): optsched against "
                    "Vidur's simulator (vLLM and Sarathi replica schedulers), side by side")
    ap.add_argument("--vidur-python", default="/tmp/vidur-venv/bin/python",
                    help="with --vidur: the interpreter of Vidur's scratch venv")
    ap.add_argument("--vidur-requests", type=int,
                    help="with --vidur: only the first N requests (a quick check)")
    args = ap.parse_args(argv)
    if not Path(args.trace).exists():
        print(f"skipped: trace {args.trace} not found (../shared/data missing)")
        return 0
    if args.process:
        process_bench(args)
        return 0
    if args.vidur:
        if not (Path(args.vidur) / "vidur").is_dir() or not Path(args.vidur_python).exists():
            print(f"skipped: no Vidur checkout at {args.vidur} (a 'vidur' package inside) or no "
                  f"interpreter {args.vidur_python} (a venv with Vidur's requirements)")
            return 0
        if args.policies == ",".join(POLICIES):
            args.policies = "vllm,sarathi"
        vidur_bench(args)
        return 0
    from optsched.cost import PRESETS
    from optsched.evaluation import evaluator as E
    from optsched.instance import Limits
    from optsched.policies import simulate
    from optsched.workloads.traces import load_azure

    limits = Limits(kv_capacity=M, max_batch_tokens=C)
    cost = PRESETS[PRESET]
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
    head = (f"{'policy':<19} {'requests':>8} {'batches':>8} {'entries':>9} | "
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
            print(f"{policy:<19} {inst.n:>8} {s.n_batches:>8} {s.n_entries:>9} | "
                  f"{t_f:>7.3f} {c_f:>6.3f} | {t_p:>8.2f} {c_p:>6.2f} | {c_p / c_f:>5.0f}x "
                  f"{same:>5} | {t_e1:>7.3f} {c_e1:>6.3f} | {t_e2:>9.2f} {c_e2:>6.2f} | "
                  f"{c_e2 / c_e1:>5.0f}x {str(same_ev):>5}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
