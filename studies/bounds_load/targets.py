"""The certified gaps at stated loads, before and after the rungs that charge decode stretch
(``stretch`` B15, ``tail`` B16), read from the serving study's records (feeds
docs/results/bounds.md, "Against the targets, three seeds").

Input: ``studies/serving/results/loads.jsonl`` (``python -m studies.serving.loads``, with
``--loads 0.3,1.3`` for the extra loads): 1,000-request windows of both Azure traces from the
rows drawn by seeds 1-3 (``M = 30,000``, ``C = 8,192``, Llama-2-7B/A100 preset), stretched to
each offered load; every record holds the ladder of ``lower_bound(inst, objective, "best")``
within 30 s of wall time (its value per rung) and the best known schedule (the best policy
improved by ``improve`` for 10 s). Here, per window:

* gap = (best known - bound) / best known;
* "before" is the largest of the rungs that existed before the stretch work (``request``,
  ``work``, ``srpt``, ``mbt``, ``combinatorial``, ``spread``, ``coupled``, ``dual``); "after" the
  ladder's bound (which adds ``stretch``);
* mean TTFT: the ladder's bound against the best known first-token schedule.

    .venv/bin/python -m studies.bounds_load.targets [--records PATH] > studies/bounds_load/targets.txt
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RECORDS = HERE.parent / "serving" / "results" / "loads.jsonl"
#: the total-latency rungs before the stretch work (formulations/bounds.md B3-B13)
OLD = ("request", "work", "srpt", "mbt", "combinatorial", "spread", "coupled", "dual")
ORDER = {"0.3": 0, "0.5": 1, "0.7": 2, "0.9": 3, "1.3": 4, "own": 5}


def regime(r: dict[str, Any]) -> str:
    """``load 0.5`` (stable), ``load 1.3 (overload)``, or the own arrivals labelled by their load."""
    s = r["setting"]
    if s == "own":
        return "own (overload)" if r["load_point"] > 1 else "own (stable, bursty)"
    return f"load {s}" + (" (overload)" if float(s) > 1 else "")


def gaps(r: dict[str, Any]) -> dict[str, float]:
    """Per window: the total-latency gap before and after, and the mean-TTFT gap."""
    tl = r["bounds"]["total-latency"]
    best = r["best"]["total-latency"]["value"]
    before = max(v for k, v in tl["ladder"].items() if k in OLD)
    after = max(tl["bound"], before)
    mt = r["bounds"]["mean-ttft"]["bound"]
    best_mt = r["best"]["mean-ttft"]["value"]
    return {"best": best, "before": before, "after": after, "rung": tl["rung"],
            "gap_before": (best - before) / best, "gap_after": (best - after) / best,
            "ttft_gap": (best_mt - mt) / best_mt, "cpu": tl["cpu_s"], "wall": tl["wall_s"]}


def span(xs: list[float]) -> str:
    lo, hi = min(xs), max(xs)
    return f"{100 * lo:.1f}%" if abs(hi - lo) < 5e-4 else f"{100 * lo:.1f}-{100 * hi:.1f}%"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", default=str(RECORDS))
    a = ap.parse_args()
    recs = [json.loads(x) for x in Path(a.records).read_text().splitlines() if x.strip()]
    recs = [r for r in recs if r["window"] == 1000]
    recs.sort(key=lambda r: (r["trace"], ORDER.get(r["setting"], 9), r["seed"]))
    print("| window | load (certified - point) | best known TL | bound before (old rungs) | "
          "after (rung) | gap before | gap after | mean-TTFT gap | bound CPU s (wall) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    groups: dict[tuple[str, str], list[dict[str, float]]] = defaultdict(list)
    for r in recs:
        g = gaps(r)
        groups[(r["trace"], regime(r))].append(g)
        print(f"| {r['trace']} s{r['seed']} {regime(r)} | {r['load_lower']:.2f} - "
              f"{r['load_point']:.2f} | {g['best']:,.0f} | {g['before']:,.0f} | "
              f"{g['after']:,.0f} ({g['rung']}) | {100 * g['gap_before']:.1f}% | "
              f"{100 * g['gap_after']:.1f}% | {100 * g['ttft_gap']:.1f}% | "
              f"{g['cpu']:.0f} ({g['wall']:.0f}) |")
    print()
    print("| trace | regime | windows | total-latency gap before | after | mean-TTFT gap |")
    print("|---|---|---:|---:|---:|---:|")
    for (trace, reg), gs in sorted(groups.items(), key=lambda kv: (
            kv[0][0], ORDER.get(kv[0][1].split()[1] if kv[0][1].startswith("load") else "own", 9))):
        print(f"| {trace} | {reg} | {len(gs)} | {span([g['gap_before'] for g in gs])} | "
              f"{span([g['gap_after'] for g in gs])} | {span([g['ttft_gap'] for g in gs])} |")


if __name__ == "__main__":
    main()
