# %% [markdown]
# # 06 — EcoServe on the Azure conversation trace: sustainable rate, JCT, ablation
#
# EcoServe (Shen and Sen, `../shared/papers/002_fb6e51c00a49645c.txt`) decouples prompt tasks (PT)
# and generation tasks (GT), allocates KV for the *predicted* response length, batches GTs of the same
# predicted length (time-synced), orders both queues (deadline bucket, occupied KV, length) and lends
# the unused half of a GT's allocation to shorter GTs (KV pipelining). Its claims (section 4):
#
# - on ShareGPT-like traces it **sustains 2.5-4x vLLM's request rate** at similar normalised latency
#   (22-64x ORCA's); the Oracle (exact lengths) only about 8% more than EcoServe;
# - **JCT 64-91% lower than vLLM** for the full system; the ablation EcoServe-D / -SD / -SDO / full:
#   16-36%, 35-58%, 43-64%, 64-91% lower JCT than vLLM;
# - scheduling time within 3% of vLLM's (measured in `benchmarks/ecoserve.py`, not here).
#
# Here: the policies `ecoserve-d`, `ecoserve-sd`, `ecoserve-sdo`, `ecoserve`, `ecoserve-oracle`,
# `vllm`, `sarathi` and `orca` (EcoServe's max-allocation baseline, batch size 8) on the Azure
# conversation trace with M = 100K tokens, C = 4096 and the InferMax Llama-2-7B/A100 cost model, with
# Poisson arrivals at rates where requests queue (`optsched.serving.rate_search.at_rate`: the trace's lengths,
# one seeded arrival pattern scaled to each rate). Every schedule is judged by `evaluate`; the noisy
# length predictor covers the true length for 73.2% of requests at 15% padding (the paper's ShareGPT
# figure). FAST mode uses the first 300 requests; `OPTSCHED_FAST=0` uses 3,000.

# %%
import warnings

from IPython.display import Markdown, display
from nbsetup import FAST, md_table, pct, show, trace_path

print(f"FAST = {FAST}")

N = 300 if FAST else 3000
MULTS = [1.5, 3.0] if FAST else [1.0, 1.5, 2.0, 3.0, 4.0]
PROBES = 4 if FAST else 7


TRACE, HAVE_DATA = trace_path()

# %%
from optsched.cost import PRESETS
from optsched.evaluation import evaluate
from optsched.instance import Limits
from optsched.metrics.serving import serving_metrics
from optsched.policies import SimStats, get_policy, simulate_policy
from optsched.serving.rate_search import at_rate, search, slo_from_reference, trace_rate
from optsched.workloads.traces import load_trace_instance

POLICIES = ["vllm", "sarathi", "orca", "ecoserve-d", "ecoserve-sd", "ecoserve-sdo", "ecoserve",
            "ecoserve-oracle"]
if HAVE_DATA:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inst = load_trace_instance(TRACE, Limits(kv_capacity=100_000, max_batch_tokens=4096),
                                   PRESETS["infermax-llama2-7b-a100"], limit=N, too_long="drop",
                                   name="azure-conv")
    r0 = trace_rate(inst)
    slo = slo_from_reference(inst, "vllm", 2.0)  # t_p, t_g measured on the workload (vllm, own arrivals)
    print(f"{inst.n} requests, own rate {r0:.2f} req/s; t_p = {slo.t_p:.4f} s, t_g = {slo.t_g:.4f} s")


def run(policy, rate):
    """Simulate at a rate, evaluate, and return the serving metrics plus the policy's counters."""
    i = at_rate(inst, rate, seed=0)
    p, st = get_policy(policy), SimStats()
    s = simulate_policy(i, p, stats=st)
    ev = evaluate(i, s)
    assert ev.feasible, (policy, ev.violation_counts)
    return {**serving_metrics(i, ev, slo=slo, stats=st), **getattr(p, "counters", {})}


# %% [markdown]
# ## Normalised latency, JCT and SLO attainment against the arrival rate

