"""``optsched kv-capacity``: KV capacity (tokens) from model size and GPU memory
(``optsched.workloads.capacity``)."""

from __future__ import annotations

from . import EXIT_OK
from ._common import print_json


def register(sub) -> None:
    p = sub.add_parser("kv-capacity", help="KV capacity (tokens) from model size and GPU memory")
    p.add_argument("--params", type=float, required=True, help="parameters, e.g. 70e9")
    p.add_argument("--layers", type=int, required=True)
    p.add_argument("--hidden", type=int, required=True)
    p.add_argument("--dtype-bytes", type=float, default=2)
    p.add_argument("--gpu-mem-gb", type=float, required=True)
    p.add_argument("--gpus", type=int, default=1)
    p.add_argument("--n-heads", type=int, help="attention heads (for GQA with --kv-heads)")
    p.add_argument("--kv-heads", type=int, help="KV heads (GQA)")
    p.add_argument("--head-dim", type=int, help="head dimension (default hidden / n-heads)")
    p.add_argument("--gib", action="store_true", help="GPU memory in GiB (2^30) instead of GB")
    p.add_argument("--reserved-gb", type=float, default=0.0, help="memory reserved for other use")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run_kv_capacity)


def run_kv_capacity(args) -> int:
    # lazy: each subcommand imports what it runs (start-up time)
    from ..workloads.capacity import GB, GIB, kv_capacity

    c = kv_capacity(args.params, args.layers, args.hidden, args.dtype_bytes, args.gpu_mem_gb,
                    args.gpus, n_heads=args.n_heads, kv_heads=args.kv_heads,
                    head_dim=args.head_dim, gb_bytes=GIB if args.gib else GB,
                    reserved_gb=args.reserved_gb)
    if args.json:
        print_json(c.to_dict())
    else:
        print(f"{c.tokens} tokens  ({c.free_bytes / 1e9:.4g} GB free after "
              f"{c.weight_bytes / 1e9:.4g} GB of weights; {c.bytes_per_token} bytes per token)")
    return EXIT_OK
