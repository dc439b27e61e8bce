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


def test_best_skips_reuse_twins_without_prefix_ids():
    """Without prefix ids a reuse rung (B19) equals its reuse-blind twin, so ``best`` climbs
    the plain rungs only and names them; with prefix ids it climbs the twins (and no
    reuse-blind rung)."""
    from optsched.bounds import bound_methods

    twins = {m.name: m.twin_of for m in bound_methods().values() if m.twin_of}
    assert twins == {"reuse-request": "request", "reuse-work": "work", "reuse-srpt": "srpt"}
    plain = Instance.load(REPO / "instances" / "seq-unit-3.json")
    r = optsched.lower_bound(plain, "total-latency", "best", time_limit=10)
    assert not set(r.ladder) & set(twins)
    assert not r.method.startswith("reuse-")
    shared = Instance.load(REPO / "optsched" / "data" / "shared-prefix.json")
    assert shared.has_prefix
    r = optsched.lower_bound(shared, "total-latency", "best", time_limit=10)
    assert set(twins) <= set(r.ladder) and "work" not in r.ladder
