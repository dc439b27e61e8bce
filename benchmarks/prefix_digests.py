"""Digests and objective values of the compiled reuse-aware policies' schedules, one line per
(instance, policy): run it on two checkouts and ``diff`` the outputs to show that a speed
change kept every schedule (the check behind ``docs/results/prefix.md``, "Speed of the reuse
walk")::

    python -m benchmarks.prefix_digests optsched/data/shared-prefix.json W1.json ... > new.txt

The digest is a sha1 of every schedule column (batches, entries, tokens, hits, evictions,
drops, starts); the values are the evaluator's total latency, mean TTFT, makespan and hit
tokens, printed with ``repr`` (every bit). Above 5,000 requests only the ``vllm-apc`` cases
run (the others take minutes there)."""

from __future__ import annotations

import json
import sys
import warnings

from benchmarks.prefix_speed import digest

#: the kernel's configurations (as in tests/policies/test_fast_cached.py)
CASES = [("vllm-apc", {}), ("sarathi-apc", {}), ("lpm", {}), ("lpm", {"fcfs_above": 0}),
         ("vllm-apc", {"max_num_seqs": 3, "watermark": 0.2})]


def main(argv: list[str] | None = None) -> int:
    from optsched.data import load_instance
    from optsched.evaluation import evaluate
    from optsched.policies import simulate

    warnings.simplefilter("ignore")  # vLLM's "prompt longer than C" note
    for path in (sys.argv[1:] if argv is None else argv):
        inst = load_instance(path)
        for name, params in CASES:
            if inst.n > 5000 and name != "vllm-apc":
                continue
            s = simulate(inst, name, **params)
            m = evaluate(inst, s).metrics
            print(path.split("/")[-1], name, json.dumps(params), digest(s), s.n_batches,
                  repr(m["total_latency"]), repr(m["mean_ttft"]), repr(m["makespan"]),
                  m.get("hit_tokens"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
