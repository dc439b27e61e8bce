"""Cells: the spec expanded into independent tasks, each with a content key.

A cell is one (instance, seed, method). Its key is the SHA-256 of the instance's content
(:func:`instance_hash`: the instance JSON without its name), the method with all its
parameters (:meth:`MethodSpec.to_dict`) and the optsched version: rerunning a sweep skips
every cell whose key already has a result, and a changed instance, parameter or release of
optsched is a new cell. :func:`run_cell` runs one cell and never raises: an exception is
recorded in the row (status ``failed``), so one bad cell does not stop a sweep.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
import traceback
import warnings
from dataclasses import dataclass
from typing import Any

from .. import __version__
from ..cost import UnitCost, preset
from ..errors import InstanceError, OptschedError
from ..instance import Instance, Limits
from ..workloads.generators import DEFAULT_KV_CAPACITY, DEFAULT_MAX_BATCH_TOKENS, GENERATORS
from .clusters import LoadCache, clustered, split
from .methods import DEFAULT_ROUTER, run_method
from .spec import InstanceSpec, MethodSpec, SpecError, SweepSpec

FAILED = "failed"


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def instance_hash(inst: Instance) -> str:
    """SHA-256 of the instance content (limits, cost model, requests; not its name)."""
    d = inst.to_dict()
    d.pop("name", None)
    return hashlib.sha256(_canonical(d).encode()).hexdigest()


def optsched_version() -> str:
    return __version__


def cell_key(inst_hash: str, method: MethodSpec, version: str) -> str:
    payload = {"instance": inst_hash, "method": method.to_dict(), "optsched": version}
    return hashlib.sha256(_canonical(payload).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Cell:
    """One independent task: everything a worker needs, nothing it must look up."""

    key: str
    sweep: str
    instance: Instance
    instance_hash: str
    seed: int | None
    generator: str | None
    generator_params: dict[str, Any]
    method: MethodSpec
    version: str

    def describe(self) -> dict[str, Any]:
        """The row's identifying columns (results.SCHEMA)."""
        router = self.method.option.get("router")
        if router is None and self.method.kind == "policy" and self.instance.cluster is not None:
            router = DEFAULT_ROUTER
        return {"key": self.key, "sweep": self.sweep, "instance": self.instance.name,
                "router": router, "n_engines": self.instance.n_engines,
                "load": self.generator_params.get("load"),
                "instance_hash": self.instance_hash, "n_requests": self.instance.n,
                "seed": self.seed, "generator": self.generator,
                "generator_params": _canonical(self.generator_params),
                "method": self.method.label, "method_kind": self.method.kind,
                "method_name": self.method.name,
                "method_params": _canonical({"params": dict(self.method.params),
                                             **self.method.option}),
                "objective_kind": self.method.objective, "optsched_version": self.version}


# -- expansion --------------------------------------------------------------------------
def expand(spec: SweepSpec) -> list[Cell]:
    """instances x seeds x methods, in spec order; identical cells (same key) appear once."""
    version = optsched_version()
    cells: list[Cell] = []
    seen: set[str] = set()
    for ispec in spec.instances:
        for inst, seed, gen_params in _instances(ispec, spec.seeds):
            h = instance_hash(inst)
            for m in spec.methods:
                key = cell_key(h, m, version)
                if key in seen:
                    continue
                seen.add(key)
                cells.append(Cell(key, spec.name, inst, h, seed, ispec.generator, gen_params, m, version))
    return cells


def _instances(ispec: InstanceSpec, default_seeds: tuple[int, ...]):
    """(instance, seed, parameters) of every grid point and seed of a row: the base instance
    (generated, a trace window or the file) made once per point of its own parameters and
    seed, then served on each point's cluster (:func:`optsched.sweep.clusters.clustered`)."""
    where = f"instances[{ispec.index}]"
    seeded = ispec.trace is not None or (ispec.generator is not None and any(
        p.name == "seed" for p in GENERATORS[ispec.generator].params))
    seeds = ispec.seeds or default_seeds
    bases: dict[str, Instance] = {}
    loads = LoadCache()
    for point in ispec.points():
        own, cluster = split(point)
        for seed in (seeds if seeded else (None,)):
            try:
                key = _canonical([own, seed])
                if key not in bases:
                    bases[key] = _base(ispec, own, seed)
                inst = clustered(bases[key], cluster, loads)
            except SpecError:
                raise
            except (OptschedError, ValueError) as e:
                raise SpecError(f"{where} ({_canonical(point)}, seed {seed}): {e}") from None
            params = dict(point) if seed is None else {**point, "seed": seed}
            if ispec.file is not None:
                params["file"] = ispec.file
            yield inst, seed, params


