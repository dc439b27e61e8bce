"""The bound-method contract: the registry and :func:`lower_bound` (the result type,
:class:`~optsched.solve_types.BoundResult`, and :class:`~optsched.solve_types.BoundError` are
defined with the other result types in :mod:`optsched.solve_types` and re-exported here).

A *bound method* is a function ``fn(instance, objective, budget) -> BoundResult`` that
returns a value never above the optimum of ``objective`` over all feasible schedules of
``instance`` (semantics sections 3-5). Each method registers itself by name with
:func:`register_bound`; its validity argument is in ``formulations/bounds.md``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from ..evaluation import OBJECTIVES
from ..instance import Instance
from ..objectives import MODELLED
from ..plugins import BOUNDS
from ..solve_types import BoundError, BoundResult, Objective, SolveOptions, SolveReport

#: the rank of a plain function registered without one (an entry point, a ``module:Name``
#: reference): after ``exact``, before ``best``
PLAIN_RANK = 500

#: every bound is lowered by this relative amount before it is reported, so float rounding
#: in the closed forms cannot lift it above the optimum (bounds.md section 1)
SAFETY = 1e-9


class ExactSolve(Protocol):
    """The one solve as the ``exact`` rung calls it: :func:`optsched.solving.pipeline.solve`, handed
    down by the layer above (this package may not import the pipeline, which imports it)."""

    def __call__(self, instance: Instance, formulation: str, objective: str, *,
                 options: SolveOptions, warm_start: Any) -> SolveReport: ...


@dataclass(frozen=True)
class Budget:
    """What the methods of one command may spend: wall-clock time (``--time-limit``) and, for
    the ``exact`` rung, a solve (``exact_solve``; None: that rung says it cannot run).

    The solve is injected, not imported: :func:`optsched.solving.pipeline.lower_bound` (the top-level
    ``optsched.lower_bound``, ``optsched bound``) passes the pipeline's ``solve``."""

    deadline: float | None = None  # time.perf_counter() value, None = unlimited
    exact_solve: ExactSolve | None = field(default=None, compare=False)

    @classmethod
    def seconds(cls, s: float | None, exact_solve: ExactSolve | None = None) -> Budget:
        return cls(None if s is None else time.perf_counter() + max(0.0, float(s)), exact_solve)

    def left(self) -> float:
        return math.inf if self.deadline is None else max(0.0, self.deadline - time.perf_counter())

    @property
    def expired(self) -> bool:
        return self.left() <= 0.0


BoundFn = Callable[[Instance, str, Budget], BoundResult]


@dataclass(frozen=True)
class BoundMethod:
    """A registered bound method and its place on the ladder (``formulations/bounds.md``
    section 3). ``rank``: the order of the ladder, cheapest first (ties by name).
    ``cheap``: an O(n log n) closed form; ``combinatorial`` takes the largest of the cheap
    rungs, in rank order, and ``best`` climbs every other rung ranked below it, in rank order,
    within the time limit (``combinatorial`` first). A rung declares both at registration
    (:func:`register_bound`), so a new rung is one new module: climbed, listed
    (:func:`bound_methods`) and validity-tested (``tests/bounds/test_every_rung.py``)."""

    name: str
    fn: BoundFn
    description: str
    #: the objectives it bounds (by default those the formulations model: a percentile is
    #: not one of them, a rung claims it explicitly)
    objectives: tuple[str, ...] = MODELLED
    rank: int = PLAIN_RANK
    cheap: bool = False
    #: whether the bound stays valid with prefix reuse (docs/semantics.md section 6, "Prefix
    #: reuse"): hits make prefills cheaper and shared blocks occupy memory once, so a
    #: reuse-blind bound can exceed the optimum of an instance with block ids and is refused
    #: there
    reuse_aware: bool = False
    #: the reuse-blind rung this one equals on instances without prefix block ids (the reuse
    #: rungs of B19 run the bodies of B3/B5/B7 with reuse floors): ``best`` climbs it only on
    #: instances that list prefix ids, so elsewhere the ladder names the plain rung and does
    #: not compute the same value twice
    twin_of: str | None = None

    def __post_init__(self) -> None:
        unknown = [o for o in self.objectives if o not in OBJECTIVES]
        if not self.objectives or unknown:
            raise BoundError(f"bound method {self.name!r}: objectives must be some of "
                             f"{', '.join(OBJECTIVES)}, got {self.objectives!r}")
        if isinstance(self.rank, bool) or not isinstance(self.rank, int):
            raise BoundError(f"bound method {self.name!r}: rank must be an integer, "
                             f"got {self.rank!r}")


def register_bound(name: str, description: str, objectives=MODELLED, *, rank: int,
                   cheap: bool = False, reuse_aware: bool = False, twin_of: str | None = None):
    """Decorator: ``@register_bound("request", "...", rank=10, cheap=True)`` on a bound
    function registers it in :data:`optsched.plugins.BOUNDS` with its place on the ladder
    (:class:`BoundMethod`); a new method is one new module in this package, or an entry
    point of the group ``optsched.bounds`` (``docs/add-a-bound-rung.md``). ``reuse_aware``:
    the bound is valid on instances with prefix block ids (others are refused there).
    ``twin_of``: the reuse-blind rung it equals on instances without prefix ids
    (:attr:`BoundMethod.twin_of`)."""

    def deco(fn: BoundFn) -> BoundFn:
        BOUNDS.add(name, BoundMethod(name, fn, description, tuple(objectives), rank, cheap,
                                     reuse_aware, twin_of), fn)
        return fn

    return deco


