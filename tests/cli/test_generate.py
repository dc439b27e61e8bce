"""CLI: optsched generate / info / fit / kv-capacity (exit 0 on success, 2 with one line)."""

import csv
import json

import pytest
from cli_helpers import one_line_error
from paths import SHARED_DATA
from trace_files import azure

from optsched.cli import main
from optsched.instance import Instance
from optsched.workloads.fit import fit_linear_cost

DATA = SHARED_DATA
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared data not found at {DATA}")


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_list(capsys):
    rc, out, _ = run(capsys, "generate", "--list")
    assert rc == 0 and "online-paper" in out and "azure" in out and "mix" in out


def test_generate_and_info(tmp_path, capsys):
    f = tmp_path / "m.json"
    rc, out, _ = run(capsys, "generate", "mix", "--mix", "LISO", "--n", "6", "--seed", "2",
                     "-o", str(f))
    assert rc == 0 and Instance.load(f).n == 6
    rc, out, _ = run(capsys, "info", str(f))
    assert rc == 0 and "6 requests, offline" in out and "prompt" in out
    rc, out, _ = run(capsys, "info", str(f), "--json")
    d = json.loads(out)
    assert d["requests"] == 6 and d["mode"] == "offline" and d["output"]["max"] <= 16
    f2 = tmp_path / "p.json"
    rc, _, _ = run(capsys, "generate", "online-paper", "--n", "5", "--arrival", "poisson",
                   "--rate", "1", "-o", str(f2))
    assert rc == 0 and Instance.load(f2).cost_model.to_dict() == {"kind": "unit", "kswap": 0.0, "rho": 0.0}


@pytest.mark.parametrize("argv,msg", [
    (["generate", "fixed", "--n", "2", "-o", "X"], "missing parameter 'prompt'"),
    (["generate", "mix", "--mix", "SISO", "--n", "2", "--prompt", "3", "-o", "X"],
     "does not take --prompt"),
    (["generate", "nope", "-o", "X"], "unknown kind"),
    (["generate", "fixed", "--n", "2", "--prompt", "1", "--output", "1"], "-o FILE"),
    (["generate", "online-paper", "--n", "2", "--kv-capacity", "9", "-o", "X"],
     "fixes its own limits"),
    (["generate", "fixed", "--n", "1", "--prompt", "9", "--output", "9", "--cost-model", "zz",
      "-o", "X"], "unknown preset"),
    (["info", "no-such-instance.json"], "no such instance"),
    (["kv-capacity", "--params", "70e9", "--layers", "80", "--hidden", "8192",
      "--gpu-mem-gb", "80"], "not one token"),
    (["fit", "--profiling", "/nonexistent"], "cannot read profiling file"),
])
def test_bad_input_exit_2(tmp_path, capsys, monkeypatch, argv, msg):
    monkeypatch.chdir(tmp_path)
    rc, _, err = run(capsys, *argv)
    assert rc == 2 and msg in err and len(err.strip().splitlines()) == 1


@needs_data
def test_generate_azure(tmp_path, capsys):
    f = tmp_path / "a.json"
    trace = str(DATA / "traces" / "AzureLLMInferenceTrace_conv.csv")
    rc, _, _ = run(capsys, "generate", "azure", "--trace", trace, "--sample", "50", "--seed",
                   "3", "--window", "0:1800", "--rate-scale", "2", "--cost-model", "unit",
                   "-o", str(f))
    inst = Instance.load(f)
    assert rc == 0 and inst.n == 50 and inst.arrival.max() < 900
    assert all(r.id.startswith("r") for r in inst.requests)
    rc, _, err = run(capsys, "generate", "vidur", "--trace",
                     str(DATA / "traces" / "splitwise_conv.csv"), "--kv-capacity", "2000",
                     "-o", str(f))
    assert rc == 2 and "exceeds kv_capacity M = 2000" in err
    rc, _, err = run(capsys, "generate", "vidur", "--trace",
                     str(DATA / "traces" / "splitwise_conv.csv"), "--kv-capacity", "2000",
                     "--too-long", "drop", "--limit", "50", "-o", str(f))
    with open(DATA / "traces" / "splitwise_conv.csv") as fh:
        head = list(csv.DictReader(fh))[:50]
    too_long = sum(int(r["num_prefill_tokens"]) + int(r["num_decode_tokens"]) - 1 > 2000 for r in head)
    assert too_long > 0  # the row limit keeps some requests the drop must remove
    assert rc == 0 and f"dropped {too_long}" in err and Instance.load(f).n == 50 - too_long


@needs_data
def test_fit_and_kv_capacity(capsys):
    rc, out, _ = run(capsys, "fit", "--profiling", str(DATA / "profiling"), "--model",
                     "Llama-2-7b-hf", "--gpu", "a100", "--json")
    d = json.loads(out)
    assert rc == 0 and d["cost_model"]["kind"] == "linear" and len(d["groups"]) == 3
    # the command prints what the library's fit computes, coefficient by coefficient
    ref = fit_linear_cost(DATA / "profiling", "Llama-2-7b-hf", "a100", 1)
    for k, v in ref.cost.coefficients.items():
        assert d["cost_model"][k] == pytest.approx(v, rel=1e-12), k
    assert [(g["name"], g["n_rows"]) for g in d["groups"]] == [(g.name, g.n_rows) for g in ref.groups]
    rc, out, _ = run(capsys, "fit", "--profiling", str(DATA / "profiling"))
    assert rc == 0 and "InferMax ref" in out and "RMSE" in out
    rc, out, _ = run(capsys, "kv-capacity", "--params", "70e9", "--layers", "80", "--hidden",
                     "8192", "--dtype-bytes", "2", "--gpu-mem-gb", "80", "--gpus", "2")
    assert rc == 0 and out.startswith("7629 tokens")


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
