"""Hidden cache (docs/semantics.md section 6, Apt-Serve): hand-worked memory and cost, a cache
type switch, the schedule format's round trip, and formulations/bounds refusing what they
cannot represent. One test per violation code is in tests/test_evaluate.py."""

from __future__ import annotations

import numpy as np
import pytest
from shared_data import SHARED_DATA  # noqa: E402

from optsched.cost import RHO_DEFAULT, RHO_FITTED, LinearCost, UnitCost, cost_model_from_dict
from optsched.errors import ScheduleFormatError
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.schedule import Schedule


def _inst(cost=None, M=16, block=1, reqs=None):
    return Instance("h", Limits(kv_capacity=M, max_batch_tokens=64, block_size=block,
                                hidden_cache=True),
                    cost or LinearCost(k0=1.0, k1=0.0, rho=0.25),
                    reqs or (Request("a", 0, 5, 3), Request("b", 0, 4, 2)))


def test_hidden_memory_and_cost_by_hand():
    # cost: k0 = 1 s per batch with entries, rho = 0.25 s per cached hidden token per batch.
    # b0: a prefills 5 on hidden cache -> m_a = 5, charged ceil(5/2) = 3; b prefills 4 on KV -> 4.
    #     memory 3 + 4 = 7; no cached tokens before the batch, so no extra: 1 s
    # b1: a decodes (m = 5 before: extra 0.25 * 5 = 1.25 s), b decodes and finishes.
    #     m_a = 6 -> 3, m_b = 5 -> 5: memory 8; 1 + 1.25 = 2.25 s
    # b2: a decodes (m = 6: extra 1.5 s) and finishes: m_a = 7 -> 4 (b was freed): 2.5 s
    s = Schedule.from_dict({"batches": [
        {"entries": [["a", 5, "hidden"], ["b", 4]]},
        {"entries": [["a", 1, "hidden"], ["b", 1]]},
        {"entries": [["a", 1, "hidden"]]},
    ]})
    ev = evaluate(_inst(), s)
    assert ev.feasible, ev.violations
    assert ev.batch_kv.tolist() == [7, 8, 4]
    assert ev.batch_duration.tolist() == [1.0, 2.25, 2.5]
    assert ev.batch_end.tolist() == [1.0, 3.25, 5.75]
    assert ev.metrics["hidden_entries"] == 3 and ev.metrics["hidden_time"] == 2.75
    # the same on KV cache: memory 5 + 4 = 9, 6 + 5 = 11, 7 and no extra time
    kv = evaluate(_inst(), Schedule.from_dict({"batches": [
        {"entries": [["a", 5], ["b", 4]]}, {"entries": [["a", 1], ["b", 1]]},
        {"entries": [["a", 1]]}]}))
    assert kv.feasible and kv.batch_kv.tolist() == [9, 11, 7]
    assert kv.batch_duration.tolist() == [1.0, 1.0, 1.0] and kv.metrics["hidden_time"] == 0.0


def test_hidden_memory_in_whole_blocks():
    # block_size 4: a block holds 4 KV tokens or 8 hidden tokens. a: 5 hidden tokens -> 1 block
    # (4); after the decode 6 -> still 4; b: 4 KV -> 4, then 5 -> 8.
    s = Schedule.from_dict({"batches": [
        {"entries": [["a", 5, "hidden"], ["b", 4]]},
        {"entries": [["a", 1, "hidden"], ["b", 1]]},
    ]})
    ev = evaluate(_inst(block=4, reqs=(Request("a", 0, 5, 9), Request("b", 0, 4, 2))), s)
    assert ev.batch_kv.tolist() == [8, 12]
    lim = Limits(kv_capacity=64, max_batch_tokens=8, block_size=4, hidden_cache=True)
    # 8 hidden tokens fill one block exactly, 9 need two; 1 hidden token takes a whole block
    assert [lim.hidden_footprint(x) for x in (1, 8, 9, 16, 17)] == [4, 4, 8, 8, 12]


def test_hidden_memory_lets_a_batch_fit_that_kv_cannot():
    # M = 8: two 5-token prompts need 10 on KV (overflow), 3 + 3 = 6 on hidden cache
    reqs = (Request("a", 0, 5, 1), Request("b", 0, 5, 1))
    kv = evaluate(_inst(M=8, reqs=reqs),
                  Schedule.from_dict({"batches": [{"entries": [["a", 5], ["b", 5]]}]}))
    assert [v.code for v in kv.violations] == ["KV_OVERFLOW"]
    hid = evaluate(_inst(M=8, reqs=reqs), Schedule.from_dict(
        {"batches": [{"entries": [["a", 5, "hidden"], ["b", 5, "hidden"]]}]}))
    assert hid.feasible and hid.batch_kv.tolist() == [6]


