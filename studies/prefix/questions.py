"""The questions of the prefix-reuse results page, on the seeded Mooncake windows of
``studies.prefix.study`` (the same windows: 300 consecutive requests from seeded start rows,
512-token blocks, ``M`` = the file's longest request, ``C = 8,192``, the Llama-2-7B/A100
preset, arrivals stretched to the point load 0.7). Per window:

* **policies with SLO goodput**: mean TTFT, total latency, P99 TTFT, hit rate and the SLO
  goodput of ``vllm`` (no caching), ``vllm-apc``, ``lpm``, ``dfs``, ``k-lpm``, ``belady``,
  ``lpm`` with the Belady cache, and the reuse-blind orders ``svf``, ``rank-i``,
  ``ttft-first``; every schedule replayed by ``optsched.evaluate``. The SLO is Apt-Serve's
  honest reading (``optsched.metrics.serving``, docs/semantics.md section 4): a request meets
  it when it finishes, its TTFT is at most ``TTFT_X`` times its prompt prefilled alone in one
  batch (``optsched.bounds.attribution.alone_work``: a per-request TTFT SLO, since the
  prompts run from 1K to 120K tokens) and its **longest** gap between tokens is at most
  ``TBT_SLO`` seconds; goodput = the share of requests that meet it.
* **the best improve schedule**: ``optsched improve`` refuses instances with block ids (its
  windows are solved by the reuse-blind exhaustive search), so it runs on the window with
  the block ids removed, from the best reuse-blind policy for the objective, for
  ``--improve-limit`` seconds; the schedule then gets the drops of every unheld block
  (``optsched.policies.reuse.auto_drops``) and is replayed on the window *with* ids (it
  claims no hits, so its batch times are unchanged and it is feasible there).
* **hit rate against KV capacity**: ``vllm-apc``, ``lpm`` and ``belady`` at ``M`` times
  1, 2, 8 and unbounded (every token of the window at once; ``belady`` at 1 and unbounded
  only), hit rate and mean TTFT, beside the unbounded-cache potential.
* **the published claims** at ``--claims-m`` times the window's ``M`` (0: unbounded; the
  first window recorded, conversation seed 0, ran at 0) and the arrivals compressed by
  ``--claims-squeeze`` (a queue long enough for an order to matter), SGLang's engine under
  each order (:data:`CLAIMS`): FCFS, pure LPM, LPM with SGLang's FCFS fallback above 128
  waiting, ``dfs``, ``k-lpm`` (k = 2): hit rate, mean, P99 and max TTFT, goodput.

Output: ``OUT.jsonl`` one window a line (CPU seconds per part, the load average); a rerun
skips the windows already there. ``--summary`` prints the results page's tables (it reads
the certified reuse bounds from ``studies/prefix/results.jsonl``).

    OPTSCHED_DATA=/work/shared/data nice -n 10 .venv/bin/python -m studies.prefix.questions
    .venv/bin/python -m studies.prefix.questions --summary > studies/prefix/questions.txt
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np

from studies.prefix.study import FILES, _timed, instance, without_ids
from studies.settings import DATA

POLICIES = (("vllm", {}), ("vllm-apc", {}), ("lpm", {}), ("dfs", {}), ("k-lpm", {}),
            ("belady", {}), ("svf", {}),
            ("rank-i", {}), ("ttft-first", {}))
#: reuse-blind starts for improve (run on the window without ids)
STARTS = ("vllm", "svf", "rank-i", "ttft-first")
OBJS = ("total-latency", "mean-ttft")
TTFT_X = 5.0
TBT_SLO = 1.0
#: multiples of the window's M; 0: unbounded (M = the window's total prompt and output tokens)
MULTS = (1, 2, 8, 0)
#: the policies of the capacity table at each multiple (belady has no compiled path: only at
#: the window's M, where it runs with the policies, and unbounded)
CAP_POLICIES = {1: ("vllm-apc", "lpm", "belady"), 2: ("vllm-apc", "lpm"),
                8: ("vllm-apc", "lpm"), 0: ("vllm-apc", "lpm", "belady")}
#: SGLang's engine (prefill priority, chunked prefill, LRU) under each order: fcfs_above=1 is
#: arrival order whenever two requests wait, fcfs_above=0 LPM always, 128 SGLang's default
CLAIMS = (("fcfs", "lpm", {"fcfs_above": 1}), ("k-lpm k=2", "k-lpm", {"k": 2}),
          ("lpm (pure)", "lpm", {"fcfs_above": 0}), ("lpm (fcfs above 128)", "lpm", {}),
          ("dfs", "dfs", {}))
#: the policies with a compiled kernel (the same schedules as the Python path, checked in CI)
COMPILED = ("vllm-apc", "lpm")


def ttft_slos(inst) -> np.ndarray:
    """Per request: ``TTFT_X`` times its prompt prefilled alone in one batch."""
    from optsched.bounds.attribution import alone_work

    return TTFT_X * alone_work(inst)[0]


def goodput(ev, slos: np.ndarray) -> float:
    """The share of requests that finish with TTFT <= their SLO and longest gap <= TBT_SLO
    (module docstring; ``optsched.metrics.serving``'s ``ttft_tbt_attainment`` per request)."""
    done = np.isfinite(ev.latency)
    met = done & (ev.ttft <= slos * (1 + 1e-12)) & (ev.max_tbt <= TBT_SLO * (1 + 1e-12))
    return float(met.mean())


def measure(inst, sched, slos) -> dict:
    from optsched.evaluation import evaluate

    ev = evaluate(inst, sched)
    assert ev.feasible, ev.violations[:1]
    out = {o: ev.objective(o) for o in OBJS}
    out["p99-ttft"] = float(np.percentile(ev.ttft, 99))
    out["max-ttft"] = float(np.max(ev.ttft))
    out["hit_rate"] = float(ev.metrics.get("hit_rate") or 0.0)
    out["goodput"] = goodput(ev, slos)
    return out


def run_policies(inst, slos, row) -> dict:
    from optsched.policies import simulate

    scheds = {}
    for name, kw in POLICIES:
        base = name.split("+")[0]
        s, t = _timed(lambda b=base, kw=kw: simulate(inst, b, fast=b in COMPILED or None,
                                                      **kw))
        row["policies"][name] = measure(inst, s, slos)
        row["cpu"][name] = round(t, 2)
        scheds[name] = s
    return scheds


def run_improve(inst, slos, row, limit: float) -> None:
    """Per objective: improve on the window without ids from the best reuse-blind start,
    then the drops of unheld blocks and the replay with ids (module docstring)."""
    from optsched.policies.reuse import auto_drops
    from optsched.search.lns import LNSOptions, improve

    blind = without_ids(inst)
    for o in OBJS:
        start = min(STARTS, key=lambda p: row["policies"][p][o])
        from optsched.policies import simulate

        s0 = simulate(blind, start)
        res, t = _timed(lambda s0=s0, o=o: improve(blind, s0, o, LNSOptions(
            time_limit=limit, seed=0, progress=False)))
        got = measure(inst, auto_drops(inst, res.schedule), slos)
        got.update(start=start, method=res.method, blind_value=res.objective)
        row["improve"][o] = got
        row["cpu"][f"improve {o}"] = round(t, 2)


def unbounded(inst) -> int:
    """A KV capacity no schedule can fill: every token of the window at once."""
    return int(inst.prompt.sum() + inst.output.sum())


def run_capacity(inst, row) -> None:
    from optsched.evaluation import evaluate
    from optsched.policies import simulate

    M = inst.limits.kv_capacity
    for k in MULTS:
        ik = inst.replace(limits=replace(inst.limits, kv_capacity=M * k or unbounded(inst)))
        for p in CAP_POLICIES[k]:
            if k == 1:  # the window's own M: the policies' runs
                row["capacity"][f"1:{p}"] = {q: row["policies"][p][q]
                                             for q in ("hit_rate", "mean-ttft")}
                continue
            ev, t = _timed(lambda p=p, ik=ik: evaluate(ik, simulate(ik, p, fast=p in COMPILED
                                                                         or None)))
            row["capacity"][f"{k}:{p}"] = {"hit_rate": float(ev.metrics.get("hit_rate") or 0),
                                           "mean-ttft": ev.objective("mean-ttft")}
            row["cpu"][f"cap {k} {p}"] = round(t, 2)


def run_claims(inst, row, squeeze: float, mult: int) -> None:
    from optsched.policies import simulate

    ic = inst.replace(limits=replace(inst.limits, kv_capacity=inst.limits.kv_capacity * mult
                                     or unbounded(inst)),
                      requests=tuple(replace(r, arrival=r.arrival * squeeze)
                                     for r in inst.requests))
    slos = ttft_slos(ic)
    for label, p, kw in CLAIMS:
        s, t = _timed(lambda p=p, kw=kw: simulate(ic, p, fast=p in COMPILED or None, **kw))
        row["claims"][label] = measure(ic, s, slos)
        row["cpu"][f"claims {label}"] = round(t, 2)


def goodput_ceiling(inst, slos: np.ndarray) -> dict:
    """The certified goodput ceiling of the window (``optsched.bounds.goodput``, B12r with
    block ids): at most this share of requests meets TTFT <= its SLO and every gap <= TBT_SLO
    in ANY schedule, with or without hits."""
    from optsched.bounds.goodput import goodput_bound

    reqs = tuple(replace(r, ttft_slo=float(s)) for r, s in zip(inst.requests, slos))
    t0, c0 = time.perf_counter(), time.process_time()
    gb = goodput_bound(replace(inst, requests=reqs), tbt=TBT_SLO)
    return {"value": gb.share, "method": "B12r", **gb.to_dict(),
            "cpu": round(time.process_time() - c0, 3),
            "wall": round(time.perf_counter() - t0, 3), "loadavg": os.getloadavg()[0]}


def add_ceilings(out: Path) -> None:
    """Recompute only the goodput ceiling of every window in ``out`` (``--goodput-bound``)."""
    rows = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
    for r in rows:
        inst = instance(r["trace"], r["seed"], r["size"], r["load"])
        assert inst.limits.kv_capacity == r["M"] and inst.n == r["size"], r["trace"]
        r["goodput_bound"] = goodput_ceiling(inst, ttft_slos(inst))
        print(f"{r['trace']} seed {r['seed']}: ceiling {r['goodput_bound']['value']:.1%}, "
              f"cpu {r['goodput_bound']['cpu']} s", file=sys.stderr, flush=True)
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))


