"""Merge bench/gpu/run.py result files (later files win per workload and B)
and write the combined JSON and a markdown table.

Usage: python3 bench/gpu/table.py OUT.json OUT.md IN1.json [IN2.json ...]
"""

import json
import sys

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from results_md import table  # noqa: E402  (plain Python: no torch needed)

ORDER = ["rmsnorm_mlp", "rmsnorm_swiglu", "gated_mlp", "layernorm_gemm", "lora", "ngpt", "attn_decode", "attn_prefill"]


def main():
    out_json, out_md, ins = sys.argv[1], sys.argv[2], sys.argv[3:]
    runs = [json.load(open(p)) for p in ins]
    merged = {}
    for i, r in enumerate(runs):
        for rec in r["results"]:
            rec = dict(rec)
            rec["run"] = ins[i]
            rec["copy_bandwidth_Bps"] = r["copy_bandwidth_Bps"]
            rec["fp16_matmul_flops"] = r["fp16_matmul_flops"]
            merged[(rec["workload"], rec["B"])] = rec
    results = sorted(merged.values(), key=lambda r: (ORDER.index(r["workload"]), r["B"]))
    res = {k: runs[-1][k] for k in ("gpu", "torch", "triton", "date")}
    res["compile_mode"] = sorted({r["compile_mode"] for r in runs})
    res["runs"] = [{"file": p, "copy_bandwidth_Bps": r["copy_bandwidth_Bps"], "fp16_matmul_flops": r["fp16_matmul_flops"]} for p, r in zip(ins, runs)]
    res["results"] = results
    json.dump(res, open(out_json, "w"), indent=1)
    md = table(res)
    open(out_md, "w").write(md + "\n")
    print(md)


if __name__ == "__main__":
    main()
