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
# Here: the policies `ecoserve-d`, `ecoserve-sd`, `ecoserve-sdo`, `ecoserve` (under both readings of
# its deadline key, below), `ecoserve-oracle`, `vllm`, `sarathi` and `orca` (EcoServe's
# max-allocation baseline, batch size 8) on the Azure conversation trace with M = 100K tokens,
# C = 4096 and the InferMax Llama-2-7B/A100 cost model, with Poisson arrivals at multiples of the
# trace's own rate (`optsched.serving.rate_search.at_rate`: the trace's lengths, one seeded arrival
# pattern scaled to each rate). Every schedule is judged by `evaluate`; the noisy length predictor
# covers the true length for 73.2% of requests at 15% padding (the paper's ShareGPT figure). FAST
# mode uses the first 300 requests; `OPTSCHED_FAST=0` uses 3,000.
#
# **Load.** Every rate is also stated as an *offered load* (`optsched.serving.load.offered_load`,
# docs/semantics.md section 4): the arrival rate over the saturated throughput of this mix, bracketed
# by the best reference policy's completions per second on queued copies of the mix (`mu_ach`; the
# load's point figure, the upper side) and B4's certified busy-time floor (`mu_cert`, the lower
# side). The mix is the same at every rate, so one `offered_load` gives the denominator of all of
# them. A load above 1 is overload: the queue grows with the trace, and a latency figure there
# measures the backlog's order, not a steady state.
#
# **The deadline key (section 3.3).** The paper orders both queues first by deadline: "Each task has
# a deadline to satisfy its SLO. For each factor, we set up certain magnitude ranges and order tasks
# accordingly (e.g., 0.2-0.5s, 0.5-2s, >2s for the deadline, ...). First, we order the tasks in
# ascending order of the deadline." The JCT SLO is `SLO-scale x (t_p + t_g x l_g)` (section 4). Two
# readings: `deadline=remaining` (the default) buckets the time left to the task's deadline
# (arrival + SLO) when it is selected; `deadline=slo-length` buckets the SLO's length, fixed per
# request, which orders by predicted output length (shortest first). We keep `remaining` as the
# default because it is the text's: a deadline is a point in time, its time left is what the
# ranges 0.2-0.5 s can bucket, and its purpose is "to ensure compliance with JCT SLO requirements",
# which a request's SLO length alone cannot tell (a request that has waited a minute would rank with
# one just arrived). Both are reported everywhere below.

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
from optsched.serving.load import offered_load
from optsched.serving.rate_search import at_rate, search, slo_from_reference, trace_rate
from optsched.workloads.traces import load_trace_instance

POLICIES = ["vllm", "sarathi", "orca", "ecoserve-d", "ecoserve-sd", "ecoserve-sdo", "ecoserve",
            "ecoserve:slo-length", "ecoserve-oracle"]


def make(policy):
    """A policy by label: ``name:slo-length`` is ``name`` with ``deadline=slo-length``."""
    name, _, reading = policy.partition(":")
    return get_policy(name, **({"deadline": reading} if reading else {}))


def saturated_rate(instance):
    """The mix's achievable saturated rate ``mu_ach`` (the load's point denominator) and its
    certified side ``mu_cert`` (``optsched.serving.load``)."""
    load = offered_load(instance)
    return load.achievable_rate, load.certified_rate


if HAVE_DATA:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        inst = load_trace_instance(TRACE, Limits(kv_capacity=100_000, max_batch_tokens=4096),
                                   PRESETS["infermax-llama2-7b-a100"], limit=N, too_long="drop",
                                   name="azure-conv")
    r0 = trace_rate(inst)
    sat, sat_cert = saturated_rate(inst)
    slo = slo_from_reference(inst, "vllm", 2.0)  # t_p, t_g measured on the workload (vllm, own arrivals)
    print(f"{inst.n} requests, own rate {r0:.2f} req/s; saturated throughput {sat:.2f} req/s "
          f"({offered_load(inst).reference} on queued copies; certified <= {sat_cert:.2f}); own "
          f"load {r0 / sat:.2f}; t_p = {slo.t_p:.4f} s, t_g = {slo.t_g:.4f} s")


