"""Probe: ngpt's one-kernel whole-row plan (c0) at several loop blocks against
the 5-kernel plan's best measured schedule, and eager PyTorch, at B = 1, 8, 16
(CUDA-graph timing, median; relative L2 against fp32 PyTorch).
Usage (GPU machine): python3 bench/gpu/ngpt_probe.py"""
import importlib.util, sys, torch
from triton.testing import do_bench_cudagraph

def load(p):
    spec = importlib.util.spec_from_file_location("m" + str(abs(hash(p))), p)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m

def ref(h, x, a):
    h, x, a = h.float(), x.float(), a.float()
    rms = lambda t: t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6)
    return rms(x + a * (rms(h) - x))

for B in (1, 8, 16):
    torch.manual_seed(B)
    h, x, a = (torch.randn(B, 4096, device="cuda", dtype=torch.float16) for _ in range(3))
    r = ref(h, x, a)
    eag = do_bench_cudagraph(lambda: ref(h, x, a).half()) * 1e3
    print(f"B={B} eager {eag:.1f} us")
    for name in ("ngpt_c0", "ngpt_c3", "ngpt_c2"):
        p = f"bench/gpu/gen/ngpt_B{B}/{name}.py"
        try:
            m = load(p)
        except FileNotFoundError:
            continue
        cfgs = [None] + [{"BLOCK_k4096": k} for k in (256, 512, 1024)] + [{"BLOCK_k4096": 1024, "num_warps": w} for w in (8, 16)]
        for cfg in cfgs:
            try:
                o = m.run(h, x, a, config=cfg)
                err = ((o.float() - r).norm() / r.norm()).item()
                t = do_bench_cudagraph(lambda: m.run(h, x, a, config=cfg)) * 1e3
                print(f"  {name} {m.ESTIMATE['kernels']}k {cfg}: {t:.1f} us err {err:.1e}")
            except Exception as e:
                print(f"  {name} {cfg}: failed {str(e)[:100]}")
