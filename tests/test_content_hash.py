"""``Instance.content_hash`` writes plain requests' JSON itself (issue 31): the hash is the
one of the encoder's text, ``json.dumps(to_dict() without name and preset, sort_keys=True,
separators=(",", ":"), allow_nan=False)``, for any ids, arrivals and lengths, and with
predictions, classes or SLOs (the encoder's own path)."""

from __future__ import annotations

import hashlib
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from optsched.cost import UnitCost, preset
from optsched.instance import Instance, Limits, Request


def _reference(inst: Instance) -> str:
    d = inst.to_dict()
    del d["name"]
    d["cost_model"].pop("preset", None)
    text = json.dumps(d, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_ids = st.text(min_size=1, max_size=8).filter(str.isprintable)
_arrivals = st.one_of(st.floats(0, 1e9, allow_nan=False), st.integers(0, 10**6))


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(_arrivals, st.integers(1, 50), st.integers(1, 50),
                               st.sampled_from([None, 3]), st.sampled_from([None, 0.5])),
                     min_size=1, max_size=12),
       ids=st.lists(_ids, min_size=12, max_size=12, unique=True),
       linear=st.booleans())
def test_hash_is_the_encoders(rows, ids, linear):
    reqs = tuple(Request(ids[k], a, p, o, predicted_output=pred, ttft_slo=slo)
                 for k, (a, p, o, pred, slo) in enumerate(rows))
    cost = preset("infermax-llama2-7b-a100") if linear else UnitCost()
    inst = Instance("h", Limits(kv_capacity=1000, max_batch_tokens=64), cost, reqs)
    assert inst.content_hash == _reference(inst)


def test_a_columns_instance_hashes_like_the_same_requests():
    limits = Limits(kv_capacity=1000, max_batch_tokens=64)
    ids, arr, inp, out = ("a", "é\"\\x"), [0.1, 2.0], [3, 4], [5, 6]
    cols = Instance.from_columns("c", limits, UnitCost(), ids, arr, inp, out)
    reqs = Instance("c", limits, UnitCost(), tuple(Request(*t) for t in zip(ids, arr, inp, out)))
    assert cols.content_hash == reqs.content_hash == _reference(cols)
