# %% [markdown]
# # 08 — Apt-Serve: hybrid KV / hidden cache and value-based scheduling, effective throughput
#
# Apt-Serve (Gao et al., `../shared/papers/004_5e4a187cc2a24c5f.txt`, sections 3-5) lets a request
# hold its cache as *input hidden states* (half the memory, but the keys and values are re-projected in
# every batch it joins: `rho * m` seconds more) and picks each batch with a greedy over a per-iteration
# knapsack: value `g = p - beta (|W| + |R|) rho m` from the pending time `p`, with an SLO-aware fallback.
# Its headline claim (section 6.3): **up to 8.8x the effective throughput of vLLM** -- the highest
# request rate at which a share of requests meets both the TTFT and the TBT SLO. Read closely, the
# 8.8x is at **60%** SLO attainment; at **90%** the paper reports 2.3x on average and **4.0x at most**.
#
# Here: `aptserve` (hidden cache on), `aptserve-kv-only` (the scheduler alone), `vllm` and `sarathi` on
# the Azure conversation trace (synthetic lengths if the shared data is missing), Llama-2-7B / A100 cost
# model with `rho` fitted on the profiling data (`optsched.workloads.fit.fit_rho`), KV blocks of 16 tokens, and a
# KV capacity small enough that memory binds (the regime hidden cache is for). Effective throughput is
# `optsched.serving.rate_search.search` with the metric `slo-attainment` at Apt-Serve's ShareGPT/13B SLOs:
# TTFT 1 s and TBT 1 s (`optsched capacity TRACE --policy aptserve --hidden-cache --metric
# slo-attainment --ttft-slo 1 --tbt-slo 1 --target 0.9` from the command line). Every schedule is judged by `evaluate`.
#
# **The TBT SLO is judged on every gap** (a request's longest gap between tokens, `max_tbt`,
# docs/semantics.md section 4). The paper states a P99 TBT; read per request, it lets a request with more
# than 100 tokens have one gap of any length, and a scheduler that evicts long requests after their first
# token and finishes them after the trace passes it (the `slo-park` section below shows by how much).
# **Every rate comes with what the run completes per second, its offered load** (its arrival rate over
# the best rate at which the engine serves this mix, docs/semantics.md section 4) **and a stability
# check**: the rate counts only if the target is still met and the mean latency grows at most 1.5x on
# the trace repeated 3x at that rate. Then: how often the
# greedy's batch is worse than the per-iteration optimum (Definition 1 solved exactly) on sampled
# iterations. FAST mode uses 80 requests and 4 probes per policy; `OPTSCHED_FAST=0` 400 and 7.

# %%
import warnings

import numpy as np
from IPython.display import Markdown, display
from nbsetup import FAST, md_table, pct, show, trace_path

print(f"FAST = {FAST}")

N = 80 if FAST else 400
PROBES = 4 if FAST else 7
SAMPLES = 12 if FAST else 60
M, C, BLOCK = 10_000, 4096, 16
TTFT, TBT = 1.0, 1.0

TRACE, HAVE_DATA = trace_path()

# %%
from optsched.cost import PRESETS
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.metrics.serving import serving_metrics
from optsched.policies import get_policy, simulate_policy
from optsched.serving.load import offered_load
from optsched.serving.rate_search import at_rate, search, trace_rate
from optsched.workloads.traces import load_trace_instance

POLICIES = ["vllm", "sarathi", "aptserve-kv-only", "aptserve"]
limits = Limits(kv_capacity=M, max_batch_tokens=C, block_size=BLOCK, hidden_cache=True)
cost = PRESETS["infermax-llama2-7b-a100"]
if HAVE_DATA:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inst = load_trace_instance(TRACE, limits, cost, limit=N, too_long="drop", name="azure-conv")
    source = f"the first {inst.n} requests of the Azure conversation trace"
else:  # synthetic fallback: lognormal lengths of the same order, one arrival per second
    rng = np.random.default_rng(0)
    prompts = np.clip(rng.lognormal(6.5, 0.9, N), 8, 4000).astype(int)
    outputs = np.clip(rng.lognormal(5.0, 0.8, N), 2, 1000).astype(int)
    inst = Instance("synthetic", limits, cost, tuple(
        Request(f"s{k}", float(k), int(prompts[k]), int(outputs[k])) for k in range(N)))
    source = f"{N} synthetic requests (the shared trace is missing)"
