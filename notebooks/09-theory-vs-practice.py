# %% [markdown]
# # 09 — Theory vs practice: the 2025-2026 scheduling-theory policies against the certified bound
#
# Since the online-scheduling paper (MC-SF), a line of theory papers proposed KV-memory-aware
# schedulers with proven guarantees for total latency: SVF (smallest memory-time volume first,
# ratio 5), A_min (interval predictions, O(log 1/alpha)), GBA (clairvoyant, 10.67) and GSA
# (non-clairvoyant, 61.92), Sorted-F (heterogeneous prompts, "a constant"), WAIT and Nested WAIT
# (fluid-guided thresholds, asymptotically optimal throughput). `docs/policies.md` says for each
# what was built from the paper's text and what we had to assume (several bodies were not
# reachable: GBA, GSA and Sorted-F are built "as far as the abstract defines them").
#
# Here every theory policy runs beside `vllm`, `sarathi`, `mcsf` and `ecoserve` on
#
# * seeded windows of both Azure 2023 traces (`optsched.workloads.traces.seeded_window`,
#   Llama-2-7B preset, M = 30,000, C = 8192 -- `studies/claims/theory.py`'s setting), their
#   arrivals stretched to an offered load of 0.7 (`optsched.serving.load.scale_to_load`,
#   docs/semantics.md section 4): at their own arrivals the conversation windows are overloaded
#   (certified load 1.4-1.6, `docs/results/load.md`), where every multiple grows with the
#   window's length;
# * the online paper's random family (`optsched generate online-paper`: all at 0, unit time;
#   **offline**, so no arrival rate and no load);
#
# with the certified lower bound (`lower_bound(..., "best")`, 10 s per instance in FAST mode, 30 s
# in full) as the reference: a policy's gap
# `(policy - bound) / policy` is an upper bound on how far it is from the optimum. Then the worst
# policy / exact-optimum ratios the claim checkers' hill climbs find (`optsched check-claim
# gba-ratio` etc.) against each paper's constant. FAST mode: windows of 200 requests, 2 seeds per
# trace, online-paper n = 30, 3 seeds, 16 hill-climb instances per claim; `OPTSCHED_FAST=0`: 1000
# requests, 3 seeds, n = 60, 200 instances.

# %%
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
from IPython.display import Markdown, display
from nbsetup import FAST, md_table, pct, show, trace_path

print(f"FAST = {FAST}")

SIZE = 200 if FAST else 1000
SEEDS = [1, 2] if FAST else [1, 2, 3]
PAPER_N, PAPER_SEEDS = (30, [0, 1, 2]) if FAST else (60, [0, 1, 2])
CLAIM_TRIALS = 16 if FAST else 200
M, C = 30_000, 8192
LOAD = 0.7  # offered load of the trace windows (stable; see the introduction)
# the bound ladder's time limit per instance: its last rung (stretch, B15) iterates until the
# limit ends (without one it runs 200 iterations, minutes per window); any limit certifies
BOUND_SECONDS = 10 if FAST else 30

CONV, HAVE_DATA = trace_path()
CODE = CONV.with_name("AzureLLMInferenceTrace_code.csv")

# %%
from optsched.bounds import lower_bound
from optsched.cost import preset
from optsched.evaluation import evaluate
from optsched.instance import Limits
from optsched.policies import get_spec, simulate
from optsched.serving.load import offered_load, scale_to_load
from optsched.workloads.generators import generate
from optsched.workloads.traces import read_trace, seeded_window, trace_to_instance

THEORY = ["svf", "amin", "gba", "gsa", "sorted-f", "wait", "nested-wait"]
PRACTICE = ["vllm", "sarathi", "mcsf", "ecoserve"]
POLICIES = THEORY + PRACTICE

instances = []
if HAVE_DATA:
    for path, label in ((CONV, "conv"), (CODE, "code")):
        full = read_trace(path, format="azure")
        for seed in SEEDS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                own = trace_to_instance(
                    seeded_window(full, SIZE, seed), Limits(kv_capacity=M, max_batch_tokens=C),
                    preset("infermax-llama2-7b-a100"), name=f"{label}-s{seed}", too_long="drop")
                instances.append(scale_to_load(own, LOAD))
for seed in PAPER_SEEDS:
    instances.append(generate("online-paper", n=PAPER_N, seed=seed).replace(name=f"paper-s{seed}"))
print(", ".join(f"{i.name} ({i.n}" + ("" if offered_load(i).point is None else
                                      f", load {offered_load(i).point:.2f}") + ")"
                for i in instances))

# %%
results = {}  # (instance, policy) -> total latency
bounds = {}
for inst in instances:
    lb = lower_bound(inst, "total-latency", "best", time_limit=BOUND_SECONDS)
    bounds[inst.name] = lb.value
    for p in POLICIES:
        t0 = time.process_time()
        ev = evaluate(inst, simulate(inst, p))
        assert ev.feasible, (inst.name, p, ev.violations[:2])
        results[inst.name, p] = ev.objective("total-latency")
        assert results[inst.name, p] >= lb.value * (1 - 1e-9)  # the bound never exceeds a schedule
    print(f"{inst.name}: bound {lb.value:.6g} ({lb.method}); done")

