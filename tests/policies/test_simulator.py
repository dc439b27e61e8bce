"""Simulator semantics (arrival gating, time jumps, what a policy may see), the batch
pricer, the registry and the ``simulate`` / ``policies`` commands."""

from __future__ import annotations

import importlib
import json

import numpy as np
import pytest
from handworked import SWAP_ROUND_TRIP, swap_instance
from paths import SHARED_DATA

from optsched.cli import main
from optsched.cost import (
    PRESETS,
    LinearCost,
    UnitCost,
)
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies import (
    Plan,
    Policy,
    PolicyError,
    SimulationError,
    get_policy,
    list_policies,
    simulate,
)
from optsched.policies.simulator import batch_pricer
from optsched.schedule import Schedule

TRACE = SHARED_DATA / "traces" / "AzureLLMInferenceTrace_conv.csv"


def inst(reqs, M=100, C=100, cost=None):
    return Instance("t", Limits(M, C), cost or UnitCost(), tuple(reqs))


class Recorder(Policy):
    """Runs one request at a time (whole prompt, then decodes) and records what it saw."""

    def __init__(self):
        self.seen: list[tuple[int, float, float]] = []
        self.queue: list[int] = []
        self.outputs = None

    def bind(self, view):
        super().bind(view)
        self.outputs = view.known_output.copy()

    def on_arrivals(self, idx):
        for i in idx:
            self.seen.append((i, float(self.view.arrival[i]), self.view.now))
        self.queue.extend(idx)

    def next_batch(self):
        if not self.queue:
            return None
        i = self.queue[0]
        v = self.view
        return Plan([i], [int(v.S[i] - v.m[i])], [])

    def on_batch_end(self, plan, finished):
        if finished.size:
            self.queue = [i for i in self.queue if i not in set(finished.tolist())]


def test_arrival_gating_and_time_jump():
    i = inst([Request("a", 0, 1, 1), Request("b", 5, 1, 1), Request("c", 5.5, 1, 2)])
    p = Recorder()
    from optsched.policies import simulate_policy

    s = simulate_policy(i, p)
    # a policy sees a request only once its arrival has passed
    assert all(arr <= now for _, arr, now in p.seen)
    # b0 at 0 (a), idle until 5: b0 b at 5, c arrives during it, c at 6 and 7
    ev = evaluate(i, s)
    assert ev.feasible
    assert ev.batch_start.tolist() == [0, 5, 6, 7]
    assert ev.completion.tolist() == [1, 6, 8]


def test_idle_start_is_stated_when_the_batch_touches_no_new_arrival():
    # a policy that waits for a later arrival before running an earlier request
    class Lazy(Recorder):
        def next_batch(self):
            if self.view.now < 3:
                return None
            return super().next_batch()

    from optsched.policies import simulate_policy

    i = inst([Request("a", 0, 1, 1), Request("b", 3, 1, 1)])
    s = simulate_policy(i, Lazy())
    assert s.start[0] == 3  # stated, or the evaluator would run it at 0
    assert evaluate(i, s).completion.tolist() == [4, 5]


def test_policy_sees_predictions_never_outputs_unless_hypothetical():
    reqs = [Request("a", 0, 2, 5, predicted_output=3), Request("b", 0, 2, 4)]
    i = inst(reqs)
    from optsched.policies import simulate_policy

    p = Recorder()
    simulate_policy(i, p)
    assert p.outputs.tolist() == [3, -1]
    p = Recorder()
    p.hypothetical = True
    simulate_policy(i, p)
    assert p.outputs.tolist() == [5, 4]
    p = Recorder()
    p.output_fallback = True
    simulate_policy(i, p)
    assert p.outputs.tolist() == [3, 4]


def test_view_is_read_only():
    class Writer(Recorder):
        def next_batch(self):
            self.view.m[0] = 5
            return super().next_batch()

    from optsched.policies import UserPolicyError, simulate_policy

    # the write fails (ValueError: read-only), reported as the policy's own error
    with pytest.raises(UserPolicyError, match=r"next_batch\(\) raised ValueError.*batch 0"):
        simulate_policy(inst([Request("a", 0, 1, 1)]), Writer())


def test_simulator_rejects_plans_over_memory():
    class Greedy(Recorder):
        def next_batch(self):
            v = self.view
            live = [i for i in self.queue if v.m[i] < v.S[i]]
            return Plan(live, [int(v.S[i] - v.m[i]) for i in live], [])

    from optsched.policies import simulate_policy

    with pytest.raises(SimulationError, match="KV after the batch"):
        simulate_policy(inst([Request("a", 0, 3, 1), Request("b", 0, 3, 1)], M=5), Greedy())


def test_stalled_policy_is_an_error():
    class Never(Recorder):
        def next_batch(self):
            return None

    from optsched.policies import simulate_policy

    with pytest.raises(SimulationError, match="stalled"):
        simulate_policy(inst([Request("a", 0, 1, 1)]), Never())


