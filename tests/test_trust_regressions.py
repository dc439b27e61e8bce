"""Issue 30: no silent wrong answers, and exit codes that mean one thing.

Each test here failed on the code before the fix (a silent difference, a traceback or an exit
code that said the opposite of what happened) and passes after it.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from optsched.cli import main
from optsched.cost import DEFAULT_PRESET, KSWAP_DEFAULT, RHO_DEFAULT, LinearCost, UnitCost, preset
from optsched.errors import InstanceError, ScheduleFormatError
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies import Plan, Policy, simulate
from optsched.policies.registry import PolicyError, SimulationError
from optsched.schedule import Schedule
from optsched.workloads.traces import load_trace_instance

ROOT = Path(__file__).resolve().parents[1]
GOOD = ROOT / "instances" / "arrivals-unit-3.json"
N40 = ROOT / "instances" / "evidence" / "online-paper-n40-s1.json"


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    rc = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def one_line_error(capsys, *argv, match: str) -> str:
    rc, out, err = run_cli(capsys, *argv)
    assert rc == 2, (rc, err)
    assert "Traceback" not in err and out == "", err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and match in lines[0], err
    return lines[0]


def azure_csv(path: Path, rows: list[tuple[str, int, int]]) -> Path:
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                    + "".join(f"{t},{i},{o}\n" for t, i, o in rows))
    return path


# -- 1. one default everywhere ------------------------------------------------------------
def test_trace_instance_from_python_has_the_cli_cost_model(tmp_path, capsys):
    """Before: ``load_trace_instance`` without a cost model built a unit-cost instance (one
    time unit per batch) while the CLI used the default preset on the same trace."""
    csv = azure_csv(tmp_path / "t.csv", [("2023-11-16 18:15:46.0", 50, 5),
                                          ("2023-11-16 18:15:46.5", 60, 4)])
    lim = Limits(kv_capacity=1000, max_batch_tokens=512)
    py = load_trace_instance(csv, lim)
    assert py.cost_model == preset(DEFAULT_PRESET)
    rc, _, err = run_cli(capsys, "generate", "azure", "--trace", csv, "--kv-capacity", 1000,
                         "--max-batch-tokens", 512, "-o", tmp_path / "cli.json")
    assert rc == 0, err
    cli = Instance.load(tmp_path / "cli.json")
    assert cli.cost_model == py.cost_model and cli.requests == py.requests


def test_instance_json_without_cost_model_is_refused():
    """Before: a missing ``cost_model`` silently meant unit time (semantics section 2:
    missing fields are refused)."""
    d = json.loads(GOOD.read_text())
    del d["cost_model"]
    with pytest.raises(InstanceError, match="missing field 'cost_model'"):
        Instance.from_dict(d)


@pytest.mark.parametrize("cm", [preset(DEFAULT_PRESET), LinearCost(k0=1.0), UnitCost()])
def test_instance_json_states_kswap_and_rho(cm):
    """Before: ``kswap``/``rho`` equal to the code's defaults were left out, so a saved
    instance's swap and hidden-cache numbers depended on the version that read it."""
    inst = Instance("x", Limits(16, 16), cm, (Request("a", 0.0, 2, 2),))
    d = inst.to_dict()["cost_model"]
    assert d["kswap"] == cm.kswap and d["rho"] == cm.rho
    if isinstance(cm, LinearCost) and cm.preset is None:
        assert (d["kswap"], d["rho"]) == (KSWAP_DEFAULT, RHO_DEFAULT)
    assert Instance.from_dict(json.loads(inst.to_json())) == inst


def _other_arrivals(tmp_path) -> Path:
    d = json.loads(GOOD.read_text())
    d["requests"][1]["arrival"] = 2.0
    f = tmp_path / "other.json"
    f.write_text(json.dumps(d))
    return f


@pytest.mark.parametrize("command, suffix", [("validate", ".json"), ("evaluate", ".json"),
                                             ("validate", ".npz")])
def test_schedule_replayed_on_another_instance_is_flagged(tmp_path, capsys, command, suffix):
    """Before: a schedule file carried nothing tying it to its instance; replayed on one
    with other arrivals it was "feasible" with new metrics and no word."""
    sched = tmp_path / f"s{suffix}"
    rc, _, err = run_cli(capsys, "simulate", GOOD, "--policy", "fcfs", "-o", sched)
    assert rc == 0, err
    tag = Schedule.load(sched).instance_tag
    assert tag is not None and tag[0] == "arrivals-unit-3" and len(tag[1]) == 64
    rc, _, err = run_cli(capsys, command, GOOD, sched)
    assert "differ" not in err
    other = _other_arrivals(tmp_path)
    rc, out, err = run_cli(capsys, command, other, sched, "--json")
    assert "warning:" in err and "differs" in err
    assert json.loads(out)["instance_check"]["matches"] is False


