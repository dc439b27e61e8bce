import time, warnings, os, sys
import numpy as np
from benchmarks.setting import PRESET, TRACE, C, M
from optsched.cost import preset
from optsched.instance import Limits
from optsched.workloads.traces import load_azure
from optsched.cluster import simulate, replicate
import optsched.cluster.fast as F
import optsched.runtime.numba_load as NL
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    full = load_azure(TRACE, Limits(kv_capacity=M, max_batch_tokens=C), preset(PRESET), too_long="drop")
    n = int(sys.argv[1]); R = int(sys.argv[2]); router = sys.argv[3]
    inst = replicate(full.replace(requests=full.requests[:n]), R)
    real = NL.call
    T = {}
    def call(d, *a):
        c0 = time.process_time(); r = real(d, *a); T[d.py_func.__name__] = T.get(d.py_func.__name__, 0) + time.process_time() - c0; return r
    NL.call = call
    for rep in range(3):
        T.clear()
        c0 = time.process_time()
        s = simulate(inst, "vllm", router, fast=True)
        print("total", time.process_time() - c0, T, s.n_batches, s.entry_req.size)