def test_pricer_matches_the_cost_model():
    rng = np.random.default_rng(3)
    models = [PRESETS["infermax-llama2-7b-a100"], PRESETS["blis-llama3.1-8b-a100"],
              LinearCost(k0=1, k1=2, kpq=3, kpm=4, kdm=5, kpr=6, kdr=7, kpl=8, kpb=9, kdb=10),
              UnitCost()]
    for cm in models:
        price = batch_pricer(cm)
        for _ in range(50):
            n = int(rng.integers(1, 40))
            dec = rng.random(n) < (1.0 if rng.random() < 0.5 else 0.6)
            c = np.where(dec, 1, rng.integers(1, 500, n)).astype(np.int64)
            m = rng.integers(0, 5000, n).astype(np.int64)
            want = cm.batch_time(c, m, dec)
            assert price(c, m, dec, int(dec.sum())) == pytest.approx(want, rel=1e-12)


# -- registry -----------------------------------------------------------------------------
def test_registry_entries_are_documented():
    specs = list_policies()
    names = {s.name for s in specs}
    for want in ("vllm", "sarathi", "sarathi-pc", "sarathi-nocp", "vllm-hy", "sarathi-nohy",
                 "rank-org", "rank-i", "rank-o", "infermax", "fcfs", "mcsf", "alpha-greedy",
                 "alpha-beta-clearing"):
        assert want in names
        if want in ("vllm", "sarathi", "sarathi-pc", "sarathi-nocp", "vllm-hy", "sarathi-nohy"):
            assert f"{want}-ef" in names
    for s in specs:
        assert s.description and s.source
        # amin makes its interval predictions from the true lengths (optsched/policies/amin.py)
        knows_o = ("rank-o", "ecoserve-oracle", "ttft-first-sr", "amin",
                   # the theory policies that read true lengths (nested-wait: their distribution)
                   "gba", "sorted-f", "wait", "nested-wait",
                   # reads O for its peak reservations and P99 TBT allowances
                   "slo-park")
        assert s.hypothetical == (s.name.endswith("-ef") or s.name in knows_o)
    for mod in ("unified", "mcsf", "alpha", "simulator", "ecoserve", "predictors"):
        doc = importlib.import_module(f"optsched.policies.{mod}").__doc__
        assert doc and len(doc) > 500


def test_get_policy_is_fresh_and_checks_params():
    assert get_policy("sarathi") is not get_policy("sarathi")
    assert get_policy("sarathi").P == 512 and get_policy("sarathi", P=64).P == 64
    assert get_policy("vllm").P == 0
    with pytest.raises(PolicyError, match="unknown parameter 'Q'"):
        get_policy("vllm", Q=1)
    with pytest.raises(PolicyError, match="beta must be in \\(0, 1\\]"):
        get_policy("alpha-beta-clearing", beta=0)
    with pytest.raises(PolicyError, match="alpha must be a number"):
        get_policy("alpha-greedy", alpha="x")
    with pytest.raises(PolicyError, match="unknown policy 'nope'"):
        get_policy("nope")


def test_unified_scheduler_rejects_unknown_settings():
    from optsched.policies.unified import UnifiedScheduler

    with pytest.raises(PolicyError, match="order must be one of .*got 'fifo'"):
        UnifiedScheduler(order="fifo")
    with pytest.raises(PolicyError, match="decode_sort must be one of .*got 'm-desc'"):
        UnifiedScheduler(decode_sort="m-desc")
    with pytest.raises(PolicyError, match="key must be one of"):
        UnifiedScheduler(key="deadline")
    with pytest.raises(PolicyError, match="reserve must be one of"):
        UnifiedScheduler(reserve="all")


