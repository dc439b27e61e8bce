"""Backends that work or say why, and a fitted cost model that can be used (issue 30 item 6):
CP-SAT on an all-integer formulation or a one-line "use --formulation X"; ``fit -o`` and
``--cost-model FILE``; ``generate --block-size``; ``simulate --trace`` with generate's M/C."""

from __future__ import annotations

import importlib.util
import json

import pytest
from shared_data import SHARED_DATA  # noqa: E402

from optsched.cli import main
from optsched.cost import LinearCost, cost_model_arg, preset
from optsched.errors import OptschedError
from optsched.instance import Instance
from optsched.workloads.generators import DEFAULT_KV_CAPACITY, DEFAULT_MAX_BATCH_TOKENS

needs_cpsat = pytest.mark.skipif(importlib.util.find_spec("ortools") is None,
                                 reason="ortools (CP-SAT) not installed")
PROF = SHARED_DATA / "profiling"


def test_cpsat_with_a_continuous_formulation_names_the_one_to_use(capsys):
    rc = main(["solve", "tiny", "--solver", "cpsat", "--time-limit", "20"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "--formulation hindsight" in err[0]


@needs_cpsat
def test_cpsat_solves_hindsight_makespan(capsys):
    """The hindsight makespan model had one continuous column (``z``, eq. H5c); every bound
    on it is an integer slot, so it is integer now and CP-SAT proves tiny's makespan. The
    value is HiGHS's on the same model (both replayed by the evaluator)."""
    out = {}
    for solver in ("cpsat", "highs"):
        rc = main(["solve", "tiny", "--solver", solver, "--formulation", "hindsight",
                   "--time-limit", "30", "--json", "--quiet"])
        d = json.loads(capsys.readouterr().out)
        assert rc == 0 and d["status"] == "optimal", d.get("message")
        out[solver] = d["objective"]
    assert out["cpsat"] == out["highs"]


def test_cost_model_file_round_trip(tmp_path, capsys):
    """A cost model written as JSON (what ``fit -o`` writes) is read back by ``--cost-model
    FILE`` exactly: every coefficient of the instance equals the file's."""
    cm = LinearCost(**{**preset("infermax-llama2-7b-a100").coefficients, "k0": 0.0123})
    f = tmp_path / "fitted.json"
    f.write_text(json.dumps(cm.to_dict()))
    assert cost_model_arg(str(f)) == cm
    inst_path = tmp_path / "i.json"
    rc = main(["generate", "fixed", "--n", "3", "--prompt", "8", "--output", "2",
               "--cost-model", str(f), "--block-size", "16", "-o", str(inst_path)])
    capsys.readouterr()
    inst = Instance.load(inst_path)
    assert rc == 0 and inst.cost_model == cm and inst.limits.block_size == 16


def test_cost_model_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "linear", "bogus": 1}')
    with pytest.raises(OptschedError, match=r"--cost-model .*bad\.json"):
        cost_model_arg(str(bad))
    with pytest.raises(OptschedError, match="unknown preset"):
        cost_model_arg("no-such-preset")


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


@pytest.mark.skipif(not PROF.is_dir(), reason=f"shared data not found at {PROF}")
def test_fit_output_is_usable_as_cost_model(tmp_path, capsys):
    from optsched.workloads.fit import fit_linear_cost

    f = tmp_path / "fit.json"
    rc = main(["fit", "--profiling", str(PROF), "-o", str(f)])
    capsys.readouterr()
    assert rc == 0
    assert cost_model_arg(str(f)) == fit_linear_cost(PROF, "Llama-2-7b-hf", "a100", 1).cost


needs_gurobi = pytest.mark.skipif(importlib.util.find_spec("gurobipy") is None,
                                  reason="gurobipy not installed")


@needs_gurobi
def test_gurobi_size_limited_licence_falls_back_to_highs(tmp_path, capsys):
    """``solve --solver gurobi`` on a model above the pip licence's 2000 variables (16
    identical 8+8-token requests: 3032 columns, 3201 rows) was a solver failure (exit 3, no
    schedule) although HiGHS solves it in a second. Now HiGHS solves it, with one note on
    stderr and in the JSON notes; with a full licence Gurobi solves it and says nothing."""
    from optsched.milp import get_backend

    inst = tmp_path / "i.json"
    assert main(["generate", "fixed", "--n", "16", "--prompt", "8", "--output", "8",
                 "-o", str(inst)]) == 0
    capsys.readouterr()
    rc = main(["solve", str(inst), "--solver", "gurobi", "--time-limit", "30", "--json"])
    cap = capsys.readouterr()
    d = json.loads(cap.out)
    assert "Traceback" not in cap.err
    assert rc == 0 and d["status"] == "optimal", d.get("message")
    fell = [n for n in d["notes"] if "solved with highs instead" in n]
    if get_backend("gurobi").size_limit() is None:  # a full licence: Gurobi solves it
        assert d["solver"] == "gurobi" and not fell
        return
    assert d["solver"] == "highs" and len(fell) == 1
    assert "size-limited license (2000 variables, 2000 constraints)" in fell[0]
    err = [ln for ln in cap.err.splitlines() if "solved with highs instead" in ln]
    assert len(err) == 1 and err[0].startswith("optsched: note: gurobi: size-limited")
