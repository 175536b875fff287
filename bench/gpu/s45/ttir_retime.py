"""Re-time the TTIR and Python builds of the cases whose CUDA-graph times
differed by more than 5% in bench/gpu/ttir_check.py (session 45, H100):
the two builds alternated (TTIR, Python, TTIR, Python, ...), each a CUDA
graph median over fresh inputs, and per launch the kernels' GPU times from
torch.profiler, so that a difference is seen as the kernel's or the
timing's. Prints one JSON line per case.

    python3 bench/gpu/s45/ttir_retime.py CASE_REGEX [ROUNDS]
"""
import glob
import json
import os
import re
import sys

import torch
from torch.profiler import ProfilerActivity, profile
from triton.testing import do_bench_cudagraph

sys.path.insert(0, "python")
from efir import ttir  # noqa: E402


def kernel_times(fn, reps=20):
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    out = {}
    for e in prof.key_averages():
        if e.device_type.name == "CUDA" and e.count >= reps:
            out[e.key[:40]] = round(e.device_time_total / e.count, 2) if hasattr(e, "device_time_total") else round(e.cuda_time_total / e.count, 2)
    return out


def main():
    pat = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    for man in sorted(glob.glob("bench/gpu/ttir/*/*.ttir.json")):
        case = os.path.basename(os.path.dirname(man))
        if not re.search(pat, case):
            continue
        prog = ttir.load(man)
        mod = ttir._python_build(man[: -len(".ttir.json")] + ".py")
        xs = ttir.random_inputs(prog, 0)
        row = {"case": case, "ttir_graph_us": [], "python_graph_us": []}
        for _ in range(rounds):
            row["ttir_graph_us"].append(round(do_bench_cudagraph(lambda: prog.run(*xs), rep=100, return_mode="median") * 1e3, 2))
            row["python_graph_us"].append(round(do_bench_cudagraph(lambda: mod.run(*xs), rep=100, return_mode="median") * 1e3, 2))
        row["ratio_min"] = round(min(row["ttir_graph_us"]) / min(row["python_graph_us"]), 3)
        row["ttir_kernels_us"] = kernel_times(lambda: prog.run(*xs))
        row["python_kernels_us"] = kernel_times(lambda: mod.run(*xs))
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
