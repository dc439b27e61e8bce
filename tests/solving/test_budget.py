"""--time-limit is a budget for the whole command: the model is sized before
it is built, and when it cannot fit, solve/compare say so and answer with the certified
bound and the best policy. Behaviour only, no wall-clock asserts (speed lives in benchmarks/)."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

import numpy as np
import pytest

import optsched.plot  # noqa: F401 - loaded up front: compare's budget counts its import
from optsched.cli import main
from optsched.cost import preset
from optsched.instance import Instance, Limits, Request
from optsched.solve_types import relative_gap
from optsched.solving.budget import ModelEstimate, estimate_model, plan_solve, upper_gap


def _trace_like(n=20, seed=0) -> Instance:
    rng = np.random.default_rng(seed)
    reqs = tuple(Request(f"r{i}", float(i) * 0.3, int(rng.integers(50, 1500)),
                         int(rng.integers(10, 170))) for i in range(n))
    return Instance("trace-like", Limits(kv_capacity=4000, max_batch_tokens=4096),
                    preset("infermax-llama2-7b-a100"), reqs)


def test_plan_skips_a_model_that_cannot_fit_and_sizes_the_solver_time():
    big = ModelEstimate("infermax", 10**6, 3 * 10**6, 59.5, "a model")
    # 60 s left: building takes 59.5, leaving the solver less than its one-second minimum
    assert not plan_solve(big, 60.0).build and "model skipped" in plan_solve(big, 60.0).note
    ok = plan_solve(big, 100.0)
    assert ok.build and ok.solver_seconds == 100.0 - 59.5
    assert plan_solve(None, 10.0).build  # unknown size: built, solver gets the time left


def test_estimate_grows_with_requests_and_batches():
    inst = _trace_like()
    small = estimate_model(inst.replace(requests=inst.requests[:5]), "infermax", "makespan",
                           {}, 100, None)
    large = estimate_model(inst, "infermax", "makespan", {}, 1000, None)
    assert small is not None and large is not None
    assert large.variables > 10 * small.variables and large.seconds > small.seconds
    assert estimate_model(inst, "exhaustive", "makespan", {}, 100, None) is None


def test_upper_gap():
    assert upper_gap(10.0, 9.0) == 0.1
    assert upper_gap(None, 9.0) is None
    # the one gap formula (solve_types.relative_gap): (10 - 9) / 10 = 0.1 either way
    assert upper_gap(10.0, 9.0) == relative_gap(10.0, 9.0)
    # a bound at or above the objective (tolerance): no room left, 0 (relative_gap says 0.1)
    assert upper_gap(10.0, 11.0) == 0.0 and relative_gap(10.0, 11.0) == 0.1
    # a zero objective: gap 0 when the bound allows it, undefined otherwise
    assert upper_gap(0.0, 0.0) == 0.0 and upper_gap(0.0, 1.0) is None
    assert upper_gap(10.0, float("inf")) is None


def test_solve_with_a_small_time_limit_falls_back(tmp_path, capsys):
    path = tmp_path / "t.json"
    _trace_like().save(path)
    rc = main(["solve", str(path), "--time-limit", "2", "--json"])
    d = json.loads(capsys.readouterr().out)
    # the fallback schedule with a certified bound is an answer: exit 0 (it was 1)
    assert rc == 0 and d["status"] == "no_solution"
    assert d["budget"]["model_built"] is False and "model skipped" in d["budget"]["note"]
    assert d["fallback"]["objective"] >= d["lower_bound"]["value"] > 0
    assert d["gap_to_lower_bound"] == d["fallback"]["gap"] is not None


def test_compare_with_a_small_time_limit_says_the_model_was_skipped(tmp_path, capsys):
    path = tmp_path / "t.json"
    _trace_like().save(path)
    out = tmp_path / "rep"
    # 6 s: the policies get 60% (on a machine at load 9 they need ~1 s of it); the model
    # (~47 x 20 x J variables, J in the hundreds) needs far more than the rest
    main(["compare", str(path), "--policies", "vllm,sarathi", "--optimal", "--time-limit", "6",
          "--no-gantt", "-o", str(out)])
    printed = capsys.readouterr().out
    assert "model skipped" in printed
    rep = json.loads((out / "report.json").read_text())
    assert rep["reference"]["kind"] == "bound" and "certified lower bound" in rep["reference"]["source"]
    policy_rows = [r for r in rep["rows"] if r["kind"] == "policy"]
    assert all(r["gap"] is not None and r["gap"] >= 0 for r in policy_rows)
    assert [r["status"] for r in rep["rows"] if r["kind"] == "optimum"] == ["skipped"]
    md = (out / "report.md").read_text()
    assert "no gaps" not in md and "certified lower bound" in md


def test_compare_without_optimal_still_states_a_bound(tmp_path, capsys):
    out = tmp_path / "rep"
    main(["compare", "tiny", "--policies", "vllm", "--no-gantt", "-o", str(out)])
    rep = json.loads((out / "report.json").read_text())
    assert rep["lower_bound"]["value"] > 0 and rep["rows"][0]["gap"] is not None


def test_a_small_model_is_built_with_little_time_left():
    """tiny's fill model (~105 variables) was skipped by ``solve tiny --time-limit 10`` on a
    loaded machine once start-up and warm start had left 2 s (2 - 1 s fixed overhead - 0.5 s
    reserve < the 1 s minimum); a small model now gets half of what is left."""
    small = ModelEstimate("infermax", 105, 105, 1.0 + 5e-5 * 105, "a small model")
    plan = plan_solve(small, 1.5)
    assert plan.build and plan.solver_seconds == 0.75
    assert not plan_solve(small, 0.4).build  # below SMALL_MIN_SECONDS: skipped


def within(limit: float) -> float:
    """The most a run with ``--time-limit limit`` may take (10% + 1 s)."""
    return 1.1 * limit + 1.0


def allowed(limit: float, wall: float, cpu: float) -> float:
    """:func:`within` on a machine that ran the command ``stretch = wall / cpu`` times slower
    than its CPU time (at least 1): ``limit + (0.1 limit + 1) * stretch``. The limit is a wall
    clock the command watches, so it is not stretched; the margin is what the command computes
    after its last check of that clock (writing the report, exiting), CPU work whose wall time
    is stretched like the rest of the run. An overrun of ``x`` CPU seconds after the deadline
    adds ``x * stretch`` of wall time, so it fails as soon as ``x > 0.1 limit + 1``, at any load
    (the overruns measured before were 3-130 s of CPU: model building, charts). A child using
    several threads has ``cpu > wall``; the stretch is then 1, the unloaded check."""
    stretch = max(1.0, wall / cpu) if cpu > 0 else 1.0
    return limit + (within(limit) - limit) * stretch


def cpu_seconds(who: int) -> float:
    """User + system CPU seconds of ``resource.RUSAGE_SELF`` or ``RUSAGE_CHILDREN`` so far (the
    children's include their own reaped children: a solver subprocess)."""
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def trace_like(n: int, seed: int = 0) -> Instance:
    """``n`` requests arriving every 0.3 s, prompts 50-1500 and outputs 10-170 tokens (the
    shape of the Azure conversation trace), M = 30,000, the Llama-2-7B preset: the policies
    take ~13,900 batches at n = 200, so the warm start alone took 10 s before."""
    rng = np.random.default_rng(seed)
    reqs = tuple(Request(f"r{i}", 0.3 * i, int(rng.integers(50, 1500)),
                         int(rng.integers(10, 170))) for i in range(n))
    return Instance(f"trace-like-{n}", Limits(kv_capacity=30000, max_batch_tokens=4096),
                    preset("infermax-llama2-7b-a100"), reqs)


def identical(n: int) -> Instance:
    """``n`` identical requests (I = 8, O = 4) at time 0, M = 1024: eq. G1 holds and the fill
    model fits, so ``bound``'s exact rung builds it (10.2 s at n = 400 with a 3 s limit)."""
    reqs = tuple(Request(f"r{i}", 0.0, 8, 4) for i in range(n))
    return Instance(f"identical-{n}", Limits(kv_capacity=1024, max_batch_tokens=4096),
                    preset("infermax-llama2-7b-a100"), reqs)


@pytest.fixture(scope="module")
def pycache(tmp_path_factory) -> None:
    """Warm the operating system's file cache with one run of each import path. Bytecode is
    compiled at install time (the Makefile's UV_COMPILE_BYTECODE, ``compileall optsched``),
    so the subprocesses read it as a user's would; an earlier version pointed them at an
    empty PYTHONPYCACHEPREFIX, which hides that bytecode and made the first command of a
    worker recompile numpy and matplotlib inside its time limit (46 s at T = 5 once)."""
    _run("--version")
    _run("plot", "--help")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "optsched", *args], capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=600)


