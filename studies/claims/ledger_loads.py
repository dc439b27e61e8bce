"""The offered load of every instance the claims ledger (``docs/results/claims.md``) quotes a
figure from, so each row can state its load (docs/semantics.md section 4).

The instances are rebuilt exactly as the scripts that measured the rows built them (the same
generators, seeds, sizes and rates: ``studies/claims/fidelity.py``, ``studies/claims/theory.py``,
notebook 08's setting in ``studies/settings.py``); no policy under study is re-run, only
:func:`optsched.serving.load.offered_load` (the point figure: the arrival rate over the best
reference policy's rate on queued copies of the mix; the certified side from the work limit;
the busiest tenth). BROS loads are of the RT requests alone, as in
``studies/papers36/house_loads.py`` (BE work comes on top). An instance whose requests all
arrive at 0 has no arrival rate, so no load ("offline").

    (OPTSCHED_DATA=/path/to/shared/data .venv/bin/python -m studies.claims.ledger_loads;
     OPTSCHED_DATA=/path/to/shared/data .venv/bin/python -m studies.claims.ledger_loads \\
        --cost-model vidur-llama2-7b-a100) > studies/claims/results/ledger-loads.txt
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

from optsched.instance import Instance, Limits
from optsched.serving.load import offered_load
from optsched.serving.rate_search import at_rate, trace_rate
from optsched.workloads.hybrid import bros_workload
from optsched.workloads.traces import load_trace_instance
from studies import settings
from studies.claims.fidelity import COST, ECO_PAPER_M, LIMITS, TRACE, _chat, _cost

ROOT = Path(__file__).resolve().parents[2]
#: the ledger's preset; under another (``--cost-model``, the fitted preset of its sensitivity
#: rows) only the rows measured under both presets are printed
DEFAULT = COST["preset"]
Row = tuple[str, Callable[[], Instance]]


def rt_part(inst: Instance) -> Instance:
    """The RT requests of a BROS workload at their arrivals, without BE work."""
    return inst.replace(requests=tuple(r for r in inst.requests if r.cls == "rt"))


def conv_prefix(n: int, limits: Limits) -> Instance:
    """The first ``n`` conversation requests at their own arrivals (fidelity.py's Azure rows)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_trace_instance(TRACE, limits, _cost(), limit=n, too_long="drop")


def at_trace_multiple(base: Instance, mult: float) -> Instance:
    return at_rate(base, mult * trace_rate(base), seed=0)


def synthetic_rows() -> Iterator[Row]:
    """The paper-like rows (no shared data needed)."""
    eco = Limits(kv_capacity=ECO_PAPER_M, max_batch_tokens=4096)
    for rate in (4.0, 6.0, 8.0, 16.0, 29.0):
        yield (f"EcoServe paper-like, 1,000 sharegpt-ecoserve, M = 14,648, {rate:g} req/s",
               lambda rate=rate: at_rate(_chat("sharegpt-ecoserve", 1000, eco), rate, seed=0))
    pool = _chat("sharegpt", 5000, LIMITS, seed=3)
    for n_rt in (60, 120):
        for rate in (4.0, 12.0):
            yield (f"BROS paper-like, {n_rt} RT at {rate:g} req/s (RT alone), M = 20,000",
                   lambda n_rt=n_rt, rate=rate: rt_part(bros_workload(
                       pool, n_rt, rate, seed=1, be_batch=8, limits=LIMITS, cost_model=_cost())))
    apt = Limits(kv_capacity=10_000, max_batch_tokens=4096, block_size=16, hidden_cache=True)
    for n in (200, 400):
        for rate in (8.0, 9.11, 11.31, 16.0, 32.0):
            yield (f"Apt-Serve paper-like, {n} sharegpt, M = 10,000 (hidden cache), {rate:g} req/s",
                   lambda n=n, rate=rate: at_rate(_chat("sharegpt", n, apt), rate, seed=0))
    if COST["preset"] != DEFAULT:
        return
    for path in ("instances/evidence/online-paper-n40-s1.json",
                 "instances/mcsf-counterexample-I2-O3-1-3-1-M5.json"):
        yield path, lambda path=path: Instance.load(ROOT / path)


def trace_rows() -> Iterator[Row]:
    """The rows on the Azure traces (need ``OPTSCHED_DATA``)."""
    yield ("EcoServe Azure, 3,000 conv at 4x the trace rate, M = 100,000",
           lambda: at_trace_multiple(conv_prefix(3000, Limits(kv_capacity=100_000,
                                                             max_batch_tokens=4096)), 4.0))
    yield ("BROS Azure (notebook 07), 60 RT at 4 req/s (RT alone), M = 20,000",
           lambda: rt_part(bros_workload(TRACE, 60, 4.0, seed=1, be_batch=8, limits=LIMITS,
                                         cost_model=_cost())))
    apt = settings.APTSERVE_LIMITS
    yield ("Apt-Serve Azure, 80 conv at 4x the trace rate, M = 10,000 (hidden cache)",
           lambda: at_trace_multiple(conv_prefix(80, apt), 4.0))
    if COST["preset"] != DEFAULT:
        return
    for rate in (2.77, 3.44, 3.83, 26.0):
        yield (f"notebook 08: 400 conv at {rate:g} req/s (Poisson, seed 0), M = 10,000",
               lambda rate=rate: at_rate(conv_prefix(400, apt), rate, seed=0))
    for kind in settings.KINDS:
        yield (f"theory table: first 200 {kind} requests, own arrivals",
               lambda kind=kind: _first(kind, 200))
        for seed in (1, 2, 3):
            yield (f"theory table: {kind} seed {seed}, 1,000 requests, own arrivals",
                   lambda kind=kind, seed=seed: settings.window(kind, seed, 1000))


def _first(kind: str, n: int) -> Instance:
    """The first ``n`` requests of a trace, M = 30,000, C = 8,192 (theory.py's 200-request runs)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_trace_instance(settings.trace_path(kind), Limits(kv_capacity=settings.M,
                                   max_batch_tokens=settings.C), _cost(), limit=n,
                                   too_long="drop")


def line(label: str, build: Callable[[], Instance]) -> str:
    t0 = time.process_time()
    inst = build()
    ld = offered_load(inst)
    f = lambda x: "n/a" if x is None else f"{x:.3f}"  # noqa: E731
    return (f"{label:72} {inst.n:>5} {f(ld.arrival_rate):>7} {f(ld.point):>6} {f(ld.lower):>6} "
            f"{f(ld.peak):>6} {ld.status:>12} {ld.reference or '-':>8} "
            f"{time.process_time() - t0:5.1f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cost-model", default=DEFAULT,
                    help="cost preset (the fidelity rows' sensitivity: vidur-llama2-7b-a100)")
    a = ap.parse_args(argv)
    COST["preset"] = a.cost_model
    print(f"# studies/claims/ledger_loads.py --cost-model {a.cost_model}; load average "
          f"{os.getloadavg()[0]:.1f}; point = optsched.serving.load point (upper side), "
          "cert. = certified lower side, peak = busiest tenth; BROS: RT requests alone")
    print(f"{'instance':72} {'n':>5} {'req/s':>7} {'point':>6} {'cert.':>6} {'peak':>6} "
          f"{'status':>12} {'ref.':>8} {'cpu s':>5}")
    rows = list(synthetic_rows())
    if (settings.DATA / "traces").is_dir():
        rows += list(trace_rows())
    else:
        print(f"# the trace rows skipped: {settings.DATA / 'traces'} missing (set OPTSCHED_DATA)")
    for label, build in rows:
        print(line(label, build), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