# -- CLI ------------------------------------------------------------------------------------
def test_cli_policies(capsys):
    assert main(["policies"]) == 0
    out = capsys.readouterr().out
    assert "vllm-ef [hypothetical" in out and "Table 1" in out
    assert main(["policies", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {d["name"] for d in data} == {s.name for s in list_policies()}


def test_cli_simulate_json_and_output(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert main(["simulate", "tiny", "--policy", "sarathi", "--json", "-o", str(out)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["policy"] == "sarathi"
    assert data["evaluation"]["feasible"] is True
    assert len(data["schedule"]["batches"]) == data["evaluation"]["metrics"]["batches"]
    assert main(["validate", "tiny", str(out)]) == 0


@pytest.mark.parametrize("args, msg", [
    (["--param", "Q=1"], "unknown parameter 'Q'"),
    (["--param", "P=abc"], "P must be an integer, got 'abc'"),
    (["--param", "P"], "expected key=value"),
])
def test_cli_bad_param_exits_2(args, msg, capsys):
    assert main(["simulate", "tiny", "--policy", "vllm", *args]) == 2
    assert msg in capsys.readouterr().err


@pytest.mark.skipif(not TRACE.exists(), reason="shared/data traces not available")
def test_cli_simulate_trace(capsys):
    rc = main(["simulate", "--trace", str(TRACE), "--limit", "150", "--kv-capacity", "100000",
               "--max-batch-tokens", "4096", "--policy", "vllm", "--json"])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert data["evaluation"]["metrics"]["requests"] == 150
    assert data["evaluation"]["feasible"]
    assert data["schedule"] is None and "--with-schedule" in data["schedule_omitted"]


@pytest.mark.parametrize("policy", ["vllm", "sarathi", "infermax", "mcsf", "alpha-greedy"])
def test_simulator_clock_equals_evaluator_batch_starts(policy):
    # online arrivals, linear cost: the time a policy plans a batch at is the time the
    # evaluator starts it (including after idle jumps)
    rng = np.random.default_rng(11)
    reqs = [Request(f"r{k}", float(rng.uniform(0, 30)), int(rng.integers(1, 300)),
                    int(rng.integers(1, 40))) for k in range(40)]
    i = Instance("clock", Limits(2000, 512), PRESETS["infermax-llama2-7b-a100"], tuple(reqs))
    p = get_policy(policy)
    starts = []
    inner = p.next_batch

    def spy():
        plan = inner()
        if plan is not None and (len(plan.req) or len(plan.evict)):
            starts.append(p.view.now)
        return plan

    p.next_batch = spy
    from optsched.policies import simulate_policy

    ev = evaluate(i, simulate_policy(i, p))
    assert ev.feasible
    np.testing.assert_allclose(ev.batch_start, starts, rtol=1e-9, atol=1e-9)


# -- a policy's plan is checked -----------------------------------------------------------
class Greedy(Policy):
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


class Fractional(Greedy):
    tokens_as = staticmethod(lambda c: c + 0.5)


class ReturnsTuple(Greedy):
    def next_batch(self):
        plan = super().next_batch()
        return None if plan is None else (plan.req, plan.tokens, plan.evict)


class ForgetsSuperBind(Greedy):
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


def tiny_instance() -> Instance:
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
        simulate(tiny_instance(), policy)
    assert match in str(e.value) and "\n" not in str(e.value)


def test_a_class_that_is_not_a_policy_is_refused():
    with pytest.raises(PolicyError, match="not a Policy subclass"):
        simulate(tiny_instance(), NotSubclassed())  # type: ignore[arg-type]


def test_plan_with_numpy_integer_tokens_is_accepted():
    """Integer-valued numpy arrays are integers: the check refuses only fractions."""
    class NumpyTokens(Greedy):
        tokens_as = staticmethod(lambda c: np.int32(c))

    p = NumpyTokens()
    p.name = "np"
    assert simulate(tiny_instance(), p).n_batches >= 1


class SwapOnce(Policy):
    """a prefills, is swapped out while b runs to completion, comes back and finishes."""

    def bind(self, view):
        super().bind(view)
        self.step = 0

    def on_arrivals(self, idx):
        pass

    def next_batch(self):
        self.step += 1
        plans = {
            1: Plan([0], [4], []),
            2: Plan([1], [4], [], swap_out=[0], swap_out_tokens=[4]),
            3: Plan([1], [1], []),
            4: Plan([0], [1], [], swap_in=[0]),
            5: Plan([0], [1], []),
        }
        return plans.get(self.step)

    def on_batch_end(self, plan, finished):
        pass


def test_simulator_applies_swaps_like_the_evaluator():
    s = simulate(swap_instance(), SwapOnce())
    assert s == Schedule.from_dict(SWAP_ROUND_TRIP)
    assert evaluate(swap_instance(), s).feasible


def test_simulator_refuses_swaps_without_host_memory():
    with pytest.raises(SimulationError, match="host KV 4 > host_capacity = 0"):
        simulate(swap_instance(host=None), SwapOnce())


BROKEN_POLICY = '''
from optsched.policies import Plan, Policy


class Breaks(Policy):
    """Prefills request 0 whole, then fails in next_batch at batch 2."""

    def bind(self, view):
        super().bind(view)
        self.calls = 0

    def on_arrivals(self, idx):
        pass

    def next_batch(self):
        self.calls += 1
        if self.calls == 3:
            return {}["missing"]
        return Plan([0], [1], [])

    def on_batch_end(self, plan, finished):
        pass
'''


def test_an_exception_in_a_users_policy_names_the_policy_hook_and_batch(tmp_path, capsys):
    """Before: "optsched simulate: internal error: KeyError: 'missing' (please report it)",
    exit 3, as if optsched had failed. The user's policy is input: exit 2, one line naming
    the policy, the hook and the batch (the third next_batch call builds batch 2)."""
    from cli_helpers import run_cli
    from paths import GOOD

    f = tmp_path / "mine.py"
    f.write_text(BROKEN_POLICY)
    rc, out, err = run_cli(capsys, "simulate", GOOD, "--policy", f"{f}:Breaks")
    assert rc == 2 and out == ""
    line = err.strip().splitlines()[-1]
    assert "internal error" not in err and "Traceback" not in err
    assert "Breaks" in line and "next_batch()" in line and "KeyError" in line
    assert "at batch 2" in line