@pytest.fixture
def timed_cli(pycache):
    """``timed_cli(*args)`` -> (wall seconds, seconds :func:`allowed` for that run, completed
    process) of ``optsched *args``; the CPU time is the child's (tests run one at a time in a
    process, so no other child is reaped meanwhile)."""
    def run(*args: str, limit: float) -> tuple[float, float, subprocess.CompletedProcess]:
        c0, t0 = cpu_seconds(resource.RUSAGE_CHILDREN), time.perf_counter()
        proc = _run(*args, "--time-limit", str(limit))
        took = time.perf_counter() - t0
        cpu = cpu_seconds(resource.RUSAGE_CHILDREN) - c0
        return took, allowed(limit, took, cpu), proc
    return run


def timed_call(fn, *args, limit: float, **kwargs):
    """``fn(*args, **kwargs)`` in this process -> (wall seconds, seconds :func:`allowed`,
    result); the CPU time is this process's (every thread)."""
    c0, t0 = cpu_seconds(resource.RUSAGE_SELF), time.perf_counter()
    out = fn(*args, **kwargs)
    took = time.perf_counter() - t0
    return took, allowed(limit, took, cpu_seconds(resource.RUSAGE_SELF) - c0), out


def test_solve_holds_its_limit_at_200_requests(tmp_path, timed_cli):
    path = tmp_path / "t.json"
    trace_like(200).save(path)
    took, most, proc = timed_cli("solve", str(path), "--objective", "total-latency", "--json",
                                 limit=5)
    assert took <= most, (took, most, proc.stderr[-2000:])
    d = json.loads(proc.stdout)
    assert d["budget"]["model_built"] is False and "model skipped" in d["budget"]["note"]
    assert "warm start:" in proc.stderr  # a progress line per phase, not a TTY


