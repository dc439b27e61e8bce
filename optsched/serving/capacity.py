"""Capacity planning for a cluster (``optsched capacity --max-engines / --gpus``): which
configurations of engines -- ``R`` colocated replicas, or ``P`` prefill and ``D`` decode
engines -- serve a workload so that a target share of its requests meets their TTFT and
TPOT SLOs, with a **certified ceiling** per configuration (``formulations/bounds.md`` B17g:
no schedule on that configuration attains more) beside what the router and policy attain
(simulated, judged by the one evaluator).

**The answer** on engine counts ``n_1 < n_2 < ...`` (docs/semantics.md section 6,
"Capacity planning"): at each count, the *best* configuration is the one with the highest
attainment (ties: colocated first, then fewer prefill engines); the *smallest* is the best
configuration of the first count whose best meets the target. A configuration whose ceiling
is below the target provably cannot meet it, with any router or policy.

:func:`brute_force` simulates every configuration; :func:`search` gives the same answer with
fewer simulations, branch and bound on the ceilings: at each count it simulates in order of
decreasing ceiling and stops at the first configuration whose ceiling is below the best
attainment found (it cannot beat it nor tie it) or, when looking for the smallest count,
below the target (it cannot meet it).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ..bounds.cluster_goodput import cluster_goodput_bound
from ..cluster import simulate
from ..errors import InstanceError
from ..evaluation import evaluate
from ..instance import Cluster, Engine, Instance, TransferLink


class ConfigStatus(StrEnum):
    """What capacity planning learnt of one configuration (not a solver's
    :class:`~optsched.solve_types.Status`): simulated, certified unable to meet the target
    (its ceiling is below it), pruned by the search (a better one is known), or not reached
    before the time limit."""

    SIMULATED = "simulated"
    CANNOT = "cannot"
    PRUNED = "pruned"
    NOT_REACHED = "not reached"


SIMULATED, CANNOT, PRUNED, NOT_REACHED = (ConfigStatus.SIMULATED, ConfigStatus.CANNOT,
                                          ConfigStatus.PRUNED, ConfigStatus.NOT_REACHED)


class CapacityError(InstanceError):
    """A bad capacity-planning request (one line)."""


@dataclass(frozen=True, order=True)
class Config:
    """``replicas`` colocated engines (role ``both``), or ``prefill`` + ``decode`` engines."""

    replicas: int = 0
    prefill: int = 0
    decode: int = 0

    def __post_init__(self) -> None:
        vals = (self.replicas, self.prefill, self.decode)
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in vals):
            raise CapacityError(f"configuration: engine counts must be integers >= 0, got {vals}")
        if (self.replicas > 0) == (self.prefill > 0 or self.decode > 0) or \
                (self.replicas == 0 and (self.prefill == 0 or self.decode == 0)):
            raise CapacityError(f"configuration: either replicas >= 1 or prefill >= 1 and "
                                f"decode >= 1, got {vals}")

    @property
    def engines(self) -> int:
        return self.replicas or self.prefill + self.decode

    @property
    def label(self) -> str:
        if self.replicas:
            return f"{self.replicas} replica" + "s" * (self.replicas > 1)
        return f"{self.prefill}:{self.decode}"

    @property
    def rank(self) -> tuple[int, int]:
        """The tie order among configurations of one count: colocated, then by ``P``."""
        return (1, self.prefill) if self.prefill else (0, 0)

    def build(self, plain: Instance, link: TransferLink | None, gpus: int = 1) -> Instance:
        """``plain`` on this configuration, each engine of ``gpus`` GPUs (a tensor-parallel
        group); a split needs the ``link``."""
        if self.replicas:
            engines = tuple(Engine(str(k), gpus=gpus) for k in range(self.replicas))
            return plain.replace(cluster=Cluster(engines))
        if link is None:
            raise CapacityError(f"configuration {self.label}: a prefill/decode split needs a "
                                "transfer link")
        engines = tuple(Engine(f"p{k}", "prefill", gpus=gpus) for k in range(self.prefill)) + \
            tuple(Engine(f"d{k}", "decode", gpus=gpus) for k in range(self.decode))
        return plain.replace(cluster=Cluster(engines, link))

    def to_dict(self) -> dict[str, Any]:
        return {"replicas": self.replicas, "prefill": self.prefill, "decode": self.decode}


def configs(n: int, colocated: bool = True, splits: bool = True) -> list[Config]:
    """The configurations of ``n`` engines: ``n`` replicas, and every ``P:D`` with ``P + D = n``."""
    out = [Config(replicas=n)] if colocated else []
    return out + ([Config(prefill=p, decode=n - p) for p in range(1, n)] if splits else [])


@dataclass(frozen=True)
class Outcome:
    """One configuration: its ceiling (B17g, a share of the requests with an SLO; None when
    the time limit came first), and, when simulated, the attainment and goodput per GPU the
    router and policy reach."""

    config: Config
    gpus: int
    ceiling: float | None
    status: ConfigStatus
    attainment: float | None = None
    goodput_per_gpu: float | None = None
    feasible: bool | None = None
    cpu_seconds: float = 0.0
    #: certified load per engine (colocated only; > 1: the rate is not sustainable)
    load_lower: float | None = None

    def __post_init__(self) -> None:
        if self.status not in (SIMULATED, CANNOT, PRUNED, NOT_REACHED):
            raise CapacityError(f"outcome: unknown status {str(self.status)!r}")
        if self.ceiling is None and self.status != NOT_REACHED or \
                self.ceiling is not None and not 0 <= self.ceiling <= 1:
            raise CapacityError(f"outcome: ceiling {self.ceiling!r} with status {str(self.status)!r}")
        if (self.attainment is None) != (self.status != SIMULATED):
            raise CapacityError(f"outcome: attainment {self.attainment!r} with status "
                                f"{str(self.status)!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config.to_dict(), "label": self.config.label,
                "engines": self.config.engines, "gpus": self.gpus, "ceiling": self.ceiling,
                "status": str(self.status), "attainment": self.attainment,
                "goodput_per_gpu": self.goodput_per_gpu, "feasible": self.feasible,
                "cpu_seconds": self.cpu_seconds, "load_lower": self.load_lower}


@dataclass(frozen=True)
class Setting:
    """What is planned for: the SLOs (defaults for requests without their own), the target
    attainment, the router of colocated engines, the engine policy, the link of splits, the
    GPUs per engine."""

    ttft: float
    tpot: float
    target: float = 0.9
    router: str = "lor"
    policy: str = "vllm"
    link: TransferLink | None = None
    gpus_per_engine: int = 1
    #: endpoints of the ceiling's counting grid (B12b: any grid is valid, a finer one
    #: tighter; None: B12's own default, about 7x the time on 300 requests)
    grid: int | None = 200

    def __post_init__(self) -> None:
        for name in ("ttft", "tpot"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise CapacityError(f"--{name}-slo must be a finite number > 0, got {v!r}")
        if not (isinstance(self.target, (int, float)) and 0 < self.target <= 1):
            raise CapacityError(f"--attainment must be in (0, 1], got {self.target!r}")
        if self.router == "pd":
            raise CapacityError("--router: 'pd' serves the splits already; name the router of "
                                "the colocated replicas (rr, lor, least-kv, p2c)")
        if not (isinstance(self.gpus_per_engine, int) and self.gpus_per_engine >= 1):
            raise CapacityError(f"--gpus-per-engine must be an integer >= 1, got "
                                f"{self.gpus_per_engine!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"ttft_slo": self.ttft, "tpot_slo": self.tpot, "target": self.target,
                "router": self.router, "policy": self.policy,
                "link": None if self.link is None else self.link.to_dict(),
                "gpus_per_engine": self.gpus_per_engine, "grid": self.grid}


@dataclass(frozen=True)
class Plan:
    """Every configuration examined, in the order examined, and the answer (module
    docstring): ``best[n]`` the best configuration of ``n`` engines (None where the search
    did not need it), ``smallest`` the first count's best that meets the target."""

    setting: Setting
    counts: tuple[int, ...]
    outcomes: tuple[Outcome, ...]
    best: dict[int, Config | None] = field(default_factory=dict)
    smallest: Config | None = None
    stopped: bool = False

    def outcome(self, c: Config) -> Outcome | None:
        return next((o for o in self.outcomes if o.config == c), None)

    @property
    def simulations(self) -> int:
        return sum(o.status == SIMULATED for o in self.outcomes)

    def to_dict(self) -> dict[str, Any]:
        return {"setting": self.setting.to_dict(), "counts": list(self.counts),
                "outcomes": [o.to_dict() for o in self.outcomes],
                "best": {str(n): None if c is None else c.label for n, c in self.best.items()},
                "smallest": None if self.smallest is None else self.smallest.label,
                "simulations": self.simulations, "stopped": self.stopped}


