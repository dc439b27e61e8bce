# %% [markdown]
# # 07 — BROS: real-time and best-effort requests on one engine
#
# BROS (paper 003) co-serves latency-critical real-time (RT) requests with throughput-oriented
# best-effort (BE) batches. Its claims (section 7.2, OPT-13B/30B and Llama-3-70B on A100s): against
# vLLM, RT normalised latency **up to 74.20% lower**, TTFT SLO attainment **up to 36.38 points higher**,
# with a **small BE throughput loss** (11.29% on average against vLLM on ShareGPT).
#
# We check them on **our model**: the InferMax Llama-2-7B/A100 cost model, swap transfers priced at
# `kswap` per token (docs/semantics.md section 6), the paper's workload shape (`optsched generate bros`:
# RT Poisson over the Azure conversation trace's lengths with TTFT 0.4 s / TPOT 0.2 s; BE batches of
# U(512,1024) / U(32,128) submitted when the previous batch would finish alone), and four policies:
# `bros`, `bros-rr` (the paper's round-robin baseline), `vllm` and `sarathi`. Every number below comes
# from `evaluate`.
#
# The last section solves the paper's per-iteration problem (equations 1–8, our reading in
# `optsched/oracles/bros_ip.py`) as an integer program on sampled iterations and compares its batch with the
# greedy's.

# %%
import math
import time

from IPython.display import Markdown, display
from nbsetup import FAST, md_table, trace_path

from optsched.evaluation import evaluate
from optsched.instance import Limits
from optsched.policies import get_policy, simulate
from optsched.workloads.hybrid import bros_workload, hybrid_metrics

print(f"FAST = {FAST}")


TRACE, HAVE_DATA = trace_path()


def fmt(x, pct=False):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{100 * x:.1f}%" if pct else f"{x:.4g}"


# %% [markdown]
# ## The workload and the runs
#
# M = 20,000 tokens (a loaded engine, so memory contention matters), C = 4,096, BE batches of 8,
# RT rates of 1, 2 and 4 requests per second. FAST mode: 15 RT requests per rate; full: 60.

# %%
POLICIES = ["bros", "bros-rr", "vllm", "sarathi"]
RATES = [1.0, 2.0, 4.0]
N_RT = 15 if FAST else 60
LIMITS = Limits(kv_capacity=20_000, max_batch_tokens=4096)
results = {}
if HAVE_DATA:
    for rate in RATES:
        inst = bros_workload(TRACE, N_RT, rate, seed=1, be_batch=8, limits=LIMITS)
        for p in POLICIES:
            t0 = time.perf_counter()
            policy = get_policy(p)
            sched = simulate(inst, policy)
            ev = evaluate(inst, sched)
            assert ev.feasible, (p, rate, ev.violations[:3])
            m = hybrid_metrics(inst, ev, sched)
            m["seconds"] = time.perf_counter() - t0
            m["drains"] = getattr(policy, "drains", None)  # bros's progress guard (n/a elsewhere)
            results[rate, p] = m
    rows = [(rate, p, fmt(m["rt_normalised_latency"]), fmt(m["rt_ttft_attainment"], True),
             fmt(m["rt_tpot_attainment"], True), fmt(m.get("rt_tpot_token_attainment"), True),
             fmt(m["be_throughput"]), fmt(m.get("be_throughput_coserving")), m["swap_out_tokens"],
             "n/a" if m["drains"] is None else m["drains"], f"{m['seconds']:.1f}")
            for (rate, p), m in results.items()]
    display(Markdown(md_table(["RT req/s", "policy", "RT norm. latency (s/token)", "TTFT att.",
                               "TPOT att. (request mean)", "TPOT att. (per token)", "BE req/s",
                               "BE req/s while RT served", "swapped-out tokens",
                               "drain episodes", "sim+eval s"], rows)))


# %% [markdown]
# ## The claims, checked on our model
#
# For each rate: the reduction of RT normalised latency of `bros` against `vllm` and against
# `bros-rr`, the TTFT-attainment gain as a *ratio* and in points, and the BE throughput change. The
# paper's "36.38" is a ratio (section 7.2: vLLM's average TTFT attainment is 1.28%, so 36.38x is about
# 47%), not points. The paper's numbers are maxima ("up to") over its rates for latency and SLOs,
# averages for throughput.

