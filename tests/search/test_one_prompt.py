"""The ``one-prompt`` key decoders (optsched/search/one_prompt.py): every schedule is feasible
and finishes every request, no batch holds two prefill entries, a batch with decode entries
holds at most ``lo`` prompt tokens, with every request at 0 and memory to spare the first
tokens come in key order, and the key search takes the decoder by name."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optsched.cost import preset
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.policies.simulator import simulate_policy
from optsched.search.keysearch import key_search, make_decoder, seed_keys
from optsched.search.one_prompt import ONE_PROMPT, OnePromptDecoder, OnePromptRank
from optsched.testing import instances

SET = settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))


@SET
@given(st.data(), st.integers(1, 6))
def test_schedules_are_feasible_one_prompt_a_batch_short_while_decoding(data, lo):
    inst = data.draw(instances(max_requests=6, max_prompt=12, max_output=6))
    key = np.array(data.draw(st.lists(st.integers(0, 3), min_size=inst.n, max_size=inst.n)), dtype=np.float64)
    s = simulate_policy(inst, OnePromptRank(key, lo), fast=False)
    ev = evaluate(inst, s)
    assert ev.feasible, ev.violations[:3]
    assert np.all(np.isfinite(ev.completion))
    assert np.all(ev.batch_prefill_entries <= 1)
    decoding = ev.batch_decode_entries > 0
    assert np.all(ev.batch_prefill_tokens[decoding] <= lo)


@SET
@given(st.data())
def test_first_tokens_in_key_order_when_all_wait_and_memory_is_ample(data):
    inst = data.draw(instances(max_requests=6, max_prompt=12, max_output=6, online=False))
    peak = int((inst.prompt + inst.output).sum())
    inst = inst.replace(limits=Limits(kv_capacity=peak, max_batch_tokens=peak))
    key = np.array(data.draw(st.permutations(range(inst.n))), dtype=np.float64)
    ev = evaluate(inst, simulate_policy(inst, OnePromptRank(key, 4), fast=False))
    order = np.argsort(key)
    assert np.all(np.diff(ev.first_token[order]) >= 0)


def test_key_search_takes_the_decoder_by_name():
    rng = np.random.default_rng(3)
    arrival = np.cumsum(rng.exponential(0.05, 40))
    reqs = tuple(
        Request(f"r{i}", float(a), int(rng.integers(100, 2000)), int(rng.integers(1, 40)))
        for i, a in enumerate(arrival)
    )
    inst = Instance(
        name="one-prompt-40",
        requests=reqs,
        limits=Limits(kv_capacity=8000, max_batch_tokens=4096),
        cost_model=preset("infermax-llama2-7b-a100"),
    )
    keys = seed_keys(inst, "total-latency")
    dec = make_decoder(inst, "one-prompt")
    assert isinstance(dec, OnePromptDecoder)
    start = min(evaluate(inst, dec.decode(k)).objective("total-latency") for k in keys.values())
    res = key_search(
        inst,
        "total-latency",
        deadline=time.perf_counter() + 120,
        seed=0,
        max_iterations=len(keys) + 5,
        decoders=("one-prompt",),
    )
    assert res is not None and res.decoder == "one-prompt"
    assert evaluate(inst, res.schedule).feasible
    assert res.objective == pytest.approx(evaluate(inst, res.schedule).objective("total-latency"))
    assert res.objective <= start + 1e-9


def test_bad_arguments_name_the_field():
    with pytest.raises(ValueError, match="lo"):
        OnePromptRank(np.zeros(2), 0)
    with pytest.raises(ValueError, match="one-prompt"):
        OnePromptDecoder(None, "one-prompt7")  # type: ignore[arg-type]
    assert set(ONE_PROMPT) == {"one-prompt", "one-prompt512", "one-prompt1024"}
