"""efir's kernels against the peers of WORKLOADS.md, on one GPU, in one process.

Inputs: the Triton modules that bench/gpu/prepare.sh wrote under
bench/gpu/gen/<workload>_B<B>/ (the best candidates of each workload by
efir's static estimate). For every workload and B this script

1. draws fresh random fp16 inputs (never zeros; weights scaled by
   1/sqrt(fan-in) so that fp16 does not overflow) and computes the fp32
   PyTorch reference;
2. runs every efir candidate under a few schedules (DEFAULT_CONFIG and
   variants), each on fresh inputs, and checks it (relative L2 <= 0.01);
3. times the correct ones, PyTorch eager, torch.compile and (attention)
   SDPA with the cuDNN and FLASH backends, with CUDA-graph replays
   (triton.testing.do_bench_cudagraph, median), rotating over several copies
   of the inputs where they would fit in L2;
4. measures the two ceilings (copy bandwidth, fp16 matmul rate) and the floor
   max(bytes / bandwidth, flops / matmul rate).

Writes JSON (and prints a table). Usage:
    python3 bench/gpu/run.py --out results.json [--workloads a,b] [--batches 1,8,16]
        [--compile-mode max-autotune-no-cudagraphs|default|none]
"""

import argparse
import importlib.util
import json
import math
import os
import pathlib
import sys
import time
import traceback

HERE = pathlib.Path(__file__).resolve().parent
# Inductor's caches (compiled graphs, autotuning results) in one place, shared
# by the parallel warm-up processes and kept between calls on a warm machine.
os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(HERE / ".inductor-cache"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402
from triton.testing import do_bench_cudagraph  # noqa: E402

GEN = HERE / "gen"
L2_BYTES = 60e6
TOL = 1e-2


# ----------------------------------------------------------------- workloads
def rms(t, eps=1e-6):
    return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + eps)


def rmsnorm_mlp(x, gamma, wg, wu):
    h = (rms(x.float()) * gamma.float()).to(x.dtype)
    return F.silu(h @ wg) * (h @ wu)


def rmsnorm_swiglu(x, gamma, wg, wu, wd):
    return rmsnorm_mlp(x, gamma, wg, wu) @ wd


def gated_mlp(x, w1, w2):
    return F.silu(x @ w1) * (x @ w2)


def layernorm_gemm(x, gamma, beta, w):
    h = F.layer_norm(x.float(), (x.shape[-1],), gamma.float(), beta.float(), 1e-5).to(x.dtype)
    return h @ w


def lora(x, w, a, bm):
    return x @ w + (x @ a) @ bm


def ngpt(h, x, alpha):
    hf, xf, af = h.float(), x.float(), alpha.float()
    return rms(xf + af * (rms(hf) - xf)).to(x.dtype)