r0 = trace_rate(inst)
load0 = offered_load(inst)
MU = load0.achievable_rate  # the mix's saturated rate (a reference schedule reaches it)
print(f"{source}: mean prompt {inst.prompt.mean():.0f}, mean output {inst.output.mean():.0f}, "
      f"own rate {r0:.2f} req/s; rho = {cost.rho:.3g} s per cached hidden token")
print(f"saturated rate of this mix: {MU:.2f} req/s ({load0.reference}, achievable) to "
      f"{load0.certified_rate:.2f} (certified): no rate above {load0.certified_rate:.2f} req/s "
      "is sustainable on a longer trace of it, whatever the SLO")


def run(policy, rate, **params):
    """Simulate at a Poisson rate, evaluate, and return the metrics (and the policy object)."""
    i = at_rate(inst, rate, seed=0)
    pol = get_policy(policy, **params)
    s = simulate_policy(i, pol)
    ev = evaluate(i, s)
    assert ev.feasible, (policy, ev.violation_counts)
    m = serving_metrics(i, ev, schedule=s, ttft_slo=TTFT, tbt_slo=TBT)
    return {**m, "hidden_entries": ev.metrics.get("hidden_entries", 0)}, pol


# %% [markdown]
# ## Effective throughput: the highest rate with at least 90% of requests meeting both SLOs

# %%
LO, HI = r0 / 4, 8 * r0
SLOS = {"ttft_slo": TTFT, "tbt_slo": TBT}
# the stability check: the sustainable rate on the trace x3 and, when it fails, rates below it
# (FAST: the sustainable rate only)
TRIES = 1 if FAST else 5
results = {p: search(inst, p, "slo-attainment", 0.9, LO, HI, probes=PROBES, progress=False,
                     settings=SLOS, confirm_tries=TRIES) for p in POLICIES}

# %%
# one search per attainment level: the 60% rates come from a search aimed at 60%,
# not from the probes the 90% search happened to place
results60 = {p: search(inst, p, "slo-attainment", 0.6, LO, HI, probes=PROBES, progress=False,
                       settings=SLOS, confirm_tries=TRIES) for p in POLICIES}

# %%
# the authors' code's value model beside the paper's (aptserve value_model=code)
code90 = search(inst, "aptserve", "slo-attainment", 0.9, LO, HI, probes=PROBES, progress=False,
                params={"value_model": "code"}, settings=SLOS, confirm_tries=TRIES)


def rate_text(res):
    if res.sustainable_rate is None:
        return f"< {LO:.2f} (misses at the lowest rate)"
    if res.lowest_failing_rate is None:
        return f">= {HI:.2f} (meets at the highest rate)"
    return f"{res.sustainable_rate:.2f} (misses at {res.lowest_failing_rate:.2f})"


def check_text(res):
    """Completed req/s and load at the sustainable rate, the x3 check, the counted rate."""
    p = res.at_rate
    if p is None:
        return "n/a", "n/a", "n/a", "-"
    done = p.metrics.get("completion_rate")
    g = res.latency_growth
    chk = "not checked" if res.holds is None else (
        f"{'holds' if res.holds else 'fails'} ({pct(res.confirmation.value, 0)}, latency "
        f"x{g:.1f})" if g is not None else "fails")
    if res.holds is False:
        chk += ("; none below holds" if res.stable_rate is None
                else f"; holds at {res.stable_rate:.2f}")
    return (f"{done:.2f}" if done else "n/a", "n/a" if p.load is None else f"{p.load:.2f}", chk,
            "-" if res.counted_rate is None else f"{res.counted_rate:.2f}")


def at_60(res):
    """Effective throughput at 60% attainment: the 60% search's sustainable rate for the
    policy whose 90% search is ``res``."""
    return results60[res.policy].sustainable_rate


display(Markdown(md_table(
    ["policy", "effective throughput at 90% (req/s)", "completed (req/s)", "load", "x3 trace",
     "counted (req/s)", "effective throughput at 60% (req/s)", "counted at 60%",
     "probes at 90% (rate: attainment)"],
    [[p, rate_text(r), *check_text(r), rate_text(results60[p]),
      check_text(results60[p])[3], ", ".join(f"{q.rate:.1f}: {pct(q.value, 0)}" for q in r.probes)]
     for p, r in results.items()]
    + [["aptserve value_model=code (authors' code)", rate_text(code90), *check_text(code90),
        "not searched", "-", ", ".join(f"{q.rate:.1f}: {pct(q.value, 0)}" for q in code90.probes)]])
    + f"\n\nWork limit (the certified saturated rate): {load0.certified_rate:.2f} req/s."))

