"""Prefill-first SRPT with cut-to-arrival chunks (optsched/search/prefill_srpt.py): feasible
under the one evaluator, every first token before any later token, never below the mean-TTFT
bound, and on tiny instances the cut, the wait and the packing derived by hand."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schedule_checks import assert_first_tokens_first

from optsched.bounds import lower_bound
from optsched.cost import LinearCost
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.search.prefill_phase import PrefillPhaseError
from optsched.search.prefill_srpt import prefill_srpt_schedule
from optsched.testing import online_instances


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    inst=online_instances(),
    margin=st.sampled_from([0, 3, 50]),
    min_chunk=st.sampled_from([1, 4]),
    pack=st.sampled_from([0.0, 1.0, 8.0]),
)
def test_feasible_first_tokens_first_and_above_the_bound(inst, margin, min_chunk, pack):
    s = prefill_srpt_schedule(inst, margin, min_chunk, pack)
    ev = evaluate(inst, s)
    assert ev.feasible, ev.violations[:3]
    assert_first_tokens_first(inst, s)
    for rung in ("srpt", "events"):
        bound = lower_bound(inst, "mean-ttft", rung).value
        assert bound <= ev.objective("mean-ttft") * (1 + 1e-9) + 1e-12, rung


def _linear(*reqs: Request, C: int = 16) -> Instance:
    # batch time 1 + (prompt tokens in the batch): k0 = 1, k1 = 1, every other term 0
    return Instance(
        "hand",
        Limits(kv_capacity=40, max_batch_tokens=C),
        LinearCost(k0=1.0, k1=1.0, kpq=0.0, kpm=0.0, kdm=0.0, kpr=0.0, kdr=0.0),
        reqs,
    )


def _batches(s) -> list[tuple[list[str], list[int]]]:
    return [
        (
            [s.ids[r] for r in s.entry_req[s.batch_ptr[j] : s.batch_ptr[j + 1]].tolist()],
            s.entry_tokens[s.batch_ptr[j] : s.batch_ptr[j + 1]].tolist(),
        )
        for j in range(s.n_batches)
    ]


def test_the_running_chunk_is_cut_at_the_arrival_that_overtakes():
    # a (0, I=10, O=1), b (3, I=1, O=1); batch time 1 + tokens. At 0 a's whole prompt would
    # end at 11, after b arrives at 3 with 1 < 10 - 2 remaining tokens: a's chunk is cut to the
    # most tokens ending by 3 (1 + 2 = 3), b runs 3-5 (TTFT 2), a's last 8 tokens 5-14
    # (TTFT 14). Mean 8.
    inst = _linear(Request("a", 0.0, 10, 1), Request("b", 3.0, 1, 1))
    s = prefill_srpt_schedule(inst, margin=0, min_chunk=1)
    ev = evaluate(inst, s)
    assert ev.feasible
    assert _batches(s) == [(["a"], [2]), (["b"], [1]), (["a"], [8])]
    assert ev.objective("mean-ttft") == pytest.approx(8.0)


def test_a_cut_shorter_than_min_chunk_waits_for_the_arrival():
    # same requests, min_chunk 3: the cut would hold 2 tokens, so the server waits: b runs
    # 3-5 (TTFT 2), a's whole prompt 5-16 (TTFT 16). Mean 9. With margin 8, b (1 + 8 >= 10 - 2)
    # does not overtake: a runs 0-11, b 11-13 (TTFT 10). Mean 10.5.
    inst = _linear(Request("a", 0.0, 10, 1), Request("b", 3.0, 1, 1))
    waited = prefill_srpt_schedule(inst, margin=0, min_chunk=3)
    assert _batches(waited) == [(["b"], [1]), (["a"], [10])]
    assert evaluate(inst, waited).objective("mean-ttft") == pytest.approx(9.0)
    kept = prefill_srpt_schedule(inst, margin=8, min_chunk=1)
    assert _batches(kept) == [(["a"], [10]), (["b"], [1])]
    assert evaluate(inst, kept).objective("mean-ttft") == pytest.approx(10.5)


def test_packing_joins_a_prompt_while_it_saves_the_queue_more_than_it_costs():
    # four prompts of 2 tokens at 0 (fixed time h = 1, own time w = 2); a prompt joins while
    # pack * h * (prompts still waiting, itself included) > w * (prompts finishing in the
    # batch before it). pack 0: one a batch, ends 3, 6, 9, 12 -> mean 7.5. pack 2: after p,
    # q joins (2 * 3 > 2 * 1), r does not (2 * 2 > 2 * 2 fails): (p, q) ends 5; r alone
    # (s: 2 * 1 > 2 * 1 fails) ends 8, s 11 -> mean 29 / 4. pack 4: q (12 > 2) and
    # r (8 > 4) join, s (4 > 6) does not: ends 7, 7, 7, 10 -> mean 7.75.
    inst = _linear(*(Request(x, 0.0, 2, 1) for x in "pqrs"))
    means = {
        p: evaluate(inst, prefill_srpt_schedule(inst, pack=p)).objective("mean-ttft") for p in (0.0, 2.0, 4.0)
    }
    assert means == pytest.approx({0.0: 7.5, 2.0: 29 / 4, 4.0: 7.75})
    assert [len(r) for r, _ in _batches(prefill_srpt_schedule(inst, pack=4.0))] == [3, 1]


def test_bad_parameters_are_refused():
    inst = _linear(Request("a", 0.0, 4, 1))
    with pytest.raises(PrefillPhaseError, match="min_chunk"):
        prefill_srpt_schedule(inst, min_chunk=0)
    with pytest.raises(PrefillPhaseError, match="margin"):
        prefill_srpt_schedule(inst, margin=-1)


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(inst=online_instances())
def test_improve_for_mean_ttft_is_never_worse_than_the_grid(inst):
    # `optsched improve` tries the decoder's (margin, pack) grid before the key search, so its
    # mean TTFT is at most the grid's best (each replayed by the evaluator) and its start's
    from optsched.policies import simulate
    from optsched.search.lns import _LNS, LNSOptions, improve
    from optsched.search.prefill_srpt import GRID, GRID_MIN_CHUNK

    grid = min(evaluate(inst, prefill_srpt_schedule(inst, m, GRID_MIN_CHUNK, p)).objective("mean-ttft")
               for m, p in GRID)
    start = simulate(inst, "vllm")
    # 2 s: the grid (a quarter of it) takes milliseconds on these instances
    opts = LNSOptions(time_limit=2, seed=0, progress=False, max_iterations=40)
    res = improve(inst, start, "mean-ttft", opts)
    assert res.objective <= grid * (1 + 1e-12) + 1e-12
    assert res.objective <= evaluate(inst, start).objective("mean-ttft") * (1 + 1e-12) + 1e-12
    # the whole grid: a limit that cannot bind (on a loaded machine a quarter of 2 s did)
    lns = _LNS(inst, "mean-ttft", LNSOptions(time_limit=600, seed=0, progress=False,
                                            max_iterations=40))
    got = lns._prefill_srpt_phase(1e300, None)  # every decode beats 1e300: the grid's best
    assert got is not None and got[2] == pytest.approx(grid, rel=1e-12)
    assert lns.method.startswith("prefill-srpt (margin ") and got[3] == len(GRID)
    assert _LNS(inst, "total-latency", opts)._prefill_srpt_phase(1e300, None) is None
