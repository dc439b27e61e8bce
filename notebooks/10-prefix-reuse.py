# %% [markdown]
# # 10 — Prefix reuse: the cache-aware schedulers against the best schedule and the bound
#
# vLLM's automatic prefix caching and SGLang's RadixAttention keep the KV blocks of shared prompt
# prefixes and skip their prefill ([semantics](../semantics.md) section 6, "Prefix reuse"). This
# notebook puts, side by side, for **mean TTFT, total latency and SLO goodput**: vLLM without
# caching (`vllm`), `vllm-apc`, SGLang's `lpm` and `dfs`, Dexter et al.'s `k-lpm`, the best
# `improve` schedule, and the certified lower bound with reuse (`formulations/bounds.md` B19);
# then the hit rate against the KV capacity `M` (a plot), and how much of the gap is the order
# and how much the cache (the offline `belady` cache on top of each order).
#
# **Data.** With the shared data (`../shared/data/traces/mooncake_*_trace.jsonl`) it uses seeded
# windows of both Mooncake traces (the results page's setting: 512-token blocks, `M` = the file's
# longest request, `C = 8,192`, Llama-2-7B/A100 preset, arrivals stretched to point load 0.7);
# without it, the synthetic generators with shared prefixes (`system-prompts`, `multi-turn`,
# `few-shot`: ShareGPT-like lengths, 16-token blocks, `M = 16,384`, `C = 4,096`, the same
# preset and load). The first cell says which. FAST mode: 30-request windows, seed 0 (and no
# `few-shot`); `OPTSCHED_FAST=0`: 300 requests, seeds 0-2 (the results page,
# `docs/results/prefix.md`, has the full tables on the Mooncake windows).
#
# **SLO goodput** is the honest reading (Apt-Serve's, `optsched.metrics.serving`): a request meets
# its SLO when it finishes, its TTFT is at most 5x its prompt prefilled alone in one batch (a
# per-request SLO: prompts run from a few hundred to 120K tokens) and its **longest** gap between
# tokens is at most 1 s; goodput is the share of requests that meet it.
#
# **Published claims checked**: SGLang (Zheng et al.) — ordering the queue by longest prefix match
# (LPM) or depth-first over the radix tree (DFS) raises the hit rate over FCFS; Dexter et al.
# (NeurIPS 2025) — k-LPM trades hits (LPM) against fairness (FCFS): larger `k` more hits, worse tail TTFT.

# %%
import time
import warnings
from dataclasses import replace

import numpy as np
from IPython.display import Markdown, display
from nbsetup import FAST, md_table, pct, show, trace_path

print(f"FAST = {FAST}")
warnings.simplefilter("ignore")
SIZE = 30 if FAST else 300
SEEDS = [0] if FAST else [0, 1, 2]
LOAD = 0.7
TTFT_X, TBT_SLO = 5.0, 1.0
IMPROVE_LIMIT = 1.0 if FAST else 10.0
BOUND_LIMIT = 5.0 if FAST else 30.0
T0 = time.perf_counter()

# %%
from optsched.cost import preset
from optsched.instance import Limits
from optsched.serving.load import scale_to_load
from optsched.workloads.mooncake import default_kv_capacity, mooncake_instance, read_mooncake
from optsched.workloads.shared_prefix import few_shot, multi_turn, system_prompts

COST = preset("infermax-llama2-7b-a100")
CONV, HAVE_DATA = trace_path("mooncake_conversation_trace.jsonl")
SYNTH = CONV.with_name("mooncake_synthetic_trace.jsonl")
HAVE_DATA = HAVE_DATA and SYNTH.exists()


def mooncake_window(path, seed):
    M = default_kv_capacity(read_mooncake(path), 512)
    inst = mooncake_instance(path, Limits(M, 8192, block_size=512), COST, consecutive=SIZE, seed=seed)
    return scale_to_load(inst, LOAD)


SYN_LIMITS = Limits(16_384, 4096, block_size=16)
GENERATORS = {"system-prompts": system_prompts, "multi-turn": multi_turn}
if not FAST:
    GENERATORS["few-shot"] = few_shot
instances = {}
if HAVE_DATA:
    SOURCE = "seeded Mooncake windows (the shared data)"
    for seed in SEEDS:
        instances[f"conversation s{seed}"] = mooncake_window(CONV, seed)
        instances[f"synthetic s{seed}"] = mooncake_window(SYNTH, seed)
else:
    SOURCE = "the synthetic generators with shared prefixes (the shared data is absent)"
    for seed in SEEDS:
        for name, gen in GENERATORS.items():
            inst = gen(SIZE, 1.0, seed, limits=SYN_LIMITS, cost_model=COST)
            instances[f"{name} s{seed}"] = scale_to_load(inst, LOAD)
