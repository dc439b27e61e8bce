"""Block ids of an instance (docs/semantics.md section 6, "Prefix reuse"): loading checks,
the dense index, the JSON and column paths, and the reuse potential."""

from __future__ import annotations

import json

import numpy as np
import pytest

from optsched.cost import UnitCost
from optsched.errors import InstanceError
from optsched.instance import Instance, Limits, Request
from optsched.prefix import reuse_potential


def make(reqs, b=4, **lim):
    return Instance("p", Limits(kv_capacity=lim.pop("M", 256), max_batch_tokens=64, block_size=b,
                                **lim),
                    UnitCost(), tuple(Request(r[0], r[1], r[2], 1, prefix=r[3]) for r in reqs))


def test_index_holds_dense_blocks_and_the_shareable_counts():
    inst = make([("a", 0, 13, (7, 9, 11)), ("b", 0, 12, (7, 9, 12)), ("c", 0, 3, ())])
    ix = inst.prefix_index
    assert ix.ids.tolist() == [7, 9, 11, 12]
    assert ix.block.tolist() == [0, 1, 2, 0, 1, 3]
    assert ix.listed.tolist() == [3, 3, 0]
    # a: I = 13, floor(12 / 4) = 3 -> all 3; b: I = 12 = three full blocks, but the last
    # prompt token is computed: floor(11 / 4) = 2
    assert ix.shareable.tolist() == [3, 2, 0]
    assert ix.held(np.array([0, 1]), np.array([9, 16])).tolist() == [2, 3]
    assert ix.dense(np.array([12, 8, 7])).tolist() == [3, -1, 0]
    assert inst.has_prefix and not make([("a", 0, 5, ())]).has_prefix


@pytest.mark.parametrize("reqs, message", [
    ([("a", 0, 7, (1, 2))], "lists 2 block ids but the prompt of 7 tokens has 1 full blocks"),
    ([("a", 0, 9, (1, 1))], "block 1 appears at position 1 but at position 0 in request 'a'"),
    ([("a", 0, 9, (1, 2)), ("b", 0, 9, (2, 3))],
     "request 'b'.*block 2 appears at position 0 but at position 1 in request 'a'"),
    ([("a", 0, 9, (1, 2)), ("b", 0, 9, (5, 2))],
     "request 'b'.*block 2 appears after block 5 but after block 1 in request 'a'"),
    ([("a", 0, 9, (1, -2))], "block id -2 at position 1 must be an integer"),
    ([("a", 0, 9, (1, 2**62))], "must be an integer in 0..2\\^62-1"),
    ([("a", 0, 9, (1, True))], "block id True"),
    ([("a", 0, 9, "12")], "field 'prefix' must be a list of block ids"),
])
def test_bad_block_ids_are_refused_naming_request_and_block(reqs, message):
    with pytest.raises(InstanceError, match=message):
        make(reqs)
    # the JSON column path (plain requests) gives the same message
    d = {"name": "p", "limits": {"kv_capacity": 256, "max_batch_tokens": 64, "block_size": 4},
         "cost_model": {"kind": "unit"},
         "requests": [{"id": r[0], "arrival": r[1], "prompt": r[2], "output": 1,
                       "prefix": list(r[3]) if isinstance(r[3], tuple) else r[3]}
                      for r in reqs]}
    with pytest.raises(InstanceError, match=message):
        Instance.from_json(json.dumps(d))


def test_block_ids_are_not_combined_with_swaps_or_hidden_cache():
    with pytest.raises(InstanceError, match="host_capacity.*not modelled together"):
        make([("a", 0, 9, (1, 2))], host_capacity=100)
    with pytest.raises(InstanceError, match="hidden_cache.*not modelled together"):
        make([("a", 0, 9, (1, 2))], hidden_cache=True)


def test_json_round_trip_column_path_and_hash():
    inst = make([("a", 0, 13, (7, 9, 11)), ("b", 0.5, 12, (7, 9, 12)), ("c", 1, 3, ())])
    text = inst.to_json()
    assert json.loads(text)["requests"][2].keys() == {"id", "arrival", "prompt", "output"}
    back = Instance.from_json(text)  # every request plain: the column path
    assert back == inst and back.requests[1].prefix == (7, 9, 12)
    assert back.content_hash == inst.content_hash
    assert back.prefix_index.block.tolist() == inst.prefix_index.block.tolist()
    # the hash sees the ids: another id, another instance
    other = make([("a", 0, 13, (7, 9, 11)), ("b", 0.5, 12, (7, 9, 13)), ("c", 1, 3, ())])
    assert other.content_hash != inst.content_hash
    # and an instance without ids hashes as before (no "prefix" key)
    plain = make([("c", 1, 3, ())])
    assert '"prefix"' not in plain.to_json()


def test_reuse_potential_by_hand():
    # b = 4. a (t=0): blocks 1, 2, 3 (I = 13: 3 shareable); b (t=1): 1, 2, 4 (I = 12:
    # 2 shareable: 1, 2 listed before -> 8 hit tokens); c (t=2): 1, 2, 3 (I = 14: 3
    # shareable, all listed by a -> 12); d (t=0.5): 5 (nothing before). Distinct blocks:
    # 1, 2, 3, 4, 5. Hits 8 + 12 = 20 of 13 + 12 + 14 + 5 = 44 prompt tokens.
    inst = make([("a", 0, 13, (1, 2, 3)), ("b", 1, 12, (1, 2, 4)), ("c", 2, 14, (1, 2, 3)),
                 ("d", 0.5, 5, (5,))])
    pot = reuse_potential(inst.prefix_index, inst.arrival, inst.prompt)
    assert pot == {"distinct_blocks": 5, "listed_blocks": 10, "hit_tokens": 20,
                   "prompt_tokens": 44, "hit_share": 20 / 44}
    # arrival order decides who hits: with c first, c hits nothing and a hits 12
    late = make([("a", 3, 13, (1, 2, 3)), ("b", 1, 12, (1, 2, 4)), ("c", 0, 14, (1, 2, 3))])
    pot = reuse_potential(late.prefix_index, late.arrival, late.prompt)
    assert pot["hit_tokens"] == 8 + 12  # b hits 1, 2 of c; a hits 1, 2, 3 of c
