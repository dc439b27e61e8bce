"""instances/manifest.json: every shipped instance is listed, the exact methods agree, and
the cheap optima are proven again here (by the method that was fastest)."""

from __future__ import annotations

import pytest

from optsched.checks.manifest import (
    MANIFEST,
    REL,
    _key,
    load_manifest,
    methods_for,
    run_method,
    shipped_instance_files,
)
from optsched.instance import Instance

CHEAP_SECONDS = 3.0


def _entries():
    if not MANIFEST.exists():
        return []
    out = []
    for key, e in load_manifest()["instances"].items():
        for obj, rec in e["objectives"].items():
            if rec["optimum"] is None:
                continue
            best = min((m for m in rec["established_by"]), default=None,
                       key=lambda m: rec["methods"][m]["seconds"])
            if best is not None and rec["methods"][best]["seconds"] <= CHEAP_SECONDS:
                out.append(pytest.param(key, obj, best, rec["optimum"], id=f"{key}-{obj}-{best}"))
    return out


def test_manifest_lists_every_shipped_instance_and_methods_agree():
    m = load_manifest()
    keys = {_key(p) for p in shipped_instance_files()}
    assert keys <= set(m["instances"]), keys - set(m["instances"])
    for key, e in m["instances"].items():
        for obj, rec in e["objectives"].items():
            assert rec["disagreement"] is None, (key, obj, rec["disagreement"])
            restricted = rec.get("restricted")
            if restricted is not None and rec["optimum"] is not None:
                # the hindsight model forbids preemption and chunking: never below the optimum
                value = restricted["hindsight (no preemption, no chunking)"]
                assert value >= rec["optimum"] * (1 - REL) - 1e-9, (key, obj)


@pytest.mark.parametrize("key, objective, method, optimum", _entries())
def test_cheap_optima_are_proven_again(key, objective, method, optimum):
    from optsched.checks.manifest import REPO

    path = REPO / key if (REPO / key).exists() else None
    if path is None:
        from optsched.data import embedded_instance_path

        path = embedded_instance_path(key.split("/")[-1])
    inst = Instance.load(path)
    label, form, solver, params = next(m for m in methods_for(inst) if m[0] == method)
    res = run_method(inst, objective, form, solver, params, time_limit=60)
    assert res["status"] == "optimal", res
    assert res["objective"] == pytest.approx(optimum, rel=1e-7)
