"""InferMax schedules <-> model vectors (``formulations/infermax.md`` sections 3, 7 and eqs. 13-15).

Owns the replay of a schedule into the model's per (request, batch) state, the canonical form
the tight variant can represent (dominance, symmetry, compaction: eqs. 13-15), and the two
maps of a built :class:`~optsched.formulations.infermax.model.InfermaxModel`:
:func:`encode` (schedule -> full column vector, the warm start) and :func:`decode`
(solution vector -> schedule).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ...evaluation import evaluate
from ...instance import Instance
from ...schedule import Schedule, ScheduleBuilder
from ..base import FormulationError, refuse_swaps

if TYPE_CHECKING:
    from .model import InfermaxModel


@dataclass(frozen=True, eq=False)
class _Replay:
    """Per (request, batch) state of a schedule (semantics section 3), model-shaped."""

    x: np.ndarray
    c: np.ndarray
    e: np.ndarray
    gen: np.ndarray
    dec: np.ndarray
    m: np.ndarray  # (n, J+1): m[:, j] before batch j
    g: np.ndarray  # (n, J+1)
    end: np.ndarray  # (J,) seconds
    start: np.ndarray  # (J,)
    dur: np.ndarray


def _replay(inst: Instance, s: Schedule, J: int) -> _Replay:
    n = inst.n
    if s.n_batches > J:
        raise FormulationError(f"schedule has {s.n_batches} batches > the model's J = {J}")
    ev = evaluate(inst, s)
    if not ev.feasible:
        raise FormulationError("cannot encode an infeasible schedule: "
                               + "; ".join(str(v) for v in ev.violations[:3]))
    idx = np.array([inst.index[r] for r in s.ids], dtype=np.int64)
    x = np.zeros((n, J), bool)
    c = np.zeros((n, J), np.int64)
    e = np.zeros((n, J), bool)
    gen = np.zeros((n, J), bool)
    dec = np.zeros((n, J), bool)
    m = np.zeros((n, J + 1), np.int64)
    g = np.zeros((n, J + 1), np.int64)
    I, O = inst.prompt, inst.output
    cur_m = np.zeros(n, np.int64)
    cur_g = np.zeros(n, np.int64)
    for j in range(s.n_batches):
        m[:, j], g[:, j] = cur_m, cur_g
        for r in idx[s.evict_req[s.evict_ptr[j]:s.evict_ptr[j + 1]]]:
            e[r, j] = True
            cur_m[r] = 0
        a, b = s.batch_ptr[j], s.batch_ptr[j + 1]
        for k in range(a, b):
            r = idx[s.entry_req[k]]
            tok = int(s.entry_tokens[k])
            S = I[r] + cur_g[r]
            x[r, j] = True
            c[r, j] = tok
            dec[r, j] = cur_g[r] >= 1 and cur_m[r] == S - 1
            if bool(dec[r, j]) != bool(ev.entry_decode[k]) or cur_m[r] != ev.entry_cached[k]:
                raise FormulationError("internal: replay disagrees with the evaluator")
            cur_m[r] += tok
            if cur_m[r] == S:
                gen[r, j] = True
                cur_g[r] += 1
    m[:, s.n_batches:], g[:, s.n_batches:] = cur_m[:, None], cur_g[:, None]
    if not np.all(cur_g == O):
        raise FormulationError("internal: replay does not finish every request")
    pad = J - s.n_batches
    end = np.concatenate([ev.batch_end, np.full(pad, ev.batch_end[-1] if s.n_batches else 0.0)])
    start = np.concatenate([ev.batch_start, end[s.n_batches:]])
    dur = np.concatenate([ev.batch_duration, np.zeros(pad)])
    return _Replay(x, c, e, gen, dec, m, g, end, start, dur)


def canonical(inst: Instance, s: Schedule, *, dominance: bool = True,
              symmetry: list[list[int]] | None = None, compact: bool = True) -> Schedule:
    """A schedule at least as good as ``s`` that the tight model can represent (eqs. 13-15).

    * dominance: an eviction of a request whose current residency segment generated no
      token is deleted together with that segment's entries (section 4.1's argument);
    * symmetry: identical requests are relabelled so they complete in index order (eq. 14);
    * compact: batches with neither entries nor evictions are dropped (eq. 15).
    """
    batches = [[list(b.entries), list(b.evict), b.start] for b in s]
    if dominance:
        I = {r.id: r.prompt for r in inst.requests}
        changed = True
        while changed:
            changed = False
            m = {r: 0 for r in I}
            g = {r: 0 for r in I}
            seg: dict[str, list[int]] = {r: [] for r in I}  # batches of the current segment
            gen_in_seg = {r: False for r in I}
            for j, (entries, evict, _) in enumerate(batches):
                for r in evict:
                    if not gen_in_seg[r]:
                        for jj in seg[r]:
                            batches[jj][0] = [(q, t) for q, t in batches[jj][0] if q != r]
                        batches[j][1] = [q for q in batches[j][1] if q != r]
                        changed = True
                        break
                    m[r], seg[r], gen_in_seg[r] = 0, [], False
                if changed:
                    break
                for r, t in entries:
                    S = I[r] + g[r]
                    seg[r].append(j)
                    m[r] += t
                    if m[r] == S:
                        g[r] += 1
                        gen_in_seg[r] = True
    if compact:
        batches = [b for b in batches if b[0] or b[1]]
    b = ScheduleBuilder(inst.ids)
    for entries, evict, start in batches:
        b.add(entries, evict, start)
    out = b.build()
    if symmetry:
        comp_batch = {k: _finish_batch(out, rid, inst) for k, rid in enumerate(inst.ids)}
        rename: dict[str, str] = {}
        for grp in symmetry:
            order = sorted(grp, key=lambda k: (comp_batch[k], k))
            for new, old in zip(grp, order):
                rename[inst.ids[old]] = inst.ids[new]
        if any(a != b_ for a, b_ in rename.items()):
            bb = ScheduleBuilder(inst.ids)
            for bt in out:
                bb.add([(rename.get(r, r), t) for r, t in bt.entries],
                       [rename.get(r, r) for r in bt.evict], bt.start)
            out = bb.build()
    return out


def _finish_batch(s: Schedule, rid: str, inst: Instance) -> int:
    r = inst.request(rid)
    m = g = 0
    for j, bt in enumerate(s):
        if rid in bt.evict:
            m = 0
        for q, t in bt.entries:
            if q == rid:
                S = r.prompt + g
                m += t
                if m == S:
                    g += 1
                    if g == r.output:
                        return j
    return s.n_batches


def encode(im: InfermaxModel, s: Schedule) -> np.ndarray:
    """Full column vector for ``s`` (section 7; tight variant: ``s`` must be canonical)."""
    refuse_swaps("infermax", schedule=s)
    rp = _replay(im.instance, s, im.J)
    vals = _state_values(im, rp)
    vals.update(_product_values(im, rp, vals["pre"]))
    vals.update(_batch_values(im, rp, vals["pre"]))
    vals.update(_time_values(im, rp, s))
    x = im.model.start_vector({k: np.asarray(a, float) for k, a in vals.items()})
    if "qq" in im.v:
        _telescoped_durations(im, x)
    return x


def _state_values(im: InfermaxModel, rp: _Replay) -> dict[str, Any]:
    """(eqs. 1, 2, 8) the per (request, batch) decisions and states, ``ev = e m_before`` and
    the block counts ``kb`` (arrays or numpy scalars; ``start_vector`` takes each as an array)."""
    inst, v = im.instance, im.v
    vals: dict[str, Any] = {
        "x": rp.x, "c": rp.c, "e": rp.e, "gen": rp.gen, "dec": rp.dec, "pre": rp.x & ~rp.dec,
        "m": rp.m, "g": rp.g, "fin": rp.g >= inst.output[:, None], "ftk": rp.g >= 1,
    }
    if "ev" in v:
        vals["ev"] = rp.e * rp.m[:, :-1]
    if "kb" in v:
        vals["kb"] = inst.limits.kv_footprint(rp.m[:, 1:]) // inst.limits.block_size
    return vals


def _product_values(im: InfermaxModel, rp: _Replay, pre: np.ndarray) -> dict[str, Any]:
    """(eqs. 9, 10, 24-25) the bits of ``c`` and their products, the phase products, and the
    telescoped pricing's caught-up / segment-end events and their cost."""
    v, mb, ma = im.v, rp.m[:, :-1], rp.m[:, 1:]
    vals: dict[str, Any] = {}
    if "z" in v:
        bits = (rp.c[:, :, None] >> np.arange(im.bits)) & 1
        vals["z"] = bits
        if "w" in v:
            vals["w"] = bits * mb[:, :, None]
        if "vq" in v:
            vals["vq"] = bits * rp.c[:, :, None]
    if "pm" in v:
        vals["pm"] = pre * mb
    if "dm" in v:
        vals["dm"] = rp.dec * mb
    if "cu" in v:
        ga = rp.g[:, 1:]
        vals["cu"] = (ma == im.instance.prompt[:, None] + ga - 1) & (ga >= 1)
        vals["ce"] = pre & vals["cu"]
        vals["qq"] = im.kpq_scaled * vals["ce"] * ma.astype(float) ** 2
    return vals


