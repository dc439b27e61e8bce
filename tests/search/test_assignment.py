"""The cluster assignment search (optsched/search/assignment.py) and ``optsched improve`` on a
cluster instance."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from cli_helpers import one_line_error, run_cli
from cluster_kit import engine_of, replicas

from optsched.cluster import default_link, disaggregate, simulate
from optsched.cluster.replicas import merge
from optsched.cost import UnitCost
from optsched.evaluation import evaluate
from optsched.instance import Cluster, Engine, Instance, Limits, Request
from optsched.policies import get_spec
from optsched.schedule import Schedule
from optsched.search.assignment import (
    AssignmentOptions,
    AssignmentSearchError,
    assignment_of,
    engine_times,
    improve_assignment,
    objective_of,
    simulate_engine,
)

SARATHI = get_spec("sarathi")


def make():
    return SARATHI.make()


# Unit time (every batch takes 1), C = 10, sarathi (decode priority, chunked prefill, FCFS):
# a and c are long prompts (I = 20, O = 1: two full batches each), b and d short (I = 1, O = 1),
# all arriving at 0 in the order a, b, c, d. Round robin sends a, c to engine 0 and b, d to
# engine 1. Engine 0 runs a(10), a(10), c(10), c(10): a done at 2, c at 4; engine 1 runs
# b(1) + d(1) once: both done at 1. Makespan 4. Moving c to engine 1 leaves a alone on engine 0
# (done at 2) and gives engine 1 b(1) + c(9), c(10), c(1) + d(1): b at 1, c and d at 3, so the
# makespan is 3. That is optimal: 42 prompt tokens at most 10 a batch need 5 batches, so one of
# the two engines runs at least 3.
LONG_ON_ONE = [("a", 0, 20, 1), ("b", 0, 1, 1), ("c", 0, 20, 1), ("d", 0, 1, 1)]


def _two_engines() -> Instance:
    return replicas(LONG_ON_ONE, R=2, M=100, C=10)


def test_round_robin_puts_both_long_prompts_on_one_engine_and_one_move_fixes_it():
    inst = _two_engines()
    rr = simulate(inst, make, "rr")
    assert engine_of(inst, rr) == {"a": "0", "b": "1", "c": "0", "d": "1"}
    assert evaluate(inst, rr).objective("makespan") == 4.0
    moved = merge(inst, [simulate_engine(inst, 0, [0], make),
                         simulate_engine(inst, 1, [1, 2, 3], make)])
    ev = evaluate(inst, moved)
    assert ev.feasible and ev.objective("makespan") == 3.0
    res = improve_assignment(inst, rr, make, "makespan", AssignmentOptions(max_moves=12))
    assert res.start_objective == 4.0 and res.objective == 3.0
    assert res.moves_accepted >= 1 and res.method == "moves"
    assert evaluate(inst, res.schedule).objective("makespan") == 3.0


def test_re_simulating_a_routers_assignment_gives_the_routers_schedule():
    # each engine driven alone by simulate_engine must run what run_replicas ran on it
    inst = _random_cluster(np.random.default_rng(5), R=3)
    for router in ("rr", "lor"):
        sched = simulate(inst, make, router)
        a = assignment_of(inst, sched)
        again = merge(inst, [simulate_engine(inst, k, np.flatnonzero(a == k).tolist(), make)
                             for k in range(3)])
        assert again.to_dict() == sched.to_dict()


@pytest.mark.parametrize("seed", range(3))
def test_the_objective_from_engine_times_is_the_evaluators(seed):
    # the search scores candidates from the engines' batches; the evaluator must agree
    inst = _random_cluster(np.random.default_rng(10 + seed), R=3)
    sched = simulate(inst, make, ("rr", "lor", "p2c")[seed])
    a = assignment_of(inst, sched)
    first, comp = np.full(inst.n, np.nan), np.full(inst.n, np.nan)
    for k in range(3):
        reqs = np.flatnonzero(a == k).tolist()
        first[reqs], comp[reqs] = engine_times(inst, simulate_engine(inst, k, reqs, make), reqs)
    ev = evaluate(inst, sched)
    for kind in ("makespan", "total-latency", "mean-ttft", "p99-ttft"):
        assert objective_of(inst, first, comp, kind) == pytest.approx(ev.objective(kind),
                                                                       rel=1e-12, abs=1e-12)


def _random_cluster(rng: np.random.Generator, R: int) -> Instance:
    n = int(rng.integers(4, 9))
    reqs = [(f"r{i}", float(rng.integers(0, 6)), int(rng.integers(1, 25)), int(rng.integers(1, 6)))
            for i in range(n)]
    # the last engine is smaller and slower-batched than the others: engines may differ
    engines = tuple(Engine(str(k)) for k in range(R - 1)) + (Engine(str(R - 1),
                                                                  limits=Limits(40, 8)),)
    return Instance("rand", Limits(60, 16), UnitCost(), tuple(Request(*r) for r in reqs),
                    cluster=Cluster(engines))


@pytest.mark.parametrize("seed", range(4))
def test_never_worse_than_the_start_and_the_result_replays_feasible(seed):
    rng = np.random.default_rng(seed)
    inst = _random_cluster(rng, R=2 + seed % 2)
    objective = ("total-latency", "makespan", "mean-ttft", "total-latency")[seed]
    start = simulate(inst, make, ("rr", "lor", "least-kv", "p2c")[seed])
    res = improve_assignment(inst, start, make, objective,
                             AssignmentOptions(seed=seed, max_moves=6))
    ev = evaluate(inst, res.schedule)
    assert ev.feasible, ev.violations[:1]
    assert ev.objective(objective) == res.objective
    assert res.objective <= evaluate(inst, start).objective(objective) == res.start_objective
    assert res.moves_tried <= 6 and res.moves_accepted <= res.moves_tried


def test_an_infeasible_start_is_refused():
    inst = _two_engines()
    bad = Schedule.from_dict({"batches": [{"entries": [["a", 20]], "engine": "0"}]})
    with pytest.raises(AssignmentSearchError, match="infeasible"):
        improve_assignment(inst, bad, make, "makespan", AssignmentOptions(max_moves=1))


def test_cli_improves_a_cluster_and_writes_the_schedule(capsys, tmp_path):
    f, out = tmp_path / "c.json", tmp_path / "s.json"
    _two_engines().save(f)
    rc, stdout, _ = run_cli(capsys, "improve", str(f), "--from", "rr", "--policy", "sarathi",
                            "--objective", "makespan", "--max-moves", "12", "--json",
                            "-o", str(out))
    assert rc == 0
    doc = json.loads(stdout)
    assert doc["start_objective"] == 4.0 and doc["objective"] == 3.0 and doc["feasible"]
    inst = Instance.load(f)
    assert evaluate(inst, Schedule.load(out)).objective("makespan") == 3.0


@pytest.mark.parametrize("case,match", [("pd", "roles ['decode', 'prefill']"),
                                        ("router", "neither a router"),
                                        ("policy-on-plain", "apply to a cluster instance")])
def test_cli_bad_input_is_one_line_exit_2(capsys, tmp_path, case, match):
    f = tmp_path / "c.json"
    inst = _two_engines()
    if case == "pd":
        plain = inst.replace(cluster=None)
        inst = disaggregate(plain, 1, 1, default_link(plain, bytes_per_token=1.0))
    if case == "policy-on-plain":
        inst = inst.replace(cluster=None)
    inst.save(f)
    start = "nosuchrouter" if case == "router" else "fcfs" if case == "policy-on-plain" else "rr"
    one_line_error(capsys, "improve", str(f), "--from", start, "--policy", "sarathi",
                   match=match)


def test_block_ids_on_a_cluster_are_refused_in_one_line():
    from optsched.search.assignment import AssignmentSearchError, check_cluster_supported

    inst = _two_engines()
    reqs = tuple(dataclasses.replace(r, prefix=(1,)) if r.prompt > 4 else r for r in inst.requests)
    with pytest.raises(AssignmentSearchError, match="prefix block ids"):
        check_cluster_supported(inst.replace(requests=reqs))