def preset_gpus(label: str | None) -> int:
    """GPUs of one engine of a cost preset named ``...-<k>x<gpu>`` (``k``; a tensor-parallel
    group, e.g. 4 for ``infermax-llama2-70b-4xa100``), else 1."""
    m = re.search(r"-(\d+)x[a-z]\w*$", label or "")
    return int(m.group(1)) if m else 1


def ceiling_of(plain: Instance, c: Config, s: Setting) -> float:
    """B17g's share on ``plain`` served by ``c`` (requests with an SLO)."""
    share = cluster_goodput_bound(c.build(plain, s.link, s.gpus_per_engine), s.ttft,
                                  s.tpot, s.grid).attainment
    return 1.0 if share is None else float(share)


def run_config(plain: Instance, c: Config, s: Setting, ceiling: float,
               load_lower: float | None = None) -> Outcome:
    """Simulate ``c`` under the setting's router (``pd`` for a split) and judge it."""
    inst = c.build(plain.with_default_slos(s.ttft, s.tpot), s.link, s.gpus_per_engine)
    t0 = time.process_time()
    ev = evaluate(inst, simulate(inst, s.policy, "pd" if c.prefill else s.router))
    att = ev.metrics.get("slo_attainment")
    return Outcome(c, c.engines * s.gpus_per_engine, ceiling, SIMULATED,
                   float(att) if att is not None else 0.0, ev.metrics.get("goodput_per_gpu"),
                   ev.feasible, time.process_time() - t0, load_lower)


