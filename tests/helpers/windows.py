"""Hypothesis strategy: random trace-like windows of up to a few hundred requests (Poisson
arrivals at three rates, prompts up to 1,200 tokens, outputs up to 120, ``M`` one to eight
peak requests, unit or Llama-2-7B costs), for rungs checked below every policy."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from optsched.cost import UnitCost, preset
from optsched.instance import Instance, Limits, Request


@st.composite
def larger_windows(draw, max_requests: int = 200) -> Instance:
    n = draw(st.integers(1, max_requests))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    arr = rng.exponential(draw(st.sampled_from([0.0, 0.02, 0.2])), n).cumsum()
    I, O = rng.integers(1, 1200, n), rng.integers(1, 120, n)
    reqs = tuple(Request(f"r{i}", float(arr[i]), int(I[i]), int(O[i])) for i in range(n))
    peak = int((I + O - 1).max())
    block = draw(st.sampled_from([1, 16]))
    M = -(-peak * draw(st.integers(1, 8)) // block) * block + block
    lim = Limits(kv_capacity=M, max_batch_tokens=draw(st.sampled_from([512, 2048, 8192])),
                 block_size=block)
    cost = draw(st.sampled_from([UnitCost(), preset("infermax-llama2-7b-a100")]))
    return Instance("big", lim, cost, reqs)
