"""Mooncake traces (optsched/workloads/mooncake.py): the block mapping by hand, selection,
the default capacity, bad input (one line, exit 2), and the published reuse figures on the
real traces (skipped without ../shared/data)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from paths import SHARED_DATA

from optsched.cli import main
from optsched.errors import InputFileError, InstanceError
from optsched.instance import Instance, Limits
from optsched.prefix import reuse_potential
from optsched.workloads.mooncake import map_blocks, mooncake_instance, read_mooncake

ROWS = [
    {"timestamp": 0, "input_length": 1100, "output_length": 5, "hash_ids": [7, 8, 9]},
    {"timestamp": 500, "input_length": 1024, "output_length": 2, "hash_ids": [7, 8]},
    {"timestamp": 1500, "input_length": 600, "output_length": 3, "hash_ids": [7, 10]},
    {"timestamp": 2500, "input_length": 90, "output_length": 1, "hash_ids": [11]},
]


def write(tmp_path, rows, name="t.jsonl"):
    p = tmp_path / name
    p.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return p


def test_map_blocks_by_hand():
    # prompts 1100 and 600 tokens, trace ids [7, 8, 9] and [7, 10]; b = 256: r = 2 sub-blocks
    # per trace block; full blocks floor(1100/256) = 4 -> ids 14, 15 (7), 16, 17 (8);
    # floor(600/256) = 2 -> 14, 15 (7 only; 10 covers tokens 512..599, no full 256 block)
    ptr, flat = map_blocks(np.array([1100, 600]), np.array([0, 3, 5]), np.array([7, 8, 9, 7, 10]),
                           256)
    assert ptr.tolist() == [0, 4, 6] and flat.tolist() == [14, 15, 16, 17, 14, 15]
    # b = 512: one id per full trace block, the partial last one dropped
    ptr, flat = map_blocks(np.array([1100, 600]), np.array([0, 3, 5]), np.array([7, 8, 9, 7, 10]),
                           512)
    assert ptr.tolist() == [0, 2, 3] and flat.tolist() == [7, 8, 7]


def test_read_select_and_default_capacity(tmp_path):
    p = write(tmp_path, ROWS)
    t = read_mooncake(p)
    assert t.arrival.tolist() == [0.0, 0.5, 1.5, 2.5]  # milliseconds -> seconds
    inst = mooncake_instance(p)
    # M: the longest I + O - 1 = 1104 in whole blocks of 512 -> 1536; C = 4096
    assert inst.limits == Limits(1536, 4096, block_size=512)
    # r1: I = 1024 = two full blocks, listed 7, 8; it can hit only 7 (floor(1023/512) = 1)
    assert [r.prefix for r in inst.requests] == [(7, 8), (7, 8), (7,), ()]
    assert inst.prefix_index.shareable.tolist() == [2, 1, 1, 0]
    # reuse potential: r1 hits block 7 (512), r2 hits 7 (512): 1024 of 2814 prompt tokens
    pot = reuse_potential(inst.prefix_index, inst.arrival, inst.prompt)
    assert pot["hit_tokens"] == 1024 and pot["prompt_tokens"] == 2814
    # a seeded window of 2 consecutive rows: rows 0..4-2 drawn by the seed, re-based to 0
    w = mooncake_instance(p, consecutive=2, seed=3)
    lo = int(w.ids[0][1:])
    assert w.ids == (f"r{lo}", f"r{lo + 1}") and w.arrival[0] == 0.0
    assert w.name.endswith(f"-seed3-rows{lo}-{lo + 2}")
    # a time window in seconds and a rate scale
    # (rows at 0.5 and 1.5 s, re-based to the window's start 0.4, then halved)
    w = mooncake_instance(p, start=0.4, end=2.0, rate_scale=2.0)
    assert w.arrival.tolist() == pytest.approx([0.05, 0.55]) and w.ids == ("r1", "r2")


def test_the_cli_writes_an_instance_with_block_ids(tmp_path, capsys):
    p = write(tmp_path, ROWS)
    out = tmp_path / "i.json"
    assert main(["generate", "mooncake", "--trace", str(p), "--block-size", "256",
                 "--kv-capacity", "4096", "-o", str(out)]) == 0
    inst = Instance.load(out)
    assert inst.limits.kv_capacity == 4096 and inst.requests[2].prefix == (14, 15)
    capsys.readouterr()
    assert main(["info", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)["prefix_reuse"]
    # b = 256: r0 (1100 tokens) lists 14, 15, 16, 17, r1 (1024) the same four, r2 (600)
    # 14, 15, r3 (90) none: 10 listed, 4 distinct. Unbounded cache in arrival order: r1 hits
    # its shareable 14, 15, 16 (floor(1023/256) = 3 blocks, 768 tokens), r2 hits 14, 15
    # (512): 1280 of 2814 prompt tokens
    assert (info["listed_blocks"], info["distinct_blocks"], info["hit_tokens"]) == (10, 4, 1280)
    assert info["requests_with_ids"] == 3 and info["block_size"] == 256


@pytest.mark.parametrize("rows, match", [
    (["not json"], r"line 1: not a JSON object"),
    ([{"timestamp": 0, "input_length": 10, "output_length": 1}], r"line 1: field 'hash_ids' missing"),
    ([{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1, 2, 3]}],
     r"line 1: 3 hash_ids but the prompt of 600 tokens has 2 blocks of 512"),
    ([{"timestamp": 0, "input_length": 1100, "output_length": 1, "hash_ids": [1, 2]},
      {"timestamp": 1, "input_length": 1100, "output_length": 1, "hash_ids": [2, 3]}],
     r"line 2: hash_ids are not prefix-consistent: hash id 2 appears at position 0 but at "
     r"position 1 on line 1"),
    ([{"timestamp": 0, "input_length": 1100, "output_length": 1, "hash_ids": [1, 2]},
      {"timestamp": 1, "input_length": 1100, "output_length": 1, "hash_ids": [5, 2]}],
     r"line 2: hash_ids are not prefix-consistent: hash id 2 appears after hash id 5 but "
     r"after hash id 1 on line 1"),
    ([{"timestamp": -1, "input_length": 10, "output_length": 1, "hash_ids": []}],
     r"line 1: field 'timestamp' must be a finite number >= 0"),
    ([{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1.5]}],
     r"line 1: hash id 1.5 at position 0 must be an integer"),
    ([{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": []}, "[1, 2]"],
     r"line 2: expected a JSON object, got list"),
    ([{"timestamp": 0, "input_length": "10", "output_length": 1, "hash_ids": []}],
     r"line 1: field 'input_length' must be int, got '10'"),
    ([{"timestamp": 0, "input_length": 10, "output_length": -2, "hash_ids": []}],
     r"line 1: field 'output_length' must be in 0\.\."),
    ([{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [-3]}],
     r"line 1: hash id -3 at position 0 must be an integer in 0\.\."),
    ([{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": 4}],
     r"line 1: field 'hash_ids' must be list, got 4"),
    ([{"timestamp": 0, "input_length": 0, "output_length": 1, "hash_ids": []},
      {"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": []}], None),
])
def test_bad_trace_lines_are_named(tmp_path, capsys, rows, match):
    p = write(tmp_path, rows)
    if match is None:  # a zero-token row: dropped by default, an error naming it on request
        match = r"line 1: field 'input_length': 0 tokens"
        with pytest.raises(InputFileError, match=match):
            read_mooncake(p, zero_tokens="error")
        argv = ["--zero-tokens", "error"]
    else:
        with pytest.raises(InputFileError, match=match):
            read_mooncake(p)
        argv = []
    assert main(["generate", "mooncake", "--trace", str(p), *argv,
                 "-o", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_block_size_that_does_not_divide_512_is_refused(tmp_path, capsys):
    p = write(tmp_path, ROWS)
    with pytest.raises(InstanceError, match="block_size 48 does not divide"):
        read_mooncake(p, block_size=48)
    assert main(["generate", "mooncake", "--trace", str(p), "--block-size", "48",
                 "-o", str(tmp_path / "x.json")]) == 2
    assert "does not divide the Mooncake trace's 512-token hash blocks" in capsys.readouterr().err


def test_too_long_requests_name_the_option(tmp_path):
    p = write(tmp_path, ROWS)
    with pytest.raises(InstanceError, match="--too-long drop or clip"):
        mooncake_instance(p, Limits(1024, 4096, block_size=512))
    # clip: r0's prompt alone (1100) exceeds M and is dropped; r1 (1024 + 2 - 1) keeps one
    # output token and its block ids
    clipped = mooncake_instance(p, Limits(1024, 4096, block_size=512), too_long="clip")
    assert clipped.ids == ("r1", "r2", "r3")
    assert clipped.requests[0].prefix == (7, 8) and clipped.requests[0].output == 1


@pytest.mark.parametrize("name, share", [("conversation", 0.37), ("synthetic", 0.65)])
def test_the_published_reuse_figures_hold_on_the_real_traces(name, share):
    """37% and 65% of all prompt tokens are hits with an unbounded cache (in arrival order,
    full 512-token blocks, the last prompt token always computed): the figures measured when
    the traces were added, to the percent they were stated in."""
    path = SHARED_DATA / "traces" / f"mooncake_{name}_trace.jsonl"
    if not path.exists():
        pytest.skip(f"no {path}")
    inst = mooncake_instance(path)
    pot = reuse_potential(inst.prefix_index, inst.arrival, inst.prompt)
    assert pot["hit_share"] == pytest.approx(share, abs=0.005)
    assert inst.n == {"conversation": 12031, "synthetic": 3993}[name]


def test_an_empty_or_missing_trace_is_one_line(tmp_path, capsys):
    p = write(tmp_path, [" "])
    for path, match in ((p, "no requests (an empty Mooncake trace)"),
                        (tmp_path / "none.jsonl", "cannot read trace file")):
        assert main(["generate", "mooncake", "--trace", str(path),
                     "-o", str(tmp_path / "x.json")]) == 2
        err = capsys.readouterr().err.strip()
        assert match in err and "\n" not in err and "Traceback" not in err


def test_generate_mooncake_at_a_load_keeps_the_block_ids(tmp_path, capsys):
    """``--load`` stretches the arrivals (docs/semantics.md section 4); the requests keep
    their ids (they used to be rebuilt as plain requests, losing them)."""
    p = write(tmp_path, ROWS)
    out = tmp_path / "i.json"
    assert main(["generate", "mooncake", "--trace", str(p), "--load", "0.5",
                 "-o", str(out)]) == 0
    inst = Instance.load(out)
    assert [r.prefix for r in inst.requests] == [(7, 8), (7, 8), (7,), ()]  # floor(I / 512) ids
    assert inst.arrival[0] == 0.0 and inst.arrival[1] != 0.5  # stretched, not the trace's