SETTING = (f"{SIZE} requests, point load {LOAD}, M = "
           + ", ".join(sorted({f"{i.limits.kv_capacity:,}" for i in instances.values()}))
           + f", C = {next(iter(instances.values())).limits.max_batch_tokens:,}, "
           f"blocks of {next(iter(instances.values())).limits.block_size}, Llama-2-7B/A100 preset")
display(Markdown(f"**Data used: {SOURCE}.** Setting: {SETTING}."))

# %%
from optsched.bounds.attribution import alone_work
from optsched.evaluation import evaluate
from optsched.policies import simulate
from optsched.prefix import reuse_potential

OBJS = ("mean-ttft", "total-latency")


def goodput(inst, ev):
    """Share of requests that finish with TTFT <= 5x their prompt alone and longest gap <= 1 s."""
    slo = TTFT_X * alone_work(inst)[0]
    met = np.isfinite(ev.latency) & (ev.ttft <= slo * (1 + 1e-12)) & (ev.max_tbt <= TBT_SLO * (1 + 1e-12))
    return float(met.mean())


def measure(inst, sched):
    ev = evaluate(inst, sched)  # the one evaluator replays every schedule
    assert ev.feasible, ev.violations[:1]
    return {"mean-ttft": ev.objective("mean-ttft"), "total-latency": ev.objective("total-latency"),
            "p99-ttft": float(np.percentile(ev.ttft, 99)), "goodput": goodput(inst, ev),
            "hit_rate": float(ev.metrics.get("hit_rate") or 0.0)}


POLICIES = ["vllm", "vllm-apc", "lpm", "dfs", "k-lpm", "belady", "svf", "ttft-first"]
res = {}
for name, inst in instances.items():
    res[name] = {p: measure(inst, simulate(inst, p)) for p in POLICIES}
    res[name]["_potential"] = reuse_potential(inst.prefix_index, inst.arrival, inst.prompt)["hit_share"]
print(f"policies done in {time.perf_counter() - T0:.1f} s")

# %% [markdown]
# ## The best `improve` schedule and the certified bound
#
# `optsched improve` refuses an instance with block ids (its exact windows are solved by the
# reuse-blind exhaustive search). So it runs on the window **without** ids, from the best
# reuse-blind start (`vllm`, `svf` or `ttft-first`) for the objective, for `IMPROVE_LIMIT`
# seconds; its schedule then gets the drops of every unheld block (`auto_drops`) and is replayed on
# the window *with* ids, where it is feasible and claims no hits. The bound is `best` over the
# reuse-aware rungs (`reuse-request`, `reuse-work`, `reuse-srpt`). For goodput the certified
# ceiling is B12r (`goodput_bound` with block ids, `formulations/bounds.md` B12): no schedule,
# with any hits, serves a larger share; its gap is (ceiling - best) / ceiling.

# %%
import optsched
from optsched.bounds.goodput import goodput_bound
from optsched.policies.reuse import auto_drops
from optsched.search.lns import LNSOptions, improve


def without_ids(inst):
    return inst.replace(requests=tuple(replace(r, prefix=()) for r in inst.requests))


bounds = {}
for name, inst in instances.items():
    blind = without_ids(inst)
    bounds[name] = {}
    for o in OBJS:
        start = min(["vllm", "svf", "ttft-first"], key=lambda p: res[name][p][o])
        got = improve(blind, simulate(blind, start), o, LNSOptions(time_limit=IMPROVE_LIMIT, progress=False))
        res[name][f"improve ({o})"] = measure(inst, auto_drops(inst, got.schedule))
        b = optsched.lower_bound(inst, o, "best", time_limit=BOUND_LIMIT)
        bounds[name][o] = (b.value, b.method)
    slo_inst = inst.replace(requests=tuple(
        replace(r, ttft_slo=float(s)) for r, s in zip(inst.requests, TTFT_X * alone_work(inst)[0])))
    bounds[name]["goodput"] = (goodput_bound(slo_inst, tbt=TBT_SLO).share, "B12r")
print(f"improve and bounds done in {time.perf_counter() - T0:.1f} s")

# %%
SHOWN = ["vllm", "vllm-apc", "lpm", "dfs", "k-lpm", "belady", "improve (mean-ttft)", "improve (total-latency)"]


def cell(v, o):
    return f"{v:.1%}" if o == "goodput" else (f"{v:,.0f}" if o == "total-latency" else f"{v:.3g}")


