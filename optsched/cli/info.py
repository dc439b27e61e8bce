"""``optsched info INSTANCE``: descriptive statistics of an instance."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import numpy as np

from ..instance import Instance
from . import EXIT_OK
from ._common import cost_name, fmt, load_instance, print_json, table

if TYPE_CHECKING:
    from ..serving.load import OfferedLoad


def register(sub) -> None:
    p = sub.add_parser("info", help="descriptive statistics of an instance")
    p.add_argument("instance", help="instance JSON file (or a shipped instance name)")
    p.add_argument("--json", action="store_true", help="print as JSON")
    p.set_defaults(func=run_info)


def instance_info(inst: Instance, load: OfferedLoad | None = None) -> dict:
    """Descriptive statistics of an instance (what ``optsched info`` prints), with its offered
    load (docs/semantics.md section 4; computed unless given)."""
    def stats(a: np.ndarray) -> dict:
        if a.size == 0:
            return {"min": None, "mean": None, "max": None, "total": 0}
        return {"min": a.min().item(), "mean": float(a.mean()), "max": a.max().item(),
                "total": a.sum().item()}

    arr = inst.arrival
    peak = inst.prompt + inst.output - 1
    span = float(arr.max() - arr.min()) if arr.size else 0.0
    return {
        "name": inst.name,
        "requests": inst.n,
        "limits": inst.limits.to_dict(),
        "cost_model": inst.cost_model.to_dict(),
        "mode": "offline" if arr.size == 0 or np.all(arr == arr[0]) else "online",
        "prompt": stats(inst.prompt),
        "output": stats(inst.output),
        "peak_kv": stats(peak),
        "arrival": {**stats(arr), "span": span,
                    "rate": (inst.n - 1) / span if span > 0 else None},
        "total_tokens": int(inst.prompt.sum() + inst.output.sum()),
        "offered_load": (load if load is not None else _load(inst)).to_dict(),
        **({"prefix_reuse": _reuse_info(inst)} if inst.has_prefix else {}),
    }


def _reuse_info(inst: Instance) -> dict:
    """The reuse potential (docs/semantics.md section 6, "Prefix reuse"): distinct and listed
    blocks, and the hit tokens of an unbounded cache serving in arrival order."""
    # lazy: each subcommand imports what it runs (start-up time)
    from ..prefix import reuse_potential

    ix = inst.prefix_index
    assert ix is not None
    pot = reuse_potential(ix, inst.arrival, inst.prompt)
    listers = np.bincount(ix.block, minlength=ix.n_blocks)  # a request lists a block once
    return {**pot, "block_size": ix.block_size,
            "distinct_kv_tokens": ix.n_blocks * ix.block_size,
            "shared_blocks": int((listers >= 2).sum()),
            "requests_with_ids": int((ix.listed > 0).sum())}


def _load(inst: Instance) -> OfferedLoad:
    # lazy: the load runs reference policies (start-up time)
    from ..serving.load import offered_load

    return offered_load(inst)


def run_info(args) -> int:
    inst = load_instance(args.instance)
    load = _load(inst)
    d = instance_info(inst, load)
    warning = load.warning()
    if warning:
        print(f"optsched info: warning: {warning}", file=sys.stderr)
    if args.json:
        print_json(d)
        return EXIT_OK
    lim = inst.limits
    print(f"{d['name']}: {d['requests']} requests, {d['mode']}")
    print(f"limits: M={lim.kv_capacity} C={lim.max_batch_tokens} P={fmt(lim.max_prefill_tokens)} "
          f"max_batch_size={fmt(lim.max_batch_size)} block_size={lim.block_size}")
    print(f"cost model: {cost_name(inst)}")
    rows = [(k, d[k]["min"], d[k]["mean"], d[k]["max"], d[k]["total"])
            for k in ("prompt", "output", "peak_kv")]
    a = d["arrival"]
    rows.append(("arrival", a["min"], a["mean"], a["max"], None))
    print(table(["", "min", "mean", "max", "total"], rows))
    rate = a["rate"]
    print(f"total tokens (prompt + output): {d['total_tokens']}; arrival span {fmt(a['span'])}"
          + (f", mean rate {fmt(rate)} per time unit" if rate else ""))
    print(load.describe() + " (docs/semantics.md section 4)")
    if "prefix_reuse" in d:
        r = d["prefix_reuse"]
        print(f"prefix reuse: {r['requests_with_ids']} requests list {r['listed_blocks']} block "
              f"ids, {r['distinct_blocks']} distinct ({r['distinct_kv_tokens']} KV tokens, "
              f"b = {r['block_size']}), {r['shared_blocks']} of them listed by two or more "
              f"requests; shared fraction: an unbounded cache in arrival order hits "
              f"{r['hit_tokens']} of {r['prompt_tokens']} prompt tokens "
              f"({100 * r['hit_share']:.1f}%; docs/semantics.md section 6)")
    return EXIT_OK


__all__ = ["instance_info", "register"]
