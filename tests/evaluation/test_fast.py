"""The one-pass compiled evaluator (optsched/evaluation/fast.py) answers exactly what the
vectorised replay does, or defers to it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.evaluation import evaluate
from optsched.evaluation import fast as evaluate_fast
from optsched.instance import Instance, Limits
from optsched.policies import simulate
from optsched.policies.fast import HAVE_NUMBA
from optsched.schedule import Schedule
from optsched.workloads.generators import infermax_mix, poisson_trace

pytestmark = pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed: no fast path")


EVAL_FIELDS = ("first_token", "completion", "latency", "ttft", "tpot", "evictions",
               "recomputed_tokens", "batch_start", "batch_end", "batch_duration", "batch_kv",
               "batch_tokens", "batch_prefill_tokens", "batch_prefill_entries",
               "batch_decode_entries", "entry_decode", "entry_cached", "entry_generates")


def assert_same_evaluation(inst: Instance, s: Schedule) -> bool:
    """The compiled replay answers exactly what the vectorised one does, or defers to it;
    returns whether it answered. It must answer for every feasible schedule it covers and
    never for an infeasible one."""
    import optsched.evaluation.evaluator as E

    ref = E.evaluate(inst, s)  # vectorised: the schedule is below COMPILED_MIN_ENTRIES
    got = E._compiled(inst, s)
    if got is None:
        assert not ref.feasible or not evaluate_fast.applies(inst, s)
        return False
    assert evaluate_fast.applies(inst, s)
    assert ref.feasible and got.feasible and got.violations == ()
    assert got.metrics == ref.metrics
    for f in EVAL_FIELDS:
        x, y = getattr(got, f), getattr(ref, f)
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f
    return True


def _mutate(s: Schedule, how: int, k: int) -> Schedule:
    """A schedule with one rule broken at entry ``k`` (tokens, duplicate, dropped entry,
    eviction of a request holding nothing, an early stated start)."""
    tok, req = s.entry_tokens.copy(), s.entry_req.copy()
    bptr, start = s.batch_ptr.copy(), s.start.copy()
    vptr, vreq = s.evict_ptr.copy(), s.evict_req.copy()
    j = int(np.searchsorted(bptr, k, side="right") - 1)
    if how == 0:
        tok[k] += 1  # TOKENS_OVER_AVAILABLE (or a request left with too few, INCOMPLETE...)
    elif how == 1:
        tok[k] = 0  # ZERO_TOKENS
    elif how == 2:  # DUPLICATE_ENTRY: the entry again in its batch
        req = np.insert(req, k, req[k])
        tok = np.insert(tok, k, tok[k])
        bptr[j + 1:] += 1
    elif how == 3:  # a dropped entry: INCOMPLETE or later over-available entries
        req, tok = np.delete(req, k), np.delete(tok, k)
        bptr[j + 1:] -= 1
    elif how == 4:  # evict the entry's request in its own batch: EVICT_AND_PROCESS
        vreq = np.insert(vreq, vptr[j], req[k])
        vptr[j + 1:] += 1
    else:  # a stated start at 0 on the last batch: START_TOO_EARLY unless all ends are 0
        start[-1] = 0.0
    return Schedule(s.ids, bptr, req, tok, vptr, vreq, start)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_compiled_evaluation_equals_vectorised(data):
    from optsched.testing import instances, valid_schedules

    inst = data.draw(instances(max_requests=6))
    trace = data.draw(valid_schedules(inst, stated_starts=data.draw(st.booleans())))
    s = trace.schedule
    # the kernel answers exactly for the feasible ones (the generator's stated starts
    # under the linear cost can be early: START_TOO_EARLY, answered by the vectorised path)
    assert assert_same_evaluation(inst, s) == evaluate(inst, s).feasible
    if s.n_entries:
        how = data.draw(st.integers(0, 5))
        k = data.draw(st.integers(0, s.n_entries - 1))
        assert_same_evaluation(inst, _mutate(s, how, k))


@pytest.mark.parametrize("policy", ["vllm", "sarathi", "fcfs", "mcsf"])
def test_compiled_evaluation_of_simulated_schedules(policy):
    pool = infermax_mix("LILO", 60, seed=1)
    inst = poisson_trace(pool, 40, rate=4.0, seed=0, replace=True,
                         limits=Limits(kv_capacity=3_000, max_batch_tokens=1024, block_size=4,
                                       max_prefill_tokens=768, max_batch_size=16))
    assert assert_same_evaluation(inst, simulate(inst, policy))


def test_large_schedules_take_the_compiled_evaluator(monkeypatch):
    # evaluate() itself routes a schedule past COMPILED_MIN_ENTRIES to the kernel
    import optsched.evaluation.evaluator as E

    inst = infermax_mix("SISO", 30, seed=0)
    s = simulate(inst, "vllm")
    calls = []
    real = E._compiled
    monkeypatch.setattr(E, "_compiled", lambda i, x: calls.append(1) or real(i, x))
    monkeypatch.setattr(E, "COMPILED_MIN_ENTRIES", 0)
    assert E.evaluate(inst, s).feasible and calls == [1]
