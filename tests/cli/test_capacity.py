"""``optsched capacity --max-engines / --gpus`` (optsched/cli/capacity.py, planning in
optsched/cli/_capacity_plan.py): the table, one JSON document, one-line errors."""

from __future__ import annotations

import json

from cli_helpers import one_line_error, run_cli

from optsched.cli import _capacity_plan
from optsched.cost import UnitCost
from optsched.instance import Instance, Limits, Request

#: a link for a cost model of no known model
LINK = ["--transfer-bytes-per-token", "1", "--transfer-bandwidth", "8"]


def _four(tmp_path) -> str:
    # 4 requests (I = 1, O = 1) at 0, C = 1, unit time: tests/serving/test_capacity.py works
    # out that at TTFT 1 s one engine and 1:1 reach at most 1/4 and two replicas 2/4
    inst = Instance("w", Limits(100, 1), UnitCost(),
                    tuple(Request(f"r{i}", 0, 1, 1) for i in range(4)))
    path = tmp_path / "four.json"
    inst.save(path)
    return str(path)


def test_the_smallest_configuration_as_json(capsys, tmp_path):
    rc, out, err = run_cli(capsys, "capacity", _four(tmp_path), "--max-engines", "3",
                           "--ttft-slo", "1", "--tpot-slo", "1", "--attainment", "0.5", *LINK,
                           "--json")
    assert rc == 0 and "simulating" in err
    doc = json.loads(out)
    assert doc["smallest"] == "2 replicas" and doc["simulations"] == 1
    got = {o["label"]: (o["status"], o["ceiling"], o["attainment"]) for o in doc["outcomes"]}
    assert got == {"1 replica": ("cannot", 0.25, None), "2 replicas": ("simulated", 0.5, 0.5),
                   "1:1": ("cannot", 0.25, None)}


def test_the_table_names_the_answer(capsys, tmp_path):
    rc, out, _ = run_cli(capsys, "capacity", _four(tmp_path), "--gpus", "2", "--slo-ttft", "1",
                         "--slo-tpot", "1", "--attainment", "0.5", *LINK)
    assert rc == 0
    assert "best configuration: 2 replicas (0.5, meets the target)" in out
    assert "cannot (certified)" in out  # 1:1's ceiling 1/4 < 0.5


def test_bad_input_is_one_line(capsys, tmp_path):
    four = _four(tmp_path)
    plan = ["capacity", four, "--max-engines", "2", "--ttft-slo", "1"]
    one_line_error(capsys, *plan, match="needs --ttft-slo and --tpot-slo")
    one_line_error(capsys, *plan, "--tpot-slo", "1", match="--transfer-bytes-per-token")
    one_line_error(capsys, *plan, "--tpot-slo", "1", "--target", "0.5",
                   match="--target applies to the rate search")
    one_line_error(capsys, *plan, "--tpot-slo", "1", "--gpus", "2", match="not both")
    one_line_error(capsys, "capacity", four, "--tpot-slo", "1", match="applies with --max-engines")
    one_line_error(capsys, "capacity", four, "--metric", "mean-jct", "--target", "1",
                   match="--policy is required")
    one_line_error(capsys, *plan, "--tpot-slo", "1", "--only", "colocated", "--policy",
                   "vllm,fcfs", match="one engine policy")


def test_the_time_limit_stops_the_simulations(capsys, tmp_path, monkeypatch):
    # a reserve longer than the limit: the deadline has passed before the first simulation,
    # so nothing is simulated, every configuration is reported as not reached, the answer open
    monkeypatch.setattr(_capacity_plan, "PLAN_RESERVE", 10.0)
    rc, out, _ = run_cli(capsys, "capacity", _four(tmp_path), "--max-engines", "2",
                         "--ttft-slo", "1", "--tpot-slo", "1", *LINK, "--time-limit", "1",
                         "--json")
    doc = json.loads(out)
    assert rc == 0 and doc["stopped"] and doc["simulations"] == 0 and doc["smallest"] is None
    assert {o["status"] for o in doc["outcomes"]} == {"not reached"}
