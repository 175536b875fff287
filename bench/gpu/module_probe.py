"""Time generated modules on the GPU at given schedules, optionally with a
register cap for named kernels (Triton's `maxnreg`), on random inputs of
their `INPUTS` (CUDA-graph median, us).

    python3 bench/gpu/module_probe.py --out x.json \\
        'c2.py' 'c2.py|{"num_stages": 3}' 'c2.py||_k4__37=128'

Each case is `MODULE[|CONFIG_JSON[|KERNEL=MAXNREG,...]]` (`*=MAXNREG`: every
kernel); `--each-kernel CAP` adds, for each module, one case per kernel of
it with that kernel alone capped. Written for the
Llama prefill MLP's gate projection, whose silu epilogue takes its kernel to
173 registers a thread at 8 warps (one program an SM) where its K loop needs
122 (sm_90 compile on the CPU, bench/gpu/ttir_static.py)."""
import argparse, importlib.util, json, os
import torch, triton
from triton.runtime.jit import KernelInterface

CAPS = {}


def _getitem(self, grid):
    def launch(*args, **kw):
        cap = CAPS.get(getattr(self, "__name__", ""), CAPS.get("*"))
        if cap:
            kw["maxnreg"] = cap
        return self.run(*args, grid=grid, warmup=False, **kw)

    return launch


def load(py):
    spec = importlib.util.spec_from_file_location(os.path.basename(py)[:-3], py)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--each-kernel", type=int, default=0)
    ap.add_argument("--profile", action="store_true", help="also each kernel's time (torch.profiler)")
    ap.add_argument("--list", default="", help="a file of further cases, one a line")
    ap.add_argument("--check", action="store_true",
                    help="compare each case's output with the first case's on the same inputs (rel L2)")
    ap.add_argument("cases", nargs="*")
    a = ap.parse_args()
    if a.list:
        a.cases += [l.strip() for l in open(a.list) if l.strip() and not l.startswith("#")]
    if a.each_kernel:
        import re
        extra = []
        for c in a.cases:
            py = c.split("|")[0]
            names = re.findall(r"@triton\.jit[^\n]*\ndef (\w+)", open(py).read())
            extra += [f"{py}||{n}={a.each_kernel}" for n in names]
        a.cases = a.cases + extra
    KernelInterface.__getitem__ = _getitem
    rows = []
    refs = {}
    for c in a.cases:
        py, cfg, caps = (c.split("|") + ["", ""])[:3]
        cfg = json.loads(cfg) if cfg else None
        CAPS.clear()
        CAPS.update({k: int(v) for k, v in (p.split("=") for p in caps.split(",") if p)})
        mod = load(py)
        torch.manual_seed(0)
        xs = [(torch.randn(s, device="cuda") * 0.5).to(dt) for _, s, dt in mod.INPUTS]
        fn = lambda: mod.run(*xs, config=cfg)  # noqa: E731
        try:
            out = fn()
            torch.cuda.synchronize()
            if a.check:
                key = repr(mod.INPUTS)
                o = (out[0] if isinstance(out, (tuple, list)) else out).float()
                if key not in refs:
                    refs[key] = o.clone()
                    rel = 0.0
                else:
                    r = refs[key]
                    rel = float((o - r).norm() / r.norm().clamp_min(1e-30))
            us = triton.testing.do_bench_cudagraph(fn, rep=60) * 1000.0
        except Exception as e:  # noqa: BLE001 (a schedule that does not compile or fit)
            rows.append({"case": c, "error": f"{type(e).__name__}: {str(e)[:200]}"})
            print(json.dumps(rows[-1]), flush=True)
            continue
        rows.append({"case": c, "us": us})
        if a.check:
            rows[-1]["rel_l2_vs_first"] = rel
        if a.profile:
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(3):
                    fn()
                torch.cuda.synchronize()
            rows[-1]["kernel_us"] = [(e.key, round(e.device_time_total / e.count, 1)) for e in prof.key_averages() if e.device_time_total > 0]
        print(json.dumps(rows[-1]), flush=True)
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