def _batch_values(im: InfermaxModel, rp: _Replay, pre: np.ndarray) -> dict[str, Any]:
    """(eqs. 11, 15, 22) the batch indicators ``y, act, ap, ad``."""
    v = im.v
    vals: dict[str, Any] = {"y": rp.x.any(axis=0)}
    if "act" in v:
        vals["act"] = rp.x.any(axis=0) | rp.e.any(axis=0)
    if "ap" in v:
        vals["ap"] = pre.any(axis=0)
    if "ad" in v:
        vals["ad"] = rp.dec.any(axis=0)
    return vals


def _time_values(im: InfermaxModel, rp: _Replay, s: Schedule) -> dict[str, Any]:
    """(eqs. 11-12) durations, batch starts and ends, completion / first-token times (model
    units)."""
    v = im.v
    vals: dict[str, Any] = {"t": rp.dur * im.scale}
    if "end" in v:
        vals["end"] = rp.end * im.scale
    if "start" in v:
        vals["start"] = rp.start * im.scale
    if "comp" in v or "first" in v:
        ev = evaluate(im.instance, s)
        if "comp" in v:
            vals["comp"] = ev.completion * im.scale
        if "first" in v:
            vals["first"] = ev.first_token * im.scale
    return vals


def _telescoped_durations(im: InfermaxModel, x: np.ndarray) -> None:
    """(eqs. 24-26) telescoped pricing moves cost between batches: each ``t_j`` from its own
    ``time`` row rather than the evaluator's duration."""
    a = im.model.arrays()
    t = im.v["t"].ids
    xt = x.copy()
    xt[t] = 0.0
    act = np.array([a.data[a.indptr[r]:a.indptr[r + 1]] @ xt[a.indices[a.indptr[r]:a.indptr[r + 1]]]
                    for r in im.model.group("time").rows])
    x[t] = -act