import matplotlib.pyplot as plt

fig, ax = plt.subplots(figsize=(6, 4))
for p, r in results.items():
    pts = sorted((q.rate, q.value) for q in r.probes if q.value is not None)
    ax.plot(*zip(*pts, strict=True), marker="o", label=p)
ax.axhline(0.9, color="grey", linestyle="--", label="90%")
ax.axhline(0.6, color="grey", linestyle=":", label="60%")
ax.set_xlabel("arrival rate (requests/s)")
ax.set_ylabel("TTFT & TBT SLO attainment (every gap)")
ax.set_xscale("log")
ax.legend(fontsize="small")
show(fig, "08_slo_attainment")

# %% [markdown]
# ## A scheduler built for these SLOs: `slo-park`, and the loophole it was built on
#
# `slo-park` (clairvoyant: it reads the true output lengths, like `svf` or `mcsf`) prefills arrivals
# shortest prompt first and keeps every request decoding in every batch with its peak KV reserved.
# With `tbt_rule=p99` it reads the TBT SLO as a per-request P99 (nearest rank), under which a request
# with more than 100 output tokens may have one gap in a hundred of any length: it then evicts the
# longer requests after their first token and refills them when no arrival waits -- they finish long
# after the last arrival. Searched under the old reading (`ttft-p99tbt-attainment`) that version
# "sustains" a high rate on this draw; the run completes far fewer requests per second, the stability
# check fails, and under the rule (every gap) it is no better than the others.

# %%
park = search(inst, "slo-park", "slo-attainment", 0.9, LO, HI, probes=PROBES, progress=False,
              settings=SLOS, confirm_tries=TRIES)
park_p99 = search(inst, "slo-park", "slo-attainment", 0.9, LO, HI, probes=PROBES, progress=False,
                  params={"tbt_rule": "p99"}, settings=SLOS, confirm_tries=TRIES)

# %%
park_old = search(inst, "slo-park", "ttft-p99tbt-attainment", 0.9, LO, HI, probes=PROBES,
                  progress=False, params={"tbt_rule": "p99"}, settings=SLOS, confirm_tries=TRIES)
best_paper = max((r.sustainable_rate or 0.0) for r in results.values())
at_least = ">= " if park.lowest_failing_rate is None else ""  # it met the target at HI
display(Markdown(md_table(
    ["policy", "metric", "effective throughput at 90% (req/s)", "completed (req/s)", "load",
     "x3 trace", "counted (req/s)"],
    [["slo-park", "every gap", rate_text(park), *check_text(park)],
     ["slo-park tbt_rule=p99", "every gap", rate_text(park_p99), *check_text(park_p99)],
     ["slo-park tbt_rule=p99", "per-request P99 (the old reading)", rate_text(park_old),
      *check_text(park_old)]])))

# %% [markdown]
# ## What hidden cache does at the highest probed rate

# %%
rate_hi = max(q.rate for q in results["aptserve"].probes)
rows = []
for p in POLICIES:
    m, _ = run(p, rate_hi)
    rows.append([p, pct(m["ttft_tbt_attainment"]), f"{m['completion_rate']:.2f}",
                 f"{m['mean_ttft']:.2f}" if m["mean_ttft"] else "n/a",
                 m["preemptions"], m["hidden_entries"], f"{m['makespan']:.1f}"])
display(Markdown(f"At {rate_hi:.2f} req/s (load {rate_hi / MU:.2f}):\n\n" + md_table(
    ["policy", "SLO attainment", "completed (req/s)", "mean TTFT (s)", "evictions",
     "hidden-cache entries", "makespan (s)"], rows)))

# %% [markdown]
# ## The greedy against the per-iteration optimum
#
# `aptserve` records every iteration's problem (Definition 1 with the simulator's block-rounded
# memory) and the greedy's choice. Where everything fits, the greedy takes everything and is optimal,
# so the sample is drawn from the iterations where memory binds (the candidates' KV exceeds `M^e`) and
# solved exactly (enumeration up to 10 candidates, else the integer program of
# `optsched.oracles.aptserve.exact_ip` with HiGHS).

# %%
from optsched.oracles.aptserve import HIDDEN, KV, exact_bruteforce, exact_ip, greedy

