"""The offered load in the command line (optsched/cli/_common.py ``say_load``,
``command_load``; docs/semantics.md section 4): ``info`` and every report show it (one line on
stderr, a field in JSON), commands warn when an instance is overloaded, and ``generate`` takes
a target ``--load`` for traces and for every kind with arrivals."""

from __future__ import annotations

import json

import pytest

from optsched.cli import main
from optsched.cost import UnitCost
from optsched.instance import Instance, Limits, Request
from optsched.serving.load import offered_load


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def overloaded(tmp_path):
    """I = 1, O = 1, C = M = 4, unit time: at most 4 requests a step (certified: a batch holds
    at most 4 tokens), and 12 arrive 0.1 steps apart, lambda = 10: load >= 2.5, certified."""
    reqs = tuple(Request(f"r{k}", 0.1 * k, 1, 1) for k in range(12))
    f = tmp_path / "over.json"
    Instance("over", Limits(kv_capacity=4, max_batch_tokens=4), UnitCost(), reqs).save(f)
    return f


def _says_overloaded(err: str, command: str) -> None:
    assert f"optsched {command}: offered load" in err and "OVERLOADED (certified)" in err
    assert (f"optsched {command}: warning: the instance is overloaded (certified: load >= 2.5)"
            f": latency grows with the window's length; see --load") in err


def test_info_shows_the_load_and_warns(capsys, overloaded):
    rc, out, err = run(capsys, "info", overloaded)
    assert rc == 0 and "offered load 2.5" in out and "OVERLOADED (certified)" in out
    assert err.strip() == ("optsched info: warning: the instance is overloaded (certified: load "
                           ">= 2.5): latency grows with the window's length; see --load")
    rc, out, _ = run(capsys, "info", overloaded, "--json")
    d = json.loads(out)["offered_load"]
    assert d["status"] == "overloaded" and d["overloaded"] is True
    assert d["lower"] == pytest.approx(2.5) and d["upper"] == pytest.approx(2.5)


@pytest.mark.parametrize("argv", [
    ("simulate", "{f}", "--policy", "vllm", "--json"),
    ("evaluate", "{f}", "{s}", "--json"),
    ("bound", "{f}", "--objective", "total-latency", "--method", "work", "--json"),
    ("solve", "{f}", "--formulation", "exhaustive", "--objective", "total-latency",
     "--time-limit", "20", "--json"),
])
def test_every_report_says_the_load_and_warns(capsys, tmp_path, overloaded, argv):
    sched = tmp_path / "v.json"
    assert run(capsys, "simulate", overloaded, "--policy", "vllm", "-o", sched)[0] == 0
    rc, out, err = run(capsys, *(a.format(f=overloaded, s=sched) for a in argv))
    assert rc == 0, err
    _says_overloaded(err, argv[0])
    d = json.loads(out)
    assert d["offered_load"]["status"] == "overloaded"


def test_compare_report_carries_the_load(capsys, tmp_path, overloaded):
    rc, _, err = run(capsys, "compare", overloaded, "--policies", "vllm,sarathi", "--no-gantt",
                     "--objective", "total-latency", "-o", tmp_path / "rep")
    assert rc == 0
    _says_overloaded(err, "compare")
    rep = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert rep["offered_load"]["status"] == "overloaded"
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "OVERLOADED (certified)" in md and "see --load" in md


def test_a_stable_instance_gets_no_warning(capsys, tmp_path):
    reqs = tuple(Request(f"r{k}", 2.0 * k, 1, 1) for k in range(12))  # lambda 0.5 vs mu 4
    f = tmp_path / "calm.json"
    Instance("calm", Limits(kv_capacity=4, max_batch_tokens=4), UnitCost(), reqs).save(f)
    rc, _, err = run(capsys, "simulate", f, "--policy", "vllm")
    assert rc == 0 and "offered load 0.125" in err and ": stable" in err
    assert "warning" not in err


def _azure_csv(path, n=300):
    """A small Azure-format trace: a request every 0.05 s, prompts 200-1,200, outputs 20-220."""
    rows = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for k in range(n):
        sec = 0.05 * k
        rows.append(f"2023-11-16 18:{int(sec // 60):02d}:{sec % 60:010.7f},"
                    f"{200 + (k * 37) % 1000},{20 + (k * 53) % 200}")
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("target", [0.7, 1.5])
def test_generate_trace_at_a_load(capsys, tmp_path, target):
    trace = _azure_csv(tmp_path / "t.csv")
    f = tmp_path / "w.json"
    rc, out, err = run(capsys, "generate", "azure", "--trace", trace, "--kv-capacity", 30000,
                       "--max-batch-tokens", 8192, "--load", target, "-o", f)
    assert rc == 0, err
    load = offered_load(Instance.load(f))
    assert load.point == pytest.approx(target, rel=1e-6) and load.lower <= target * (1 + 1e-9)
    assert f"offered load {target:.3g}" in out
    assert ("see --load" in err) == (target > 1)


def test_generate_family_at_a_load(capsys, tmp_path):
    f = tmp_path / "c.json"
    rc, out, err = run(capsys, "generate", "chat-like", "--n", 150, "--seed", 3, "--load", 0.5,
                       "-o", f)
    assert rc == 0, err
    assert offered_load(Instance.load(f)).point == pytest.approx(0.5, rel=0.005)
    g = tmp_path / "p.json"  # unit time, Poisson counts per round: redrawn with the rate
    rc, out, err = run(capsys, "generate", "online-paper", "--n", 12, "--arrival", "poisson",
                       "--load", 0.8, "-o", g)
    assert rc == 0, err
    reached = offered_load(Instance.load(g)).point
    # within 2% silently (LOAD_MISS), else said
    assert (abs(reached - 0.8) <= 0.02 * 0.8 and "warning" not in err) or (
        f"the load reached is {reached:.3g}" in err and "give --rate" in err), (reached, err)


@pytest.mark.parametrize("argv,msg", [
    (["generate", "fixed", "--n", "2", "--prompt", "3", "--output", "2", "--load", "0.7"],
     "has no arrival rate to set"),
    (["generate", "online-paper", "--n", "5", "--load", "0.7"], "give --arrival poisson"),
    (["generate", "chat-like", "--n", "5", "--rate", "2", "--load", "0.7"], "drop --rate"),
    (["generate", "chat-like", "--n", "5", "--load", "0"], "--load must be a finite number > 0"),
    (["generate", "azure", "--trace", "T", "--rate-scale", "2", "--load", "0.7"],
     "drop --rate-scale"),
])
def test_load_bad_input_is_one_line(capsys, tmp_path, argv, msg):
    rc, _, err = run(capsys, *argv, "-o", tmp_path / "x.json")
    assert rc == 2 and msg in err and len(err.strip().splitlines()) == 1, err
