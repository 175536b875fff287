"""Probe: do latency-bound normalization programs (ngpt, layernorm_gemm) gain
from (1) loop blocks over a whole row (4096, above CONFIG_SPACE's 1024) and
(2) statistics loops (loops without a tl.dot) taking a block of their own
(`RB_<axis>`), apart from the matmul's K loop over the same axis?

(2) is made here by rewriting the emitted modules' source: in each loop over
`@<axis>` whose body has no `tl.dot`, `BLOCK_<axis>`/`NT_<axis>` become the
new kernel parameters `RB_<axis>`/`RNT_<axis>`, passed at launch from
`config["RB_<axis>"]` (default: the axis's block). Every variant is checked
against fp32 PyTorch (relative L2) and timed with CUDA graphs (median), beside
torch.compile and a hand-written one-program-per-row ngpt kernel (one load of
each row, as Inductor's persistent reductions do).

Usage (GPU machine, after bench/gpu/prepare.sh's modules are carried):
    python3 bench/gpu/rowblock_probe.py [--out FILE.json]
"""
import argparse
import importlib.util
import json
import re
import sys
import tempfile
import time

import torch
import triton
import triton.language as tl
from triton.testing import do_bench_cudagraph


def rewrite_stat_loops(src):
    """The module's source with the dot-free loops of each kernel that also
    has a tl.dot loop over the same axis on blocks of their own."""
    lines = src.split("\n")
    loops = []  # (kernel name, start, end, axis, has dot)
    kernel = None
    i = 0
    while i < len(lines):
        km = re.match(r"^def (_k\w+)\(", lines[i])
        if km:
            kernel = km.group(1)
        m = re.match(r"^(\s*)for (\w+) in range\(0, NT_(\w+)\):$", lines[i])
        if m and kernel:
            ind = len(m.group(1))
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > ind):
                j += 1
            loops.append((kernel, i, j, m.group(3), any("tl.dot" in b for b in lines[i + 1 : j])))
            i = j
            continue
        i += 1
    targets = {(k, ax) for k, _, _, ax, dot in loops if dot}
    done = set()
    for k, i, j, ax, dot in loops:
        if dot or (k, ax) not in targets:
            continue
        done.add((k, ax))
        lines[i] = lines[i].replace(f"NT_{ax}", f"RNT_{ax}")
        for t in range(i + 1, j):
            lines[t] = re.sub(rf"\bBLOCK_{ax}\b", f"RB_{ax}", lines[t])
    src = "\n".join(lines)
    for k, ax in sorted(done):
        src = re.sub(
            rf"(def {k}\(.*NT_{ax}: tl\.constexpr)",
            rf"\1, RB_{ax}: tl.constexpr, RNT_{ax}: tl.constexpr",
            src,
        )
        ext = re.search(rf"nt_{ax} = triton\.cdiv\((\w+), block_{ax}\)", src).group(1)
        rb = f'cfg.get("RB_{ax}", block_{ax})'
        src = re.sub(
            rf"(\s{k}\[.*?)(num_warps=)",
            rf"\1RB_{ax}={rb}, RNT_{ax}=triton.cdiv({ext}, {rb}), \2",
            src,
        )
    return src, sorted({ax for _, ax in done})


def load_src(src, tag):
    f = tempfile.NamedTemporaryFile("w", suffix=f"_{tag}.py", delete=False)
    f.write(src)
    f.close()
    spec = importlib.util.spec_from_file_location(f"m_{tag}", f.name)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


@triton.jit
def ngpt_row(h_p, x_p, a_p, y_p, N: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    o = tl.arange(0, BLOCK)
    m = o < N
    h = tl.load(h_p + row * N + o, mask=m, other=0.0).to(tl.float32)
    x = tl.load(x_p + row * N + o, mask=m, other=0.0).to(tl.float32)
    a = tl.load(a_p + row * N + o, mask=m, other=0.0).to(tl.float32)
    hr = tl.rsqrt(tl.sum(h * h, axis=0) / N + 1e-6)
    z = x + a * (h * hr - x)
    zr = tl.rsqrt(tl.sum(z * z, axis=0) / N + 1e-6)
    tl.store(y_p + row * N + o, (z * zr).to(tl.float16), mask=m)


def ngpt_ref(h, x, a):
    h, x, a = h.float(), x.float(), a.float()
    rms = lambda t: t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6)
    return rms(x + a * (rms(h) - x))


def lngemm_ref(x, g, b, w):
    h = torch.nn.functional.layer_norm(x.float(), (x.shape[-1],), g.float(), b.float(), 1e-5)
    return h.half().float() @ w.float()


def rel(o, r):
    return ((o.float() - r).norm() / r.norm()).item()


