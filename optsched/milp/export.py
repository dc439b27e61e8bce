"""MPS and LP writers for :class:`~optsched.milp.model.Model`.

Conventions (chosen so that HiGHS, CBC and PuLP's ``LpProblem.fromMPS`` all read the files):

* names are ``block_i_j`` for columns and ``group_k`` for rows, with characters outside
  ``[A-Za-z0-9_]`` replaced by ``_``; if that makes two names equal, generic names
  ``C<id>``/``R<id>`` are used instead;
* a ranged row ``lo <= a x <= hi`` (``lo < hi``, both finite) is written as two rows
  ``<name>_lo`` (``>=``) and ``<name>_hi`` (``<=``) (PuLP's MPS reader knows no RANGES;
  pass ``split_ranges=False`` for a RANGES section instead); free rows are left out;
* a nonzero objective constant becomes a column ``OBJ_CONST`` fixed to 1 whose objective
  coefficient is the constant (PuLP's reader does not accept a RHS on the objective row);
* the MPS file has an ``OBJSENSE`` section (``MAX`` for maximisation); readers that ignore it
  (PuLP) must be told the sense, e.g. ``LpProblem.fromMPS(path, sense=LpMaximize)``;
* every integer column gets explicit bounds, so no reader applies the old "integer columns
  without bounds are binary" rule.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .model import Model

_BAD = re.compile(r"[^A-Za-z0-9_]")


def _num(v: float) -> str:
    """Shortest exact text of a float; integral values without ``.0``."""
    t = repr(float(v))
    return t[:-2] if t.endswith(".0") else t


def _nums(arr: np.ndarray) -> list[str]:
    """``_num`` of every element, formatting each distinct value once."""
    if arr.size == 0:
        return []
    uniq, inv = np.unique(arr, return_inverse=True)
    text = [_num(u) for u in uniq.tolist()]
    return [text[k] for k in inv.ravel().tolist()]


def _sanitize(name: str) -> str:
    s = _BAD.sub("_", name)
    if not s or s[0].isdigit() or s[0] in "eE.":
        s = "v" + s
    return s


def column_names(model: Model) -> list[str]:
    """Names used for the columns in MPS/LP files (see module docstring)."""
    names: list[str] = []
    for blk in model.blocks.values():
        base = _sanitize(blk.name)
        if not blk.shape:
            names.append(base)
            continue
        idx = np.indices(blk.shape).reshape(len(blk.shape), -1).T
        names.extend(base + "_" + "_".join(map(str, row)) for row in idx.tolist())
    if len(set(names)) != len(names) or "OBJ_CONST" in names:
        names = [f"C{j}" for j in range(model.num_vars)]
    return names


def row_names(model: Model) -> list[str]:
    """Names used for the rows in MPS/LP files (before ranged rows are split)."""
    names: list[str] = []
    for grp in model.groups.values():
        base = _sanitize(grp.name)
        if grp.size == 1:
            names.append(base)
        else:
            names.extend(f"{base}_{k}" for k in range(grp.size))
    taken = set(names)
    if (
        len(taken) != len(names)
        or "OBJ" in taken
        or any(n.endswith(("_lo", "_hi")) for n in names)
    ):
        names = [f"R{i}" for i in range(model.num_constraints)]
    return names


def _rows_out(model: Model, split_ranges: bool):
    """Yield (name, type, rhs, range, global row) for the rows that are written."""
    a = model.arrays()
    names = row_names(model)
    out: list[tuple[str, str, float, float | None, int]] = []
    for i in range(a.num_rows):
        lo, hi = float(a.row_lo[i]), float(a.row_hi[i])
        fin_lo, fin_hi = np.isfinite(lo), np.isfinite(hi)
        if not fin_lo and not fin_hi:
            continue
        if fin_lo and fin_hi and lo == hi:
            out.append((names[i], "E", lo, None, i))
        elif fin_lo and fin_hi:
            if split_ranges:
                out.append((names[i] + "_lo", "G", lo, None, i))
                out.append((names[i] + "_hi", "L", hi, None, i))
            else:
                out.append((names[i], "G", lo, hi - lo, i))
        elif fin_lo:
            out.append((names[i], "G", lo, None, i))
        else:
            out.append((names[i], "L", hi, None, i))
    return out


def write_mps(model: Model, path: str, *, split_ranges: bool = True) -> None:
    """Write ``model`` as free MPS to ``path``."""
    a = model.arrays()
    n = a.num_vars
    cnames = column_names(model)
    rows = _rows_out(model, split_ranges)
    # output row names of each global row (0, 1 or 2 of them)
    names_of_row: list[list[str]] = [[] for _ in range(a.num_rows)]
    for name, _t, _r, _g, i in rows:
        names_of_row[i].append(name)
    colptr, rindex, data = a.csc()
    # COLUMNS entries as (column, line) in column order, objective entry first
    ent_cols: list[int] = []
    ent_lines: list[str] = []
    obj = a.obj.tolist()
    col_of_entry = np.repeat(np.arange(n), np.diff(colptr)).tolist()
    has_entry = np.zeros(n, dtype=bool)
    for j, i, v in zip(col_of_entry, rindex.tolist(), _nums(data)):
        for rn in names_of_row[i]:
            ent_cols.append(j)
            ent_lines.append(f"    {cnames[j]} {rn} {v}")
    if ent_cols:
        has_entry[np.asarray(ent_cols)] = True
    obj_cols = [j for j in range(n) if obj[j] != 0.0 or not has_entry[j]]
    obj_s = _nums(a.obj[obj_cols]) if obj_cols else []
    obj_lines = [f"    {cnames[j]} OBJ {v}" for j, v in zip(obj_cols, obj_s)]
    all_cols = np.asarray(obj_cols + ent_cols, dtype=np.int64)
    all_lines = obj_lines + ent_lines
    order = np.argsort(all_cols, kind="stable")  # objective entries stay first per column
    all_cols = all_cols[order]
    all_lines = [all_lines[k] for k in order.tolist()]
    # integer MARKER lines where integrality switches between consecutive columns
    is_int = a.is_int
    switch = np.flatnonzero(np.diff(np.concatenate([[False], is_int, [False]]).astype(np.int8)))
    cut = np.searchsorted(all_cols, switch).tolist()
    body: list[str] = []
    prev = 0
    for m_no, (pos, col) in enumerate(zip(cut, switch.tolist())):
        body += all_lines[prev:pos]
        tag = "'INTORG'" if col < n and is_int[col] else "'INTEND'"
        body.append(f"    MARKER{m_no} 'MARKER' {tag}")
        prev = pos
    body += all_lines[prev:]
    lines: list[str] = [f"NAME {_sanitize(model.name)}", "OBJSENSE", "    MAX" if a.sense == "max" else
                        "    MIN", "ROWS", " N OBJ"]
    lines += [f" {t} {name}" for name, t, _r, _g, _i in rows]
    lines.append("COLUMNS")
    lines += body
    const = a.obj_constant
    if const != 0.0:
        lines.append(f"    OBJ_CONST OBJ {_num(const)}")
    lines.append("RHS")
    lines += [f"    RHS {name} {_num(r)}" for name, _t, r, _g, _i in rows if r != 0.0]
    ranges = [(name, g) for name, _t, _r, g, _i in rows if g is not None]
    if ranges:
        lines.append("RANGES")
        lines += [f"    RNG {name} {_num(g)}" for name, g in ranges]
    lines.append("BOUNDS")
    lines += _mps_bounds(cnames, a.lb, a.ub, is_int)
    if const != 0.0:
        lines.append(" FX BND OBJ_CONST 1")
    lines.append("ENDATA")
    with open(path, "w") as fh:
        fh.write("\n".join(lines))
        fh.write("\n")


def _mps_bounds(cnames: list[str], lb: np.ndarray, ub: np.ndarray, is_int: np.ndarray
                ) -> list[str]:
    """BOUNDS lines: FX, FR, BV, then MI and LO before UP (PuLP's MI also sets ub=0), then PL.

    Integer columns always get explicit bounds (BV, or LO/MI and UP/PL).
    """
    fixed = lb == ub
    free = ~fixed & (lb == -np.inf) & (ub == np.inf)
    bv = is_int & (lb == 0.0) & (ub == 1.0)
    rest = ~fixed & ~free & ~bv
    mi = rest & (lb == -np.inf)
    lo = rest & np.isfinite(lb) & ((lb != 0.0) | is_int)
    up = rest & np.isfinite(ub)
    pl = rest & ~np.isfinite(ub) & is_int & np.isfinite(lb)

    def with_value(kind: str, mask: np.ndarray, values: np.ndarray) -> list[str]:
        cols = np.flatnonzero(mask)
        return [f" {kind} BND {cnames[j]} {v}"
                for j, v in zip(cols.tolist(), _nums(values[cols]))]

    out = with_value("FX", fixed, lb)
    out += [f" FR BND {cnames[j]}" for j in np.flatnonzero(free).tolist()]
    out += [f" BV BND {cnames[j]}" for j in np.flatnonzero(bv).tolist()]
    out += [f" MI BND {cnames[j]}" for j in np.flatnonzero(mi).tolist()]
    out += with_value("LO", lo, lb)
    out += with_value("UP", up, ub)
    out += [f" PL BND {cnames[j]}" for j in np.flatnonzero(pl).tolist()]
    return out


def _lp_expr(terms: list[tuple[float, str]]) -> list[str]:
    """Linear expression as LP-format chunks, at most 8 terms per line."""
    if not terms:
        return ["0"]
    chunks, line = [], []
    for coef, name in terms:
        sign = "-" if coef < 0 else "+"
        line.append(f"{sign} {_num(abs(coef))} {name}")
        if len(line) == 8:
            chunks.append(" ".join(line))
            line = []
    if line:
        chunks.append(" ".join(line))
    return chunks


def write_lp(model: Model, path: str) -> None:
    """Write ``model`` in CPLEX LP format to ``path`` (ranged rows split as in MPS)."""
    a = model.arrays()
    cnames = column_names(model)
    rows = _rows_out(model, split_ranges=True)
    out = [f"\\ Problem: {_sanitize(model.name)}", "Maximize" if a.sense == "max" else "Minimize"]
    obj_terms = [(float(a.obj[j]), cnames[j]) for j in np.flatnonzero(a.obj)]
    if a.obj_constant != 0.0:
        obj_terms.append((a.obj_constant, "OBJ_CONST"))
    chunks = _lp_expr(obj_terms) if obj_terms else [f"0 {cnames[0]}"] if cnames else ["0"]
    out.append(" obj: " + chunks[0])
    out += ["   " + c for c in chunks[1:]]
    out.append("Subject To")
    ops = {"E": "=", "G": ">=", "L": "<="}
    for name, t, r, _g, i in rows:
        s, e = a.indptr[i], a.indptr[i + 1]
        terms = [(float(a.data[k]), cnames[a.indices[k]]) for k in range(s, e)]
        if not terms:
            if cnames:
                terms = [(0.0, cnames[0])]
            else:
                continue
        chunks = _lp_expr(terms)
        chunks[-1] += f" {ops[t]} {_num(r)}"
        out.append(f" {name}: " + chunks[0])
        out += ["   " + c for c in chunks[1:]]
    out.append("Bounds")
    for j in range(a.num_vars):
        lb, ub, cn = float(a.lb[j]), float(a.ub[j]), cnames[j]
        if lb == ub:
            out.append(f" {cn} = {_num(lb)}")
        elif lb == -np.inf and ub == np.inf:
            out.append(f" {cn} free")
        else:
            lo_s = "-inf" if lb == -np.inf else _num(lb)
            hi_s = "+inf" if ub == np.inf else _num(ub)
            out.append(f" {lo_s} <= {cn} <= {hi_s}")
    if a.obj_constant != 0.0:
        out.append(" OBJ_CONST = 1")
    ints = [cnames[j] for j in np.flatnonzero(a.is_int)]
    if ints:
        out.append("Generals")
        for k in range(0, len(ints), 10):
            out.append(" " + " ".join(ints[k:k + 10]))
    out.append("End")
    with open(path, "w") as fh:
        fh.write("\n".join(out))
        fh.write("\n")
