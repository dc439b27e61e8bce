"""The ``coupled`` and ``dual`` rungs (bounds.md B10, B11): their pieces (the trade-off
frontier, the SRPT count, the dual's piece floors) checked by hand. Their validity (below the
exhaustive optimum, below every policy) is ``tests/bounds/test_every_rung.py``."""

from __future__ import annotations

import numpy as np
import pytest

from optsched.bounds import Floors, lower_bound
from optsched.bounds.coupled import frontier, other_entry_rate, srpt_count
from optsched.bounds.dual import next_smaller, piece_floor
from optsched.bounds.srpt import srpt_completions
from optsched.cost import LinearCost, preset
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies import simulate

OBJS = ("total-latency", "mean-ttft")


# --- the pieces, by hand -----------------------------------------------------------------
def _one_request():
    # k0 = 1 (h = 1), k1 = 0.5, kdm = 0.1, kpl = 0.2: kappa = min(kdm, kpl, k1, k1 + kdr) = 0.1
    cm = LinearCost(k0=1.0, k1=0.5, kdm=0.1, kpl=0.2)
    return Instance("h", Limits(kv_capacity=10, max_batch_tokens=10), cm,
                    (Request("a", 0.0, 2, 2),))


def test_frontier_by_hand():
    inst = _one_request()
    f = Floors(inst)
    assert other_entry_rate(f.k) == pytest.approx(0.1)
    fr = frontier(f)
    # step 0 (prefill, S = 2): entry k1 I = 1.0, chain k0 + 1.0 = 2.0;
    # step 1 (S = 3): decode k1 + kdm (S - 1) = 0.7, chain k0 + 0.7 = 1.7
    assert fr.dmin.tolist() == [pytest.approx(3.7)]
    # work at the largest batching u = M / S: (1.0 + 1 * 2/10) + (0.7 + 1 * 3/10) = 2.2
    assert fr.wmin.tolist() == [pytest.approx(2.2)]
    # with duration dmin every step runs alone (u = 1): work 1.0 + 0.7 + 2 h = 3.7
    assert fr.least_work(np.array([3.7]))[0] == pytest.approx(3.7, rel=1e-8)
    # below the chain floor the request cannot finish
    assert fr.least_work(np.array([3.6]))[0] == np.inf
    # at u = M / S in both steps the chain is 2.0 + 0.1*2*(5 - 1) + 1.7 + 0.1*3*(10/3 - 1)
    # = 2.8 + 2.4 = 5.2: from there on the least work is wmin
    assert fr.least_work(np.array([5.2]))[0] == pytest.approx(2.2, rel=1e-6)
    # in between, one step batched: u_0 = 1 and u_1 = 10/3 gives chain 2.0 + 2.4 = 4.4 and
    # work (1.0 + 1) + (0.7 + 0.3) = 3.0; the least work there is at most that and above wmin
    w = fr.least_work(np.array([4.4]))[0]
    assert 2.2 < w <= 3.0 + 1e-9


def test_srpt_count_matches_completions():
    rng = np.random.default_rng(3)
    for _ in range(30):
        n = int(rng.integers(1, 30))
        r = np.sort(rng.uniform(0, 5, n))
        w = rng.uniform(0.1, 2, n)
        done = srpt_completions(r, w)
        for tau in np.concatenate([done, done + 1e-9, done - 1e-9, rng.uniform(0, 40, 5)]):
            assert srpt_count(r, w, float(tau)) == int((done <= tau).sum())
    # jobs (0, 3), (1, 1): SRPT completes job 2 at 2 and job 1 at 4; an infinite work never
    assert srpt_count(np.array([0.0, 1.0, 0.0]), np.array([3.0, 1.0, np.inf]), 3.9) == 1
    assert srpt_count(np.array([0.0, 1.0, 0.0]), np.array([3.0, 1.0, np.inf]), 4.0) == 2


def test_coupling_raises_the_bound_at_light_load():
    # 12 identical requests (I = 200, O = 30) arriving every 20 ms on the Llama-2-7B preset,
    # M = 3000: little queueing, so the older rungs rest on each request's chain alone; a
    # request that finishes that fast must run in small batches, whose server share is
    # large, and the server cannot give that to all of them
    cm = preset("infermax-llama2-7b-a100")
    reqs = tuple(Request(f"r{i}", round(0.02 * i, 6), 200, 30) for i in range(12))
    inst = Instance("light", Limits(kv_capacity=3000, max_batch_tokens=2048), cm, reqs)
    old = max(lower_bound(inst, "total-latency", m).value
              for m in ("request", "work", "srpt", "mbt"))
    coupled = lower_bound(inst, "total-latency", "coupled").value
    dual = lower_bound(inst, "total-latency", "dual").value
    best = min(evaluate(inst, simulate(inst, p)).objective("total-latency")
               for p in ("vllm", "sarathi", "mcsf"))
    assert old < coupled < dual <= best


def test_next_smaller_and_piece_floor_by_hand():
    # prices 3, 1, 2, 0.5: from interval 0 the cheapest price drops at 1 and at 3
    assert next_smaller(np.array([3.0, 1.0, 2.0, 0.5])).tolist() == [1, 3, 3, 4, 4]
    fr = frontier(Floors(_one_request()))
    # price 0: min over s >= s0 of s is s0 (the chain floor 3.7 when s0 is below it)
    assert piece_floor(fr, np.array([0.0]), np.array([3.7]))[0] == pytest.approx(3.7)
    # every piece floor is at most the value of a feasible choice: u = 1 in both steps
    # (s = 3.7, work 3.7) gives 3.7 + p 3.7; u = M / S (s = 5.2, work 2.2) gives 5.2 + 2.2 p
    for p in (0.1, 0.5, 1.0, 2.0, 10.0):
        v = piece_floor(fr, np.array([p]), np.array([3.7]))[0]
        assert v <= min(3.7 + 3.7 * p, 5.2 + 2.2 * p) + 1e-9
        assert v >= 3.7 + 2.2 * p - 1e-9  # s >= dmin and work >= wmin
