"""Trace loaders: real request traces -> :class:`~optsched.instance.Instance` (semantics section 2).

Three CSV formats are recognised by their header (``shared/data/README.md``):

* ``azure``  -- ``TIMESTAMP, ContextTokens, GeneratedTokens`` (Azure LLM inference trace 2023;
  timestamps like ``2023-11-16 18:15:46.6805900``);
* ``vidur``  -- ``arrived_at, num_prefill_tokens, num_decode_tokens`` (seconds);
* ``arxiv``  -- ``num_prefill_tokens, num_decode_tokens, ...`` without arrival times
  (Vidur's arXiv summarisation stats): all requests arrive at 0, or as a Poisson process
  at a given ``rate`` (seeded).

Semantics (all documented choices, never silent):

* **Arrivals** are seconds from the earliest timestamp of the file (for the sorted public
  traces that is the first row). A time window ``[start, end)`` keeps requests arriving in
  it and re-bases arrivals so that ``start`` becomes 0. ``rate_scale`` divides arrivals
  (2.0 = twice the arrival rate). Order of operations: zero-token policy, window,
  ``limit`` (first N) or ``sample`` (seeded random N, kept in file order), rate scale.
* **Ids** are ``"r<row>"`` with ``row`` the 0-based data-row index in the file, so the id is
  stable under sampling and windowing.
* **Zero lengths** (``prompt == 0`` or ``output == 0``; semantics section 2 requires ``I, O >= 1``):
  ``zero_tokens="drop"`` (default) drops them and warns with the count; ``"clamp"`` raises
  them to 1; ``"error"`` names the first such row.
* **Too long** (``I + O - 1 > M``, the request could never finish): the limits are only
  known when wrapping into an instance, so :func:`trace_to_instance` takes
  ``too_long="error"`` (default, names the row), ``"drop"`` (warns with the count) or
  ``"clip"`` (output clipped to ``M - I + 1``; a prompt alone longer than ``M`` is dropped;
  warns with both counts). This is applied after the selection options, so ``limit=N``
  with ``too_long="drop"`` may keep fewer than N requests.

Malformed files raise :class:`~optsched.errors.InputFileError` naming the file, the line
and the column. Loading uses the ``csv`` module and numpy only; the 19,366-row Azure
conversation trace loads in a few tens of milliseconds.
"""

from __future__ import annotations

import csv
import math
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..cost import DEFAULT_PRESET, CostModel, preset
from ..errors import InputFileError, InstanceError
from ..instance import MAX_COUNT, Instance, Limits, Request

FORMATS = ("azure", "vidur", "arxiv")

#: the environment variable that names the shared data directory (``traces/``, ``profiling/``)
DATA_ENV = "OPTSCHED_DATA"

_COLUMNS = {
    "azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
    "vidur": ("arrived_at", "num_prefill_tokens", "num_decode_tokens"),
    "arxiv": (None, "num_prefill_tokens", "num_decode_tokens"),
}


class TraceWarning(UserWarning):
    """Requests were dropped, clamped or clipped while loading a trace (the count is given)."""


@dataclass(frozen=True, eq=False)
class Trace:
    """Columnar requests read from a trace file (after the selection options).

    ``row`` is the 0-based data-row index in the file (the request id is ``f"r{row}"``),
    ``arrival`` in seconds, ``prompt`` = I and ``output`` = O in tokens.
    """

    path: str
    format: str
    row: np.ndarray
    arrival: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    rows_in_file: int
    dropped_zero: int = 0
    clamped_zero: int = 0
    notes: tuple[str, ...] = field(default=())
    #: prefix block ids in the instance's block size (docs/semantics.md section 6, "Prefix
    #: reuse"), a CSR pair ``(ptr, flat ids)`` over the rows; None: the trace has none
    prefix: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def n(self) -> int:
        return int(self.row.size)

    @property
    def ids(self) -> list[str]:
        return [f"r{r}" for r in self.row.tolist()]

    def requests(self) -> list[Request]:
        """The requests, in file order (ids ``r<row>``)."""
        return [
            Request(id=f"r{r}", arrival=a, prompt=i, output=o)
            for r, a, i, o in zip(
                self.row.tolist(), self.arrival.tolist(), self.prompt.tolist(),
                self.output.tolist(),
            )
        ]

    def subset(self, mask_or_index) -> Trace:
        return Trace(
            path=self.path, format=self.format, row=self.row[mask_or_index],
            arrival=self.arrival[mask_or_index], prompt=self.prompt[mask_or_index],
            output=self.output[mask_or_index], rows_in_file=self.rows_in_file,
            dropped_zero=self.dropped_zero, clamped_zero=self.clamped_zero, notes=self.notes,
            prefix=None if self.prefix is None else csr_rows(*self.prefix, mask_or_index),
        )