def test_switch_discards_and_recomputes_by_hand():
    # a (I = 5, O = 3) prefills on KV, is evicted (an eviction-only batch takes no time), and
    # recomputes all S = 6 known tokens as hidden cache, then decodes on hidden cache.
    # b0: prefill 5 on KV -> m 5, g 1; memory 5; 1 s
    # b1: evict a (0 s); memory 0; 5 tokens recomputed
    # b2: refill 6 hidden (m before 0: no extra) -> m 6, g 2; memory 3; 1 s
    # b3: decode (extra 0.25 * 6 = 1.5) -> m 7, g 3 = O; memory ceil(7/2) = 4; 2.5 s
    s = Schedule.from_dict({"batches": [
        {"entries": [["a", 5]]}, {"entries": [], "evict": ["a"]},
        {"entries": [["a", 6, "hidden"]]}, {"entries": [["a", 1, "hidden"]]}]})
    ev = evaluate(_inst(reqs=(Request("a", 0, 5, 3),)), s)
    assert ev.feasible, ev.violations
    assert ev.batch_kv.tolist() == [5, 0, 3, 4]
    assert ev.batch_duration.tolist() == [1.0, 0.0, 1.0, 2.5]
    assert ev.metrics["recomputed_tokens"] == 5 and ev.metrics["evictions"] == 1
    assert ev.completion.tolist() == [4.5]


def test_unit_time_prices_hidden_cache_only_with_a_stated_rho():
    s = Schedule.from_dict({"batches": [{"entries": [["a", 4, "hidden"]]},
                                        {"entries": [["a", 1, "hidden"]]}]})
    reqs = (Request("a", 0, 4, 2),)
    assert evaluate(_inst(UnitCost(), reqs=reqs), s).batch_duration.tolist() == [1, 1]
    # rho = 0.5 time units per cached token: the decode with m = 4 takes 1 + 2
    assert evaluate(_inst(UnitCost(rho=0.5), reqs=reqs), s).batch_duration.tolist() == [1, 3]


def test_schedule_and_instance_round_trip(tmp_path):
    s = Schedule.from_dict({"batches": [{"entries": [["a", 5, "hidden"], ["b", 4]]},
                                        {"entries": [["a", 1, "hidden"], ["b", 1, "kv"]]}]})
    assert s.has_hidden and s.to_dict()["batches"][1]["entries"] == [["a", 1, "hidden"], ["b", 1]]
    for name in ("s.json", "s.npz"):
        s.save(tmp_path / name)
        back = Schedule.load(tmp_path / name)
        assert back == s and back.entry_hidden.tolist() == s.entry_hidden.tolist()
    # a KV-only schedule is unchanged: no third element, no npz array, and != the hidden one
    kv = Schedule.from_dict({"batches": [{"entries": [["a", 5], ["b", 4]]},
                                         {"entries": [["a", 1], ["b", 1]]}]})
    assert not kv.has_hidden and kv != s
    assert all(len(e) == 2 for b in kv.to_dict()["batches"] for e in b["entries"])
    kv.save(tmp_path / "k.npz")
    assert "entry_hidden" not in np.load(tmp_path / "k.npz").files
    inst = _inst()
    assert Instance.from_json(inst.to_json()) == inst
    assert inst.to_dict()["limits"]["hidden_cache"] is True
    assert "hidden_cache" not in Limits(8, 8).to_dict()
    assert cost_model_from_dict(inst.cost_model.to_dict()) == inst.cost_model
    # rho is written even at its default (issue 30): a saved instance does not depend on it
    assert LinearCost().to_dict()["rho"] == RHO_DEFAULT == LinearCost().rho


def test_hidden_format_errors_name_the_batch():
    with pytest.raises(ScheduleFormatError, match="batch 1.*cache type"):
        Schedule.from_dict({"batches": [{"entries": [["a", 4]]},
                                        {"entries": [["a", 1, "hiden"]]}]})


@pytest.mark.skipif(not (SHARED_DATA / "profiling").is_dir(),
                    reason=f"needs {SHARED_DATA / 'profiling'}")
def test_rho_presets_are_the_profiling_fit():
    from optsched.workloads.fit import fit_rho

    d = SHARED_DATA / "profiling"
    for name, tp, key in (("mlp_a100_Llama-2-7b-hf.csv", 1, "llama2-7b-a100"),
                          ("mlp_a100_Llama-2-70b-hf.csv", 4, "llama2-70b-4xa100"),
                          ("mlp_a100_Meta-Llama-3-8B.csv", 1, "llama3-8b-a100")):
        assert fit_rho(d / name, tp).rho == pytest.approx(RHO_FITTED[key], rel=1e-3), name
    # a fitted cost model carries its own model's rho, not the default preset's
    from optsched.workloads.fit import fit_linear_cost

    fitted = fit_linear_cost(d, "Llama-2-7b-hf", "a100", 1).cost
    assert fitted.rho == pytest.approx(RHO_FITTED["llama2-7b-a100"], rel=1e-3)


