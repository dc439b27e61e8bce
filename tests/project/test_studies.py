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
