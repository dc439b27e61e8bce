"""``optsched policies``: the registered policies with their sources and parameters."""

from __future__ import annotations

from ..policies import list_policies
from . import EXIT_OK
from ._common import print_json


def register(sub) -> None:
    p = sub.add_parser("policies", help="list the scheduling policies with their sources")
    p.add_argument("--json", action="store_true", help="print the list as JSON")
    p.set_defaults(func=run_policies)



def run_policies(args) -> int:
    specs = list_policies()
    if args.json:
        print_json([
            {
                "name": s.name,
                "description": s.description,
                "source": s.source,
                "hypothetical": s.hypothetical,
                "reuse_aware": s.reuse_aware,
                "compiled": s.compiled,
                "params": {p.name: {"type": p.type.__name__,
                                    "default": dict(s.defaults).get(p.name, p.default),
                                    "help": p.help} for p in s.params},
            }
            for s in specs
        ])
        return EXIT_OK
    for s in specs:
        hyp = " [hypothetical: knows output lengths]" if s.hypothetical else ""
        hyp += " [prefix reuse: hits and drops]" if s.reuse_aware else ""
        print(f"{s.name}{hyp}")
        print(f"    {s.description}")
        print(f"    source: {s.source}")
        if s.compiled:
            print(f"    compiled twin: the {s.compiled} kernel (optsched/policies/fast.py)")
        if s.params:
            d = dict(s.defaults)
            ps = ", ".join(f"{p.name}={d.get(p.name, p.default)}" for p in s.params)
            print(f"    params: {ps}")
    return EXIT_OK
