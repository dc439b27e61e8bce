# %% [markdown]
# # 05 — A real trace: the Azure conversation trace (InferMax Figure 16)
#
# The Azure LLM inference conversation trace (`../shared/data/traces/AzureLLMInferenceTrace_conv.csv`,
# relative to the repository root; 19.4K requests over one hour) with M = 100K tokens, C = 4096 and
# the InferMax Llama-2-7B/A100 cost model. Policies are compared **by simulation** (no solver at this
# size): latency, TTFT, TPOT and evictions, all from `evaluate`.
#
# InferMax section 6 / Figure 16 (Llama-3-70B on four A100s, C = 16384, M = 100K, measured on vLLM):
# its policy (SARATHI groups, longest running decodes first, shortest evicted first, histogram output
# estimate) cuts the runtime of the deployable schedulers from about 7K s to 6K s (about 1.2x), where
# the bound — vLLM with unlimited memory — is about 5K s (1.4x): "our simple ideas solve half of the
# problem"; it also beats the eviction-free (EF) schedulers. We use the 7B preset (the one the brief
# and our cost data fix), so the absolute seconds are not comparable; the ratios are.
#
# FAST mode uses the first 2,000 requests; `OPTSCHED_FAST=0` uses the whole trace.

# %%
import time
import warnings

from IPython.display import Markdown, display
from nbsetup import FAST, md_table, pct, show, trace_path

print(f"FAST = {FAST}")

LIMIT = 2000 if FAST else None


TRACE, HAVE_DATA = trace_path()

# %%
from optsched.cost import PRESETS
from optsched.evaluation import evaluate
from optsched.instance import Limits
from optsched.policies import simulate
from optsched.workloads.traces import load_trace_instance

COST = PRESETS["infermax-llama2-7b-a100"]
LIMITS = Limits(kv_capacity=100_000, max_batch_tokens=4096)
if HAVE_DATA:
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        inst = load_trace_instance(TRACE, LIMITS, COST, limit=LIMIT, too_long="drop", name="azure-conv")
    for x in w:
        print("warning:", x.message)
    print(f"{inst.n} requests over {inst.arrival.max():.0f} s of arrivals; prompt mean {inst.prompt.mean():.0f} "
          f"(max {inst.prompt.max()}), output mean {inst.output.mean():.0f} (max {inst.output.max()})")

# %%
POLICIES = ["vllm", "sarathi", "infermax", "vllm-ef", "sarathi-ef", "mcsf", "fcfs"]
runs = {}
if HAVE_DATA:
    for p in POLICIES:
        t0 = time.perf_counter()
        s = simulate(inst, p)
        runs[p] = (s, evaluate(inst, s))
        print(f"{p:11s} simulated + evaluated in {time.perf_counter() - t0:.1f} s; feasible: {runs[p][1].feasible}")
    # Figure 16's leftmost bar: vLLM with indefinite memory (a bound no deployable scheduler reaches)
    big = inst.replace(limits=Limits(kv_capacity=10**12, max_batch_tokens=4096), name="azure-conv-unlimited")
    s = simulate(big, "vllm")
    runs["vllm, unlimited M"] = (s, evaluate(big, s))

# %%
KEYS = [("makespan", "makespan (s)"), ("busy_time", "GPU busy (s)"), ("mean_latency", "mean latency (s)"), ("mean_ttft", "mean TTFT (s)"),
        ("p99_ttft", "p99 TTFT (s)"), ("mean_tpot", "mean TPOT (s)"), ("evictions", "evictions"),
        ("recomputed_tokens", "recomputed tokens")]
if HAVE_DATA:
    def f(v):
        return f"{v:.4g}" if isinstance(v, float) else str(v)
    display(Markdown(md_table(["policy", "feasible"] + [k[1] for k in KEYS],
                              [[p, e.feasible] + [f(e.metrics[k]) for k, _ in KEYS] for p, (s, e) in runs.items()])))

# %%
from optsched.plot import compare_bars, kv_over_time

if HAVE_DATA:
    order = ["vllm, unlimited M", "vllm", "sarathi", "vllm-ef", "sarathi-ef", "mcsf", "fcfs", "infermax"]
    rows = [{"policy": p, "makespan": runs[p][1].metrics["makespan"],
             "mean_latency": runs[p][1].metrics["mean_latency"], "mean_ttft": runs[p][1].metrics["mean_ttft"],
             "mean_tpot": runs[p][1].metrics["mean_tpot"], "evictions": runs[p][1].metrics["evictions"],
             "feasible": runs[p][1].feasible} for p in order if p in runs]
    show(compare_bars(rows, metrics=[("makespan", "makespan (s)", 1.0), ("mean_latency", "mean latency (s)", 1.0),
                                     ("mean_ttft", "mean TTFT (s)", 1.0), ("mean_tpot", "mean TPOT (s)", 1.0),
                                     ("evictions", "evictions", 1.0)],
                      title=f"Azure conversation trace, {inst.n} requests (simulated, evaluated)"), "05_bars")
    show(kv_over_time({p: (inst, runs[p][1]) for p in ("vllm", "sarathi", "infermax")},
                      title="KV use over time"), "05_kv")

# %% [markdown]
# ## Does our result agree with InferMax section 6?