def csr_rows(ptr: np.ndarray, flat: np.ndarray, mask_or_index) -> tuple[np.ndarray, np.ndarray]:
    """The rows ``mask_or_index`` (a mask, indices or a slice) of a CSR table."""
    idx = np.arange(ptr.size - 1)[mask_or_index]
    lo, lens = ptr[idx], ptr[idx + 1] - ptr[idx]
    new_ptr = np.zeros(idx.size + 1, np.int64)
    np.cumsum(lens, out=new_ptr[1:])
    take = np.repeat(lo - new_ptr[:-1], lens) + np.arange(int(new_ptr[-1]))
    return new_ptr, flat[take]


# -- reading ------------------------------------------------------------------------------
def _detect_format(header: list[str], path: str) -> str:
    h = [c.strip() for c in header]
    if h[:3] == list(_COLUMNS["azure"]):
        return "azure"
    if h[:3] == list(_COLUMNS["vidur"]):
        return "vidur"
    if h[:2] == list(_COLUMNS["arxiv"][1:]):
        return "arxiv"
    raise InputFileError(
        f"{path}: line 1: unrecognised trace header {h!r}; expected one of "
        "'TIMESTAMP,ContextTokens,GeneratedTokens' (azure), "
        "'arrived_at,num_prefill_tokens,num_decode_tokens' (vidur), "
        "'num_prefill_tokens,num_decode_tokens,...' (arxiv)"
    )


def _read_rows(path: Path) -> tuple[list[str], list[list[str]], list[int]]:
    """Header, data rows and each data row's 1-based line number (blank lines skipped)."""
    try:
        fh = open(path, newline="", encoding="utf-8-sig")  # a byte-order mark is not a header
    except OSError as e:
        raise InputFileError(f"{path}: cannot read trace file: {e.strerror or e}") from None
    with fh:
        try:
            reader = csv.reader(fh)
            header = None
            rows: list[list[str]] = []
            lines: list[int] = []
            for rec in reader:
                if not rec or (len(rec) == 1 and not rec[0].strip()):
                    continue
                if header is None:
                    if rec[0].startswith("#"):
                        continue
                    header = rec
                    continue
                rows.append(rec)
                lines.append(reader.line_num)
        except (csv.Error, UnicodeDecodeError) as e:
            raise InputFileError(f"{path}: malformed CSV: {e}") from None
    if header is None:
        raise InputFileError(f"{path}: empty trace file (no header)")
    return header, rows, lines


def _column(rows, lines, idx: int, name: str, path: Path) -> list[str]:
    try:
        return [r[idx] for r in rows]
    except IndexError:
        for r, ln in zip(rows, lines):
            if len(r) <= idx:
                raise InputFileError(
                    f"{path}: line {ln}: missing column {name!r} (row has {len(r)} fields)"
                ) from None
        raise  # pragma: no cover


def _parse_ints(col: list[str], lines, name: str, path: Path) -> np.ndarray:
    try:
        out = np.array(col, dtype=np.int64)
    except (ValueError, OverflowError):
        out = np.empty(len(col), dtype=np.int64)
        for k, (s, ln) in enumerate(zip(col, lines)):
            try:
                v = int(s)
            except ValueError:
                try:
                    f = float(s)
                except ValueError:
                    f = math.nan
                if not (math.isfinite(f) and f.is_integer()):
                    raise InputFileError(
                        f"{path}: line {ln}: column {name!r}: expected an integer token "
                        f"count, got {s!r}"
                    ) from None
                v = int(f)
            if v > MAX_COUNT:
                raise InputFileError(f"{path}: line {ln}: column {name!r}: token count {s} is "
                                     f"above {MAX_COUNT}") from None
            out[k] = v
    big = np.flatnonzero(out > MAX_COUNT)
    if big.size:
        k = int(big[0])
        raise InputFileError(f"{path}: line {lines[k]}: column {name!r}: token count {int(out[k])} "
                             f"is above {MAX_COUNT}")
    neg = np.flatnonzero(out < 0)
    if neg.size:
        k = int(neg[0])
        raise InputFileError(
            f"{path}: line {lines[k]}: column {name!r}: negative token count {int(out[k])}"
        )
    return out


