"""Per-kernel GPU times of the best schedule of some cases (from a run.py
JSON), with torch.profiler: where a multi-kernel program spends its time.
Usage (GPU machine, repo root):
    python3 bench/gpu/kernel_times.py RESULT.json name:B [name:B ...]
Prints, per case, each kernel's mean time over 20 runs (microseconds) and its
share, and the sum against the run's CUDA-graph time."""

import collections
import json
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, "bench/gpu")
import run  # noqa: E402

res = json.load(open(sys.argv[1]))
for case in sys.argv[2:]:
    name, b = case.split(":")
    rec = next((r for r in res["results"] if r["workload"] == name and r["B"] == int(b)), None)
    if rec is None or not rec.get("best"):
        print(f"{case}: no result in {sys.argv[1]}")
        continue
    best = rec["best"]
    mod = run.load(run.GEN / f"{name}_B{b}" / f"{best['candidate']}.py")
    ins = run.make_inputs(name, int(b), 1)
    for _ in range(3):
        mod.run(*ins, config=best["config"])
    torch.cuda.synchronize()
    reps = 20
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            mod.run(*ins, config=best["config"])
        torch.cuda.synchronize()
    times = collections.OrderedDict()
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            times.setdefault(ev.name, 0.0)
            times[ev.name] += ev.device_time / reps
    total = sum(times.values())
    print(f"{case} {best['candidate']} measured {best['time_us']:.1f} us (graph); kernels sum {total:.1f} us")
    print(f"  config {best['config']}")
    for k, t in times.items():
        print(f"  {t:8.1f} us {100 * t / max(total, 1e-9):5.1f}%  {k[:90]}")
