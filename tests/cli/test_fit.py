"""``optsched fit``: a cost model fitted from profiling tables, its options and errors."""

from __future__ import annotations

import pytest
from cli_helpers import one_line_error
from paths import SHARED_DATA

from optsched.cli import main
from optsched.cost import cost_model_arg
from optsched.workloads import fit as fit_module
from optsched.workloads.fit import GroupFit


def test_fit_layers_must_be_positive(capsys, tmp_path):
    # refused before any profiling file is read (the old behaviour printed all-zero coefficients)
    one_line_error(capsys, "fit", "--profiling", tmp_path, "--layers", 0,
                   match="--layers must be an integer >= 1, got 0")


def test_fit_unknown_model_names_the_layers_flag(capsys, tmp_path):
    one_line_error(capsys, "fit", "--profiling", tmp_path, "--model", "mystery-model",
                   match="give it with --layers")


def test_fit_negative_coefficients_name_the_unconstrained_flag(capsys, tmp_path, monkeypatch):
    def group(name, **k):
        return GroupFit(name, tuple(k), 1, 0.0, 0.0, 0.0, k)

    monkeypatch.setattr(fit_module, "fit_mlp", lambda *a, **kw: group("mlp", k0=1.0, k1=-0.5))
    monkeypatch.setattr(fit_module, "fit_attention", lambda *a, **kw: (
        group("decode", kdm=0.1, kdr=0.1, kdb=0.1),
        group("prefill", kpq=0.1, kpm=0.1, kpl=0.1, kpb=0.1)))
    attn = tmp_path / "attention_samples_a100_Llama-2-7b-hf.csv"
    attn.write_text("")
    one_line_error(capsys, "fit", "--profiling", tmp_path, "--unconstrained",
                   match="fit without --unconstrained")


PROF = SHARED_DATA / "profiling"


@pytest.mark.skipif(not PROF.is_dir(), reason=f"shared data not found at {PROF}")
def test_fit_output_is_usable_as_cost_model(tmp_path, capsys):
    from optsched.workloads.fit import fit_linear_cost

    f = tmp_path / "fit.json"
    rc = main(["fit", "--profiling", str(PROF), "-o", str(f)])
    capsys.readouterr()
    assert rc == 0
    assert cost_model_arg(str(f)) == fit_linear_cost(PROF, "Llama-2-7b-hf", "a100", 1).cost
