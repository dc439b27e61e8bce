"""The Ray engine against a real local Ray cluster (2 CPUs) started by the test: the same
tiny spec gives the local engine's results cell for cell (except runtime and host)."""

from __future__ import annotations

import pytest
from sweep_helpers import rows, run_json, stable, write_spec

pytest.importorskip("pyarrow", reason="sweeps need pyarrow (pip install 'optsched[sweep]')")
ray = pytest.importorskip("ray", reason="the ray engine is optional: pip install 'optsched[ray]'")


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster of 2 CPUs, owned by this test module; the sweep connects to it."""
    ctx = ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ctx.address_info["address"]
    finally:
        ray.shutdown()


@pytest.mark.slow
def test_ray_equals_local_cell_for_cell(tmp_path, cluster):
    spec = write_spec(tmp_path)
    local = run_json("sweep", "run", str(spec), "-o", str(tmp_path / "local"), "--workers", "2")
    viaray = run_json("sweep", "run", str(spec), "-o", str(tmp_path / "ray"), "--engine", "ray",
                      "--address", cluster)
    assert local["failed"] == viaray["failed"] == 0
    assert local["computed"] == viaray["computed"] == 12
    a, b = rows(tmp_path / "local"), rows(tmp_path / "ray")
    assert {r["engine"] for r in b} == {"ray"}
    assert stable(a) == stable(b)


@pytest.mark.slow
def test_ray_engine_starts_its_own_local_instance(tmp_path):
    spec = write_spec(tmp_path, """
[sweep]
name = "own"
[[instances]]
generator = "online-paper"
n = 4
[[methods]]
policy = "mcsf"
[[methods]]
policy = "fcfs"
""")
    s = run_json("sweep", "run", str(spec), "-o", str(tmp_path / "out"), "--engine", "ray", "--workers", "2")
    assert (s["computed"], s["failed"]) == (2, 0)
    assert {r["status"] for r in rows(tmp_path / "out")} == {"feasible"}