def _parse_seconds(col: list[str], lines, name: str, path: Path) -> np.ndarray:
    try:
        out = np.array(col, dtype=np.float64)
    except ValueError:
        out = np.empty(len(col))
        for k, (s, ln) in enumerate(zip(col, lines)):
            try:
                out[k] = float(s)
            except ValueError:
                raise InputFileError(
                    f"{path}: line {ln}: column {name!r}: expected seconds, got {s!r}"
                ) from None
    bad = np.flatnonzero(~np.isfinite(out) | (out < 0))
    if bad.size:
        k = int(bad[0])
        raise InputFileError(
            f"{path}: line {lines[k]}: column {name!r}: arrival must be a finite number "
            f">= 0, got {col[k]!r}"
        )
    return out


def _parse_timestamps(col: list[str], lines, name: str, path: Path) -> np.ndarray:
    """Seconds from the earliest timestamp; numpy parses all rows at once (ns precision)."""
    try:
        ts = np.array(col, dtype="datetime64[ns]")
    except ValueError:
        for s, ln in zip(col, lines):
            try:
                np.datetime64(s, "ns")
            except ValueError:
                raise InputFileError(
                    f"{path}: line {ln}: column {name!r}: expected a timestamp like "
                    f"'2023-11-16 18:15:46.6805900', got {s!r}"
                ) from None
        raise  # pragma: no cover
    nat = np.flatnonzero(np.isnat(ts))
    if nat.size:
        k = int(nat[0])
        raise InputFileError(f"{path}: line {lines[k]}: column {name!r}: empty timestamp")
    ns = ts.astype(np.int64)
    return (ns - ns.min()).astype(np.float64) / 1e9


def read_trace(
    path: str | Path,
    *,
    format: str = "auto",
    zero_tokens: str = "drop",
    rate: float | None = None,
    seed: int = 0,
) -> Trace:
    """Read a whole trace file (no selection). See the module docstring for the semantics.

    ``rate`` (requests per second) and ``seed`` only apply to the ``arxiv`` format, which
    has no arrival times: ``rate=None`` puts every arrival at 0, otherwise arrivals form a
    Poisson process (exponential inter-arrival times, first arrival at 0).
    """
    p = Path(path)
    header, rows, lines = _read_rows(p)
    fmt = _detect_format(header, str(p)) if format == "auto" else format
    if fmt not in FORMATS:
        raise InputFileError(f"{p}: unknown trace format {fmt!r}; expected one of {FORMATS}")
    if format != "auto" and _detect_format(header, str(p)) != fmt:
        raise InputFileError(f"{p}: line 1: header {header!r} is not a {fmt} trace")
    if zero_tokens not in ("drop", "clamp", "error"):
        raise InputFileError(f"zero_tokens must be 'drop', 'clamp' or 'error', got {zero_tokens!r}")
    if not rows:
        raise InputFileError(f"{p}: a {fmt} trace header and no data rows: no requests")
    tcol, icol, ocol = _COLUMNS[fmt]
    names = [c.strip() for c in header]
    i_idx, o_idx = names.index(icol), names.index(ocol)
    prompt = _parse_ints(_column(rows, lines, i_idx, icol, p), lines, icol, p)
    output = _parse_ints(_column(rows, lines, o_idx, ocol, p), lines, ocol, p)
    n = len(rows)
    if tcol is None:  # arxiv: no timestamps in the file
        arrival = poisson_arrivals(n, rate, seed) if rate is not None else np.zeros(n)
    elif fmt == "azure":
        arrival = _parse_timestamps(_column(rows, lines, 0, tcol, p), lines, tcol, p)
    else:
        arrival = _parse_seconds(_column(rows, lines, 0, tcol, p), lines, tcol, p)
        if n:
            arrival = arrival - arrival.min()
    row = np.arange(n, dtype=np.int64)
    notes: list[str] = []
    zero = (prompt == 0) | (output == 0)
    dropped = clamped = 0
    if zero.any():
        k = int(np.flatnonzero(zero)[0])
        if zero_tokens == "error":
            col = icol if prompt[k] == 0 else ocol
            raise InputFileError(
                f"{p}: line {lines[k]}: column {col!r}: 0 tokens (requests need "
                "prompt >= 1 and output >= 1; use zero_tokens='drop' or 'clamp')"
            )
        if zero_tokens == "drop":
            dropped = int(zero.sum())
            keep = ~zero
            row, arrival, prompt, output = row[keep], arrival[keep], prompt[keep], output[keep]
            msg = f"{p}: dropped {dropped} request(s) with 0 prompt or 0 output tokens"
        else:
            clamped = int(zero.sum())
            prompt, output = np.maximum(prompt, 1), np.maximum(output, 1)
            msg = f"{p}: clamped {clamped} request(s) with 0 prompt or output tokens to 1"
        notes.append(msg)
        warnings.warn(msg, TraceWarning, stacklevel=2)
    return Trace(
        path=str(p), format=fmt, row=row, arrival=arrival, prompt=prompt, output=output,
        rows_in_file=n, dropped_zero=dropped, clamped_zero=clamped, notes=tuple(notes),
    )


