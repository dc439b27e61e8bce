"""Large-neighbourhood search (optsched/search/lns.py): feasible, replayed, never worse, exact windows."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.cli import main
from optsched.evaluation import OBJECTIVES, evaluate
from optsched.formulations.exhaustive import search_between
from optsched.instance import Instance, Limits, Request
from optsched.schedule import Schedule
from optsched.search.lns import LNSError, LNSOptions, improve
from optsched.testing import instances, valid_schedules

QUICK = dict(time_limit=5.0, max_iterations=30, window_time=0.2, max_states=2_000,
             progress=False)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), objective=st.sampled_from(OBJECTIVES), seed=st.integers(0, 3))
def test_result_is_feasible_replayed_and_never_worse(data, objective, seed):
    inst = data.draw(instances(max_requests=4, max_prompt=6, max_output=3))
    start = data.draw(valid_schedules(inst)).schedule
    if data.draw(st.booleans()):  # the same batches with their earliest starts stated
        t = evaluate(inst, start).batch_start
        start = Schedule.from_batches([(b.entries, b.evict, float(t[j]))
                                       for j, b in enumerate(start)])
    res = improve(inst, start, objective, LNSOptions(seed=seed, **QUICK))
    ev = evaluate(inst, res.schedule)
    assert ev.feasible
    assert res.objective == pytest.approx(ev.objective(objective), rel=1e-12)
    assert res.start_objective == pytest.approx(evaluate(inst, start).objective(objective))
    assert res.objective <= res.start_objective * (1 + 1e-12)


def _three_singletons() -> tuple[Instance, Schedule]:
    """Unit time (every batch takes 1), C = 2, M = 10; a, b: one-token prompt, one output
    token; c: two-token prompt, one output token. The start runs each alone: 3 batches,
    makespan 3. The 4 prompt tokens need ceil(4 / C) = 2 batches, so 2 is optimal, and the
    window of batches 0-1 re-solved exactly merges a and b into one batch [a:1, b:1]
    (2 tokens <= C) -- makespan 2. Total latency: start 1 + 2 + 3 = 6; after the merge
    a, b finish at 1 and c at 2: 4."""
    inst = Instance("three", Limits(kv_capacity=10, max_batch_tokens=2), requests=(
        Request("a", 0.0, 1, 1), Request("b", 0.0, 1, 1), Request("c", 0.0, 2, 1)))
    return inst, Schedule.from_batches([([("a", 1)], []), ([("b", 1)], []), ([("c", 2)], [])])


@pytest.mark.parametrize("objective, start, best", [("makespan", 3, 2), ("total-latency", 6, 4)])
def test_finds_the_hand_worked_improvement(objective, start, best):
    inst, sched = _three_singletons()
    res = improve(inst, sched, objective, LNSOptions(max_window=3, **QUICK))
    assert res.start_objective == start
    assert res.objective == best
    assert res.improvements >= 1
    assert evaluate(inst, res.schedule).objective(objective) == best


def test_seeded_runs_repeat():
    inst, sched = _three_singletons()
    a = improve(inst, sched, "total-latency", LNSOptions(seed=7, **QUICK))
    b = improve(inst, sched, "total-latency", LNSOptions(seed=7, **QUICK))
    assert a.schedule.to_json() == b.schedule.to_json() and a.history[1:] and (
        [h[1] for h in a.history] == [h[1] for h in b.history])


def test_search_between_reaches_the_goal_state():
    """From a resident decode state (g=1, m=2 of a 2-token prompt, O=3) to finished: two
    decode batches of 1 token, unit time -> cost 2 (each batch generates one token)."""
    inst = Instance("one", Limits(kv_capacity=10, max_batch_tokens=4),
                    requests=(Request("x", 0.0, 2, 3),))
    res = search_between(inst, "makespan", [(1, 2)], [(3, 0)])
    assert res.status == "optimal" and res.objective == 2


def test_infeasible_start_is_refused():
    inst, _ = _three_singletons()
    with pytest.raises(LNSError, match="infeasible"):
        improve(inst, Schedule.from_batches([([("a", 1)], [])]), "makespan",
                LNSOptions(**QUICK))


def test_cli_improve_json(tmp_path, capsys):
    inst, sched = _three_singletons()
    ip, sp, out = tmp_path / "i.json", tmp_path / "s.json", tmp_path / "o.json"
    inst.save(ip)
    sched.save(sp)
    rc = main(["improve", str(ip), "--from", str(sp), "--time-limit", "2", "--json",
               "-o", str(out)])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["feasible"] and doc["start_objective"] == 3 and doc["objective"] == 2
    assert evaluate(inst, Schedule.load(out)).objective("makespan") == 2
    # an improvement was found, so some neighbourhood (not the start) found it
    assert doc["improvements"] >= 1 and doc["method"] != "start"


def test_cli_improve_bad_from(capsys):
    assert main(["improve", "demo", "--from", "no-such-policy"]) == 2
    assert "--from no-such-policy" in capsys.readouterr().err


def test_compare_adds_an_lns_row(tmp_path):
    from optsched.comparison import compare

    inst, sched = _three_singletons()
    cmp = compare(inst, schedules=[("singletons", sched)], time_limit=5, improve_seconds=2)
    lns = [r for r in cmp.rows if r.kind == "lns"]
    assert len(lns) == 1 and lns[0].label == "lns (singletons)"
    assert lns[0].evaluation.feasible and lns[0].objective == 2  # the hand-worked optimum above
    # the best row is the LNS's (makespan 2 < the start's 3), and says which method found it
    assert cmp.best is lns[0] and lns[0].method.startswith("lns: ")
    assert lns[0].method != "lns: start" and lns[0].to_dict()["method"] == lns[0].method
    assert cmp.rows[0].method == "schedule file"


def test_compare_report_names_the_best_method(tmp_path):
    from optsched.comparison import compare, write_report

    inst, sched = _three_singletons()
    cmp = compare(inst, schedules=[("singletons", sched)], time_limit=5)
    write_report(tmp_path, cmp, gantt_charts=False)
    doc = json.loads((tmp_path / "report.json").read_text())
    assert doc["best"] == {"label": "singletons", "method": "schedule file", "objective": 3.0,
                           "gap": doc["rows"][0]["gap"]}
    assert [r["method"] for r in doc["rows"]] == ["schedule file"]
    assert "best schedule: `singletons` (schedule file)" in (tmp_path / "report.md").read_text()


def test_priority_reordering_puts_the_small_job_first():
    """Linear cost 1 per token, M = 101: a (I = 100, O = 2, peak 101) and b (I = 1, O = 3,
    peak 3) never fit together. MC-SF admits the shorter output first: a's prefill ends at
    100, its decode at 101; b runs 102, 103, 104: total latency 101 + 104 = 205. Ranked by
    fluid work (a: 101 tokens, b: 3), b goes first: 1, 2, 3, then a at 103 and 104:
    3 + 104 = 107, which the priority phase alone must find."""
    from optsched.cost import LinearCost
    from optsched.policies import simulate

    inst = Instance("prio", Limits(kv_capacity=101, max_batch_tokens=200), LinearCost(k1=1.0),
                    (Request("a", 0.0, 100, 2), Request("b", 0.0, 1, 3)))
    start = simulate(inst, "mcsf")
    assert evaluate(inst, start).objective("total-latency") == pytest.approx(205)
    res = improve(inst, start, "total-latency", LNSOptions(priority_share=1.0, **QUICK))
    assert res.objective == pytest.approx(107) and res.priority_key.startswith("work")
    assert evaluate(inst, res.schedule).objective("total-latency") == pytest.approx(107)
    assert res.priority_decodes >= 1 and res.windows_solved == 0


def test_priority_options_are_checked():
    with pytest.raises(LNSError, match="priority_share"):
        LNSOptions(priority_share=1.5)


@pytest.mark.parametrize("objective, best", [("makespan", 2), ("total-latency", 4)])
def test_windows_are_solved_when_the_schedule_lists_requests_in_another_order(objective, best):
    """Regression: a schedule's request index is its position in the schedule's own ``ids``
    (first use), not the instance's. The start below runs c, b, a (ids ("c", "b", "a")); the
    window replay read c's entry as a's, so no window matched the schedule's states and the
    hand-worked improvement of ``_three_singletons`` (merge the two one-token prompts: makespan
    2; latencies 1, 1, 2: total 4 with c last) was never found."""
    inst, _ = _three_singletons()
    sched = Schedule.from_batches([([("c", 2)], []), ([("b", 1)], []), ([("a", 1)], [])])
    assert sched.ids == ("c", "b", "a")
    res = improve(inst, sched, objective, LNSOptions(max_window=3, priority_share=0.0, **QUICK))
    assert res.objective == best
    assert evaluate(inst, res.schedule).objective(objective) == best


def test_prefix_reuse_is_refused_in_one_line_before_any_simulation(capsys):
    """LNS's windows are solved by the reuse-blind exhaustive search (docs/semantics.md
    section 6, "Prefix reuse"): an instance with block ids, or a schedule stating hits or
    drops, is refused; the CLI refuses before building its start schedule (exit 2)."""
    from handworked import shared_instance

    from optsched.policies import simulate
    from optsched.search.lns import check_supported

    inst = shared_instance()
    with pytest.raises(LNSError, match="prefix reuse is not supported") as e:
        improve(inst, simulate(inst, "vllm-apc"), "makespan", LNSOptions(**QUICK))
    assert "\n" not in str(e.value)
    plain = inst.replace(requests=tuple(Request(r.id, r.arrival, r.prompt, r.output)
                                        for r in inst.requests))
    with pytest.raises(LNSError, match="prefix reuse"):
        check_supported(plain, Schedule.from_dict({"batches": [
            {"entries": [["a", 5]]}, {"entries": [["a", 1], ["b", 3]], "hits": [["b", 2]]}]}))
    check_supported(plain)  # no ids, no schedule: nothing to refuse


def test_cli_improve_refuses_prefix_ids_before_the_start_schedule(tmp_path, capsys):
    from handworked import shared_instance

    path = tmp_path / "shared.json"
    shared_instance().save(path)
    assert main(["improve", str(path), "--from", "no-such-policy"]) == 2
    err = capsys.readouterr().err.strip()
    assert "prefix reuse is not supported" in err and "\n" not in err  # not the --from error
