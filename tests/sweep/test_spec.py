"""Bad sweep specs: exit 2 and one line on stderr naming the key; good specs expand right."""

from __future__ import annotations

import json

import pytest
from paths import REPO, SHARED_DATA
from sweep_helpers import TINY, cli, rows, run_json, write_spec

from optsched.cli import main
from optsched.sweep import expand, load_spec, parse_spec
from optsched.sweep.spec import SpecError

pytest.importorskip("pyarrow", reason="sweeps need pyarrow (pip install 'optsched[sweep]')")

BAD = [
    # (what is wrong, text replaced in TINY, replacement, words the one-line error must contain)
    ("unknown generator", 'generator = "online-paper"', 'generator = "online-papr"',
     ["instances[0].generator", "unknown generator 'online-papr'", "online-paper"]),
    ("unknown policy", 'policy = "fcfs"', 'policy = "fcsf"',
     ["methods[1].policy", "unknown policy 'fcsf'"]),
    ("list where a scalar is needed", "time_limit = 20", "time_limit = [10, 20]",
     ["methods[2].time_limit", "expected a number, got a list"]),
    ("missing sweep name", 'name = "tiny"', "", ["sweep.name: missing"]),
    ("missing generator parameter", "n = [4, 5]", "", ["instances[0].n: missing"]),
    ("unknown key", "time_limit = 20", "time_limt = 20", ["methods[2].time_limt: unknown key"]),
    ("unknown formulation", 'formulation = "hindsight"', 'formulation = "hindsite"',
     ["methods[2].formulation", "unknown formulation 'hindsite'"]),
    ("bad policy parameter", 'policy = "mcsf"', 'policy = "mcsf"\nparams = {nope = 1}',
     ["methods[0].params", "unknown parameter 'nope'"]),
    ("bad generator value", "n = [4, 5]", "n = [4, 0]", ["instances[0]", "n must be an integer >= 1"]),
    ("choice not allowed", "n = [4, 5]", 'n = [4, 5]\narrival = "sometimes"',
     ["instances[0].arrival", "'sometimes' is not one of offline, poisson"]),
    ("not TOML", "[sweep]", "[sweep", ["not valid TOML"]),
    ("negative seed", "seeds = [0, 1]", "seeds = [0, -1]", ["sweep.seeds[1]", ">= 0"]),
    ("seeds and trials", "seeds = [0, 1]", "seeds = [0, 1]\ntrials = 3", ["sweep.trials"]),
]


