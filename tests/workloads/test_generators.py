"""Seeded generators (optsched.workloads.generators): determinism, validity, documented distributions."""

import numpy as np
import pytest

from optsched.cost import UnitCost
from optsched.errors import InstanceError
from optsched.instance import Instance, Limits
from optsched.workloads.generators import (
    GENERATORS,
    LONG,
    SHORT,
    generate,
    infermax_fixed,
    infermax_mix,
    online_paper_horizon,
    online_paper_random,
    poisson_trace,
)


def roundtrip(inst: Instance) -> None:
    assert Instance.from_json(inst.to_json()) == inst


def test_fixed():
    i = infermax_fixed(5, 100, 20)
    assert i.n == 5 and set(i.prompt) == {100} and set(i.output) == {20} and not i.arrival.any()
    assert i.limits.kv_capacity == 100_000 and i.cost_model.preset == "infermax-llama2-7b-a100"
    roundtrip(i)
    with pytest.raises(InstanceError, match="exceeds kv_capacity"):
        infermax_fixed(1, 100, 20, limits=Limits(kv_capacity=50, max_batch_tokens=50))
    with pytest.raises(InstanceError):
        infermax_fixed(0, 1, 1)


@pytest.mark.parametrize("mix", ["SISO", "SILO", "LISO", "LILO"])
def test_mix(mix):
    a, b = infermax_mix(mix, 200, seed=3), infermax_mix(mix, 200, seed=3)
    assert a == b and a != infermax_mix(mix, 200, seed=4)
    ins = SHORT if mix[0] == "S" else LONG
    outs = SHORT if mix[2] == "S" else LONG
    assert set(a.prompt) == set(ins) and set(a.output) == set(outs)  # both values drawn
    roundtrip(a)


def test_mix_unknown():
    with pytest.raises(InstanceError, match="unknown mix"):
        infermax_mix("SOSO", 3)


def test_online_paper_distribution():
    Ms = set()
    for seed in range(40):
        i = online_paper_random(30, seed)
        M = i.limits.kv_capacity
        Ms.add(M)
        s = i.prompt - 1
        assert 30 <= M <= 50 and i.limits.max_batch_tokens == M
        assert s.min() >= 1 and s.max() <= 5
        assert i.output.min() >= 1 and np.all(i.output <= M - s)
        assert np.all(i.prompt + i.output - 1 <= M)  # paper peak s + o <= M
        assert isinstance(i.cost_model, UnitCost) and not i.arrival.any()
    assert min(Ms) <= 33 and max(Ms) >= 47  # spread over U[30, 50]
    assert online_paper_random(10, 1) == online_paper_random(10, 1)
    roundtrip(online_paper_random(10, 1))


def test_online_paper_poisson():
    i = online_paper_random(400, 2, arrival="poisson", rate=2.0)
    a = i.arrival
    assert np.all(a == np.floor(a)) and np.all(np.diff(a) >= 0)  # integer rounds, in order
    assert i.n / (a[-1] + 1) == pytest.approx(2.0, rel=0.15)
    with pytest.raises(InstanceError, match="needs a rate"):
        online_paper_random(5, arrival="poisson")


def test_online_paper_horizon():
    sizes = []
    for seed in range(60):
        i = online_paper_horizon(1.0, 50, seed)
        a, M, s = i.arrival, i.limits.kv_capacity, i.prompt - 1
        assert np.all(a == np.floor(a)) and np.all(np.diff(a) >= 0)  # integer rounds, in order
        assert a.min() >= 0 and a.max() <= 49  # arrivals only within the horizon
        assert 30 <= M <= 50 and s.min() >= 1 and s.max() <= 5
        assert np.all(i.prompt + i.output - 1 <= M) and isinstance(i.cost_model, UnitCost)
        sizes.append(i.n)
    # n ~ Poisson(rate * horizon) = Poisson(50): the mean of 60 draws has sd 50**0.5/60**0.5 < 1
    assert abs(np.mean(sizes) - 50) < 4 and np.std(sizes) > 2
    assert online_paper_horizon(0.5, 40, 3) == online_paper_horizon(0.5, 40, 3)
    assert generate("online-paper-horizon", rate=0.5, horizon=40, seed=3) == online_paper_horizon(
        0.5, 40, 3)
    assert online_paper_horizon(1e-9, 1, 0).n == 1  # no arrival drawn: one request at round 0
    with pytest.raises(InstanceError, match="horizon"):
        online_paper_horizon(1.0, 0)
    with pytest.raises(InstanceError, match="rate"):
        online_paper_horizon(-1.0, 10)
    roundtrip(online_paper_horizon(1.5, 10, 1))


def test_poisson_trace_from_instance():
    src = infermax_mix("LILO", 50, seed=0)
    a = poisson_trace(src, 20, rate=4.0, seed=9)
    assert a == poisson_trace(src, 20, rate=4.0, seed=9)
    pairs = set(zip(src.prompt.tolist(), src.output.tolist()))
    assert set(zip(a.prompt.tolist(), a.output.tolist())) <= pairs
    assert a.arrival[0] == 0 and np.all(np.diff(a.arrival) > 0)
    with pytest.raises(InstanceError, match="without replacement"):
        poisson_trace(src, 51, rate=1.0)
    assert poisson_trace(src, 80, rate=1.0, replace=True).n == 80
    roundtrip(a)


def test_poisson_trace_filters_pool():
    src = infermax_mix("SILO", 40, seed=0)  # peaks up to 16 + 1024 - 1
    lim = Limits(kv_capacity=600, max_batch_tokens=600)
    with pytest.warns(UserWarning, match="removed"):
        a = poisson_trace(src, 5, rate=1.0, limits=lim)
    assert np.all(a.output == 512)


def test_registry():
    assert {"fixed", "mix", "poisson-trace", "online-paper"} <= set(GENERATORS)
    for g in GENERATORS.values():
        assert g.summary and all(p.help for p in g.params)
    assert generate("fixed", n=2, prompt=3, output=4).n == 2
    assert generate("online-paper", n=3, seed=1) == online_paper_random(3, 1)
    with pytest.raises(InstanceError, match="unknown generator"):
        generate("nope")
    with pytest.raises(InstanceError, match="missing parameter 'prompt'"):
        generate("fixed", n=2, output=4)
    with pytest.raises(InstanceError, match="unknown parameter"):
        generate("fixed", n=2, prompt=3, output=4, bogus=1)
    with pytest.raises(InstanceError, match="fixes its own limits"):
        generate("online-paper", n=2, limits=Limits(kv_capacity=9, max_batch_tokens=9))


def test_eviction_family_is_infermax_section_5_1():
    # M = max(2I, I + O - 1): I = 16, O = 4 -> 32 (two prompts fit, a third only after an
    # eviction); I = 1 -> max(2, 4) = 4. Four identical requests at 0 of the InferMax preset.
    from optsched.cost import DEFAULT_PRESET, preset
    from optsched.workloads.generators import eviction_family, infermax_fixed

    inst = eviction_family(16)
    assert inst.name == "evict-family-I16" and inst.limits.kv_capacity == 32
    assert inst.limits.max_batch_tokens == 4096 and inst.cost_model == preset(DEFAULT_PRESET)
    assert [(r.arrival, r.prompt, r.output) for r in inst.requests] == [(0.0, 16, 4)] * 4
    assert eviction_family(1).limits.kv_capacity == 4
    same = infermax_fixed(3, 8, 5, limits=eviction_family(8, n=3, output=5).limits)
    assert eviction_family(8, n=3, output=5).requests == same.requests

