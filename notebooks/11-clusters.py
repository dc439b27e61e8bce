# %% [markdown]
# # 11 — Clusters: routers against the best schedule and the certified bound, and prefill:decode splits
#
# A cluster instance ([semantics](../semantics.md) section 6, "Clusters") is served by several
# engines; a **router** sends each arriving request to one of them and a copy of vLLM schedules
# each engine. This notebook asks, on **2, 4 and 8 replicas** loaded to 70-90% each, how far each
# router (`rr`: round robin, `lor`: least outstanding requests — Vidur's two global schedulers —,
# `least-kv`, `p2c`: power of two choices) is from the **best schedule we can find**
# (`optsched improve` on the cluster: moves and swaps of requests between engines,
# `optsched/search/assignment.py`) and from the **certified floor** (`formulations/bounds.md`
# B17), for total latency, mean and P99 TTFT and SLO goodput; then which **prefill:decode
# split** of four GPUs serves the most requests within their SLOs (the `pd` router:
# DistServe- / Splitwise-style disaggregation with a KV transfer per request).
#
# **Data.** With the shared data (`../shared/data/traces/AzureLLMInferenceTrace_conv.csv`), a
# seeded window of the Azure 2023 conversation trace in the results page's setting
# ([docs/results/cluster.md](../results/cluster.md): `M = 30,000`, `C = 8,192`, InferMax's
# Llama-2-7B/A100 preset, requests with `I + O - 1 > M` dropped); without it, the `chat-like`
# generator (ShareGPT-like lengths) with the same limits and preset. The first cell says which.
# The arrivals are stretched so that each of the `R` replicas carries the stated **load per
# replica** (the one-engine offered load is `R x load`; section 6, "Load per replica").
# FAST mode: 120-request windows (80 synthetic requests), seed 0, load 0.8 per replica, a
# 15-candidate search;
# `OPTSCHED_FAST=0`: 600 requests, seeds 0 and 1, loads 0.7 and 0.9, 300 candidates (the results
# page has the 1,200-request tables).
#
# **SLOs** (the results page's): TTFT <= 0.5 s and TPOT <= 0.05 s on every request; **goodput** is
# the number of requests meeting both per second of the schedule's span, and per GPU.
#
# **Published claims checked**: Vidur (Agrawal et al., MLSys'24) models round robin and
# least-outstanding-requests global schedulers; the common reading is that load-aware routing
# (`lor`) beats round robin on latency. DistServe (Zhong et al., OSDI'24) reports that
# disaggregating prefill and decode raises goodput per GPU over colocated vLLM.

# %%
import time
import warnings

import numpy as np
from IPython.display import Markdown, display
from nbsetup import FAST, md_table, pct, show, trace_path

print(f"FAST = {FAST}")
warnings.simplefilter("ignore")
SIZE = 120 if FAST else 600
SEEDS = [0] if FAST else [0, 1]
LOADS = [0.8] if FAST else [0.7, 0.9]
REPLICAS = [2, 4, 8]
ROUTERS = ["rr", "lor", "least-kv", "p2c"]
TTFT_SLO, TPOT_SLO = 0.5, 0.05
MOVES = 15 if FAST else 300
T0 = time.perf_counter()

# %%
from optsched.cost import preset
from optsched.instance import Limits
from optsched.serving.load import offered_load, scale_to_load
from optsched.workloads.generators import chat_like
from optsched.workloads.traces import window_instance

LIMITS, COST = Limits(kv_capacity=30_000, max_batch_tokens=8_192), preset("infermax-llama2-7b-a100")
CONV, HAVE_DATA = trace_path()
if FAST and not HAVE_DATA:
    SIZE = 80  # chat-like outputs are longer than the trace's: fewer requests, the same budget


def base(seed):
    """The seeded window (or synthetic draw) before its arrivals are stretched to a load."""
    if HAVE_DATA:
        return window_instance(CONV, SIZE, seed, LIMITS, COST, format="azure", too_long="drop")
    return chat_like(SIZE, 40.0, seed, limits=LIMITS, cost_model=COST)


