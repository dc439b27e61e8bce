"""Trace loaders (optsched.workloads.traces): real traces from ../shared/data, malformed files, options."""

import warnings
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import run_cli
from paths import SHARED_DATA
from trace_files import azure_csv

from optsched.cost import DEFAULT_PRESET, preset
from optsched.errors import InputFileError, InstanceError
from optsched.instance import Instance, Limits
from optsched.workloads.traces import (
    TraceWarning,
    load_trace,
    load_trace_instance,
    read_trace,
    seeded_window,
    select,
    trace_to_instance,
    window_instance,
    window_start,
)

DATA = SHARED_DATA / "traces"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"shared data not found at {DATA}")
AZ_CONV = DATA / "AzureLLMInferenceTrace_conv.csv"
AZ_CODE = DATA / "AzureLLMInferenceTrace_code.csv"
VI_CONV = DATA / "splitwise_conv.csv"
ARXIV = DATA / "arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv"
BIG = Limits(kv_capacity=100_000, max_batch_tokens=4096)


def write(tmp_path, text, name="t.csv"):
    p = tmp_path / name
    p.write_text(text)
    return p


@needs_data
def test_row_counts_and_first_rows():
    conv = read_trace(AZ_CONV)
    assert conv.format == "azure" and conv.n == conv.rows_in_file == 19_366
    assert read_trace(AZ_CODE).n == 8_819
    assert (conv.prompt[0], conv.output[0], conv.arrival[0]) == (374, 44, 0.0)
    # 18:15:50.9951690 - 18:15:46.6805900
    assert conv.arrival[1] == pytest.approx(4.314579, abs=1e-7)
    v = read_trace(VI_CONV)
    assert v.format == "vidur" and v.n == 19_366
    assert (v.prompt[1], v.output[1]) == (396, 109) and v.arrival[1] == pytest.approx(4.314579)
    # the Vidur copy is the same trace
    assert np.array_equal(v.prompt, conv.prompt) and np.allclose(v.arrival, conv.arrival, atol=1e-5)


@needs_data
def test_azure_loads_the_whole_trace():
    """Contents only; ``benchmarks/simulate.py`` prints the load time."""
    inst = load_trace_instance(AZ_CONV, BIG)
    assert inst.n == 19_366 and inst.requests[0].id == "r0" and inst.requests[-1].id == "r19365"


@needs_data
def test_arxiv_zero_and_poisson_arrivals():
    t = read_trace(ARXIV)
    assert t.format == "arxiv" and t.n == 28_257 and not t.arrival.any()
    p1, p2 = read_trace(ARXIV, rate=2.0, seed=5), read_trace(ARXIV, rate=2.0, seed=5)
    assert np.array_equal(p1.arrival, p2.arrival) and p1.arrival[0] == 0
    assert np.all(np.diff(p1.arrival) >= 0)
    assert p1.n / p1.arrival[-1] == pytest.approx(2.0, rel=0.05)


def small(tmp_path):
    rows = "".join(f"{0.5 * k},{10 + k},{k + 1}\n" for k in range(10))
    return write(tmp_path, "arrived_at,num_prefill_tokens,num_decode_tokens\n" + rows)


def test_limit_sample_window_rate_scale(tmp_path):
    p = small(tmp_path)
    t = load_trace(p, limit=3)
    assert t.ids == ["r0", "r1", "r2"]
    s1, s2 = load_trace(p, sample=4, seed=7), load_trace(p, sample=4, seed=7)
    assert s1.ids == s2.ids and len(s1.ids) == 4
    assert list(s1.row) == sorted(s1.row)  # file order kept
    r = int(s1.row[0])
    assert s1.prompt[0] == 10 + r and s1.arrival[0] == 0.5 * r  # id keeps the original row
    w = load_trace(p, start=1.0, end=2.5)  # arrivals 1.0, 1.5, 2.0 -> re-based
    assert w.ids == ["r2", "r3", "r4"] and list(w.arrival) == [0.0, 0.5, 1.0]
    f = load_trace(p, rate_scale=2.0)
    assert f.arrival[4] == pytest.approx(1.0)
    inst = trace_to_instance(load_trace(p, sample=3, seed=1), BIG)
    assert isinstance(inst, Instance) and inst.n == 3
    with pytest.raises(InstanceError):
        load_trace(p, limit=2, sample=2)
    with pytest.raises(InstanceError):
        load_trace(p, sample=11)
    with pytest.raises(InstanceError):
        load_trace(p, rate_scale=0)
    with pytest.raises(InstanceError):
        load_trace(p, start=3, end=1)


