"""``optsched solve``: its options, exit codes and answers."""

from __future__ import annotations

import json

from cli_helpers import one_line_error_no_stdout, run_cli
from handworked import two_hidden
from paths import GOOD, N40

from optsched.cost import (
    UnitCost,
)
from optsched.instance import Instance, Limits, Request


def test_at_most_negative_is_refused(capsys):
    """Before: ``--at-most -1 --than vllm`` was accepted and answered "infeasible" (exit 1)."""
    one_line_error_no_stdout(capsys, "solve", GOOD, "--at-most", "-1", "--than", "vllm",
                   match="--at-most")


def test_solve_with_a_fallback_and_a_bound_exits_0(capsys):
    """Before: a skipped model exited 1 ("no solution") though a schedule and a certified
    bound existed."""
    rc, out, err = run_cli(capsys, "solve", N40, "--time-limit", 2, "--json")
    d = json.loads(out)
    assert d["fallback"] is not None and d["lower_bound"]["value"] > 0
    assert rc == 0, err


def test_cli_refuses_hidden_cache_with_exit_2(tmp_path):
    import subprocess
    import sys

    p = tmp_path / "i.json"
    two_hidden().save(p)
    for cmd in (["solve", str(p), "--time-limit", "5"], ["bound", str(p)]):
        out = subprocess.run([sys.executable, "-m", "optsched", *cmd], capture_output=True,
                             text=True)
        assert out.returncode == 2, (cmd, out.stderr)
        assert "hidden cache" in out.stderr and "Traceback" not in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_cli_solve_refuses_a_swapping_instance(tmp_path):
    import subprocess
    import sys

    inst = Instance("t", Limits(kv_capacity=8, max_batch_tokens=8, host_capacity=8), UnitCost(),
                    (Request("a", 0, 2, 2),))
    p = tmp_path / "i.json"
    inst.save(p)
    out = subprocess.run([sys.executable, "-m", "optsched", "solve", str(p), "--time-limit", "5"],
                         capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    assert "cannot represent swap preemption" in out.stderr and "Traceback" not in out.stderr


def test_solve_refuses_prefix_ids_in_one_line(capsys):
    """The reuse-blind formulations refuse block ids (docs/semantics.md section 6): exit 2, one
    line; the exhaustive search models reuse but refuses the 12 requests of shared-prefix by
    its size guard, in one line too."""
    for form in ("infermax", "hindsight"):
        one_line_error_no_stdout(capsys, "solve", "shared-prefix", "--formulation", form,
                                 "--time-limit", "20", match=f"{form}: cannot represent prefix")
    one_line_error_no_stdout(capsys, "solve", "shared-prefix", "--formulation", "exhaustive",
                             "--time-limit", "20", match="too large for the exhaustive search")


def test_at_most_than_lpm_with_prefix_reuse(capsys, tmp_path):
    """"Is there a schedule 10% better than LPM?" on an instance with shared prefixes, answered
    by the exhaustive search with reuse. Three requests of 3 prompt tokens sharing blocks 1, 2
    (b = 1), C = 4, unit time: the makespan optimum is 2 (batch 1 computes one prompt; batch
    2 hits the two blocks for both others, tests/formulations/exhaustive/test_reuse.py), so
    "at most 0.9 x LPM" has a schedule exactly when LPM's makespan is at least 2 / 0.9."""
    from optsched.cost import UnitCost
    from optsched.evaluation import evaluate
    from optsched.policies import simulate
    from optsched.schedule import Schedule

    inst = Instance("three", Limits(kv_capacity=16, max_batch_tokens=4, block_size=1),
                    UnitCost(), tuple(Request(x, 0, 3, 1, prefix=(1, 2)) for x in "abc"))
    path = tmp_path / "three.json"
    inst.save(path)
    lpm = evaluate(inst, simulate(inst, "lpm")).objective("makespan")
    for factor in (0.9, 1.0 / lpm * 2.0):  # the second asks exactly for the optimum, 2
        rc, out, err = run_cli(capsys, "solve", str(path), "--formulation", "exhaustive",
                               "--objective", "makespan", "--at-most", factor, "--than", "lpm",
                               "--json", "--time-limit", "30")
        d = json.loads(out)
        if 2.0 <= factor * lpm * (1 + 1e-9):
            assert d["status"] == "optimal" and d["objective"] <= factor * lpm + 1e-9, err
            ev = evaluate(inst, Schedule.from_dict(d["schedule"]))
            assert ev.feasible and ev.objective("makespan") == d["objective"]
        else:
            assert d["status"] == "infeasible", d


def test_an_undecided_hypothesis_exits_4_not_3(capsys):
    """Before: "Unknown" (no schedule meeting the hypothesis found, none ruled out) exited 3,
    the code of a solver crash. 40 requests in 2 s: the model does not fit, so the question
    "is there a schedule 10% faster than vLLM" is left open, which is exit 4."""
    rc, out, err = run_cli(capsys, "solve", N40, "--time-limit", 2, "--at-most", 0.9,
                           "--than", "vllm", "--json")
    d = json.loads(out)
    assert d["status"] == "no_solution" and d["verdict"].startswith("Unknown:"), d["verdict"]
    assert rc == 4, err