BASES = {seed: base(seed) for seed in SEEDS}
LOAD_OF = {seed: offered_load(inst) for seed, inst in BASES.items()}  # measured once per window


def at_load(seed, one_engine_load):
    """The window with its one-engine point load set, and SLOs on every request."""
    inst = scale_to_load(BASES[seed], one_engine_load, LOAD_OF[seed])
    return inst.with_default_slos(TTFT_SLO, TPOT_SLO)


SOURCE = ("seeded windows of the Azure conversation trace (the shared data)" if HAVE_DATA
          else "the chat-like generator (the shared data is absent)")
SETTING = (f"{SIZE} requests, M = 30,000, C = 8,192, Llama-2-7B/A100 preset, vLLM on every "
           f"engine, SLOs TTFT {TTFT_SLO} s / TPOT {TPOT_SLO} s")
display(Markdown(f"**Data used: {SOURCE}.** Setting: {SETTING}. One engine sustains about "
                 + " / ".join(f"{lo.achievable_rate:.2f}" for lo in LOAD_OF.values())
                 + f" requests a second of these mixes (`mu_ach`, seeds {SEEDS})."))

# %% [markdown]
# ## Every router, the best schedule found and the certified floor
#
# For each cluster size and load: every router's schedule, replayed by the one evaluator; then
# `improve` from the router with the lowest total latency (a fixed number of candidates, seeded,
# so the figures are reproducible; it minimises total latency, and its other columns are those of
# the schedule it found, so its goodput may be below a router's); and B17's floors (total latency `>= sum_i chain_i`, mean
# TTFT `>= mean_i prefill_chain_i`: each request's own chain of batches, which knows nothing of
# queueing); the SLO attainment has B17g's certified ceiling (`optsched.bounds.cluster_goodput`:
# B12's own floors and counting over the engines, no schedule meets more requests' SLOs). P99
# TTFT and goodput per second (its span depends on the schedule) have none, so those are "-".

# %%
from optsched.bounds.cluster import cluster_request_floors
from optsched.bounds.cluster_goodput import cluster_goodput_bound
from optsched.cluster import disaggregate, replicate, simulate
from optsched.evaluation import evaluate
from optsched.policies import get_spec
from optsched.search.assignment import AssignmentOptions, improve_assignment


def measure(inst, sched):
    ev = evaluate(inst, sched)  # the one evaluator replays every schedule
    assert ev.feasible, ev.violations[:1]
    m = ev.metrics
    return {"total": m["total_latency"], "mean_ttft": m["mean_ttft"], "p99_ttft": m["p99_ttft"],
            "goodput": m.get("goodput") or 0.0, "attain": m.get("slo_attainment") or 0.0,
            "gpus": m.get("gpus", inst.n_engines), "goodput_gpu": m.get("goodput_per_gpu") or 0.0,
            "transfers": m.get("transfers", 0), "busy": [e["utilisation"] for e in ev.engines]}


cells = {}
for seed in SEEDS:
    for R in REPLICAS:
        for rho in LOADS:
            inst = replicate(at_load(seed, R * rho), R)
            scheds = {r: simulate(inst, "vllm", r) for r in ROUTERS}
            row = {r: measure(inst, s) for r, s in scheds.items()}
            start = min(ROUTERS, key=lambda r: row[r]["total"])
            got = improve_assignment(inst, scheds[start], get_spec("vllm").make, "total-latency",
                                     AssignmentOptions(time_limit=60.0, seed=0, max_moves=MOVES))
            row["best schedule"] = measure(inst, got.schedule)
            row["_from"], row["_floor"] = start, cluster_request_floors(inst)
            row["_ceiling"] = cluster_goodput_bound(inst).attainment
            assert all(row[k]["attain"] <= row["_ceiling"] + 1e-9 for k in [*ROUTERS, "best schedule"])
            cells[(seed, R, rho)] = row
