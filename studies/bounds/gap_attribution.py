"""Which side holds the seeded windows' total-latency gap: the bound or the schedule?

Part ``small`` (exact attribution at small scale). A 1,200-request window of the Azure 2023
conversation or code trace (``optsched.workloads.traces.window_instance``, M = 30,000,
C = 8,192, Llama-2-7B preset, own arrivals) is too large for any exact model, and so is a
window of 8 real requests: every prompt can be chunked in ~1,000 ways and every output is
~200 decode steps. Small windows are therefore drawn *coarsened*: ``n`` consecutive requests
from a seeded row, every token count divided by ``q`` (one unit = ``q`` tokens, at least 1)
and the preset's coefficients rescaled so that a unit costs what its ``q`` tokens cost
(:func:`optsched.cost.coarsened`: a decode unit is ``q`` decode steps, ``q`` batch constants and ``q``
times the attention over ``q`` times the cached units; a prompt unit is ``q`` prompt
tokens, with the quadratic term times ``q**2``). The load of the 1,200-request window of
the same trace and seed is kept (:func:`profile`):

* ``rho`` = the least busy time (the ``work`` makespan rung with every arrival at 0,
  ``formulations/bounds.md``) over the arrival span; the small window's arrivals are
  scaled so its ``rho`` is the same;
* memory (``--memory resident``, the default): ``M'`` holds as many average requests as
  ``M`` does at scale, ``M' = R x mean peak KV'`` with ``R = M / mean peak KV``;
  ``--memory share``: the same share ``R / N`` of the ``n`` requests as ``R`` is of ``N``,
  the mean number in the system in MC-SF's schedule (total latency / span); at least the
  largest request either way.

Per window it reports (total latency, seconds):

* ``bound``: the largest of the rungs used at scale (``combinatorial``, ``spread``,
  ``coupled``, ``dual``; not ``exact``);
* ``policy``: the best registered policy (every schedule replayed by ``optsched.evaluate``);
* ``keysearch``: ``optsched.search.keysearch.key_search`` (``--key-iterations`` decodes);
* ``lns``: ``optsched.search.lns.improve`` from the best of those (``--lns-iterations``);
* ``ropt``: the exact optimum over schedules with whole prompts and no evictions
  (``optsched.formulations.exhaustive.search`` with ``no_chunking`` and ``no_evictions``, A*, proven);
  evictions are excluded because in a coarsened instance a recompute chunk that reaches
  ``S`` generates a whole unit (``q`` tokens) at prefill price, which a real recompute cannot;
* ``opt``: the exhaustive optimum over eviction-free schedules, prompts chunked at will,
  when it is proven within ``--exact-seconds`` (tried up to ``--exact-max-n`` requests).

``best`` = min(policy, keysearch, lns, ropt, opt) is a feasible eviction-free schedule, so
``bound <= OPT <= best`` and ``policy/ropt`` is exact within the eviction-free whole-prompt
class. **Caveat, measured:** ``bound/best`` is *not* the bound's tightness on the real
problem. The rungs are valid for every schedule of the coarsened instance, including
evicting ones, and there an evict-and-refill generates a unit (``q`` tokens) at prefill
price: on conv seed 0, ``n = 4``, the exhaustive optimum with evictions and whole refills
is 2.205 s against 3.347 s without evictions (bound 1.521). No token coarsening keeps the
rungs' prices and closes that door, and real-token windows are beyond the exact models;
so at small scale only the schedule side (``policy/ropt``) is measured cleanly.

Part ``scale`` (the 1,200-request windows themselves): where the time between the bound and
the best schedule goes. Per window:

* ``srpt(alone)``: preemptive SRPT on one server, each request's work = its prefill alone
  plus its decode steps alone (no batch shared): what serving one request at a time costs;
* ``rung work`` / ``srpt(rung)``: the ``srpt`` rung's per-request work (B7, batch time shared
  at the best rate) summed, and SRPT on it (the rung's value before its floors);
* for each schedule (MC-SF keyed by fluid work; on code the decode-aware decoder
  :class:`AdaptiveBudget` at several decode-time prefill budgets ``lo`` and the
  ``one-prompt`` decoders of ``optsched/search/one_prompt.py`` at their best seed key): total latency,
  busy time, the sums of TTFT and of decode spans (first token to completion; ``alone`` =
  the decode steps alone), and ``srpt(own)``: preemptive SRPT on the schedule's *own* work,
  each batch's time split over its entries by tokens -- the total latency the schedule
  would have if it did the same work in SRPT order with no decode stretched.

``best - srpt(own)`` is what the schedule loses to stretch and order at its own work;
``srpt(own) - bound`` what its extra work costs against the rung's work. Every schedule is
replayed by ``optsched.evaluate``.

    python -m studies.bounds.gap_attribution --part small --traces conv,code \
        --sizes 6,8,10,12 --seeds 0-19 [--q 100] [--out studies/bounds/results/gap-attribution.txt]

Needs the traces (``$OPTSCHED_DATA/traces``, :mod:`studies.settings`); exits 2 without them.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import time
import warnings

import numpy as np

from optsched.bounds import lower_bound
from optsched.bounds.attribution import alone_work, attribute
from optsched.bounds.attribution import srpt_total_flow as _srpt_flow
from optsched.cost import LinearCost, coarsened, preset
from optsched.errors import OptschedError
from optsched.evaluation import evaluate
from optsched.formulations.exhaustive.search import SearchOptions, search
from optsched.instance import Instance, Limits, Request
from optsched.policies import list_policies, simulate
from optsched.search.keysearch import key_search, make_decoder
from optsched.search.lns import LNSOptions, improve
from optsched.search.one_prompt import ONE_PROMPT
from optsched.workloads.traces import read_trace, seeded_window
from studies.settings import PRESET, WINDOW, C, M, trace_path, window

SIZE = WINDOW
OBJ = "total-latency"
RUNGS = ("combinatorial", "spread", "coupled", "dual")


def coarse_cost(q: int) -> LinearCost:
    """The preset with one unit = ``q`` tokens (:func:`optsched.cost.coarsened`)."""
    return coarsened(preset(PRESET), q)


def rho(inst: Instance) -> float:
    """Least busy time (the ``work`` makespan rung with every arrival at 0) over the arrival
    span: the offered load."""
    span = float(inst.arrival.max() - inst.arrival.min())
    at0 = inst.replace(requests=tuple(dataclasses.replace(r, arrival=0.0) for r in inst.requests))
    return lower_bound(at0, "makespan", "work").value / max(span, 1e-9)


@dataclasses.dataclass(frozen=True)
class Profile:
    """The load of a 1,200-request window: ``rho``, resident requests ``R`` and mean number
    in the system ``N`` (MC-SF's schedule)."""

    rho: float
    resident: float
    in_system: float

    @property
    def memory_share(self) -> float:
        return min(1.0, self.resident / self.in_system)


def profile(trace: str, seed: int) -> Profile:
    full = read_trace(trace_path(trace, "gap_attribution"), format="azure")
    w = seeded_window(full, SIZE, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from optsched.workloads.traces import trace_to_instance

        inst = trace_to_instance(
            w, Limits(kv_capacity=M, max_batch_tokens=C), preset(PRESET), too_long="drop"
        )
    peak = float(np.mean(inst.prompt + inst.output - 1))
    tl = evaluate(inst, simulate(inst, "mcsf")).objective(OBJ)
    span = float(inst.arrival.max())
    return Profile(rho(inst), M / peak, tl / span)


def small_window(trace: str, seed: int, n: int, q: int, prof: Profile, memory: str = "resident") -> Instance:
    """``n`` consecutive requests from the row drawn by ``seed``, coarsened by ``q``, arrivals
    scaled to the profile's ``rho``; ``M'`` holds the profile's ``R`` average requests
    (``memory="resident"``) or its share ``R / N`` of the ``n`` (``"share"``)."""
    full = read_trace(trace_path(trace, "gap_attribution"), format="azure")
    w = seeded_window(full, n, seed)
    prompt = np.maximum(1, np.rint(w.prompt / q)).astype(int)
    output = np.maximum(1, np.rint(w.output / q)).astype(int)
    peak = prompt + output - 1
    per = float(peak.mean())
    m = int(round(per * (prof.resident if memory == "resident" else n * prof.memory_share)))
    m = max(int(peak.max()), m)
    lim = Limits(kv_capacity=m, max_batch_tokens=max(int(peak.max()), C // q))
    reqs = tuple(
        Request(f"r{k}", float(a), int(i), int(o))
        for k, (a, i, o) in enumerate(zip(w.arrival, prompt, output))
    )
    inst = Instance(name=f"{trace}-s{seed}-n{n}-q{q}", requests=reqs, limits=lim, cost_model=coarse_cost(q))
    r0 = rho(inst)
    scale = r0 / prof.rho if prof.rho > 0 else 1.0
    reqs = tuple(dataclasses.replace(r, arrival=r.arrival * scale) for r in reqs)
    return inst.replace(requests=reqs)


def evicts(s) -> bool:
    """A coarsened instance prices a recompute that reaches ``S`` as one prefill unit that
    generates ``q`` tokens; eviction-free schedules only (module docstring)."""
    return len(s.evict_req) > 0


def best_policy(inst: Instance) -> tuple[float, str, object]:
    best = (math.inf, "", None)
    for spec in list_policies():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                s = simulate(inst, spec.name)
            ev = evaluate(inst, s)
        except (OptschedError, ValueError):
            continue
        if ev.feasible and not evicts(s) and ev.objective(OBJ) < best[0]:
            best = (ev.objective(OBJ), spec.name, s)
    return best


def exact(inst: Instance, ub: float | None, seconds: float, restricted: bool) -> float | None:
    """The exhaustive optimum over eviction-free schedules (and whole prompts when
    ``restricted``), replayed by the evaluator; None when not proven in time. ``ub`` (a
    feasible eviction-free schedule's value) prunes (rule R6)."""
    cap = None if ub is None else ub * (1 + 1e-9)
    opts = SearchOptions(
        max_states=5_000_000, time_limit=seconds, upper_bound=cap, no_chunking=restricted, no_evictions=True
    )
    r = search(inst, OBJ, opts)
    if r.status != "optimal" or r.schedule is None:
        return None
    return evaluate(inst, r.schedule).objective(OBJ)


def row(trace: str, seed: int, n: int, q: int, prof: Profile, args) -> dict:
    inst = small_window(trace, seed, n, q, prof, args.memory)
    bound = max(lower_bound(inst, OBJ, m, time_limit=30).value for m in RUNGS)
    pv, pname, ps = best_policy(inst)
    t = time.perf_counter()
    ks = key_search(
        inst,
        OBJ,
        deadline=t + 600,
        seed=seed,
        max_iterations=args.key_iterations,
        decoders=("mcsf", "rank-ef"),
    )
    kv = ks.objective if ks is not None else math.inf
    start = ks.schedule if ks is not None and kv < pv else ps
    ln = improve(
        inst,
        start,
        OBJ,
        LNSOptions(time_limit=600, seed=seed, progress=False, max_iterations=args.lns_iterations),
    )
    lv = evaluate(inst, (start if evicts(ln.schedule) else ln.schedule)).objective(OBJ)
    ropt = exact(inst, None, args.exact_seconds, restricted=True)
    opt = (
        exact(inst, min(pv, kv, lv), args.exact_seconds, restricted=False) if n <= args.exact_max_n else None
    )
    best = min(x for x in (pv, kv, lv, ropt, opt) if x is not None)
    return dict(
        trace=trace,
        seed=seed,
        n=n,
        M=inst.limits.kv_capacity,
        bound=bound,
        policy=pv,
        pname=pname,
        keysearch=kv,
        lns=lv,
        ropt=ropt,
        opt=opt,
        best=best,
    )


def srpt_total(work: np.ndarray, arrival: np.ndarray) -> float:
    """Total flow time of preemptive SRPT on one server (``work`` seconds per job)."""
    return _srpt_flow(arrival, work)


class AdaptiveBudget:
    """Factory of the decode-aware decoder: the ranking kernel's configuration run in Python
    (``decode-first``, hybrid, chunked), the key smallest first, and a prefill budget of
    ``hi`` tokens while no request is decoding, ``lo`` while some are (short decode steps
    when there are decode steps to shorten, whole prompts otherwise)."""

    def __new__(cls, key: np.ndarray, hi: int, lo: int):
        from optsched.search import keysearch as ks

        ks.CONFIGS.setdefault("adaptive-budget", dict(order="decode-first", hybrid=True, chunked=True, P=0))

        class _Policy(ks.KeyedRank):
            def next_batch(self):
                v, run = self.view, self.run_idx
                dec = int(((v.g[run] >= 1) & (v.m[run] == v.S[run] - 1)).sum()) if run.size else 0
                self.Pb = min(self.C, lo if dec else hi)
                return super().next_batch()

        return _Policy("adaptive-budget", key)


def one_prompt_best(inst: Instance, keys: dict, kind: str) -> tuple[str, object]:
    """The ``one-prompt`` decoder (``optsched/search/one_prompt.py``) at its best seed key."""
    dec = make_decoder(inst, kind)
    scored = [
        (evaluate(inst, s).objective(OBJ), name, s)
        for name, s in ((n, dec.decode(k)) for n, k in keys.items())
        if s is not None
    ]
    v, name, s = min(scored, key=lambda x: x[0])
    return f"{kind} [{name}]", s


def scale_window(trace: str, seed: int) -> Instance:
    return window(trace, seed, SIZE)


def schedule_parts(inst: Instance, s) -> dict:
    """The schedule's :class:`~optsched.bounds.attribution.Attribution`, in this table's keys."""
    r = attribute(inst, s)
    return dict(tl=r.total_latency, busy=r.busy, ttft=r.ttft, dspan=r.decode_span, srpt_own=r.srpt_own)


def part_scale(args, out) -> None:
    from optsched.bounds.floors import Floors
    from optsched.bounds.srpt import job_works
    from optsched.search.keysearch import seed_keys

    out(
        "# window        bound(rung)  srpt(alone)  rung-work srpt(rung) | schedule             "
        "      TL     busy  sum-TTFT  sum-dspan (alone)  srpt(own)  cpu s"
    )
    los = [int(x) for x in args.budgets.split(",")]
    for trace in args.traces.split(","):
        for seed in seeds_arg(args.seeds):
            inst = scale_window(trace, seed)
            c0 = time.process_time()
            b = lower_bound(inst, OBJ, "spread", time_limit=60)
            pre, dec = alone_work(inst)
            f = Floors.of(inst)
            works = [job_works(f, OBJ, mix) for mix in ((1.0, 0.0, 0.0), (0.0, 0.0, 1.0))]
            w = max(works, key=lambda x: srpt_total(x, inst.arrival))
            head = (
                f"{trace}-s{seed:<2d}  {b.value:9.0f}  {srpt_total(pre + dec, inst.arrival):11.0f}"
                f"  {w.sum():9.1f} {srpt_total(w, inst.arrival):10.0f}"
            )
            keys = seed_keys(inst, OBJ)
            cands = [("mcsf work", make_decoder(inst, "mcsf").decode(keys["work(1.0, 0.0, 0.0)"]))]
            if trace == "code":
                cands += [
                    (
                        f"adaptive hi={args.hi} lo={lo}",
                        simulate(inst, AdaptiveBudget(keys["entry"], args.hi, lo)),
                    )
                    for lo in los
                ]
                cands += [one_prompt_best(inst, keys, kind) for kind in ONE_PROMPT]
            for name, sch in cands:
                if sch is None:
                    continue
                r = schedule_parts(inst, sch)
                out(
                    f"{head} | {name:24s} {r['tl']:8.0f} {r['busy']:8.1f} {r['ttft']:9.0f}"
                    f" {r['dspan']:9.0f} ({dec.sum():5.0f}) {r['srpt_own']:9.0f}"
                    f" {time.process_time() - c0:6.1f}"
                )


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def seeds_arg(text: str) -> list[int]:
    if "-" in text:
        lo, hi = text.split("-")
        return list(range(int(lo), int(hi) + 1))
    return [int(s) for s in text.split(",")]


def q_of(text: str, trace: str) -> int:
    pairs = dict(p.split("=") for p in text.split(","))
    if trace not in pairs:
        sys.exit(f"gap_attribution: --q names no unit for trace {trace!r}")
    return int(pairs[trace])


def part_small(args, out) -> None:
    for trace in args.traces.split(","):
        profs = {}
        rows: list[dict] = []
        for n in [int(s) for s in args.sizes.split(",")]:
            for seed in seeds_arg(args.seeds):
                key = seed % args.profiles
                if key not in profs:
                    profs[key] = profile(trace, key)
                    p = profs[key]
                    out(
                        f"# {trace} profile seed {key}: rho {p.rho:.3f}, resident R {p.resident:.1f},"
                        f" in system N {p.in_system:.1f}, memory share {p.memory_share:.3f}"
                    )
                c0 = time.process_time()
                r = row(trace, seed, n, q_of(args.q, trace), profs[key], args)
                r["cpu"] = time.process_time() - c0
                rows.append(r)
                out(
                    f"{trace:5s} {n:3d} {seed:4d} {r['M']:5d} {r['bound']:9.3f} {r['policy']:9.3f}"
                    f" {r['pname']:>18s} {r['keysearch']:9.3f} {r['lns']:9.3f} {fmt(r['ropt']):>9s}"
                    f" {fmt(r['opt']):>9s} {r['bound'] / r['best']:6.3f} {r['policy'] / r['best']:6.3f}"
                    f" {r['cpu']:6.1f}"
                )
        summarize(trace, rows, out)


def summarize(trace: str, rows: list[dict], out) -> None:
    out(f"# summary {trace}: per size, mean / max over windows")
    out(
        "#  n  windows  bound/best        policy/best       keysearch/best    lns/best"
        "          policy/ropt       ropt proven"
    )
    for n in sorted({r["n"] for r in rows}):
        rs = [r for r in rows if r["n"] == n]

        def mm(f, rs=rs):
            v = np.array([f(r) for r in rs if f(r) is not None])
            return f"{v.mean():.3f} / {v.max():.3f}" if v.size else "-"

        out(
            f"# {n:3d} {len(rs):8d}  {mm(lambda r: r['bound'] / r['best']):16s}"
            f"  {mm(lambda r: r['policy'] / r['best']):16s}"
            f"  {mm(lambda r: r['keysearch'] / r['best']):16s}"
            f"  {mm(lambda r: r['lns'] / r['best']):16s}"
            f"  {mm(lambda r: r['policy'] / r['ropt'] if r['ropt'] else None):16s}"
            f"  {sum(r['ropt'] is not None for r in rs)}/{len(rs)}"
        )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("small", "scale"), default="small")
    ap.add_argument("--traces", default="conv,code")
    ap.add_argument("--sizes", default="6,8,10,12")
    ap.add_argument("--seeds", default="0-19", help="e.g. 0-19 or 0,1,2")
    ap.add_argument(
        "--profiles",
        type=int,
        default=3,
        help="load profiles from the 1,200-request windows of seeds 0..K-1 "
        "(a small window of seed s uses profile s mod K)",
    )
    ap.add_argument("--memory", choices=("resident", "share"), default="resident")
    ap.add_argument(
        "--q", default="conv=50,code=10", help="tokens per unit, per trace (code's outputs are ~28 tokens)"
    )
    ap.add_argument("--key-iterations", type=int, default=300)
    ap.add_argument("--lns-iterations", type=int, default=200)
    ap.add_argument("--exact-seconds", type=float, default=30.0)
    ap.add_argument(
        "--exact-max-n",
        type=int,
        default=0,
        help="also try the unrestricted exhaustive search up to this size",
    )
    ap.add_argument(
        "--budgets",
        default="0,256,512,768,1024",
        help="--part scale: decode-time prefill budgets lo of AdaptiveBudget",
    )
    ap.add_argument(
        "--hi", type=int, default=8192, help="--part scale: AdaptiveBudget's budget while nothing decodes"
    )
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    fh = open(args.out, "a") if args.out else None

    def out(line: str) -> None:
        print(line, flush=True)
        if fh:
            fh.write(line + "\n")
            fh.flush()

    now = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    out(f"# studies.bounds.gap_attribution {' '.join(sys.argv[1:])}; {now}; load {os.getloadavg()[0]:.2f}")
    if args.part == "small":
        out(
            "# trace  n seed    M'     bound    policy        best-policy keysearch       lns"
            "      ropt       opt bnd/bst pol/bst  cpu s"
        )
        part_small(args, out)
    else:
        part_scale(args, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
