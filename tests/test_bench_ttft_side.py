"""``bench/bench_ttft_side.py``: bad arguments exit 2 with a message naming the option; the
indicative SRPT values order as their definitions say (adding one fixed time per prompt to
every work cannot make preemptive SRPT finish earlier), on a generated instance (no data)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import bench_ttft_side as bts  # noqa: E402

from optsched.cost import preset  # noqa: E402
from optsched.instance import Instance, Limits, Request  # noqa: E402


def test_bad_arguments_exit_2(capsys):
    assert bts.main(["--seeds", "a,b"]) == 2
    assert "--seeds" in capsys.readouterr().err
    assert bts.main(["--traces", "chat"]) == 2
    assert "--traces" in capsys.readouterr().err


def test_indicative_values_order():
    reqs = tuple(Request(f"r{i}", 0.05 * i, 200 + 97 * (i % 7), 3) for i in range(30))
    inst = Instance("gen", Limits(kv_capacity=30_000, max_batch_tokens=8192), preset(bts.PRESET), reqs)
    lo, hi = bts.indicative(inst)
    f = preset(bts.PRESET)
    assert hi >= lo + f.k0 + f.kpb - 1e-12  # every prompt's own fixed time at least
