"""``ReuseFloors`` (optsched/bounds/reuse_floors.py): the per-request floors with prefix reuse
(formulations/bounds.md B19), by hand."""

from __future__ import annotations

import numpy as np
import pytest

from optsched.bounds.floors import Floors
from optsched.bounds.reuse_floors import ReuseFloors
from optsched.cost import LinearCost, UnitCost
from optsched.instance import Instance, Limits, Request


def three_sharing() -> Instance:
    """Three requests of 9 prompt tokens and 1 output token listing blocks 1, 2 (b = 4)."""
    reqs = tuple(Request(x, 0, 9, 1, prefix=(1, 2)) for x in "abc")
    return Instance("three", Limits(kv_capacity=64, max_batch_tokens=10, block_size=4),
                    UnitCost(), reqs)


def test_floors_charge_only_what_a_hit_cannot_skip():
    f = ReuseFloors.of(three_sharing())
    # H = min(P = 2, floor((9 - 1) / 4) = 2) = 2: a hit skips L = 8 tokens, u = 9 - 8 = 1
    assert f.hit_offset.tolist() == [8, 8, 8] and f.computed_prompt.tolist() == [1, 1, 1]
    assert f.kmin.tolist() == [1, 1, 1] and f.tokens.tolist() == [1, 1, 1]  # u + O - 1
    # both blocks are listed by 3 requests, always at a shareable position: each request's
    # share of the 8 tokens someone must compute is 4 * (1/3 + 1/3) = 8/3
    assert f.block_tokens == pytest.approx([8 / 3] * 3)
    # KV after the first token: private fp(9 - 8) = 4, plus 4 * (1/3 + 1/3) of the blocks
    assert f.prefill_area == pytest.approx([4 + 8 / 3] * 3)
    assert f.area == pytest.approx([4 + 8 / 3] * 3)  # O = 1: the same batch
    assert f.max_entries == 10  # C; no memory cap (shared blocks can hold many entries)


def test_a_block_listed_at_a_non_shareable_position_is_no_extra_work():
    # `a` (I = 8, blocks 1, 2) cannot hit its last block (H = min(2, floor(7/4)) = 1): it
    # computes block 2 itself, counted in its u = 8 - 4 = 4; block 2 adds no share to `b`
    # (I = 9, H = 2), while block 1 (shareable for both) gives each 4 / 2 = 2 tokens
    reqs = (Request("a", 0, 8, 1, prefix=(1, 2)), Request("b", 0, 9, 1, prefix=(1, 2)))
    f = ReuseFloors.of(Instance("nonshare", Limits(64, 10, block_size=4), UnitCost(), reqs))
    assert f.computed_prompt.tolist() == [4, 1]
    assert f.block_tokens == pytest.approx([2.0, 2.0])


def test_prefill_price_counts_the_hit_as_context():
    # two requests of I = 9 listing blocks 1, 2; either may hit L = 8 tokens and compute one
    # at m = 8: k1 + kpq + kpm * 8 = 0.1 + 0.01 + 0.16, the batch k0 = 1 more: 1.27 (kpq =
    # kpm / 2, so kpm is not lowered). Without reuse (F5) one chunk of 9 from m = 0:
    # 1 + 0.9 + 0.01 * 81 = 2.71
    cost = LinearCost(k0=1.0, k1=0.1, kpq=0.01, kpm=0.02)
    reqs = (Request("a", 0, 9, 1, prefix=(1, 2)), Request("b", 0, 9, 1, prefix=(1, 2)))
    inst = Instance("two", Limits(64, 10, block_size=4), cost, reqs)
    assert ReuseFloors.of(inst).prefill_chain == pytest.approx([1.27, 1.27])
    assert Floors.of(inst).prefill_chain == pytest.approx([2.71, 2.71])


def test_blocks_only_one_request_lists_are_its_own_work():
    # `a` lists 1, 2, 3 (I = 13, H = 3), `b` lists 1, 4 (I = 9, H = 2): only block 1 is shared.
    # Before its first token `a` computes blocks 2, 3 itself (no one else can: a hit on them
    # needs `a`'s own earlier computation), so u = 13 - 4 = 9 from L' = 4; `b`: u = 9 - 4 = 5.
    # A refill may hit the request's own cached blocks: it starts at L = H*b (12 and 8).
    # Block 1's computation is shared: 4 / 2 = 2 tokens each
    reqs = (Request("a", 0, 13, 2, prefix=(1, 2, 3)), Request("b", 0, 9, 2, prefix=(1, 4)))
    f = ReuseFloors.of(Instance("own", Limits(64, 16, block_size=4), UnitCost(), reqs))
    assert f.hit_offset.tolist() == [4, 4] and f.computed_prompt.tolist() == [9, 5]
    assert f.refill_offset.tolist() == [12, 8]
    assert f.block_tokens == pytest.approx([2.0, 2.0])


def test_kpm_is_lowered_to_twice_kpq():
    # kpq < kpm / 2 would make a chunk straddling the hit boundary cheaper than its part
    # after it; pricing with kpm = 2 kpq only lowers every entry's cost
    cost = LinearCost(k0=1.0, k1=0.1, kpq=0.01, kpm=0.05)
    inst = Instance("k", Limits(64, 10, block_size=4), cost, (Request("a", 0, 9, 2),))
    assert ReuseFloors.of(inst).k["kpm"] == pytest.approx(0.02)
    assert Floors.of(inst).k["kpm"] == pytest.approx(0.05)


def test_without_ids_the_floors_are_the_reuse_blind_ones():
    cost = LinearCost(k0=1.0, k1=0.1, kpq=0.02, kpm=0.02, kdm=0.001, kpr=0.1, kdr=0.05)
    reqs = (Request("a", 0, 7, 3), Request("b", 1, 12, 2))
    inst = Instance("plain", Limits(40, 8, block_size=2), cost, reqs)
    f, g = ReuseFloors.of(inst), Floors.of(inst)
    for name in ("kmin", "tokens", "area", "prefill_area", "entry_cost", "chain",
                 "prefill_chain"):
        np.testing.assert_allclose(getattr(f, name), getattr(g, name), err_msg=name)
    assert f.block_tokens.tolist() == [0.0, 0.0]