def test_compare_flags_a_schedule_of_another_instance(tmp_path, capsys):
    sched = tmp_path / "s.json"
    assert run_cli(capsys, "simulate", GOOD, "--policy", "fcfs", "-o", sched)[0] == 0
    rc, _, err = run_cli(capsys, "compare", _other_arrivals(tmp_path), "--schedule",
                         f"mine={sched}", "--no-gantt", "-o", tmp_path / "rep")
    assert "warning:" in err and "mine" in err and "differs" in err
    rep = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert any("differs" in n for n in rep["notes"])


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
    assert a.status == b.status == "optimal", (a.status, a.notes)
    assert a.evaluation.feasible
    shift = off if objective == "makespan" else 0.0
    assert math.isclose(a.objective, b.objective + shift, rel_tol=1e-12, abs_tol=1e-6)
    assert any("shifted" in n for n in a.notes)


def test_duplicate_keys_are_refused(tmp_path):
    """Before: the last of two equal keys won, in instance and schedule files alike."""
    text = GOOD.read_text().replace('"kv_capacity": 8', '"kv_capacity": 8, "kv_capacity": 9')
    with pytest.raises(InstanceError, match="duplicate key 'kv_capacity'"):
        Instance.from_json(text)
    f = tmp_path / "s.json"
    f.write_text('{"batches": [{"entries": [["a", 2]], "entries": [["a", 1]]}]}')
    with pytest.raises(ScheduleFormatError, match="duplicate key 'entries'"):
        Schedule.load(f)


def test_duplicate_keys_in_a_sweep_spec_are_named(tmp_path):
    from optsched.sweep.spec import SpecError, parse_spec

    with pytest.raises(SpecError, match="duplicate key 'name'"):
        parse_spec('[sweep]\nname = "a"\nname = "b"\n')


# -- a policy's plan is checked -----------------------------------------------------------
class _Greedy(Policy):
    """Everything that has arrived, whole, in one batch (instances here fit in memory)."""

    tokens_as = staticmethod(lambda c: c)

    def bind(self, view):
        super().bind(view)
        self.live: list[int] = []

    def on_arrivals(self, idx):
        self.live += idx

    def next_batch(self):
        if not self.live:
            return None
        v = self.view
        return Plan(self.live, [self.tokens_as(int(v.S[i] - v.m[i])) for i in self.live], [])

    def on_batch_end(self, plan, finished):
        self.live = [i for i in self.live if i not in set(finished.tolist())]


class Fractional(_Greedy):
    tokens_as = staticmethod(lambda c: c + 0.5)


class ReturnsTuple(_Greedy):
    def next_batch(self):
        plan = super().next_batch()
        return None if plan is None else (plan.req, plan.tokens, plan.evict)


class ForgetsSuperBind(_Greedy):
    def bind(self, view):
        self.live = []


class NotSubclassed:
    def bind(self, view):
        self.view = view

    def on_arrivals(self, idx):
        pass

    def next_batch(self):
        return None

    def on_batch_end(self, plan, finished):
        pass


def _tiny() -> Instance:
    return Instance("t", Limits(64, 64), UnitCost(), (Request("a", 0.0, 16, 3),))


@pytest.mark.parametrize("policy, match", [
    (Fractional(), "batch 0: tokens of request 'a' must be integers, got 16.5"),
    (ReturnsTuple(), "batch 0: next_batch returned a tuple, not a Plan"),
    (ForgetsSuperBind(), "super().bind(view)"),
])
def test_policy_mistakes_are_one_line_errors(policy, match):
    """Before: 16.5 tokens were floored to 16 without a word; a tuple or a forgotten
    ``super().bind`` ended in a traceback inside the simulator."""
    policy.name = "mine"
    with pytest.raises(SimulationError, match="policy 'mine'") as e:
        simulate(_tiny(), policy)
    assert match in str(e.value) and "\n" not in str(e.value)


def test_a_class_that_is_not_a_policy_is_refused():
    with pytest.raises(PolicyError, match="not a Policy subclass"):
        simulate(_tiny(), NotSubclassed())  # type: ignore[arg-type]