@pytest.mark.parametrize("what,old,new,words", BAD, ids=[b[0] for b in BAD])
def test_bad_spec_exit_2_one_line_naming_the_key(tmp_path, capsys, what, old, new, words):
    assert old in TINY
    spec = write_spec(tmp_path, TINY.replace(old, new, 1))
    code = main(["sweep", "run", str(spec), "-o", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    assert "Traceback" not in err
    for w in words:
        assert w in err, (w, err)
    assert not (tmp_path / "out" / "cells").exists()  # checked before any work


def test_bound_method_without_bounds_module_is_a_clear_error(tmp_path, capsys):
    import importlib.util

    text = TINY + '\n[[methods]]\nbound = "best"\n'
    spec = write_spec(tmp_path, text)
    code = main(["sweep", "run", str(spec), "-o", str(tmp_path / "out"), "--dry-run"])
    err = capsys.readouterr().err.strip()
    if importlib.util.find_spec("optsched.bounds") is None:
        assert code == 2 and "methods[3].bound" in err and "optsched.bounds" in err, err
    else:  # the bound ladder is installed: the method resolves through its registry
        assert code == 0, err


def test_expansion_is_instances_x_seeds_x_methods():
    spec = parse_spec(TINY)
    cells = expand(spec)
    # 2 values of n x 2 seeds = 4 instances, x 3 methods
    assert len(cells) == 2 * 2 * 3
    assert len({c.key for c in cells}) == len(cells)
    assert {(c.instance.n, c.seed) for c in cells} == {(4, 0), (4, 1), (5, 0), (5, 1)}
    from optsched.workloads.generators import online_paper_random

    c = next(c for c in cells if c.instance.n == 5 and c.seed == 1)
    assert c.instance == online_paper_random(5, 1)


def test_keys_follow_content_not_names():
    a = expand(parse_spec(TINY))
    b = expand(parse_spec(TINY.replace('name = "tiny"', 'name = "other"')))
    assert [c.key for c in a] == [c.key for c in b]
    c = expand(parse_spec(TINY.replace("time_limit = 20", "time_limit = 21")))
    changed = {x.key for x in c} - {x.key for x in a}
    assert len(changed) == 4  # the hindsight cells only (4 instances)


def test_trials_and_file_instances(tmp_path):
    from optsched.workloads.generators import online_paper_random

    online_paper_random(3, 7).save(tmp_path / "x.json")
    text = TINY.replace("seeds = [0, 1]", "trials = 3") + '\n[[instances]]\nfile = "x.json"\n'
    spec = load_spec(write_spec(tmp_path, text))
    assert spec.seeds == (0, 1, 2)
    cells = expand(spec)
    assert len(cells) == (2 * 3 + 1) * 3
    assert sum(c.seed is None for c in cells) == 3


def test_duplicate_labels_are_refused():
    text = TINY + '\n[[methods]]\npolicy = "mcsf"\nparams = {}\n'
    with pytest.raises(SpecError, match=r"methods\[3\].label"):
        parse_spec(text)


def test_duplicate_keys_in_a_sweep_spec_are_named(tmp_path):
    from optsched.sweep.spec import SpecError, parse_spec

    with pytest.raises(SpecError, match="duplicate key 'name'"):
        parse_spec('[sweep]\nname = "a"\nname = "b"\n')


SWEEPS = REPO / "sweeps"


#: spec -> cells: instances x methods, counted from each spec's grid by hand
EXPECTED = {
    "online-paper.toml": 2 * 3 * 200 * 4,      # 2 arrival models x n in {40,50,60} x 200 seeds x 4
    "online-paper-bounds.toml": 2 * 3 * 200 * 3,  # the same grid x (mcsf, fcfs, bound)
    "online-paper-fast.toml": 2 * 1 * 3 * 4,   # 2 arrival models x n = 6 x 3 seeds x 4 methods
    "infermax-mixes.toml": 4 * 2 * 5 * 10,     # 4 mixes x 2 capacities x 5 seeds x 10 methods
    "cluster-routers.toml": 3 * 3 * 5,         # R in {2,4,8} x 3 loads x (4 routers + bound)
    "cluster-routers-azure.toml": 3 * 3 * 5,   # the same grid on one seeded trace window
}
#: specs that read the shared data through ``${OPTSCHED_DATA}``
NEEDS_DATA = {"cluster-routers-azure.toml"}


def test_every_shipped_spec_is_listed_here():
    assert sorted(p.name for p in SWEEPS.glob("*.toml")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_shipped_spec_expands(name, monkeypatch):
    from optsched.sweep import expand, load_spec

    if name in NEEDS_DATA:
        if not (SHARED_DATA / "traces").is_dir():
            pytest.skip(f"needs the shared data ({SHARED_DATA})")
        monkeypatch.setenv("OPTSCHED_DATA", str(SHARED_DATA))

    cells = expand(load_spec(SWEEPS / name))
    assert len(cells) == EXPECTED[name]
    assert len({c.key for c in cells}) == len(cells)


@pytest.mark.slow
def test_fast_online_paper_runs_and_reports(tmp_path):
    out = tmp_path / "out"
    s = run_json("sweep", "run", str(SWEEPS / "online-paper-fast.toml"), "-o", str(out), "--workers", "2")
    assert (s["cells"], s["computed"], s["failed"]) == (24, 24, 0)
    rs = rows(out)
    assert {r["status"] for r in rs if r["method_kind"] == "formulation"} == {"optimal"}
    r = cli("sweep", "report", str(out), "--json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    m = {x["method"]: x for x in rep["methods"]}
    # the hindsight IP solves a restricted model (no preemption, unit slots): its optimum is
    # labelled as such, never as the optimum of docs/semantics.md
    assert rep["references"]["restricted optimum"] == 6 and rep["references"]["optimum"] == 0
    # MC-SF's schedules belong to the hindsight IP's model, so the IP's optimum bounds them
    assert m["mcsf"]["below_reference"] == 0 and m["mcsf"]["ratio"]["mean"] >= 1
    # the certified bound is below every schedule, the restricted IP's optimum included
    bounds = {r["instance_hash"]: r["bound"] for r in rs if r["method_kind"] == "bound"}
    assert len(bounds) == 6
    for r in rs:
        if r["objective"] is not None:
            assert bounds[r["instance_hash"]] <= r["objective"] + 1e-9, r