# %%
def claim_rows():
    rows = []
    for rate in RATES:
        b = results[rate, "bros"]
        for base in ("vllm", "bros-rr"):
            o = results[rate, base]
            lat = (1 - b["rt_normalised_latency"] / o["rt_normalised_latency"]
                   if b["rt_normalised_latency"] and o["rt_normalised_latency"] else None)
            ttft = 100 * (b["rt_ttft_attainment"] - o["rt_ttft_attainment"])
            ratio = (b["rt_ttft_attainment"] / o["rt_ttft_attainment"]
                     if o["rt_ttft_attainment"] else None)
            thr = b["be_throughput"] / o["be_throughput"] - 1 if o["be_throughput"] else None
            rows.append((rate, base, lat, ttft, thr, ratio))
    return rows


if HAVE_DATA:
    rows = claim_rows()
    display(Markdown(md_table(["RT req/s", "vs", "RT latency reduction", "TTFT att. ratio",
                               "TTFT att. gain (points)", "BE throughput change"],
                              [(r, b, fmt(l, True), "n/a" if q is None else f"{q:.2f}x",
                                f"{t:+.1f}", fmt(h, True)) for r, b, l, t, h, q in rows])))
    vs_vllm = [r for r in rows if r[1] == "vllm"]
    best_lat = max((r[2] for r in vs_vllm if r[2] is not None), default=None)
    best_ttft = max(r[3] for r in vs_vllm)
    best_ratio = max((r[5] for r in vs_vllm if r[5] is not None), default=None)
    mean_thr = sum(r[4] for r in vs_vllm if r[4] is not None) / len(vs_vllm)
    verdict = []
    verdict.append(
        f"RT normalised latency: bros is up to {fmt(best_lat, True)} lower than vllm here; the paper "
        f"claims up to 74.20%: our model {'agrees' if best_lat is not None and best_lat >= 0.5 else 'does not agree'} "
        "with a large reduction (threshold 50%).")
    verdict.append(
        f"TTFT attainment: up to {fmt(best_ratio)}x vllm's ({best_ttft:+.1f} points); the paper's "
        "\"36.38\" is a ratio over a vLLM that met 1.28% of TTFT SLOs: our model "
        f"{'agrees' if best_ratio is not None and best_ratio >= 18 else 'does not agree'} with a "
        "ratio of that size (threshold: half the claim). A ratio that large needs a vLLM that "
        "almost never meets the SLO; here vllm meets "
        f"{fmt(min(results[r, 'vllm']['rt_ttft_attainment'] for r in RATES), True)} at least.")
    verdict.append(
        f"BE throughput: {fmt(mean_thr, True)} on average against vllm; the paper reports an 11.29% "
        f"loss: our model {'agrees' if mean_thr >= -0.2 else 'does not agree'} that the loss is small "
        "(threshold: at most 20%).")
    worse = [r[0] for r in vs_vllm if r[2] is not None and r[2] < 0]
    if worse:
        verdict.append(
            "The claim holds only \"up to\": at " + ", ".join(f"{r:g}" for r in worse)
            + " RT req/s bros's RT normalised latency is *higher* than vllm's here.")
    display(Markdown("**Verdict (computed from the table above).** " + " ".join(verdict)))