_, pol = run("aptserve", rate_hi, record=True)
probs = pol.problems
binding = [k for k, (_, prob, _) in enumerate(probs) if sum(prob.memory) > prob.capacity]
pool = binding or list(range(len(probs)))
pick = np.random.default_rng(0).choice(pool, size=min(SAMPLES, len(pool)), replace=False)
diff = {"repaired": 0, "as described": 0}
hidden_only = {"repaired": 0, "as described": 0}  # failures with a request whose KV cannot fit but hidden can
worst = {"repaired": 1.0, "as described": 1.0}
sizes = []
for k in pick:
    kind, prob, sel = probs[k]
    sizes.append(prob.n)
    opt = exact_bruteforce(prob) if prob.n <= 10 else exact_ip(prob, time_limit=30)
    for label, sel_k in (("repaired", sel), ("as described", greedy(prob, repaired=False))):
        if sel_k.value < opt.value - 1e-9 * max(1.0, abs(opt.value)):
            diff[label] += 1
            hidden_only[label] += any(prob.weight(i, KV) > prob.capacity >= prob.weight(i, HIDDEN)
                                      for i in range(prob.n))
        if opt.value > 1e-12:
            worst[label] = min(worst[label], sel_k.value / opt.value)
n_s = len(pick)
display(Markdown(
    f"Memory binds in {len(binding)} of {len(probs)} iterations; {n_s} of "
    f"{'those' if binding else 'all'} sampled (candidates per iteration: {min(sizes)} to "
    f"{max(sizes)}):\n\n" + md_table(
        ["greedy", "worse than the optimum", "worst value ratio"],
        [[lab, f"{diff[lab]} of {n_s} ({pct(diff[lab] / n_s)})", f"{worst[lab]:.3f}"] for lab in diff])))


# %% [markdown]
# ## Does our result agree with Apt-Serve section 6.3?

# %%
def ratio(a, b):
    return None if a is None or b is None or b <= 0 else a / b


def at_load(rate):
    """A rate with its offered load against this mix, overload labelled."""
    load = rate / MU
    return f"{rate:.2f} req/s, load {load:.2f}" + (", **overload**" if load > 1 else "")


sr = {p: r.sustainable_rate for p, r in results.items()}
lines = [f"- Every rate below is at a stated load against this mix's saturated rate {MU:.2f} req/s "
         f"(certified at most {load0.certified_rate:.2f}); the counted rates (table above) hold on "
         "the trace repeated 3x."]
x = ratio(sr["aptserve"], sr["vllm"])
if x is None:
    lines.append("- Effective throughput at 90%: aptserve or vLLM is outside the probed range "
                 f"({LO:.2f}..{HI:.2f} req/s), no ratio.")
else:
    lines.append(f"- **Effective throughput at 90%, aptserve / vLLM = {x:.2f}x** (paper: 2.3x on "
                 f"average, at most 4.0x; the 8.8x is at 60% attainment; aptserve at "
                 f"{at_load(sr['aptserve'])}, vLLM at {at_load(sr['vllm'])}): "
                 + ("agrees (between the paper's average and its peak)." if 2.3 <= x <= 4.0 else
                    "partly agrees: aptserve sustains more than vLLM, but less than the paper's "
                    "2.3x average." if 1.0 < x < 2.3 else
                    "**disagrees**" + (" (higher)." if x > 4.0 else ": no gain over vLLM.")))
y = ratio(at_60(results["aptserve"]), at_60(results["vllm"]))
if y is not None:
    lines.append(f"- At 60% attainment (a search aimed at 60%): aptserve / vLLM = {y:.2f}x "
                 f"(paper: 4.9x on average, up to 8.8x; aptserve at "
                 f"{at_load(at_60(results['aptserve']))}, vLLM at {at_load(at_60(results['vllm']))}): "
                 + ("consistent with 'up to 8.8x' (a gain, below the paper's 4.9x average)."
                    if 1.0 < y < 4.9 else "agrees." if 4.9 <= y <= 8.8 else
                    "**disagrees**" + (" (higher)." if y > 8.8 else ": no gain over vLLM.")))
z = ratio(sr["aptserve"], sr["aptserve-kv-only"])
if z is not None:
    lines.append(f"- Hidden cache on top of the scheduler: aptserve / aptserve-kv-only = {z:.2f}x at 90%.")
