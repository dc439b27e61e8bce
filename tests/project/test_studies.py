"""The study scripts (studies/) run as the commands their READMEs give: bad arguments exit 2 with a
message naming the option (nothing here imports a study)."""

from __future__ import annotations

import subprocess
import sys

from paths import REPO


def _study(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "studies.bounds.ttft_side", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_bad_arguments_exit_2():
    r = _study("--seeds", "a,b")
    assert r.returncode == 2
    assert "--seeds" in r.stderr
    r = _study("--traces", "chat")
    assert r.returncode == 2
    assert "--traces" in r.stderr


def test_hindsight_ratios_take_the_best_schedule_and_the_best_bound_of_every_run(tmp_path):
    """MC-SF / best known is a lower bound on MC-SF / OPT only if "best" is the smallest objective
    over every run (this script's and paper.py's), and MC-SF / bound an upper bound only with the
    largest certified bound: two runs and an earlier row, the figures worked by hand."""
    import json

    def row(obj, bound):
        return {"setting": "offline", "name": "x-n2-s0", "n_key": 2, "n": 2, "seed": 0,
                "objective": obj, "bound": bound, "mcsf": 110.0}

    runs = tmp_path / "runs.jsonl"
    runs.write_text(json.dumps(row(105.0, 80.0)) + "\n" + json.dumps(row(104.0, 88.0)) + "\n")
    earlier = tmp_path / "paper.json"
    earlier.write_text(json.dumps({"rows": [{"name": "x-n2-s0", "best": 100.0, "bound": 70.0}]}))
    r = subprocess.run([sys.executable, "-m", "studies.hindsight.ff", "--summary", str(runs),
                        "--ratios", str(earlier)], cwd=REPO, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    # best = min(105, 104, 100) = 100: 110 / 100 = 1.100; bound = max(80, 88, 70) = 88: 1.250
    assert "| x-n2-s0 | 2 | 110 | 100 | 88 | 1.100 | 1.250 |" in r.stdout
    assert "offline n=2: 1 instances; MC-SF / best: mean 1.1000" in r.stdout


def test_hindsight_ratio_sample_replays_both_schedules_and_never_ranks_mcsf_below_best(tmp_path):
    """The sample's best schedule starts from the list schedules, MC-SF among them, so MC-SF /
    best >= 1 on every instance (the study raises if the evaluator disagrees with the model)."""
    import json

    out = tmp_path / "s.jsonl"
    r = subprocess.run([sys.executable, "-m", "studies.hindsight.ratio_sample", "--ns", "6",
                        "--rates", "0.3", "--horizons", "8", "--seeds", "2", "--moves", "3",
                        "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["setting"] for x in rows] == ["offline"] * 2 + ["online"] * 2
    for x in rows:
        assert x["best"] <= x["mcsf"]
        assert x["ratio"] == x["mcsf"] / x["best"]
    bad = subprocess.run([sys.executable, "-m", "studies.hindsight.ratio_sample", "--seeds", "0"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--seeds" in bad.stderr
