"""``studies/bounds/ttft_side.py``: bad arguments exit 2 with a message naming the option (run
as the command it is); the indicative SRPT values (:func:`optsched.bounds.srpt.prefill_indicative`)
order as their definitions say (adding one fixed time per prompt to every work cannot make
preemptive SRPT finish earlier), on a generated instance (no data)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from optsched.bounds.srpt import prefill_indicative
from optsched.cost import preset
from optsched.instance import Instance, Limits, Request

REPO = Path(__file__).resolve().parents[1]
PRESET = "infermax-llama2-7b-a100"


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


def test_indicative_values_order():
    reqs = tuple(Request(f"r{i}", 0.05 * i, 200 + 97 * (i % 7), 3) for i in range(30))
    inst = Instance("gen", Limits(kv_capacity=30_000, max_batch_tokens=8192), preset(PRESET), reqs)
    lo, hi = prefill_indicative(inst)
    f = preset(PRESET)
    assert hi >= lo + f.k0 + f.kpb - 1e-12  # every prompt's own fixed time at least
