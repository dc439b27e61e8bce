"""Certified lower bounds against the best policy on Azure trace slices, and each rung's
tightness against proven optima (``formulations/bounds.md``).

Part 1 (``--part trace``): Azure conversation and code traces (``$OPTSCHED_DATA/traces``),
slices of the first 100 / 1,000 / 10,000 requests, Llama-2-7B preset
(``infermax-llama2-7b-a100``), ``C = 8192``:

* offline: every arrival at 0 (InferMax's database setting), ``M = 30,000``, makespan;
* online: the trace's own inter-arrival pattern compressed so the arrivals span 0.9 x the
  offline makespan bound (work arrives faster than a perfect server clears it: queues form),
  ``M = 30,000`` (memory binds: ~24 conversation requests fit), total latency and mean TTFT.

Per cell: the ``combinatorial`` bound and the rung that gave it, each rung's own bound and
time (``request``, ``work``, ``srpt``, ``mbt``; the time-indexed LP that was tried is in
``formulations/bounds.md`` B9, not here: it is not shipped), each policy's objective
(every schedule replayed by ``evaluate``), the best, the large-neighbourhood search's result
from the best policy's schedule (``optsched/search/lns.py``, ``--lns-seconds`` per cell on the
``--lns-sizes`` slices, replayed by ``evaluate``), gap = (best upper - bound) / best upper
with best upper = min(best policy, LNS), times.
Then the time of the combinatorial bounds on the full traces (target <= 2 s).

Part 3 (``--part windows``): windows of ``--window`` consecutive requests (default 1,200) of
each trace, the start drawn by ``--window-seeds`` (not only the first requests), with their
own arrival times (re-based to 0), ``M = 30,000``, ``C = 8192``: per window and objective
(total latency, mean TTFT) the old best rung (``combinatorial``), the coupled rungs
(``coupled``, ``dual``: bounds.md B10-B11; ``spread``: B13, total latency, CPU seconds), the
best of ``--window-policies`` and of the ``prefill-first`` construction below (one prefill
per batch, or packed; every schedule replayed by ``evaluate``), both gaps and every time.

``--part ceiling`` (a diagnostic, not a bound, not in ``all``): on the same windows, what
granting every request its duration at the largest batching would give (bounds.md, "What
did not help").

Part 2 (``--part rungs``): each rung's bound as a fraction of the proven optimum on every
instance of ``instances/manifest.json`` and on the InferMax B = O = 4 family (optima proven
by ``studies/offline_optima/family.py``, recorded in the README; ``--prove`` re-proves them).

    .venv/bin/python -m studies.bounds.trace_bounds [--part trace|rungs|windows|all] [--sizes 100,1000,10000]
        [--traces conv,code] [--policies vllm,vllm-ef,sarathi,sarathi-ef,mcsf] [--json out.json]

The machine is shared (2 cores, other jobs running): times are pessimistic.
"""

from __future__ import annotations

import argparse
import heapq
import json
import sys
import time
from pathlib import Path

import numpy as np

from optsched.bounds import bound_methods, lower_bound
from optsched.cost import preset
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies import simulate
from optsched.search.lns import LNSOptions, improve
from optsched.workloads.generators import eviction_family
from optsched.workloads.traces import load_azure
from studies.settings import PRESET, TRACES, C, M, trace_path, window, window_row

REPO = Path(__file__).resolve().parents[2]
ONLINE_LOAD = 0.9  # arrivals span this fraction of the offline makespan bound

#: proven makespan optima of the InferMax family, ms (README "Results", studies/offline_optima/family.py)
FAMILY_OPTIMA_MS = {1: 40.918, 2: 46.521, 4: 49.804, 8: 51.283, 16: 54.245, 32: 60.181,
                    64: 69.599, 128: 85.719, 256: 118.486, 512: 186.131, 1024: 329.862}