def run_window(trace, seed, size, load, limit, squeeze, claims_m) -> dict:
    from optsched.prefix import reuse_potential

    inst, t_gen = _timed(lambda: instance(trace, seed, size, load))
    idx = inst.prefix_index
    row: dict = {"trace": trace, "seed": seed, "size": inst.n, "load": load,
                 "M": inst.limits.kv_capacity, "gen_cpu": round(t_gen, 2),
                 "potential": reuse_potential(idx, inst.arrival, inst.prompt),
                 "ttft_x": TTFT_X, "tbt_slo": TBT_SLO, "improve_limit": limit,
                 "squeeze": squeeze, "policies": {}, "improve": {}, "capacity": {},
                 "claims": {}, "cpu": {}}
    slos = ttft_slos(inst)
    run_policies(inst, slos, row)
    row["goodput_bound"] = goodput_ceiling(inst, slos)
    run_improve(inst, slos, row, limit)
    run_capacity(inst, row)
    run_claims(inst, row, squeeze, claims_m)
    row["claims_m"] = claims_m
    row["loadavg"] = os.getloadavg()[0]
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--traces", default="conversation,synthetic")
    ap.add_argument("--size", type=int, default=300)
    ap.add_argument("--load", type=float, default=0.7)
    ap.add_argument("--improve-limit", type=float, default=10.0)
    ap.add_argument("--claims-squeeze", type=float, default=0.5)
    ap.add_argument("--claims-m", type=int, default=1,
                    help="the claims' M, a multiple of the window's (0: unbounded)")
    ap.add_argument("--out", default="studies/prefix/questions")
    ap.add_argument("--summary", action="store_true")
    ap.add_argument("--goodput-bound", action="store_true",
                    help="recompute only the goodput ceiling of the windows in the output")
    a = ap.parse_args(argv)
    out = Path(a.out + ".jsonl")
    if a.summary:
        from studies.prefix.questions_summary import summary

        print(summary(out, Path("studies/prefix/results.jsonl")))
        return 0
    for f in FILES.values():
        if not (DATA / "traces" / f).exists():
            print(f"studies.prefix.questions: {DATA / 'traces' / f} not found "
                  "(set OPTSCHED_DATA)", file=sys.stderr)
            return 2
    if a.goodput_bound:
        add_ceilings(out)
        return 0
    done = set()
    if out.exists():
        done = {(r["trace"], r["seed"]) for r in
                (json.loads(x) for x in out.read_text().splitlines() if x.strip())}
    warnings.simplefilter("ignore")
    for seed in (int(s) for s in a.seeds.split(",")):
        for trace in a.traces.split(","):
            if (trace, seed) in done:
                continue
            t0 = time.perf_counter()
            row = run_window(trace, seed, a.size, a.load, a.improve_limit, a.claims_squeeze,
                             a.claims_m)
            with out.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
            print(f"{trace} seed {seed}: cpu {sum(row['cpu'].values()) + row['gen_cpu']:.1f} s, "
                  f"wall {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