def time_us(fn):
    return do_bench_cudagraph(fn) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--gen", default="bench/gpu/gen")
    args = ap.parse_args()
    rows = []
    import glob, os

    def record(case, variant, cfg, t, err):
        rows.append({"case": case, "variant": variant, "config": cfg, "time_us": t, "rel_l2": err})
        c = " ".join(f"{k.replace('BLOCK_', '')}={v}" for k, v in (cfg or {}).items())
        print(f"  {variant:16s} {c:70s} {t:8.2f} us  err {err:.1e}", flush=True)
        if args.out:
            json.dump({"rows": rows, "torch": torch.__version__, "triton": triton.__version__},
                      open(args.out, "w"), indent=1)

    def sweep(case, m, name, cfgs, inputs, r):
        for c in cfgs:
            t0 = time.time()
            try:
                o = m.run(*inputs, config=c)
                t = time_us(lambda: m.run(*inputs, config=c))
                record(case, f"{name} {m.ESTIMATE['kernels']}k", c, t, rel(o, r))
            except Exception as e:
                print(f"  {name} {c}: failed {str(e)[:120]}", flush=True)
            if time.time() - t0 > 20:
                print(f"  ({time.time() - t0:.0f} s)", flush=True)

    for B in (1, 8, 16):
        case = f"ngpt_B{B}"
        torch.manual_seed(B)
        h, x, a = (torch.randn(B, 4096, device="cuda", dtype=torch.float16) for _ in range(3))
        r = ngpt_ref(h, x, a)
        print(case, flush=True)
        cf = torch.compile(lambda h, x, a: ngpt_ref(h, x, a).half())
        o = cf(h, x, a)
        record(case, "torch.compile", None, time_us(lambda: cf(h, x, a)), rel(o, r))
        y = torch.empty_like(h)
        for w in (4, 8):
            ngpt_row[(B,)](h, x, a, y, N=4096, BLOCK=4096, num_warps=w)
            record(case, "hand row kernel", {"num_warps": w},
                   time_us(lambda: ngpt_row[(B,)](h, x, a, y, N=4096, BLOCK=4096, num_warps=w)), rel(y, r))
        for p in sorted(glob.glob(f"{args.gen}/{case}/*.py")):
            name = os.path.basename(p)[:-3]
            m = load_src(open(p).read(), f"{name}_{B}")
            if m.ESTIMATE["kernels"] != 1:
                continue
            d = m.DEFAULT_CONFIG
            g1 = [k for k in d if k.startswith("BLOCK_g") and k.endswith("_1")]
            g0 = [k for k in d if k.startswith("BLOCK_g") and k.endswith("_0")]
            cfgs = [dict(d)]
            for kb, w, st in ((4096, 4, 1), (4096, 8, 1), (4096, 8, 2), (2048, 8, 1), (1024, 8, 1)):
                c = dict(d, BLOCK_k4096=kb, num_warps=w, num_stages=st)
                c.update({k: 4096 for k in g1})
                c.update({k: 1 for k in g0})
                cfgs.append(c)
            sweep(case, m, name, cfgs, (h, x, a), r)

    for B in (16, 8):
        case = f"layernorm_gemm_B{B}"
        torch.manual_seed(B)
        x = torch.randn(B, 1024, device="cuda", dtype=torch.float16)
        g = torch.rand(1024, device="cuda", dtype=torch.float16) + 0.5
        b = torch.randn(1024, device="cuda", dtype=torch.float16)
        w = torch.randn(1024, 4096, device="cuda", dtype=torch.float16) / 32
        r = lngemm_ref(x, g, b, w)
        print(case, flush=True)
        f = lambda x, g, b, w: torch.nn.functional.layer_norm(x, (1024,), g, b, 1e-5) @ w
        cf = torch.compile(f)
        o = cf(x, g, b, w)
        record(case, "torch.compile", None, time_us(lambda: cf(x, g, b, w)), rel(o, r))
        p = f"{args.gen}/{case}/layernorm_gemm_c6.py"
        src, axes = rewrite_stat_loops(open(p).read())
        m = load_src(src, f"c6_{B}")
        cfgs = [dict(m.DEFAULT_CONFIG)]
        for gb, kb in ((32, 64), (64, 64), (32, 128)):
            for rb in (kb, 256, 1024):
                for wp, st in ((4, 4), (8, 3)):
                    c = dict(m.DEFAULT_CONFIG, BLOCK_k1024=kb, BLOCK_g0_1=gb, num_stages=st, num_warps=wp)
                    c.update({f"RB_{ax}": rb for ax in axes})
                    cfgs.append(c)
        sweep(case, m, "c6", cfgs, (x, g, b, w), r)


if __name__ == "__main__":
    sys.exit(main())
