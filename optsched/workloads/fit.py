"""Least-squares fit of the linear batch-time model (semantics section 5) on Vidur profiling data.

Data (``shared/data/README.md``, ``profiling/``), all per-layer milliseconds:

* ``mlp_<gpu>_<model>.csv`` -- every non-attention operator's median time by ``num_tokens``
  and tensor-parallel degree. Their sum (as the README prescribes: every operator, the
  embedding included) is fitted as ``k0 + k1 * tokens``.
* ``attention_samples_<gpu>_<model>.csv`` -- decode rows (``batch_size`` requests each with
  ``kv_cache_size`` cached tokens) fitted as ``kdm * sum m + kdr * #decode + kdb``;
  prefill rows (one request, chunk ``c``, ``m`` = ``kv_cache_size``) fitted as
  ``kpq * c^2 + kpm * c*m + kpl * m + (kpr * #prefill + kpb)``. Semantics section 5 keeps the ``c^2`` and
  ``c*m`` coefficients free (InferMax ties them as ``c^2 + 2cm``).

Every prefill row has exactly one prefill entry, so the per-entry term ``kpr`` and the
per-batch kernel bias ``kpb`` are not separately identifiable from this data: the fitted
intercept goes to ``kpb`` and ``kpr`` is 0 (stated in :attr:`FitResult.notes`).

Per-layer ms are multiplied by the layer count and divided by 1000: the returned
:class:`~optsched.cost.LinearCost` is in whole-model **seconds**, like the presets.
Fits use ``numpy.linalg.lstsq``, or (default) a non-negative least squares (Lawson-Hanson
active set, no scipy) because :class:`~optsched.cost.LinearCost` requires non-negative
coefficients. By default each row is weighted by ``1 / measured`` so that the fit minimises
*relative* error (the rows span 0.01 to 8 ms; an absolute fit sacrifices the small batches
that dominate decode-heavy schedules); ``weighting="absolute"`` gives the plain fit. The
reported RMSE is always in absolute per-layer ms.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..cost import LinearCost
from ..errors import InputFileError, InstanceError

#: Layer counts of the profiled models (README: 32 for 7B/8B, 80 for 70B).
LAYERS = {"Llama-2-7b-hf": 32, "Llama-2-70b-hf": 80, "Meta-Llama-3-8B": 32, "Meta-Llama-3-70B": 80}


def layers_for(model: str) -> int:
    """Layer count of a profiled model: the table, else 80 for ``*70B*``, 32 for ``*7B*/*8B*``."""
    if model in LAYERS:
        return LAYERS[model]
    m = model.lower()
    if "70b" in m:
        return 80
    if re.search(r"(^|[^0-9])[78]b", m):
        return 32
    raise InstanceError(f"fit: unknown layer count for model {model!r}; give it with --layers "
                        "(layers= in Python)")


# -- non-negative least squares ------------------------------------------------------------
def nnls(A: np.ndarray, b: np.ndarray, max_iter: int | None = None) -> np.ndarray:
    """``argmin ||A x - b||`` subject to ``x >= 0`` (Lawson and Hanson's active-set method)."""
    A = np.asarray(A, float)
    b = np.asarray(b, float)
    n = A.shape[1]
    x = np.zeros(n)
    passive = np.zeros(n, bool)
    w = A.T @ (b - A @ x)
    tol = 10 * np.finfo(float).eps * np.linalg.norm(A, 1) * max(A.shape)
    it, max_iter = 0, max_iter or 3 * n + 30
    while (~passive).any() and (w[~passive] > tol).any() and it < max_iter:
        it += 1
        j = int(np.argmax(np.where(passive, -np.inf, w)))
        passive[j] = True
        while True:
            z = np.zeros(n)
            z[passive] = np.linalg.lstsq(A[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            neg = passive & (z <= 0)
            alpha = np.min(x[neg] / (x[neg] - z[neg]))
            x = x + alpha * (z - x)
            passive &= x > tol
            x[~passive] = 0.0
        w = A.T @ (b - A @ x)
    return x


# -- results ------------------------------------------------------------------------------
@dataclass(frozen=True)
class GroupFit:
    """Fit of one term group on its rows (per-layer milliseconds)."""

    name: str
    terms: tuple[str, ...]
    n_rows: int
    rmse_ms: float
    max_rel_error: float
    mean_rel_error: float
    per_layer_ms: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "terms": list(self.terms), "n_rows": self.n_rows,
            "rmse_ms": self.rmse_ms, "max_rel_error": self.max_rel_error,
            "mean_rel_error": self.mean_rel_error, "per_layer_ms": dict(self.per_layer_ms),
        }


@dataclass(frozen=True)
class FitResult:
    """The fitted cost model (seconds, whole model) and the per-group fit errors."""

    cost: LinearCost
    groups: tuple[GroupFit, ...]
    model: str
    gpu: str
    tp: int
    layers: int
    nonneg: bool
    weighting: str = "relative"
    notes: tuple[str, ...] = ()

    def group(self, name: str) -> GroupFit:
        for g in self.groups:
            if g.name == name:
                return g
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model, "gpu": self.gpu, "tp": self.tp, "layers": self.layers,
            "nonneg": self.nonneg, "weighting": self.weighting, "cost_model": self.cost.to_dict(),
            "groups": [g.to_dict() for g in self.groups], "notes": list(self.notes),
        }


WEIGHTINGS = ("relative", "absolute")


def _solve(A, y, nonneg: bool, weighting: str) -> np.ndarray:
    if weighting not in WEIGHTINGS:
        raise InstanceError(f"fit: weighting must be one of {WEIGHTINGS}, got {weighting!r}")
    if weighting == "relative":  # minimise sum ((pred - y) / y)^2
        w = 1.0 / np.maximum(np.abs(y), 1e-12)
        A, y = A * w[:, None], y * w
    return nnls(A, y) if nonneg else np.linalg.lstsq(A, y, rcond=None)[0]


def _group(name, terms, A, y, nonneg, weighting) -> tuple[np.ndarray, GroupFit]:
    if A.shape[0] < A.shape[1]:
        raise InputFileError(f"fit: {name}: {A.shape[0]} rows cannot fit {A.shape[1]} terms")
    x = _solve(A, y, nonneg, weighting)
    pred = A @ x
    err = pred - y
    rel = np.abs(err) / np.maximum(np.abs(y), 1e-12)
    return x, GroupFit(
        name=name, terms=tuple(terms), n_rows=int(y.size),
        rmse_ms=float(np.sqrt(np.mean(err ** 2))), max_rel_error=float(rel.max()),
        mean_rel_error=float(rel.mean()), per_layer_ms=dict(zip(terms, map(float, x))),
    )


# -- reading ------------------------------------------------------------------------------
def _read_csv(path: Path) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    try:
        fh = open(path, newline="", encoding="utf-8")
    except OSError as e:
        raise InputFileError(f"{path}: cannot read profiling file: {e.strerror or e}") from None
    with fh:
        try:
            text = fh.read()
        except UnicodeDecodeError as e:
            raise InputFileError(f"{path}: not UTF-8 text (byte {e.start}); a profiling file "
                                 "is a CSV") from None
    lines = [(k + 1, ln) for k, ln in enumerate(text.splitlines())]
    body = [(k, ln) for k, ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    if not body:
        raise InputFileError(f"{path}: empty profiling file")
    header = next(csv.reader([body[0][1]]))
    rows = []
    for k, rec in zip((k for k, _ in body[1:]), csv.reader(ln for _, ln in body[1:])):
        if len(rec) != len(header):
            raise InputFileError(f"{path}: line {k}: expected {len(header)} fields, got {len(rec)}")
        rows.append((k, dict(zip(header, rec))))
    return header, rows


def _num(path: Path, line: int, row: dict[str, str], col: str) -> float:
    s = row.get(col)
    if s is None:
        raise InputFileError(f"{path}: missing column {col!r}")
    try:
        v = float(s)
    except ValueError:
        raise InputFileError(f"{path}: line {line}: column {col!r}: expected a number, "
                             f"got {s!r}") from None
    if not math.isfinite(v):
        raise InputFileError(f"{path}: line {line}: column {col!r}: not a finite number: {s!r}")
    return v


def fit_mlp(path: str | Path, tp: int = 1, nonneg: bool = True,
            weighting: str = "relative") -> GroupFit:
    """Fit ``k0 + k1 * tokens`` (per-layer ms) to the summed operator medians at ``tp``."""
    p = Path(path)
    header, rows = _read_csv(p)
    ops = [c for c in header if c.startswith("time_stats.") and c.endswith(".median")]
    if not ops:
        raise InputFileError(f"{p}: no 'time_stats.<op>.median' columns")
    toks, ys = [], []
    for line, r in rows:
        if int(_num(p, line, r, "num_tensor_parallel_workers")) != tp:
            continue
        toks.append(_num(p, line, r, "num_tokens"))
        ys.append(sum(_num(p, line, r, c) for c in ops))
    if not toks:
        raise InputFileError(f"{p}: no rows with num_tensor_parallel_workers = {tp}")
    t = np.array(toks)
    A = np.column_stack([np.ones_like(t), t])
    return _group("mlp", ("k0", "k1"), A, np.array(ys), nonneg, weighting)[1]


def fit_attention(path: str | Path, nonneg: bool = True,
                  weighting: str = "relative") -> tuple[GroupFit, GroupFit]:
    """Fit the decode and the prefill attention groups (per-layer ms)."""
    p = Path(path)
    _, rows = _read_csv(p)
    dA, dy, pA, py = [], [], [], []
    for line, r in rows:
        flag = r.get("is_prefill", "").strip().lower()
        if flag not in ("true", "false"):
            raise InputFileError(f"{p}: line {line}: column 'is_prefill': expected True/False, "
                                 f"got {r.get('is_prefill')!r}")
        m = _num(p, line, r, "kv_cache_size")
        if flag == "false":
            B = _num(p, line, r, "batch_size")
            dA.append([B * m, B, 1.0])
            dy.append(_num(p, line, r, "attn_decode_median_ms"))
        else:
            B = _num(p, line, r, "batch_size")
            c = _num(p, line, r, "prefill_chunk_size")
            # B identical requests per row (B = 1 in the shipped samples)
            pA.append([B * c * c, B * c * m, B * m, B])
            py.append(_num(p, line, r, "attn_prefill_median_ms"))
    if not dy or not py:
        raise InputFileError(f"{p}: need both decode and prefill rows "
                             f"(got {len(dy)} decode, {len(py)} prefill)")
    dec = _group("decode", ("kdm", "kdr", "kdb"), np.array(dA), np.array(dy), nonneg,
                 weighting)[1]
    pre = _group("prefill", ("kpq", "kpm", "kpl", "kpb"), np.array(pA), np.array(py), nonneg,
                 weighting)[1]
    return dec, pre


def fit_linear_cost(
    profiling: str | Path,
    model: str = "Llama-2-7b-hf",
    gpu: str = "a100",
    tp: int = 1,
    *,
    layers: int | None = None,
    nonneg: bool = True,
    weighting: str = "relative",
    attention: str | Path | None = None,
) -> FitResult:
    """Fit all coefficients from ``profiling/`` (``mlp_<gpu>_<model>.csv`` and
    ``attention_samples_<gpu>_<model>.csv``, or the file ``attention``) and return a
    :class:`FitResult` in seconds."""
    d = Path(profiling)
    if layers is not None and (isinstance(layers, bool) or not isinstance(layers, int)
                               or layers < 1):
        raise InstanceError(f"fit: --layers must be an integer >= 1, got {layers!r}")
    L = layers if layers is not None else layers_for(model)
    mlp = fit_mlp(d / f"mlp_{gpu}_{model}.csv", tp=tp, nonneg=nonneg, weighting=weighting)
    attn = Path(attention) if attention is not None else d / f"attention_samples_{gpu}_{model}.csv"
    if not attn.exists():
        have = sorted(f.name for f in d.glob("attention_samples_*.csv")) if d.is_dir() else []
        raise InputFileError(
            f"{attn}: no attention profile for {model} on {gpu} (available: "
            f"{', '.join(have) or 'none'}); pass attention=FILE to borrow one"
        )
    notes = ["kpr and kpb are collinear (one prefill entry per profiled batch): "
             "the fitted intercept is kpb, kpr = 0"]
    if tp != 1:
        notes.append(f"attention samples are TP1; only the MLP group is at TP{tp}")
    dec, pre = fit_attention(attn, nonneg=nonneg, weighting=weighting)
    k = {**mlp.per_layer_ms, **dec.per_layer_ms, **pre.per_layer_ms}
    neg = {t: v for t, v in k.items() if v < 0 and t != "kdr"}
    if neg:
        raise InstanceError(
            f"fit: the unconstrained fit gives negative coefficients {neg} (per-layer ms), "
            "which LinearCost rejects; fit without --unconstrained (nonneg=True in Python)"
        )
    s = L / 1000.0
    # hidden cache's rho from the same MLP table (its QKV projection column), not the default
    # preset's: a fitted 70B model must not carry the 7B rho
    rho = fit_rho(d / f"mlp_{gpu}_{model}.csv", tp=tp, layers=L)
    notes.append(f"rho = {rho.rho:.4g} s per cached hidden token per batch (fit_rho: QKV "
                 f"projection slope x K/V share {rho.kv_share:.3g} x {L} layers)")
    cost = LinearCost(
        k0=k["k0"] * s, k1=k["k1"] * s, kpq=k["kpq"] * s, kpm=k["kpm"] * s,
        kpl=k["kpl"] * s, kpr=0.0, kpb=k["kpb"] * s, kdm=k["kdm"] * s,
        kdr=k["kdr"] * s, kdb=k["kdb"] * s, rho=rho.rho,
    )
    return FitResult(cost=cost, groups=(mlp, dec, pre), model=model, gpu=gpu, tp=tp,
                     layers=L, nonneg=nonneg, weighting=weighting, notes=tuple(notes))


__all__ = ["nnls", "GroupFit", "FitResult", "fit_mlp", "fit_attention", "fit_linear_cost",
           "layers_for", "LAYERS", "RhoFit", "fit_rho"]


# -- hidden cache: Apt-Serve's rho (eq. 6) --------------------------------------------------
@dataclass(frozen=True)
class RhoFit:
    """``rho`` (whole-model seconds per cached hidden token per batch) from the QKV projection
    fit ``a + b * tokens`` (per-layer ms): ``rho = b * kv_share * layers / 1000``."""

    rho: float
    per_token_ms: float  # b: QKV projection, per layer, per token
    kv_share: float  # K and V columns of the fused QKV projection: 2 kv / (heads + 2 kv)
    layers: int
    fit: GroupFit

    def to_dict(self) -> dict[str, Any]:
        return {"rho": self.rho, "per_token_ms": self.per_token_ms, "kv_share": self.kv_share,
                "layers": self.layers, "rmse_ms": self.fit.rmse_ms,
                "max_rel_error": self.fit.max_rel_error}


def fit_rho(path: str | Path, tp: int = 1, layers: int | None = None) -> RhoFit:
    """Fit Apt-Serve's ``rho`` (eq. 6: hidden-cache extra cost ``t = rho * m``) on Vidur's
    ``attn_pre_proj`` timings (the fused Q, K, V projection, by ``num_tokens``). A hidden
    cache re-projects its ``m`` cached hidden states to keys and values in every batch the
    request joins (paper section 3.1, Fig. 3b): the K and V share of that projection, i.e.
    ``2 * n_kv_head / (n_head + 2 * n_kv_head)`` of its per-token slope, per layer. The
    slope is fitted (non-negative, relative error) on all rows at tensor-parallel degree
    ``tp``; ``layers`` defaults to :func:`layers_for` of the file's model name."""
    p = Path(path)
    _, rows = _read_csv(p)
    col = "time_stats.attn_pre_proj.median"
    toks, ys, heads, kv_heads = [], [], set(), set()
    for line, r in rows:
        if int(_num(p, line, r, "num_tensor_parallel_workers")) != tp:
            continue
        toks.append(_num(p, line, r, "num_tokens"))
        ys.append(_num(p, line, r, col))
        heads.add(_num(p, line, r, "n_head"))
        kv_heads.add(_num(p, line, r, "n_kv_head"))
    if not toks:
        raise InputFileError(f"{p}: no rows with num_tensor_parallel_workers = {tp}")
    if len(heads) != 1 or len(kv_heads) != 1:
        raise InputFileError(f"{p}: rows disagree on n_head/n_kv_head")
    t = np.array(toks)
    x, g = _group("qkv", ("a", "b"), np.column_stack([np.ones_like(t), t]), np.array(ys),
                  True, "relative")
    h, kv = heads.pop(), kv_heads.pop()
    share = 2 * kv / (h + 2 * kv)
    if layers is None:
        m = re.match(r"mlp_[^_]+_(.+)\.csv$", p.name)
        layers = layers_for(m.group(1) if m else p.stem)
    return RhoFit(float(x[1]) * share * layers / 1000, float(x[1]), share, layers, g)