def test_consecutive_window_is_seeded_and_rebased(tmp_path):
    p = small(tmp_path)  # rows k = 0..9 arrive at 0.5 k
    w1, w2 = load_trace(p, consecutive=4, seed=3), load_trace(p, consecutive=4, seed=3)
    assert w1.ids == w2.ids and len(w1.ids) == 4
    lo = window_start(10, 4, 3)  # the start row: uniform over [0, 10 - 4)
    assert 0 <= lo < 6 and w1.ids == [f"r{k}" for k in range(lo, lo + 4)]
    assert list(w1.arrival) == [0.0, 0.5, 1.0, 1.5]  # re-based to the window's first arrival
    assert list(w1.prompt) == [10 + k for k in range(lo, lo + 4)]
    assert seeded_window(read_trace(p), 4, 3).ids == w1.ids  # one definition
    starts = {window_start(10, 4, s) for s in range(40)}
    assert starts == set(range(6))  # every start row is reachable, none beyond
    with pytest.raises(InstanceError, match="not several"):
        load_trace(p, consecutive=2, limit=2)
    with pytest.raises(InstanceError, match="cannot take 11"):
        load_trace(p, consecutive=11)
    inst = window_instance(p, 4, 3, BIG)  # the benches' loader: the same rows, named by them
    assert inst.ids == tuple(w1.ids) and inst.name.endswith(f"-seed3-rows{lo}-{lo + 4}")
    assert [r.arrival for r in inst.requests] == [0.0, 0.5, 1.0, 1.5]


def test_too_long_policies(tmp_path):
    p = write(tmp_path, "arrived_at,num_prefill_tokens,num_decode_tokens\n"
              "0,5,5\n1,8,15\n2,25,3\n")
    lim = Limits(kv_capacity=20, max_batch_tokens=20)
    with pytest.raises(InstanceError, match=r"r1 .*22 exceeds kv_capacity M = 20 \(2 such"):
        trace_to_instance(read_trace(p), lim)
    with pytest.warns(TraceWarning, match="dropped 2"):
        i = trace_to_instance(read_trace(p), lim, too_long="drop")
    assert i.ids == ("r0",)
    with pytest.warns(TraceWarning, match="clipped the output of 1.*dropped 1"):
        i = trace_to_instance(read_trace(p), lim, too_long="clip")
    assert i.ids == ("r0", "r1") and i.request("r1").output == 13  # 8 + 13 - 1 = 20


def test_zero_tokens_policies(tmp_path):
    p = write(tmp_path, "arrived_at,num_prefill_tokens,num_decode_tokens\n0,5,0\n1,0,3\n2,4,4\n")
    with pytest.warns(TraceWarning, match="dropped 2"):
        t = read_trace(p)
    assert t.ids == ["r2"] and t.dropped_zero == 2
    with pytest.warns(TraceWarning, match="clamped 2"):
        t = read_trace(p, zero_tokens="clamp")
    assert list(t.output) == [1, 3, 4] and list(t.prompt) == [5, 1, 4]
    with pytest.raises(InputFileError, match=r"line 2: column 'num_decode_tokens': 0 tokens"):
        read_trace(p, zero_tokens="error")


@pytest.mark.parametrize("text,match", [
    ("arrived_at,num_prefill_tokens,num_decode_tokens\n0,5,5\n1,abc,3\n",
     r"t\.csv: line 3: column 'num_prefill_tokens': expected an integer"),
    ("arrived_at,num_prefill_tokens,num_decode_tokens\n0,5,5\n1,4\n",
     r"line 3: missing column 'num_decode_tokens'"),
    ("arrived_at,num_prefill_tokens,num_decode_tokens\n0,5,5\nx,4,4\n",
     r"line 3: column 'arrived_at': expected seconds"),
    ("arrived_at,num_prefill_tokens,num_decode_tokens\n-1,5,5\n",
     r"line 2: column 'arrived_at': arrival must be"),
    ("arrived_at,num_prefill_tokens,num_decode_tokens\n0,5,-5\n",
     r"line 2: column 'num_decode_tokens': negative"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,3,4\n"
     "2023-11-16 25:00:00,3,4\n", r"line 3: column 'TIMESTAMP': expected a timestamp"),
    ("foo,bar\n1,2\n", r"line 1: unrecognised trace header"),
    ("", r"empty trace file"),
])
def test_malformed(tmp_path, text, match):
    p = write(tmp_path, text)
    with pytest.raises(InputFileError, match=match):
        read_trace(p)


