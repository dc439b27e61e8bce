"""Swap preemption (docs/semantics.md section 6): hand-worked pricing and KV accounting, the
schedule format's round trip, the simulator applying swaps, and formulations refusing what
they cannot represent. One test per violation code is in tests/test_evaluate.py."""

from __future__ import annotations

import pytest

from optsched.cost import KSWAP_DEFAULT, LinearCost, UnitCost, cost_model_from_dict, kswap_from_hardware
from optsched.errors import ScheduleFormatError
from optsched.evaluation import evaluate
from optsched.formulations.base import FormulationError
from optsched.instance import Instance, Limits, Request
from optsched.policies import Plan, Policy, SimulationError, simulate
from optsched.schedule import Schedule
from optsched.solving import solve


def _inst(cost=None, host=8, M=8, block=1):
    return Instance("t", Limits(kv_capacity=M, max_batch_tokens=8, host_capacity=host,
                                block_size=block),
                    cost or LinearCost(k0=1.0, kswap=0.5),
                    (Request("a", 0, 4, 3), Request("b", 0, 4, 2)))


#: a prefills, is swapped out whole while b runs, is swapped back in and finishes.
SWAP_ROUND_TRIP = {"batches": [
    {"entries": [["a", 4]]},
    {"entries": [["b", 4]], "swap_out": [["a", 4]]},
    {"entries": [["b", 1]]},
    {"entries": [["a", 1]], "swap_in": ["a"]},
    {"entries": [["a", 1]]},
]}


def test_swap_out_and_in_priced_and_counted_by_hand():
    # cost: k0 = 1 s per batch with entries, kswap = 0.5 s per token moved.
    # b0: a prefill 4 -> m_a=4, g_a=1; GPU 4; 1 s
    # b1: a's 4 tokens to host (h_a=4, GPU 0), b prefill 4 -> GPU 4, host 4; 1 + 0.5*4 = 3 s
    # b2: b decodes -> m_b=5, g_b=2=O: GPU 5 (b counts in the batch that finishes it); 1 s
    # b3: a's 4 tokens back (GPU 4 after b is freed), a decodes -> m_a=5; GPU 5; 1 + 2 = 3 s
    # b4: a decodes -> m_a=6, g_a=3=O; GPU 6; 1 s
    ev = evaluate(_inst(), Schedule.from_dict(SWAP_ROUND_TRIP))
    assert ev.feasible, ev.violations
    assert ev.batch_duration.tolist() == [1, 3, 1, 3, 1]
    assert ev.batch_kv.tolist() == [4, 4, 5, 5, 6]
    assert ev.batch_end.tolist() == [1, 4, 5, 8, 9]
    assert ev.completion.tolist() == [9, 5]
    assert ev.evictions.tolist() == [0, 0] and ev.metrics["recomputed_tokens"] == 0
    assert ev.metrics["swap_out_tokens"] == 4 and ev.metrics["swap_in_tokens"] == 4
    assert ev.metrics["peak_host_kv"] == 4
    # the swapped-in decode is a decode entry (m = S - 1 again), not a refill
    assert ev.entry_decode.tolist() == [False, False, True, True, True]


def test_partial_swap_out_lazy_checkpoint_by_hand():
    # Only 3 of a's 4 tokens go to the host (BROS's lazy checkpointing of overwritten slots).
    # b0: a prefill 4: GPU 4. b1: swap out 3 -> GPU 1, host 3; b prefills 4 -> GPU 5; 1 + 1.5 s
    # b2: b decodes, finishes: GPU 6. b3: swap in 3 -> a holds 4 on GPU, decodes -> 5; 1 + 1.5
    d = {"batches": [dict(b) for b in SWAP_ROUND_TRIP["batches"]]}
    d["batches"][1]["swap_out"] = [["a", 3]]
    ev = evaluate(_inst(), Schedule.from_dict(d))
    assert ev.feasible, ev.violations
    assert ev.batch_kv.tolist() == [1 + 3, 1 + 4, 1 + 5, 5, 6]
    assert ev.batch_duration.tolist() == [1, 2.5, 1, 2.5, 1]
    assert ev.metrics["swap_out_tokens"] == 3 and ev.metrics["peak_host_kv"] == 3


def test_swap_kv_counts_whole_blocks_on_the_gpu():
    # block 4: a holds 6 tokens = 2 blocks; swapping out 2 leaves 4 = 1 block on the GPU
    inst = Instance("t", Limits(kv_capacity=16, max_batch_tokens=16, host_capacity=8, block_size=4),
                    UnitCost(), (Request("a", 0, 6, 2),))
    ev = evaluate(inst, Schedule.from_dict({"batches": [
        {"entries": [["a", 6]]}, {"entries": [], "swap_out": [["a", 2]]},
        {"entries": [["a", 1]], "swap_in": ["a"]}]}))
    assert ev.feasible, ev.violations
    assert ev.batch_kv.tolist() == [8, 4, 8]
    # unit time: swaps are free unless kswap is stated; the swap-only batch takes 0
    assert ev.batch_duration.tolist() == [1, 0, 1]


