"""The tables of docs/results/prefix.md's questions section, from ``questions.jsonl`` (and the
certified reuse bounds of the same windows in ``results.jsonl``):
``python -m studies.prefix.questions --summary``."""

from __future__ import annotations

import json
from pathlib import Path

SHOWN = ("vllm", "vllm-apc", "lpm", "dfs", "k-lpm", "belady")
ORDERS = ("svf", "rank-i", "ttft-first")
OBJS = ("mean-ttft", "total-latency")


def _rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _fmt(o: str):
    if o == "goodput":
        return lambda x: f"{x:.1%}"
    return (lambda x: f"{x:,.0f}") if o == "total-latency" else (lambda x: f"{x:.2f}")


def _best_improve(r: dict, o: str) -> tuple[float, str]:
    """The improve schedule for ``o`` (for goodput: the better of the two improve schedules)."""
    if o == "goodput":
        k = max(r["improve"], key=lambda q: r["improve"][q]["goodput"])
        return r["improve"][k]["goodput"], f"improve ({k})"
    g = r["improve"][o]
    return g[o], f"{g['start']} -> {g['method']}"


def main_tables(rows: list[dict], bounds: dict) -> list[str]:
    out = []
    for o in (*OBJS, "goodput"):
        fmt = _fmt(o)
        unit = "share of requests meeting the SLO" if o == "goodput" else "s"
        gap_is = ("(ceiling - best) / ceiling; ceiling = the certified goodput ceiling with "
                  "reuse (B12r)" if o == "goodput" else "best / reuse bound - 1")
        out.append(f"\n{o} ({unit}); best = the best of every schedule in the row (and "
                   f"`svf`, `rank-i`, `ttft-first`); gap = {gap_is}\n")
        out.append("| trace | seed | hit share | " + " | ".join(SHOWN) + " | improve (start -> "
                   "method) | best | " + ("ceiling" if o == "goodput" else "reuse bound (rung)")
                   + " | gap |")
        out.append("|" + "---|" * (len(SHOWN) + 7))
        for r in rows:
            pol = {p: v[o] for p, v in r["policies"].items()}
            iv, im = _best_improve(r, o)
            cands = {**pol, "improve": iv}
            pick = max if o == "goodput" else min
            best = pick(cands, key=lambda p: cands[p])
            if o == "goodput":  # a ceiling: the gap is the share it leaves above the best
                b = r.get("goodput_bound")
                bcell = f"{fmt(b['value'])} ({b['method']})" if b else "not computed"
                gap = f"{1 - cands[best] / b['value']:.0%}" if b and b["value"] else "-"
            else:
                b = bounds.get((r["trace"], r["seed"], r["load"]), {}).get(o)
                bcell = f"{fmt(b['value'])} ({b['method']})" if b else "none valid with reuse"
                gap = f"{cands[best] / b['value'] - 1:.0%}" if b else "-"
            out.append(f"| {r['trace']} | {r['seed']} | {r['potential']['hit_share']:.1%} | "
                       + " | ".join(fmt(pol[p]) for p in SHOWN)
                       + f" | {fmt(iv)} ({im}) | {best} {fmt(cands[best])} | {bcell} | {gap} |")
    return out


def order_cache_table(rows: list[dict]) -> list[str]:
    out = ["\norder or cache, per objective: the change from `vllm-apc` (FCFS, LRU) to `belady` "
           "(FCFS, offline cache), to the best reuse-blind order (`svf`, `rank-i`, `ttft-first`, "
           "no hits), and to the best improve schedule (no hits); negative = better\n",
           "| trace | seed | objective | vllm-apc | cache: belady | order: best reuse-blind "
           "order | improve |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        for o in OBJS:
            fmt, p = _fmt(o), r["policies"]
            a = p["vllm-apc"][o]
            bo = min(ORDERS, key=lambda q: p[q][o])
            iv = r["improve"][o][o]
            out.append(f"| {r['trace']} | {r['seed']} | {o} | {fmt(a)} | "
                       f"{p['belady'][o] / a - 1:+.1%} | {p[bo][o] / a - 1:+.1%} ({bo}) | "
                       f"{iv / a - 1:+.1%} |")
    return out


def capacity_table(rows: list[dict]) -> list[str]:
    ks = sorted({int(k.split(":")[0]) for r in rows for k in r["capacity"]},
                key=lambda k: (k == 0, k))
    names = ("vllm-apc", "lpm", "belady")
    head = " | ".join(f"{'unbounded' if k == 0 else f'{k}x M'}" for k in ks)
    out = ["\nhit rate against KV capacity: `vllm-apc` / `lpm` / `belady` at multiples of the "
           "window's M (unbounded: every token of the window at once; -: not run, `belady` has "
           "no compiled path), beside the "
           "unbounded-cache potential (hit share)\n",
           f"| trace | seed | M | hit share | {head} |", "|" + "---|" * (4 + len(ks))]
    for r in rows:
        cap = r["capacity"]
        cells = [" / ".join(f"{cap[f'{k}:{p}']['hit_rate']:.1%}" if f"{k}:{p}" in cap else "-"
                            for p in names) for k in ks]
        out.append(f"| {r['trace']} | {r['seed']} | {r['M']:,} | "
                   f"{r['potential']['hit_share']:.1%} | " + " | ".join(cells) + " |")
    return out


def claims_table(rows: list[dict]) -> list[str]:
    labels = list(rows[0]["claims"]) if rows else []
    out = [f"\nthe published claims: SGLang's engine under each order, arrivals of the load-0.7 "
           f"window compressed {1 / rows[0]['squeeze']:g}x (a longer queue), M a multiple of the "
           "window's (0: unbounded); hit rate / mean TTFT (s) / P99 TTFT (s) / goodput\n"
           if rows else "",
           "| trace | seed | M | " + " | ".join(labels) + " |", "|" + "---|" * (3 + len(labels))]
    for r in rows:
        c = r["claims"]
        m = r.get("claims_m", 0)
        out.append(f"| {r['trace']} | {r['seed']} | {f'{m}x' if m else 'unbounded'} | "
                   + " | ".join(
            f"{c[q]['hit_rate']:.1%} / {c[q]['mean-ttft']:.1f} / {c[q]['p99-ttft']:.1f} / "
            f"{c[q]['goodput']:.0%}" for q in labels) + " |")
    return out


def summary(path: Path, results: Path) -> str:
    rows = _rows(path)
    bounds = {(r["trace"], r["seed"], r["load"]): r["reuse_bound"] for r in _rows(results)}
    out = main_tables(rows, bounds) + order_cache_table(rows) + capacity_table(rows) \
        + claims_table(rows)
    cpu = sum(sum(r["cpu"].values()) + r["gen_cpu"] for r in rows)
    lim = sorted({r["improve_limit"] for r in rows})
    out.append(f"\n{len(rows)} windows, improve {lim} s per objective and window, "
               f"{cpu:,.0f} CPU seconds in all (load average "
               f"{min(r['loadavg'] for r in rows):.1f}-{max(r['loadavg'] for r in rows):.1f})")
    return "\n".join(out)
