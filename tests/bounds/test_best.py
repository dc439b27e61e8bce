"""``best`` (optsched/bounds/best.py): the ladder it climbs and the method it names."""

from __future__ import annotations

import json

import pytest
from paths import REPO

import optsched
from optsched.bounds import BoundResult
from optsched.instance import Instance


def test_best_names_its_method_and_ladder():
    inst = Instance.load(REPO / "instances" / "seq-unit-3.json")
    r = optsched.lower_bound(inst, "makespan", "best", time_limit=10)
    assert r.method in r.ladder and r.value == pytest.approx(max(r.ladder.values()))
    assert BoundResult.from_dict(json.loads(json.dumps(r.to_dict()))) == r