def refusal_with_prefix(method: str) -> str:
    """Why bound ``method`` refuses an instance with prefix block ids."""
    return (f"bound method {method!r} does not model prefix reuse, and this instance's "
            "requests list prefix block ids (docs/semantics.md section 6, 'Prefix reuse'): "
            "cache hits skip prefill work and shared blocks occupy memory once, so a "
            "reuse-blind bound is not a lower bound here. Remove the 'prefix' fields to bound "
            "the problem without reuse")


def _as_method(name: str, entry: Any) -> BoundMethod:
    """A registry entry as a BoundMethod: a plain function loaded from an entry point or a
    ``module:Name`` reference supports the modelled objectives, ranked after ``exact``, before
    ``best`` (:data:`PLAIN_RANK`)."""
    if isinstance(entry, BoundMethod):
        return entry
    if callable(entry):
        return BoundMethod(name, entry, (entry.__doc__ or name).strip().splitlines()[0],
                           MODELLED, PLAIN_RANK)
    raise BoundError(f"bound method {name!r} is not a function")


def bound_methods() -> dict[str, BoundMethod]:
    """Every registered method, in ladder order (rank, then name)."""
    methods = [_as_method(n, BOUNDS.get(n)) for n in BOUNDS.names()]
    return {m.name: m for m in sorted(methods, key=lambda m: (m.rank, m.name))}


def rungs(*, cheap: bool, below: int | None = None) -> list[BoundMethod]:
    """The registered methods with this ``cheap`` flag ranked below ``below`` (all when
    None), in ladder order: what ``combinatorial`` (the cheap ones) and ``best`` (the others
    below it) climb."""
    return [m for m in bound_methods().values()
            if m.cheap == cheap and (below is None or m.rank < below)]


def lower_bound(instance: Instance, objective: str = "makespan", method: str = "best",
                time_limit: float | None = None, budget: Budget | None = None,
                exact_solve: ExactSolve | None = None) -> BoundResult:
    """A certified lower bound on the optimum of ``objective`` (``formulations/bounds.md``).

    ``exact_solve``: the solve the ``exact`` rung (and so ``best``) may use; without one (here
    or in ``budget``) that rung reports that it cannot run. :func:`optsched.solving.pipeline.lower_bound`
    -- the top-level ``optsched.lower_bound`` -- supplies the pipeline's."""
    if objective not in OBJECTIVES:
        raise BoundError(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    methods = bound_methods()
    if method not in methods:
        from ..plugins import is_reference

        if not is_reference(method):
            raise BoundError(f"unknown bound method {method!r}; choose one of "
                             f"{', '.join(methods)}")
        methods[method] = _as_method(method, BOUNDS.get(method))
    info = methods[method]
    if objective not in info.objectives:
        raise BoundError(f"bound method {method!r} does not support objective {objective!r} "
                         f"(supports {', '.join(info.objectives)})")
    if instance.limits.hidden_cache:
        # every method's floors assume KV memory; hidden cache halves it (semantics section 6)
        raise BoundError(f"bound method {method!r}: the instance enables hidden cache "
                         "(limits.hidden_cache), whose half-memory caches the bounds do not "
                         "model; a KV-only bound could exceed the optimum. Set hidden_cache "
                         "to false for the KV-only problem")
    instance.require_one_engine(f"bound method {method!r}")  # section 6, clusters
    if instance.has_prefix and not info.reuse_aware:
        raise BoundError(refusal_with_prefix(method))
    budget = budget or Budget.seconds(time_limit)
    if exact_solve is not None:
        budget = replace(budget, exact_solve=exact_solve)
    t0 = time.perf_counter()
    if instance.n == 0:
        return BoundResult(0.0, method, objective, 0.0, notes=("no requests",))
    from ..formulations.base import arrival_origin, shift_instance

    # bounds are computed with time starting at the earliest arrival, like the models
    # (docs/semantics.md section 7): the relative SAFETY margin then scales with the
    # schedule's span, not with an epoch offset (1e-9 of 1.7e9 s would be 1.7 s)
    origin = arrival_origin(instance)
    res = info.fn(shift_instance(instance, origin) if origin else instance, objective, budget)
    shift = origin if objective == Objective.MAKESPAN else 0.0

    def lowered(x: float) -> float:
        # shifting back rounds to within an ulp of the offset: four more keep it below
        return x - SAFETY * abs(x) + (shift - 4.0 * shift * 2.0**-52 if shift else 0.0)

    ladder = {k: lowered(x) for k, x in res.ladder.items()}
    notes = tuple(res.notes) + ((f"computed with arrivals shifted by -{origin:.17g} s "
                          "(docs/semantics.md section 7)",) if origin else ())
    return BoundResult(lowered(res.value), res.method, objective, time.perf_counter() - t0,
                       ladder, notes)
