"""The ``optsched`` program (``optsched.cli.run``) leaves with ``os._exit`` after flushing its
output and running the ``atexit`` handlers (issue 31: interpreter teardown was ~0.1 s of a
1 s full-trace simulate). What a caller sees must not change: the exit code, every byte of
stdout and stderr, and the ``atexit`` handlers run."""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = """
import atexit, sys
atexit.register(lambda: print("atexit handler ran", file=sys.stderr))
sys.argv = ["optsched", *sys.argv[1:]]
from optsched.cli import run
run()
"""


def _program(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True,
                          timeout=120)


def test_output_exit_code_and_atexit_handlers_survive_the_fast_exit():
    p = _program("policies", "--json")
    assert p.returncode == 0, p.stderr
    policies = json.loads(p.stdout)  # the whole document arrived (flushed before os._exit)
    assert any(row["name"] == "vllm" for row in policies)
    assert "atexit handler ran" in p.stderr


def test_the_exit_code_of_a_failing_command_is_kept():
    p = _program("simulate", "no-such-instance.json", "--policy", "vllm")
    assert p.returncode == 2
    assert "error" in p.stderr and "atexit handler ran" in p.stderr


def test_python_dash_m_uses_the_program_entry():
    p = subprocess.run([sys.executable, "-m", "optsched", "policies", "--json"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and json.loads(p.stdout)
