"""Issue 13's leftovers from the last audit: messages name only what the user can pass, and
options that cannot apply are refused (exit 2, one line) instead of silently ignored."""

from __future__ import annotations

import json

import pytest
from test_cli_bad_input import GOOD, err_of, one_line_error

from optsched.cli import main
from optsched.workloads import fit as fit_module
from optsched.workloads.fit import GroupFit

AZURE = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def azure(tmp_path, *rows):
    p = tmp_path / "azure.csv"
    p.write_text(AZURE + "".join(f"2023-11-16 18:15:{46 + k}.0,{i},{o}\n"
                                 for k, (i, o) in enumerate(rows)))
    return p


def test_simulate_trace_too_long_names_a_flag_simulate_has(capsys, tmp_path):
    # I + O - 1 = 10 + 5 - 1 = 14 > M = 12
    trace = azure(tmp_path, (3, 2), (10, 5))
    base = ["simulate", "--trace", trace, "--kv-capacity", 12, "--max-batch-tokens", 64,
            "--policy", "fcfs"]
    one_line_error(capsys, *base, match="--too-long drop or clip")
    # ... and simulate takes it: dropping leaves the one request that fits
    rc = main([str(a) for a in [*base, "--too-long", "drop", "--json"]])
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    assert rc == 0 and out["evaluation"]["metrics"]["requests"] == 1
    assert "optsched simulate: warning:" in cap.err and "dropped 1 request(s)" in cap.err


@pytest.mark.parametrize("opt, value", [("--block-size", "4"), ("--too-long", "drop"),
                                        ("--cost-model", "blis-llama3.1-8b-a100")])
def test_simulate_trace_options_without_trace_are_refused(capsys, opt, value):
    one_line_error(capsys, "simulate", GOOD, "--policy", "fcfs", opt, value,
                   match=f"{opt} only applies with --trace")


@pytest.mark.parametrize("opt, value", [("--zero-tokens", "clamp"), ("--too-long", "drop")])
def test_generate_family_refuses_trace_options(capsys, tmp_path, opt, value):
    one_line_error(capsys, "generate", "fixed", "--n", 2, "--prompt", 3, "--output", 2,
                   opt, value, "-o", tmp_path / "f.json", match=f"does not take {opt}")
    assert not (tmp_path / "f.json").exists()


def test_generate_refuses_to_write_zero_requests(capsys, tmp_path):
    trace = azure(tmp_path, (3, 2), (4, 2))
    out = tmp_path / "empty.json"
    one_line_error(capsys, "generate", "azure", "--trace", trace, "--window", "100:200",
                   "-o", out, match="no request left to write")
    assert not out.exists()


def test_poisson_trace_replacement_is_a_flag(capsys, tmp_path):
    trace = azure(tmp_path, (3, 2), (4, 2))
    base = ["generate", "poisson-trace", "--trace", trace, "--n", 5, "--rate", 1.0]
    one_line_error(capsys, *base, "-o", tmp_path / "p.json", match="(--replace;")
    assert main([str(a) for a in [*base, "--replace", "-o", tmp_path / "p.json"]]) == 0
    assert len(json.loads((tmp_path / "p.json").read_text())["requests"]) == 5


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


def test_kv_capacity_refuses_more_kv_heads_than_heads(capsys):
    one_line_error(capsys, "kv-capacity", "--params", "7e9", "--layers", 32, "--hidden", 4096,
                   "--gpu-mem-gb", 80, "--n-heads", 32, "--kv-heads", 64,
                   match="kv_heads 64 exceeds n_heads 32")
    rc, _ = err_of(capsys, "kv-capacity", "--params", "7e9", "--layers", 32, "--hidden", 4096,
                   "--gpu-mem-gb", 80, "--n-heads", 32, "--kv-heads", 8)
    assert rc == 0


def test_compare_refuses_duplicate_row_labels(capsys, tmp_path):
    sched = tmp_path / "s.json"
    assert main(["simulate", str(GOOD), "--policy", "fcfs", "-o", str(sched)]) == 0
    capsys.readouterr()
    report = tmp_path / "report"
    one_line_error(capsys, "compare", GOOD, "--policies", "fcfs,fcfs", "-o", report,
                   match="row label 'fcfs' is given twice")
    one_line_error(capsys, "compare", GOOD, "--policies", "fcfs", "--schedule", f"fcfs={sched}",
                   "-o", report, match="row label 'fcfs' is given twice")
    one_line_error(capsys, "compare", GOOD, "--schedule", f"x={sched}", "--schedule",
                   f"x={sched}", "-o", report, match="row label 'x' is given twice")
