"""Instance validation: bad input is rejected with a message naming request and field."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optsched.cli import main
from optsched.cost import DEFAULT_PRESET, KSWAP_DEFAULT, RHO_DEFAULT, LinearCost, UnitCost, preset
from optsched.errors import InstanceError
from optsched.instance import Instance, Limits, Request

GOOD = {
    "name": "tiny",
    "limits": {"kv_capacity": 16, "max_batch_tokens": 4096, "max_prefill_tokens": None,
               "max_batch_size": None, "block_size": 1},
    "cost_model": {"kind": "unit"},
    "requests": [{"id": "a", "arrival": 0, "prompt": 4, "output": 3}],
}

#: a linear cost model with every coefficient stated (a partial one is refused)
ZERO_LINEAR = {"kind": "linear", **{k: 0.0 for k in LinearCost().coefficients}}


def with_request(**changes):
    d = json.loads(json.dumps(GOOD))
    d["requests"][0].update(changes)
    return d


@pytest.mark.parametrize(
    "doc, needle",
    [
        (with_request(prompt=-1), "request 'a': field 'prompt'"),
        (with_request(output=0), "request 'a': field 'output'"),
        (with_request(arrival=float("nan")), "request 'a': field 'arrival'"),
        (with_request(prompt=2.5), "request 'a': field 'prompt'"),
        (with_request(color="red"), "request 'a': unknown fields ['color']"),
        (with_request(prompt=10, output=8), "request 'a': prompt + output - 1 = 17"),
        ({**GOOD, "requests": GOOD["requests"] * 2}, "request 'a': duplicate id"),
        ({k: v for k, v in GOOD.items() if k != "limits"}, "missing field 'limits'"),
        ({**GOOD, "requests": [{"id": "a", "arrival": 0, "prompt": 4}]},
         "request 'a': missing field 'output'"),
        ({**GOOD, "limits": {"kv_capacity": 16}}, "limits: missing field 'max_batch_tokens'"),
        ({**GOOD, "limits": {**GOOD["limits"], "max_prefill_tokens": 5000}}, "max_prefill_tokens"),
        ({**GOOD, "cost_model": {**ZERO_LINEAR, "k0": -1}}, "coefficient k0"),
        ({**GOOD, "cost_model": {"preset": "nope"}}, "unknown preset 'nope'"),
        ({**GOOD, "cost_model": {"kind": "cubic"}}, "unknown kind 'cubic'"),
    ],
)
def test_bad_instances_are_rejected_naming_the_field(doc, needle):
    with pytest.raises(InstanceError, match=None) as e:
        Instance.from_dict(doc)
    assert needle in str(e.value)


def test_malformed_json_and_nan():
    with pytest.raises(InstanceError, match="malformed JSON"):
        Instance.from_json("{not json")
    with pytest.raises(InstanceError, match="NaN"):
        Instance.from_json('{"limits": {"kv_capacity": 16, "max_batch_tokens": 8}, '
                           '"cost_model": {"kind": "unit"}, '
                           '"requests": [{"id": "a", "arrival": NaN, "prompt": 1, "output": 1}]}')


def test_preset_resolves_and_round_trips():
    inst = Instance.from_dict({**GOOD, "cost_model": {"preset": "infermax-llama2-7b-a100"}})
    again = Instance.from_dict(inst.to_dict())
    assert again == inst
    assert inst.cost_model.kdm == pytest.approx(8.513e-6 * 32 / 1000)


def test_block_size_applies_to_the_never_finishes_check():
    with pytest.raises(InstanceError, match="blocks of 4"):
        Instance("b", Limits(kv_capacity=10, max_batch_tokens=8, block_size=4),
                 requests=(Request("a", 0, 5, 5),))


# --- CLI exit codes ---------------------------------------------------------------------


def write(tmp_path, name, obj):
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(p)


def test_validate_exit_codes(tmp_path, capsys):
    inst = write(tmp_path, "i.json", GOOD)
    good = write(tmp_path, "g.json", {"batches": [{"entries": [["a", 4]]}, {"entries": [["a", 1]]},
                                                  {"entries": [["a", 1]]}]})
    bad = write(tmp_path, "b.json", {"batches": [{"entries": [["a", 4]]}, {"entries": [["b", 1]]}]})
    assert main(["validate", inst, good]) == 0
    assert main(["validate", inst, bad]) == 1
    out = capsys.readouterr().out
    assert "UNKNOWN_REQUEST (batch 1, request 'b')" in out and "INCOMPLETE" in out
    assert main(["validate", inst, bad, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["feasible"] is False
    assert {v["code"] for v in doc["violations"]} == {"UNKNOWN_REQUEST", "INCOMPLETE"}
    assert set(doc["metrics"]) >= {"makespan", "total_latency", "mean_latency", "mean_ttft", "mean_tpot",
                                   "evictions", "recomputed_tokens", "peak_kv", "batches"}
    assert set(doc["requests"][0]) >= {"id", "first_token", "completion", "latency", "ttft", "tpot",
                                       "evictions"}


@pytest.mark.parametrize(
    "content",
    ["{bad json", json.dumps(with_request(prompt=-3)), json.dumps({**GOOD, "requests": GOOD["requests"] * 2}),
     json.dumps(with_request(prompt=15, output=5))],
)
def test_bad_instance_file_exits_2_with_one_line(tmp_path, capsys, content):
    inst = write(tmp_path, "i.json", content)
    sched = write(tmp_path, "s.json", {"batches": []})
    assert main(["validate", inst, sched]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "i.json" in err


def test_bad_schedule_file_exits_2(tmp_path, capsys):
    inst = write(tmp_path, "i.json", GOOD)
    for content in ["[1, 2]", "{oops", json.dumps({"batches": [{"entries": [["a", "x"]]}]})]:
        sched = write(tmp_path, "s.json", content)
        assert main(["evaluate", inst, sched]) == 2
        assert len(capsys.readouterr().err.strip().splitlines()) == 1
    assert main(["evaluate", inst, str(tmp_path / "missing.json")]) == 2


# -- Instance.from_columns: the bulk constructor trace loading uses --------------
def _both(ids, arrival, prompt, output, limits=None):
    """(per-request result or error text, bulk result or error text) for the same columns."""
    limits = limits or Limits(kv_capacity=10, max_batch_tokens=8, block_size=2)
    out = []
    for build in (
        lambda: Instance("c", limits, UnitCost(), tuple(
            Request(id=r, arrival=a, prompt=i, output=o)
            for r, a, i, o in zip(ids, arrival, prompt, output))),
        lambda: Instance.from_columns("c", limits, UnitCost(), ids, np.array(arrival),
                                      np.array(prompt), np.array(output)),
    ):
        try:
            out.append(build())
        except InstanceError as e:
            out.append(str(e))
    return out


def test_from_columns_equals_per_request_construction():
    ref, bulk = _both(["a", "b", "c"], [0.0, 1.5, 2.0], [3, 1, 4], [2, 5, 1])
    assert isinstance(bulk, Instance) and bulk == ref
    assert bulk.content_hash == ref.content_hash
    assert bulk.index == ref.index and bulk.ids == ref.ids
    for col in ("arrival", "prompt", "output"):
        assert np.array_equal(getattr(bulk, col), getattr(ref, col))
        assert getattr(bulk, col).dtype == getattr(ref, col).dtype
    assert [type(v) for v in vars(bulk.requests[1]).values()] == \
        [type(v) for v in vars(ref.requests[1]).values()]


@pytest.mark.parametrize("ids, arrival, prompt, output", [
    (["a", "b"], [0.0, -1.0], [1, 1], [1, 1]),            # negative arrival
    (["a", "b"], [0.0, float("nan")], [1, 1], [1, 1]),    # NaN arrival
    (["a", "b"], [0.0, 2e12], [1, 1], [1, 1]),            # arrival above MAX_ARRIVAL
    (["a", "b"], [0.0, 0.0], [1, 0], [1, 1]),             # zero prompt
    (["a", "b"], [0.0, 0.0], [1, 1], [1, 2**41]),         # output above MAX_COUNT
    (["a", ""], [0.0, 0.0], [1, 1], [1, 1]),              # empty id
    (["a", "b\n"], [0.0, 0.0], [1, 1], [1, 1]),           # unprintable id
    (["a", "a"], [0.0, 0.0], [1, 1], [1, 1]),             # duplicate id
    # "b": I + O - 1 = 11 KV tokens, 12 in blocks of 2 > M = 10 ("a": 1 token, fits)
    (["a", "b"], [0.0, 0.0], [1, 6], [1, 6]),
    # order: the over-capacity request "a" comes first, but every Request is built (and
    # checked) before the instance looks at capacity, so "b"'s bad output wins
    (["a", "b"], [0.0, 0.0], [9, 1], [9, 0]),
    # order: the duplicate (index 2) comes after the over-capacity request (index 1)
    (["a", "b", "a"], [0.0, 0.0, 0.0], [1, 9, 1], [1, 9, 1]),
    (["a", "a", "b"], [0.0, 0.0, 0.0], [1, 1, 9], [1, 1, 9]),
])
def test_from_columns_raises_what_per_request_construction_raises(ids, arrival, prompt, output):
    ref, bulk = _both(ids, arrival, prompt, output)
    assert isinstance(ref, str) and bulk == ref


def test_from_columns_rejects_float_token_columns():
    with pytest.raises(InstanceError, match="column 'prompt' must hold integers"):
        Instance.from_columns("c", Limits(kv_capacity=10, max_batch_tokens=8), UnitCost(),
                              ["a"], np.zeros(1), np.ones(1), np.ones(1, dtype=np.int64))


def test_from_dict_plain_requests_take_the_bulk_path_with_the_same_result():
    reqs = [{"id": "a", "arrival": 0, "prompt": 4, "output": 3},
            {"id": "b", "arrival": 1.5, "prompt": 2, "output": 9}]
    doc = {**GOOD, "requests": reqs}
    bulk = Instance.from_dict(doc)
    ref = Instance("tiny", Limits.from_dict(GOOD["limits"]), UnitCost(),
                   tuple(Request.from_dict(r) for r in reqs))
    assert bulk == ref and bulk.content_hash == ref.content_hash
    assert type(bulk.requests[0].arrival) is float  # int arrival 0 stored as 0.0, like Request
    # a request with an optional field (or a bool, or an integer id) takes the per-request path
    mixed = Instance.from_dict({**doc, "requests": [reqs[0], {**reqs[1], "cls": "rt"}]})
    assert mixed.requests[1].cls == "rt"
    assert Instance.from_dict({**doc, "requests": [{**reqs[0], "id": 7}]}).ids == ("7",)
    with pytest.raises(InstanceError, match="request 'a': field 'prompt'"):
        Instance.from_dict({**doc, "requests": [{**reqs[0], "prompt": True}]})


# --- clusters (docs/semantics.md section 6, "Clusters") ------------------------------------

from optsched.instance import Cluster, Engine, TransferLink  # noqa: E402


def _cluster_doc(engines, transfer=None, requests=None, limits=None):
    d = {"name": "c", "limits": limits or {"kv_capacity": 16, "max_batch_tokens": 64},
         "cost_model": {"kind": "unit"},
         "requests": requests or [{"id": "a", "arrival": 0, "prompt": 4, "output": 3}],
         "cluster": {"engines": engines}}
    if transfer is not None:
        d["cluster"]["transfer"] = transfer
    return d


LINK = {"fixed": 0.001, "bytes_per_token": 524288, "bandwidth": 2.5e10}


def test_cluster_round_trips_and_enters_the_content_hash():
    d = _cluster_doc([{"id": "p", "role": "prefill", "gpus": 2, "hourly_cost": 3.5},
                      {"id": "d", "role": "decode",
                       "limits": {"kv_capacity": 32, "max_batch_tokens": 8},
                       "cost_model": {"preset": "infermax-llama2-70b-4xa100"}}], LINK)
    inst = Instance.from_dict(d)
    assert Instance.from_json(inst.to_json()) == inst
    assert inst.n_engines == 2 and inst.engine_ids == ("p", "d")
    assert inst.engine(0).limits == inst.limits and inst.engine(1).limits.kv_capacity == 32
    assert inst.cluster.transfer.time(4) == pytest.approx(0.001 + 4 * 524288 / 2.5e10)
    assert inst.cluster.gpus == 3 and not inst.single_engine
    plain = Instance.from_dict({k: v for k, v in d.items() if k != "cluster"})
    assert plain.content_hash != inst.content_hash and "cluster" not in plain.to_dict()
    assert plain.n_engines == 1 and plain.engine_ids == ("0",) and plain.single_engine
    # the preset label does not enter the hash, its coefficients do
    d2 = _cluster_doc(d["cluster"]["engines"][:1] + [dict(d["cluster"]["engines"][1])], LINK)
    from optsched.cost import preset
    d2["cluster"]["engines"][1]["cost_model"] = {
        k: v for k, v in preset("infermax-llama2-70b-4xa100").to_dict().items() if k != "preset"}
    assert Instance.from_dict(d2).content_hash == inst.content_hash


def test_for_engine_is_the_instance_on_the_engine_s_limits():
    d = _cluster_doc([{"id": "a"}, {"id": "b", "limits": {"kv_capacity": 8,
                                                           "max_batch_tokens": 4}}])
    inst = Instance.from_dict(d)
    e = inst.for_engine(1)
    assert e.cluster is None and e.limits.kv_capacity == 8 and e.requests == inst.requests
    assert inst.for_engine(0).limits == inst.limits


@pytest.mark.parametrize("engines, transfer, match", [
    ([], None, "non-empty list"),
    ([{"id": "a"}, {"id": "a"}], None, "engine 'a': duplicate id"),
    ([{"id": "a", "role": "router"}], None, "engine 'a': field 'role' must be one of"),
    ([{"id": "a", "gpus": 0}], None, "engine 'a': field 'gpus'"),
    ([{"id": "a", "hourly_cost": -1}], None, "engine 'a': field 'hourly_cost'"),
    ([{"id": "a", "speed": 2}], None, r"engine 'a': unknown fields \['speed'\]"),
    ([{"role": "both"}], None, "missing field 'id'"),
    ([{"id": ""}], None, "engine id must be non-empty"),
    ([{"id": "p", "role": "prefill"}], LINK, "needs an engine of role 'decode' or 'both'"),
    ([{"id": "d", "role": "decode"}], LINK, "needs an engine of role 'prefill' or 'both'"),
    ([{"id": "p", "role": "prefill"}, {"id": "d", "role": "decode"}], None,
     "need a transfer link"),
    ([{"id": "a"}], {"bytes_per_token": 1, "bandwidth": 0}, "transfer field 'bandwidth'"),
    ([{"id": "a"}], {"bytes_per_token": 1}, "transfer: missing field 'bandwidth'"),
    ([{"id": "a"}], {"bytes_per_token": 1, "bandwidth": 1, "fixed": float("nan")},
     "transfer field 'fixed'"),
    ([{"id": "a", "limits": {"kv_capacity": 16, "max_batch_tokens": 4, "host_capacity": 8}}],
     None, "engine 'a': limits enable host_capacity"),
    ([{"id": "a", "limits": {"kv_capacity": 16}}], None,
     "engine 'a': limits: missing field 'max_batch_tokens'"),
    ([{"id": "a", "cost_model": {"kind": "cubic"}}], None, "engine 'a': cost_model: unknown kind"),
])
def test_a_bad_cluster_is_refused_in_one_line(engines, transfer, match):
    with pytest.raises(InstanceError, match=match) as e:
        Instance.from_dict(_cluster_doc(engines, transfer))
    assert "\n" not in str(e.value)


def test_swapping_on_the_instance_of_a_cluster_is_refused():
    d = _cluster_doc([{"id": "a"}], limits={"kv_capacity": 16, "max_batch_tokens": 64,
                                            "hidden_cache": True})
    with pytest.raises(InstanceError, match="cluster: limits enable hidden_cache"):
        Instance.from_dict(d)


def test_a_request_no_engine_can_serve_is_refused():
    small = {"kv_capacity": 5, "max_batch_tokens": 64}
    # a: prompt 4 fits the prefill engine (M 5), its peak 6 does not fit the decode engine (5)
    d = _cluster_doc([{"id": "p", "role": "prefill"}, {"id": "d", "role": "decode",
                                                       "limits": small}], LINK)
    with pytest.raises(InstanceError, match="request 'a': no engine of the cluster can serve"):
        Instance.from_dict(d)
    # with O = 1 the prefill engine alone serves it
    d["requests"] = [{"id": "a", "arrival": 0, "prompt": 4, "output": 1}]
    assert Instance.from_dict(d).n == 1
    # without a link one engine must hold the peak
    d = _cluster_doc([{"id": "x", "limits": small}, {"id": "y", "limits": small}])
    with pytest.raises(InstanceError, match="request 'a'"):
        Instance.from_dict(d)


def test_cluster_dataclasses_validate_themselves():
    with pytest.raises(InstanceError, match="engines"):
        Cluster(())
    with pytest.raises(InstanceError, match="'limits' must be a Limits"):
        Engine("a", limits={"kv_capacity": 3})
    assert TransferLink(2, 4).time(np.array([0, 2])).tolist() == [0.0, 1.0]


def test_single_engine_code_refuses_a_cluster_in_one_line():
    """Bounds, formulations, LNS and the one-engine simulator model one engine: on a cluster
    their answer would be one engine's (a bound above the cluster's optimum), so they refuse;
    a one-engine cluster with the instance's own limits is exactly one engine and runs."""
    import optsched
    from optsched.errors import OptschedError
    from optsched.search.lns import improve

    base = optsched.load("tiny")
    two = base.replace(cluster=Cluster((Engine("a"), Engine("b"))))
    for call in (lambda: optsched.lower_bound(two, "makespan"),
                 lambda: optsched.solve(two, "infermax", "makespan"),
                 lambda: optsched.simulate(two, "vllm"),
                 lambda: improve(two, optsched.simulate(base, "vllm"))):
        with pytest.raises(OptschedError, match="cluster of 2 engines") as e:
            call()
        assert "\n" not in str(e.value)
    one = base.replace(cluster=Cluster((Engine("a"),)))
    assert one.single_engine
    assert optsched.lower_bound(one, "makespan").value == optsched.lower_bound(base,
                                                                               "makespan").value
    assert optsched.simulate(one, "vllm") == optsched.simulate(base, "vllm")
    own = base.replace(cluster=Cluster((Engine("a", limits=Limits(32, 64)),)))
    with pytest.raises(InstanceError, match="one-engine cluster whose engine has its own"):
        optsched.lower_bound(own, "makespan")
