"""Hindsight-optimal IP (formulations/hindsight.md): conversion, hand-derived optima, encode/decode,
hypotheses, backends, bounds. Every solve goes through base.solve, which replays the decoded
schedule through the evaluator and fails loudly on any objective mismatch."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from paths import INSTANCES

from optsched import milp
from optsched.cli import main as cli_main
from optsched.cost import LinearCost, UnitCost
from optsched.evaluation import evaluate
from optsched.formulations import FormulationError, Hypotheses, SolveOptions
from optsched.formulations.hindsight import (
    HindsightParams,
    NotRepresentable,
    build,
    footprint,
    greedy_starts,
    improve_starts,
    objective_of_starts,
    schedule_from_starts,
    serial_starts,
    starts_from_schedule,
)
from optsched.formulations.hindsight.floors import separation_intervals
from optsched.instance import Instance, Limits, Request
from optsched.schedule import Schedule
from optsched.solving import solve

OPTS = SolveOptions(time_limit=30, threads=1, progress=False)


def inst_of(M, reqs, C=None, name="t"):
    rs = tuple(Request(f"r{k}", float(a), i, o) for k, (a, i, o) in enumerate(reqs))
    return Instance(name, Limits(kv_capacity=M, max_batch_tokens=C or M), UnitCost(), rs)


def opts(**params):
    return SolveOptions(time_limit=30, threads=1, progress=False, params=params)


# -- (H0) semantics section 7: the paper's "s + j while generating token j" is I = s + 1 -------------
@pytest.mark.parametrize("s,o,t0", [(1, 1, 0), (3, 5, 2), (5, 30, 7)])
def test_paper_memory_convention_converts_with_I_equal_s_plus_1(s, o, t0):
    inst = inst_of(s + o, [(0, s + 1, o)])
    ev = evaluate(inst, schedule_from_starts(inst, np.array([t0])))
    assert ev.feasible
    # batch t0 + j - 1 generates token j (j = 1..o) and holds s + j KV tokens after it
    j = np.arange(1, o + 1)
    assert np.array_equal(ev.batch_kv[t0 + j - 1], s + j)
    assert ev.metrics["peak_kv"] == s + o == inst.requests[0].peak_kv
    assert ev.completion[0] == t0 + o and ev.first_token[0] == t0 + 1
    # and the model's memory coefficients are exactly these numbers
    hm = build(inst, "total-latency", params=HindsightParams(variant="plain", horizon=t0 + o))
    a = hm.model.arrays()
    col = int(hm.x.ids[np.flatnonzero(hm.col_t == t0)[0]])
    g = hm.model.group("memory")
    rows = a.row_of_entry[(a.indices == col)]
    coef = a.data[(a.indices == col)]
    in_mem = (rows >= g.start) & (rows < g.start + g.size)
    assert sorted(coef[in_mem].tolist()) == (s + j).tolist()


# -- hand-derived optima ------------------------------------------------------------------------
# Two identical requests, M = 10, I = 4, O = 3 (KV 4, 5, 6). Started together: 8, 10, 12 > 10.
# Second at slot 1: slot 2 holds 6 + 5 = 11 > 10. Second at slot 2: slot 2 holds 6 + 4 = 10 fits.
# Completions 3 and 5: total latency 8, makespan 5, mean TTFT (1 + 3) / 2 = 2.
TWIN = [(0, 4, 3), (0, 4, 3)]


@pytest.mark.parametrize("variant", ["tight", "plain"])
@pytest.mark.parametrize("objective,value", [("total-latency", 8.0), ("makespan", 5.0),
                                             ("mean-ttft", 2.0)])
def test_hand_derived_twin(variant, objective, value):
    rep = solve(inst_of(10, TWIN), "hindsight", objective, options=opts(variant=variant))
    assert rep.status == "optimal", rep.message
    assert rep.objective == pytest.approx(value)
    assert rep.bound == pytest.approx(value)


def test_hand_derived_arrivals_and_fractional_arrival():
    # B arrives at 1: slot 2 would hold 6 + 5 = 11 if B starts at 1, so B starts at 2;
    # latencies 3 and (2 + 3 - 1) = 4
    rep = solve(inst_of(10, [(0, 4, 3), (1, 4, 3)]), "hindsight", "total-latency", options=OPTS)
    assert rep.status == "optimal" and rep.objective == pytest.approx(7.0)
    # A long request (KV 2..6) and a short one (KV 2, 3) fit together from slot 0: the optimum is
    # the trivial lower bound sum O = 7. With the short one arriving at 0.5 it starts at slot 1
    # (H7): completions 5 and 3, latencies 5 + 2.5
    rep = solve(inst_of(10, [(0, 2, 5), (0.5, 2, 2)]), "hindsight", "total-latency", options=OPTS)
    assert rep.status == "optimal" and rep.objective == pytest.approx(7.5)
    assert any("fractional arrivals" in n for n in rep.notes)


def test_hand_derived_greedy_and_optimum_agree():
    """M = 10: A, B (I=2, O=1: KV 2) and C (I=9, O=2: KV 9, 10). A and B fit together at slot 0
    (4 <= 10); C fits with nobody (9 + 2 > 10), so it starts at slot 1: latencies 1 + 1 + 3 = 5.
    C first would give 2 + 3 + 3. Shortest-first (MC-SF) finds the optimum here; the random
    instance of the slow test below is one where it does not."""
    inst = inst_of(10, [(0, 2, 1), (0, 2, 1), (0, 9, 2)])
    g = greedy_starts(inst, "mcsf")
    assert objective_of_starts(inst, "total-latency", g) == 5.0
    rep = solve(inst, "hindsight", "total-latency", options=OPTS)
    assert rep.status == "optimal" and rep.objective == pytest.approx(5.0)


# -- encode / decode ------------------------------------------------------------------------------
@pytest.mark.parametrize("params", [{}, {"aggregate": False}, {"variant": "plain"},
                                    {"memory": "flow"}, {"cliques": 2}])
def test_encode_passes_check_and_roundtrips(params):
    inst = inst_of(12, [(0, 3, 4), (0, 3, 4), (1, 2, 6), (0, 5, 2)])
    starts = greedy_starts(inst)
    sched = schedule_from_starts(inst, starts)
    assert evaluate(inst, sched).feasible
    hm = build(inst, "total-latency", params=HindsightParams.from_dict(params), ub_starts=starts)
    vec = hm.encode(sched)
    assert hm.model.check(vec) == []
    assert hm.decode(vec) == sched
    assert hm.model.objective_value(vec) == pytest.approx(
        evaluate(inst, sched).objective("total-latency"))
    # identical requests swapped: equal up to relabelling, decoded canonically (first id first)
    s2 = starts.copy()
    s2[[0, 1]] = s2[[1, 0]]
    if s2[0] != s2[1]:
        swapped = schedule_from_starts(inst, s2)
        dec = hm.decode(hm.encode(swapped))
        assert dec == (swapped if params.get("variant") == "plain" else sched)


def test_unrepresentable_schedules_are_rejected():
    inst = inst_of(12, [(0, 4, 3)])
    chunked = Schedule.from_batches([([("r0", 2)],), ([("r0", 2)],), ([("r0", 1)],), ([("r0", 1)],)])
    assert evaluate(inst, chunked).feasible
    with pytest.raises(NotRepresentable):
        starts_from_schedule(inst, chunked)
    gap = Schedule.from_batches([([("r0", 4)],), ([("r0", 1)], (), 5.0), ([("r0", 1)],)])
    assert evaluate(inst, gap).feasible
    with pytest.raises(NotRepresentable):
        starts_from_schedule(inst, gap)


def test_domain_errors():
    inst = inst_of(12, [(0, 4, 3)])
    lin = inst.replace(cost_model=LinearCost(k0=1.0))
    with pytest.raises(FormulationError, match="unit-time"):
        solve(lin, "hindsight", "total-latency", options=OPTS)
    big = inst_of(12, [(0, 8, 3)], C=6)
    with pytest.raises(FormulationError, match="chunked"):
        solve(big, "hindsight", "total-latency", options=OPTS)


# -- hypotheses -----------------------------------------------------------------------------------
def test_at_most_below_optimum_is_infeasible_and_at_optimum_feasible():
    inst = inst_of(10, TWIN)
    rep = solve(inst, "hindsight", "total-latency", options=OPTS, hypotheses=Hypotheses(at_most=7.0))
    assert rep.status == "infeasible"
    rep = solve(inst, "hindsight", "total-latency", options=OPTS, hypotheses=Hypotheses(at_most=8.0))
    assert rep.status == "optimal" and rep.objective == pytest.approx(8.0)


def test_cli_at_most_below_optimum_reports_infeasible(tmp_path, capsys):
    p = tmp_path / "twin.json"
    inst_of(10, TWIN).save(p)
    code = cli_main(["solve", str(p), "--formulation", "hindsight", "--objective", "total-latency",
                     "--at-most", "0.99", "--than", "8", "--json", "--warm-start", "none"])
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "infeasible" and code == 1


def test_force_forbid_order():
    inst = inst_of(10, TWIN)
    # forbid r0 in batch 0: r1 goes first, r0 at slot 2 (completions 5 and 3)
    rep = solve(inst, "hindsight", "total-latency", options=OPTS,
                hypotheses=Hypotheses(forbid=(("r0", 0),)))
    assert rep.status == "optimal" and rep.objective == pytest.approx(8.0)
    assert rep.evaluation.completion.tolist() == [5.0, 3.0]
    # order r1 before r0 has the same effect
    rep = solve(inst, "hindsight", "total-latency", options=OPTS,
                hypotheses=Hypotheses(order=(("r1", "r0"),)))
    assert rep.evaluation.completion.tolist() == [5.0, 3.0]
    # force r1 into batch 6: r1 starts in 4..6; best is r0 at 0, r1 at 4 (or r1 at 2.. no: 4..6)
    rep = solve(inst, "hindsight", "total-latency", options=OPTS,
                hypotheses=Hypotheses(force=(("r1", 6),)))
    assert rep.status == "optimal"
    assert rep.evaluation.completion.tolist() == [3.0, 7.0]
    # no evictions is trivially true
    rep = solve(inst, "hindsight", "total-latency", options=OPTS,
                hypotheses=Hypotheses(no_evictions=True))
    assert rep.objective == pytest.approx(8.0)


# -- backends agree --------------------------------------------------------------------------------
def test_backends_agree_on_the_optimum(backend):
    inst = inst_of(14, [(0, 4, 5), (0, 3, 6), (1, 2, 4), (0, 5, 3), (2, 4, 4)])
    hm = build(inst, "total-latency")
    reason = milp.unsupported_reason(backend, hm.model)
    if reason is not None:
        pytest.skip(reason)
    ref = solve(inst, "hindsight", "total-latency", options=OPTS)
    rep = solve(inst, "hindsight", "total-latency",
                options=SolveOptions(solver=backend, time_limit=60, threads=1, progress=False))
    assert rep.status == "optimal", rep.message
    assert rep.objective == pytest.approx(ref.objective)


# -- random small instances: optimum <= policies, bound <= optimum, warm start ---------------------
@st.composite
def small_instances(draw):
    n = draw(st.integers(1, 4))
    M = draw(st.integers(6, 14))
    reqs = []
    for _ in range(n):
        i = draw(st.integers(1, 4))
        o = draw(st.integers(1, max(1, min(6, M - i))))
        reqs.append((draw(st.sampled_from([0, 0, 1, 3])), i, o))
    return inst_of(M, reqs)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=small_instances(), objective=st.sampled_from(["total-latency", "makespan", "mean-ttft"]))
def test_optimum_below_every_representable_policy(inst, objective):
    from optsched.policies import list_policies, simulate

    rep = solve(inst, "hindsight", objective, options=OPTS, warm_start=None)
    assert rep.status == "optimal", rep.message
    assert rep.bound <= rep.objective + 1e-9
    for order in ("mcsf", "fcfs"):
        assert rep.objective <= objective_of_starts(inst, objective, greedy_starts(inst, order)) + 1e-9
    for spec in list_policies():
        s = simulate(inst, spec.name)
        try:
            starts_from_schedule(inst, s)  # only schedules of the paper's model are comparable
        except NotRepresentable:  # chunked prefill, evictions, idle gaps
            continue
        assert rep.objective <= evaluate(inst, s).objective(objective) + 1e-9, spec.name
    # plain agrees
    plain = solve(inst, "hindsight", objective, options=opts(variant="plain"), warm_start=None)
    assert plain.objective == pytest.approx(rep.objective)


def test_warm_started_result_is_no_worse_than_its_start():
    inst = inst_of(20, [(0, 3, 8), (0, 2, 12), (0, 4, 5), (1, 3, 9), (0, 5, 6), (2, 2, 10)])
    ws = schedule_from_starts(inst, greedy_starts(inst, "fcfs"))
    v0 = evaluate(inst, ws).objective("total-latency")
    rep = solve(inst, "hindsight", "total-latency", warm_start=ws,
                options=SolveOptions(time_limit=5, threads=1, progress=False))
    assert rep.status in ("optimal", "feasible")
    assert rep.objective <= v0 + 1e-9
    assert rep.bound is None or rep.bound <= rep.objective + 1e-9


def test_bucket_certifies_a_short_horizon():
    """(H12): with the cut forced below the optimal makespan the bucket is used at the optimum,
    the cut doubles, and the answer is still the true optimum."""
    inst = inst_of(10, TWIN + [(0, 4, 3)])
    ref = solve(inst, "hindsight", "total-latency", options=OPTS)
    rep = solve(inst, "hindsight", "total-latency", options=opts(horizon=3), warm_start=None)
    assert rep.status == "optimal" and rep.objective == pytest.approx(ref.objective)
    assert any("late bucket" in n for n in rep.notes)


@pytest.mark.slow
def test_random_family_n8_mcsf_counterexample():
    from optsched.workloads.generators import online_paper_random

    inst = online_paper_random(8, 0)
    rep = solve(inst, "hindsight", "total-latency",
                options=SolveOptions(time_limit=300, threads=2, progress=False))
    assert rep.status == "optimal"
    # a regression value, not derived by hand: the optimum this model proved (studies/hindsight/
    # results/hindsight-highs.json, tight, n = 8, seed 0); the plain transcription reaches the same 693
    # there but cannot close its bound in 60 s. The local search alone does not prove it.
    assert rep.objective == pytest.approx(693.0)
    from optsched.policies import simulate

    mcsf = evaluate(inst, simulate(inst, "mcsf")).objective("total-latency")
    assert mcsf == objective_of_starts(inst, "total-latency", greedy_starts(inst, "mcsf"))
    assert mcsf > rep.objective  # MC-SF is not optimal here (717 at the time of writing)


# -- (H20) completion-separation rows ------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(M=st.integers(4, 24), a=st.tuples(st.integers(1, 6), st.integers(1, 20)),
       b=st.tuples(st.integers(1, 6), st.integers(1, 20)), imax=st.integers(1, 6))
def test_separation_intervals_never_overlap_for_a_feasible_pair(M, a, b, imax):
    """(H20a-b) checked by brute force, independently of the derivation: for every pair of start
    slots at which two requests fit together (KV <= M in every slot), their doubled-time
    intervals [2C - A, 2C + B) are disjoint."""
    (Ia, Oa), (Ib, Ob) = a, b
    assume(Ia + Oa - 1 <= M and Ib + Ob - 1 <= M)
    uI = np.array([Ia, Ib, max(imax, Ia, Ib)])
    uO = np.array([Oa, Ob, 1])
    A, B = separation_intervals(uI, uO, M)
    H = Oa + Ob + 2
    for Sa in range(H):
        for Sb in range(H):
            kv = np.zeros(2 * H + 2, int)
            kv[Sa:Sa + Oa] += Ia + np.arange(Oa)
            kv[Sb:Sb + Ob] += Ib + np.arange(Ob)
            if kv.max() > M:
                continue
            Ca, Cb = Sa + Oa, Sb + Ob
            lo_a, hi_a = 2 * Ca - A[0], 2 * Ca + B[0]
            lo_b, hi_b = 2 * Cb - A[1], 2 * Cb + B[1]
            if A[0] + B[0] > 0 and A[1] + B[1] > 0:
                assert hi_a <= lo_b or hi_b <= lo_a, (Sa, Sb)


def _random_feasible_starts(inst, rng):
    """Serial list scheduling in a random order with random release slots: a feasible schedule
    of the paper's model that no heuristic in the package would produce."""
    I, O, M = inst.prompt, inst.output, inst.limits.kv_capacity
    e = np.ceil(inst.arrival).astype(int)
    H = int(e.max() + O.sum() + 20)
    kv = np.zeros(H + int(O.max()) + 1, int)
    starts = np.zeros(inst.n, int)
    for i in rng.permutation(inst.n):
        prof = footprint(inst, I[i] + np.arange(O[i]))
        t = int(e[i] + rng.integers(0, 6))
        while (kv[t:t + O[i]] + prof > M).any():
            t += 1
        kv[t:t + O[i]] += prof
        starts[i] = t
    return starts


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(M=st.integers(8, 30), block=st.sampled_from([1, 1, 2, 4]), seed=st.integers(0, 10**6),
       n=st.integers(2, 7), objective=st.sampled_from(["total-latency", "makespan", "mean-ttft"]))