print(f"routers, improve and floors done in {time.perf_counter() - T0:.1f} s")

# %%
NAMES = ROUTERS + ["best schedule"]
for (seed, R, rho), row in cells.items():
    f, n = row["_floor"], BASES[seed].n
    rows = [[name, f"{row[name]['total'] / n:.3f}", f"{row[name]['total'] / f['total_latency']:.3f}",
             f"{row[name]['mean_ttft']:.3f}", f"{row[name]['p99_ttft']:.3f}",
             f"{row[name]['goodput']:.2f}", pct(row[name]["attain"])] for name in NAMES]
    rows.append(["certified bound", f"{f['mean_latency']:.3f}", "1", f"{f['mean_ttft']:.3f}",
                 "-", "-", f"<= {pct(row['_ceiling'])}"])
    display(Markdown(f"**{R} replicas, load {rho} per replica, seed {seed}** ({SETTING}; best "
                     f"schedule: `improve` from `{row['_from']}`, {MOVES} candidates)\n\n" + md_table(
                         ["", "mean latency (s)", "/ floor", "mean TTFT (s)", "P99 TTFT (s)",
                          "goodput (req/s)", "SLO attainment"], rows)))

# %%
import matplotlib.pyplot as plt

fig, axes = plt.subplots(1, len(LOADS), figsize=(6 * len(LOADS), 3.6), squeeze=False)
for ax, rho in zip(axes[0], LOADS):
    x = np.arange(len(REPLICAS))
    w = 0.8 / len(NAMES)
    for k, name in enumerate(NAMES):
        ys = [np.mean([cells[(s, R, rho)][name]["total"] / cells[(s, R, rho)]["_floor"]["total_latency"]
                       for s in SEEDS]) for R in REPLICAS]
        ax.bar(x + (k - len(NAMES) / 2 + 0.5) * w, ys, w, label=name)
    ax.axhline(1.0, color="k", lw=1, ls="--", label="certified floor")
    ax.set_xticks(x, [f"{R} replicas" for R in REPLICAS])
    ax.set_ylabel("total latency / certified floor")
    ax.set_title(f"load {rho} per replica ({SIZE} requests, mean over seeds {SEEDS})")
axes[0][0].legend(fontsize=7, ncol=2)
fig.tight_layout()
show(fig, "11-routers-vs-floor")

# %% [markdown]
# ## Prefill:decode splits of four GPUs
#
# The same window at a load of 0.5 per GPU of four (one engine's load 2.0) on 4 GPUs split `P:D`
# into `prefill` and `decode` engines under the `pd` router (prompts to the prefill engine with
# the fewest outstanding requests, each request's KV then moved to a decode engine with room for
# its peak over the default link: 25 GB/s, Llama-2-7B's 524,288 bytes a token), beside 4
# colocated replicas under `lor`. Beside each: B17g's certified ceiling on the SLO attainment
# of any schedule of that configuration (with the KV transfer before the second token on a
# split).

# %%
PD_LOAD = 0.5
pd = {}
for seed in SEEDS:
    inst = at_load(seed, 4 * PD_LOAD)
    for name, c in [("4 replicas (lor)", replicate(inst, 4))] + [
            (f"{P}:{D} (pd)", disaggregate(inst, P, D)) for P, D in [(1, 3), (2, 2), (3, 1)]]:
        pd[(seed, name)] = measure(c, simulate(c, "vllm", name.split("(")[1].rstrip(")")))
        pd[(seed, name)]["ceiling"] = cluster_goodput_bound(c).attainment
        assert pd[(seed, name)]["attain"] <= pd[(seed, name)]["ceiling"] + 1e-9  # a bound never below