def test_solve_holds_its_limit_at_1000_requests(tmp_path, timed_cli):
    path = tmp_path / "t.json"
    trace_like(1000).save(path)
    took, most, proc = timed_cli("solve", str(path), "--objective", "total-latency", "--json",
                                 limit=5)
    assert took <= most, (took, most, proc.stderr[-2000:])
    assert json.loads(proc.stdout)["lower_bound"]["value"] > 0


def test_compare_holds_its_limit_at_1000_requests(tmp_path, timed_cli):
    path = tmp_path / "t.json"
    trace_like(1000).save(path)
    took, most, proc = timed_cli("compare", str(path), "--policies", "vllm,sarathi",
                                 "--optimal", "--objective", "total-latency",
                                 "-o", str(tmp_path / "rep"), limit=5)
    assert took <= most, (took, most, proc.stderr[-2000:])
    rep = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert rep["lower_bound"]["value"] > 0  # the bound is always there


def test_bound_holds_its_limit_on_identical_requests(tmp_path, timed_cli):
    path = tmp_path / "t.json"
    identical(400).save(path)
    took, most, proc = timed_cli("bound", str(path), "--json", limit=3)
    assert took <= most, (took, most, proc.stderr[-2000:])
    assert json.loads(proc.stdout)["value"] > 0