def trace_instance(trace: str, n: int | None, online: bool) -> Instance:
    inst = load_azure(trace_path(trace, "trace_bounds"),
                      Limits(kv_capacity=M, max_batch_tokens=C), preset(PRESET), limit=n,
                      too_long="drop")
    offline = inst.replace(requests=tuple(Request(r.id, 0.0, r.prompt, r.output)
                                          for r in inst.requests))
    if not online:
        return offline
    span = float(inst.arrival.max() - inst.arrival.min()) or 1.0
    target = ONLINE_LOAD * lower_bound(offline, "makespan", "combinatorial").value
    scale = target / span
    a0 = float(inst.arrival.min())
    return inst.replace(requests=tuple(Request(r.id, (r.arrival - a0) * scale, r.prompt, r.output)
                                       for r in inst.requests))


def lns_from(inst: Instance, objective: str, schedule, seconds: float, seed: int) -> dict:
    """Large-neighbourhood search from the best policy's schedule (optsched/search/lns.py)."""
    res = improve(inst, schedule, objective,
                  LNSOptions(time_limit=seconds, seed=seed, progress=False))
    ev = evaluate(inst, res.schedule)
    assert ev.feasible and abs(ev.objective(objective) - res.objective) <= 1e-9 * res.objective
    return {"objective": res.objective, "iterations": res.iterations,
            "windows_solved": res.windows_solved, "improvements": res.improvements,
            "seconds": res.runtime}


#: the rungs compared per cell (value and time each, on a fresh copy of the instance so no
#: rung reuses another's per-request floors)
RUNGS = ("request", "work", "srpt", "mbt", "combinatorial")


def rung_times(inst: Instance, objective: str) -> dict:
    out = {}
    for name in RUNGS:
        if objective not in bound_methods()[name].objectives:
            continue
        fresh = inst.replace(name=inst.name)
        t0 = time.perf_counter()
        v = lower_bound(fresh, objective, name).value
        out[name] = {"bound": v, "seconds": time.perf_counter() - t0}
    return out


def cell(inst: Instance, objective: str, policies: list[str], lns_seconds: float = 0.0,
         seed: int = 0) -> dict:
    rungs = rung_times(inst, objective)
    t0 = time.perf_counter()
    lb = lower_bound(inst, objective, "combinatorial")
    t_lb = time.perf_counter() - t0
    pol, scheds = {}, {}
    for name in policies:
        t0 = time.perf_counter()
        scheds[name] = simulate(inst, name)
        ev = evaluate(inst, scheds[name])
        pol[name] = {"objective": ev.objective(objective) if ev.feasible else None,
                     "seconds": time.perf_counter() - t0}
    ok = {k: v["objective"] for k, v in pol.items() if v["objective"] is not None}
    best = min(ok, key=ok.get) if ok else None
    up = ok[best] if best else None
    lns = (lns_from(inst, objective, scheds[best], lns_seconds, seed)
           if best and lns_seconds > 0 else None)
    top = min(up, lns["objective"]) if lns else up
    return {"requests": inst.n, "objective": objective, "bound": lb.value, "method": lb.method,
            "ladder": lb.ladder, "bound_seconds": t_lb, "rungs": rungs, "policies": pol, "best_policy": best,
            "best": up, "lns": lns,
            "gap": None if top is None else (top - lb.value) / top}


