"""The sweep spec: a TOML file naming instances, seeds and methods, checked on load.

A sweep is the cross product *instances x seeds x methods*; each combination is one cell
(:mod:`optsched.sweep.cells`). The file::

    [sweep]
    name = "mcsf-vs-hindsight"
    seeds = [0, 1, 2]          # or trials = 200 (seeds 0..199); crossed with every generator
    objective = "total-latency"  # the default objective of every method (default makespan)

    [[instances]]
    generator = "online-paper"   # any `optsched generate` kind (optsched.workloads.generators.GENERATORS)
    n = [8, 10]                  # a list expands into a grid (every generator key may be a list)

    [[instances]]
    file = "instances/x.json"    # or an instance file (relative to the spec), or a shipped name

    [[methods]]
    policy = "mcsf"              # a registered policy; params = {...} its parameters

    [[methods]]
    formulation = "hindsight"    # a registered formulation; objective, solver, time_limit, params
    time_limit = 10

    [[methods]]
    bound = "best"               # a bound method of optsched.bounds

    [[instances]]                # a cluster (optsched.sweep.clusters): any row takes
    generator = "chat-like"      # replicas = [2, 4, 8] (or prefill_replicas with
    n = 200                      # decode_replicas), load = [0.7, 0.9] (per replica),
    replicas = [2, 4, 8]         # ttft_slo, tpot_slo
    load = [0.7, 0.9]

    [[instances]]
    trace = "${OPTSCHED_DATA}/traces/AzureLLMInferenceTrace_conv.csv"   # a seeded window
    consecutive = 1200           # of a trace file ($VARS expanded), one per seed

    [[methods]]
    policy = "vllm"              # router = "lor": the policy on every engine behind a router
    router = "lor"

    [[methods]]
    bound = "cluster"            # B17's certified cluster floors

    [[methods]]
    improve = "vllm"             # optsched improve on the cluster's assignment, from the
    router = "lor"               # router's schedule; time_limit, max_moves (reproducible)

Every check names the key (``methods[1].time_limit``) and raises :class:`SpecError`, which
the CLI turns into one line and exit code 2.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..data import embedded_instance_path
from ..errors import OptschedError
from ..evaluation import OBJECTIVES
from ..formulations import formulations
from ..policies import PolicyError, get_spec
from ..workloads.generators import GENERATORS, REQUIRED
from .bound_methods import check_bound_method
from .clusters import CLUSTER_BOUND, CLUSTER_KEYS, FLOOR_KEYS, check_cluster_row

SOLVERS = ("highs", "gurobi", "cbc", "cpsat", "auto")
#: limit/cost keys a generator that takes limits accepts besides its own parameters
LIMIT_KEYS = ("kv_capacity", "max_batch_tokens", "max_prefill_tokens", "cost_model")
#: the keys of a trace row (a seeded window of a trace file) besides LIMIT_KEYS, and their types
TRACE_KEYS: dict[str, type] = {"consecutive": int, "format": str, "too_long": str}
DEFAULT_OBJECTIVE = "makespan"
DEFAULT_TIME_LIMIT = 60.0
#: seconds of an ``improve`` method's search (``optsched improve``'s default)
DEFAULT_IMPROVE_LIMIT = 10.0


class SpecError(OptschedError):
    """A sweep spec that cannot be run; the message names the file and the key."""


# -- the parsed spec ------------------------------------------------------------------
@dataclass(frozen=True)
class MethodSpec:
    """One ``[[methods]]`` entry. ``kind`` is ``policy``, ``formulation`` or ``bound``;
    ``options`` holds the kind's settings (objective, solver, time_limit, threads, ...),
    ``params`` the policy's / formulation's / bound's own parameters."""

    kind: str
    name: str
    label: str
    objective: str
    options: tuple[tuple[str, Any], ...] = ()
    params: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self):
        if self.kind not in METHOD_KEYS:
            raise SpecError(f"method kind must be one of {', '.join(METHOD_KEYS)}, got {self.kind!r}")
        if self.objective not in OBJECTIVES:
            raise SpecError(f"objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")

    @property
    def option(self) -> dict[str, Any]:
        return dict(self.options)

    def to_dict(self) -> dict[str, Any]:
        """What identifies the method's result (part of the cell key; stored as JSON)."""
        return {"kind": self.kind, "name": self.name, "objective": self.objective,
                "options": dict(self.options), "params": dict(self.params)}


