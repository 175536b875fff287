"""Fit the static estimate's GPU parameters (EFIR_ESTIMATE_PARAMS) to
measured schedules: coordinate search, each parameter scaled by a few
factors at a time, keeping a change that raises the mean Spearman
correlation (estimate against measured time, per case, over every timed
schedule) of bench/gpu/estimate_points.py.

    python3 bench/gpu/estimate_fit.py RESULTS.json... [--bin target/release/efir-translate]
        [--names dram_trip_us,l2_trip_us,...] [--rounds 2]

Prints each accepted step and the fitted setting; runs on the CPU.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from estimate_points import case_points  # noqa: E402
from ranking import spearman  # noqa: E402

DEFAULTS = {"loop_trip_us": 0.18, "dram_trip_us": 1.0, "l2_trip_us": 0.4, "dram_rate": 4.27e12,
            "l2_rate": 8.0e12, "matmul_rate": 671e12, "resident_warps": 16.0, "launch_us": 2.0}
FACTORS = [0.25, 0.5, 0.7, 1.4, 2.0, 4.0]


def score(cases, gen, tool, params):
    spec = ",".join(f"{k}={v:g}" for k, v in params.items())
    rhos = []
    for r in cases:
        pts = case_points(r, gen, tool, spec)
        if len(pts) < 3:
            continue
        rho = spearman([p["estimate_us"] for p in pts], [p["measured_us"] for p in pts])
        if rho is not None:
            rhos.append(rho)
    return sum(rhos) / len(rhos), rhos


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("--gen", default="bench/gpu/gen/src")
    ap.add_argument("--bin", default="target/release/efir-translate")
    ap.add_argument("--names", default=",".join(DEFAULTS))
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    cases = {}
    for f in a.results:
        for r in json.load(open(f))["results"]:
            cases[(r["workload"], r["B"])] = r
    cases = list(cases.values())
    params = dict(DEFAULTS)
    best, rhos = score(cases, a.gen, a.bin, params)
    print(f"defaults: mean rho {best:.3f} over {len(rhos)} cases", flush=True)
    for _ in range(a.rounds):
        moved = False
        for k in a.names.split(","):
            base = params[k]
            for f in FACTORS:
                params[k] = base * f
                s, _ = score(cases, a.gen, a.bin, params)
                if s > best + 0.005:
                    best, base, moved = s, params[k], True
                    print(f"  {k} = {params[k]:g}: mean rho {s:.3f}", flush=True)
            params[k] = base
        if not moved:
            break
    _, rhos = score(cases, a.gen, a.bin, params)
    print(f"fitted: mean rho {best:.3f}; at least 0.8 in {sum(r >= 0.8 for r in rhos)} of {len(rhos)}")
    print("EFIR_ESTIMATE_PARAMS=" + ",".join(f"{k}={v:g}" for k, v in params.items() if v != DEFAULTS[k]))


if __name__ == "__main__":
    main()