def run(policy, rate):
    """Simulate at a rate, evaluate, and return the serving metrics plus the policy's counters."""
    i = at_rate(inst, rate, seed=0)
    p, st = make(policy), SimStats()
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
    rows = [[p, f"{k:g}x ({k * r0:.1f}/s, load {k * r0 / sat:.2f})", f"{m['normalized_latency']:.4f}",
             f"{m['mean_jct']:.1f}",
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
        name, _, reading = p.partition(":")
        res = search(inst, name, "normalized-latency", target, r0 / 2 if not FAST else r0, 6 * r0,
                     params={"deadline": reading} if reading else None,
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
                     + f" EcoServe {sr['ecoserve']:.2f} req/s (load {sr['ecoserve'] / sat:.2f}), vLLM "
                     f"{sr['vllm']:.2f} req/s (load {sr['vllm'] / sat:.2f}); the slo-length reading "
                     + ("is outside the probed range." if sr["ecoserve:slo-length"] is None else
                        f"{sr['ecoserve:slo-length']:.2f} req/s."))
    y = ratio_text(sr["ecoserve"], sr["orca"])
    if y is not None:
        lines.append(f"- EcoServe / ORCA = {y:.2f}x (paper: 22-64x on ShareGPT): "
                     + ("agrees." if 22 <= y <= 64 else "**disagrees**."))
    z = ratio_text(sr["ecoserve-oracle"], sr["ecoserve"])
    if z is not None:
        lines.append(f"- Oracle / EcoServe = {z:.2f}x (paper: about 1.08x): "
                     + ("agrees." if abs(z - 1.08) <= 0.1 else "**disagrees**."))
    for k in sorted(MULTS):
        load = k * r0 / sat
        where = (f"at {k:g}x the trace rate (offered load {load:.2f}"
                 + (", **overload**: the figure grows with the trace" if load > 1 else ", stable") + ")")
        base = grid[("vllm", k)]["mean_jct"]
        paper = {"ecoserve-d": (16, 36), "ecoserve-sd": (35, 58), "ecoserve-sdo": (43, 64),
                 "ecoserve": (64, 91), "ecoserve:slo-length": (64, 91)}
        for p, (lo, hi) in paper.items():
            red = 100 * (1 - grid[(p, k)]["mean_jct"] / base)
            lines.append(f"- **{p}: JCT {red:.0f}% lower than vLLM** {where} (paper: {lo}-{hi}%): "
                         + ("agrees." if lo <= red <= hi else "**disagrees**."))
    k = max(MULTS)
    thr = {p: grid[(p, k)]["throughput_rps"] for p in POLICIES}
    lines.append(f"- Why: at {k:g}x the trace rate (load {k * r0 / sat:.2f}) every policy but ORCA runs at a "
                 "throughput between "
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
sat_p, _ = saturated_rate(paper)
rows_p = []
for rate in (4.0, 8.0):
    pi = at_rate(paper, rate, seed=0)
    for pol, params in (("vllm", {}), ("ecoserve", {}), ("ecoserve", {"deadline": "slo-length"})):
        ev = evaluate(pi, simulate_policy(pi, get_policy(pol, **params)))
        rows_p.append([f"{rate:g} (load {rate / sat_p:.2f})",
                       pol + "".join(f" {k}={v}" for k, v in params.items()),
                       f"{(ev.latency / pi.output).mean():.4f}", f"{ev.latency.mean():.2f}",
                       f"{pi.n / ev.metrics['makespan']:.2f}"])
display(Markdown(f"Saturated throughput of this mix (`offered_load`: "
                 f"{offered_load(paper).reference} on queued copies of the {paper.n} requests): "
                 f"{sat_p:.2f} req/s."))
display(Markdown(md_table(["rate (req/s)", "policy", "normalised latency (s/token)", "mean JCT (s)",
                           "throughput (req/s)"], rows_p)))

# %% [markdown]
# ## Both deadline readings against the certified bound (recorded)
#
# `studies/papers36/ecoserve_readings.py` (too slow for this notebook: a certified bound per row)
# runs vLLM, SARATHI and EcoServe under both readings on the seeded 1,200-request windows of
# `docs/results/serving.md` (M = 30,000, C = 8,192, TTFT SLO 1 s, mean TPOT SLO 0.1 s) at 50%, 70% and
# 90% of each window's saturated throughput (Poisson arrivals, seed 0) and at the trace's own arrivals.
# The load column is the definition these rows were measured with: the rate over vLLM's completions
# per second on the window queued at t = 0. Their offered loads (`optsched.serving.load`, the house
# definition: the best reference policy on queued copies) are a little lower: 0.48 for the 0.50
# rows, 0.67-0.68 for the 0.70 rows, 0.86-0.87 for the 0.90 rows, 1.12-1.46 at the conversation
# windows' own arrivals (overloaded, certified) and 0.45-0.84 at the code windows'
# (`studies/papers36/house_loads.py`, `house-loads.txt`); the script now stretches the arrivals to
# stated offered loads (`scale_to_load`). Each cell: total latency / certified lower bound, and
# SLO attainment. The full table (mean TTFT,
# throughput, the B12 upper bound on attainment) is `studies/papers36/ecoserve-readings.txt`.
#
# | window | load | req/s | vllm | sarathi | ecoserve (remaining) | ecoserve (slo-length) |
# |---|---|---:|---:|---:|---:|---:|
# | conv 1 | 0.50 | 2.63 | 2.00x / 100% | 2.15x / 99% | 2.07x / 100% | 2.08x / 99% |
# | conv 1 | 0.70 | 3.69 | 2.71x / 98% | 3.07x / 91% | 2.83x / 95% | 2.84x / 93% |
# | conv 1 | 0.90 | 4.74 | 4.11x / 68% | 5.84x / 43% | 6.32x / 55% | 4.83x / 69% |
# | conv 1 | 1.48 own, overload | 7.79 | 3.02x / 3% | 3.39x / 2% | 6.37x / 4% | 3.45x / 29% |
# | conv 2 | 0.50 | 2.40 | 1.76x / 99% | 1.84x / 98% | 1.77x / 99% | 1.77x / 99% |
# | conv 2 | 0.70 | 3.37 | 2.10x / 96% | 2.26x / 96% | 2.17x / 96% | 2.15x / 97% |
# | conv 2 | 0.90 | 4.33 | 2.75x / 84% | 3.12x / 73% | 2.83x / 80% | 2.80x / 86% |
# | conv 2 | 1.24 own, overload | 5.96 | 3.76x / 2% | 4.41x / 2% | 9.73x / 4% | 3.11x / 49% |
# | conv 3 | 0.50 | 2.46 | 1.72x / 100% | 1.79x / 99% | 1.75x / 99% | 1.75x / 99% |
# | conv 3 | 0.70 | 3.45 | 2.11x / 98% | 2.25x / 97% | 2.17x / 97% | 2.16x / 98% |
# | conv 3 | 0.90 | 4.43 | 3.04x / 78% | 3.52x / 64% | 3.19x / 70% | 3.09x / 81% |
# | conv 3 | 1.14 own, overload | 5.63 | 3.77x / 13% | 4.41x / 12% | 10.14x / 14% | 3.18x / 52% |
# | code 1 | 0.50 | 2.42 | 2.28x / 88% | 2.41x / 89% | 2.30x / 94% | 2.29x / 93% |
# | code 1 | 0.70 | 3.39 | 3.38x / 71% | 3.55x / 70% | 3.26x / 84% | 3.16x / 86% |
# | code 1 | 0.90 | 4.36 | 4.47x / 43% | 6.30x / 28% | 6.02x / 55% | 4.13x / 76% |
# | code 1 | 0.85 own, bursty | 4.11 | 4.13x / 3% | 5.23x / 4% | 10.78x / 7% | 2.63x / 49% |
# | code 2 | 0.50 | 2.60 | 2.43x / 88% | 2.55x / 88% | 2.52x / 91% | 2.38x / 93% |
# | code 2 | 0.70 | 3.64 | 3.45x / 72% | 4.11x / 69% | 4.39x / 78% | 3.53x / 87% |
# | code 2 | 0.90 | 4.68 | 4.10x / 50% | 5.14x / 39% | 7.15x / 57% | 3.98x / 77% |
# | code 2 | 0.45 own, bursty | 2.35 | 3.60x / 8% | 4.04x / 11% | 6.56x / 16% | 2.56x / 56% |
# | code 3 | 0.50 | 2.66 | 2.30x / 90% | 2.40x / 91% | 2.33x / 95% | 2.30x / 95% |
# | code 3 | 0.70 | 3.72 | 3.46x / 77% | 3.68x / 75% | 3.61x / 82% | 3.29x / 88% |
# | code 3 | 0.90 | 4.78 | 4.80x / 49% | 7.72x / 24% | 9.50x / 49% | 4.73x / 78% |
# | code 3 | 0.57 own, bursty | 3.04 | 3.70x / 7% | 4.12x / 11% | 6.47x / 16% | 2.49x / 57% |
#
# At 50% load the two readings are within 6% of each other on every window, and at 70% within 2% on
# the conversation windows (up to 24% on the code windows): few tasks are near their deadline, and
# both orders fall back to occupied KV and length. At 90% and at the trace's own arrivals (overload
# on the conversation windows, loads 1.14-1.48; the code windows' mean loads are 0.45-0.85 but their
# arrivals come in bursts, and their bounds are 6-19x those of the Poisson rows), `remaining` puts
# every late task in the first bucket and orders them by occupied KV and then *longest* prompt or
# predicted output first (section 3.3's third key), while `slo-length` is in effect
# shortest-predicted-first: at 90% load `remaining` is 2.83-9.50x the bound against `slo-length`'s
# 2.80-4.83x (vLLM 2.75-4.80x, SARATHI 3.12-7.72x), and at the own arrivals 6.37-10.78x against
# 2.49-3.45x (vLLM 3.02-4.13x), where `slo-length` is ahead of vLLM on 5 of 6 windows.
# `slo-length`'s SLO attainment is the highest of the four on every row at 90% load (69-86%, vLLM
# 43-84%) and at the own arrivals (29-57%, vLLM 2-13%); `remaining`'s is at least vLLM's on 3 of the 6
# windows at each stable load and on all 6 at the own arrivals. So the question is not EcoServe
# against vLLM at stable loads (all four are within 1.72-2.55x of the bound at 50%), it is which
# reading one calls EcoServe near and past saturation: every figure should say which.

# %% [markdown]
# ## The 7-request hand instance: why EcoServe can trail vLLM here
#
# One long request (prompt 8, output 40) at t = 0 and six short ones (prompt 10, output 10) at
# t = 1.5, M = 120, unit time (a hand instance: seven requests, no steady state, so no load is
# stated; its figures are about one schedule, not a regime). `ecoserve-oracle` knows the output
# lengths. Its schedule, batch by
# batch, is derived by hand in `tests/policies/test_ecoserve.py`.

# %%
from optsched.cost import UnitCost
from optsched.instance import Instance, Request

hand = Instance("lone", Limits(kv_capacity=120, max_batch_tokens=120), UnitCost(),
                tuple([Request("L", 0, 8, 40)] + [Request(f"s{k}", 1.5, 10, 10) for k in range(6)]))
hand_rows = []
for pol in ("ecoserve-oracle", "ecoserve", "vllm", "sarathi"):
    sched = simulate_policy(hand, get_policy(pol))
    ev = evaluate(hand, sched)
    alone = sum(1 for b in sched if [r for r, _ in b.entries] == ["L"])
    hand_rows.append([pol, f"{ev.latency.mean():.1f}", " / ".join(f"{x:g}" for x in ev.latency),
                      alone])
display(Markdown(md_table(["policy", "mean latency", "latencies (L, s0..s5)",
                           "batches holding only L"], hand_rows)))

# %% [markdown]
# The oracle used to allocate the long GT its output length rounded up to a 16-token bin (55 tokens
# for the 47 it holds at its end) and each short GT 15 tokens for 9: after the six prompts 5 tokens
# were left, the six GTs waited, and L decoded alone for 40 batches (mean latency 49.0). The bins
# now only group GTs; a GT is allocated its (padded) prediction itself, as section 3.2.1 says ("the
# KVC size ... allocated to a GT equals to its predicted RL"), and the oracle's mean latency is 25.0.
#
# What remains against vLLM's 15.3 is EcoServe's design, not a defect: exact allocation reserves the
# long GT's whole remaining output when it starts (47 tokens while it holds 10), so after the six
# prompts only 13 tokens are unallocated and the six short GTs (9 tokens each) start one, two, then
# three at a time, a group split to fit the free KV as section 3.2.1 prescribes ("If the KVC's
# available space cannot accommodate an entire group, the group needs to split"). vLLM allocates on
# demand and runs all seven at once. KV pipelining would lend the long GT's unused allocation, but
# Algorithm 1 hosts GTs only when a group is selected (lines 1-3, "Recursively select hosted GT groups
# ... for each hosting GT group"): the long GT was selected before the short ones arrived. The
# noisy-predictor `ecoserve` pads the long request's prediction and stays slower still.