def test_missing_file(tmp_path):
    with pytest.raises(InputFileError, match="cannot read trace file"):
        read_trace(tmp_path / "nope.csv")


def test_azure_fractional_seconds(tmp_path):
    p = write(tmp_path, "TIMESTAMP,ContextTokens,GeneratedTokens\n"
              "2023-11-16 18:15:46.6805900,3,4\n2023-11-16 18:15:47.0000001,5,6\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = read_trace(p)
    assert t.arrival[1] == pytest.approx(0.3194101, abs=1e-9)
    assert select(t, rate_scale=0.5).arrival[1] == pytest.approx(0.6388202, abs=1e-9)


# -- 1. one default everywhere ------------------------------------------------------------
def test_trace_instance_from_python_has_the_cli_cost_model(tmp_path, capsys):
    """Before: ``load_trace_instance`` without a cost model built a unit-cost instance (one
    time unit per batch) while the CLI used the default preset on the same trace."""
    csv = azure_csv(tmp_path / "t.csv", [("2023-11-16 18:15:46.0", 50, 5),
                                          ("2023-11-16 18:15:46.5", 60, 4)])
    lim = Limits(kv_capacity=1000, max_batch_tokens=512)
    py = load_trace_instance(csv, lim)
    assert py.cost_model == preset(DEFAULT_PRESET)
    rc, _, err = run_cli(capsys, "generate", "azure", "--trace", csv, "--kv-capacity", 1000,
                         "--max-batch-tokens", 512, "-o", tmp_path / "cli.json")
    assert rc == 0, err
    cli = Instance.load(tmp_path / "cli.json")
    assert cli.cost_model == py.cost_model and cli.requests == py.requests


def test_the_shared_data_rule(monkeypatch, tmp_path):
    from optsched.errors import InputFileError
    from optsched.workloads.traces import DATA_ENV, azure_trace, shared_data

    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    assert shared_data() == tmp_path
    assert azure_trace("conv") == tmp_path / "traces" / "AzureLLMInferenceTrace_conv.csv"
    assert azure_trace("code", "/d") == Path("/d/traces/AzureLLMInferenceTrace_code.csv")
    monkeypatch.delenv(DATA_ENV)
    # without the variable: shared/data beside the checkout optsched runs from
    assert shared_data() == Path(optsched_file()).resolve().parents[2] / "shared" / "data"
    with pytest.raises(InputFileError, match="'conv' or 'code'"):
        azure_trace("chat")


def optsched_file() -> str:
    import optsched

    return optsched.__file__



def test_a_csv_with_a_byte_order_mark_is_read(tmp_path):
    """Before: a CSV saved by a spreadsheet (UTF-8 with a byte-order mark) was refused with
    "unrecognised trace header" (the mark glued to the first column's name)."""
    text = "arrived_at,num_prefill_tokens,num_decode_tokens\n0,5,5\n1.5,8,15\n"
    plain, marked = write(tmp_path, text, "plain.csv"), tmp_path / "bom.csv"
    marked.write_bytes(b"\xef\xbb\xbf" + text.encode())
    a, b = read_trace(plain), read_trace(marked)
    assert list(b.arrival) == [0.0, 1.5] and list(b.prompt) == [5, 8]
    assert list(a.arrival) == list(b.arrival) and list(a.output) == list(b.output)


def test_a_window_given_in_milliseconds_is_flagged(tmp_path):
    """Before: ``--window 0:600000`` on a trace of a few seconds passed without a word."""
    p = write(tmp_path, "arrived_at,num_prefill_tokens,num_decode_tokens\n0,5,5\n1.5,8,15\n3,4,4\n")
    with pytest.warns(TraceWarning, match="was it given in milliseconds"):
        t = select(read_trace(p), start=0, end=600_000)
    assert t.n == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert select(read_trace(p), start=0, end=2).n == 2
