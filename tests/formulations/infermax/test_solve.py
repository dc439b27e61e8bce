"""The ``infermax`` formulation (formulations/infermax.md): exact pricing, encode/decode,
hand-derived optima, hypotheses, policies as upper bounds, backends agreeing, CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched import milp
from optsched.cost import LinearCost, UnitCost, preset
from optsched.evaluation import OBJECTIVES, evaluate
from optsched.formulations import Hypotheses, SolveOptions
from optsched.formulations import infermax as ix
from optsched.instance import Instance, Limits, Request
from optsched.objectives import MODELLED
from optsched.policies import simulate
from optsched.schedule import Schedule
from optsched.solving import solve
from optsched.testing import instances, valid_schedules

#: an explicit ``batches=J`` below the certified horizon restricts the model: its optimum is
#: restricted-optimal; the objectives asserted beside are the hand-derived optima either way
OPTIMA = ("optimal", "restricted-optimal")

REL = 1e-6


def opts(**kw):
    kw.setdefault("time_limit", 30)
    kw.setdefault("threads", 1)
    kw.setdefault("progress", False)
    return SolveOptions(**kw)


def two_requests(cost=None, M=2) -> Instance:
    """Two requests I = 1, O = 2 (peak KV 2) under M = 2 (hand-derived optima below)."""
    return Instance("two", Limits(kv_capacity=M, max_batch_tokens=8), cost or UnitCost(),
                    (Request("A", 0.0, 1, 2), Request("B", 0.0, 1, 2)))


def _strip_trailing(s: Schedule) -> Schedule:
    bs = list(s)
    while bs and not bs[-1].entries and not bs[-1].evict:
        bs.pop()
    return Schedule.from_batches(bs)


# ---------------------------------------------------------------- exact pricing, encode/decode
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), variant=st.sampled_from(ix.VARIANTS))
def test_encode_check_decode_and_price_exactly(data, variant):
    inst = data.draw(instances(max_requests=4, max_prompt=6, max_output=4))
    s = data.draw(valid_schedules(inst)).schedule
    objective = data.draw(st.sampled_from(MODELLED))
    im0 = ix.build(inst, objective, J=1, variant=variant)
    cs = _strip_trailing(im0.canonical(s))
    ev, evc = evaluate(inst, s), evaluate(inst, cs)
    assert evc.feasible
    # canonicalisation never makes a schedule worse (dominance, symmetry, compaction)
    for kind in OBJECTIVES:
        assert evc.objective(kind) <= ev.objective(kind) * (1 + 1e-9) + 1e-12
    im = ix.build(inst, objective, J=cs.n_batches + 2, variant=variant)
    x = im.encode(cs)
    assert im.model.check(x) == []
    assert im.decode(x) == cs
    # the model prices the schedule exactly as the evaluator does
    assert math.isclose(im.model.objective_value(x) / im.scale, evc.objective(objective),
                        rel_tol=1e-9, abs_tol=1e-9)


def test_family_warm_starts_encode_and_price_exactly():
    from optsched.policies import simulate

    for I in (1, 64, 1024):
        inst = Instance(f"fam{I}", Limits(kv_capacity=max(2 * I, I + 3), max_batch_tokens=4096),
                        preset("infermax-llama2-7b-a100"),
                        tuple(Request(f"r{k}", 0.0, I, 4) for k in range(4)))
        for pol in ("vllm", "vllm-ef", "sarathi"):
            s = simulate(inst, pol)
            for variant in ix.VARIANTS:
                im = ix.build(inst, "makespan", J=s.n_batches + 1, variant=variant)
                cs = im.canonical(s)
                x = im.encode(cs)
                assert im.model.check(x) == [], (I, pol, variant)
                assert im.decode(x) == cs
                assert math.isclose(im.model.objective_value(x) / im.scale,
                                    evaluate(inst, cs).objective("makespan"), rel_tol=1e-9)


def test_decode_classification_is_exact_both_ways():
    """A 1-token refill chunk at m = S - 1 is a decode entry (semantics 3); the model may not
    price it as prefill, nor a 2-token refill as decode."""
    inst = Instance("cls", Limits(kv_capacity=8, max_batch_tokens=8),
                    LinearCost(k0=1, k1=0.1, kpq=0.01, kpm=0.02, kdm=0.05, kpr=0.3, kdr=0.01),
                    (Request("a", 0.0, 2, 3),))
    s = Schedule.from_batches([([("a", 2)], []), ([], ["a"]), ([("a", 2)], []), ([("a", 1)], []),
                               ([("a", 1)], [])])
    ev = evaluate(inst, s)
    assert ev.feasible and ev.entry_decode.tolist() == [False, False, True, True]
    im = ix.build(inst, "makespan", J=6, variant="plain")
    x = im.encode(s)
    assert im.model.check(x) == []
    for name in ("dec", "pre"):  # flipping the phase of the refill's last chunk is infeasible
        y = x.copy()
        col = im.v[name][0, 3]
        y[col] = 1 - y[col]
        other = im.v["pre" if name == "dec" else "dec"][0, 3]
        y[other] = 1 - y[other]
        assert im.model.check(y) != []


# ---------------------------------------------------------------- hand-derived optima
# Two requests I=1, O=2, M=2, unit time. Both prefill in batch 0 (KV 1+1); neither can then
# decode (KV 2+1 > 2) unless the other is evicted: evict B at batch 1 while A decodes and
# finishes (t=2); B refills its 2 tokens in batch 2 and finishes (t=3). Makespan 3, total
# latency 2+3 = 5, mean TTFT 1. Without evictions the requests run one after the other:
# A at t=1,2, B at t=3,4: makespan 4, total latency 6, mean TTFT (1+3)/2 = 2.
HAND = {("makespan", False): 3.0, ("total-latency", False): 5.0, ("mean-ttft", False): 1.0,
        ("makespan", True): 4.0, ("total-latency", True): 6.0, ("mean-ttft", True): 2.0}


@pytest.mark.parametrize("variant", ix.VARIANTS)
@pytest.mark.parametrize("objective", MODELLED)
@pytest.mark.parametrize("no_ev", [False, True])
def test_hand_derived_optimum(variant, objective, no_ev):
    inst = two_requests()
    rep = solve(inst, "infermax", objective, options=opts(params={"variant": variant}),
                hypotheses=Hypotheses(no_evictions=no_ev), warm_start=None)
    assert rep.status in OPTIMA, rep.message
    assert math.isclose(rep.objective, HAND[objective, no_ev], rel_tol=REL)
    assert rep.bound <= rep.objective * (1 + REL)
    if no_ev:
        assert not rep.schedule.has_evictions
    else:
        assert rep.evaluation.metrics["evictions"] >= 1 or objective == "mean-ttft"


def test_hand_derived_linear_chunking():
    """One request I=3, O=1 under C=2 must be chunked: (2,1) and (1,2) both cost
    2*k0 + 3*k1 + kpq*(4+1) + kpm*2 = 2.39."""
    inst = Instance("chunk", Limits(kv_capacity=4, max_batch_tokens=2),
                    LinearCost(k0=1, k1=0.1, kpq=0.01, kpm=0.02), (Request("a", 0.0, 3, 1),))
    for variant in ix.VARIANTS:
        rep = solve(inst, "infermax", "makespan", options=opts(params={"variant": variant}))
        assert rep.status in OPTIMA and math.isclose(rep.objective, 2.39, rel_tol=REL)


def test_online_arrival_idles_until_arrival():
    """B arrives at t=5: A runs at t=0..2 (prefill, decode), B at 5..7; makespan 7."""
    inst = Instance("online", Limits(kv_capacity=4, max_batch_tokens=4), UnitCost(),
                    (Request("A", 0.0, 1, 2), Request("B", 5.0, 1, 2)))
    for obj, want in (("makespan", 7.0), ("total-latency", 4.0), ("mean-ttft", 1.0)):
        rep = solve(inst, "infermax", obj, options=opts())
        assert rep.status in OPTIMA and math.isclose(rep.objective, want, rel_tol=REL), obj


# ---------------------------------------------------------------- hypotheses
def test_at_most_below_optimum_is_infeasible():
    inst = two_requests()
    rep = solve(inst, "infermax", "makespan", options=opts(),
                hypotheses=Hypotheses(at_most=2.9), warm_start=None)
    assert rep.status == "infeasible"
    rep = solve(inst, "infermax", "makespan", options=opts(), hypotheses=Hypotheses(at_most=3.0))
    assert rep.status in OPTIMA and math.isclose(rep.objective, 3.0)


def test_force_forbid_order():
    inst = two_requests()
    # order: B completes no later than A -> B is the one that decodes first
    rep = solve(inst, "infermax", "total-latency", options=opts(),
                hypotheses=Hypotheses(order=(("B", "A"),)))
    assert rep.status in OPTIMA and math.isclose(rep.objective, 5.0)
    ev = rep.evaluation
    assert ev.completion[1] <= ev.completion[0]
    # forbid B in batch 0: the eviction trick just moves (empty batches take no time)
    rep = solve(inst, "infermax", "makespan", options=opts(),
                hypotheses=Hypotheses(forbid=(("B", 0),)))
    assert rep.status in OPTIMA and math.isclose(rep.objective, 3.0)
    assert "B" not in [r for r, _ in rep.schedule.batch(0).entries]
    rep = solve(inst, "infermax", "makespan", options=opts(),
                hypotheses=Hypotheses(force=(("B", 2),)))
    assert rep.status in OPTIMA
    assert "B" in [r for r, _ in rep.schedule.batch(2).entries]


# ---------------------------------------------------------------- policies, bounds, warm start
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(inst=instances(max_requests=3, max_prompt=4, max_output=3, online=False))
def test_optimum_below_every_policy_and_bound_below_optimum(inst):
    from optsched.policies import list_policies, simulate

    rep = solve(inst, "infermax", "makespan", options=opts(time_limit=20))
    assert rep.status in ("optimal", "restricted-optimal", "feasible"), rep.message
    assert rep.bound <= rep.objective * (1 + REL) + 1e-9
    assert rep.warm_start is not None and rep.warm_start.objective is not None
    ws = rep.warm_start.objective
    assert rep.objective <= ws * (1 + REL) + 1e-9
    if rep.status != "optimal":
        return
    for spec in list_policies():
        ev = evaluate(inst, simulate(inst, spec.name))
        assert ev.feasible, (spec.name, ev.violations[:3])
        assert rep.objective <= ev.objective("makespan") * (1 + REL) + 1e-9, spec.name


def test_warm_started_result_never_worse_than_warm_start():
    from optsched.policies import simulate

    inst = Instance("fam2", Limits(kv_capacity=5, max_batch_tokens=4096),
                    preset("infermax-llama2-7b-a100"),
                    tuple(Request(f"r{k}", 0.0, 2, 4) for k in range(4)))
    s = simulate(inst, "vllm")
    rep = solve(inst, "infermax", "makespan", options=opts(time_limit=3), warm_start=s)
    assert rep.status in ("optimal", "restricted-optimal", "feasible")
    assert rep.objective <= evaluate(inst, s).objective("makespan") * (1 + REL)
    assert rep.bound <= rep.objective * (1 + REL)


# ---------------------------------------------------------------- backends agree
def test_backends_agree_on_the_optimum(backend):
    inst = two_requests()
    im = ix.build(inst, "total-latency", J=4, variant="tight")
    reason = milp.unsupported_reason(backend, im.model)
    if reason is not None:
        pytest.skip(reason)
    rep = solve(inst, "infermax", "total-latency", options=opts(solver=backend,
                                                                   params={"batches": 4}),
                warm_start=None)
    assert rep.status in OPTIMA, rep.message
    assert math.isclose(rep.objective, 5.0, rel_tol=REL)


# ---------------------------------------------------------------- CLI
def test_cli_no_evictions_and_at_most(tmp_path, capsys):
    from optsched.cli import main

    p = tmp_path / "two.json"
    two_requests().save(p)
    assert main(["solve", str(p), "--json", "--no-evictions", "--time-limit", "20"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "optimal" and math.isclose(out["objective"], 4.0)
    assert out["evaluation"]["metrics"]["evictions"] == 0
    code = main(["solve", str(p), "--json", "--at-most", "0.9", "--than", "3",
                 "--warm-start", "none", "--time-limit", "20"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["status"] == "infeasible"


def test_unknown_parameter_is_rejected():
    from optsched.formulations import FormulationError

    with pytest.raises(FormulationError, match="unknown parameter 'bogus'"):
        solve(two_requests(), "infermax", options=opts(params={"bogus": 1}))


def test_entry_batch_bound_is_valid_on_policies():
    """The busy-time bound on batches with entries holds for every policy schedule."""
    from optsched.policies import simulate

    inst = Instance("fam8", Limits(kv_capacity=16, max_batch_tokens=4096),
                    preset("infermax-llama2-7b-a100"),
                    tuple(Request(f"r{k}", 0.0, 8, 4) for k in range(4)))
    for pol in ("vllm", "vllm-ef", "sarathi", "fcfs"):
        s = simulate(inst, pol)
        ev = evaluate(inst, s)
        nb = int(np.count_nonzero(np.diff(s.batch_ptr)))
        assert nb <= ix.entry_batches_upper_bound(inst, "makespan", ev.objective("makespan"))


def test_telescoped_prefill_of_a_chunked_prompt_is_not_cut_off_by_the_batch_time_bound():
    # kpm = 2 kpq telescopes (eqs. 24-26): a 12-token prompt chunked at C = 3 is priced
    # kpq * 12^2 = 0.144 in the batch that ends it, above any one batch's duration bound
    # (k0 + kpq C^2 + kpm C U = 0.01 + 0.009 + 0.072 = 0.091); with that bound on t the tight
    # model called this instance infeasible, though every request must chunk
    inst = Instance("chunked", Limits(kv_capacity=30, max_batch_tokens=3),
                    LinearCost(k0=0.01, kpq=1e-3, kpm=2e-3),
                    (Request("a", 0.0, 12, 2), Request("b", 0.0, 12, 2)))
    opts = SolveOptions(time_limit=60, progress=False, params={"variant": "tight"})
    tight = solve(inst, "infermax", "makespan", options=opts)
    search = solve(inst, "exhaustive", "makespan",
                   options=SolveOptions(time_limit=60, progress=False))
    # the telescoped pricing is the one tested
    assert "eqs. 24-26" in " ".join(ix.build(inst, "makespan", J=12, variant="tight").notes)
    assert search.status in OPTIMA and tight.status in OPTIMA, tight.message
    assert tight.objective == pytest.approx(search.objective, rel=1e-9)


#: the k0-dominated eviction-family instance of instances/regressions/README.md
K0_FAMILY = Path(__file__).resolve().parents[3] / "instances" / "regressions" / \
    "evict-family-I64-k0.json"


def test_k0_family_instance_is_the_reported_one():
    """vLLM's makespan, by hand: 16 batches (each request alone: a whole 64-token prefill,
    then 3 decodes; two prompts fill M = 128, so a decode beside another request's cache
    does not fit) x k0 = 2 s, plus 4 x (64 + 3) = 268 tokens x k1 = 0.064 s, plus four
    prefills' kpq c^2 = 4 x 64^2 x 1e-6 s: 32 + 17.152 + 0.016384 = 49.168384 s, the
    49.16 s of the report; the flow F2c model is what auto builds for it."""
    from optsched.formulations.infermax.solve import route

    inst = Instance.load(K0_FAMILY)
    s = simulate(inst, "vllm")
    ev = evaluate(inst, getattr(s, "schedule", s))
    assert ev.metrics["batches"] == 16
    assert ev.objective("makespan") == pytest.approx(32 + 268 * 0.064 + 4 * 64 ** 2 * 1e-6)
    assert route(inst, "makespan", Hypotheses(), "auto") == "flow"


@pytest.mark.slow
def test_k0_family_solve_never_reports_a_bound_below_the_certified_one():
    """The flow model's dual bound on it was about -3,000 s after the time limit while the
    ladder certifies more: the report's bound is the larger, and the certified gap is
    measured against it. The ladder ``solve`` climbs (``best``) reaches the batches rung's
    49.15768 s (formulations/bounds.md B18, by hand: 16 x 2 + 0.064 x 268 + 1e-6 x 64^2 x
    (1 + 1/5 + 1/9 + 1/13)); the cheap rungs alone gave 35.15 s."""
    from optsched.solving import run as solve_pipeline

    rep = solve_pipeline(Instance.load(K0_FAMILY), "infermax", "makespan",
                         options=SolveOptions(time_limit=25), warm_start="vllm",
                         lower="best", fallback=True)
    assert rep.lower_bound is not None and rep.lower_bound.value >= 49.15768
    assert rep.objective is not None and rep.bound is not None
    assert rep.bound >= rep.lower_bound.value - 1e-9
    assert rep.objective <= 49.168384 + 1e-6  # never worse than the vLLM warm start
    assert rep.gap is not None and rep.gap <= (49.168384 - 49.15768) / 49.168384 + 1e-9


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="open: vLLM's 49.168384 s is not the optimum (a schedule "
                   "chunking each next prompt beside the current decodes reaches 49.158098 s) "
                   "and the certified bound (batches rung, formulations/bounds.md B18) is "
                   "49.15769 s; closing [49.15769, 49.15810] to 1e-6 needs the KV of partial "
                   "prefills priced exactly, which neither that relaxation nor the flow F2c "
                   "model (no useful LP bound) does in 25 s; instances/regressions/README.md")
def test_k0_family_is_proven_within_25_s():
    from optsched.solving import run as solve_pipeline

    rep = solve_pipeline(Instance.load(K0_FAMILY), "infermax", "makespan",
                         options=SolveOptions(time_limit=25), warm_start="vllm",
                         lower="best", fallback=True)
    assert rep.proven_optimal, (rep.status, rep.bound, rep.objective)