def test_improve_holds_its_limit_at_200_requests(tmp_path, timed_cli):
    path = tmp_path / "t.json"
    trace_like(200).save(path)
    took, most, proc = timed_cli("improve", str(path), "--from", "vllm", "--objective",
                                 "total-latency", "--json", limit=5)
    assert took <= most, (took, most, proc.stderr[-2000:])


def test_python_solve_sizes_the_model_like_the_cli():
    """``solve(..., SolveOptions(time_limit=5))`` on 200 trace-like requests: the Big-M model
    would have ~1.3e8 variables (47 per request and batch slot, J ~ 13,900); it is skipped
    and the report says so, instead of being built (126 s at 4.5M variables before)."""
    from optsched.formulations import SolveOptions
    from optsched.solving import solve

    inst = trace_like(200)
    took, most, rep = timed_call(solve, inst, "infermax", "total-latency", limit=5,
                                 options=SolveOptions(time_limit=5, progress=False))
    assert took <= most, (took, most)
    assert rep.status == "no_solution" and any("model skipped" in n for n in rep.notes)


def test_sweep_bound_cell_holds_its_limit():
    from optsched.sweep.methods import run_bound
    from optsched.sweep.spec import MethodSpec

    method = MethodSpec("bound", "best", "best", "makespan", (("time_limit", 3.0),))
    took, most, out = timed_call(lambda: run_bound(identical(400), method), limit=3)
    assert took <= most, (took, most)
    assert out["bound"] > 0


@pytest.mark.slow
def test_solve_uses_its_budget_for_lns_when_the_model_is_skipped(tmp_path, timed_cli):
    """T = 30 on 200 requests: the model is skipped and the time left goes to LNS, whose
    schedule is never worse than the best policy's."""
    path = tmp_path / "t.json"
    trace_like(200).save(path)
    took, most, proc = timed_cli("solve", str(path), "--objective", "total-latency", "--json",
                                 limit=30)
    assert took <= most, (took, most, proc.stderr[-2000:])
    d = json.loads(proc.stdout)
    assert any("large-neighbourhood search" in n for n in d["notes"])
    fb = d["fallback"]  # the LNS schedule when it improved on the best policy
    assert fb["objective"] <= fb.get("start_objective", fb["objective"])


def test_compare_holds_its_limit_on_a_schedule_with_a_million_empty_batches(tmp_path,
                                                                              timed_cli):
    """vllm's schedule of ``tiny`` followed by 10^6 empty batches (84 s at T = 5 before: the
    charts of a million batches were drawn after the budget)."""
    from optsched.data import embedded_instance_path
    from optsched.policies import simulate
    from optsched.schedule import Schedule

    s = simulate(Instance.load(embedded_instance_path("tiny")), "vllm")
    empty = 10**6
    padded = Schedule(s.ids, np.concatenate([s.batch_ptr, np.full(empty, s.batch_ptr[-1])]),
                      s.entry_req, s.entry_tokens,
                      np.concatenate([s.evict_ptr, np.full(empty, s.evict_ptr[-1])]),
                      s.evict_req, np.concatenate([s.start, np.full(empty, np.nan)]))
    path = tmp_path / "empty.npz"
    padded.save(path)
    took, most, proc = timed_cli("compare", "tiny", "--schedule", f"padded={path}",
                                 "--policies", "vllm", "-o", str(tmp_path / "rep"), limit=5)
    assert took <= most, (took, most, proc.stderr[-2000:])
    rows = json.loads((tmp_path / "rep" / "report.json").read_text())["rows"]
    assert [r["label"] for r in rows] == ["vllm", "padded"]
