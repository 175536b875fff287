"""Where a chunked layer's time goes: each chunk that the torch.compile
backend compiles on its own (efir.partial.chunked), timed on the GPU as
efir compiled it and as PyTorch runs it (eager), on the inputs it sees in
the layer, beside efir's static estimate and kernel count.

    python3 bench/gpu/chunk_times.py --case llama_prefill_fp16 [--tune 0] --out x.json
    python3 bench/gpu/chunk_times.py --case llama_prefill_fp16 --smoke --out /tmp/x.json  # tiny, CPU

Cases as bench/gpu/layers.py names them (full size, random weights).
"""
import argparse, json, os, sys, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch, triton  # noqa: E402
import layers  # noqa: E402


SMOKE = "--smoke" in sys.argv


def us(fn):
    if SMOKE:
        t = time.perf_counter(); fn()
        return (time.perf_counter() - t) * 1e6, "cpu"
    fn(); torch.cuda.synchronize()
    try:
        return triton.testing.do_bench_cudagraph(fn, rep=100) * 1000.0, "graph"
    except Exception:  # noqa: BLE001 (a part that cannot be captured is timed plainly)
        return triton.testing.do_bench(fn, rep=100) * 1000.0, "launch"


def neighbours(fn, args):
    """Each kernel's num_warps and num_stages changed one kernel at a time
    from the module's DEFAULT_CONFIG: `[[kernel, warps, stages, us], ...]`,
    the default first (kernel None)."""
    mod = fn.module
    seen, orig = {}, mod.run

    def record(*xs, config=None):
        seen["xs"] = xs
        return orig(*xs, config=config)

    mod.run = record
    try:
        fn(*args)
    finally:
        mod.run = orig
    xs = seen["xs"]
    base = dict(mod.DEFAULT_CONFIG)
    out = [[None, base.get("num_warps"), base.get("num_stages"), us(lambda: mod.run(*xs, config=base))[0]]]
    kernels = sorted({int(k.rsplit("_k", 1)[1]) for k in mod.CONFIG_SPACE if k.startswith("num_warps_k")})
    for k in kernels or [None]:
        for w in (4, 8):
            for st in (3, 4, 5):
                # (one kernel: the module's own warps and stages)
                sfx = "" if k is None else f"_k{k}"
                cfg = dict(base, **{f"num_warps{sfx}": w, f"num_stages{sfx}": st})
                try:
                    t = us(lambda: mod.run(*xs, config=cfg))[0]
                except Exception as e:  # noqa: BLE001 (a schedule that does not compile or fit)
                    t = f"{type(e).__name__}"
                out.append([k, w, st, t])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", required=True)
    ap.add_argument("--tune", type=float, default=0.0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true", help="tiny layer on the CPU (checks the script)")
    ap.add_argument("--profile", action="store_true", help="also each generated kernel's time (torch.profiler)")
    ap.add_argument("--sources", default="", help="write each part's generated module into this folder")
    ap.add_argument("--neighbours", action="store_true", help="also each part timed with one kernel's num_warps (4, 8) and num_stages (3, 4, 5) changed at a time")
    a = ap.parse_args()
    import efir
    from efir import partial
    estimate = sys.modules["efir.stages"].estimate
    kind, phase, dt = a.case.split("_")
    m, xs = layers.case(kind, phase, dt, a.smoke, "cpu" if a.smoke else "cuda")
    recs = []

    def compile_fn(gm, args, **kw):
        t = time.perf_counter()
        fn = efir.compile(gm, list(args), **kw)
        recs.append((gm, list(args), fn, time.perf_counter() - t))
        return fn

    rows = []
    with torch.no_grad():
        call, parts = partial.chunked(m, list(xs), {"tune": a.tune}, compile_fn, None)
        if call is None:
            sys.exit("not chunked")
        layer_us = us(lambda: call(*xs))[0]
        eager_us = us(lambda: m(*xs))[0]
        for i, (gm, args, fn, cs) in enumerate(recs):
            est = estimate(fn.source) if getattr(fn, "source", None) else {}
            e_us, e_how = us(lambda: gm(*args))
            # (efir's part on contiguous inputs, as the layer gives it: the
            # previous part's kernels write contiguous results, where the
            # recorded example inputs are eager's, views among them.)
            cargs = [x.contiguous() if isinstance(x, torch.Tensor) else x for x in args]
            f_us, f_how = us(lambda: fn(*cargs))
            ops = sum(1 for n in gm.graph.nodes if n.op == "call_function")
            kernels = []
            if a.profile and not a.smoke:
                # Each generated kernel's own time (the profiler's CUDA events).
                from torch.profiler import ProfilerActivity, profile
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    for _ in range(3):
                        fn(*cargs)
                    torch.cuda.synchronize()
                kernels = [(e.key, round(e.device_time_total / e.count, 1)) for e in prof.key_averages() if e.device_time_total > 0]
            if a.sources:
                os.makedirs(a.sources, exist_ok=True)
                with open(os.path.join(a.sources, f"{a.case}_part{i}.py"), "w") as f:
                    f.write(getattr(fn, "source", "") or "")
            row = {"part": i, "ops": ops, "compile_s": round(cs, 1), "eager_us": e_us, "efir_us": f_us,
                   "timing": f"{e_how}/{f_how}", "estimate_us": est.get("time_us"), "kernels": est.get("kernels"), "kernel_us": kernels}
            if a.neighbours and not a.smoke and getattr(fn, "module", None) is not None:
                try:
                    row["neighbours"] = neighbours(fn, cargs)
                except Exception as e:  # noqa: BLE001 (the probe must not cost the chunk's own figures)
                    row["neighbours"] = f"{type(e).__name__}: {e}"
            rows.append(row)
            print(json.dumps(row), flush=True)
    out = {"case": a.case, "device": "cpu" if a.smoke else torch.cuda.get_device_name(), "layer_chunked_us": layer_us, "layer_eager_us": eager_us, "parts": rows}
    print(json.dumps({k: v for k, v in out.items() if k != "parts"}), flush=True)
    json.dump(out, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