# %%
grid = {}
if HAVE_DATA:
    for k in MULTS:
        for p in POLICIES:
            grid[(p, k)] = run(p, k * r0)
    rows = [[p, f"{k:g}x ({k * r0:.1f}/s)", f"{m['normalized_latency']:.4f}", f"{m['mean_jct']:.1f}",
             pct(m["slo_attainment"]), f"{m['throughput_rps']:.2f}", pct(m["kv_utilisation"]),
             m["preemptions"], m.get("hosted", "")]
            for (p, k), m in grid.items()]
    display(Markdown(md_table(["policy", "rate", "norm. latency (s/token)", "mean JCT (s)", "JCT SLO met",
                               "throughput (req/s)", "KV use", "preemptions", "hosted GTs"], rows)))
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    for p in POLICIES:
        ax.plot([k * r0 for k in MULTS], [grid[(p, k)]["normalized_latency"] for k in MULTS], marker="o", label=p)
    ax.set_xlabel("arrival rate (requests/s)")
    ax.set_ylabel("normalised latency (s/token)")
    ax.set_yscale("log")
    ax.legend(fontsize="small")
    show(fig, "06_norm_latency")

# %% [markdown]
# ## Sustainable rate
#
# The highest Poisson rate at which the normalised latency stays at most `3 t_g` (three times the
# measured time per output token: "similar latency" to an unloaded system), by bisection
# (`optsched capacity` runs the same search from the command line).

# %%
sustain = {}
if HAVE_DATA:
    target = 3 * slo.t_g
    for p in POLICIES:
        res = search(inst, p, "normalized-latency", target, r0 / 2 if not FAST else r0, 6 * r0,
                     probes=PROBES, progress=False)
        sustain[p] = res
    display(Markdown(md_table(
        ["policy", "sustainable rate (req/s)", "first failing rate", "probes (rate: value)"],
        [[p, "below the range" if r.sustainable_rate is None else f"{r.sustainable_rate:.2f}",
          "none" if r.lowest_failing_rate is None else f"{r.lowest_failing_rate:.2f}",
          ", ".join(f"{q.rate:.1f}: {q.value:.3f}" for q in r.probes)] for p, r in sustain.items()])))


# %% [markdown]
# ## Does our result agree with EcoServe section 4?

# %%
def ratio_text(a, b):
    if a is None or b is None:
        return None
    return a / b


