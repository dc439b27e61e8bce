"""Clusters in a sweep: ``replicas`` / ``prefill_replicas`` + ``decode_replicas`` / ``load``
rows, trace rows, ``router`` on policy methods and the ``cluster`` bound; a tiny cluster
sweep on the local pool, each row checked against the same cell computed directly."""

from __future__ import annotations

import json
import warnings

import pytest

from optsched.sweep.cells import expand
from optsched.sweep.spec import SpecError, parse_spec

pytest.importorskip("pyarrow", reason="sweeps need pyarrow (pip install 'optsched[sweep]')")

BASE = """
[sweep]
name = "tiny-cluster"
seeds = [0]
objective = "total-latency"

[[instances]]
generator = "chat-like"
n = {n}
rate = 40.0
kv_capacity = 30000
max_batch_tokens = 8192
cost_model = "infermax-llama2-7b-a100"
{cluster}

{methods}
"""
ROUTED = """
[[methods]]
policy = "vllm"
router = "lor"

[[methods]]
policy = "vllm"
router = "rr"

[[methods]]
bound = "cluster"
"""


def spec(cluster: str = "replicas = [2, 3]\nload = 0.8", methods: str = ROUTED, n: int = 12):
    return parse_spec(BASE.format(cluster=cluster, methods=methods, n=n), source="t.toml")


def test_cluster_keys_grid_and_router_label():
    s = spec()
    assert dict(s.instances[0].grid)["replicas"] == (2, 3)
    assert [m.label for m in s.methods] == ["vllm/lor", "vllm/rr", "bound:cluster"]
    cells = expand(s)
    assert len(cells) == 2 * 3
    assert sorted({c.instance.n_engines for c in cells}) == [2, 3]
    assert all(c.describe()["load"] == 0.8 for c in cells)


def test_a_replica_carries_the_stated_load():
    """``load`` is per replica: the plain instance's one-engine point load is ``R x load``."""
    from optsched.serving.load import offered_load

    for c in expand(spec("replicas = 3\nload = 0.8", "[[methods]]\npolicy = \"vllm\"")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            point = offered_load(c.instance.replace(cluster=None)).point
        assert point == pytest.approx(3 * 0.8, rel=1e-6)


@pytest.mark.parametrize("cluster, methods, words", [
    ("prefill_replicas = 1", ROUTED, "go together"),
    ("replicas = 2\nprefill_replicas = 1\ndecode_replicas = 1", ROUTED, "not both"),
    ("replicas = 2", "[[methods]]\npolicy = \"vllm\"\nrouter = \"nope\"", "methods[0].router"),
    ("replicas = 2", "[[methods]]\nbound = \"cluster\"\nobjective = \"p99-ttft\"", "no floor"),
    ("replicas = [2, \"x\"]", ROUTED, "instances[0].replicas: expected an integer"),
])
def test_bad_cluster_rows_are_one_line(cluster, methods, words):
    with pytest.raises(SpecError) as e:
        spec(cluster, methods)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_trace_rows_expand_variables_and_window(tmp_path, monkeypatch):
    csv = tmp_path / "traces" / "t.csv"
    csv.parent.mkdir()
    csv.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
        f"2023-11-16 18:15:{10 + k:02d}.0000000,{100 + 10 * k},{5 + k}\n" for k in range(20)))
    monkeypatch.setenv("CLUSTER_TEST_DATA", str(tmp_path))
    text = """[sweep]\nname = "t"\nseeds = [0, 1]\n[[instances]]
trace = "${CLUSTER_TEST_DATA}/traces/t.csv"\nconsecutive = 8\nreplicas = 2
[[methods]]\npolicy = "vllm"\n"""
    cells = expand(parse_spec(text))
    assert [c.instance.n for c in cells] == [8, 8] and [c.seed for c in cells] == [0, 1]
    assert all(c.instance.n_engines == 2 for c in cells)
    monkeypatch.delenv("CLUSTER_TEST_DATA")
    with pytest.raises(SpecError, match="not set"):
        parse_spec(text)


