"""One solve pipeline: the warm start is simulated and replayed once per
solve, and ``compare``'s optimum row is ``optsched solve``'s answer, fallback included.

Before the pipeline, ``optsched solve demo`` replayed the chosen warm start twice (once
while picking it, once more in ``solve_model``) and ``compare --optimal`` replayed the
compared row's schedule three times (its row, ``sized_solve``, ``solve_model``); a skipped
model gave compare a ``skipped`` row without the fallback ``solve`` reports."""

from __future__ import annotations

import importlib
import importlib.util
import json
import math
import sys
from collections import Counter

import numpy as np
import pytest
from paths import GOOD

import optsched.evaluation as evaluate_module
import optsched.policies as policies_module
from optsched.cli import main
from optsched.comparison import compare
from optsched.cost import DEFAULT_PRESET, preset
from optsched.data import load_instance
from optsched.formulations import FORMULATIONS, FormulationError, SizeHint, SolveOptions
from optsched.instance import Instance, Limits, Request
from optsched.solving import run, solve

#: every module on the solve path that may bind ``evaluate`` or ``simulate`` at import
SOLVE_PATH = ("optsched.cli.solve", "optsched.comparison.logic", "optsched.solving.budget",
              "optsched.search.lns", "optsched.formulations.base",
              "optsched.formulations.infermax.solve",
              "optsched.formulations.infermax.flow_objectives", "optsched.bounds.exact",
              "optsched.solving.pipeline", "optsched.comparison.report")


@pytest.fixture
def replays(monkeypatch):
    """Count ``simulate`` calls per policy and ``evaluate`` calls per simulated schedule
    (by identity), wherever on the solve path the two functions are called from."""
    sims: Counter[str] = Counter()
    evals: Counter[str] = Counter()
    simulated: dict[int, tuple[str, object]] = {}
    real_eval, real_sim = evaluate_module.evaluate, policies_module.simulate

    def counting_evaluate(instance, schedule):
        if id(schedule) in simulated and simulated[id(schedule)][1] is schedule:
            evals[simulated[id(schedule)][0]] += 1
        return real_eval(instance, schedule)

    def counting_simulate(instance, policy, *args, **kwargs):
        s = real_sim(instance, policy, *args, **kwargs)
        sims[str(policy)] += 1
        simulated[id(s)] = (str(policy), s)  # the schedule is kept alive: ids stay unique
        return s

    for name in SOLVE_PATH:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name)
    for mod in [m for k, m in sys.modules.items() if k.startswith("optsched") and m is not None]:
        if getattr(mod, "evaluate", None) is real_eval:
            monkeypatch.setattr(mod, "evaluate", counting_evaluate)
        if getattr(mod, "simulate", None) is real_sim:
            monkeypatch.setattr(mod, "simulate", counting_simulate)
    return sims, evals