step8 = cost.batch_time([1] * 8, [1000] * 8, [True] * 8)  # a decode step of 8 requests, 1,000 cached
g_kv = ratio(at_60(results["aptserve-kv-only"]), at_60(results["vllm"]))
lines.append(
    "- Why: in this model a hidden cache pays `rho * m` per batch, with `rho` fitted to the QKV "
    f"projection ({cost.rho:.2g} s/token): 1,000 hidden tokens add {1e3 * cost.rho * 1000:.1f} ms to every "
    f"batch they join, against {1e3 * step8:.1f} ms for a whole decode step of 8 requests holding 1,000 "
    f"tokens each. Our prompts average {inst.prompt.mean():.0f} tokens (ShareGPT's, the paper's main "
    "trace, about 160), so the value model `p - (|W| + |R|) rho m` favours hidden cache only for requests "
    "waiting long relative to their size (hidden-cache entries above), and every switch of cache type is "
    "an eviction and a recompute. The scheduler alone (aptserve-kv-only) "
    + (f"reaches {g_kv:.2f}x vLLM's highest probed rate at 60% "
       f"({at_load(at_60(results['aptserve-kv-only']))}): the value-based choice with the SLO "
       "fallback serves requests still inside their SLO first, while FCFS keeps serving the oldest, "
       "already late ones." if g_kv is not None else "has no 60% reading in the probed range.")
    + " The paper measures OPT-13B on a 40 GB A100, where KV memory binds much harder than in this "
    "Llama-2-7B model with M = 10,000 tokens.")
w = ratio(park.sustainable_rate, sr["vllm"])
if w is not None:
    lines.append(f"- A scheduler built for the SLOs (`slo-park`, clairvoyant) sustains "
                 f"{'at least ' if at_least else ''}{w:.2f}x vLLM's rate at 90% when every gap "
                 f"counts ({at_load(park.sustainable_rate)}).")
if park_old.sustainable_rate is not None and park_old.at_rate is not None:
    lines.append(f"- Under the per-request P99 reading `slo-park tbt_rule=p99` \"sustains\" "
                 f"{park_old.sustainable_rate:.2f} req/s (load "
                 f"{park_old.sustainable_rate / MU:.1f}) while its run completes "
                 f"{park_old.at_rate.metrics['completion_rate']:.2f} req/s; stability check: "
                 f"{check_text(park_old)[2]}: the rate is an artefact of the reading and of a short "
                 "trace (`docs/results/serving.md`, capacity ceiling).")
for lab in diff:
    lines.append(f"- Greedy ({lab}) vs the per-iteration optimum: worse on {diff[lab]} of {n_s} sampled "
                 f"iterations, worst ratio {worst[lab]:.3f}: the paper's ratio 2 "
                 + ("holds on this sample" if worst[lab] >= 0.5 else "**fails on this sample**")
                 + (f"; {hidden_only[lab]} of these iterations have a request whose KV cache cannot "
                    "fit in `M^e` but whose hidden cache can (the case the paper's filter drops, "
                    "`check-claim aptserve-2approx`)." if diff[lab] else "."))
if FAST:
    lines.append(f"- FAST mode: {inst.n} requests and {PROBES} probes per policy; `OPTSCHED_FAST=0` "
                 "for 400 requests and 7 probes.")
display(Markdown("\n".join(lines)))

# %% [markdown]
# ## A paper-like setting beside the Azure one
#
# Apt-Serve's chatbot workload is ShareGPT (section 6.1); its Fig. 7 gives no number to match, so
# we use BROS's ShareGPT statistics (prompts 223 +- 256, outputs 235 +- 269 tokens; **synthetic**,
# `optsched generate chat-like --dataset sharegpt`), the memory setting above, and the SLO
# attainment at two rates. `studies/claims/fidelity.py --only aptserve-paper` runs 8, 16 and 32 req/s
# at 200 and 400 requests.

# %%
from optsched.workloads.generators import generate

N_PAPER = 80 if FAST else 400
paper = generate("chat-like", n=N_PAPER, rate=1.0, seed=0, dataset="sharegpt", limits=limits,
                 cost_model=cost)
rows_p = []
for rate in (8.0, 16.0):
    pi = at_rate(paper, rate, seed=0)
    for pol in ("vllm", "aptserve-kv-only", "aptserve"):
        s_p = simulate_policy(pi, get_policy(pol))
        ev_p = evaluate(pi, s_p)
        m_p = serving_metrics(pi, ev_p, schedule=s_p, ttft_slo=TTFT, tbt_slo=TBT)
        rows_p.append([f"{rate:g}", f"{offered_load(pi).point:.2f}", pol,
                       pct(m_p["ttft_tbt_attainment"]), f"{m_p['completion_rate']:.2f}",
                       ev_p.metrics.get("hidden_entries", 0)])
display(Markdown(md_table(["rate (req/s)", "load", "policy", "TTFT and TBT attainment (every gap)",
                           "completed (req/s)", "hidden-cache entries"], rows_p)))
