"""The cluster part of a schedule (docs/semantics.md section 6, "Clusters"): engine per batch
and transfers, in JSON and ``.npz``; format errors are one line naming the batch."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

from optsched.errors import ScheduleFormatError
from optsched.placement import Placement, PlacementBuilder
from optsched.schedule import Schedule

DOC = {"batches": [{"entries": [["a", 4]], "engine": "p0", "transfer": [["a", "d0"]]},
                   {"entries": [["a", 1]], "engine": "d0", "start": 2.5},
                   {"entries": [["b", 2]]},
                   {"entries": [], "engine": "p0", "transfer": [["c", "d0"]]}]}


def test_json_and_npz_round_trip(tmp_path):
    s = Schedule.from_dict(DOC)
    pl = s.placement
    assert pl.engines == ("p0", "d0") and pl.batch_engine.tolist() == [0, 1, -1, 0]
    assert s.ids == ("a", "b", "c")  # c: only a transfer names it
    assert pl.transfers(0, s.ids) == [("a", "d0")] and pl.transfers(3, s.ids) == [("c", "d0")]
    assert s.to_dict() == DOC
    for name in ("s.json", "s.npz"):
        s.save(tmp_path / name)
        back = Schedule.load(tmp_path / name)
        assert back == s and back.to_dict() == DOC
    with zipfile.ZipFile(tmp_path / "s.npz") as z:
        assert {"engines.npy", "batch_engine.npy", "transfer_to.npy"} <= set(z.namelist())


def test_a_schedule_without_engines_is_unchanged(tmp_path):
    s = Schedule.from_dict({"batches": [{"entries": [["a", 4]]}]})
    assert s.placement is None
    s.save(tmp_path / "s.npz")
    with zipfile.ZipFile(tmp_path / "s.npz") as z:
        assert "engines.npy" not in z.namelist()
    assert "engine" not in s.to_dict()["batches"][0]


def test_engines_enter_equality_and_survive_replace_starts():
    a = Schedule.from_dict(DOC)
    other = {"batches": [dict(b) for b in DOC["batches"]]}
    other["batches"][2] = {**other["batches"][2], "engine": "d0"}
    assert Schedule.from_dict(other) != a
    assert a.replace_starts([0.0, 1.0, 2.0, 3.0]).placement.canonical(a.ids) \
        == a.placement.canonical(a.ids)


@pytest.mark.parametrize("batch, match", [
    ({"entries": [], "engine": 3}, "batch 0: 'engine' must be an engine id"),
    ({"entries": [], "engine": ""}, "batch 0: 'engine' must be an engine id"),
    ({"entries": [], "transfer": "a"}, "batch 0: 'transfer' must be a list"),
    ({"entries": [], "transfer": [["a"]]}, "batch 0: 'transfer' must be a list of"),
    ({"entries": [], "transfer": [["a", 7]]}, "batch 0: a transfer's destination must be"),
    ({"entries": [], "transfer": [[None, "d"]]}, "batch 0: transfer: request id must be"),
])
def test_format_errors_name_the_batch(batch, match):
    with pytest.raises(ScheduleFormatError, match=match) as e:
        Schedule.from_dict({"batches": [batch]})
    assert "\n" not in str(e.value)


def test_placement_arrays_are_checked():
    s = Schedule.from_dict({"batches": [{"entries": [["a", 1]]}]})
    with pytest.raises(ScheduleFormatError, match="batch_engine must have n_batches = 1"):
        s.with_placement(Placement(("e",), np.array([0, 0]), np.array([0, 0, 0]),
                                   np.zeros(0, int), np.zeros(0, int)))
    with pytest.raises(ScheduleFormatError, match="outside the engine table"):
        Placement(("e",), np.array([1]), np.array([0, 0]), np.zeros(0, int), np.zeros(0, int))
    with pytest.raises(ScheduleFormatError, match="transfer_req refers outside"):
        s.with_placement(Placement(("e",), np.array([0]), np.array([0, 1]), np.array([5]),
                                   np.array([0])))
    with pytest.raises(ScheduleFormatError, match="names an engine twice"):
        Placement(("e", "e"), np.array([0]), np.array([0, 0]), np.zeros(0, int),
                  np.zeros(0, int))


def test_a_partial_npz_placement_is_refused(tmp_path):
    s = Schedule.from_dict(DOC)
    s.save(tmp_path / "s.npz")
    with np.load(tmp_path / "s.npz") as z:
        arrays = {k: z[k] for k in z.files if k != "transfer_to"}
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ScheduleFormatError, match="lacks \\['transfer_to'\\]"):
        Schedule.load(tmp_path / "bad.npz")


def test_builder_indexed_path():
    b = PlacementBuilder(["x", "y"])
    b.add_indexed(1, [0], [0])
    b.add_indexed(0)
    pl, ids = b.build(["r"])
    assert ids == ("r",) and pl.batch_engine.tolist() == [1, 0]
    assert pl.transfers(0, ids) == [("r", "x")] and not b.empty