@dataclass(frozen=True)
class InstanceSpec:
    """One ``[[instances]]`` entry: a generator with a grid of parameters, a trace file's seeded
    windows, or a file; any of them with a grid of cluster keys."""

    index: int
    generator: str | None = None
    file: str | None = None
    trace: str | None = None
    grid: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    seeds: tuple[int, ...] | None = None  # overrides [sweep].seeds

    def points(self) -> list[dict[str, Any]]:
        """The grid's parameter combinations, in file order."""
        keys = [k for k, _ in self.grid]
        return [dict(zip(keys, combo)) for combo in itertools.product(*(v for _, v in self.grid))]


@dataclass(frozen=True)
class SweepSpec:
    name: str
    seeds: tuple[int, ...]
    instances: tuple[InstanceSpec, ...]
    methods: tuple[MethodSpec, ...]
    base_dir: str = "."
    source: str = "<spec>"
    objective: str = DEFAULT_OBJECTIVE
    extra: dict[str, Any] = field(default_factory=dict)


# -- loading and checking -------------------------------------------------------------
SWEEP_KEYS = ("name", "seeds", "trials", "objective", "description")
METHOD_KEYS = {
    "policy": ("policy", "label", "objective", "params", "router"),
    "formulation": ("formulation", "label", "objective", "solver", "time_limit", "threads", "gap",
                    "warm_start", "params"),
    "bound": ("bound", "label", "objective", "time_limit"),
    "improve": ("improve", "label", "objective", "router", "time_limit", "max_moves", "params"),
}


