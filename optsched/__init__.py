"""optsched: provably optimal schedules for LLM inference serving.

See ``docs/semantics.md`` for what a schedule means; every schedule goes
through :func:`optsched.evaluate`.

The top-level API (one name per concept; each lives in the module named here and is imported
on first use, so ``import optsched`` and the CLI stay fast)::

    import optsched
    inst = optsched.load("demo")                      # a file, or a shipped instance by name
    sched = optsched.simulate(inst, "vllm")           # a policy's schedule (policies/)
    print(optsched.evaluate(inst, sched).makespan)    # the one semantics (evaluation/)
    report = optsched.solve(inst, "infermax", "makespan")          # formulations/
    bound = optsched.lower_bound(inst, "makespan")                 # bounds/

- :func:`load` -- :func:`optsched.data.load_instance`: an instance file or a shipped name
- :class:`Instance`, :class:`Schedule` -- :mod:`optsched.instance`, :mod:`optsched.schedule`
- :func:`simulate`, :class:`Policy`, :class:`Plan` -- :mod:`optsched.policies`
- :func:`evaluate` -- :func:`optsched.evaluation.evaluate` (``docs/semantics.md``)
- :func:`solve`, :class:`SolveOptions` -- :func:`optsched.solving.solve` (the one solve path),
  :mod:`optsched.solve_types`
- :func:`lower_bound` -- :func:`optsched.solving.lower_bound`: the ladder of
  :mod:`optsched.bounds` with the one solve for its ``exact`` rung (``formulations/bounds.md``)
- :func:`compare` -- :func:`optsched.comparison.compare`

Every verb has one result type, importable from here to annotate with (``optsched.X``), each
with a ``summary()`` that ``print`` shows: :func:`evaluate` returns an :class:`Evaluation`,
:func:`solve` a :class:`SolveReport` (its :class:`Status`, and a :class:`Fallback` when the
model was skipped), :func:`lower_bound` a :class:`BoundResult`, :func:`compare` a
:class:`Comparison` of :class:`Row` s; :class:`Objective` names what is minimised.

No submodule is named like a top-level function (``optsched.evaluate`` and
``optsched.compare`` are functions; their packages are ``evaluation`` and ``comparison``), so
importing any module never rebinds one of these names.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # the names as type checkers see them; at run time __getattr__ imports them
    from .comparison import Comparison, Row, compare
    from .data import load_instance as load
    from .evaluation import Evaluation, evaluate
    from .instance import Instance
    from .policies import Plan, Policy, simulate
    from .schedule import Schedule
    from .solve_types import (
        BoundResult,
        Fallback,
        Objective,
        SolveOptions,
        SolveReport,
        Status,
    )
    from .solving import lower_bound, solve

#: public name -> (module, attribute)
_LAZY: dict[str, tuple[str, str]] = {
    "load": ("optsched.data", "load_instance"),
    "Instance": ("optsched.instance", "Instance"),
    "Schedule": ("optsched.schedule", "Schedule"),
    "simulate": ("optsched.policies", "simulate"),
    "Policy": ("optsched.policies", "Policy"),
    "Plan": ("optsched.policies", "Plan"),
    "evaluate": ("optsched.evaluation", "evaluate"),
    "solve": ("optsched.solving", "solve"),
    "SolveOptions": ("optsched.solve_types", "SolveOptions"),
    "lower_bound": ("optsched.solving", "lower_bound"),
    "compare": ("optsched.comparison", "compare"),
    # the result types of the verbs above, and the vocabulary they use
    "Evaluation": ("optsched.evaluation", "Evaluation"),
    "SolveReport": ("optsched.solve_types", "SolveReport"),
    "Fallback": ("optsched.solve_types", "Fallback"),
    "BoundResult": ("optsched.solve_types", "BoundResult"),
    "Comparison": ("optsched.comparison", "Comparison"),
    "Row": ("optsched.comparison", "Row"),
    "Status": ("optsched.solve_types", "Status"),
    "Objective": ("optsched.solve_types", "Objective"),
}

__all__ = [
    "BoundResult", "Comparison", "Evaluation", "Fallback", "Instance", "Objective", "Plan",
    "Policy", "Row", "Schedule", "SolveOptions", "SolveReport", "Status", "__version__",
    "compare", "evaluate", "load", "lower_bound", "simulate", "solve",
]


def __getattr__(name: str) -> Any:
    """Import a top-level API name from its module on first use (PEP 562) and cache it."""
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'optsched' has no attribute {name!r}") from None
    value = getattr(import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