# %% [markdown]
# ## Each policy against the certified bound
#
# Cells: total latency / certified bound (1.00 would be provably optimal). Theory policies
# marked `*` read the true output lengths (hypothetical, semantics section 6); `gsa` never does.
# Columns `conv-*` and `code-*` are the trace windows at offered load 0.7 (stable; each window's
# load is printed above), `paper-*` the online paper's instances (all at 0: offline, no load).

# %%
names = [i.name for i in instances]
rows = []
for p in POLICIES:
    star = "*" if get_spec(p).hypothetical else ""
    rows.append([p + star] + [f"{results[n, p] / bounds[n]:.2f}" for n in names])
display(Markdown(md_table(["policy"] + names, rows)))

ratio = np.array([[results[n, p] / bounds[n] for n in names] for p in POLICIES])
fig, ax = plt.subplots(figsize=(1.0 + 0.8 * len(names), 0.45 * len(POLICIES) + 1))
im = ax.imshow(np.log2(ratio), cmap="viridis", aspect="auto")
ax.set_xticks(range(len(names)), names, rotation=45, ha="right")
ax.set_yticks(range(len(POLICIES)), POLICIES)
for (r, c), v in np.ndenumerate(ratio):
    ax.text(c, r, f"{v:.2f}", ha="center", va="center", color="w", fontsize=7)
ax.set_title("total latency / certified bound (colour: log2)")
fig.colorbar(im, ax=ax)
fig.tight_layout()
show(fig, "09-theory-vs-bound")

# %% [markdown]
# ## The claims: worst policy / exact optimum found
#
# `check-claim *-ratio`: a seeded hill climb over tiny instances (all at 0, so offline: no load;
# heterogeneous prompts,
# unit time, C = M) maximising policy / the exhaustive optimum of the classical model (no
# evictions, chunking or pausing), with the ratio to the optimum of our semantics beside it. The
# worst instances of longer runs are kept in `instances/evidence/theory/` (replayed by the tests).

# %%
from optsched.checks.claims import RATIO_CLAIMS, check_claim

claim_rows, worst = [], {}
for claim, (_, stated) in RATIO_CLAIMS.items():
    rep = check_claim(claim, CLAIM_TRIALS, seed=0, max_requests=4)
    worst[claim] = (rep.worst_ratio, stated, rep.violations)
    claim_rows.append([claim, "none stated" if stated == float("inf") else f"{stated:g}",
                       f"{rep.worst_ratio:.3f}", f"{rep.details['unrestricted']['worst_ratio']:.3f}",
                       rep.violations, rep.trials])
display(Markdown(md_table(["claim", "paper's constant", "worst (classical model)",
                           "worst (our semantics)", "violations", "instances"], claim_rows)))

# %% [markdown]
# ## Verdict (computed)

# %%
best_theory = {n: min(THEORY, key=lambda p: results[n, p]) for n in names}
best_practice = {n: min(PRACTICE, key=lambda p: results[n, p]) for n in names}
theory_wins = [n for n in names if results[n, best_theory[n]] < results[n, best_practice[n]]]
viol = [c for c, (_, _, v) in worst.items() if v]
lines = [
    f"* Every schedule is feasible under the one evaluator and at least the certified bound on all "
    f"{len(names)} instances.",
    f"* The best theory policy beats the best of vllm/sarathi/mcsf/ecoserve on "
    f"{len(theory_wins)} of {len(names)} instances"
    + (f" ({', '.join(f'{n}: {best_theory[n]}' for n in theory_wins)})" if theory_wins else "")
    + " -- with a caveat: every theory policy but gsa reads the true output lengths (mcsf does too, "
    "here, as no instance carries predictions); gsa, the one length-blind theory policy, is "
    f"the worst or next to worst on {sum(sorted(POLICIES, key=lambda p: -results[n, p]).index('gsa') < 2 for n in names)}"
    f" of {len(names)} instances (its restarts re-prefill the prompt under our recompute).",
    f"* Gaps to the bound (best theory / best practice; the trace windows at offered load {LOAD:g}, "
    "the online-paper instances offline): "
    + "; ".join(f"{n} {pct(1 - bounds[n] / results[n, best_theory[n]])} / "
                f"{pct(1 - bounds[n] / results[n, best_practice[n]])}" for n in names) + ".",
]
if viol:
    lines.append(f"* The claims **do not agree** with our oracles: {', '.join(viol)} found a ratio "
                 "above the paper's constant -- a bug in our reading of the algorithm (GBA, GSA and "
                 "Sorted-F are built from abstracts) or in the proof's model.")
else:
    lines.append("* The worst ratios found **agree** with every stated constant: "
                 + ", ".join(f"{c} {w:.3f}" + (f" <= {s:g}" if s != float("inf") else " (no constant)")
                             for c, (w, s, _) in worst.items())
                 + " -- a search over tiny instances, evidence and not a proof.")
lines.append("* WAIT and Nested WAIT claim asymptotic (heavy-traffic) optimality, not a finite "
             "ratio: nothing to check on finite instances; their thresholds derived from M hold "
             "running requests back whenever too few new ones wait, which is what the table shows "
             "at these loads.")
display(Markdown("\n".join(lines)))
