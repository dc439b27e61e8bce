"""Shared by the sweep tests: a tiny spec, running the CLI, reading rows."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TINY = """
[sweep]
name = "tiny"
seeds = [0, 1]
objective = "total-latency"

[[instances]]
generator = "online-paper"
n = [4, 5]

[[methods]]
policy = "mcsf"

[[methods]]
policy = "fcfs"

[[methods]]
formulation = "hindsight"
time_limit = 20
"""
#: columns that legitimately differ between two runs of the same cell
VOLATILE = ("runtime", "host", "pid", "engine", "started_at", "finished_at")


def write_spec(tmp_path: Path, text: str = TINY, name: str = "spec.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """``optsched ARGS`` in a fresh interpreter (the engines start processes of their own)."""
    return subprocess.run([sys.executable, "-m", "optsched", *args], capture_output=True, text=True,
                          timeout=timeout)


def run_json(*args: str) -> dict:
    r = cli(*args, "--json", "--quiet")
    assert r.returncode in (0, 3), r.stderr  # 3: some cell failed (a failure)
    return json.loads(r.stdout)


def rows(out: Path) -> list[dict]:
    from optsched.sweep.results import read_results

    return read_results(out).to_pylist()


def stable(rs: list[dict]) -> dict[str, dict]:
    """Rows by key without the volatile columns."""
    return {r["key"]: {k: v for k, v in r.items() if k not in VOLATILE} for r in rs}
