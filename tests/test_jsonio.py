"""Strict JSON reading (optsched/jsonio.py): what a file may not do is refused with one line naming it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from paths import GOOD

from optsched.errors import InstanceError, ScheduleFormatError
from optsched.instance import Instance
from optsched.schedule import Schedule
from optsched.solve_types import finite_or_none


def test_duplicate_keys_are_refused(tmp_path):
    """Before: the last of two equal keys won, in instance and schedule files alike."""
    text = GOOD.read_text().replace('"kv_capacity": 8', '"kv_capacity": 8, "kv_capacity": 9')
    with pytest.raises(InstanceError, match="duplicate key 'kv_capacity'"):
        Instance.from_json(text)
    f = tmp_path / "s.json"
    f.write_text('{"batches": [{"entries": [["a", 2]], "entries": [["a", 1]]}]}')
    with pytest.raises(ScheduleFormatError, match="duplicate key 'entries'"):
        Schedule.load(f)


def test_finite_or_none_is_null_for_missing_and_non_finite():
    assert finite_or_none(None) is None
    assert finite_or_none(math.nan) is None
    assert finite_or_none(-math.inf) is None
    assert finite_or_none(np.float32(1.5)) == 1.5 and type(finite_or_none(np.int64(3))) is float
