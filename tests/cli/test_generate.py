"""CLI: optsched generate / info / fit / kv-capacity (exit 0 on success, 2 with one line)."""

import csv
import json

import pytest
from cli_helpers import one_line_error, run_cli
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


# --- cluster flags (docs/semantics.md section 6, "Clusters") --------------------------------


def test_generate_replicas_writes_identical_engines_and_the_load_per_replica(capsys, tmp_path):
    trace = azure(tmp_path, (30, 5), (40, 6), (50, 7), (60, 8))
    out = tmp_path / "c.json"
    rc, text, _ = run(capsys, "generate", "azure", "--trace", str(trace), "--replicas", "3",
                      "-o", str(out))
    inst = Instance.load(out)
    assert rc == 0 and [(e.id, e.role) for e in inst.cluster.engines] == \
        [("0", "both"), ("1", "both"), ("2", "both")]
    assert "3 identical engines" in text and "load per replica of 3:" in text
    # --load with --replicas is per replica: the one-engine load is 3 x 0.5 (scale_to_load
    # reaches the upper side exactly, so the printed one-engine load is 1.5)
    rc, text, _ = run(capsys, "generate", "azure", "--trace", str(trace), "--replicas", "3",
                      "--load", "0.5", "-o", str(out))
    assert rc == 0 and "offered load 1.5 " in text and " .. 0.5 (one engine's: 1.5)" in text
    rc, out_, err = run(capsys, "simulate", str(out), "--policy", "vllm", "--router", "lor",
                        "--json")
    per = json.loads(out_)["offered_load_per_replica"]
    assert rc == 0 and per["replicas"] == 3 and abs(per["point"] - 0.5) < 1e-9
    assert per["one_engine"]["point"] == per["point"] * 3
    assert "load per replica of 3:" in err


def test_generate_disaggregated_writes_the_default_link(capsys, tmp_path):
    out = tmp_path / "pd.json"
    rc, text, _ = run(capsys, "generate", "fixed", "--n", "3", "--prompt", "10", "--output",
                      "4", "--prefill-replicas", "1", "--decode-replicas", "2", "-o", str(out))
    c = Instance.load(out).cluster
    assert rc == 0 and [(e.id, e.role) for e in c.engines] == \
        [("p0", "prefill"), ("d0", "decode"), ("d1", "decode")]
    assert "load per GPU if the 3 engines were replicas: none" in text  # all at t = 0
    # the default preset's model, Llama-2-7B: 2 (K, V) x 32 layers x 4096 x 2 bytes; 25 GB/s
    assert (c.transfer.bytes_per_token, c.transfer.bandwidth, c.transfer.fixed) == \
        (2 * 32 * 4096 * 2, 25e9, 0.0)
    rc, _, _ = run(capsys, "generate", "fixed", "--n", "3", "--prompt", "10", "--output", "4",
                   "--cost-model", "unit", "--prefill-replicas", "2", "--decode-replicas", "1",
                   "--transfer-bytes-per-token", "2", "--transfer-bandwidth", "4",
                   "--transfer-fixed", "0.5", "-o", str(out))
    t = Instance.load(out).cluster.transfer
    assert rc == 0 and t.time(10) == 0.5 + 10 * 2 / 4


@pytest.mark.parametrize("args, match", [
    (["--replicas", "2", "--prefill-replicas", "1"], "not both"),
    (["--prefill-replicas", "1"], "go together"),
    (["--replicas", "0"], "--replicas must be an integer in 1..4096, got 0"),
    (["--decode-replicas", "1", "--prefill-replicas", "5000"], "--prefill-replicas must be"),
    (["--replicas", "2", "--transfer-fixed", "1"], "--transfer-fixed applies with"),
    (["--prefill-replicas", "1", "--decode-replicas", "1", "--transfer-bandwidth", "0"],
     "'bandwidth' must be a finite number"),
    (["--cost-model", "unit", "--prefill-replicas", "1", "--decode-replicas", "1"],
     "give --transfer-bytes-per-token"),
])
def test_bad_cluster_flags_are_one_line(capsys, tmp_path, args, match):
    one_line_error(capsys, "generate", "fixed", "--n", "2", "--prompt", "3", "--output", "2",
                   *args, "-o", str(tmp_path / "f.json"), match=match)
    assert not (tmp_path / "f.json").exists()


def test_a_kind_with_block_ids_refuses_a_prefill_decode_split(capsys, tmp_path):
    """Block ids on a P:D split: moving cached blocks between engines is not modelled."""
    one_line_error(capsys, "generate", "system-prompts", "--n", "6", "--rate", "5",
                   "--prefill-replicas", "1", "--decode-replicas", "1",
                   "-o", str(tmp_path / "s.json"), match="prefix reuse is modelled on replicas only")
    assert not (tmp_path / "s.json").exists()


def test_a_kind_with_block_ids_on_replicas_keeps_them(capsys, tmp_path):
    """Replicas with block ids: each engine its own cache (docs/semantics.md section 6)."""
    out = tmp_path / "s.json"
    rc, _, err = run_cli(capsys, "generate", "system-prompts", "--n", "6", "--rate", "5",
                         "--replicas", "2", "-o", str(out))
    assert rc == 0, err
    inst = Instance.load(out)
    assert inst.n_engines == 2 and inst.has_prefix