USER_POLICIES = '''
from optsched.policies import Plan, Policy

class Fractional(Policy):
    def bind(self, view):
        super().bind(view)
        self.live = []
    def on_arrivals(self, idx):
        self.live += idx
    def next_batch(self):
        v = self.view
        return Plan(self.live, [int(v.S[i] - v.m[i]) + 0.5 for i in self.live], []) if self.live else None
    def on_batch_end(self, plan, finished):
        self.live = [i for i in self.live if i not in set(finished.tolist())]

class NoHook(Policy):
    def next_batch(self):
        return None
'''


@pytest.mark.parametrize("name, match", [
    ("Fractional", "must be integers"),
    ("NoHook", "does not define on_arrivals, on_batch_end"),
])
def test_user_policy_mistakes_exit_2_from_the_cli(tmp_path, capsys, name, match):
    f = tmp_path / "mine.py"
    f.write_text(USER_POLICIES)
    one_line_error(capsys, "simulate", GOOD, "--policy", f"{f}:{name}", match=match)


def test_policy_file_without_class_suggests_the_form(tmp_path, capsys):
    f = tmp_path / "mine.py"
    f.write_text(USER_POLICIES)
    line = one_line_error(capsys, "simulate", GOOD, "--policy", str(f), match=f"{f}:")
    assert "Fractional" in line and "NoHook" in line


def test_vllm_says_when_it_must_chunk_a_prompt(capsys):
    """Before: ``vllm`` (no chunked prefill) chunked a prompt longer than C in silence."""
    inst = Instance("long", Limits(64, 8), UnitCost(), (Request("a", 0.0, 20, 2),))
    with pytest.warns(UserWarning, match="vllm: 1 prompt.* longer than max_batch_tokens C = 8"):
        simulate(inst, "vllm")
    f = GOOD.parent / "arrivals-unit-3.json"  # C = 8 there; prompts of 2 fit: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        simulate(Instance.load(f), "vllm")


# -- 3. exit codes ---------------------------------------------------------------------------
@pytest.mark.parametrize("text, match", [
    ("[" * 1000 + "]" * 1000, "nested"),
    ('{"a":' * 1000 + "1" + "}" * 1000, "nested"),
    ("", "empty"),
])
def test_unparsable_instance_files_exit_2(tmp_path, capsys, text, match):
    f = tmp_path / "i.json"
    f.write_text(text)
    one_line_error(capsys, "info", f, match=match)


def test_header_only_trace_exits_2(tmp_path, capsys):
    csv = azure_csv(tmp_path / "t.csv", [])
    one_line_error(capsys, "simulate", "--trace", csv, "--policy", "vllm", "--kv-capacity",
                   1000, "--max-batch-tokens", 100, match="no data rows")


def test_lone_surrogate_in_a_request_id_exits_2(tmp_path, capsys):
    f = tmp_path / "i.json"
    f.write_text(GOOD.read_text().replace('"id": "a"', '"id": "\\ud800"'))
    one_line_error(capsys, "info", f, match="field 'id'")


@pytest.mark.parametrize("raw", [b"\xff\xfe{\x00}\x00", b"\x00\x01\x02"])
def test_bad_encodings_exit_2(tmp_path, capsys, raw):
    f = tmp_path / "s.json"
    f.write_bytes(raw)
    one_line_error(capsys, "validate", GOOD, f, match=str(f))


@pytest.mark.parametrize("value, field", [("NaN", "arrival"), ("Infinity", "prompt"),
                                          ("-Infinity", "k0")])
def test_nan_and_infinity_name_the_field(tmp_path, capsys, value, field):
    d = json.loads(GOOD.read_text())
    d["cost_model"] = {"kind": "linear", "k0": 1.0}
    target = d["cost_model"] if field == "k0" else d["requests"][1]
    target[field] = "@@"
    f = tmp_path / "i.json"
    f.write_text(json.dumps(d).replace('"@@"', value))
    line = one_line_error(capsys, "info", f, match=field)
    assert value.lstrip("-") in line


def test_at_most_negative_is_refused(capsys):
    """Before: ``--at-most -1 --than vllm`` was accepted and answered "infeasible" (exit 1)."""
    one_line_error(capsys, "solve", GOOD, "--at-most", "-1", "--than", "vllm",
                   match="--at-most")


def test_solve_with_a_fallback_and_a_bound_exits_0(capsys):
    """Before: a skipped model exited 1 ("no solution") though a schedule and a certified
    bound existed."""
    rc, out, err = run_cli(capsys, "solve", N40, "--time-limit", 2, "--json")
    d = json.loads(out)
    assert d["fallback"] is not None and d["lower_bound"]["value"] > 0
    assert rc == 0, err