def part_trace(args) -> list[dict]:
    rows = []
    print(f"{'trace':5} {'n':>6} {'setting':8} {'objective':14} {'bound':>11} {'rung':8} "
          f"{'best policy':12} {'best':>11} {'LNS':>11} {'gap':>7} {'bound s':>8} "
          f"{'policies s':>10}",
          flush=True)
    for trace in args.traces.split(","):
        for n in (int(x) for x in args.sizes.split(",")):
            for online, objective in ((False, "makespan"), (True, "total-latency"),
                                      (True, "mean-ttft")):
                inst = trace_instance(trace, n, online)
                pols = args.policies.split(",")
                if n > 2000 and args.large_policies:
                    pols = args.large_policies.split(",")
                lns_s = args.lns_seconds if str(n) in args.lns_sizes.split(",") else 0.0
                r = cell(inst, objective, pols, lns_s, args.seed)
                r.update(trace=trace, setting="online" if online else "offline")
                rows.append(r)
                pt = sum(p["seconds"] for p in r["policies"].values())
                print(f"{trace:5} {inst.n:>6} {r['setting']:8} {objective:14} {r['bound']:>11.5g} "
                      f"{r['method']:8} {str(r['best_policy']):12} {r['best']:>11.5g} "
                      f"{r['lns']['objective'] if r['lns'] else float('nan'):>11.5g} "
                      f"{100 * r['gap']:>6.2f}% {r['bound_seconds']:>8.3f} {pt:>10.1f}",
                      flush=True)
    print("\neach rung's bound (time), per cell:", flush=True)
    print(f"{'trace':5} {'n':>6} {'objective':14} " + " ".join(f"{n:>20}" for n in RUNGS))
    for r in rows:
        cells = " ".join(f"{r['rungs'][n]['bound']:>11.5g} ({r['rungs'][n]['seconds']:5.3f}s)"
                         if n in r["rungs"] else f"{'-':>20}" for n in RUNGS)
        print(f"{r['trace']:5} {r['requests']:>6} {r['objective']:14} {cells}", flush=True)
    if not args.full:
        return rows
    print("\ncombinatorial bounds on the full traces (all requests):", flush=True)
    for trace in args.traces.split(","):
        for online, objective in ((False, "makespan"), (True, "total-latency"),
                                  (True, "mean-ttft")):
            inst = trace_instance(trace, None, online)
            times = []
            for _ in range(args.repeat):  # a fresh instance each time: nothing is cached
                fresh = inst.replace(name=inst.name)
                t0 = time.perf_counter()
                lb = lower_bound(fresh, objective, "combinatorial")
                times.append(time.perf_counter() - t0)
            dt = min(times)
            print(f"  {trace} n={inst.n} {'online' if online else 'offline'} {objective}: "
                  f"{lb.value:.6g} ({lb.method}) in {dt:.2f} s (best of {len(times)}, "
                  f"worst {max(times):.2f} s)", flush=True)
            rows.append({"trace": trace, "requests": inst.n, "objective": objective,
                         "setting": "online" if online else "offline", "full_trace": True,
                         "bound": lb.value, "method": lb.method, "bound_seconds": dt})
    return rows


def window_instance(trace: str, seed: int, n: int) -> tuple[Instance, int]:
    """``n`` consecutive requests of the trace from a start row drawn by ``seed``, with
    their own arrivals re-based to 0 (:func:`optsched.workloads.traces.window_instance`, the
    same windows as ``upper.py`` and ``optsched generate azure --consecutive n --seed s``),
    and that start row."""
    return window(trace, seed, n), window_row(trace, seed, n)


def timed_bound(inst: Instance, objective: str, method: str) -> tuple[float, float]:
    fresh = inst.replace(name=inst.name)  # no floors cached from another rung
    t0 = time.perf_counter()
    v = lower_bound(fresh, objective, method).value
    return v, time.perf_counter() - t0


def spread_or_nan(inst: Instance, objective: str) -> tuple[float, float]:
    """The ``spread`` rung (B13, total latency only; NaN otherwise) and its CPU seconds
    (``time.process_time``: the machine is shared)."""
    if objective not in bound_methods()["spread"].objectives:
        return float("nan"), 0.0
    fresh = inst.replace(name=inst.name)
    t0 = time.process_time()
    v = lower_bound(fresh, objective, "spread").value
    return v, time.process_time() - t0