def test_instance_json_without_cost_model_is_refused():
    """Before: a missing ``cost_model`` silently meant unit time (semantics section 2:
    missing fields are refused)."""
    d = json.loads(json.dumps(GOOD))
    del d["cost_model"]
    with pytest.raises(InstanceError, match="missing field 'cost_model'"):
        Instance.from_dict(d)


@pytest.mark.parametrize("cm", [preset(DEFAULT_PRESET), LinearCost(k0=1.0), UnitCost()])
def test_instance_json_states_kswap_and_rho(cm):
    """Before: ``kswap``/``rho`` equal to the code's defaults were left out, so a saved
    instance's swap and hidden-cache numbers depended on the version that read it."""
    inst = Instance("x", Limits(16, 16), cm, (Request("a", 0.0, 2, 2),))
    d = inst.to_dict()["cost_model"]
    assert d["kswap"] == cm.kswap and d["rho"] == cm.rho
    if isinstance(cm, LinearCost) and cm.preset is None:
        assert (d["kswap"], d["rho"]) == (KSWAP_DEFAULT, RHO_DEFAULT)
    assert Instance.from_dict(json.loads(inst.to_json())) == inst


def test_bad_hidden_ratio_is_refused_naming_the_field():
    for bad in (0, -1.0, float("nan"), 65, 1 / 3 + 1e-9, True, "2"):
        with pytest.raises(InstanceError, match="hidden_ratio"):
            Limits(kv_capacity=8, max_batch_tokens=8, hidden_ratio=bad)


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


