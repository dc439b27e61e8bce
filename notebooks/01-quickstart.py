# %% [markdown]
# # 01 — Quickstart: instance, simulate, solve, compare, plot
#
# optsched in five steps: **load or generate** an instance, **simulate** published scheduling
# policies, **evaluate** every schedule with the one evaluator (`optsched.evaluate`),
# **solve** for the optimum (InferMax's Big-M model, HiGHS), and **compare / plot**.
#
# The instance is the one `make demo` uses: InferMax's eviction experiment (section 5.1) with
# B = 4 requests, prompt I = 16, O = 4 output tokens, KV capacity M = max(2I, I + O - 1) = 32 and
# the InferMax Llama-2-7B/A100 cost model. Run with `OPTSCHED_FAST=0` for a longer solver limit.

# %%
import os

from IPython.display import Markdown, display
from nbsetup import FAST, describe, md_table, pct, show

print(f"FAST = {FAST}")

TIME_LIMIT = float(os.environ.get("OPTSCHED_TIME_LIMIT", 10 if FAST else 120))

# %% [markdown]
# ## 1. Load or generate an instance

# %%
from optsched.data import load_embedded
from optsched.instance import Limits
from optsched.workloads.generators import infermax_fixed

inst = load_embedded("demo")
print(inst.name, "| requests:", inst.n, "| M =", inst.limits.kv_capacity,
      "| C =", inst.limits.max_batch_tokens, "| cost model:", inst.cost_model.to_dict().get("preset"))
print([(r.id, r.prompt, r.output) for r in inst.requests])

# The same instance from the generator (InferMax fixed workload with our own limits):
gen = infermax_fixed(4, 16, 4, limits=Limits(kv_capacity=32, max_batch_tokens=4096))
assert [(r.prompt, r.output) for r in gen.requests] == [(r.prompt, r.output) for r in inst.requests]

# %% [markdown]
# ## 2. Simulate policies and evaluate the schedules

# %%
from optsched.evaluation import evaluate
from optsched.policies import list_policies, simulate

print("registered policies:", ", ".join(p.name for p in list_policies()))
sched = simulate(inst, "vllm")
ev = evaluate(inst, sched)  # THE evaluator: feasibility + every metric
print("vLLM feasible:", ev.feasible, "| batches:", sched.n_batches)
for k in ("makespan", "total_latency", "mean_ttft", "mean_tpot", "evictions", "recomputed_tokens"):
    print(f"  {k:18s} {ev.metrics[k]}")

# %% [markdown]
# ## 3. Compare several policies
#
# `optsched.comparison.run_policies` simulates and evaluates each policy (the same code behind
# `optsched compare`).

# %%
from optsched.comparison import run_policies

POLICIES = ["vllm", "vllm-ef", "sarathi", "sarathi-ef", "infermax", "fcfs", "mcsf"]
rows = run_policies(inst, POLICIES, "makespan")
display(Markdown(md_table(
    ["policy", "status", "makespan (s)", "evictions", "mean TTFT (s)"],
    [[r.label, r.status, f"{r.objective:.5f}", r.metric("evictions"), f"{r.metric('mean_ttft'):.5f}"]
     for r in rows])))

# %% [markdown]
# ## 4. Solve for the optimum
#
# `solve` builds the InferMax Big-M model, warm-starts it from the best policy schedule, decodes the
# solver's answer into a schedule and **replays it through `evaluate`**: the report's objective is
# the evaluator's. A solve that hits its time limit is reported as *best found* with its gap.

# %%
from optsched.formulations import SolveOptions
from optsched.solving import solve

best_policy = min((r for r in rows if r.evaluation.feasible), key=lambda r: r.objective)
rep = solve(inst, "infermax", "makespan",
            options=SolveOptions(time_limit=TIME_LIMIT, threads=1, progress=False),
            warm_start=best_policy.schedule)
print("status:", rep.status, "| objective:", rep.objective, "| bound:", rep.bound, "| gap:", rep.gap)
print("warm start:", rep.warm_start)
print("evaluator agrees:", rep.evaluation.feasible, rep.evaluation.objective("makespan") == rep.objective)
display(Markdown(f"**Solver result:** {describe(rep)}; the best policy ({best_policy.label}) has "
                 f"makespan {best_policy.objective:.6g}."))