def prefill_first(inst: Instance, pack: bool = True):
    """Upper-side diagnostic for mean TTFT (not a policy): whole prefills as soon as the
    server is free, shortest prefill first among the arrived, packed into one batch while
    they fit in ``min(C, P)`` tokens if ``pack`` (a longer prompt gets its own chunks), evicting every
    request that holds KV when the next prefills would not fit; then groups that fit in
    ``M`` are refilled and decoded together. Replayed by ``evaluate``."""
    from optsched.schedule import Schedule

    k = inst.cost_model.coefficients
    cap = min(inst.limits.max_batch_tokens, inst.limits.prefill_budget)
    I, O, a = inst.prompt.tolist(), inst.output.tolist(), inst.arrival.tolist()
    ids = [r.id for r in inst.requests]

    def chunks(n_tok: int) -> list[tuple[int, int]]:  # (tokens, cached before)
        return [(min(cap, n_tok - m), m) for m in range(0, n_tok, cap)]

    def price(n_tok: int) -> float:
        return sum(k["k0"] + k["kpb"] + k["kpr"] + k["k1"] * c + k["kpq"] * c * c
                   + k["kpm"] * c * m + k["kpl"] * m for c, m in chunks(n_tok))

    order = sorted(range(inst.n), key=lambda i: a[i])
    batches: list = []
    pending: list[tuple[float, int]] = []
    held: list[int] = []
    t, nxt = 0.0, 0


    while nxt < len(order) or pending:
        if not pending:
            t = max(t, a[order[nxt]])
        while nxt < len(order) and a[order[nxt]] <= t:
            heapq.heappush(pending, (price(I[order[nxt]]), order[nxt]))
            nxt += 1
        group = [heapq.heappop(pending)[1]]  # shortest prefill first; pack more up to cap
        while pack and pending and sum(I[j] for j in group) + I[pending[0][1]] <= cap:
            group.append(heapq.heappop(pending)[1])
        evict: list[str] = []
        need = sum(I[j] for j in group)
        if sum(I[j] for j in held) + need > inst.limits.kv_capacity:
            evict, held = [ids[j] for j in held], []
        if len(group) == 1:
            for n_c, (c, _) in enumerate(chunks(I[group[0]])):
                batches.append(([(ids[group[0]], c)], evict if n_c == 0 else []))
            t += price(I[group[0]])
        else:
            batches.append(([(ids[j], I[j]) for j in group], evict))
            t += sum(price(I[j]) for j in group) - (len(group) - 1) * (k["k0"] + k["kpb"])
        held += [j for j in group if O[j] > 1]
    # phase 2: groups that fit in memory, refilled (or continued) and decoded together
    cached = {j: I[j] for j in held}
    todo = [i for i in range(inst.n) if O[i] > 1]
    g0 = 0
    while g0 < len(todo):
        group, mem = [], 0
        while g0 < len(todo) and mem + I[todo[g0]] + O[todo[g0]] <= inst.limits.kv_capacity:
            group.append(todo[g0])
            mem += I[todo[g0]] + O[todo[g0]]
            g0 += 1
        others = [j for j in cached if j not in set(group)]
        evict = [ids[j] for j in others]
        for j in others:
            del cached[j]
        left = {i: O[i] - 1 for i in group}
        for i in group:
            if i not in cached:  # refill prompt + first token, generating token 2
                for c, _ in chunks(I[i] + 1):
                    batches.append(([(ids[i], c)], evict))
                    evict = []
                left[i] -= 1
            cached[i] = 1
        while any(v > 0 for v in left.values()):
            ent = [(ids[i], 1) for i in group if left[i] > 0]
            batches.append((ent, evict))
            evict = []
            for i in group:
                left[i] -= left[i] > 0
        for i in group:
            cached.pop(i, None)
    return Schedule.from_batches(batches)