# %% [markdown]
# ### Full-mode figures (recorded)
#
# *Recorded before issue 29's fixes* (the batch time budget set by late requests, the progressive drop,
# the metrics above); `studies/claims/fidelity.py --only bros --rt 60` measures the 4 req/s row after them:
# RT normalised latency 0.0255 s/token (vllm 0.0604: 58% lower), TTFT attainment 66.7% (vllm 20.0%),
# BE 4.74 req/s (vllm 5.26: -10%).
#
# `OPTSCHED_FAST=0`, 60 RT requests per rate, run on 2026-11-23 (335 s for the whole notebook on a shared,
# loaded 2-core machine; `bros` at 4 RT req/s alone took 203 s). `bros` against `vllm`:
#
# | RT req/s | RT norm. latency bros / vllm (s/token) | reduction | TTFT att. bros / vllm | gain (points) | BE req/s bros / vllm | BE change |
# |---|---|---|---|---|---|---|
# | 1 | 0.01102 / 0.02087 | 47.2% | 83.3% / 66.7% | +16.7 | 6.409 / 8.369 | -23.4% |
# | 2 | 0.01265 / 0.04593 | 72.5% | 83.3% / 20.0% | +63.3 | 5.381 / 7.158 | -24.8% |
# | 4 | 0.09672 / 0.06039 | -60.2% | 38.3% / 20.0% | +18.3 | 2.644 / 5.256 | -49.7% |
#
# Against `bros-rr` (the paper's RR): latency 80.9% and 81.5% lower at 1 and 2 req/s but 50.8% *higher* at
# 4 req/s; TTFT attainment +10.0, +20.0 and -18.3 points. TPOT attainment is 100% for every policy and rate
# (decode iterations stay far below 0.2 s on this cost model), so only TTFT discriminates. No drain episode
# (the progress guard of `optsched/policies/bros.py`) occurred in any run.
#
# What this says about the paper's claims, on our model:
#
# * **RT latency up to 74% lower** -- reproduced as an "up to": 72.5% at 2 req/s. It is not robust: at
#   4 req/s `bros` is the worst of the four policies on RT latency (0.0967 s/token). The adaptive batch
#   cap is not the cause: with `init_batch=256` (no backoff below 256) `bros` measures 0.0948 s/token,
#   TTFT 53.3% and 2.721 BE req/s on the same instance -- better TTFT, the same latency. Nor is swapping:
#   without host memory (`host_capacity` 0, evictions only) it measures 0.1164 s/token. The cause is not
#   diagnosed here. It predates the progress guard: the code before it (commit 04f57ea) measured
#   0.1051 s/token, TTFT 33.3% and 2.567 BE req/s.
# * **SLO attainment up to 36 points higher** -- agrees: up to +63.3 points over `vllm` (2 req/s), and
#   `bros` has the best TTFT attainment of the four at every rate except 4 req/s, where `bros-rr` leads.
# * **Negligible BE throughput loss** -- does not agree: `bros` loses 23-50% of `vllm`'s BE throughput
#   (32.6% on average; the paper reports 11.29% on average), and 16-43% of `bros-rr`'s. Our model charges
#   every swap transfer in the iteration time (BROS overlaps it), which costs `bros` more than the others.
# * **Greedy vs IP** -- on the 8 sampled iterations at 2 req/s the greedy's batch is a feasible point of
#   the IP on all 8 and has as many BE entries as the IP's optimum on all 8 (table below). In FAST mode
#   (15 RT requests) the IP finds one more BE entry on one of the 8 (iteration 700): there the greedy's
#   BE pass stops after eight BE requests in a row that do not fit (our adaptation for speed) before
#   reaching a checkpointed BE request whose swap-in and decode token would fit (diagnosed by hand).

# %% [markdown]
# ## Greedy vs the per-iteration integer program
#
# At every 100th iteration of `bros` (at most 8; RT rate 2/s) the IP of equations 1–8 is solved on the
# state the greedy saw: maximise BE entries subject to the most urgent RT entry being in the batch, every
# selected RT entry meeting its residual time, the batch cap, C and the free slots. The IP also models
# lazy checkpointing (RT entries may overwrite BE slots of requests outside the batch, at `kswap` per
# token in the iteration time and with `bros`'s host reservation), so every batch the greedy builds is
# within its reach. Its memory is aggregated over blocks, a *relaxation* of `bros`'s block layout
# (`optsched/oracles/bros_ip.py` says exactly what it abstracts): the IP's BE count is an upper bound on what the
# greedy's batch could have held at that iteration. "greedy is IP point" says whether the greedy's batch is
# a feasible point of the IP (its chunks are IP options and it meets equations 6–8).

# %%
from optsched.oracles.bros_ip import sample_iterations