def test_solve_simulates_and_replays_each_warm_start_once(replays, capsys):
    sims, evals = replays
    rc = main(["solve", "demo", "--time-limit", "60", "--json", "--quiet"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["status"] == "optimal" and d["warm_start"]["policy"] in sims
    # "auto" tries 7 policies: each simulated once and replayed once (the chosen one was
    # replayed twice before: picked, then evaluated again by solve_model)
    assert set(sims.values()) == {1} and len(sims) >= 2
    assert evals == sims


def test_compare_replays_the_compared_schedule_once(replays):
    sims, evals = replays
    cmp = compare(load_instance("demo"), "vllm", optimal=True, time_limit=60)
    assert cmp.optimum is not None and cmp.optimum.status == "optimal"
    # vllm's schedule is its row's evaluation and the warm start; three replays before
    assert sims == Counter({"vllm": 1}) and evals == Counter({"vllm": 1})


def _solve_json(capsys, *args: str) -> dict:
    rc = main(["solve", "tiny", "--warm-start", "vllm", "--json", "--quiet", *args])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0, d
    return d


def test_compare_optimum_row_is_solves_answer(capsys):
    d = _solve_json(capsys, "--time-limit", "60")
    cmp = compare(load_instance("tiny"), "vllm", optimal=True, time_limit=60)
    row = cmp.optimum
    assert row is not None and row.solve is not None
    assert d["status"] == "optimal" and row.solve.status == "optimal"
    # the same model from the same warm start (vllm): the same optimum, priced by evaluate
    assert row.objective == pytest.approx(d["objective"], rel=1e-9)
    assert cmp.report is not None and cmp.report.warm_start is not None
    assert cmp.report.warm_start.policy == "vllm"


def test_compare_optimum_row_carries_solves_fallback_when_the_model_is_skipped(monkeypatch,
                                                                               capsys):
    import optsched.solving.budget as budget

    # every model "needs" 1000 s per variable, so it is skipped at any time limit; no LNS
    # (its result depends on the time it gets), so the fallback is the warm start itself
    monkeypatch.setattr(budget, "SECONDS_PER_VARIABLE", 1e3)
    monkeypatch.setattr(budget, "SMALL_MODEL_VARIABLES", 0)
    for name in ("optsched.solving.budget", "optsched.solving.pipeline",
                 "optsched.comparison.logic"):
        if importlib.util.find_spec(name) is not None:
            monkeypatch.setattr(importlib.import_module(name), "MIN_LNS_SECONDS", float("inf"),
                                raising=False)
    d = _solve_json(capsys, "--time-limit", "30")
    assert d["status"] == "no_solution" and d["budget"]["model_built"] is False
    cmp = compare(load_instance("tiny"), "vllm", optimal=True, time_limit=30)
    row = cmp.optimum
    assert row is not None and row.status_text == "skipped" and cmp.report is None
    assert row.skipped and row.solve is not None and row.solve.fallback is not None
    fb = row.solve.fallback
    assert fb.policy == d["fallback"]["policy"] == "vllm"
    # both are evaluate(tiny, vllm's schedule): the same number
    assert fb.objective == d["fallback"]["objective"] == cmp.rows[0].objective
    assert fb.gap == pytest.approx(d["fallback"]["gap"], rel=1e-12)


def _arriving(n: int = 4) -> Instance:
    """``n`` distinct requests arriving 0.3 s apart (eq. G1's offline condition fails)."""
    rng = np.random.default_rng(0)
    return Instance("arriving", Limits(kv_capacity=4000, max_batch_tokens=4096),
                    preset("infermax-llama2-7b-a100"),
                    tuple(Request(f"r{i}", 0.3 * i, int(rng.integers(50, 1500)),
                                  int(rng.integers(10, 170))) for i in range(n)))


def test_infermax_hooks_name_the_model_run_builds():
    info = FORMULATIONS.get("infermax")
    tiny = load_instance("tiny")
    size = info.estimate(tiny, "makespan", SolveOptions(params={"variant": "auto"}), SizeHint(3))
    rep = solve(tiny, "infermax", "makespan", options=SolveOptions(time_limit=None, progress=False))
    assert size is not None and size.variant == "fill"
    assert rep.status == "optimal" and rep.notes[0].startswith("infermax variant fill")
    arriving = _arriving()
    auto = info.estimate(arriving, "makespan", SolveOptions(params={"variant": "auto"}),
                         SizeHint(100))
    plain = info.estimate(arriving, "makespan", SolveOptions(params={"variant": "plain"}),
                          SizeHint(100))
    assert auto is not None and auto.variant == "tight" and plain is not None
    # the Big-M model at J = 100 + 2 slack: 47 columns and 118 rows per request and slot
    assert plain.variant == "plain" and plain.columns == 47 * 4 * 102 and plain.rows == 118 * 4 * 102


def test_a_model_that_does_not_apply_is_refused_before_the_warm_start(replays):
    sims, _ = replays
    why = FORMULATIONS.get("infermax").applicable(_arriving(), "makespan",
                                                  SolveOptions(params={"variant": "fill"}))
    assert why is not None and "arrive at time 0" in why
    with pytest.raises(FormulationError, match="infermax: fill variant needs"):
        run(_arriving(), "infermax", "makespan",
            options=SolveOptions(params={"variant": "fill"}, progress=False))
    assert not sims  # no policy was simulated for a model that cannot be built


@pytest.mark.parametrize("objective", [
    "makespan", pytest.param("total-latency", marks=pytest.mark.slow)])
def test_epoch_arrivals_solve_like_shifted_ones(objective):
    """Before: arrivals at Unix-epoch seconds (1.7e9) turned a 3-request instance that solves
    optimally in < 1 s into ``no_solution``. The optimum of the shifted instance, moved back
    by the offset, is the optimum (every constraint is invariant under a common shift of
    arrivals and starts; makespan moves by the offset, latencies not at all)."""
    from optsched.formulations import SolveOptions
    from optsched.solving import solve

    base = Instance.load(GOOD).replace(cost_model=preset(DEFAULT_PRESET))
    off = 1.7e9
    epoch = base.replace(requests=tuple(
        Request(r.id, off + r.arrival * 0.01, r.prompt, r.output) for r in base.requests))
    zero = base.replace(requests=tuple(
        Request(r.id, r.arrival * 0.01, r.prompt, r.output) for r in base.requests))
    opts = SolveOptions(time_limit=60, progress=False)
    a = solve(epoch, "infermax", objective, options=opts)
    b = solve(zero, "infermax", objective, options=opts)
    # restricted-optimal (total latency's flow model, J not certified): proven among schedules
    # of at most J batches, the same J for both, so the two answers must still agree
    assert a.status == b.status, (a.status, b.status, a.notes)
    assert a.status in ("optimal", "restricted-optimal"), (a.status, a.notes)
    assert a.evaluation.feasible
    shift = off if objective == "makespan" else 0.0
    assert math.isclose(a.objective, b.objective + shift, rel_tol=1e-12, abs_tol=1e-6)
    assert any("shifted" in n for n in a.notes)


def _report(status, objective, bound, restricted):
    from optsched.solve_types import SolveReport

    return SolveReport(status=status, objective=objective, bound=bound, gap=None, runtime=1.0,
                       solver="highs", formulation="infermax", objective_kind="total-latency",
                       warm_start=None, evaluation=None, schedule=None, restricted=restricted)


def test_a_restricted_optimum_reads_restricted_optimal_with_the_certified_bound():
    """Before: a batch-count-restricted model's optimum printed "optimal" 13.6244 with the
    restricted model's bound 13.6244, where a feasible schedule reached 12.4454. The report
    now keeps the status restricted-optimal and reports the certified bound (12.0 here) and
    its gap (13.6244 - 12) / 13.6244."""
    from optsched.solve_types import BoundResult, Status
    from optsched.solving.pipeline import _certified

    rep = _certified(_report(Status.RESTRICTED_OPTIMAL, 13.6244, 13.6244, True),
                     BoundResult(12.0, "work", "total-latency"))
    assert rep.status == Status.RESTRICTED_OPTIMAL and not rep.proven_optimal
    assert rep.bound == 12.0 and rep.gap == pytest.approx((13.6244 - 12.0) / 13.6244)
    assert any("holds for the restricted model only" in n for n in rep.notes)
    # a solver bound below the certified one (a flow model's -3,182 s dual bound) is replaced
    rep = _certified(_report(Status.FEASIBLE, 49.1684, -3181.98, False),
                     BoundResult(35.1523, "work", "makespan"))
    assert rep.bound == 35.1523 and rep.gap == pytest.approx((49.1684 - 35.1523) / 49.1684)
    # a stronger solver bound stays
    rep = _certified(_report(Status.FEASIBLE, 49.1684, 43.0, False),
                     BoundResult(35.1523, "work", "makespan"))
    assert rep.bound == 43.0


def test_a_restricted_solve_is_not_called_optimal_unless_the_certified_bound_proves_it():
    """The tight model with J = 6 slots is restricted (the certified horizon is larger). On
    the three-request unit instance its optimum, total latency 9, meets the certified bound
    9 (request rung: each request's own 3 steps), so the answer is proven after all; the
    formulation alone says restricted-optimal."""
    from optsched.formulations import Hypotheses
    from optsched.formulations.base import solve_model
    from optsched.solve_types import Status

    inst = load_instance(GOOD)
    opts = SolveOptions(time_limit=120, params={"batches": 6, "variant": "tight"})  # load
    raw = solve_model(inst, "infermax", "total-latency", options=opts, hypotheses=Hypotheses(),
                      warm_start=None)
    assert raw.restricted and raw.status == Status.RESTRICTED_OPTIMAL and not raw.proven_optimal
    rep = run(inst, "infermax", "total-latency", options=opts, warm_start=None,
              lower="combinatorial")
    assert rep.lower_bound is not None and rep.lower_bound.value == pytest.approx(9.0)
    assert rep.objective == pytest.approx(9.0) and rep.status == Status.OPTIMAL
    assert rep.bound == rep.lower_bound.value


def test_the_formulation_gets_every_second_left_not_the_estimate_less_its_build(monkeypatch):
    """Before: the solver got ``time left - estimated build`` (e.g. 25 s - 15 s spent - ~4 s
    estimated = 5 s on the k0-dominated eviction family under load) even when the build took
    a fraction of that, and the command ended early. The formulation's time limit covers its
    own build, so it now gets what is left less the reserve."""
    import time

    import optsched.solving.pipeline as pipeline

    seen = {}

    def spy(instance, formulation, objective, *, options, **kw):
        seen["limit"], seen["at"] = options.time_limit, time.perf_counter()
        return real(instance, formulation, objective, options=options, **kw)

    real = pipeline.solve_model
    monkeypatch.setattr(pipeline, "solve_model", spy)
    t0 = time.perf_counter()
    rep = run(load_instance(GOOD), "infermax", "makespan",
              options=SolveOptions(time_limit=60), warm_start="fcfs")
    assert rep.plan is not None and rep.plan.build and rep.plan.solver_seconds is not None
    left = 60 - (seen["at"] - t0)
    assert seen["limit"] >= rep.plan.solver_seconds
    assert seen["limit"] == pytest.approx(left - pipeline.RESERVE_SECONDS, abs=0.5)


def test_solve_climbs_the_whole_ladder_within_a_third_of_its_budget(monkeypatch):
    """Before: solve and compare certified with the cheapest rungs (combinatorial) and gave
    the rest to search, though `bound` certifies more within seconds (conversation window:
    15,001 against 23,577). The pipeline now asks the ``best`` ladder, with a budget ending a
    third of the time left from its start; the answer is the largest rung found."""
    import time

    from optsched import bounds
    from optsched.solve_types import BoundResult

    calls = []

    def spy(instance, objective, method, time_limit=None, budget=None, exact_solve=None):
        calls.append((method, time.perf_counter(), None if budget is None else budget.deadline,
                      budget is not None and budget.exact_solve is not None))
        return BoundResult(1.0, "exact", objective, ladder={"work": 0.5, "exact": 1.0})

    monkeypatch.setattr(bounds, "lower_bound", spy)
    t0 = time.perf_counter()
    rep = run(load_instance(GOOD), "infermax", "makespan", options=SolveOptions(time_limit=30),
              warm_start="fcfs", lower="best")
    method, at, deadline, has_exact = calls[0]
    assert method == "best" and not has_exact  # the model solved next is the exact attempt
    assert deadline == pytest.approx(at + (t0 + 30 - at) / 3, abs=0.05)
    # the ladder's answer is the certified bound's start (the solver's proof of 6 tops it)
    assert rep.lower_bound is not None and rep.lower_bound.ladder["exact"] == 1.0
