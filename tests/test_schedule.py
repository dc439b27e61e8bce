"""The schedule (optsched/schedule.py): its file formats round-trip, and a malformed file is
refused naming the batch."""

from __future__ import annotations

import numpy as np
import pytest
from handworked import SWAP_ROUND_TRIP, hidden_instance, swap_instance

from optsched.cost import (
    RHO_DEFAULT,
    LinearCost,
    UnitCost,
    cost_model_from_dict,
)
from optsched.errors import ScheduleFormatError
from optsched.evaluation import evaluate
from optsched.instance import Instance, Limits, Request
from optsched.schedule import Schedule


def test_schedule_and_instance_round_trip(tmp_path):
    s = Schedule.from_dict({"batches": [{"entries": [["a", 5, "hidden"], ["b", 4]]},
                                        {"entries": [["a", 1, "hidden"], ["b", 1, "kv"]]}]})
    assert s.has_hidden and s.to_dict()["batches"][1]["entries"] == [["a", 1, "hidden"], ["b", 1]]
    for name in ("s.json", "s.npz"):
        s.save(tmp_path / name)
        back = Schedule.load(tmp_path / name)
        assert back == s and back.entry_hidden.tolist() == s.entry_hidden.tolist()
    # a KV-only schedule is unchanged: no third element, no npz array, and != the hidden one
    kv = Schedule.from_dict({"batches": [{"entries": [["a", 5], ["b", 4]]},
                                         {"entries": [["a", 1], ["b", 1]]}]})
    assert not kv.has_hidden and kv != s
    assert all(len(e) == 2 for b in kv.to_dict()["batches"] for e in b["entries"])
    kv.save(tmp_path / "k.npz")
    assert "entry_hidden" not in np.load(tmp_path / "k.npz").files
    inst = hidden_instance()
    assert Instance.from_json(inst.to_json()) == inst
    assert inst.to_dict()["limits"]["hidden_cache"] is True
    assert "hidden_cache" not in Limits(8, 8).to_dict()
    assert cost_model_from_dict(inst.cost_model.to_dict()) == inst.cost_model
    # rho is written even at its default: a saved instance does not depend on it
    assert LinearCost().to_dict()["rho"] == RHO_DEFAULT == LinearCost().rho


def test_hidden_format_errors_name_the_batch():
    with pytest.raises(ScheduleFormatError, match="batch 1.*cache type"):
        Schedule.from_dict({"batches": [{"entries": [["a", 4]]},
                                        {"entries": [["a", 1, "hiden"]]}]})


def test_schedule_without_swaps_has_no_swap_keys_and_metrics():
    s = Schedule.from_dict({"batches": [{"entries": [["a", 4]]}]})
    assert not s.has_swaps and "swap_out" not in s.to_json()
    inst = Instance("t", Limits(kv_capacity=8, max_batch_tokens=8), UnitCost(),
                    (Request("a", 0, 4, 1),))
    assert "swap_out_tokens" not in evaluate(inst, s).metrics


@pytest.mark.parametrize("suffix", [".json", ".npz"])
def test_swap_schedule_round_trips(tmp_path, suffix):
    s = Schedule.from_dict(SWAP_ROUND_TRIP)
    p = tmp_path / f"s{suffix}"
    s.save(p)
    back = Schedule.load(p)
    assert back == s and back.has_swaps
    assert back.to_dict() == SWAP_ROUND_TRIP
    assert evaluate(swap_instance(), back).batch_duration.tolist() == [1, 3, 1, 3, 1]


def test_swap_format_errors_name_the_batch():
    with pytest.raises(ScheduleFormatError, match="batch 0: swap_out must be"):
        Schedule.from_dict({"batches": [{"entries": [], "swap_out": ["a"]}]})
    with pytest.raises(ScheduleFormatError, match="batch 0: 'swap_in' must be a list"):
        Schedule.from_dict({"batches": [{"entries": [], "swap_in": "a"}]})


def test_a_bad_request_id_names_its_batch_field_and_position():
    """Before: "request id must be a string, got None" with no batch, field or entry."""
    with pytest.raises(ScheduleFormatError, match=r"batch 1: 'entries' entry 1: request id must "
                                                   r"be a string, got None"):
        Schedule.from_dict({"batches": [{"entries": [["a", 1]]},
                                        {"entries": [["a", 1], [None, 1]]}]})
    with pytest.raises(ScheduleFormatError, match=r"batch 0: 'evict' item 1: .*got \[\]"):
        Schedule.from_dict({"batches": [{"entries": [["a", 1]], "evict": ["a", []]}]})