def test_every_feasible_schedule_satisfies_the_separation_rows(M, block, seed, n, objective):
    """(H20) rows cut off no schedule: random feasible schedules (random order and release), with
    duplicates (aggregated units) and block rounding, encode to vectors that pass ``check``."""
    rng = np.random.default_rng(seed)
    reqs = []
    for _ in range(n):
        i = int(rng.integers(1, max(2, M // 4)))
        o = int(rng.integers(max(1, M // 3), M - i + 2))
        reqs.append((int(rng.choice([0, 0, 2])), i, o))
    reqs += reqs[:1]  # an identical pair
    assume(all(-(-(i + o - 1) // block) * block <= M for _, i, o in reqs))  # every request fits
    rs = tuple(Request(f"r{k}", float(a), i, o) for k, (a, i, o) in enumerate(reqs))
    inst = Instance("sep", Limits(kv_capacity=M, max_batch_tokens=M, block_size=block), UnitCost(), rs)
    starts = _random_feasible_starts(inst, rng)
    sched = schedule_from_starts(inst, starts)
    assert evaluate(inst, sched).feasible
    hm = build(inst, objective, ub_starts=starts)
    assert hm.model.check(hm.encode(sched)) == []


def test_separation_rows_raise_the_lp_bound():
    """(H20) on the random family's n = 8 instance: the rows are there, and the LP relaxation
    with them is strictly above the one without (numbers in formulations/hindsight.md)."""
    from optsched.workloads.generators import online_paper_random

    inst = online_paper_random(8, 0)
    lp = {}
    for sep in (False, True):
        hm = build(inst, "total-latency", params=HindsightParams(separation=sep))
        assert ("separation" in hm.model.groups) == sep
        lp[sep] = milp.lp_relaxation_value(hm.model)
    assert lp[True] > lp[False] + 10



# -- (H21) serial schedule generation and local search -------------------------------------------
def _fits(inst, placed, i, t):
    """Naive check: request i at slot t beside the placed {request: start}, every limit."""
    lim = inst.limits
    I, O = inst.prompt, inst.output
    H = t + int(O[i]) + max((s + int(O[j]) for j, s in placed.items()), default=0) + 1
    kv, tok, pre, cnt = (np.zeros(H, int) for _ in range(4))
    for j, s in {**placed, i: t}.items():
        for k in range(int(O[j])):
            kv[s + k] += footprint(inst, np.array([I[j] + k]))[0]
            tok[s + k] += I[j] if k == 0 else 1
            cnt[s + k] += 1
        pre[s] += I[j]
    ok = kv.max() <= lim.kv_capacity and tok.max() <= lim.max_batch_tokens
    ok = ok and pre.max() <= lim.prefill_budget
    return ok and (lim.max_batch_size is None or cnt.max() <= lim.max_batch_size)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), C=st.sampled_from([None, 6, 3]), B=st.sampled_from([None, 2]),
       P=st.sampled_from([None, 4]), block=st.sampled_from([1, 2]))
def test_serial_starts_places_each_request_at_its_earliest_fitting_slot(seed, C, B, P, block):
    """(H21a): feasible (replayed by the evaluator), and no request fits at an earlier slot
    beside the requests before it in the list (checked naively, slot by slot; the compiled
    decode jumps past conflicts, and this checks that no jump skips a start that fits)."""
    rng = np.random.default_rng(seed)
    M = int(rng.integers(8, 16))
    reqs = [(int(rng.integers(0, 3)), int(rng.integers(1, 4)), int(rng.integers(1, 7)))
            for _ in range(int(rng.integers(3, 9)))]
    assume(all(-(-(i + o - 1) // block) * block <= M for _, i, o in reqs))
    rs = tuple(Request(f"r{k}", float(a), i, o) for k, (a, i, o) in enumerate(reqs))
    lim = Limits(kv_capacity=M, max_batch_tokens=C or M, max_batch_size=B, block_size=block,
                 max_prefill_tokens=None if P is None or (C and P > C) else P)
    inst = Instance("ser", lim, UnitCost(), rs)
    order = rng.permutation(inst.n)
    starts = serial_starts(inst, order)
    assert evaluate(inst, schedule_from_starts(inst, starts)).feasible
    placed = {}
    for i in order:
        e = int(np.ceil(inst.arrival[i]))
        assert _fits(inst, placed, i, int(starts[i]))
        assert not any(_fits(inst, placed, i, t) for t in range(e, int(starts[i]))), (i, placed)
        placed[i] = int(starts[i])


def test_local_search_finds_the_mcsf_counterexample_optimum():
    """(H21) on the shipped counterexample (MC-SF 13, optimum 12, derived in README and
    instances/): the search starts from MC-SF and reaches 12; it never returns worse."""
    inst = Instance.load(INSTANCES / "mcsf-counterexample-I2-O3-1-3-1-M5.json")
    g = greedy_starts(inst, "mcsf")
    assert objective_of_starts(inst, "total-latency", g) == 13
    found, iters = improve_starts(inst, "total-latency", g, time_limit=10, seed=0)
    assert iters > 0
    assert objective_of_starts(inst, "total-latency", found) == 12
    assert evaluate(inst, schedule_from_starts(inst, found)).feasible


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=small_instances(), objective=st.sampled_from(["total-latency", "makespan", "mean-ttft"]))
def test_local_search_is_never_worse_than_its_start(inst, objective):
    g = greedy_starts(inst, "fcfs")
    found, _ = improve_starts(inst, objective, g, time_limit=5, max_iters=200, seed=1)
    assert objective_of_starts(inst, objective, found) <= objective_of_starts(inst, objective, g)
    assert evaluate(inst, schedule_from_starts(inst, found)).feasible


@pytest.mark.parametrize("bad", ["-1", "abc", "inf"])
def test_search_param_is_validated(bad):
    with pytest.raises(FormulationError, match="search"):
        HindsightParams.from_dict({"search": bad})


@pytest.mark.parametrize("n,seed,arrival", [(12, 0, "offline"), (40, 0, "offline"), (40, 1, "offline"),
                                            (20, 3, "poisson"), (30, 4, "poisson")])
def test_greedy_mcsf_is_the_mcsf_policy(n, seed, arrival):
    """Two independent implementations of the paper's MC-SF (the list schedule here, the
    simulator policy) give the same start slots; the skip variant is a different schedule."""
    from optsched.policies import simulate
    from optsched.workloads.generators import online_paper_random

    inst = online_paper_random(n, seed, arrival=arrival, rate=1.0 if arrival == "poisson" else None)
    pol = starts_from_schedule(inst, simulate(inst, "mcsf"))
    assert np.array_equal(greedy_starts(inst, "mcsf"), pol)
    if (n, seed) == (40, 0):  # derived: the two rules differ here (9028 vs 7771)
        assert not np.array_equal(greedy_starts(inst, "mcsf", skip=True), pol)