def test_compare_with_the_exact_model_skipped_exits_0(tmp_path, capsys):
    rc, out, err = run_cli(capsys, "compare", N40, "--policies", "vllm", "--optimal",
                           "--time-limit", 2, "--no-gantt", "-o", tmp_path / "rep")
    assert "skipped" in out
    assert rc == 0, err


def test_an_infeasible_schedule_still_exits_1(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"batches": [{"entries": [["a", 2], ["b", 2], ["c", 2]]}]}))
    rc, _, err = run_cli(capsys, "validate", GOOD, f)
    assert rc == 1 and "Traceback" not in err


def test_plan_with_numpy_integer_tokens_is_accepted():
    """Integer-valued numpy arrays are integers: the check refuses only fractions."""
    class NumpyTokens(_Greedy):
        tokens_as = staticmethod(lambda c: np.int32(c))

    p = NumpyTokens()
    p.name = "np"
    assert simulate(_tiny(), p).n_batches >= 1


# -- 5. the policy API page ----------------------------------------------------------------
def test_the_worked_example_of_docs_policies_runs(tmp_path, capsys):
    """docs/policies.md's example, cut from the page, runs from a file as --policy x.py:Class
    and its schedule is feasible (the evaluator's verdict)."""
    page = (ROOT / "docs" / "policies.md").read_text()
    code = page.split("```python\n", 1)[1].split("```", 1)[0]
    f = tmp_path / "shortest.py"
    f.write_text(code)
    rc, out, err = run_cli(capsys, "simulate", GOOD, "--policy", f"{f}:ShortestPromptFirst",
                           "--param", "chunk=1", "--json")
    assert rc == 0, err
    assert json.loads(out)["evaluation"]["feasible"] is True
    # the one Policy subclass in the file is picked without :Class
    rc, out, err = run_cli(capsys, "simulate", GOOD, "--policy", f, "--json")
    assert rc == 0, err


def test_compare_with_a_broken_user_policy_exits_2(tmp_path, capsys):
    """Before: the 2.5 tokens were floored in silence and compare exited 0 with the floored
    schedule; a policy that failed exited 1, the code for "infeasible"."""
    f = tmp_path / "mine.py"
    f.write_text(USER_POLICIES)
    rc, out, err = run_cli(capsys, "compare", GOOD, "--policies", f"vllm,{f}:Fractional",
                           "--no-gantt", "-o", tmp_path / "rep")
    assert rc == 2, err
    assert "batch 0: tokens of request 'a' must be integers, got 2.5" in out


def test_epoch_arrivals_keep_the_bound_tight():
    """Before: the bound's relative safety margin (1e-9) was taken of the epoch time itself,
    1.7 s below the optimum at t = 1.7e9 while the whole schedule lasts 0.04 s. Shifted, the
    bound is the shifted instance's plus the offset, and still below the optimum."""
    from optsched.solving import lower_bound

    base = Instance.load(GOOD).replace(cost_model=preset(DEFAULT_PRESET))
    off = 1.7e9
    epoch = base.replace(requests=tuple(
        Request(r.id, off + r.arrival * 0.01, r.prompt, r.output) for r in base.requests))
    zero = base.replace(requests=tuple(
        Request(r.id, r.arrival * 0.01, r.prompt, r.output) for r in base.requests))
    a = lower_bound(epoch, "makespan", time_limit=10).value
    b = lower_bound(zero, "makespan", time_limit=10).value
    assert abs(a - (b + off)) < 1e-5  # a few ulps of 1.7e9 (2.4e-7 each)
    best = evaluate(epoch, simulate(epoch, "vllm")).objective("makespan")
    assert a <= best


def test_shipped_instance_files_state_kswap_and_rho():
    """Before: the shipped instance files (optsched/data, instances/) left ``kswap`` and
    ``rho`` out, so their swap and hidden-cache numbers were whatever the reading code's
    defaults were. Each file now states both, and the writer reproduces it exactly (the
    file is what ``Instance.save`` writes, so nothing else in it is left to a default)."""
    files = [p for p in [*(ROOT / "optsched" / "data").glob("*.json"),
                         *(ROOT / "instances").rglob("*.json")]
             if not p.name.endswith(".schedules.json") and p.name != "manifest.json"]
    assert len(files) >= 12
    for p in files:
        text = p.read_text()
        cm = json.loads(text)["cost_model"]
        assert "kswap" in cm and "rho" in cm, p
        assert Instance.load(p).to_json() == text.rstrip("\n"), p
