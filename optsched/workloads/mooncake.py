"""Mooncake traces (Kimi's FAST'25 release) -> instances with prefix block ids
(docs/semantics.md section 6, "Prefix reuse").

A Mooncake trace is JSON lines, one request each::

    {"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, ..., 13]}

``timestamp`` is milliseconds from the trace's start (read as seconds / 1000);
``hash_ids`` are remapped hashes of the prompt's 512-token blocks (the last one partial when
the prompt is not a multiple of 512): the same id at the same position means the same tokens
and the same tokens before them, i.e. a reusable KV block.

**Mapping to the instance's blocks.** The instance's ``block_size`` ``b`` must divide 512. The
trace block at position ``p`` with id ``h`` becomes ``r = 512 / b`` blocks with ids
``h * r + k`` (``k = 0 .. r-1``), and only the prompt's full blocks keep an id: the first
``floor(I / b)``. With ``b = 512`` (the default: the trace's own granularity, and the
smallest instance) a partial last trace block is dropped; with a smaller ``b`` its full
sub-blocks keep ids derived from its hash, which only requests with the same partial block
share (the trace cannot tell whether two different partial blocks begin alike, so reuse
inside them is never invented).

**Checks** (one line naming the file and the line): every field present with the right type,
at most ``ceil(input_length / 512)`` hash ids, ids that form a forest (one position and one
parent each, across the whole file), ``b`` dividing 512. Selection (windows, seeded
consecutive rows, rate scale) and ``too_long`` are those of the other traces
(:mod:`optsched.workloads.traces`); ids are ``r<row>``.

The default ``kv_capacity`` (:func:`default_kv_capacity`) holds the trace file's longest
request (its prompt reaches 126K tokens in the conversation trace, 191K in the synthetic one),
rounded up to whole blocks, so that every window of one file gets the same ``M``.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np

from ..cost import CostModel
from ..errors import InputFileError, InstanceError
from ..instance import MAX_COUNT, Instance, Limits
from ..prefix import MAX_BLOCK_ID, forest_clash
from .traces import Trace, TraceWarning, select, trace_to_instance

#: the trace's hash-block size (tokens)
TRACE_BLOCK = 512
#: the instance block size ``generate mooncake`` takes by default (the trace's own)
DEFAULT_BLOCK_SIZE = TRACE_BLOCK

_FIELDS = {"timestamp": (int, float), "input_length": (int,), "output_length": (int,),
           "hash_ids": (list,)}


def _parse_line(text: str, ln: int, path: Path) -> tuple[float, int, int, list]:
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputFileError(f"{path}: line {ln}: not a JSON object ({e.msg})") from None
    if not isinstance(d, dict):
        raise InputFileError(f"{path}: line {ln}: expected a JSON object, got {type(d).__name__}")
    for k, types in _FIELDS.items():
        v = d.get(k)
        if k not in d or isinstance(v, bool) or not isinstance(v, types):
            what = "missing" if k not in d else f"must be {'/'.join(t.__name__ for t in types)}"
            raise InputFileError(f"{path}: line {ln}: field {k!r} {what}"
                                 + ("" if k not in d else f", got {v!r}"))
    ts, i, o, h = d["timestamp"], d["input_length"], d["output_length"], d["hash_ids"]
    if not math.isfinite(ts) or ts < 0:
        raise InputFileError(f"{path}: line {ln}: field 'timestamp' must be a finite number "
                             f">= 0 (milliseconds), got {ts!r}")
    for k, v in (("input_length", i), ("output_length", o)):
        if not 0 <= v <= MAX_COUNT:
            raise InputFileError(f"{path}: line {ln}: field {k!r} must be in 0..{MAX_COUNT}, "
                                 f"got {v}")
    if len(h) > -(-i // TRACE_BLOCK):
        raise InputFileError(f"{path}: line {ln}: {len(h)} hash_ids but the prompt of {i} "
                             f"tokens has {-(-i // TRACE_BLOCK)} blocks of {TRACE_BLOCK}")
    for p, x in enumerate(h):
        if isinstance(x, bool) or not isinstance(x, int) or not 0 <= x < MAX_BLOCK_ID // TRACE_BLOCK:
            raise InputFileError(f"{path}: line {ln}: hash id {x!r} at position {p} must be an "
                                 f"integer in 0..{MAX_BLOCK_ID // TRACE_BLOCK - 1}")
    return float(ts), i, o, h


def _bulk_columns(texts: list[str]):
    """The columns of well-formed lines, parsed as one JSON array (fast); None when a line
    is not (:func:`_parse_line` then says which and why)."""
    try:
        ds = json.loads("[" + ",".join(texts) + "]")
    except json.JSONDecodeError:
        return None
    if not all(type(d) is dict and d.keys() == _FIELDS.keys() for d in ds):
        return None
    ts_l = [d["timestamp"] for d in ds]
    in_l = [d["input_length"] for d in ds]
    out_l = [d["output_length"] for d in ds]
    ids_l = [d["hash_ids"] for d in ds]
    if not (all(type(v) in (int, float) for v in ts_l) and all(type(v) is int for v in in_l)
            and all(type(v) is int for v in out_l) and all(type(v) is list for v in ids_l)):
        return None
    flat_l = [x for v in ids_l for x in v]
    if not all(type(x) is int for x in flat_l):
        return None
    try:
        ts, prompt, output = (np.array(ts_l, np.float64), np.array(in_l, np.int64),
                              np.array(out_l, np.int64))
        flat = np.array(flat_l, np.int64)
    except OverflowError:
        return None
    lens = np.fromiter((len(v) for v in ids_l), np.int64, count=len(ids_l))
    ptr = np.zeros(len(ids_l) + 1, np.int64)
    np.cumsum(lens, out=ptr[1:])
    if not np.isfinite(ts).all() or (ts < 0).any() or (prompt < 0).any() or (output < 0).any() \
            or (prompt > MAX_COUNT).any() or (output > MAX_COUNT).any() \
            or (lens > -(-prompt // TRACE_BLOCK)).any() \
            or (flat.size and (flat.min() < 0 or flat.max() >= MAX_BLOCK_ID // TRACE_BLOCK)):
        return None
    return ts, prompt, output, ptr, flat


def _check_hash_forest(path: Path, lines: list[int], ptr: np.ndarray, flat: np.ndarray) -> None:
    """Every hash id has one position and one parent across the file."""
    clash = forest_clash(ptr, flat)
    if clash is not None:
        i, x, i0, why = clash
        raise InputFileError(
            f"{path}: line {lines[i]}: hash_ids are not prefix-consistent: hash id {x} appears "
            f"{why.replace('after ', 'after hash id ')} on line {lines[i0]} (an id names the "
            "same 512 tokens after the same blocks)")


def map_blocks(prompt: np.ndarray, ptr: np.ndarray, flat: np.ndarray, block_size: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """The trace's 512-token hash ids as ids of the instance's full blocks of ``block_size``
    tokens (module docstring): ``h * r + k`` for sub-block ``k`` of trace block ``h``,
    ``r = 512 / block_size``, the first ``floor(I / block_size)`` of each request."""
    r = TRACE_BLOCK // block_size
    n = prompt.size
    full = np.minimum(prompt // block_size, np.diff(ptr) * r)
    new_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(full, out=new_ptr[1:])
    q = np.arange(int(new_ptr[-1])) - np.repeat(new_ptr[:-1], full)  # position in the request
    src = np.repeat(ptr[:-1], full) + q // r
    return new_ptr, flat[src] * r + q % r


def read_mooncake(path: str | Path, *, block_size: int = DEFAULT_BLOCK_SIZE,
                  zero_tokens: str = "drop") -> Trace:
    """A whole Mooncake trace file as a :class:`~optsched.workloads.traces.Trace` with block
    ids in blocks of ``block_size`` tokens (module docstring)."""
    p = Path(path)
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1 \
            or TRACE_BLOCK % block_size:
        raise InstanceError(f"block_size {block_size!r} does not divide the Mooncake trace's "
                            f"{TRACE_BLOCK}-token hash blocks (use 1, 2, 4, ..., 512)")
    if zero_tokens not in ("drop", "clamp", "error"):
        raise InputFileError(f"zero_tokens must be 'drop', 'clamp' or 'error', got {zero_tokens!r}")
    try:
        raw = p.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise InputFileError(f"{p}: cannot read trace file: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise InputFileError(f"{p}: not a UTF-8 Mooncake trace ({e.reason} at byte {e.start})") \
            from None
    rows = [(ln, s) for ln, s in enumerate(raw, 1) if s.strip()]
    if not rows:
        raise InputFileError(f"{p}: no requests (an empty Mooncake trace)")
    lines = [ln for ln, _ in rows]
    cols = _bulk_columns([s for _, s in rows])
    if cols is None:  # something is off: the line-by-line reader names the line
        for ln, s in rows:
            _parse_line(s, ln, p)
        raise AssertionError(f"{p}: the bulk reader refused a trace the line reader accepts")
    ts, prompt, output, ptr, flat = cols
    _check_hash_forest(p, lines, ptr, flat)
    arrival = (ts - ts.min()) / 1000.0
    trace = Trace(path=str(p), format="mooncake", row=np.arange(prompt.size, dtype=np.int64),
                  arrival=arrival, prompt=prompt, output=output, rows_in_file=prompt.size,
                  prefix=map_blocks(prompt, ptr, flat, block_size))
    return _zero_tokens(trace, lines, zero_tokens)


def _zero_tokens(t: Trace, lines: list[int], how: str) -> Trace:
    """The zero-length policy of :func:`optsched.workloads.traces.read_trace`."""
    zero = (t.prompt == 0) | (t.output == 0)
    if not zero.any():
        return t
    k = int(np.flatnonzero(zero)[0])
    if how == "error":
        col = "input_length" if t.prompt[k] == 0 else "output_length"
        raise InputFileError(f"{t.path}: line {lines[k]}: field {col!r}: 0 tokens (requests "
                             "need prompt >= 1 and output >= 1; use --zero-tokens drop or clamp)")
    if how == "drop":
        msg = f"{t.path}: dropped {int(zero.sum())} request(s) with 0 prompt or 0 output tokens"
        warnings.warn(msg, TraceWarning, stacklevel=3)
        out = t.subset(~zero)
        return Trace(**{**out.__dict__, "dropped_zero": int(zero.sum()), "notes": (msg,)})
    msg = f"{t.path}: clamped {int(zero.sum())} request(s) with 0 prompt or output tokens to 1"
    warnings.warn(msg, TraceWarning, stacklevel=3)
    return Trace(**{**t.__dict__, "prompt": np.maximum(t.prompt, 1),
                    "output": np.maximum(t.output, 1), "clamped_zero": int(zero.sum()),
                    "notes": (msg,)})


def default_kv_capacity(trace: Trace, block_size: int) -> int:
    """The trace file's longest request ``I + O - 1`` in whole blocks (module docstring)."""
    peak = int((trace.prompt + trace.output - 1).max()) if trace.n else 1
    return -(-peak // block_size) * block_size


def mooncake_instance(path: str | Path, limits: Limits | None = None,
                      cost_model: CostModel | None = None, *, name: str | None = None,
                      too_long: str = "error", zero_tokens: str = "drop",
                      **selection) -> Instance:
    """A Mooncake trace file as an instance: :func:`read_mooncake` in ``limits.block_size``
    (default 512 with the default limits), then the selection options of
    :func:`optsched.workloads.traces.select` (``limit``, ``sample``, ``consecutive``,
    ``seed``, ``start``, ``end``, ``rate_scale``). Without ``limits``: ``M`` from
    :func:`default_kv_capacity`, ``C = 4096``."""
    from .defaults import DEFAULT_MAX_BATCH_TOKENS

    b = limits.block_size if limits is not None else DEFAULT_BLOCK_SIZE
    raw = read_mooncake(path, block_size=b, zero_tokens=zero_tokens)
    if limits is None:
        limits = Limits(default_kv_capacity(raw, b), DEFAULT_MAX_BATCH_TOKENS, block_size=b)
    seed = selection.pop("seed", 0)
    t = select(raw, seed=seed, **selection)
    if name is None:
        name = Path(path).stem
        if selection.get("consecutive") is not None:
            from .traces import window_start

            lo = window_start(raw.n, int(selection["consecutive"]), seed)
            name = f"{name}-seed{seed}-rows{lo}-{lo + int(selection['consecutive'])}"
    return trace_to_instance(t, limits, cost_model, name=name, too_long=too_long)


__all__ = ["DEFAULT_BLOCK_SIZE", "TRACE_BLOCK", "default_kv_capacity", "map_blocks",
           "mooncake_instance", "read_mooncake"]
