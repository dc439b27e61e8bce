"""``optsched info``: the prefix-reuse statistics of an instance with block ids."""

from __future__ import annotations

import json

from cli_helpers import run_cli

from optsched.data import load_embedded


def _naive_reuse(inst):
    """Distinct, listed and shared blocks and the hit tokens of an unbounded cache serving in
    arrival order (docs/semantics.md section 6): request by request, the leading blocks (at
    most ``H = min(P, floor((I - 1) / b))``) that some earlier request listed."""
    b = inst.limits.block_size
    order = sorted(range(inst.n), key=lambda k: (inst.requests[k].arrival, k))
    seen: set[int] = set()
    count: dict[int, int] = {}
    hits = 0
    for k in order:
        r = inst.requests[k]
        H = min(len(r.prefix), (r.prompt - 1) // b)
        run = 0
        while run < H and r.prefix[run] in seen:
            run += 1
        hits += run * b
        seen.update(r.prefix)
        for x in r.prefix:
            count[x] = count.get(x, 0) + 1
    return {"distinct_blocks": len(count), "listed_blocks": sum(count.values()),
            "shared_blocks": sum(c >= 2 for c in count.values()), "hit_tokens": hits,
            "prompt_tokens": sum(r.prompt for r in inst.requests)}


def test_info_reports_the_reuse_potential_of_the_shipped_shared_prefix_instance(capsys):
    rc, out, _ = run_cli(capsys, "info", "shared-prefix", "--json")
    assert rc == 0
    got = json.loads(out)["prefix_reuse"]
    want = _naive_reuse(load_embedded("shared-prefix"))
    assert {k: got[k] for k in want} == want
    assert got["hit_share"] == want["hit_tokens"] / want["prompt_tokens"]
    assert want["shared_blocks"] > 0 and want["hit_tokens"] > 0  # the instance shares prefixes
    rc, out, _ = run_cli(capsys, "info", "shared-prefix")
    assert rc == 0 and f"{want['distinct_blocks']} distinct" in out and "shared fraction" in out


def test_info_of_an_instance_without_ids_has_no_prefix_section(capsys):
    rc, out, _ = run_cli(capsys, "info", "tiny", "--json")
    assert rc == 0 and "prefix_reuse" not in json.loads(out)
