"""The instances shipped with optsched (optsched/data/ and instances/)."""

from __future__ import annotations

import json

from paths import REPO

from optsched.instance import Instance


def test_shipped_instance_files_state_kswap_and_rho():
    """Before: the shipped instance files (optsched/data, instances/) left ``kswap`` and
    ``rho`` out, so their swap and hidden-cache numbers were whatever the reading code's
    defaults were. Each file now states both, and the writer reproduces it exactly (the
    file is what ``Instance.save`` writes, so nothing else in it is left to a default)."""
    files = [p for p in [*(REPO / "optsched" / "data").glob("*.json"),
                         *(REPO / "instances").rglob("*.json")]
             if not p.name.endswith(".schedules.json") and p.name != "manifest.json"]
    assert len(files) >= 12
    for p in files:
        text = p.read_text()
        cm = json.loads(text)["cost_model"]
        assert "kswap" in cm and "rho" in cm, p
        assert Instance.load(p).to_json() == text.rstrip("\n"), p
