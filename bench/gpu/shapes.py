"""The torch.compile backend when the batch changes, on the GPU (issue 33).

One `torch.compile(module, backend="efir")` per workload, called at
B = 1, 8, 16 and then again at 8 (in fp16 on the GPU): per call, the wall
time (the first call at a new B includes efir's compile for that shape,
with tuning unless --tune 0), how many efir compiles the backend made, and
whether it fell back to eager (it must not); then, per B, CUDA-graph median
times of the backend's compiled callable, of `efir.compile` specialized at
that B (the two should match: the backend compiles per shape), and of
eager. The Rust stages run as the binaries from EFIR_BIN_DIR (built on the
CPU machine and carried). Prints a table; writes JSON with --out.

    EFIR_BIN_DIR=bench/gpu/bin python3 bench/gpu/shapes.py --workloads rmsnorm_mlp,attn_decode --tune 0 --out s.json
"""

import argparse
import json
import pathlib
import sys
import time
import warnings

import torch
from triton.testing import do_bench_cudagraph

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "python" / "tests"))
import efir  # noqa: E402,F401 (registers the backend)
from workload_modules import Attention, GatedMLP, RMSNormMLP  # noqa: E402

C = sys.modules["efir.compile"]


def make(name, b):
    r = lambda *s: torch.randn(*s, device="cuda", dtype=torch.float16)  # noqa: E731
    if name == "rmsnorm_mlp":
        return RMSNormMLP(4096, 11008), (r(b, 4096),)
    if name == "gated_mlp":
        return GatedMLP(4096), (r(b, 4096),)
    if name == "attn_decode":
        return Attention(False), (r(b, 32, 1, 128), r(b, 32, 4096, 128), r(b, 32, 4096, 128))
    raise SystemExit(f"unknown workload {name} (rmsnorm_mlp, gated_mlp, attn_decode)")


def median_us(fn):
    return do_bench_cudagraph(fn, rep=40, return_mode="median") * 1000.0


def rel_l2(out, ref):
    return (torch.linalg.vector_norm(out.float() - ref.float()) / torch.linalg.vector_norm(ref.float())).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", default="rmsnorm_mlp,attn_decode")
    ap.add_argument("--batches", default="1,8,16,8")
    ap.add_argument("--tune", type=float, default=0.0, help="seconds of tuning per efir compile (0: the static estimate chooses)")
    ap.add_argument("--candidates", type=int, default=8)
    ap.add_argument("--out")
    args = ap.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    opts = {"candidates": args.candidates, "tune": args.tune}
    res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "tune": args.tune, "results": []}
    count = {"n": 0}
    real = C.compile

    def counted(*a, **k):
        count["n"] += 1
        return real(*a, **k)

    C.compile = counted
    for name in args.workloads.split(","):
        torch.manual_seed(0)
        m, _ = make(name, 1)
        m = m.half().cuda().eval()
        torch._dynamo.reset()
        cm = torch.compile(m, backend="efir", options=opts)
        count["n"] = 0
        calls = []
        for b in batches:
            _, xs = make(name, b)
            with warnings.catch_warnings(record=True) as w, torch.no_grad():
                warnings.simplefilter("always")
                t0 = time.time()
                out = cm(*xs)
                torch.cuda.synchronize()
                wall = time.time() - t0
                ref = m(*xs)
            fell = [str(x.message) for x in w if "falling back" in str(x.message) or "left to eager" in str(x.message)]
            calls.append({"B": b, "wall_s": round(wall, 2), "compiles_so_far": count["n"], "rel_l2": rel_l2(out, ref), "fallback": fell})
            print(f"{name} B={b}: {wall:.2f} s, {count['n']} efir compiles so far, rel_l2 {calls[-1]['rel_l2']:.2e}{', FELL BACK: ' + fell[0] if fell else ''}", flush=True)
        times = []
        for b in sorted(set(batches)):
            _, xs = make(name, b)
            with torch.no_grad():
                t_backend = median_us(lambda: cm(*xs))
                t0 = time.time()
                spec = real(m, xs, quiet=True, candidates=args.candidates, tune=args.tune)
                t_spec_compile = time.time() - t0
                t_spec = median_us(lambda: spec(*xs))
                t_eager = median_us(lambda: m(*xs))
            times.append({"B": b, "backend_us": t_backend, "specialized_us": t_spec, "specialized_compile_s": round(t_spec_compile, 2), "eager_us": t_eager})
            print(f"{name} B={b}: backend {t_backend:.1f} us, efir.compile at B={b} {t_spec:.1f} us (compiled in {t_spec_compile:.1f} s), eager {t_eager:.1f} us", flush=True)
        res["results"].append({"workload": name, "calls": calls, "times": times})
    C.compile = real
    if args.out:
        json.dump(res, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