def poisson_arrivals(n: int, rate: float, seed: int | np.random.Generator = 0) -> np.ndarray:
    """``n`` arrival times (seconds) of a Poisson process of ``rate`` per second; first at 0."""
    if not (isinstance(rate, (int, float)) and math.isfinite(rate) and rate > 0):
        raise InstanceError(f"rate must be a finite number > 0, got {rate!r}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    if n <= 0:
        return np.zeros(0)
    gaps = rng.exponential(1.0 / rate, size=n)
    gaps[0] = 0.0
    return np.cumsum(gaps)


def select(
    trace: Trace,
    *,
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    start: float | None = None,
    end: float | None = None,
    rate_scale: float = 1.0,
    consecutive: int | None = None,
) -> Trace:
    """Apply the selection options: window ``[start, end)`` (re-based to ``start``), then
    the first ``limit`` rows, a seeded random ``sample`` of rows (kept in file order) or
    ``consecutive`` rows from a start row drawn by ``seed`` (:func:`seeded_window`), then
    arrivals divided by ``rate_scale``."""
    if sum(v is not None for v in (limit, sample, consecutive)) > 1:
        raise InstanceError("give one of limit (first N), sample (random N) and consecutive "
                            "(N consecutive rows from a seeded start), not several")
    for name, v in (("limit", limit), ("sample", sample), ("consecutive", consecutive)):
        if v is not None and (not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 0):
            raise InstanceError(f"{name} must be an integer >= 0, got {v!r}")
    if not (isinstance(rate_scale, (int, float)) and math.isfinite(rate_scale) and rate_scale > 0):
        raise InstanceError(f"rate_scale must be a finite number > 0, got {rate_scale!r}")
    t = trace
    if start is not None or end is not None:
        lo = 0.0 if start is None else float(start)
        hi = math.inf if end is None else float(end)
        if not (lo >= 0 and hi > lo):
            raise InstanceError(f"time window [{start}, {end}) is empty or negative")
        last = float(t.arrival.max()) if t.n else 0.0
        if math.isfinite(hi) and hi >= 1000 and hi > 2 * last:
            warnings.warn(TraceWarning(
                f"time window [{lo:g}, {hi:g}) reaches far past the trace's last arrival "
                f"({last:.6g} s): the window is in seconds; was it given in milliseconds?"),
                stacklevel=2)
        m = (t.arrival >= lo) & (t.arrival < hi)
        t = t.subset(m)
        t = Trace(**{**t.__dict__, "arrival": t.arrival - lo})
    if limit is not None:
        t = t.subset(slice(0, int(limit)))
    elif sample is not None:
        if sample > t.n:
            raise InstanceError(f"cannot sample {sample} requests from {t.n}")
        idx = np.sort(np.random.default_rng(seed).choice(t.n, size=int(sample), replace=False))
        t = t.subset(idx)
    elif consecutive is not None:
        t = seeded_window(t, int(consecutive), seed)
    if rate_scale != 1.0:
        t = Trace(**{**t.__dict__, "arrival": t.arrival / float(rate_scale)})
    return t


def shared_data() -> Path:
    """The shared data directory (``traces/``, ``profiling/``; not shipped with optsched):
    ``$OPTSCHED_DATA`` if set, else ``shared/data`` beside the checkout this optsched runs from
    (``../shared/data`` from the repository root). The one rule of the tests, the notebooks, the
    studies and the benchmarks; whoever needs a file there says so when it is missing."""
    env = os.environ.get(DATA_ENV)
    return Path(env) if env else Path(__file__).resolve().parents[3] / "shared" / "data"


def azure_trace(kind: str, data: str | Path | None = None) -> Path:
    """The path of the Azure LLM inference trace 2023 of ``kind`` (``"conv"``: conversation,
    ``"code"``) under ``data`` (default :func:`shared_data`); it may not exist."""
    if kind not in ("conv", "code"):
        raise InputFileError(f"Azure trace kind must be 'conv' or 'code', got {kind!r}")
    return Path(data if data is not None else shared_data()) / "traces" / f"AzureLLMInferenceTrace_{kind}.csv"


def window_start(n_rows: int, size: int, seed: int) -> int:
    """The first row of :func:`seeded_window`: uniform over ``[0, n_rows - size)`` by
    ``numpy.random.default_rng(seed)`` (0 when the trace has at most ``size + 1`` rows)."""
    return int(np.random.default_rng(seed).integers(0, max(1, n_rows - size)))


def seeded_window(trace: Trace, size: int, seed: int) -> Trace:
    """``size`` consecutive rows of ``trace`` from a start row drawn by ``seed``
    (:func:`window_start`), arrivals re-based so the first is at 0: the one definition of
    "a seeded window of a trace" that the benches, notebooks and ``--consecutive`` share,
    so that a bound and a schedule reported for "conv seed 1" are on the same requests."""
    if size > trace.n:
        raise InstanceError(f"cannot take {size} consecutive requests from {trace.n}")
    lo = window_start(trace.n, size, seed)
    t = trace.subset(slice(lo, lo + size))
    if t.n:
        t = Trace(**{**t.__dict__, "arrival": t.arrival - float(t.arrival.min())})
    return t


def load_trace(
    path: str | Path,
    *,
    format: str = "auto",
    limit: int | None = None,
    sample: int | None = None,
    seed: int = 0,
    start: float | None = None,
    end: float | None = None,
    rate_scale: float = 1.0,
    zero_tokens: str = "drop",
    rate: float | None = None,
    consecutive: int | None = None,
) -> Trace:
    """:func:`read_trace` followed by :func:`select` (``seed`` drives the sample, the
    consecutive window's start and, for ``arxiv`` files, the Poisson arrivals)."""
    t = read_trace(path, format=format, zero_tokens=zero_tokens, rate=rate, seed=seed)
    return select(t, limit=limit, sample=sample, seed=seed, start=start, end=end,
                  rate_scale=rate_scale, consecutive=consecutive)


def trace_to_instance(
    trace: Trace,
    limits: Limits,
    cost_model: CostModel | None = None,
    *,
    name: str | None = None,
    too_long: str = "error",
) -> Instance:
    """Wrap a trace into an instance; ``too_long`` handles requests with ``I + O - 1 > M``
    (``"error"`` names the row, ``"drop"`` / ``"clip"`` warn with the counts).

    Without ``cost_model`` the instance takes the CLI's default preset
    (:data:`~optsched.cost.DEFAULT_PRESET`), like every generator: trace arrivals are in
    seconds, so batch times must be too (unit time would mix steps with seconds)."""
    if too_long not in ("error", "drop", "clip"):
        raise InstanceError(f"too_long must be 'error', 'drop' or 'clip', got {too_long!r}")
    M = limits.kv_capacity
    b = limits.block_size
    peak = trace.prompt + trace.output - 1
    over = limits.kv_footprint(peak) > M
    t = trace
    if over.any():
        k = int(np.flatnonzero(over)[0])
        count = int(over.sum())
        if too_long == "error":
            raise InstanceError(
                f"{trace.path}: request r{int(trace.row[k])} (data row {int(trace.row[k])}): "
                f"prompt + output - 1 = {int(peak[k])} exceeds kv_capacity M = {M} "
                f"({count} such request(s); --too-long drop or clip (too_long= in Python) "
                f"drops or shortens them)"
            )
        if too_long == "drop":
            t = trace.subset(~over)
            msg = f"{trace.path}: dropped {count} request(s) with prompt + output - 1 > M = {M}"
        else:
            cap = (M // b) * b  # largest block-aligned KV a request may hold
            new_out = np.minimum(trace.output, cap - trace.prompt + 1)
            keep = new_out >= 1
            clipped = int((over & keep).sum())
            dropped = int((~keep).sum())
            t = trace.subset(keep)
            t = Trace(**{**t.__dict__, "output": new_out[keep]})
            msg = (f"{trace.path}: clipped the output of {clipped} request(s) to fit "
                   f"M = {M}" + (f"; dropped {dropped} whose prompt alone exceeds M"
                                 if dropped else ""))
        warnings.warn(msg, TraceWarning, stacklevel=2)
    return Instance.from_columns(  # the per-request checks, on whole columns
        name if name is not None else Path(trace.path).stem, limits,
        cost_model if cost_model is not None else preset(DEFAULT_PRESET),
        t.ids, t.arrival, t.prompt, t.output, prefix=t.prefix)


def window_instance(path: str | Path, size: int, seed: int, limits: Limits,
                    cost_model: CostModel | None = None, *, format: str = "auto",
                    too_long: str = "error") -> Instance:
    """The seeded window (:func:`seeded_window`) of the trace file at ``path`` as an
    instance named ``<file stem>-seed<seed>-rows<lo>-<hi>``: the one loader of the benches'
    and notebooks' trace windows (``optsched generate ... --consecutive size --seed seed``)."""
    raw = read_trace(path, format=format)
    lo = window_start(raw.n, size, seed)
    return trace_to_instance(seeded_window(raw, size, seed), limits, cost_model,
                             name=f"{Path(path).stem}-seed{seed}-rows{lo}-{lo + size}",
                             too_long=too_long)


def load_trace_instance(
    path: str | Path,
    limits: Limits,
    cost_model: CostModel | None = None,
    *,
    name: str | None = None,
    too_long: str = "error",
    **options,
) -> Instance:
    """One call: :func:`load_trace` (``options``) then :func:`trace_to_instance`."""
    return trace_to_instance(load_trace(path, **options), limits, cost_model, name=name,
                             too_long=too_long)


def load_azure(path: str | Path, limits: Limits, cost_model: CostModel | None = None,
               **options) -> Instance:
    """Azure LLM inference trace CSV -> instance (options as :func:`load_trace_instance`)."""
    return load_trace_instance(path, limits, cost_model, format="azure", **options)


def load_vidur(path: str | Path, limits: Limits, cost_model: CostModel | None = None,
               **options) -> Instance:
    """Vidur/Splitwise trace CSV -> instance (options as :func:`load_trace_instance`)."""
    return load_trace_instance(path, limits, cost_model, format="vidur", **options)


def load_arxiv(path: str | Path, limits: Limits, cost_model: CostModel | None = None,
               **options) -> Instance:
    """Vidur's arXiv-summarisation length stats -> instance; pass ``rate`` for Poisson
    arrivals (default: all at 0)."""
    return load_trace_instance(path, limits, cost_model, format="arxiv", **options)


__all__ = [
    "FORMATS", "Trace", "TraceWarning", "read_trace", "select", "load_trace",
    "trace_to_instance", "load_trace_instance", "load_azure", "load_vidur", "load_arxiv",
    "poisson_arrivals", "DATA_ENV", "shared_data", "azure_trace",
]
