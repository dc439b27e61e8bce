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


def test_shipped_shared_prefix_instance_is_its_generator_run():
    """``shared-prefix`` (the small instance whose requests share system prompts, for the
    prefix-reuse tests and demos) is exactly what ``optsched generate system-prompts --n 12
    --rate 2 --seed 0 --prompts 3 --system 64 --kv-capacity 2048 --max-batch-tokens 1024
    --name shared-prefix`` writes (no trace data in it)."""
    from optsched.data import load_embedded
    from optsched.instance import Limits
    from optsched.workloads.shared_prefix import BLOCK_SIZE, system_prompts

    shipped = load_embedded("shared-prefix")
    again = system_prompts(12, 2.0, 0, prompts=3, system=64, name="shared-prefix",
                           limits=Limits(2048, 1024, block_size=BLOCK_SIZE))
    assert again.to_json() == shipped.to_json()
    assert shipped.has_prefix and shipped.limits.block_size == 16