def part_ceiling(args) -> list[dict]:
    """Diagnostic, NOT a bound: how far any per-request duration coupling of the B10 kind
    could lift the order-statistic bound, by granting every request its duration at the
    largest batching (``u = M / S`` in every step, which no valid bound may assume) next to
    the works at that batching: ``sum_k max(SRPT_(k), (a + D_max)_(k))`` against the same
    with the chain alone (``srpt``'s form) and ``mbt`` (bounds.md, "What did not help")."""
    from optsched.bounds.coupled import _steps, frontier, other_entry_rate
    from optsched.bounds.floors import Floors
    from optsched.bounds.srpt import srpt_completions

    rows = []
    print(f"{'trace':5} {'seed':>4} {'mbt':>10} {'chain alone':>12} {'D_max ceiling':>14}",
          flush=True)
    for trace in args.traces.split(","):
        for seed in (int(x) for x in args.window_seeds.split(",")):
            inst, _ = window_instance(trace, seed, args.window)
            f = Floors.of(inst)
            fr = frontier(f)
            S, _ent, c, first = _steps(f, False)
            dmax = np.add.reduceat(c + other_entry_rate(f.k) * (M - S), first)
            a = inst.arrival
            base = srpt_completions(a, fr.wmin)
            alone = float(np.maximum(base, np.sort(a + fr.dmin)).sum() - a.sum())
            ceil = float(np.maximum(base, np.sort(a + dmax)).sum() - a.sum())
            mbt = lower_bound(inst, "total-latency", "mbt").value
            rows.append({"trace": trace, "seed": seed, "mbt": mbt, "alone": alone,
                         "ceiling": ceil})
            print(f"{trace:5} {seed:>4} {mbt:>10.5g} {alone:>12.5g} {ceil:>14.5g}", flush=True)
    return rows


def part_windows(args) -> list[dict]:
    rows = []
    pols = args.window_policies.split(",")
    print(f"{'trace':5} {'seed':>4} {'start':>6} {'n':>5} {'span s':>7} {'objective':13} "
          f"{'old bound':>10} {'rung':8} {'s':>5} {'coupled':>10} {'s':>5} {'dual':>10} {'s':>5} "
          f"{'spread':>10} {'cpu s':>5} "
          f"{'best policy':>11} {'value':>10} {'old gap':>8} {'new gap':>8}", flush=True)
    for trace in args.traces.split(","):
        for seed in (int(x) for x in args.window_seeds.split(",")):
            inst, start = window_instance(trace, seed, args.window)
            sims = {p: evaluate(inst, simulate(inst, p)) for p in pols}
            sims["prefill-first"] = evaluate(inst, prefill_first(inst, pack=False))
            sims["prefill-packed"] = evaluate(inst, prefill_first(inst, pack=True))
            for objective in ("total-latency", "mean-ttft"):
                t0 = time.perf_counter()
                old = lower_bound(inst.replace(name=inst.name), objective, "combinatorial")
                t_old = time.perf_counter() - t0
                cp, t_cp = timed_bound(inst, objective, "coupled")
                du, t_du = timed_bound(inst, objective, "dual")
                sp, t_sp = spread_or_nan(inst, objective)
                vals = {p: ev.objective(objective) for p, ev in sims.items() if ev.feasible}
                best = min(vals, key=lambda p: vals[p])
                up = vals[best]
                new = max(old.value, cp, du, sp if sp == sp else -np.inf)
                r = {"trace": trace, "seed": seed, "start": start, "requests": inst.n,
                     "span": float(inst.arrival.max()), "objective": objective,
                     "old": old.value, "old_rung": old.method, "old_seconds": t_old,
                     "coupled": cp, "coupled_seconds": t_cp, "dual": du, "dual_seconds": t_du,
                     "spread": sp if sp == sp else None, "spread_cpu_seconds": t_sp,
                     "new_rung": max((("combinatorial", old.value), ("coupled", cp), ("dual", du),
                                      ("spread", sp if sp == sp else -np.inf)),
                                     key=lambda kv: kv[1])[0],
                     "policies": vals, "best_policy": best, "best": up,
                     "old_gap": (up - old.value) / up, "new_gap": (up - new) / up}
                rows.append(r)
                print(f"{trace:5} {seed:>4} {start:>6} {inst.n:>5} {r['span']:>7.1f} "
                      f"{objective:13} {old.value:>10.5g} {old.method:8} {t_old:>5.1f} "
                      f"{cp:>10.5g} {t_cp:>5.1f} {du:>10.5g} {t_du:>5.1f} {sp:>10.5g} {t_sp:>5.1f} "
                      f"{best:>11} "
                      f"{up:>10.5g} {100 * r['old_gap']:>7.1f}% {100 * r['new_gap']:>7.1f}%",
                      flush=True)
    return rows


