import time, warnings, os, sys, cProfile, pstats
from benchmarks.setting import PRESET, TRACE, C, M
from optsched.cost import preset
from optsched.instance import Limits
from optsched.workloads.traces import load_azure
from optsched.cluster import simulate, replicate
from optsched.evaluation import evaluate
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    full = load_azure(TRACE, Limits(kv_capacity=M, max_batch_tokens=C), preset(PRESET), too_long="drop")
    n = int(sys.argv[1]); R = int(sys.argv[2]); router = sys.argv[3]
    inst = replicate(full.replace(requests=full.requests[:n]), R)
    s = simulate(inst, "vllm", router, fast=True)
    evaluate(inst.replace(requests=inst.requests[:50]), simulate(inst.replace(requests=inst.requests[:50]), "vllm", router, fast=True))
    c0 = time.process_time()
    cProfile.run("evaluate(inst, s)", "/tmp/cf.prof")
    print("eval cpu", time.process_time() - c0)
pstats.Stats("/tmp/cf.prof").sort_stats("tottime").print_stats(22)