for o in ("mean-ttft", "total-latency", "goodput"):
    rows = []
    for name in instances:
        r = res[name]
        best = min(r[p][o] for p in SHOWN) if o != "goodput" else max(r[p][o] for p in SHOWN)
        bnd = f"{cell(bounds[name][o][0], o)} ({bounds[name][o][1]})"
        if o in OBJS:
            gap = pct(best / bounds[name][o][0] - 1, 0)
        else:  # a ceiling: the share it leaves above the best
            gap = pct(1 - best / bounds[name][o][0], 0) if bounds[name][o][0] else "-"
        rows.append([name, pct(r["_potential"])] + [cell(r[p][o], o) for p in SHOWN] + [bnd, gap])
    unit = "share of requests" if o == "goodput" else "s"
    how = "(ceiling - best) / ceiling" if o == "goodput" else "best of these / bound - 1"
    display(Markdown(f"**{o}** ({unit}; {SETTING}; gap = {how})\n\n"
                     + md_table(["window", "hit share"] + SHOWN + ["bound (rung)" if o in OBJS else "ceiling", "gap"],
                              rows)))

# %% [markdown]
# ## Hit rate against KV capacity
#
# `vllm-apc` (FCFS, LRU), `lpm` (LRU) and `belady` (FCFS, offline furthest-next-use cache) at
# `M`/2, `M`, 4`M` and unbounded (every token of the window at once; a capacity below the window's
# largest request is left out; `belady`, which has no compiled path, at `M` and unbounded only), beside the hit share of an unbounded cache (the reuse potential, `optsched info`).

# %%
import matplotlib.pyplot as plt