def decode(im: InfermaxModel, values: np.ndarray) -> Schedule:
    """The schedule the solution describes (stated starts only where the model idles)."""
    inst, md = im.instance, im.model
    x = np.asarray(md.value("x", values)) > 0.5
    c = np.asarray(md.value("c", values)).astype(np.int64)
    e = np.asarray(md.value("e", values)) > 0.5
    J = im.J
    active = np.asarray(x.any(axis=0) | e.any(axis=0))
    starts = np.full(J, np.nan)
    if "start" in im.v:
        mstart = np.asarray(md.value("start", values)) / im.scale
        mdur = np.asarray(md.value("t", values)) / im.scale
        prev_end = 0.0
        arr = inst.arrival
        for j in range(J):
            touched = x[:, j] | e[:, j]
            earliest = max(prev_end, float(arr[touched].max(initial=0.0)))
            s_j = earliest
            if mstart[j] > earliest + 1e-7 * max(1.0, abs(earliest)):
                s_j = float(mstart[j])
                starts[j] = s_j
            prev_end = s_j + max(float(mdur[j]), 0.0)
    last = -1
    for j in range(J):
        if active[j] or not math.isnan(starts[j]):
            last = j
    b = ScheduleBuilder(inst.ids)
    ids = inst.ids
    for j in range(last + 1):
        entries = [(ids[i], int(c[i, j])) for i in np.flatnonzero(x[:, j])]
        evict = [ids[i] for i in np.flatnonzero(e[:, j])]
        st = None if math.isnan(starts[j]) else float(starts[j])
        b.add(entries, evict, st)
    return b.build()
