"""Run the speed instruments, one after another, each in its own process (``make bench``).

    python -m benchmarks                 # every instrument at its quick setting (a few minutes)
    python -m benchmarks simulate bounds # only these
    python -m benchmarks --full          # each at its own defaults (the published settings; long)
    python -m benchmarks --list

Each instrument prints its own table; this prints the command before it, the load average and
the wall and CPU seconds after it, and exits 1 if any instrument failed. Instruments that need
the shared data (``$OPTSCHED_DATA``) say so and skip when it is missing.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

#: name -> (what it measures, quick arguments); ``--full`` runs each without arguments
INSTRUMENTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "evaluate": ("the evaluator on a schedule of ~5 million entries", ("--entries", "1000000")),
    "simulate": ("simulation and evaluation on the full Azure conversation trace, compiled path",
                 ("--sizes", "19366", "--no-python")),
    "startup": ("where the seconds of one simulate / evaluate process go", ("--repeat", "1")),
    "milp_build": ("building a MILP with a million nonzeros", ()),
    "bounds": ("the certified bound rungs on the full traces", ("--repeat", "1")),
    "plot": ("the Gantt chart of large schedules", ("--sizes", "400,2000")),
    "plan_checks": ("checking every policy plan", ("--n", "500")),
    "python_only": ("the policies without a compiled kernel", ("--size", "500", "--seeds", "0")),
    "ecoserve": ("EcoServe's scheduling overhead against vLLM's", ("--limit", "2000")),
    "time_limits": ("commands against their --time-limit", ("--only", "solve-200,bound-400")),
    "sweep": ("sweep engine throughput (local pool; Ray when installed)", ("--engines", "local")),
    "arch_stats": ("the import graph and function lengths of optsched/", ()),
    "cluster": ("the router layer and the cluster evaluator on trace prefixes",
                ("--sizes", "1000", "--replicas", "2")),
    "cluster_bounds": ("every certified cluster bound on the full conversation trace",
                       ("--size", "4000", "--replicas", "2")),
    "cluster_exact": ("exact cluster optima: the cluster MILP's reach by size",
                      ("--sizes", "4", "--seeds", "0")),
    "prefix": ("prefix reuse: simulate and evaluate on the Mooncake trace by size",
               ("--sizes", "1000,4000", "--repeat", "1")),
    "hindsight_search": ("the hindsight model's local search: decode speed and reach by budget",
                         ("--ns", "20,40", "--seeds", "0", "--budgets", "500", "--lists", "20")),
    "prefix_exact": ("exact optima with prefix reuse: the exhaustive search's reach by size",
                     ("--sizes", "2,3", "--seeds", "0", "--time-limit", "10")),
}


def run(name: str, args: tuple[str, ...]) -> int:
    cmd = [sys.executable, "-m", f"benchmarks.{name}", *args]
    print(f"\n## {name}: {INSTRUMENTS[name][0]}\n$ {' '.join(cmd[1:])}  (load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())})", flush=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    code = subprocess.call(cmd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(f"-- {name}: exit {code}, {time.perf_counter() - t0:.1f} s wall, {cpu:.1f} s CPU",
          flush=True)
    return code


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="instruments to run (default: all)")
    ap.add_argument("--full", action="store_true", help="each at its own defaults (long)")
    ap.add_argument("--list", action="store_true", help="list the instruments and exit")
    a = ap.parse_args(argv)
    if a.list:
        for name, (what, quick) in INSTRUMENTS.items():
            print(f"{name:12} {what}  [quick: {' '.join(quick) or '-'}]")
        return 0
    unknown = [n for n in a.names if n not in INSTRUMENTS]
    if unknown:
        print(f"unknown instrument(s) {', '.join(unknown)}; known: {', '.join(INSTRUMENTS)}",
              file=sys.stderr)
        return 2
    failed = []
    with tempfile.TemporaryDirectory(prefix="benchmarks-") as tmp:
        for name in a.names or list(INSTRUMENTS):
            args = () if a.full else INSTRUMENTS[name][1]
            if name == "sweep":  # never overwrite the recorded result
                args = (*args, "--out", os.path.join(tmp, "sweep.json"))
            if run(name, args) != 0:
                failed.append(name)
    print(f"\n{len(a.names or INSTRUMENTS) - len(failed)} instrument(s) ran"
          + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