def test_prefix_reuse_on_replicas_loads_and_on_a_disaggregated_cluster_is_refused():
    """Prefix reuse on a cluster (semantics section 6, "Clusters", prefix reuse on replicas):
    engines of role 'both' each have their own cache and load; a prefill or decode engine
    would need cached blocks moved, which is not modelled: refused in one line."""
    base = Instance("p", Limits(kv_capacity=64, max_batch_tokens=64, block_size=2), UnitCost(),
                    (Request("a", 0, 4, 2, prefix=(1, 2)), Request("b", 0, 4, 2, prefix=(1,))))
    two = base.replace(cluster=Cluster((Engine("x"), Engine("y"))))
    assert two.n_engines == 2 and two.has_prefix
    link = TransferLink(bytes_per_token=1.0, bandwidth=1.0)
    with pytest.raises(InstanceError, match="engines of role 'decode'") as e:
        base.replace(cluster=Cluster((Engine("p", "prefill"), Engine("d", "decode")), link))
    assert "\n" not in str(e.value)
    one = base.replace(cluster=Cluster((Engine("x"),)))
    assert one.single_engine and one.has_prefix
    assert Instance.from_dict(two.to_dict()).content_hash == two.content_hash


def test_a_request_without_a_usable_id_is_named_by_its_position():
    """Before: "request None: field 'id' must be a non-empty string" (which request?)."""
    d = json.loads(json.dumps(GOOD))
    d["requests"] = [d["requests"][0], {**d["requests"][0], "id": None}]
    with pytest.raises(InstanceError, match=r"request #1: field 'id' must be a non-empty "
                                            r"string, got None"):
        Instance.from_dict(d)
