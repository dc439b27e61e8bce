"""Bad input on the command line: one line on stderr naming the culprit, exit 2, and no work
done first (found by an audit that fed every command malformed files and options)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from optsched.cli import main

ROOT = Path(__file__).resolve().parents[1]
GOOD = ROOT / "instances" / "arrivals-unit-3.json"
N40 = ROOT / "instances" / "evidence" / "online-paper-n40-s1.json"


def err_of(capsys, *argv) -> tuple[int, str]:
    rc = main([str(a) for a in argv])
    err = capsys.readouterr().err.strip()
    return rc, err


def one_line_error(capsys, *argv, match: str) -> None:
    rc, err = err_of(capsys, *argv)
    assert rc == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and "Traceback" not in err and match in lines[0], err


def instance_with(tmp_path, **changes) -> Path:
    d = json.loads(GOOD.read_text())
    for path, value in changes.items():
        node = d
        *head, last = path.split("__")
        for k in head:
            node = node[int(k)] if k.isdigit() else node[k]
        node[last] = value
    f = tmp_path / "inst.json"
    f.write_text(json.dumps(d))
    return f


@pytest.mark.parametrize("opt, value, match", [
    ("--time-limit", "0", "time_limit must be > 0"),
    ("--threads", "0", "threads must be a positive integer"),
    ("--seed", "-1", "seed must be a non-negative integer"),
])
def test_solver_options_are_checked(capsys, opt, value, match):
    one_line_error(capsys, "solve", GOOD, opt, value, match=match)


def test_output_paths_are_checked_before_any_work(capsys, tmp_path):
    one_line_error(capsys, "solve", GOOD, "-o", tmp_path / "no" / "s.json", match="does not exist")
    one_line_error(capsys, "solve", GOOD, "-o", tmp_path, match="is a directory")
    one_line_error(capsys, "simulate", GOOD, "--policy", "fcfs", "-o", tmp_path, match="is a directory")
    one_line_error(capsys, "solve", GOOD, "--log", tmp_path / "no" / "log.txt", match="does not exist")
    afile = tmp_path / "a.json"
    afile.write_text("{}")
    one_line_error(capsys, "compare", GOOD, "--policies", "fcfs", "-o", afile,
                   match="exists and is not a directory")
    one_line_error(capsys, "plot", GOOD, afile, "-o", afile / "x.png", match="is not a directory")


def test_plot_output_format(capsys, tmp_path):
    sched = tmp_path / "s.json"
    assert main(["simulate", str(GOOD), "--policy", "fcfs", "-o", str(sched)]) == 0
    capsys.readouterr()
    one_line_error(capsys, "plot", GOOD, sched, "-o", tmp_path / "x.txt",
                   match="format 'txt' is not supported")
    one_line_error(capsys, "plot", GOOD, sched, "-o", tmp_path / "x.png", "--max-rows", "-5",
                   match="--max-rows must be >= 0")
    assert main(["plot", str(GOOD), str(sched), "-o", str(tmp_path / "noext")]) == 0
    assert f"figure written to {tmp_path / 'noext.png'}" in capsys.readouterr().out
    assert (tmp_path / "noext.png").stat().st_size > 0


@pytest.mark.parametrize("text, match", [
    ('{"batches": [{"entries": [["a", 2]], "evict": null}]}', "'evict' must be a list"),
    ('{"batches": [{"entries": [["a", 2]], "evict": 5}]}', "'evict' must be a list"),
    ('{"batches": [5]}', "batch 0: expected an object with 'entries'"),
    ('{"batches": [null]}', "batch 0: expected an object with 'entries'"),
    ('{"batches": [{"entries": [["a", 1000000000000000000000000000000]]}]}', "out of range"),
])
def test_malformed_schedule_json(capsys, tmp_path, text, match):
    f = tmp_path / "s.json"
    f.write_text(text)
    one_line_error(capsys, "validate", GOOD, f, match=match)


def test_malformed_schedule_files(capsys, tmp_path):
    latin = tmp_path / "l.json"
    latin.write_bytes(b'{"batches": "\xe9"}')
    one_line_error(capsys, "validate", GOOD, latin, match="not a UTF-8 JSON schedule")
    empty = tmp_path / "e.npz"
    empty.write_bytes(b"")
    one_line_error(capsys, "validate", GOOD, empty, match="unreadable npz schedule")
    strs = tmp_path / "s.npz"
    np.savez(strs, ids=np.array(["a"]), batch_ptr=np.array([0, 1]), entry_req=np.array([0]),
             entry_tokens=np.array(["x"]), evict_ptr=np.array([0, 0]),
             evict_req=np.zeros(0, np.int64), start=np.array([np.nan]))
    one_line_error(capsys, "validate", GOOD, strs, match="entry_tokens must hold numbers")
    missing = tmp_path / "m.npz"
    np.savez(missing, ids=np.array(["a"]))
    rc, err = err_of(capsys, "validate", GOOD, missing)
    assert rc == 2 and err.count(str(missing)) == 1 and "lacks arrays" in err


@pytest.mark.parametrize("changes, match", [
    ({"limits__kv_capacity": 2**63}, "'kv_capacity' must be an integer in 1..1099511627776"),
    ({"requests__0__prompt": 10**25}, "'prompt' must be an integer in 1..1099511627776"),
    ({"requests__1__arrival": 1e19}, "'arrival' must be a finite number in [0, 1e+12]"),
    ({"cost_model": {"preset": ["x"]}}, "'preset' must be a preset name"),
    ({"cost_model": {"kind": "linear", "k0": 1e308}}, "coefficient k0 must be a finite number of at most"),
    ({"cost_model": {"kind": "linear", "k0": 1.0, "preset": "whatever"}}, "unknown preset label 'whatever'"),
])
def test_out_of_range_instances(capsys, tmp_path, changes, match):
    one_line_error(capsys, "info", instance_with(tmp_path, **changes), match=match)


def test_preset_label_must_match_its_coefficients(capsys, tmp_path):
    from optsched.cost import PRESETS

    d = PRESETS["infermax-llama2-7b-a100"].to_dict()
    d["k0"] *= 2
    one_line_error(capsys, "info", instance_with(tmp_path, cost_model=d),
                   match="differ from preset 'infermax-llama2-7b-a100'")


def test_non_utf8_instance(capsys, tmp_path):
    f = tmp_path / "x.json"
    f.write_bytes(b'{"name": "\xe9"}')
    one_line_error(capsys, "info", f, match="not a UTF-8 JSON instance")


@pytest.mark.parametrize("formulation, param, match", [
    ("infermax", "batches=abc", "batches must be an integer, got 'abc'"),
    ("infermax", "batches=0", "batches must be an integer in 1..100000"),
    ("infermax", "slack=-1", "slack must be an integer in 0..100000"),
    ("hindsight", "horizon=abc", "horizon must be an integer"),
    ("hindsight", "max_rounds=-1", "max_rounds must be an integer >= 0"),
    ("hindsight", "aggregate=maybe", "aggregate must be true or false"),
    ("exhaustive", "max_states=2.5", "max_states must be an integer >= 1"),
])
def test_formulation_params_are_checked(capsys, formulation, param, match):
    one_line_error(capsys, "solve", GOOD, "--formulation", formulation, "--param", param, match=match)


def test_negative_seeds(capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:  # argparse rejects it while parsing
        main(["generate", "mix", "-o", str(tmp_path / "g.json"), "--n", "4", "--mix", "SISO",
              "--seed", "-1"])
    assert exc.value.code == 2 and "--seed: expected an integer >= 0" in capsys.readouterr().err
    one_line_error(capsys, "simulate", GOOD, "--policy", "alpha-beta-clearing", "--param", "seed=-1",
                   match="seed must be >= 0")


def test_hindsight_refuses_a_time_line_it_cannot_allocate(capsys, tmp_path):
    f = instance_with(tmp_path, requests__1__arrival=1.7e9)  # an epoch timestamp
    one_line_error(capsys, "solve", f, "--formulation", "hindsight", match="at most 1,000,000")


def test_exhaustive_stops_inside_one_huge_expansion():
    """n = 40: a single expansion enumerates more batches than any time limit allows; the search
    notices the limit while enumerating (it used to finish the expansion first, for minutes)."""
    from optsched.formulations import SolveOptions
    from optsched.instance import Instance
    from optsched.solving import solve

    rep = solve(Instance.load(N40), "exhaustive", "total-latency",
                options=SolveOptions(time_limit=1, progress=False), warm_start=None)
    assert rep.status == "no_solution"
    assert "time limit 1 s reached after 1 expanded" in rep.message


def test_infeasible_warm_start_is_reported_as_unused(capsys, tmp_path):
    f = tmp_path / "bad.json"
    f.write_text('{"batches": [{"entries": [["a", 2]]}]}')
    assert main(["solve", str(GOOD), "--warm-start", str(f)]) == 0
    assert "infeasible, so not used" in capsys.readouterr().out
