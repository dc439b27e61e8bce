"""A certified upper bound on the SLO attainment of a cluster of identical engines
(``formulations/bounds.md`` B17g): B12's own floors and counting argument with the work
shared by the engines that can do it, and, on a prefill/decode cluster, the KV transfer
every request pays between its first and second token.

* **Own floors** (B12a on a cluster): the first token comes after the request's own prefill
  chain on whichever engines; on a cluster of ``prefill`` and ``decode`` engines, its
  second token only after its ``I`` tokens moved to a decode engine, so
  ``C_i - F_i >= transfer_time(I_i) + (chain_i - chain^p_i)``.
* **Counting** (B12b over ``n`` engines): the requests meeting their TTFT SLO receive their
  first-token work ``w_i`` (B7's sharing rules, per batch, so on any engine) inside
  ``[a_i, a_i + s_i]``; the engines able to run prefill entries (``R`` replicas, ``P``
  prefill engines) run one batch at a time each, so the work of those whose window lies in
  ``[t1, t2]`` is at most ``n (t2 - t1)``: B12b's count on the works divided by ``n``. The
  same for the whole work in the completion window (B12c) over every engine.

Not a rung: it takes a cluster instance (:func:`cluster_goodput_bound`) and returns B12's
:class:`~optsched.bounds.goodput.GoodputBound`. B12d (the coupled frontier) is left out
(its one-engine argument is not re-proved over several engines); leaving a valid term out
keeps the bound valid, only looser.
"""

from __future__ import annotations

import numpy as np

from ..errors import InstanceError
from ..instance import Instance
from .cluster import identical_engine
from .floors import Floors
from .goodput import GRID, GoodputBound, Slos, completion_windows, counting_misses, own_feasible
from .goodput_memory import rule_works


def cluster_shape(instance: Instance) -> tuple[int, int, bool]:
    """``(engines that prefill, all engines, disaggregated)`` of a cluster whose engines
    are all of role ``both`` (replicas) or all ``prefill`` / ``decode`` (a one-line
    :class:`InstanceError` otherwise: a mix would need a per-request choice of path)."""
    roles = [instance.engine(k).role for k in range(instance.n_engines)]
    if set(roles) == {"both"}:
        return len(roles), len(roles), False
    if "both" in roles:
        raise InstanceError("cluster goodput bound: engines of role 'both' beside 'prefill' / "
                            "'decode' engines are not modelled (B17g); use replicas or a "
                            "prefill/decode split")
    return roles.count("prefill"), len(roles), True


def transfer_floor(instance: Instance, disaggregated: bool) -> np.ndarray:
    """Per request, the least time between its first and second token spent moving its KV:
    ``transfer_time(I)`` on a prefill/decode cluster with ``O >= 2`` (module docstring), else 0."""
    if not disaggregated:
        return np.zeros(instance.n)
    link = instance.cluster.transfer if instance.cluster is not None else None
    if link is None:  # loading refuses prefill/decode roles without a link
        raise InstanceError("cluster goodput bound: a prefill/decode cluster without a link")
    t = np.asarray(link.time(instance.prompt.astype(np.float64)), np.float64)
    return np.where(instance.output >= 2, t, 0.0)


def cluster_goodput_bound(instance: Instance, ttft: float | None = None,
                          tpot: float | None = None, grid: int | None = GRID) -> GoodputBound:
    """B17g: upper bounds on how many requests any schedule of the cluster ``instance``
    serves within their SLOs (module docstring); ``ttft``, ``tpot`` are defaults for
    requests without the field; ``grid`` caps the counting grid's endpoints (B12b: any grid
    is valid, a finer one tighter). Engines must be identical (B17's refusal otherwise)."""
    if instance.has_prefix:
        raise InstanceError("cluster goodput bound (B17g): does not model prefix reuse")
    n_first, n_all, disagg = cluster_shape(instance)
    one = identical_engine(instance)
    slos = Slos.of(one, ttft, tpot)
    f = Floors.of(one)
    ttft_ok, all_ok = own_feasible(f, slos)
    steps = one.output - 1
    step_chain = f.chain - f.prefill_chain + transfer_floor(instance, disagg)
    all_ok &= (steps == 0) | (step_chain <= slos.tpot * np.maximum(steps, 1) * (1 + 1e-9))
    a = one.arrival
    first_by = a + slos.ttft
    done_by = completion_windows(one, slos)
    works = rule_works(one, f)

    def forced(ok: np.ndarray, full: bool) -> int:
        most = 0
        for w_first, w_all in works:
            w, d = w_first / n_first, first_by
            if full:  # whole requests' work (first-token work without a window): any engine
                fin = np.isfinite(done_by)
                w, d = np.where(fin, w_all, w_first) / n_all, np.where(fin, done_by, first_by)
            sel = ok & np.isfinite(d)
            if sel.any():
                most = max(most, counting_misses(a[sel], d[sel], w[sel], grid))
        return most

    own = int(ttft_ok.sum())
    ttft_count = own - forced(ttft_ok, False)
    both = min(ttft_count, int(all_ok.sum()) - forced(all_ok, True))
    return GoodputBound(n=one.n, with_slo=int(slos.has.sum()), ttft_own=own, ttft=ttft_count,
                        both=max(both, 0))


__all__ = ["cluster_goodput_bound", "cluster_shape", "transfer_floor"]