def _check(plain: Instance, counts: Sequence[int]) -> tuple[int, ...]:
    if plain.cluster is not None:
        raise CapacityError("capacity planning builds the clusters itself: give an instance "
                            f"without a cluster (this one declares {plain.n_engines} engines)")
    if not counts or any(not isinstance(n, int) or n < 1 for n in counts):
        raise CapacityError(f"engine counts must be integers >= 1, got {list(counts)}")
    return tuple(sorted(set(counts)))


def _better(a: Outcome, b: Outcome | None) -> bool:
    """``a`` ranks above ``b`` (module docstring: attainment, then the tie order)."""
    assert a.attainment is not None
    return b is None or b.attainment is None or a.attainment > b.attainment or \
        (a.attainment == b.attainment and a.config.rank < b.config.rank)


def brute_force(plain: Instance, counts: Sequence[int], s: Setting, *, colocated: bool = True,
                splits: bool = True) -> Plan:
    """Simulate every configuration of every count (the reference :func:`search` matches)."""
    ns = _check(plain, counts)
    outs: list[Outcome] = []
    best: dict[int, Config | None] = {}
    smallest = None
    for n in ns:
        top: Outcome | None = None
        for c in configs(n, colocated, splits):
            o = run_config(plain, c, s, ceiling_of(plain, c, s))
            outs.append(o)
            top = o if _better(o, top) else top
        best[n] = None if top is None else top.config
        if smallest is None and top is not None and top.attainment is not None \
                and top.attainment >= s.target:
            smallest = top.config
    return Plan(s, ns, tuple(outs), best, smallest)


def _late(deadline: float | None) -> bool:
    return deadline is not None and time.perf_counter() > deadline


def search(plain: Instance, counts: Sequence[int], s: Setting, *, colocated: bool = True,
           splits: bool = True, deadline: float | None = None,
           progress: Callable[[str], None] | None = None, load_lower: float | None = None
           ) -> Plan:
    """The answer of :func:`brute_force` by branch and bound on the ceilings (module
    docstring); with several counts it stops at the first whose best meets the target.
    ``deadline`` (a ``time.perf_counter()`` value) stops the ceilings and the simulations
    (``stopped``; one simulation or ceiling under way runs to its end);
    ``load_lower`` is the one-engine certified load (divided by ``R`` for ``R`` replicas)."""
    ns = _check(plain, counts)
    outs: list[Outcome] = []
    best: dict[int, Config | None] = {}
    smallest, stopped = None, False
    for n in ns:
        cands = [(None if _late(deadline) else ceiling_of(plain, c, s), c)
                 for c in configs(n, colocated, splits)]
        if any(x is None for x, _ in cands):  # no order to search in: the count is open
            stopped = True
            outs += [Outcome(c, c.engines * s.gpus_per_engine, x, NOT_REACHED) for x, c in cands]
            break
        known = [(x, c) for x, c in cands if x is not None]
        known.sort(key=lambda x: (-x[0], x[1].rank))
        top: Outcome | None = None
        for ceil, c in known:
            lo = None if load_lower is None or not c.replicas else load_lower / c.replicas
            floor_ = max(top.attainment if top and top.attainment is not None else -1.0,
                         s.target if len(ns) > 1 else -1.0)
            if stopped or _late(deadline):
                stopped = True
                outs.append(Outcome(c, c.engines * s.gpus_per_engine, ceil, NOT_REACHED,
                                    load_lower=lo))
            elif ceil < floor_:
                status = CANNOT if ceil < s.target else PRUNED
                outs.append(Outcome(c, c.engines * s.gpus_per_engine, ceil, status,
                                    load_lower=lo))
            else:
                if progress:
                    progress(f"{n} engines, {c.label}: ceiling {ceil:.3f}, simulating ...")
                o = run_config(plain, c, s, ceil, lo)
                outs.append(o)
                top = o if _better(o, top) else top
        meets = top is not None and top.attainment is not None and top.attainment >= s.target
        # with several counts, a count where none meets is searched only for that answer
        best[n] = None if top is None or stopped or (len(ns) > 1 and not meets) \
            else top.config
        if stopped or meets:
            smallest = top.config if meets and not stopped and top is not None else None
            break
    return Plan(s, ns, tuple(outs), best, smallest, stopped)


__all__ = ["CANNOT", "NOT_REACHED", "PRUNED", "SIMULATED", "CapacityError", "Config", "Outcome",
           "Plan", "Setting", "brute_force", "ceiling_of", "configs", "preset_gpus",
           "run_config", "search"]