def load_spec(path: str | Path) -> SweepSpec:
    """Read and check a TOML sweep spec; :class:`SpecError` names the file and key."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise SpecError(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise SpecError(f"{path}: not a UTF-8 text file") from None
    return parse_spec(text, source=str(path), base_dir=str(p.resolve().parent))


def parse_spec(text: str, *, source: str = "<spec>", base_dir: str = ".") -> SweepSpec:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{source}: not valid TOML: {_toml_problem(text, e)}") from None
    try:
        return _parse(doc, source, base_dir)
    except SpecError as e:
        raise SpecError(f"{source}: {e}") from None


def _toml_problem(text: str, e: tomllib.TOMLDecodeError) -> str:
    """``e`` in words; a key or table given twice (tomllib: "Cannot overwrite a value" /
    "Cannot declare ... twice") is named, read from the line the error points at."""
    msg = str(e)
    m = re.search(r"\(at line (\d+), column \d+\)", msg)
    if m and msg.startswith(("Cannot overwrite", "Cannot declare")):
        lines = text.splitlines()
        k = int(m.group(1)) - 1
        if 0 <= k < len(lines):
            line = lines[k].strip()
            key = line.strip("[] ") if line.startswith("[") else line.split("=", 1)[0].strip()
            return f"duplicate key {key!r} (line {k + 1}); each key may be given once"
    return msg


def _parse(doc: dict, source: str, base_dir: str) -> SweepSpec:
    _known(doc, ("sweep", "instances", "methods"), "")
    sweep = _table(doc, "sweep", "")
    _known(sweep, SWEEP_KEYS, "sweep.")
    name = _str(_required(sweep, "name", "sweep."), "sweep.name")
    objective = _choice(sweep.get("objective", DEFAULT_OBJECTIVE), OBJECTIVES, "sweep.objective")
    seeds = _seeds(sweep)
    insts = _array_of_tables(doc, "instances")
    meths = _array_of_tables(doc, "methods")
    instances = tuple(_instance(d, i, base_dir) for i, d in enumerate(insts))
    methods = tuple(_method(d, i, objective) for i, d in enumerate(meths))
    labels: dict[str, int] = {}
    for i, m in enumerate(methods):
        if m.label in labels:
            raise SpecError(f"methods[{i}].label: {m.label!r} is already the label of "
                            f"methods[{labels[m.label]}]; give one of them another label")
        labels[m.label] = i
    return SweepSpec(name=name, seeds=seeds, instances=instances, methods=methods,
                     base_dir=base_dir, source=source, objective=objective,
                     extra={"description": sweep.get("description")})


def _seeds(sweep: dict) -> tuple[int, ...]:
    if "seeds" in sweep and "trials" in sweep:
        raise SpecError("sweep.trials: give seeds = [...] or trials = N, not both")
    if "trials" in sweep:
        n = _int(sweep["trials"], "sweep.trials", lo=1)
        return tuple(range(n))
    if "seeds" in sweep:
        return _seed_list(sweep["seeds"], "sweep.seeds")
    return (0,)


def _seed_list(v: Any, key: str) -> tuple[int, ...]:
    if not isinstance(v, list) or not v:
        raise SpecError(f"{key}: expected a non-empty list of integers >= 0, got {_show(v)}")
    seeds = tuple(_int(s, f"{key}[{k}]", lo=0) for k, s in enumerate(v))
    if len(set(seeds)) != len(seeds):
        raise SpecError(f"{key}: a seed is listed twice")
    return seeds


def _instance(d: dict, i: int, base_dir: str) -> InstanceSpec:
    where = f"instances[{i}]"
    if sum(k in d for k in ("generator", "file", "trace")) != 1:
        raise SpecError(f"{where}: give exactly one of generator = \"KIND\", file = \"PATH\" "
                        "or trace = \"PATH\"")
    seeds = _seed_list(d["seeds"], f"{where}.seeds") if "seeds" in d else None
    problem = check_cluster_row(set(d), where)
    if problem:
        raise SpecError(problem)
    if "file" in d:
        _known(d, ("file", "seeds", *CLUSTER_KEYS), f"{where}.")
        path = _str(d["file"], f"{where}.file")
        return InstanceSpec(index=i, file=_resolve_file(path, base_dir, f"{where}.file"),
                            grid=_grid(d, ("file", "seeds"), lambda k: (CLUSTER_KEYS[k], None),
                                       where), seeds=seeds)
    if "trace" in d:
        return _trace_row(d, i, base_dir, seeds)

    kind = _str(d["generator"], f"{where}.generator")
    if kind not in GENERATORS:
        raise SpecError(f"{where}.generator: unknown generator {kind!r}; "
                        f"known: {', '.join(sorted(GENERATORS))}")
    g = GENERATORS[kind]
    params = {p.name: p for p in g.params if p.name != "seed"}
    allowed = ["generator", "seeds", *params, *(LIMIT_KEYS if g.takes_limits else ()), *CLUSTER_KEYS]
    _known(d, allowed, f"{where}.")

    def typ(key: str):
        if key in params:
            return params[key].type, params[key].choices
        return CLUSTER_KEYS.get(key, str if key == "cost_model" else int), None

    grid = _grid(d, ("generator", "seeds"), typ, where)
    missing = [p.name for p in g.params if p.name != "seed" and p.name not in d
               and p.default is _required_marker()]
    if missing:
        raise SpecError(f"{where}.{missing[0]}: missing; generator {kind!r} needs it")
    return InstanceSpec(index=i, generator=kind, grid=grid, seeds=seeds)


def _trace_row(d: dict, i: int, base_dir: str, seeds) -> InstanceSpec:
    """A ``trace = "PATH"`` row: the seeded windows of ``consecutive`` requests of a trace file
    (``optsched generate azure --trace PATH --consecutive N --seed S``), ``$VARS`` expanded."""
    where = f"instances[{i}]"
    _known(d, ("trace", "seeds", *TRACE_KEYS, *LIMIT_KEYS, *CLUSTER_KEYS), f"{where}.")
    raw = _str(d["trace"], f"{where}.trace")
    path = os.path.expandvars(raw)
    if "$" in path:
        raise SpecError(f"{where}.trace: {raw!r} names an environment variable that is not set")
    p = Path(path) if Path(path).is_absolute() else Path(base_dir) / path
    if not p.exists():
        raise SpecError(f"{where}.trace: {path!r}: no such trace file")
    if "consecutive" not in d:
        raise SpecError(f"{where}.consecutive: missing; a trace row takes seeded windows of "
                        "that many consecutive requests")
    choices = {"too_long": ("error", "drop", "clip")}

    def typ(key: str):
        if key in CLUSTER_KEYS:
            return CLUSTER_KEYS[key], None
        if key in TRACE_KEYS:
            return TRACE_KEYS[key], choices.get(key)
        return (str if key == "cost_model" else int), None

    return InstanceSpec(index=i, trace=str(p), grid=_grid(d, ("trace", "seeds"), typ, where),
                        seeds=seeds)


def _grid(d: dict, skip, typ, where: str) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """Every key of a row but ``skip`` as a list of typed values (``typ(key)``: type, choices)."""
    grid = []
    for key, value in d.items():
        if key in skip:
            continue
        values = value if isinstance(value, list) else [value]
        if not values:
            raise SpecError(f"{where}.{key}: an empty list gives no instances")
        t, choices = typ(key)
        grid.append((key, tuple(_typed(v, t, choices, f"{where}.{key}") for v in values)))
    return tuple(grid)


def _required_marker():
    return REQUIRED


def _resolve_file(path: str, base_dir: str, key: str) -> str:
    p = Path(path)
    if not p.is_absolute() and (Path(base_dir) / p).exists():
        return str(Path(base_dir) / p)
    if p.exists():
        return str(p)

    shipped = embedded_instance_path(path)
    if shipped is None:
        raise SpecError(f"{key}: {path!r}: no such instance file (relative to the spec's directory) "
                        "nor a shipped instance of that name")
    return str(shipped)


def _method(d: dict, i: int, default_objective: str) -> MethodSpec:
    where = f"methods[{i}]"
    kinds = [k for k in METHOD_KEYS if k in d]
    if len(kinds) != 1:
        raise SpecError(f"{where}: give exactly one of policy = ..., formulation = ..., bound = ... "
                        "or improve = ...")
    kind = kinds[0]
    _known(d, METHOD_KEYS[kind], f"{where}.")
    name = _str(d[kind], f"{where}.{kind}")
    objective = _choice(d.get("objective", default_objective), OBJECTIVES, f"{where}.objective")
    params = _params(d.get("params", {}), f"{where}.params")
    options: dict[str, Any] = {}
    if kind == "policy":
        _check_policy(name, params, where)
        label = name
        if "router" in d:
            options["router"] = _router(d["router"], f"{where}.router")
            label = f"{name}/{options['router']}"
    elif kind == "formulation":
        _check_formulation(name, objective, where)
        options["solver"] = _choice(d.get("solver", "highs"), SOLVERS, f"{where}.solver")
        options["time_limit"] = _number(d.get("time_limit", DEFAULT_TIME_LIMIT), f"{where}.time_limit")
        options["threads"] = _int(d.get("threads", 1), f"{where}.threads", lo=1)
        options["gap"] = _number(d.get("gap", 1e-6), f"{where}.gap", positive=False)
        options["warm_start"] = _str(d.get("warm_start", "auto"), f"{where}.warm_start")
        label = f"{name}/{options['solver']}"
    elif kind == "improve":
        _check_policy(name, params, where)
        options["router"] = _router(d.get("router", "rr"), f"{where}.router")
        options["time_limit"] = _number(d.get("time_limit", DEFAULT_IMPROVE_LIMIT),
                                        f"{where}.time_limit")
        if "max_moves" in d:
            options["max_moves"] = _int(d["max_moves"], f"{where}.max_moves", lo=0)
        label = f"improve:{name}/{options['router']}"
    else:
        options["time_limit"] = _number(d.get("time_limit", DEFAULT_TIME_LIMIT), f"{where}.time_limit")
        try:
            if name != CLUSTER_BOUND:
                check_bound_method(name, objective)
            elif objective not in FLOOR_KEYS:
                raise SpecError(f"bound method 'cluster' has no floor of {objective!r} "
                                f"(it has {', '.join(FLOOR_KEYS)})")
        except OptschedError as e:
            raise SpecError(f"{where}.bound: {e}") from None
        label = f"bound:{name}"
    label = _str(d.get("label", label), f"{where}.label")
    return MethodSpec(kind=kind, name=name, label=label, objective=objective,
                      options=tuple(options.items()), params=tuple(sorted(params.items())))


def _check_policy(name: str, params: dict, where: str) -> None:
    try:
        spec = get_spec(name)
    except PolicyError as e:
        raise SpecError(f"{where}.policy: {e}") from None
    try:
        spec.parse_params(params)
    except PolicyError as e:
        raise SpecError(f"{where}.params: {e}") from None


def _router(v: Any, key: str) -> str:
    from ..cluster import RouterError, get_router

    name = _str(v, key)
    try:
        get_router(name)
    except RouterError as e:
        raise SpecError(f"{key}: {e}") from None
    return name


def _check_formulation(name: str, objective: str, where: str) -> None:
    reg = formulations()
    if name not in reg:
        raise SpecError(f"{where}.formulation: unknown formulation {name!r}; known: {', '.join(sorted(reg))}")
    if objective not in reg[name].objectives:
        raise SpecError(f"{where}.objective: formulation {name!r} does not support {objective!r} "
                        f"(supports {', '.join(reg[name].objectives)})")


# -- small typed readers ----------------------------------------------------------------
def _show(v: Any) -> str:
    if isinstance(v, list):
        return f"a list {json.dumps(v, default=str)[:60]}"
    if isinstance(v, dict):
        return "a table"
    return repr(v)


def _known(d: dict, allowed, prefix: str) -> None:
    for k in d:
        if k not in allowed:
            raise SpecError(f"{prefix}{k}: unknown key; expected one of {', '.join(allowed)}")


def _required(d: dict, key: str, prefix: str) -> Any:
    if key not in d:
        raise SpecError(f"{prefix}{key}: missing")
    return d[key]


def _table(doc: dict, key: str, prefix: str) -> dict:
    v = _required(doc, key, prefix)
    if not isinstance(v, dict):
        raise SpecError(f"{prefix}{key}: expected a table [{key}], got {_show(v)}")
    return v


def _array_of_tables(doc: dict, key: str) -> list[dict]:
    v = _required(doc, key, "")
    if not isinstance(v, list) or not v or not all(isinstance(x, dict) for x in v):
        raise SpecError(f"{key}: expected one or more [[{key}]] tables, got {_show(v)}")
    return v


def _scalar(v: Any, key: str, what: str) -> None:
    if isinstance(v, (list, dict)):
        raise SpecError(f"{key}: expected {what}, got {_show(v)} (only generator parameters in "
                        "[[instances]] may be lists)")


def _str(v: Any, key: str) -> str:
    _scalar(v, key, "a string")
    if not isinstance(v, str) or not v:
        raise SpecError(f"{key}: expected a non-empty string, got {_show(v)}")
    return v


def _choice(v: Any, choices, key: str) -> str:
    v = _str(v, key)
    if v not in choices:
        raise SpecError(f"{key}: {v!r} is not one of {', '.join(choices)}")
    return v


def _int(v: Any, key: str, lo: int | None = None) -> int:
    _scalar(v, key, "an integer")
    if isinstance(v, bool) or not isinstance(v, int):
        raise SpecError(f"{key}: expected an integer, got {_show(v)}")
    if lo is not None and v < lo:
        raise SpecError(f"{key}: expected an integer >= {lo}, got {v}")
    return v


def _number(v: Any, key: str, positive: bool = True) -> float:
    _scalar(v, key, "a number")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise SpecError(f"{key}: expected a finite number, got {_show(v)}")
    if (v <= 0) if positive else (v < 0):
        raise SpecError(f"{key}: expected a number {'>' if positive else '>='} 0, got {v}")
    return float(v)


def _typed(v: Any, typ: type, choices, key: str) -> Any:
    if typ is int:
        v = _int(v, key)
    elif typ is float:
        v = _number(v, key, positive=False)
    else:
        v = _str(v, key)
    if choices and v not in choices:
        raise SpecError(f"{key}: {v!r} is not one of {', '.join(choices)}")
    return v


def _params(v: Any, key: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise SpecError(f"{key}: expected a table of parameters, got {_show(v)}")
    for k, x in v.items():
        _scalar(x, f"{key}.{k}", "a scalar")
    return dict(v)


__all__ = ["SpecError", "SweepSpec", "InstanceSpec", "MethodSpec", "load_spec", "parse_spec"]