def short_file(tmp_path, n: int = 10):
    """A spec whose one row is a file of ``n`` short requests (a few decode steps each, so a
    cluster simulation is a few hundred batches), on 2 replicas at load 0.8 per replica."""
    import numpy as np

    from optsched.cost import preset
    from optsched.instance import Instance, Limits

    rng = np.random.default_rng(0)
    inst = Instance.from_columns("short", Limits(kv_capacity=4000, max_batch_tokens=1024),
                                 preset("infermax-llama2-7b-a100"), [f"r{i}" for i in range(n)],
                                 np.sort(rng.uniform(0, 1, n)), rng.integers(20, 200, n),
                                 rng.integers(2, 8, n))
    path = tmp_path / "short.json"
    inst.save(path)
    return path


def _check_rows(s, rows):
    """Every row equals the same cell computed directly (``optsched.cluster.simulate`` and the
    evaluator), and the certified floor is at most every router's objective."""
    from optsched.bounds.cluster import cluster_request_floors
    from optsched.cluster import simulate
    from optsched.evaluation import evaluate

    by_key = {c.key: c for c in expand(s)}
    assert sorted(r["key"] for r in rows) == sorted(by_key)
    for r in rows:
        inst = by_key[r["key"]].instance
        assert r["n_engines"] == inst.n_engines and r["load"] == 0.8
        if r["method_kind"] == "bound":
            assert r["bound"] == pytest.approx(cluster_request_floors(inst)["total_latency"])
            continue
        ev = evaluate(inst, simulate(inst, "vllm", r["router"]))
        assert r["status"] == "feasible"
        assert r["objective"] == pytest.approx(ev.objective("total-latency"))
        assert json.loads(r["metrics"])["p99_ttft"] == pytest.approx(ev.metrics["p99_ttft"])
        floor = next(x["bound"] for x in rows if x["instance_hash"] == r["instance_hash"]
                     and x["method_kind"] == "bound")
        assert floor <= r["objective"] * (1 + 1e-9)


def file_spec(tmp_path, methods: str = ROUTED):
    return parse_spec(f"""[sweep]\nname = "f"\nobjective = "total-latency"\n[[instances]]
file = "{short_file(tmp_path)}"\nreplicas = 2\nload = 0.8\n{methods}""")


def test_cluster_cells_match_a_direct_run(tmp_path):
    from optsched.sweep.cells import run_cell

    s = file_spec(tmp_path)
    _check_rows(s, [run_cell(c) for c in expand(s)])


@pytest.mark.slow  # the worker pool's forkserver takes 2-3 s to start on a loaded machine
def test_tiny_cluster_sweep_on_the_pool(tmp_path):
    from optsched.sweep.results import read_results
    from optsched.sweep.runner import run_sweep

    s = file_spec(tmp_path)
    summary = run_sweep(s, tmp_path / "out", engine="local", workers=2, progress=False)
    assert (summary.cells, summary.failed) == (3, 0)
    _check_rows(s, read_results(tmp_path / "out").to_pylist())


def test_prefill_decode_row_runs_behind_pd():
    from optsched.sweep.cells import run_cell

    cells = expand(spec("prefill_replicas = 1\ndecode_replicas = 1\nload = 0.5\nttft_slo = 1.0",
                        "[[methods]]\npolicy = \"vllm\"\nrouter = \"pd\""))
    row = run_cell(cells[0])
    assert row["status"] == "feasible", row["error"]
    m = json.loads(row["metrics"])
    assert m["transfers"] == 12 and "slo_attainment" in m


def test_improve_method_is_never_worse_than_its_router(tmp_path):
    """``improve = "vllm"`` from ``rr``: a feasible schedule whose objective is at most the
    router's own (the search keeps the start), with a fixed number of candidates."""
    from optsched.sweep.cells import run_cell

    methods = ROUTED + '[[methods]]\nimprove = "vllm"\nrouter = "rr"\nmax_moves = 3\n'
    s = file_spec(tmp_path, methods)
    rows = {c.method.label: run_cell(c) for c in expand(s)}
    got, start = rows["improve:vllm/rr"], rows["vllm/rr"]
    assert got["status"] == "feasible", got["error"]
    assert got["objective"] <= start["objective"] * (1 + 1e-12)
    assert got["solver"].startswith("improve: 3 tried")
    assert rows["bound:cluster"]["bound"] <= got["objective"]