def _base(ispec: InstanceSpec, own: dict[str, Any], seed: int | None) -> Instance:
    where = f"instances[{ispec.index}]"
    if ispec.file is not None:
        try:
            return Instance.load(ispec.file)
        except OptschedError as e:
            raise SpecError(f"{where}.file: {e}") from None
    if ispec.trace is not None:
        return _window(ispec.trace, own, seed or 0)
    if ispec.generator is None:  # the spec parser requires exactly one of file/generator/trace
        raise SpecError(f"{where}: give exactly one of generator, file or trace")
    return _generate(GENERATORS[ispec.generator], own, seed)


def _window(path: str, point: dict[str, Any], seed: int) -> Instance:
    """The seeded window of a trace row (``optsched generate azure --consecutive N --seed S``)."""
    from ..workloads.traces import window_instance

    limits, cost = _limits(point)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # too_long = "drop" says how many it dropped
        return window_instance(path, point["consecutive"], seed, limits, cost,
                               format=point.get("format", "auto"),
                               too_long=point.get("too_long", "error"))


def _limits(point: dict[str, Any]):
    limits = Limits(kv_capacity=point.get("kv_capacity", DEFAULT_KV_CAPACITY),
                    max_batch_tokens=point.get("max_batch_tokens", DEFAULT_MAX_BATCH_TOKENS),
                    max_prefill_tokens=point.get("max_prefill_tokens"))
    cost = None
    if "cost_model" in point:
        cost = UnitCost() if point["cost_model"] == "unit" else preset(point["cost_model"])
    return limits, cost


def _generate(g, point: dict[str, Any], seed: int | None) -> Instance:
    params = {k: v for k, v in point.items()
              if k not in ("kv_capacity", "max_batch_tokens", "max_prefill_tokens", "cost_model")}
    if seed is not None:
        params["seed"] = seed
    limits = cost = None
    if g.takes_limits:
        limits, cost = _limits(point)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a generator that drops requests says so: refuse it
        try:
            return g.call(limits=limits, cost_model=cost, **params)
        except Warning as w:
            raise InstanceError(str(w)) from None


# -- running ----------------------------------------------------------------------------
def run_cell(cell: Cell) -> dict[str, Any]:
    """Run one cell and return its result row; exceptions become a ``failed`` row."""

    started = time.time()
    t0 = time.perf_counter()
    row = cell.describe()
    try:
        row.update(run_method(cell.instance, cell.method))
    except Exception as e:  # recorded, not raised: one failed cell must not stop the sweep
        row.update(status=FAILED, error=error_text(e))
    row.update(runtime=time.perf_counter() - t0, host=socket.gethostname(), pid=os.getpid(),
               started_at=started, finished_at=time.time())
    return row


def error_text(e: BaseException) -> str:
    """One line for an expected error; the last frame too for an unexpected one (a bug)."""
    if isinstance(e, OptschedError):
        return f"{type(e).__name__}: {e}"
    tb = traceback.extract_tb(e.__traceback__)
    where = f" at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else ""
    return f"{type(e).__name__}: {e}{where}"


def failed_row(cell: Cell, message: str) -> dict[str, Any]:
    """The row of a cell whose worker died (no result came back)."""
    now = time.time()
    return {**cell.describe(), "status": FAILED, "error": message, "host": socket.gethostname(),
            "started_at": now, "finished_at": now}


__all__ = ["Cell", "expand", "run_cell", "instance_hash", "cell_key", "failed_row", "FAILED"]