if HAVE_DATA:
    lines = []
    sr = {p: r.sustainable_rate for p, r in sustain.items()}
    x = ratio_text(sr["ecoserve"], sr["vllm"])
    if x is None:
        lines.append("- Sustainable rate: one of EcoServe / vLLM is outside the probed range, no ratio.")
    else:
        ok = 2.5 <= x <= 4.0
        lines.append(f"- **Sustainable rate, EcoServe / vLLM = {x:.2f}x** (paper: 2.5-4x): "
                     + ("agrees." if ok else "**disagrees**" + (" (higher)." if x > 4 else " (lower)."))
                     + f" EcoServe {sr['ecoserve']:.2f} req/s, vLLM {sr['vllm']:.2f} req/s.")
    y = ratio_text(sr["ecoserve"], sr["orca"])
    if y is not None:
        lines.append(f"- EcoServe / ORCA = {y:.2f}x (paper: 22-64x on ShareGPT): "
                     + ("agrees." if 22 <= y <= 64 else "**disagrees**."))
    z = ratio_text(sr["ecoserve-oracle"], sr["ecoserve"])
    if z is not None:
        lines.append(f"- Oracle / EcoServe = {z:.2f}x (paper: about 1.08x): "
                     + ("agrees." if abs(z - 1.08) <= 0.1 else "**disagrees**."))
    k = max(MULTS)
    base = grid[("vllm", k)]["mean_jct"]
    paper = {"ecoserve-d": (16, 36), "ecoserve-sd": (35, 58), "ecoserve-sdo": (43, 64), "ecoserve": (64, 91)}
    for p, (lo, hi) in paper.items():
        red = 100 * (1 - grid[(p, k)]["mean_jct"] / base)
        lines.append(f"- **{p}: JCT {red:.0f}% lower than vLLM** at {k:g}x the trace rate (paper: {lo}-{hi}%): "
                     + ("agrees." if lo <= red <= hi else "**disagrees**."))
    thr = {p: grid[(p, k)]["throughput_rps"] for p in POLICIES}
    lines.append(f"- Why: at {k:g}x the trace rate every policy but ORCA runs at a throughput between "
                 f"{min(v for p, v in thr.items() if p != 'orca'):.2f} and {max(thr.values()):.2f} req/s: the "
                 "linear cost model makes the GPU the bottleneck (prompts average over 1,000 tokens), so no "
                 "batching order can sustain a multiple of vLLM's rate. The KV cache is not the binding "
                 "resource for GTs: KV pipelining hosted "
                 f"{grid[('ecoserve', k)].get('hosted', 0)} GTs in the whole run. A GT only needs KV for its "
                 "predicted output (about 211 tokens here) while its prompt (about 1,155) was reserved by its PT, "
                 "so a finished prompt almost always finds room at once: the backlog waits in the PT queue, the "
                 "GT queue is nearly always empty when a group starts, there is nothing to host, and EcoServe and "
                 "EcoServe-SDO nearly coincide (ShareGPT, the paper's best case, has the opposite shape: prompts "
                 "of 161 and outputs of 338 tokens on average). "
                 "Our simulator also does not charge the policies' decision time to the clock, which the "
                 "paper counts in JCT (its vLLM baseline swaps to CPU; ours recomputes).")
    if FAST:
        lines.append(f"- FAST mode: the first {inst.n} requests only; `OPTSCHED_FAST=0` for 3,000.")
    display(Markdown("\n".join(lines)))
else:
    display(Markdown("Skipped: no trace data."))

# %% [markdown]
# ## A paper-like setting beside the Azure one
#
# The Azure prompts average about 1,155 tokens; EcoServe's ShareGPT (Table 2) 161 prompt and 338
# output tokens. `optsched generate chat-like --dataset sharegpt-ecoserve` draws **synthetic**
# lengths with those means and ranges (`optsched/workloads/chat_lengths.py`), and M = 14,648 tokens is
# EcoServe's 12 GB of KV for OPT-13B (819,200 bytes per token). Cost model: still Llama-2-7B's (we
# have no OPT-13B profile). Normalised latency (the paper's Fig. 10 metric) and throughput at rates
# below and at the throughput ceiling (about 8 req/s here); `studies/claims/fidelity.py --only
# ecoserve-paper` runs the same at 1,000 and 2,000 requests.

# %%
from optsched.workloads.generators import generate

N_PAPER = 300 if FAST else 1000
paper = generate("chat-like", n=N_PAPER, rate=1.0, seed=0, dataset="sharegpt-ecoserve",
                 limits=Limits(kv_capacity=14_648, max_batch_tokens=4096),
                 cost_model=PRESETS["infermax-llama2-7b-a100"])
rows_p = []
for rate in (4.0, 8.0):
    pi = at_rate(paper, rate, seed=0)
    for pol, params in (("vllm", {}), ("ecoserve", {}), ("ecoserve", {"deadline": "slo-length"})):
        ev = evaluate(pi, simulate_policy(pi, get_policy(pol, **params)))
        rows_p.append([f"{rate:g}", pol + "".join(f" {k}={v}" for k, v in params.items()),
                       f"{(ev.latency / pi.output).mean():.4f}", f"{ev.latency.mean():.2f}",
                       f"{pi.n / ev.metrics['makespan']:.2f}"])
display(Markdown(md_table(["rate (req/s)", "policy", "normalised latency (s/token)", "mean JCT (s)",
                           "throughput (req/s)"], rows_p)))