CAP_NAME = next(iter(instances))
inst = instances[CAP_NAME]
M0 = inst.limits.kv_capacity
total = int(inst.prompt.sum() + inst.output.sum())
caps = sorted({M0 // 2, M0, 4 * M0, total})
caps = [m for m in caps if m >= int((inst.prompt + inst.output - 1).max())]
hits = {p: {} for p in ("vllm-apc", "lpm", "belady")}
for m in caps:
    im = inst.replace(limits=replace(inst.limits, kv_capacity=m))
    for p in hits:
        if p != "belady" or m in (M0, total):  # the offline cache (Python only) at M and unbounded
            hits[p][m] = measure(im, simulate(im, p))["hit_rate"]
fig, ax = plt.subplots(figsize=(6.5, 3.6))
for p, ys in hits.items():
    ax.plot(list(ys), list(ys.values()), marker="o", label=p)
ax.axhline(res[CAP_NAME]["_potential"], color="grey", ls="--", label="unbounded-cache potential")
ax.set_xscale("log")
ax.set_xlabel("KV capacity M (tokens)")
ax.set_ylabel("hit rate")
ax.set_title(f"{CAP_NAME}: {SIZE} requests, point load {LOAD}, C = {inst.limits.max_batch_tokens:,}", fontsize=9)
ax.legend(fontsize=8)
fig.tight_layout()
show(fig, "10-hit-rate-vs-capacity")
display(Markdown(md_table(["M"] + list(hits), [[f"{m:,}"] + [pct(hits[p].get(m)) for p in hits]
                                               for m in caps])))

# %% [markdown]
# ## Order or cache?
#
# Each reuse-aware order with its LRU cache and with the offline Belady cache (`cache=belady`): the
# change from LRU to Belady is what a better cache can add under that order; the change between
# orders under the same cache is the order's. Same windows and setting as above.

# %%
ORDERS = ["vllm-apc", "lpm", "dfs", "k-lpm"]
rows = []
for name, inst in instances.items():
    for p in ORDERS:
        lru = res[name][p] if p in res[name] else measure(inst, simulate(inst, p))
        bel = measure(inst, simulate(inst, p, cache="belady"))
        rows.append([name, p, pct(lru["hit_rate"]), pct(bel["hit_rate"]), f"{lru['mean-ttft']:.3g}",
                     f"{bel['mean-ttft']:.3g}", f"{lru['total-latency']:,.0f}", f"{bel['total-latency']:,.0f}"])
display(Markdown(f"{SETTING}\n\n" + md_table(
    ["window", "order", "hit LRU", "hit Belady", "mean TTFT LRU", "mean TTFT Belady",
     "total latency LRU", "total latency Belady"], rows)))

# %% [markdown]
# ## The published claims, where the order can matter
#
# An order can raise the hit rate only when requests that share a prefix wait together and the
# cache cannot keep every prefix. So the claims are checked on the synthetic sharing generators
# (whatever the data: `system-prompts`, 4 system prompts of 1,024 tokens with Zipf popularity;
# `multi-turn`, conversations whose turn k+1 extends turn k) with a small cache, `M = 8,192`,
# `C = 4,096`, 16-token blocks, and arrivals at point load 0.7 compressed 2x (a queue builds).
# SGLang's engine (prefill priority, chunked prefill, LRU) runs each order: FCFS (`lpm` with
# `fcfs_above=1`), `k-lpm` with k = 2 and 4, pure LPM (`fcfs_above=0`) and `dfs`.

# %%
CLAIMS = [("fcfs", "lpm", {"fcfs_above": 1}), ("k-lpm k=2", "k-lpm", {"k": 2}), ("k-lpm k=4", "k-lpm", {"k": 4}),
          ("lpm (pure)", "lpm", {"fcfs_above": 0}), ("dfs", "dfs", {})]
CLAIM_LIMITS = Limits(8192, 4096, block_size=16)
CLAIM_N = 40 if FAST else 200
claims = {}
rows = []
for gname in ("system-prompts", "multi-turn"):
    base = scale_to_load(GENERATORS[gname](CLAIM_N, 1.0, 0, limits=CLAIM_LIMITS, cost_model=COST), LOAD)
    ic = base.replace(requests=tuple(replace(r, arrival=r.arrival * 0.5) for r in base.requests))
    pot = reuse_potential(ic.prefix_index, ic.arrival, ic.prompt)["hit_share"]
    claims[gname] = {lab: measure(ic, simulate(ic, p, **kw)) for lab, p, kw in CLAIMS}
    for lab, c in claims[gname].items():
        rows.append([gname, pct(pot), lab, pct(c["hit_rate"]), f"{c['mean-ttft']:.3g}", f"{c['p99-ttft']:.3g}",
                     pct(c["goodput"])])
display(Markdown(f"{CLAIM_N} requests, seed 0, arrivals of point load {LOAD} compressed 2x, M = 8,192, C = 4,096, "
                 "blocks of 16, Llama-2-7B/A100 preset\n\n"
                 + md_table(["generator", "hit share", "order", "hit rate", "mean TTFT (s)", "P99 TTFT (s)",
                             "goodput"], rows)))

# %% [markdown]
# ## Verdict (computed from the tables above)

# %%
lines = []
for name in claims:
    c = claims[name]
    up = c["lpm (pure)"]["hit_rate"] - c["fcfs"]["hit_rate"]
    dfs_up = c["dfs"]["hit_rate"] - c["fcfs"]["hit_rate"]
    sglang = ("agree" if up > 0.005 and dfs_up > 0.005 else
              "disagree" if up < -0.005 or dfs_up < -0.005 else "cannot tell (within 0.5 points)")
    ks = [c["fcfs"], c["k-lpm k=2"], c["k-lpm k=4"], c["lpm (pure)"]]
    hit_mono = all(b["hit_rate"] >= a["hit_rate"] - 1e-9 for a, b in zip(ks, ks[1:]))
    tail_mono = all(b["p99-ttft"] >= a["p99-ttft"] - 1e-9 for a, b in zip(ks, ks[1:]))
    spread = max(k["hit_rate"] for k in ks) - min(k["hit_rate"] for k in ks)
    dexter = ("cannot tell (all k within 0.5 points of hits)" if spread < 0.005 else
              "agree" if hit_mono and tail_mono else "disagree")
    lines.append(f"* **{name}**: SGLang's claim (LPM and DFS raise the hit rate over FCFS): **{sglang}** "
                 f"(LPM {up * 100:+.1f}, DFS {dfs_up * 100:+.1f} points). Dexter et al.'s k-LPM trade-off "
                 f"(more hits and a worse P99 TTFT as k grows): **{dexter}** (hit rates "
                 + ", ".join(pct(k["hit_rate"]) for k in ks) + "; P99 TTFT "
                 + ", ".join(f"{k['p99-ttft']:.3g}" for k in ks) + " s for FCFS, k=2, k=4, LPM).")
for name, r in res.items():
    best_reuse = min(("vllm-apc", "lpm", "dfs", "k-lpm", "belady"), key=lambda p: r[p]["mean-ttft"])
    best_all = min(SHOWN, key=lambda p: r[p]["mean-ttft"])
    lines.append(f"* **{name}** ({SETTING}): mean TTFT of the best reuse-aware policy `{best_reuse}` "
                 f"{r[best_reuse]['mean-ttft']:.3g} s, of the best schedule `{best_all}` {r[best_all]['mean-ttft']:.3g} s, "
                 f"certified bound {bounds[name]['mean-ttft'][0]:.3g} s; `belady` hits "
                 f"{pct(r['belady']['hit_rate'])} against `vllm-apc`'s {pct(r['vllm-apc']['hit_rate'])} "
                 f"(potential {pct(r['_potential'])}).")
display(Markdown(f"Claims on the sharing generators (setting above); the main tables on {SOURCE}. Each claim is marked agree, disagree, or cannot tell (the "
                 "orders' hit rates within 0.5 points of each other).\n\n" + "\n".join(lines)))
print(f"notebook done in {time.perf_counter() - T0:.1f} s")
