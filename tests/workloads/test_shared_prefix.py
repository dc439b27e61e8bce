"""Shared-prefix generators (optsched/workloads/shared_prefix.py): block ids from segments by
hand, the three families' structure, seeding."""

from __future__ import annotations

import numpy as np

from optsched.instance import Limits
from optsched.workloads.generators import generate
from optsched.workloads.shared_prefix import block_ids, few_shot, multi_turn, system_prompts


def test_block_ids_by_hand():
    # b = 4. A: segments (s=1, 6 tokens), (u=9, 5): 11 tokens, 2 full blocks:
    #   block 0 = (1, 4 of 6) -> id 0; block 1 = (1, 6) + (9, 2 of 5) -> id 1
    # B: (1, 6), (u=7, 3): 9 tokens, 2 full blocks: block 0 = (1, 4) -> 0 (shared);
    #   block 1 = (1, 6) + (7, 2) -> a new id 2 (its tokens differ from A's block 1)
    # C: (1, 6), (9, 5), (5, 4): 15 tokens: blocks 0, 1 as A's (0, 1); block 2 =
    #   (1, 6), (9, 5), (5, 1 of 4) -> 3
    ids = block_ids([[(1, 6), (9, 5)], [(1, 6), (7, 3)], [(1, 6), (9, 5), (5, 4)]], 4)
    assert ids == [(0, 1), (0, 2), (0, 1, 3)]


def test_system_prompts_share_their_system_blocks():
    inst = system_prompts(200, 5.0, seed=3, prompts=3, system=64)
    assert inst.limits.block_size == 16
    firsts = {r.prefix[:4] for r in inst.requests}  # 64 / 16 = 4 system blocks each
    assert len(firsts) <= 3
    # Zipf(1.1) over 3 prompts: the most popular one is the most frequent
    counts = sorted((sum(1 for r in inst.requests if r.prefix[:4] == f) for f in firsts),
                    reverse=True)
    assert counts[0] > counts[-1]
    # the user's own blocks are never shared
    own = [x for r in inst.requests for x in r.prefix[4:]]
    assert len(own) == len(set(own))
    assert system_prompts(200, 5.0, seed=3, prompts=3, system=64) == inst  # seeded


def test_multi_turn_turns_extend_the_previous_prompt():
    inst = multi_turn(120, 0.5, seed=1, turns=5.0, think=10.0, system=32,
                      limits=Limits(200_000, 4096, block_size=8))
    by_prefix = {r.prefix: r for r in inst.requests}
    extended = 0
    for r in inst.requests:
        for k in range(len(r.prefix) - 1, 0, -1):
            parent = by_prefix.get(r.prefix[:k])
            if parent is not None and parent.arrival < r.arrival:
                extended += 1
                # the earlier turn's whole listed prompt is a prefix of this one
                assert r.prompt > parent.prompt
                break
    assert extended > 20  # most conversations have several turns (mean 5)
    assert np.all(np.diff(inst.arrival) >= 0)


def test_few_shot_is_a_two_level_tree():
    inst = few_shot(100, 2.0, seed=0, templates=4, header=32, examples=64)
    heads = {r.prefix[:2] for r in inst.requests}  # 32 / 16 = 2 header blocks, all alike
    assert len(heads) == 1
    sets = {r.prefix[2:6] for r in inst.requests}  # then 64 / 16 = 4 example blocks
    assert 1 < len(sets) <= 4
    assert generate("few-shot", n=100, rate=2.0, seed=0, templates=4, header=32,
                    examples=64) == inst
