"""`efir.compile` on the eight workloads of WORKLOADS.md at B=8, on the GPU.

Each workload is an ordinary torch.nn.Module (python/tests/workload_modules.py)
in fp16 on the GPU. For each: efir.compile (torch.export, import, saturate,
compact, Triton, load; the Rust stages run as the efir-opt/efir-translate
binaries from EFIR_BIN_DIR, built on the CPU machine and carried), a check
against the module in fp32 on fresh random inputs (relative L2 <= 0.01) and
against eager fp16, and CUDA-graph median times of the compiled callable and
of eager, side by side. Writes JSON.

    EFIR_BIN_DIR=bench/gpu/bin python3 bench/gpu/compile_b8.py --out r.json
"""

import argparse
import copy
import json
import pathlib
import sys
import time
import traceback

import torch
from triton.testing import do_bench_cudagraph

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "python" / "tests"))
import efir  # noqa: E402
from workload_modules import NGPT, Attention, GatedMLP, LayerNormGemm, LoRA, RMSNormMLP  # noqa: E402

B = 8


def workloads():
    r = lambda *s: torch.randn(*s, device="cuda")  # noqa: E731
    return {
        "rmsnorm_mlp": (lambda: RMSNormMLP(4096, 11008), lambda: (r(B, 4096),)),
        "rmsnorm_swiglu": (lambda: RMSNormMLP(4096, 11008, down=True), lambda: (r(B, 4096),)),
        "gated_mlp": (lambda: GatedMLP(4096), lambda: (r(B, 4096),)),
        "layernorm_gemm": (lambda: LayerNormGemm(1024, 4096), lambda: (r(B, 1024),)),
        "lora": (lambda: LoRA(4096, 16), lambda: (r(B, 4096),)),
        "ngpt": (lambda: NGPT(), lambda: (r(B, 4096), r(B, 4096), r(B, 4096).abs() * 0.1 + 0.05)),
        "attn_decode": (lambda: Attention(False), lambda: (r(B, 32, 1, 128), r(B, 32, 4096, 128), r(B, 32, 4096, 128))),
        "attn_prefill": (lambda: Attention(True), lambda: (r(B, 32, 1024, 128), r(B, 32, 1024, 128), r(B, 32, 1024, 128))),
    }


def rel_l2(out, ref):
    out = out.float()
    if not torch.isfinite(out).all():
        return float("inf")
    return (torch.linalg.vector_norm(out - ref.float()) / torch.linalg.vector_norm(ref.float())).item()


def median_us(fn):
    return do_bench_cudagraph(fn, rep=40, return_mode="median") * 1000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--candidates", type=int, default=8)
    ap.add_argument("--only", default="")
    ap.add_argument("--tune", type=float, default=0.0, help="seconds of schedule tuning per workload (efir.compile's tune=; 0: the static estimate chooses)")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "B": B, "candidates": args.candidates, "results": []}
    for name, (make, inputs) in workloads().items():
        if args.only and name not in args.only.split(","):
            continue
        rec = {"workload": name}
        try:
            # nn.Linear's default initialization already scales by
            # 1/sqrt(fan-in), so values stay in fp16's normal range.
            mod = make().cuda()
            mod16 = mod.half().eval()
            mod32 = copy.deepcopy(mod16).float()
            t0 = time.time()
            ex = tuple(x.half() for x in inputs())
            fn = efir.compile(mod16, ex, candidates=args.candidates, quiet=True, tune=args.tune)
            rec["compile_s"] = round(time.time() - t0, 2)
            rec["kernels"] = fn.module.ESTIMATE["kernels"]
            errs = []
            for trial in range(2):
                xs = tuple(x.half() for x in inputs())  # fresh inputs
                with torch.no_grad():
                    out = fn(*xs)
                    ref = mod32(*[x.float() for x in xs])
                    eager = mod16(*xs)
                errs.append({"vs_fp32": rel_l2(out, ref), "eager_vs_fp32": rel_l2(eager, ref), "vs_eager": rel_l2(out, eager)})
            rec["checks"] = errs
            rec["ok"] = all(e["vs_fp32"] <= 1e-2 for e in errs)
            xs = tuple(x.half() for x in inputs())
            with torch.no_grad():
                rec["efir_us"] = median_us(lambda: fn(*xs))
                rec["eager_us"] = median_us(lambda: mod16(*xs))
            rec["speedup_vs_eager"] = rec["eager_us"] / rec["efir_us"]
        except Exception as e:  # noqa: BLE001
            rec["error"] = "".join(traceback.format_exception_only(type(e), e)).strip()[-800:]
            rec["ok"] = False
        res["results"].append(rec)
        print(json.dumps(rec), flush=True)
        pathlib.Path(args.out).write_text(json.dumps(res, indent=1))
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
