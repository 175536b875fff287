"""Run the best schedule of some cases once (for ncu): the case's best
candidate and config from a run.py JSON. Usage:
    ncu --clock-control none --metrics ... python3 bench/gpu/profile_best.py RESULT.json name:B [name:B ...]
"""

import json
import sys

import torch

sys.path.insert(0, "bench/gpu")
import run  # noqa: E402

res = json.load(open(sys.argv[1]))
for case in sys.argv[2:]:
    name, b = case.split(":")
    rec = next(r for r in res["results"] if r["workload"] == name and r["B"] == int(b))
    best = rec["best"]
    mod = run.load(run.GEN / f"{name}_B{b}" / f"{best['candidate']}.py")
    ins = run.make_inputs(name, int(b), 3)
    for _ in range(2):
        mod.run(*ins, config=best["config"])
    torch.cuda.synchronize()
    print(case, best["candidate"], best["config"], flush=True)
