"""Units that look off by 1,000 (``optsched/workloads/units.py``)."""

from __future__ import annotations

import dataclasses

from cli_helpers import run_cli

from optsched.cost import PRESETS, LinearCost, UnitCost
from optsched.instance import Instance, Limits, Request
from optsched.workloads.units import arrival_unit_warning, cost_unit_warning, unit_warnings

SECONDS = PRESETS["vidur-llama2-7b-a100"]
#: the same engine with every coefficient in milliseconds (a paper's table copied as is)
MILLIS = LinearCost(**{k: 1000 * v for k, v in SECONDS.coefficients.items()})


def trace(arrivals, cost=SECONDS):
    reqs = tuple(Request(f"r{k}", float(a), 200, 100) for k, a in enumerate(arrivals))
    return Instance("t", Limits(kv_capacity=30_000, max_batch_tokens=4096), cost, reqs)


def test_a_cost_model_in_milliseconds_is_flagged_and_one_in_seconds_is_not():
    """Before: a cost model in ms passed without a word (every batch 1,000x too slow). Every
    preset, in seconds, is quiet; the vidur preset x 1,000 takes 9.8 s for a one-request
    decode batch (6.5 ms of k0 read as 6.5 s) and is flagged."""
    for name, cm in PRESETS.items():
        assert cost_unit_warning(cm) is None, name
    w = cost_unit_warning(MILLIS)
    assert w is not None and "milliseconds" in w and "k0 = 6.54" in w
    assert cost_unit_warning(UnitCost()) is None


def test_arrivals_in_milliseconds_are_flagged_and_real_rates_are_not():
    """Two requests a second (Azure-like) is quiet; the same arrivals x 1,000 (a gap of 500 s
    against a 200-token prompt and 100 outputs served alone in 0.71 s under the vidur preset:
    20 ms of prefill and 99 decodes of 7 ms) are flagged; one request a minute (85 times the
    service time) stays quiet."""
    seconds = [0.5 * k for k in range(20)]
    assert unit_warnings(trace(seconds)) == []
    w = arrival_unit_warning(trace([1000 * a for a in seconds]))
    assert w is not None and "milliseconds" in w and "500 s" in w
    # a sparse trace of one request a minute is no unit error
    assert arrival_unit_warning(trace([60.0 * k for k in range(20)])) is None


def test_commands_warn_on_stderr(tmp_path, capsys):
    f = tmp_path / "ms.json"
    trace([0.5 * k for k in range(5)], MILLIS).save(f)
    rc, out, err = run_cli(capsys, "info", f)
    assert rc == 0 and "warning: cost model" in err and "milliseconds" in err
    g = tmp_path / "s.json"
    dataclasses.replace(trace([0.5 * k for k in range(5)])).save(g)
    rc, _, err = run_cli(capsys, "info", g)
    assert rc == 0 and "milliseconds" not in err
