"""Time the Gantt chart (``optsched.plot.gantt``) on large schedules.

    .venv/bin/python -m benchmarks.plot [--sizes 400,2000,4000]

Each schedule has n requests (I = 10, O = 50) in waves of 200: every wave is prefilled in one
batch and then decoded, so it has n * 50 entries. The chart is drawn with every row
(``max_rows=None``) and no merging of touching spans, the worst case, and saved as a PNG.
Prints the entries, the evaluate and draw + save times. The plot tests draw the same
schedules (:func:`optsched.testing.wave_schedule`) to check the chart, without timing it.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from optsched import plot
from optsched.evaluation import evaluate
from optsched.testing import wave_schedule


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="400,2000,4000")
    args = ap.parse_args(argv)
    print(f"{'requests':>8} {'entries':>9} {'evaluate s':>10} {'gantt s':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(v) for v in args.sizes.split(",")):
            inst, s = wave_schedule(n)
            t0 = time.perf_counter()
            ev = evaluate(inst, s)
            t1 = time.perf_counter()
            plot.gantt(inst, s, ev, max_rows=None, merge_above=10**9, save=Path(tmp) / "g.png")
            t2 = time.perf_counter()
            print(f"{n:>8} {s.n_entries:>9} {t1 - t0:>10.2f} {t2 - t1:>8.2f}", flush=True)


if __name__ == "__main__":
    main()
