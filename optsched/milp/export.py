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
    v = float(v)
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return repr(v)


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
    out = []
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
    cnames = column_names(model)
    rows = _rows_out(model, split_ranges)
    # entries of each global row, by output row
    out_of_global: dict[int, list[str]] = {}
    for name, _t, _r, _g, i in rows:
        out_of_global.setdefault(i, []).append(name)
    colptr, rindex, data = a.csc()
    lines: list[str] = [f"NAME {model.name}", "OBJSENSE", "    MAX" if a.sense == "max" else
                        "    MIN", "ROWS", " N OBJ"]
    lines += [f" {t} {name}" for name, t, _r, _g, _i in rows]
    lines.append("COLUMNS")
    in_int = False
    marker = 0
    for j in range(a.num_vars):
        if bool(a.is_int[j]) != in_int:
            in_int = not in_int
            tag = "'INTORG'" if in_int else "'INTEND'"
            lines.append(f"    MARKER{marker} 'MARKER' {tag}")
            marker += 1
        cn = cnames[j]
        entries = []
        if a.obj[j] != 0.0:
            entries.append(f"    {cn} OBJ {_num(a.obj[j])}")
        for k in range(colptr[j], colptr[j + 1]):
            for rn in out_of_global.get(int(rindex[k]), ()):
                entries.append(f"    {cn} {rn} {_num(data[k])}")
        if not entries:
            entries.append(f"    {cn} OBJ 0")
        lines.extend(entries)
    if in_int:
        lines.append(f"    MARKER{marker} 'MARKER' 'INTEND'")
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
    for j in range(a.num_vars):
        lines += _mps_bounds(cnames[j], float(a.lb[j]), float(a.ub[j]), bool(a.is_int[j]))
    if const != 0.0:
        lines.append(" FX BND OBJ_CONST 1")
    lines.append("ENDATA")
    with open(path, "w") as fh:
        fh.write("\n".join(lines))
        fh.write("\n")


def _mps_bounds(cn: str, lb: float, ub: float, is_int: bool) -> list[str]:
    if lb == ub:
        return [f" FX BND {cn} {_num(lb)}"]
    if lb == -np.inf and ub == np.inf:
        return [f" FR BND {cn}"]
    out = []
    if lb == -np.inf:
        out.append(f" MI BND {cn}")
    elif lb != 0.0 or is_int:
        out.append(f" LO BND {cn} {_num(lb)}")
    if ub != np.inf:
        out.append(f" UP BND {cn} {_num(ub)}")
    elif is_int and lb != -np.inf:
        out.append(f" PL BND {cn}")
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
    out = [f"\\ Problem: {model.name}", "Maximize" if a.sense == "max" else "Minimize"]
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