display(Markdown(f"Load {PD_LOAD} per GPU of four; {SETTING}.\n\n" + md_table(
    ["seed", "engines", "SLO attainment", "its ceiling (B17g)", "goodput per GPU (req/s)",
     "mean TTFT (s)", "mean latency (s)", "transfers", "busy per engine"],
    [[s, name, pct(m["attain"]), f"<= {pct(m['ceiling'])}", f"{m['goodput_gpu']:.2f}",
      f"{m['mean_ttft']:.3f}",
      f"{m['total'] / BASES[s].n:.3f}", m["transfers"], " / ".join(f"{b:.2f}" for b in m["busy"])]
     for (s, name), m in pd.items()])))
print(f"total {time.perf_counter() - T0:.1f} s")

# %% [markdown]
# ## Verdict

# %%
stable = list(cells.values())
lor_wins = sum(r["lor"]["total"] <= r["rr"]["total"] for r in stable)
gains = [1 - r["best schedule"]["total"] / r[r["_from"]]["total"] for r in stable]
over = [r["best schedule"]["total"] / r["_floor"]["total_latency"] for r in stable]
colocated = np.mean([m["goodput_gpu"] for (s, name), m in pd.items() if name.startswith("4 rep")])
best_split = max((np.mean([m["goodput_gpu"] for (s, n2), m in pd.items() if n2 == name]), name)
                 for name in {n for _, n in pd})
best_attain = [max(r[k]["attain"] for k in NAMES) for r in stable]
tight = sum(b >= r["_ceiling"] - 1e-9 for b, r in zip(best_attain, stable))
tight_pd = sum(m["attain"] >= m["ceiling"] - 1e-9 for m in pd.values())
router_gap = max(r["_ceiling"] - b for b, r in zip(best_attain, stable))
pd_gap = max(m["ceiling"] - m["attain"] for m in pd.values())
lines = [
    f"* **Routers** ({SOURCE}, loads {LOADS} per replica on {REPLICAS} replicas): `lor`'s total "
    f"latency is at most round robin's in {lor_wins} of {len(stable)} cells: "
    + ("**agrees** with load-aware routing beating round robin." if lor_wins == len(stable) else
       "**does not agree everywhere** with load-aware routing beating round robin (the cells "
       "where it loses are in the tables above)."),
    f"* **The best schedule found**: `improve` ({MOVES} candidates from the best router) lowered "
    f"the total latency in {sum(g > 0 for g in gains)} of {len(gains)} cells, by at most "
    f"{pct(max(gains), 2)}"
    + (" (there the best router is not a local optimum of the assignment; an upper side: the "
       "distance from optimal is at least this much)." if max(gains) > 0 else
       ": the best router is a local optimum for these few candidates, which proves nothing "
       "about the optimum."),
    f"* **Against the certified floor** the best schedule found is {min(over):.2f}-{max(over):.2f}x: "
    "the floor is each request's chain of batches without queueing, so most of the ratio is "
    "the floor's weakness, not a measured distance from optimal.",
    f"* **SLO attainment against its certified ceiling (B17g)**: the best schedule of a router "
    f"cell (a router's or `improve`'s) meets the ceiling, so is optimal for attainment, in "
    f"{tight} of {len(stable)} cells and is at most {100 * router_gap:.1f} points below it; "
    f"{tight_pd} of the {len(pd)} prefill:decode configurations meet theirs (the worst is "
    f"{100 * pd_gap:.1f} points below).",
    f"* **Prefill:decode** at load {PD_LOAD} per GPU: colocated replicas reach {colocated:.2f} "
    f"good requests a second per GPU, the best of all entries is {best_split[1]} "
    f"({best_split[0]:.2f}): "
    + ("**agrees** with DistServe (a split beats colocation)." if best_split[0] > colocated
       and not best_split[1].startswith("4 rep") else
       "**does not agree** with DistServe's gain for Llama-2-7B on one A100 at these SLOs: "
       "both pools are the same single-GPU engine with one cost model (no per-phase "
       "parallelism, no interference beyond a mixed batch's summed terms), so a split only "
       "divides the capacity (the results page's \"Capacity planning\" finds splits winning "
       "for Llama-2-70B at TPOT 0.05 s; docs/results/cluster.md)."),
]
display(Markdown("\n".join(lines)))
