import time, warnings
from benchmarks.setting import PRESET, TRACE, C, M
from optsched.cost import preset
from optsched.instance import Limits
from optsched.workloads.traces import load_azure
from optsched.policies import simulate
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    full = load_azure(TRACE, Limits(kv_capacity=M, max_batch_tokens=C), preset(PRESET), too_long="drop")
    for rep in range(2):
        c0 = time.process_time(); s = simulate(full, "vllm", fast=True); print(time.process_time()-c0, s.n_batches, s.n_entries)