def attention(q, k, v, causal):
    s = (q @ k.transpose(-1, -2)).float() * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        n = s.shape[-1]
        keep = torch.ones(n, n, dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    p = torch.softmax(s, dim=-1).to(q.dtype)
    return p @ v


def attn_decode(q, k, v):
    return attention(q, k, v, False)


def attn_prefill(q, k, v):
    return attention(q, k, v, True)


def shapes(name, b):
    """(name, shape, fan_in or None) per input, in the program's order."""
    if name in ("rmsnorm_mlp", "rmsnorm_swiglu"):
        s = [("x", (b, 4096), None), ("gamma", (4096,), None), ("wg", (4096, 11008), 4096), ("wu", (4096, 11008), 4096)]
        if name == "rmsnorm_swiglu":
            s.append(("wd", (11008, 4096), 11008))
        return s
    if name == "gated_mlp":
        return [("x", (b, 4096), None), ("w1", (4096, 4096), 4096), ("w2", (4096, 4096), 4096)]
    if name == "layernorm_gemm":
        return [("x", (b, 1024), None), ("gamma", (1024,), None), ("beta", (1024,), None), ("w", (1024, 4096), 1024)]
    if name == "lora":
        return [("x", (b, 4096), None), ("w", (4096, 4096), 4096), ("a", (4096, 16), 4096), ("bm", (16, 4096), 16)]
    if name == "ngpt":
        return [("h", (b, 4096), None), ("x", (b, 4096), None), ("alpha", (b, 4096), None)]
    if name == "attn_decode":
        return [("q", (b, 32, 1, 128), None), ("k", (b, 32, 4096, 128), None), ("v", (b, 32, 4096, 128), None)]
    if name == "attn_prefill":
        return [("q", (b, 32, 1024, 128), None), ("k", (b, 32, 1024, 128), None), ("v", (b, 32, 1024, 128), None)]
    raise KeyError(name)


FUNCS = {
    "rmsnorm_mlp": rmsnorm_mlp,
    "rmsnorm_swiglu": rmsnorm_swiglu,
    "gated_mlp": gated_mlp,
    "layernorm_gemm": layernorm_gemm,
    "lora": lora,
    "ngpt": ngpt,
    "attn_decode": attn_decode,
    "attn_prefill": attn_prefill,
}


def flops(name, b):
    if name == "rmsnorm_mlp":
        return 2 * 2 * b * 4096 * 11008
    if name == "rmsnorm_swiglu":
        return 3 * 2 * b * 4096 * 11008
    if name == "gated_mlp":
        return 2 * 2 * b * 4096 * 4096
    if name == "layernorm_gemm":
        return 2 * b * 1024 * 4096
    if name == "lora":
        return 2 * b * 4096 * 4096 + 2 * 2 * b * 4096 * 16
    if name == "ngpt":
        return 0
    if name == "attn_decode":
        return 2 * 2 * b * 32 * 4096 * 128
    if name == "attn_prefill":
        return 2 * 2 * b * 32 * 1024 * 1024 * 128 // 2  # causal: half the scores
    raise KeyError(name)


def make_inputs(name, b, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    out = []
    for _, shape, fan in shapes(name, b):
        t = torch.randn(shape, generator=g, device="cuda", dtype=torch.float32)
        if fan:
            t = t / math.sqrt(fan)
        if name == "ngpt" and _ == "alpha":
            t = t.abs() * 0.1 + 0.05
        out.append(t.to(torch.float16))
    return out


def reference(name, inputs):
    with torch.no_grad():
        return FUNCS[name](*[t.float() for t in inputs]).float()


def rel_l2(out, ref):
    out = out.float()
    if not torch.isfinite(out).all():
        return float("inf")
    return (torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref)).item()


# ------------------------------------------------------------------- timing
def median_us(fn):
    try:
        ms = do_bench_cudagraph(fn, rep=40, return_mode="median")
    except TypeError:
        ms = do_bench_cudagraph(fn, rep=40)
    return ms * 1000.0


def timed(fn, name, b, copies):
    """Median time of fn over `copies` input sets in rotation, per call."""
    sets = [make_inputs(name, b, 1000 + i) for i in range(copies)]

    def many():
        for s in sets:
            fn(*s)

    many()
    torch.cuda.synchronize()
    return median_us(many) / copies


def ceilings():
    """Copy bandwidth (bytes read + written per second) and the fp16 matmul
    rate, each the best of a few ways of measuring it; the variants are
    returned too."""
    seen = {}
    for mib in (512, 4096):
        n = mib << 19  # fp16 elements
        x = torch.randn(n, device="cuda", dtype=torch.float16)
        y = torch.empty_like(x)
        t = median_us(lambda: y.copy_(x))
        seen[f"copy_{mib}MiB_graph"] = 2 * n * 2 / (t * 1e-6)
        # Plain CUDA events around 10 copies after warm-up (as KINDS.md).
        for _ in range(3):
            y.copy_(x)
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(10):
            y.copy_(x)
        e1.record()
        torch.cuda.synchronize()
        seen[f"copy_{mib}MiB_events"] = 10 * 2 * n * 2 / (e0.elapsed_time(e1) * 1e-3)
        t = median_us(lambda: x.sum(dtype=torch.float32))
        seen[f"read_{mib}MiB_sum"] = n * 2 / (t * 1e-6)
        del x, y
    bw = max(v for k, v in seen.items() if k.startswith("copy_"))
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    bb = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    t = median_us(lambda: a @ bb)
    mm = 2 * 8192**3 / (t * 1e-6)
    seen["matmul_8192_fp16"] = mm
    del a, bb
    return bw, mm, seen


def _warm(job):
    """Compile (and run once) the torch.compile peer of each case, filling
    Inductor's cache; runs in a worker process."""
    cases, mode = job
    torch.backends.cuda.matmul.allow_tf32 = False
    done = []
    for name, b in cases:
        t0 = time.time()
        try:
            fn = torch.compile(FUNCS[name], mode=None if mode == "default" else mode)
            with torch.no_grad():
                fn(*make_inputs(name, b, 7))
            torch.cuda.synchronize()
            done.append((name, b, round(time.time() - t0, 1), ""))
        except Exception as e:  # noqa: BLE001
            done.append((name, b, round(time.time() - t0, 1), str(e)[-300:]))
        torch._dynamo.reset()
    return done


def warm_compile(cases, mode, procs, log):
    """torch.compile every case's peer in `procs` parallel processes first, so
    that the timed process finds compiled graphs and autotuning results in
    Inductor's cache (compile time, not run time, is what this saves)."""
    import multiprocessing as mp

    t0 = time.time()
    ctx = mp.get_context("spawn")
    jobs = [(cases[i::procs], mode) for i in range(procs)]
    with ctx.Pool(procs) as pool:
        for done in pool.imap_unordered(_warm, jobs):
            for name, b, s, err in done:
                log(f"  warm {name} B={b}: {s} s {err[:200]}")
    log(f"warm-up compile: {time.time() - t0:.0f} s")


# ---------------------------------------------------------------- candidates
def load(path):
    name = "efir_" + path.parent.name + "_" + path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def configs(mod):
    d = dict(mod.DEFAULT_CONFIG)
    out = [d]
    big = dict(d)
    small = dict(d)
    for k, dom in mod.CONFIG_SPACE.items():
        if k.startswith("BLOCK_") and len(dom) > 1:
            big[k] = max(x for x in dom if x <= 128) if any(x <= 128 for x in dom) else min(dom)
            small[k] = min(x for x in dom if x >= min(16, max(dom)))
    big["num_warps"] = 8
    small["num_warps"] = 4
    for c in (big, small):
        if c not in out:
            out.append(c)
    return out


def bench_one(name, b, compile_mode, log, max_candidates=3, max_configs=3, glob="*.py"):
    rec = {"workload": name, "B": b, "efir": [], "peers": {}}
    nbytes = sum(math.prod(s) * 2 for _, s, _ in shapes(name, b))
    ins = make_inputs(name, b, 0)
    with torch.no_grad():
        outb = FUNCS[name](*ins).numel() * 2
    rec["bytes"] = nbytes + outb
    rec["flops"] = flops(name, b)
    copies = max(1, min(8, math.ceil(3 * L2_BYTES / rec["bytes"])))
    rec["copies"] = copies
    # efir candidates
    paths = sorted((GEN / f"{name}_B{b}").glob(glob))
    paths = sorted(paths, key=lambda p: load(p).ESTIMATE["time_us"])[:max_candidates]
    for path in paths:
        try:
            mod = load(path)
        except Exception as e:  # noqa: BLE001
            rec["efir"].append({"candidate": path.stem, "error": f"import: {e}"})
            continue
        for i, cfg in enumerate(configs(mod)[:max_configs]):
            r = {"candidate": path.stem, "config": cfg, "kernels": mod.ESTIMATE["kernels"], "estimate_us": mod.ESTIMATE["time_us"]}
            try:
                t0 = time.time()
                inputs = make_inputs(name, b, 10 + i)
                ref = reference(name, inputs)
                out = mod.run(*inputs, config=cfg)
                torch.cuda.synchronize()
                r["compile_s"] = round(time.time() - t0, 2)
                r["rel_l2"] = rel_l2(out, ref)
                r["ok"] = r["rel_l2"] <= TOL
                if r["ok"]:
                    r["time_us"] = timed(lambda *a, m=mod, c=cfg: m.run(*a, config=c), name, b, copies)
            except Exception as e:  # noqa: BLE001
                r["error"] = "".join(traceback.format_exception_only(type(e), e)).strip()[-600:]
                r["ok"] = False
            rec["efir"].append(r)
            log(f"  efir {path.stem} cfg{i}: " + (f"{r.get('time_us', float('nan')):.1f} us (err {r.get('rel_l2', float('nan')):.1e})" if r.get("ok") else f"FAILED {r.get('rel_l2', '')} {r.get('error', '')[:200]}"))
    # peers
    fn = FUNCS[name]
    inputs = make_inputs(name, b, 7)
    ref = reference(name, inputs)
    with torch.no_grad():
        peers = {"eager": fn}
        if compile_mode != "none":
            peers["compile"] = torch.compile(fn, mode=None if compile_mode == "default" else compile_mode)
        if name.startswith("attn"):
            causal = name == "attn_prefill"
            from torch.nn.attention import SDPBackend, sdpa_kernel

            for backend, key in ((SDPBackend.CUDNN_ATTENTION, "sdpa_cudnn"), (SDPBackend.FLASH_ATTENTION, "sdpa_flash")):
                def sdpa(q, k, v, backend=backend, causal=causal):
                    with sdpa_kernel(backend):
                        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                peers[key] = sdpa
        for key, p in peers.items():
            r = {}
            try:
                t0 = time.time()
                out = p(*inputs)
                torch.cuda.synchronize()
                r["compile_s"] = round(time.time() - t0, 2)
                r["rel_l2"] = rel_l2(out, ref)
                r["ok"] = r["rel_l2"] <= TOL
                r["time_us"] = timed(p, name, b, copies)
            except Exception as e:  # noqa: BLE001
                r["error"] = "".join(traceback.format_exception_only(type(e), e)).strip()[-600:]
            rec["peers"][key] = r
            log(f"  {key}: {r.get('time_us', float('nan')):.1f} us (err {r.get('rel_l2', float('nan')):.1e}) {r.get('error', '')[:200]}")
    return rec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--workloads", default=",".join(FUNCS))
    ap.add_argument("--batches", default="1,8,16")
    ap.add_argument("--compile-mode", default="max-autotune-no-cudagraphs")
    ap.add_argument("--candidates", type=int, default=3, help="best candidates (by estimate) per case")
    ap.add_argument("--configs", type=int, default=3, help="schedules per candidate")
    ap.add_argument("--cases", default="", help="only these name:B pairs, comma separated")
    ap.add_argument("--glob", default="*.py", help="candidate modules to run")
    ap.add_argument("--warm", type=int, default=0, help="torch.compile the peers in N processes first")
    ap.add_argument("--warm-only", action="store_true", help="only fill Inductor's cache")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    def log(s):
        print(s, flush=True)

    res = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "compile_mode": args.compile_mode,
        "date": time.strftime("%Y-%m-%d"),
        "results": [],
    }
    cases = [(n, int(b)) for b in args.batches.split(",") for n in args.workloads.split(",")]
    if args.cases:
        cases = [(c.split(":")[0], int(c.split(":")[1])) for c in args.cases.split(",")]
    if args.warm and args.compile_mode != "none":
        warm_compile(cases, args.compile_mode, args.warm, log)
        if args.warm_only:
            return
    bw, mm, seen = ceilings()
    res["copy_bandwidth_Bps"] = bw
    res["fp16_matmul_flops"] = mm
    res["ceilings"] = seen
    log(f"copy bandwidth {bw / 1e12:.2f} TB/s, fp16 matmul {mm / 1e12:.0f} TFLOP/s")
    log("  " + ", ".join(f"{k} {v / 1e12:.2f}T" for k, v in seen.items()))
    for name, b in cases:
        if True:
            log(f"{name} B={b}")
            try:
                rec = bench_one(name, b, args.compile_mode, log, args.candidates, args.configs, args.glob)
            except Exception as e:  # noqa: BLE001
                rec = {"workload": name, "B": b, "error": str(e)[-600:]}
            if "bytes" in rec:
                rec["floor_us"] = max(rec["bytes"] / bw, rec["flops"] / mm) * 1e6
            res["results"].append(rec)
            pathlib.Path(args.out).write_text(json.dumps(res, indent=1))
    log(table(res))


def table(res):
    lines = [
        "| workload | B | floor (us) | best efir (us) | kernels | best peer | peer (us) | speedup | efir / floor |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res["results"]:
        if "efir" not in r:
            lines.append(f"| {r['workload']} | {r['B']} | | error: {r.get('error', '')[:60]} | | | | | |")
            continue
        ok = [e for e in r["efir"] if e.get("ok") and "time_us" in e]
        best = min(ok, key=lambda e: e["time_us"]) if ok else None
        peers = {k: v for k, v in r["peers"].items() if v.get("ok") and "time_us" in v}
        bp = min(peers, key=lambda k: peers[k]["time_us"]) if peers else None
        fl = r.get("floor_us", float("nan"))
        if best and bp:
            sp = peers[bp]["time_us"] / best["time_us"]
            lines.append(
                f"| {r['workload']} | {r['B']} | {fl:.1f} | {best['time_us']:.1f} | {best['kernels']} | {bp} | {peers[bp]['time_us']:.1f} | {sp:.2f}x | {fl / best['time_us']:.2f} |"
            )
        else:
            lines.append(f"| {r['workload']} | {r['B']} | {fl:.1f} | {'none correct' if not best else best['time_us']} | | {bp} | | | |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
