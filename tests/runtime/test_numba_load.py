"""optsched.runtime.numba_load: a cached kernel is loaded without numba's registry refresh, the result
is the kernel's own, and anything else (no cache entry, no numba dispatcher) falls back to
numba's usual path. Each case runs in a fresh process: the refresh is once per process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from paths import REPO

from optsched.policies.fast import HAVE_NUMBA

pytestmark = pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")

#: imported only by numba's ``CPUContext.load_additional_registries`` (the refresh), never by
#: the environments of optsched's kernels: present after a refresh, absent without one
REFRESH_ONLY = "numba.np.polynomial.polynomial_functions"

KERNEL = textwrap.dedent("""
    import numpy as np
    from numba import njit

    @njit(cache=True)
    def cumulate(a):
        out = np.empty(a.size, np.int64)
        acc = 0
        for k in range(a.size):
            acc += a[k]
            out[k] = acc
        return out
""")

PROBE = textwrap.dedent("""
    import json, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    from optsched.runtime import numba_load
    import kern
    out = numba_load.call(kern.cumulate, np.arange(5, dtype=np.int64))
    print(json.dumps({"out": out.tolist(), "loaded": numba_load.LOADED,
                      "refreshed": REFRESH_ONLY in sys.modules}))
""").replace("REFRESH_ONLY", repr(REFRESH_ONLY))


def _probe(tmp_path: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], env=env,
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_first_process_compiles_then_the_next_loads_without_refresh(tmp_path):
    (tmp_path / "kern.py").write_text(KERNEL)
    first = _probe(tmp_path)  # empty cache: the fast load finds nothing, numba compiles
    # cumulative sums of 0..4 by hand: 0, 1, 3, 6, 10
    assert first == {"out": [0, 1, 3, 6, 10], "loaded": [], "refreshed": True}
    second = _probe(tmp_path)  # cache written by the first: loaded, no refresh
    assert second == {"out": [0, 1, 3, 6, 10], "loaded": ["cumulate"], "refreshed": False}


def test_a_stale_cache_falls_back_to_compiling(tmp_path):
    (tmp_path / "kern.py").write_text(KERNEL)
    _probe(tmp_path)
    # a changed source: numba's index no longer matches (its stamp is the file's mtime and
    # size), the fast load returns nothing and numba recompiles the new code
    (tmp_path / "kern.py").write_text(KERNEL.replace("acc += a[k]", "acc += 2 * a[k]"))
    again = _probe(tmp_path)
    assert again == {"out": [0, 2, 6, 12, 20], "loaded": [], "refreshed": True}


def test_plain_functions_are_called_as_they_are():
    from optsched.runtime import numba_load

    assert numba_load.call(lambda a, b: a + b, 2, 3) == 5


SIMULATE = textwrap.dedent("""
    import json, sys
    from optsched.runtime import numba_load
    from optsched.evaluation.evaluator import _compiled
    from optsched.workloads.generators import infermax_mix
    from optsched.policies import simulate
    inst = infermax_mix("LILO", 12, seed=3)
    fast = simulate(inst, "vllm", fast=True)
    ev = _compiled(inst, fast)
    refreshed = REFRESH_ONLY in sys.modules
    ref = simulate(inst, "vllm", fast=False)
    print(json.dumps({"same": fast.to_dict() == ref.to_dict(), "loaded": numba_load.LOADED,
                      "evaluated": ev is not None and ev.feasible, "refreshed": refreshed}))
""").replace("REFRESH_ONLY", repr(REFRESH_ONLY))


def test_the_simulator_and_evaluator_kernels_load_without_refresh():
    """With the kernels in the cache (``python -m optsched.cli.warm``, run here first), a fresh
    process loads both without numba's refresh and the schedule is the Python path's."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-m", "optsched.cli.warm"], env=env, check=True,
                   capture_output=True, timeout=900)
    out = subprocess.run([sys.executable, "-c", SIMULATE], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"same": True,
                                      "loaded": ["simulate_unified", "replay", "token_gaps"],
                                      "evaluated": True, "refreshed": False}