if HAVE_DATA:
    inst = bros_workload(TRACE, N_RT, 2.0, seed=1, be_batch=8, limits=LIMITS)
    sampled = sample_iterations(inst, every=100, limit=8, time_limit=10)
    display(Markdown(md_table(
        ["iteration", "candidates", "greedy BE", "greedy RT", "greedy checkpointed tokens",
         "greedy is IP point", "IP BE", "IP RT", "IP checkpointed tokens", "IP status"],
        [(r["iteration"], r["candidates"], r["greedy_be"], r["greedy_rt"], r["greedy_checkpointed"],
          r["greedy_is_ip_point"], r["ip_be"], r["ip_rt"], r["ip_checkpointed"], r["ip_status"])
         for r in sampled])))
    solved = [r for r in sampled if r["ip_status"] == "optimal"]
    behind = [r for r in solved if r["ip_be"] > r["greedy_be"]]
    points = [r for r in solved if r["greedy_is_ip_point"]]
    display(Markdown(
        f"On {len(solved)} of {len(sampled)} sampled iterations the IP is solved to optimality; the "
        f"greedy's batch is a feasible point of the IP on {len(points)} of them and has fewer BE "
        f"entries than the IP's on {len(behind)}. "
        + ("Our model does not agree that Algorithm 1 finds the batch of equations 1-8 (under the "
           "IP's aggregated memory); candidate causes: non-urgent RT requests the greedy adds first "
           "and equations 1-8 do not ask for, the BE pass stopping after eight misfits, and chunk "
           "sizes the greedy derives from the room left. The paper presents Algorithm 1 as a fast "
           "heuristic." if behind else
           "On these iterations our model agrees that the greedy finds as many BE entries as the "
           "best batch of equations 1-8.")))

# %% [markdown]
# ## What the model does and does not capture
#
# * KV is charged token-exactly on these instances (block size 1): bidirectional sharing approaches
#   that limit, and `vllm` gets it too (more favourable than its real 16-slot paging), so any BROS
#   gain here does not come from block fragmentation.
# * Swap transfers are added to the iteration time (not overlapped as in BROS), so BROS's lazy
#   checkpoints cost at least what they cost BROS.
# * In the Azure setting BE batches are submitted at times fixed from an estimate of their
#   standalone service time (`optsched/workloads/hybrid.py` explains why), not when the previous batch really
#   finishes; the paper-like setting at the end uses the paper's rule (`closed_loop_be`).
# * Our `bros` chunks a BE prefill (by halving) to meet the most urgent RT deadline; the paper
#   prefills whole.
# * Our `bros` reserves host room for the whole KV of a request it checkpoints, and both `bros` and
#   `bros-rr` have a drain mode (run the oldest or most urgent request alone after 16 preemptions
#   without a new token) that guarantees progress; the greedy alone could livelock on small KV
#   capacities. Neither is in the paper; drain mode never triggers on these workloads.

# %% [markdown]
# ## A paper-like setting beside the Azure one
#
# Section 7.1 synthesises RT requests from ShareGPT (Table 2: prompts 223 +- 256, outputs 235 +- 269
# tokens) and submits the next BE batch **when the previous one completes**. Here both: RT lengths
# drawn by `optsched generate chat-like --dataset sharegpt` (**synthetic**, matched to Table 2's
# means and spreads, `optsched/workloads/chat_lengths.py`) and BE batches of 8 re-timed per policy by
# `optsched.workloads.hybrid.closed_loop_be` (one simulation per BE batch: each batch arrives when the
# previous one completes under the policy measured). `studies/claims/fidelity.py --only bros-paper`
# runs it at 60 and 120 RT requests.

# %%
from optsched.workloads.generators import generate
from optsched.workloads.hybrid import closed_loop_be

pool = generate("chat-like", n=5000, rate=1.0, seed=3, dataset="sharegpt", limits=LIMITS)
base_p = bros_workload(pool, N_RT, 4.0, seed=1, be_batch=8, limits=LIMITS)
rows_p, got = [], {}
for pol in ("bros", "vllm"):
    run_p = closed_loop_be(base_p, lambda pol=pol: get_policy(pol))
    got[pol] = hybrid_metrics(run_p.instance, run_p.evaluation, run_p.schedule)
    rows_p.append([pol, f"{got[pol]['rt_normalised_latency']:.4f}",
                   f"{got[pol]['rt_ttft_attainment']:.3f}", f"{got[pol]['be_throughput']:.3f}",
                   run_p.batches])
display(Markdown(md_table(["policy", "RT normalised latency", "TTFT attainment", "BE req/s",
                           "BE batches submitted"], rows_p)))
red = 1 - got["bros"]["rt_normalised_latency"] / got["vllm"]["rt_normalised_latency"]
loss = 1 - got["bros"]["be_throughput"] / got["vllm"]["be_throughput"]
display(Markdown(f"BROS vs vLLM, paper-like, closed loop: RT normalised latency {100 * red:+.1f}% lower "
                 f"(paper: 74.20% lower on ShareGPT), BE throughput {100 * loss:.1f}% lower "
                 "(paper: 11.29% lower)."))