# %% [markdown]
# ## 5. Plots (all drawn from evaluated schedules)

# %%
from optsched.plot import compare_bars, gantt, solver_progress

label = "optimal" if rep.status == "optimal" else "best found"
bar_rows = [{"policy": r.label, "objective": r.objective,
             "gap": (r.objective - rep.objective) / rep.objective,
             "evictions": r.metric("evictions"), "mean_ttft": r.metric("mean_ttft"),
             "mean_tpot": r.metric("mean_tpot"), "feasible": r.evaluation.feasible} for r in rows]
bar_rows.append({"policy": f"{label} (infermax)", "objective": rep.objective, "gap": 0.0,
                 "evictions": rep.evaluation.metrics["evictions"],
                 "mean_ttft": rep.evaluation.metrics["mean_ttft"],
                 "mean_tpot": rep.evaluation.metrics["mean_tpot"], "optimal": True})
show(compare_bars(bar_rows, title=f"demo: policies vs the solver ({label})",
                  gap_label=None if rep.status == "optimal" else "gap to best found (%)"), "01_bars")
show(gantt(inst, rep.schedule, rep.evaluation, title=f"{label} schedule (makespan {rep.objective:.5f} s)"),
     "01_gantt_solver")
show(gantt(inst, best_policy.schedule, best_policy.evaluation,
           title=f"{best_policy.label} (makespan {best_policy.objective:.5f} s)"), "01_gantt_policy")
if rep.history:
    show(solver_progress(rep.history, title="HiGHS incumbent and bound"), "01_progress")

# %%
gap_best = (best_policy.objective - rep.objective) / rep.objective
if rep.status == "optimal":
    verdict = (f"The optimum is proven: {rep.objective:.6g} s. The best policy, {best_policy.label}, is "
               f"{pct(gap_best, 2)} above it.")
else:
    verdict = (f"The optimum is **not proven** within {TIME_LIMIT:g} s: best found {rep.objective:.6g} s, "
               f"gap {pct(rep.gap)}. The best policy, {best_policy.label}, is {pct(gap_best, 2)} above the "
               f"best found schedule (and at most {pct((best_policy.objective - rep.bound) / rep.bound)} "
               f"above the optimum).")
display(Markdown(verdict))

# %% [markdown]
# ## 6. Your own scheduler, held against the optimum
#
# A policy is a class with four hooks; the simulator hands it a read-only view of the state
# (`view.S`, `view.m`, `view.prompt`, `view.limits`, ...) and applies the batch it plans. Nothing
# to register and nothing to fork: `simulate` takes the object, and the command line takes the file,
# e.g. `optsched compare demo --policies my_policy.py:OneAtATime,vllm --optimal -o report/`.
# Its schedule goes through the same evaluator as everything above.

# %%
from optsched.policies import Plan, Policy


class OneAtATime(Policy):
    """One request at a time, to completion, in arrival order (no batching at all)."""

    def bind(self, view):
        super().bind(view)
        self.queue = []

    def on_arrivals(self, idx):
        self.queue += idx

    def next_batch(self):
        if not self.queue:
            return None
        i, v = self.queue[0], self.view
        return Plan([i], [min(int(v.S[i] - v.m[i]), v.limits.prefill_budget)], [])

    def on_batch_end(self, plan, finished):
        self.queue = [i for i in self.queue if i not in set(finished.tolist())]


mine = evaluate(inst, simulate(inst, OneAtATime()))
gap_mine = (mine.objective("makespan") - rep.objective) / rep.objective
display(Markdown(f"**OneAtATime:** feasible {mine.feasible}, makespan {mine.objective('makespan'):.6g} s, "
                 f"{pct(gap_mine, 1)} above the solver's {describe(rep)}."))

# %% [markdown]
# **Next:** `02-eviction-hypothesis` sweeps this family over I; `04-heuristics-vs-optimum` does the
# comparison above on several families.