def test_schedule_without_swaps_has_no_swap_keys_and_metrics():
    s = Schedule.from_dict({"batches": [{"entries": [["a", 4]]}]})
    assert not s.has_swaps and "swap_out" not in s.to_json()
    inst = Instance("t", Limits(kv_capacity=8, max_batch_tokens=8), UnitCost(),
                    (Request("a", 0, 4, 1),))
    assert "swap_out_tokens" not in evaluate(inst, s).metrics


@pytest.mark.parametrize("suffix", [".json", ".npz"])
def test_swap_schedule_round_trips(tmp_path, suffix):
    s = Schedule.from_dict(SWAP_ROUND_TRIP)
    p = tmp_path / f"s{suffix}"
    s.save(p)
    back = Schedule.load(p)
    assert back == s and back.has_swaps
    assert back.to_dict() == SWAP_ROUND_TRIP
    assert evaluate(_inst(), back).batch_duration.tolist() == [1, 3, 1, 3, 1]


def test_swap_format_errors_name_the_batch():
    with pytest.raises(ScheduleFormatError, match="batch 0: swap_out must be"):
        Schedule.from_dict({"batches": [{"entries": [], "swap_out": ["a"]}]})
    with pytest.raises(ScheduleFormatError, match="batch 0: 'swap_in' must be a list"):
        Schedule.from_dict({"batches": [{"entries": [], "swap_in": "a"}]})


def test_kswap_default_is_the_stated_derivation():
    # 2 (K, V) x 32 layers x 4096 dims x 2 bytes = 524,288 B per token at 25 GB/s
    assert KSWAP_DEFAULT == pytest.approx(524_288 / 25e9)
    assert kswap_from_hardware(80, 1024, 25e9, links=4) == pytest.approx(2 * 80 * 1024 * 2 / 4 / 25e9)
    # kswap is written even at its default (issue 30): a saved instance does not depend on it;
    # one read without it takes the default
    assert LinearCost(k0=1.0).to_dict()["kswap"] == KSWAP_DEFAULT
    assert cost_model_from_dict({"kind": "linear", "k0": 1.0}).kswap == KSWAP_DEFAULT
    assert LinearCost(k0=1.0, kswap=0.25).to_dict()["kswap"] == 0.25


class _SwapOnce(Policy):
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
    s = simulate(_inst(), _SwapOnce())
    assert s == Schedule.from_dict(SWAP_ROUND_TRIP)
    assert evaluate(_inst(), s).feasible


def test_simulator_refuses_swaps_without_host_memory():
    with pytest.raises(SimulationError, match="host KV 4 > host_capacity = 0"):
        simulate(_inst(host=None), _SwapOnce())


def test_formulations_refuse_swap_instances_and_schedules():
    inst = Instance("t", Limits(kv_capacity=8, max_batch_tokens=8, host_capacity=8), UnitCost(),
                    (Request("a", 0, 2, 2), Request("b", 0, 2, 2)))
    for name in ("infermax", "hindsight", "exhaustive"):
        with pytest.raises(FormulationError, match=f"{name}: cannot represent swap preemption"):
            solve(inst, name, warm_start=None)
    no_host = inst.replace(limits=Limits(kv_capacity=8, max_batch_tokens=8))
    swapping = Schedule.from_dict({"batches": [
        {"entries": [["a", 2]]}, {"entries": [["b", 2]], "swap_out": [["a", 2]]},
        {"entries": [["a", 1], ["b", 1]], "swap_in": ["a"]}]})
    for name in ("infermax", "hindsight", "exhaustive"):
        with pytest.raises(FormulationError, match="the schedule swaps KV"):
            solve(no_host, name, warm_start=swapping)


def test_direct_entry_points_refuse_swaps():
    from optsched.formulations import hindsight, infermax
    from optsched.formulations.exhaustive import search

    inst = Instance("t", Limits(kv_capacity=8, max_batch_tokens=8, host_capacity=0), UnitCost(),
                    (Request("a", 0, 2, 2),))
    with pytest.raises(FormulationError, match="exhaustive: cannot represent swap"):
        search(inst)
    with pytest.raises(FormulationError, match="hindsight: cannot represent swap"):
        hindsight.check_instance(inst)
    with pytest.raises(FormulationError, match="infermax: cannot represent swap"):
        infermax.build(inst, J=2)


def test_cli_solve_refuses_a_swapping_instance(tmp_path):
    import subprocess
    import sys

    inst = Instance("t", Limits(kv_capacity=8, max_batch_tokens=8, host_capacity=8), UnitCost(),
                    (Request("a", 0, 2, 2),))
    p = tmp_path / "i.json"
    inst.save(p)
    out = subprocess.run([sys.executable, "-m", "optsched", "solve", str(p), "--time-limit", "5"],
                         capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    assert "cannot represent swap preemption" in out.stderr and "Traceback" not in out.stderr