def rung_row(label: str, inst: Instance, objective: str, optimum: float) -> dict:
    methods = bound_methods()
    fr = {}
    for name in RUNGS:
        if objective in methods[name].objectives:
            fr[name] = lower_bound(inst, objective, name).value / optimum
    return {"instance": label, "objective": objective, "optimum": optimum, "fractions": fr}


def part_rungs(args) -> list[dict]:
    rows = []
    manifest = json.loads((REPO / "instances" / "manifest.json").read_text())["instances"]
    for key, ent in manifest.items():
        path = REPO / ent["file"]
        if not path.exists():
            path = REPO / "optsched" / "data" / Path(ent["file"]).name
        inst = Instance.load(path)
        for objective, o in ent["objectives"].items():
            if o.get("optimum") is not None:
                rows.append(rung_row(Path(key).stem, inst, objective, o["optimum"]))
    for I, opt_ms in FAMILY_OPTIMA_MS.items():
        inst = eviction_family(I)
        opt = opt_ms / 1000
        if args.prove:
            from optsched.formulations import SolveOptions
            from optsched.solving import solve

            rep = solve(inst, "infermax", "makespan",
                        options=SolveOptions(time_limit=120, progress=False))
            if rep.status == "optimal":
                opt = rep.objective
        rows.append(rung_row(f"family I={I}", inst, "makespan", opt))
    names = RUNGS
    print(f"\n{'instance':40} {'objective':14} {'optimum':>10} "
          + " ".join(f"{n:>13}" for n in names))
    for r in rows:
        cells = " ".join(f"{r['fractions'][n]:>13.3f}" if n in r["fractions"] else f"{'-':>13}"
                         for n in names)
        print(f"{r['instance']:40} {r['objective']:14} {r['optimum']:>10.5g} {cells}")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", default="all",
                    choices=("trace", "rungs", "windows", "ceiling", "all"))
    ap.add_argument("--window", type=int, default=1200, help="requests per seeded window")
    ap.add_argument("--window-seeds", default="0,1,2", help="seeds drawing the window starts")
    ap.add_argument("--window-policies",
                    default="vllm,sarathi,mcsf,rank-i,aptserve-kv-only,ecoserve",
                    help="policies simulated on each window (the best is the upper side)")
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--traces", default="conv,code")
    ap.add_argument("--policies", default="vllm,vllm-ef,sarathi,sarathi-ef,mcsf")
    ap.add_argument("--large-policies", default="vllm-ef,sarathi-ef,mcsf",
                    help="policies for slices above 2,000 requests (each takes tens of seconds)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="full-trace bound timings: runs per cell (best and worst reported)")
    ap.add_argument("--lns-seconds", type=float, default=60.0,
                    help="large-neighbourhood search from the best policy, per cell (0: none)")
    ap.add_argument("--lns-sizes", default="100,1000", help="slice sizes that get the LNS")
    ap.add_argument("--seed", type=int, default=0, help="LNS seed")
    ap.add_argument("--full", action=argparse.BooleanOptionalAction, default=True,
                    help="also time the combinatorial bounds on the full traces")
    ap.add_argument("--prove", action="store_true", help="re-prove the family optima (slow)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    out = {}
    if args.part in ("trace", "all"):
        if not TRACES.exists():
            print(f"skipping the trace part: {TRACES} not found", file=sys.stderr)
        else:
            out["trace"] = part_trace(args)
    if args.part in ("windows", "all"):
        if not TRACES.exists():
            print(f"skipping the windows part: {TRACES} not found", file=sys.stderr)
        else:
            out["windows"] = part_windows(args)
    if args.part == "ceiling" and TRACES.exists():
        out["ceiling"] = part_ceiling(args)
    if args.part in ("rungs", "all"):
        out["rungs"] = part_rungs(args)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=float))
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
