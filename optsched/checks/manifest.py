"""Known optima of the shipped instances, and how they were established.

``instances/manifest.json`` (repo root) lists every shipped instance (``instances/*.json``
and the package's ``optsched/data/*.json``) with, per objective, the optimum and the
methods that agree on it. Methods are independent routes to the same number:

* ``exhaustive`` -- A* over schedule states (:mod:`optsched.formulations.exhaustive`), no MILP;
* ``infermax/<solver>`` -- the InferMax Big-M MILP (``formulations/infermax.md``);
* ``hindsight/<solver>`` -- the online paper's IP (unit cost only). Its model forbids
  preemption and chunking (``formulations/hindsight.md``), so its optimum is the optimum of
  a *restricted* problem: it equals the others exactly when some optimal schedule needs
  neither, and is larger otherwise. It is recorded under ``restricted`` and never counted
  as disagreement.

Regenerate with ``python -m optsched.checks.manifest --update`` (slow); the test suite re-proves
the entries whose proof took under a few seconds (``tests/checks/test_manifest.py``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from ..cost import UnitCost
from ..data import embedded_instance_names, embedded_instance_path
from ..errors import OptschedError
from ..formulations import SolveOptions
from ..instance import Instance
from ..objectives import MODELLED
from ..solve_types import Status
from ..solving import solve

REPO = Path(__file__).resolve().parents[2]
INSTANCES = REPO / "instances"
MANIFEST = INSTANCES / "manifest.json"
REL = 1e-6


def shipped_instance_files() -> list[Path]:
    files = sorted(p for p in INSTANCES.glob("*.json")
                   if p.name != "manifest.json" and not p.name.endswith(".schedules.json"))
    shipped = (embedded_instance_path(n) for n in embedded_instance_names())
    files += [p for p in shipped if p is not None]
    return files


def methods_for(inst: Instance) -> list[tuple[str, str, str, dict]]:
    """(label, formulation, solver, params) of every method that applies to ``inst``."""
    out = [("exhaustive", "exhaustive", "highs", {"max_states": 300_000}),
           ("infermax/highs", "infermax", "highs", {})]
    if isinstance(inst.cost_model, UnitCost):
        out.append(("hindsight/highs", "hindsight", "highs", {}))
    return out


def run_method(inst: Instance, objective: str, formulation: str, solver: str, params: dict,
               time_limit: float) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        rep = solve(inst, formulation, objective,
                    options=SolveOptions(solver=solver, time_limit=time_limit, progress=False,
                                         params=dict(params)))
    except OptschedError as exc:  # the method does not apply to this instance
        return {"status": "not_applicable", "objective": None, "bound": None,
                "seconds": round(time.perf_counter() - t0, 3), "evictions": None, "notes": [],
                "message": str(exc)}
    return {
        "status": rep.status,
        "objective": rep.objective if rep.status == Status.OPTIMAL else None,
        "bound": rep.bound,
        "seconds": round(time.perf_counter() - t0, 3),
        "evictions": rep.evaluation.metrics["evictions"] if rep.evaluation is not None else None,
        "notes": [n for n in rep.notes if "restriction" in n],
        "message": rep.message,
    }


def establish(inst: Instance, objective: str, time_limit: float = 60.0) -> dict[str, Any]:
    """Run every applicable method; the optimum is the value the unrestricted exact methods
    agree on (None if none proved it, an error if two disagree)."""
    results = {}
    for label, form, solver, params in methods_for(inst):
        results[label] = run_method(inst, objective, form, solver, params, time_limit)
    full = {k: v for k, v in results.items() if not k.startswith("hindsight")}
    proven = {k: v["objective"] for k, v in full.items() if v["status"] == Status.OPTIMAL}
    values = list(proven.values())
    agree = all(abs(v - values[0]) <= REL * max(1.0, abs(values[0])) for v in values)
    entry: dict[str, Any] = {
        "optimum": values[0] if values and agree else None,
        "established_by": sorted(proven) if agree else [],
        "disagreement": None if agree else proven,
        "methods": results,
    }
    hs = results.get("hindsight/highs")
    if hs is not None and hs["status"] == Status.OPTIMAL and entry["optimum"] is not None:
        entry["restricted"] = {
            "hindsight (no preemption, no chunking)": hs["objective"],
            "equal": abs(hs["objective"] - entry["optimum"]) <= REL * max(1.0, abs(entry["optimum"])),
        }
    return entry


def build(time_limit: float = 60.0, only: list[str] | None = None, log=sys.stderr) -> dict[str, Any]:
    manifest: dict[str, Any] = {"generated": time.strftime("%Y-%m-%d"), "instances": {}}
    if MANIFEST.exists():
        manifest["instances"] = json.loads(MANIFEST.read_text()).get("instances", {})
    for path in shipped_instance_files():
        key = _key(path)
        if only and key not in only:
            continue
        inst = Instance.load(path)
        per_obj = {}
        for obj in MODELLED:
            print(f"{key}: {obj} ...", file=log, flush=True)
            per_obj[obj] = establish(inst, obj, time_limit)
            e = per_obj[obj]
            print(f"  optimum {e['optimum']} by {e['established_by']}", file=log, flush=True)
        manifest["instances"][key] = {"file": key, "requests": inst.n,
                                      "cost_model": inst.cost_model.to_dict().get("preset")
                                      or inst.cost_model.to_dict()["kind"],
                                      "objectives": per_obj}
    return manifest


def _key(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return path.name


def load_manifest() -> dict[str, Any]:
    return json.loads(MANIFEST.read_text())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="(Re)build instances/manifest.json")
    ap.add_argument("--update", action="store_true", help="run every method and write the manifest")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--only", nargs="*", help="instance keys to (re)do, e.g. instances/fam-I1.json")
    args = ap.parse_args(argv)
    if not args.update:
        m = load_manifest()
        for key, e in m["instances"].items():
            vals = {o: v["optimum"] for o, v in e["objectives"].items()}
            print(key, vals)
        return 0
    m = build(args.time_limit, args.only)
    MANIFEST.write_text(json.dumps(m, indent=1, default=_json_default) + "\n")
    print(f"wrote {MANIFEST}")
    return 0


def _json_default(o):
    if isinstance(o, float) and not math.isfinite(o):
        return None
    raise TypeError(type(o).__name__)


if __name__ == "__main__":
    sys.exit(main())
