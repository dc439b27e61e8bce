"""Fidelity of EcoServe, BROS and Apt-Serve to their papers, measured on small settings,
side by side (each run well under a minute).

* **BROS** on notebook 07's workload (``bros_workload``: M = 20,000, C = 4,096, BE batches
  of 8, seed 1) at RT 4 req/s: RT normalised latency, TTFT attainment and BE throughput of
  ``bros`` (progressive drop on / off) and ``vllm``; the share of iterations holding one
  entry, and the drops.
* **Apt-Serve's 2-approximation**: violations split by whether every KV choice fits alone.
* **Apt-Serve** on notebook 08's setting: paper vs code value model.
* **EcoServe** on the first ``--n`` Azure conversation requests at ``--load`` x the rate the
  trace's total work allows on M = 20,000 / C = 4,096 (notebook 06's setting): mean and p99
  JCT and throughput of ``ecoserve``, ``ecoserve-oracle`` and ``vllm``, and EcoServe's
  waiting / running GT counts.

* **Paper-like settings** (synthetic lengths from ``optsched generate
  chat-like``, each run at n and 2n requests to show whether the trace is long enough):
  ``--only ecoserve-paper`` (EcoServe's ShareGPT statistics, M = 14,648), ``--only bros-paper``
  (BROS's ShareGPT statistics for RT, closed-loop BE batches), ``--only aptserve-paper``.

Run it on this tree and on an older one to print before / after (``PYTHONPATH=<old tree>:.
python -P -m studies.claims.fidelity``: ``-P`` keeps the working directory's optsched off the
path); parameters the older tree does not know are skipped::

    .venv/bin/python -m studies.claims.fidelity [--n 300] [--rt 15] \
        [--cost-model vidur-llama2-7b-a100]

``--cost-model`` prices every run with another preset (cost-model sensitivity: each headline under
the InferMax preset and under the one fitted from the profiling tables).

Reads the shared data from ``OPTSCHED_DATA`` (default ``../shared/data``); skips with a
message when it is missing.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from optsched.evaluation import evaluate
from optsched.instance import Limits
from optsched.policies import get_policy, simulate
from optsched.policies.registry import PolicyError
from optsched.workloads.hybrid import bros_workload, hybrid_metrics
from optsched.workloads.traces import azure_trace
from studies.settings import DATA

TRACE = azure_trace("conv", DATA)
LIMITS = Limits(kv_capacity=20_000, max_batch_tokens=4096)
#: the cost preset every run prices batches with (--cost-model)
COST = {"preset": "infermax-llama2-7b-a100"}


def _cost():
    from optsched.cost import PRESETS
    return PRESETS[COST["preset"]]


def _policy(name: str, **params):
    try:
        return get_policy(name, **params)
    except PolicyError:
        return None


def _fmt(x) -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.4g}"


def bros_rows(n_rt: int, rate: float) -> None:
    inst = bros_workload(TRACE, n_rt, rate, seed=1, be_batch=8, limits=LIMITS,
                         cost_model=_cost())
    print(f"BROS: {inst.n} requests ({n_rt} RT at {rate} req/s)")
    print(f"{'policy':22} {'RT norm lat':>12} {'TTFT att':>9} {'BE req/s':>9} "
          f"{'1-entry it':>11} {'drops':>6} {'s':>6}")
    for label, name, params in (("bros", "bros", {}), ("bros drop=true", "bros", {"drop": True}),
                                ("bros overlap=false", "bros", {"overlap": False}),
                                ("vllm", "vllm", {})):
        p = _policy(name, **params)
        if p is None:
            print(f"{label:22} (parameter unknown to this tree)")
            continue
        t0 = time.perf_counter()
        s = simulate(inst, p)
        ev = evaluate(inst, s)
        m = hybrid_metrics(inst, ev)
        one = float(np.mean([len(b.entries) == 1 for b in s if b.entries]))
        print(f"{label:22} {_fmt(m['rt_normalised_latency']):>12} "
              f"{_fmt(m['rt_ttft_attainment']):>9} {_fmt(m['be_throughput']):>9} "
              f"{one:>11.3f} {getattr(p, 'dropped', 'n/a')!s:>6} "
              f"{time.perf_counter() - t0:>6.1f}")


ECO_POLICIES = (("vllm", {}), ("ecoserve-d", {}), ("ecoserve-sd", {}),
                ("ecoserve-sd", {"length_bin": 1}), ("ecoserve", {}),
                ("ecoserve", {"deadline": "slo-length"}), ("ecoserve-oracle", {}))


def ecoserve_rows(n: int, mult: float) -> None:
    import warnings

    from optsched.serving.rate_search import at_rate, trace_rate
    from optsched.workloads.traces import load_trace_instance
    try:
        from optsched.metrics.serving import mechanism_stats
    except ImportError:  # older trees
        mechanism_stats = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = load_trace_instance(TRACE, Limits(kv_capacity=100_000, max_batch_tokens=4096),
                                   _cost(), limit=n, too_long="drop")
    inst = at_rate(base, mult * trace_rate(base), seed=0)
    print(f"EcoServe: {inst.n} Azure conversation requests at {mult:g}x the trace rate "
          f"(M = 100,000, C = 4,096)")
    print(f"{'policy':26} {'mean JCT':>9} {'p99 JCT':>8} {'req/s':>6} {'groups':>7} "
          f"{'grp size':>8} {'hosted':>7} {'GT wait':>8} {'GT run':>7} {'s':>5}")
    for name, params in ECO_POLICIES:
        label = name + "".join(f" {k}={v}" for k, v in params.items())
        p = _policy(name, **params)
        if p is None:
            print(f"{label:26} (parameter unknown to this tree)")
            continue
        t0 = time.perf_counter()
        s = simulate(inst, p)
        ev = evaluate(inst, s)
        lat = ev.latency
        mech = mechanism_stats(inst, s, ev, p) if mechanism_stats else {}
        c = getattr(p, "counters", {})
        print(f"{label:26} {np.mean(lat):>9.2f} {np.percentile(lat, 99):>8.2f} "
              f"{inst.n / ev.metrics['makespan']:>6.2f} {mech.get('groups', 'n/a')!s:>7} "
              f"{_fmt(mech.get('mean_group_size')):>8} "
              f"{_fmt(mech.get('pipelined_share', c.get('hosted'))):>7} "
              f"{_fmt(mech.get('mean_gt_waiting')):>8} {_fmt(mech.get('mean_gt_running')):>7} "
              f"{time.perf_counter() - t0:>5.1f}")


def aptserve_rows(n: int, mult: float) -> None:
    """Notebook 08's setting (M = 10,000, C = 4,096, blocks of 16, hidden cache on, TTFT and
    P99 TBT SLOs of 1 s): attainment and hidden-cache use of the paper's value model and the
    authors' code at ``mult`` x the trace rate."""
    import warnings

    from optsched.metrics.serving import serving_metrics
    from optsched.serving.rate_search import at_rate, trace_rate
    from optsched.workloads.traces import load_trace_instance
    lim = Limits(kv_capacity=10_000, max_batch_tokens=4096, block_size=16, hidden_cache=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = load_trace_instance(TRACE, lim, _cost(), limit=n,
                                   too_long="drop")
    inst = at_rate(base, mult * trace_rate(base), seed=0)
    print(f"Apt-Serve: {inst.n} Azure conversation requests at {mult:g}x the trace rate")
    print(f"{'policy':28} {'SLO att':>8} {'eff req/s':>9} {'hidden entries':>15} {'s':>5}")
    for name, params in (("vllm", {}), ("aptserve-kv-only", {}), ("aptserve", {}),
                         ("aptserve", {"value_model": "code"})):
        label = name + "".join(f" {k}={v}" for k, v in params.items())
        p = _policy(name, **params)
        if p is None:
            print(f"{label:28} (parameter unknown to this tree)")
            continue
        t0 = time.perf_counter()
        s = simulate(inst, p)
        ev = evaluate(inst, s)
        m = serving_metrics(inst, ev, schedule=s, ttft_slo=1.0, tbt_slo=1.0)
        print(f"{label:28} {_fmt(m['ttft_tbt_attainment']):>8} "
              f"{_fmt(m['effective_throughput_rps']):>9} "
              f"{ev.metrics.get('hidden_entries', 0):>15} {time.perf_counter() - t0:>5.1f}")


def approx_rows(trials: int, seed: int) -> None:
    """Apt-Serve's 2-approximation (``check-claim aptserve-2approx``'s random problems), its
    violations split by whether every KV choice fits the per-iteration limit alone."""
    import random

    from optsched.oracles.aptserve import VARIANTS, exact_bruteforce, greedy, random_problem
    rng = random.Random(seed)
    split = {v: [0, 0] for v in VARIANTS}
    fit = 0
    for _ in range(trials):
        prob = random_problem(rng, 6)
        opt = exact_bruteforce(prob)
        alone = all(m <= prob.capacity for m in prob.memory)
        fit += alone
        for v, kw in VARIANTS.items():
            if greedy(prob, **kw).value < opt.value / 2 - 1e-9:
                split[v][0 if alone else 1] += 1
    print(f"Apt-Serve 2-approximation: {trials} problems (seed {seed}), {fit} with every KV "
          f"choice fitting alone")
    print(f"{'variant':24} {'violations, all fit':>20} {'violations, one does not':>25}")
    for v, (a, b) in split.items():
        print(f"{v:24} {a:>20} {b:>25}")


# -- paper-like settings: synthetic ShareGPT-like lengths (chat-like) ---------------------------
#: EcoServe's KV memory: 12 GB for OPT-13B (section 2), 2 x 40 layers x 5,120 dims x 2 bytes =
#: 819,200 bytes per token -> 12e9 / 819,200 = 14,648 tokens
ECO_PAPER_M = 14_648


def _chat(dataset: str, n: int, lim: Limits, seed: int = 0):
    from optsched.workloads.generators import generate
    return generate("chat-like", n=n, rate=1.0, seed=seed, dataset=dataset, limits=lim,
                    cost_model=_cost())


def ecoserve_paper_rows(n: int, rates: tuple[float, ...]) -> None:
    """EcoServe on its own kind of workload: ``n`` ShareGPT-like requests (EcoServe Table 2's
    means and ranges), M = 14,648 (its 12 GB of KV for OPT-13B), at each rate (req/s); the
    paper's metric (section 5: mean latency / output length), and the same on a trace twice
    as long (below capacity the answer should not move; above it the queue grows). The
    work-limit rate is printed for scale: memory, not work, binds here."""
    from optsched.serving.rate_search import at_rate, work_limit_rate
    lim = Limits(kv_capacity=ECO_PAPER_M, max_batch_tokens=4096)
    print(f"EcoServe, paper-like: chat-like sharegpt-ecoserve, M = {ECO_PAPER_M}, C = 4,096")
    print(f"{'n':>5} {'wl req/s':>8} {'req/s':>6} {'policy':26} {'norm lat':>9} {'mean JCT':>9} "
          f"{'thr req/s':>9} {'s':>5}")
    for size in (n, 2 * n):
        base = _chat("sharegpt-ecoserve", size, lim)
        wl = work_limit_rate(base)
        for rate in rates:
            inst = at_rate(base, rate, seed=0)
            for name, params in (("vllm", {}), ("ecoserve", {}),
                                 ("ecoserve", {"deadline": "slo-length"})):
                label = name + "".join(f" {k}={v}" for k, v in params.items())
                t0 = time.perf_counter()
                ev = evaluate(inst, simulate(inst, get_policy(name, **params)))
                print(f"{size:>5} {wl:>8.2f} {rate:>6.2f} {label:26} "
                      f"{np.mean(ev.latency / inst.output):>9.4f} {np.mean(ev.latency):>9.2f} "
                      f"{inst.n / ev.metrics['makespan']:>9.2f} {time.perf_counter() - t0:>5.1f}")


def bros_paper_rows(n_rt: int, rate: float) -> None:
    """BROS as section 7.1 ran it: RT requests over ShareGPT-like lengths (BROS Table 2),
    BE batches of 8 submitted closed-loop (each when the previous completes under the policy
    measured, ``closed_loop_be``), at ``n_rt`` and ``2 n_rt`` RT requests."""
    from optsched.workloads.hybrid import closed_loop_be
    pool = _chat("sharegpt", 5000, LIMITS, seed=3)
    print(f"BROS, paper-like: chat-like sharegpt RT at {rate} req/s, closed-loop BE batches "
          f"of 8, M = 20,000")
    print(f"{'RT':>4} {'policy':8} {'RT norm lat':>12} {'TTFT att':>9} {'BE req/s':>9} "
          f"{'BE co-serv':>10} {'BE batches':>10} {'s':>6}")
    for size in (n_rt, 2 * n_rt):
        base = bros_workload(pool, size, rate, seed=1, be_batch=8, limits=LIMITS,
                             cost_model=_cost())
        for name in ("bros", "vllm"):
            t0 = time.perf_counter()
            run = closed_loop_be(base, lambda name=name: get_policy(name))
            m = hybrid_metrics(run.instance, run.evaluation, run.schedule)
            print(f"{size:>4} {name:8} {_fmt(m['rt_normalised_latency']):>12} "
                  f"{_fmt(m['rt_ttft_attainment']):>9} {_fmt(m['be_throughput']):>9} "
                  f"{_fmt(m.get('be_throughput_coserving')):>10} {run.batches:>10} "
                  f"{time.perf_counter() - t0:>6.1f}")


def aptserve_paper_rows(n: int, rates: tuple[float, ...]) -> None:
    """Apt-Serve on ShareGPT-like lengths (its chatbot workload, section 6.1) in notebook 08's
    memory setting: TTFT + P99 TBT attainment (SLOs 1 s) at each rate, and at 2n requests."""
    from optsched.metrics.serving import serving_metrics
    from optsched.serving.rate_search import at_rate
    lim = Limits(kv_capacity=10_000, max_batch_tokens=4096, block_size=16, hidden_cache=True)
    print("Apt-Serve, paper-like: chat-like sharegpt, M = 10,000, blocks of 16, hidden cache")
    print(f"{'n':>5} {'req/s':>6} {'policy':28} {'SLO att':>8} {'hidden entries':>15} {'s':>5}")
    for size in (n, 2 * n):
        base = _chat("sharegpt", size, lim)
        for rate in rates:
            inst = at_rate(base, rate, seed=0)
            for name, params in (("vllm", {}), ("aptserve-kv-only", {}), ("aptserve", {}),
                                 ("aptserve", {"value_model": "code"})):
                label = name + "".join(f" {k}={v}" for k, v in params.items())
                t0 = time.perf_counter()
                s = simulate(inst, get_policy(name, **params))
                ev = evaluate(inst, s)
                m = serving_metrics(inst, ev, schedule=s, ttft_slo=1.0, tbt_slo=1.0)
                print(f"{size:>5} {rate:>6.2f} {label:28} {_fmt(m['ttft_tbt_attainment']):>8} "
                      f"{ev.metrics.get('hidden_entries', 0):>15} {time.perf_counter() - t0:>5.1f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rt", type=int, default=15, help="RT requests of the BROS run")
    ap.add_argument("--rate", type=float, default=4.0, help="RT rate of the BROS run")
    ap.add_argument("--n", type=int, default=300, help="Azure requests of the EcoServe run")
    ap.add_argument("--mult", type=float, default=4.0, help="EcoServe load: x the trace rate")
    ap.add_argument("--apt-n", type=int, default=80, help="Azure requests of the Apt-Serve run")
    ap.add_argument("--apt-mult", type=float, default=2.0, help="Apt-Serve load: x trace rate")
    ap.add_argument("--eco-rates", default="4,6,8", help="ecoserve-paper: rates (req/s)")
    ap.add_argument("--apt-rates", default="4,8,16", help="aptserve-paper: rates (req/s)")
    ap.add_argument("--only", choices=("bros", "ecoserve", "aptserve", "approx", "bros-paper",
                                       "ecoserve-paper", "aptserve-paper"),
                    help="run one part")
    ap.add_argument("--cost-model", default=COST["preset"],
                    help="cost preset (e.g. vidur-llama2-7b-a100, fitted by studies/claims/cost_preset.py)")
    args = ap.parse_args(argv)
    from optsched.cost import PRESETS
    if args.cost_model not in PRESETS:
        ap.error(f"--cost-model: unknown preset {args.cost_model!r}; known: {', '.join(PRESETS)}")
    COST["preset"] = args.cost_model
    print(f"# cost model: {args.cost_model}")
    if args.only in (None, "approx"):
        approx_rows(3000, 1)
    if args.only in (None, "ecoserve-paper"):
        ecoserve_paper_rows(args.n, tuple(float(x) for x in args.eco_rates.split(",")))
    if args.only in (None, "bros-paper"):
        bros_paper_rows(args.rt, args.rate)
    if args.only in (None, "aptserve-paper"):
        aptserve_paper_rows(args.apt_n, tuple(float(x) for x in args.apt_rates.split(",")))
    if args.only in ("approx", "ecoserve-paper", "bros-paper", "aptserve-paper"):
        return 0
    if not TRACE.exists():
        print(f"skipped: trace {TRACE} not found (set OPTSCHED_DATA)")
        return 0
    if args.only in (None, "bros"):
        bros_rows(args.rt, args.rate)
    if args.only in (None, "ecoserve"):
        ecoserve_rows(args.n, args.mult)
    if args.only in (None, "aptserve"):
        aptserve_rows(args.apt_n, args.apt_mult)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
