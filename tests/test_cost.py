"""Cost models (optsched/cost.py): files, presets and the coarsened model."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from optsched.cli import main
from optsched.cost import (
    DEFAULT_PRESET,
    KSWAP_DEFAULT,
    LinearCost,
    coarsened,
    cost_model_arg,
    cost_model_from_dict,
    kswap_from_hardware,
    preset,
)
from optsched.errors import InstanceError, OptschedError
from optsched.instance import Instance


def test_cost_model_file_round_trip(tmp_path, capsys):
    """A cost model written as JSON (what ``fit -o`` writes) is read back by ``--cost-model
    FILE`` exactly: every coefficient of the instance equals the file's."""
    cm = LinearCost(**{**preset("infermax-llama2-7b-a100").coefficients, "k0": 0.0123})
    f = tmp_path / "fitted.json"
    f.write_text(json.dumps(cm.to_dict()))
    assert cost_model_arg(str(f)) == cm
    inst_path = tmp_path / "i.json"
    rc = main(["generate", "fixed", "--n", "3", "--prompt", "8", "--output", "2",
               "--cost-model", str(f), "--block-size", "16", "-o", str(inst_path)])
    capsys.readouterr()
    inst = Instance.load(inst_path)
    assert rc == 0 and inst.cost_model == cm and inst.limits.block_size == 16


def test_cost_model_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "linear", "bogus": 1}')
    with pytest.raises(OptschedError, match=r"--cost-model .*bad\.json"):
        cost_model_arg(str(bad))
    with pytest.raises(OptschedError, match="unknown preset"):
        cost_model_arg("no-such-preset")


def test_kswap_default_is_the_stated_derivation():
    # 2 (K, V) x 32 layers x 4096 dims x 2 bytes = 524,288 B per token at 25 GB/s
    assert KSWAP_DEFAULT == pytest.approx(524_288 / 25e9)
    assert kswap_from_hardware(80, 1024, 25e9, links=4) == pytest.approx(2 * 80 * 1024 * 2 / 4 / 25e9)
    # kswap is written even at its default: a saved instance does not depend on it;
    # one read without it takes the default
    assert LinearCost(k0=1.0).to_dict()["kswap"] == KSWAP_DEFAULT
    full = {k: 0.0 for k in LinearCost().coefficients} | {"kind": "linear", "k0": 1.0}
    assert cost_model_from_dict(full).kswap == KSWAP_DEFAULT
    assert LinearCost(k0=1.0, kswap=0.25).to_dict()["kswap"] == 0.25


@given(st.integers(1, 200), st.integers(1, 64), st.integers(0, 5000))
def test_coarse_decode_unit_is_q_real_steps(q, n, cached_units):
    real, coarse = preset(DEFAULT_PRESET), coarsened(preset(DEFAULT_PRESET), q)
    assert coarse.decode_batch_time(n, cached_units) == pytest.approx(
        q * real.decode_batch_time(n, q * cached_units), rel=1e-12
    )


def test_coarse_cost_of_one_is_the_preset():
    real, one = preset(DEFAULT_PRESET), coarsened(preset(DEFAULT_PRESET), 1)
    assert one.coefficients == pytest.approx(real.coefficients, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("q", [0, -1, 1.5, True])
def test_coarsened_takes_a_whole_number_of_tokens(q):
    with pytest.raises(InstanceError, match="q must be an integer >= 1"):
        coarsened(preset(DEFAULT_PRESET), q)



def test_a_partial_linear_cost_model_is_refused_naming_the_missing_coefficients():
    # {"kind": "linear", "k0": 1.0} used to read as k1 = kpq = ... = 0: a different engine
    with pytest.raises(OptschedError, match=r"missing coefficients k1, kpq, kpm, kdm, kpr, kdr, "
                                            r"kpl, kpb, kdb"):
        cost_model_from_dict({"kind": "linear", "k0": 1.0})
    full = {k: 0.0 for k in LinearCost().coefficients} | {"kind": "linear"}
    del full["kdb"]
    with pytest.raises(OptschedError, match=r"missing coefficients kdb;"):
        cost_model_from_dict(full)
    # every coefficient stated: accepted, and a model's own dict reads back to itself
    assert cost_model_from_dict(LinearCost(k0=1.0, kdb=0.5).to_dict()) == LinearCost(k0=1.0, kdb=0.5)