def _two(hidden=True):
    return Instance("t", Limits(kv_capacity=8, max_batch_tokens=8, hidden_cache=hidden),
                    UnitCost(), (Request("a", 0, 2, 2), Request("b", 0, 2, 2)))


def test_formulations_refuse_hidden_instances_and_schedules():
    from optsched.formulations.base import FormulationError
    from optsched.solving import solve

    for name in ("infermax", "hindsight", "exhaustive"):
        with pytest.raises(FormulationError, match=f"{name}: cannot represent hidden cache"):
            solve(_two(), name, warm_start=None)
    hidden = Schedule.from_dict({"batches": [
        {"entries": [["a", 2, "hidden"], ["b", 2]]}, {"entries": [["a", 1, "hidden"], ["b", 1]]}]})
    for name in ("infermax", "hindsight", "exhaustive"):
        with pytest.raises(FormulationError, match="the schedule uses hidden cache"):
            solve(_two(hidden=False), name, warm_start=hidden)


def test_direct_entry_points_and_bounds_refuse_hidden_cache():
    from optsched.bounds import BoundError, lower_bound
    from optsched.formulations import hindsight, infermax
    from optsched.formulations.base import FormulationError
    from optsched.formulations.exhaustive import search
    from optsched.search.lns import LNSError, improve

    with pytest.raises(FormulationError, match="exhaustive: cannot represent hidden"):
        search(_two())
    with pytest.raises(FormulationError, match="hindsight: cannot represent hidden"):
        hindsight.check_instance(_two())
    with pytest.raises(FormulationError, match="infermax: cannot represent hidden"):
        infermax.build(_two(), J=2)
    # a KV-only bound may exceed the optimum when half-memory caches are allowed: refused
    for method in ("best", "request", "work"):
        with pytest.raises(BoundError, match="hidden cache"):
            lower_bound(_two(), "makespan", method)
    kv = Schedule.from_dict({"batches": [{"entries": [["a", 2], ["b", 2]]},
                                         {"entries": [["a", 1], ["b", 1]]}]})
    with pytest.raises(LNSError, match="hidden cache"):
        improve(_two(), kv)


def test_cli_refuses_hidden_cache_with_exit_2(tmp_path):
    import subprocess
    import sys

    p = tmp_path / "i.json"
    _two().save(p)
    for cmd in (["solve", str(p), "--time-limit", "5"], ["bound", str(p)]):
        out = subprocess.run([sys.executable, "-m", "optsched", *cmd], capture_output=True,
                             text=True)
        assert out.returncode == 2, (cmd, out.stderr)
        assert "hidden cache" in out.stderr and "Traceback" not in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_compare_runs_policies_on_a_hidden_cache_instance_without_a_bound(tmp_path):
    from optsched.comparison import CompareInputError, compare

    inst = Instance("pair", Limits(kv_capacity=10, max_batch_tokens=64, hidden_cache=True),
                    UnitCost(rho=0.01), (Request("a", 0.0, 6, 2), Request("b", 0.0, 6, 3)))
    cmp = compare(inst, ["aptserve", "vllm"], time_limit=10)
    assert [r.label for r in cmp.rows] == ["aptserve", "vllm"]
    assert all(r.evaluation.feasible for r in cmp.rows)
    assert cmp.lower_bound is None and any("hidden cache" in n for n in cmp.notes)
    with pytest.raises(CompareInputError, match="hidden cache"):
        compare(inst, ["vllm"], optimal=True, time_limit=10)


def test_cli_hidden_cache_flag_enables_it_on_a_trace(tmp_path):
    import json
    import subprocess
    import sys

    csv = tmp_path / "t.csv"
    csv.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                   + "".join(f"2023-11-16 18:15:{k:02d}.0,{6 + k % 3},{2 + k % 2}\n"
                             for k in range(8)))
    base = [sys.executable, "-m", "optsched", "simulate", "--trace", str(csv), "--kv-capacity",
            "12", "--max-batch-tokens", "64", "--policy", "aptserve", "--json"]
    for flag, on in (([], False), (["--hidden-cache"], True)):
        out = subprocess.run(base + flag, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        metrics = json.loads(out.stdout)["evaluation"]["metrics"]
        # the hidden-cache metrics are reported exactly when the instance enables it
        assert ("hidden_entries" in metrics) is on
