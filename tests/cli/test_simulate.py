"""``optsched simulate -o``: the schedule's file format (large schedules as .npz by
default, JSON on request)."""

from __future__ import annotations

import json

import pytest
from cli_helpers import USER_POLICIES, one_line_error, one_line_error_no_stdout
from paths import GOOD
from trace_files import azure

from optsched.cli import main
from optsched.cli import simulate as sim_cli
from optsched.evaluation import evaluate
from optsched.instance import Instance
from optsched.schedule import Schedule
from optsched.workloads.generators import DEFAULT_KV_CAPACITY, DEFAULT_MAX_BATCH_TOKENS


def _run(capsys, out):
    assert main(["simulate", str(GOOD), "--policy", "fcfs", "-o", str(out)]) == 0
    return capsys.readouterr()


def test_no_suffix_small_schedule_is_json(capsys, tmp_path):
    cap = _run(capsys, tmp_path / "s")
    assert (tmp_path / "s.json").is_file() and not (tmp_path / "s").exists()
    assert "has no suffix; writing" in cap.err and "s.json" in cap.out


def test_no_suffix_large_schedule_is_npz_and_evaluates_the_same(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(sim_cli, "JSON_SCHEDULE_LIMIT", 1)  # every schedule counts as large
    cap = _run(capsys, tmp_path / "s")
    assert (tmp_path / "s.npz").is_file() and "s.npz" in cap.err
    _run(capsys, tmp_path / "ref.json")  # an explicit suffix is kept, whatever the size
    inst = Instance.load(GOOD)
    a, b = Schedule.load(tmp_path / "s.npz"), Schedule.load(tmp_path / "ref.json")
    assert a == b and evaluate(inst, a).metrics == evaluate(inst, b).metrics


@pytest.mark.parametrize("name, match", [
    ("Fractional", "must be integers"),
    ("NoHook", "does not define on_arrivals, on_batch_end"),
])
def test_user_policy_mistakes_exit_2_from_the_cli(tmp_path, capsys, name, match):
    f = tmp_path / "mine.py"
    f.write_text(USER_POLICIES)
    one_line_error_no_stdout(capsys, "simulate", GOOD, "--policy", f"{f}:{name}", match=match)


def test_policy_file_without_class_suggests_the_form(tmp_path, capsys):
    f = tmp_path / "mine.py"
    f.write_text(USER_POLICIES)
    line = one_line_error_no_stdout(capsys, "simulate", GOOD, "--policy", str(f), match=f"{f}:")
    assert "Fractional" in line and "NoHook" in line


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


def test_simulate_trace_takes_generates_limits(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                     "2023-11-16 18:15:46.6805900,30,4\n2023-11-16 18:15:47.0,20,3\n")
    rc = main(["simulate", "--trace", str(trace), "--policy", "vllm", "--json"])
    out, err = capsys.readouterr()
    d = json.loads(out)
    assert rc == 0 and d["evaluation"]["feasible"]
    assert f"--kv-capacity {DEFAULT_KV_CAPACITY}" in err
    assert f"--max-batch-tokens {DEFAULT_MAX_BATCH_TOKENS}" in err


def test_cli_hidden_cache_flag_enables_it_on_a_trace(tmp_path):
    import json
    import subprocess
    import sys

    csv = tmp_path / "t.csv"
    csv.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                   + "".join(f"2023-11-16 18:15:{k:02d}.0,{6 + k % 3},{2 + k % 2}\n"
                             for k in range(8)))
    base = [sys.executable, "-m", "optsched", "simulate", "--trace", str(csv), "--kv-capacity",
            "12", "--max-batch-tokens", "64", "--policy", "aptserve", "--json"]
    for flag, on in (([], False), (["--hidden-cache"], True)):
        out = subprocess.run(base + flag, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        metrics = json.loads(out.stdout)["evaluation"]["metrics"]
        # the hidden-cache metrics are reported exactly when the instance enables it
        assert ("hidden_entries" in metrics) is on


# --- --router / --replicas (docs/semantics.md section 6, "Clusters") -----------------------


def test_replicas_and_router_write_a_cluster_schedule_the_evaluator_accepts(capsys, tmp_path):
    from optsched.cluster import replicate

    out = tmp_path / "s.json"
    assert main(["simulate", str(GOOD), "--policy", "vllm", "--replicas", "2", "--router",
                 "lor", "--json", "-o", str(out)]) == 0
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    assert doc["router"] == "lor" and doc["evaluation"]["feasible"]
    # the offered load is one engine's; identical replicas get it per replica
    assert doc["offered_load"] is None and "load per replica of 2:" in cap.err
    assert doc["offered_load_per_replica"]["replicas"] == 2
    assert [e["id"] for e in doc["evaluation"]["engines"]] == ["0", "1"]
    inst = replicate(Instance.load(GOOD), 2)
    assert evaluate(inst, Schedule.load(out)).feasible
    path = tmp_path / "c.json"
    path.write_text(inst.to_json())
    assert main(["simulate", str(path), "--policy", "vllm", "--router", "rr"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("args, match", [
    (["--router", "nope"], "unknown router 'nope'"),
    (["--replicas", "0"], "replicas must be an integer"),
    (["--replicas", "2", "--router", "pd"], "router 'pd' needs a cluster of 'prefill' and"),
])
def test_bad_router_input_is_one_line(capsys, args, match):
    one_line_error_no_stdout(capsys, "simulate", str(GOOD), "--policy", "vllm", *args,
                             match=match)


# --- the offered load above LOAD_MAX_REQUESTS ---------------------------------------------


def test_the_offered_load_of_a_large_instance_is_computed_on_request(capsys, monkeypatch):
    from optsched.serving.load import offered_load

    monkeypatch.setattr(sim_cli, "LOAD_MAX_REQUESTS", 1)  # GOOD counts as large
    assert main(["simulate", str(GOOD), "--policy", "fcfs", "--json"]) == 0
    cap = capsys.readouterr()
    doc = json.loads(cap.out)
    assert doc["offered_load"] is None and "not computed" in doc["offered_load_note"]
    assert "offered load: not computed" in cap.err and "--load" in cap.err
    assert main(["simulate", str(GOOD), "--policy", "fcfs", "--json", "--load"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "offered_load_note" not in doc
    assert doc["offered_load"] == offered_load(Instance.load(GOOD)).to_dict()


def test_prefix_router_on_replicas_of_a_block_id_instance(capsys, tmp_path):
    # four requests sharing blocks 1, 2 (b = 4) on 2 replicas: vllm-apc behind the prefix
    # router, one JSON document, feasible by the evaluator, hits on the engines' own caches
    from optsched.cluster import replicate
    from optsched.cost import UnitCost
    from optsched.instance import Limits, Request

    inst = Instance("p", Limits(64, 64, block_size=4), UnitCost(),
                    tuple(Request(f"r{k}", k, 10, 2, prefix=(1, 2)) for k in range(4)))
    f = tmp_path / "p.json"
    inst.save(f)
    assert main(["simulate", str(f), "--policy", "vllm-apc", "--replicas", "2",
                 "--router", "prefix", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    ev = doc["evaluation"]
    assert ev["feasible"] and ev["metrics"]["engines"] == 2
    assert ev["metrics"]["hit_tokens"] > 0
    assert evaluate(replicate(inst, 2), Schedule.from_dict(doc["schedule"])).feasible