# %%
if HAVE_DATA:
    m = {p: e.metrics for p, (s, e) in runs.items()}
    ours, bound = m["infermax"], m["vllm, unlimited M"]
    lines = []
    for key, name in (("makespan", "runtime (makespan)"), ("busy_time", "GPU busy time (sum of batch times)"),
                      ("mean_latency", "mean latency")):
        deploy = {p: m[p][key] for p in ("vllm", "sarathi")}
        best_dep = min(deploy, key=deploy.get)
        sp = deploy[best_dep] / ours[key]
        beats_ef = all(ours[key] < m[p][key] for p in ("vllm-ef", "sarathi-ef"))
        s = (f"- **{name}**: InferMax's policy {ours[key]:.4g} s vs the best of vLLM/SARATHI ({best_dep}) "
             f"{deploy[best_dep]:.4g} s: **{sp:.3f}x** (paper: about 1.2x). ")
        if bound[key] < min(deploy[best_dep], ours[key]):
            closed = (deploy[best_dep] - ours[key]) / (deploy[best_dep] - bound[key])
            s += (f"Unlimited-memory vLLM {bound[key]:.4g} s ({deploy[best_dep] / bound[key]:.3f}x, paper about "
                  f"1.4x); share of the gap to it closed: {pct(closed)} (paper: about half). ")
        else:
            s += (f"Unlimited-memory vLLM ({bound[key]:.4g} s) is **not** below InferMax's policy on this metric, so "
                  "it is no bound here (prefill priority without a memory limit delays decodes). ")
        s += (f"Beats both EF schedulers: {'yes' if beats_ef else 'no'} (vLLM-EF {m['vllm-ef'][key]:.4g}, "
              f"SARATHI-EF {m['sarathi-ef'][key]:.4g}; paper: yes).")
        lines.append(s)
    agree_speed = ours["makespan"] < min(m["vllm"]["makespan"], m["sarathi"]["makespan"])
    agree_ef = ours["makespan"] < min(m["vllm-ef"]["makespan"], m["sarathi-ef"]["makespan"])
    lines.append("- Verdict: InferMax's policy "
                 + ("**beats vLLM and SARATHI** (agrees)" if agree_speed else "**does not beat vLLM and SARATHI** (disagrees)")
                 + " and " + ("**beats the EF schedulers** (agrees)." if agree_ef else
                              "**does not beat the EF schedulers** (disagrees with 'ours also outperform EF schedulers')."))
    lines.append(f"- Evictions: vLLM {m['vllm']['evictions']}, SARATHI {m['sarathi']['evictions']}, "
                 f"InferMax {ours['evictions']} (its longest-first decode order evicts short requests, "
                 "whose refill is cheap).")
    if FAST:
        lines.append(f"- FAST mode: the first {inst.n} requests only ({inst.arrival.max():.0f} s of arrivals); "
                     "see the full-run numbers below.")
    display(Markdown("\n".join(lines)))
else:
    display(Markdown("Skipped: no trace data."))

# %% [markdown]
# ### What the full run found (whole trace, `OPTSCHED_FAST=0`, run on 2026-11-22)
#
# 19,366 requests over 3,502 s of arrivals, M = 100K, C = 4096, Llama-2-7B/A100 preset (all schedules
# feasible under `evaluate`):
#
# | policy | makespan (s) | mean latency (s) | mean TTFT (s) | mean TPOT (s) | evictions |
# |---|---|---|---|---|---|
# | vLLM, unlimited M | 3503 | 213.6 | 1.3 | 1.455 | 0 |
# | vLLM | 3861 | 287.8 | 272.5 | 0.0763 | 3454 |
# | SARATHI | 3730 | 222.2 | 208.9 | 0.0643 | 769 |
# | vLLM-EF | 3597 | 155.8 | 143.2 | 0.0628 | 0 |
# | SARATHI-EF | 3700 | 207.7 | 195.8 | 0.0585 | 0 |
# | MC-SF | 3792 | 152.9 | 145.4 | 0.0350 | 0 |
# | FCFS | 3884 | 307.0 | 298.4 | 0.0433 | 1459 |
# | **InferMax (section 6)** | **3700** | **208.3** | **195.6** | **0.0622** | **440** |
#
# * **Agrees**: InferMax's policy beats both deployable baselines — 1.008x faster than SARATHI and
#   1.04x faster than vLLM in runtime, 1.07x / 1.38x in mean latency — with far fewer evictions
#   (440 vs 769 / 3454).
# * **Disagrees in size**: the paper's 1.2x (7K s to 6K s) becomes 1.008x here, and the policy
#   closes 13% (not about half) of the runtime gap to unlimited-memory vLLM (1.065x faster than
#   SARATHI, the paper's bound is 1.4x). Our runtime is dominated by the hour of arrivals (the 7B
#   model keeps up with most of the trace), while the paper ran Llama-3-70B on 4 GPUs in overload.
# * **Disagrees**: "ours also outperform EF schedulers" — vLLM-EF (hypothetical: knows O) is faster
#   (3597 s, mean latency 155.8 s), and SARATHI-EF ties InferMax's policy in runtime.
# * Unlimited-memory vLLM is a bound on runtime but not on mean latency (its TPOT explodes).
