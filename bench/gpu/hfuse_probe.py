"""Probe: what the gate and up projections of gated_mlp at B=1 (two split-K
GEMVs of 4096x4096 f16 and a combine) gain from fewer launches. Hand-written
Triton, the same tiles as efir's best schedule of session 30 (K split 512 per
program, 128 columns, sub-blocks of 64 rows of W, rows padded to 16 for
tl.dot, 4 warps, 3 stages), four forms:

  A  two split-K kernels (gate, up) then a combine kernel (efir today)
  B  the two split-K kernels in one launch (program ids split between them)
  C  one split-K kernel whose program loads its X slice once and computes
     both the gate and the up tile, then a combine kernel
  D  C with the combine done by the last program of each column block
     (f32 atomics into a workspace, an arrival counter; one launch)

Prints times (CUDA graphs, median) beside eager and torch.compile.
Usage (GPU machine, repo root): python3 bench/gpu/hfuse_probe.py"""

import sys

import torch
import triton
import triton.language as tl
from triton.testing import do_bench_cudagraph

K = N = 4096


@triton.jit
def _splitk_body(pid, x, w, part, N: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr, SUB: tl.constexpr, NS: tl.constexpr):
    ks = pid % NS
    nb = pid // NS
    offn = nb * BN + tl.arange(0, BN)
    rows = tl.arange(0, 16)
    acc = tl.zeros([16, BN], tl.float32)
    for i in range(0, BK // SUB):
        offk = ks * BK + i * SUB + tl.arange(0, SUB)
        wt = tl.load(w + offk[:, None] * N + offn[None, :])
        xt = tl.load(x + rows[:, None] * 0 + offk[None, :], mask=rows[:, None] < 1, other=0.0)
        acc = tl.dot(xt, wt, acc)
    tl.store(part + ks * N + rows[:, None] * 0 + offn[None, :], acc, mask=rows[:, None] < 1)


@triton.jit
def splitk(x, w, part, N: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr, SUB: tl.constexpr, NS: tl.constexpr):
    _splitk_body(tl.program_id(0), x, w, part, N, BK, BN, SUB, NS)


@triton.jit
def splitk_pair(x, w1, w2, p1, p2, N: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr, SUB: tl.constexpr, NS: tl.constexpr, G0: tl.constexpr):
    pid = tl.program_id(0)
    if pid < G0:
        _splitk_body(pid, x, w1, p1, N, BK, BN, SUB, NS)
    else:
        _splitk_body(pid - G0, x, w2, p2, N, BK, BN, SUB, NS)


@triton.jit
def splitk_both(x, w1, w2, p1, p2, N: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr, SUB: tl.constexpr, NS: tl.constexpr):
    pid = tl.program_id(0)
    ks = pid % NS
    nb = pid // NS
    offn = nb * BN + tl.arange(0, BN)
    rows = tl.arange(0, 16)
    a1 = tl.zeros([16, BN], tl.float32)
    a2 = tl.zeros([16, BN], tl.float32)
    for i in range(0, BK // SUB):
        offk = ks * BK + i * SUB + tl.arange(0, SUB)
        xt = tl.load(x + rows[:, None] * 0 + offk[None, :], mask=rows[:, None] < 1, other=0.0)
        a1 = tl.dot(xt, tl.load(w1 + offk[:, None] * N + offn[None, :]), a1)
        a2 = tl.dot(xt, tl.load(w2 + offk[:, None] * N + offn[None, :]), a2)
    tl.store(p1 + ks * N + rows[:, None] * 0 + offn[None, :], a1, mask=rows[:, None] < 1)
    tl.store(p2 + ks * N + rows[:, None] * 0 + offn[None, :], a2, mask=rows[:, None] < 1)


@triton.jit
def combine(p1, p2, y, N: tl.constexpr, NS: tl.constexpr, BN: tl.constexpr):
    offn = tl.program_id(0) * BN + tl.arange(0, BN)
    s = tl.arange(0, NS)
    g = tl.sum(tl.load(p1 + s[:, None] * N + offn[None, :]), axis=0)
    u = tl.sum(tl.load(p2 + s[:, None] * N + offn[None, :]), axis=0)
    g16 = g.to(tl.float16)
    silu = g16 * tl.sigmoid(g16.to(tl.float32)).to(tl.float16)
    tl.store(y + offn, silu * u.to(tl.float16))


@triton.jit
def splitk_both_last(x, w1, w2, ws, cnt, y, N: tl.constexpr, BK: tl.constexpr, BN: tl.constexpr, SUB: tl.constexpr, NS: tl.constexpr):
    pid = tl.program_id(0)
    ks = pid % NS
    nb = pid // NS
    offn = nb * BN + tl.arange(0, BN)
    rows = tl.arange(0, 16)
    a1 = tl.zeros([16, BN], tl.float32)
    a2 = tl.zeros([16, BN], tl.float32)
    for i in range(0, BK // SUB):
        offk = ks * BK + i * SUB + tl.arange(0, SUB)
        xt = tl.load(x + rows[:, None] * 0 + offk[None, :], mask=rows[:, None] < 1, other=0.0)
        a1 = tl.dot(xt, tl.load(w1 + offk[:, None] * N + offn[None, :]), a1)
        a2 = tl.dot(xt, tl.load(w2 + offk[:, None] * N + offn[None, :]), a2)
    g = tl.sum(a1, axis=0)  # rows other than 0 are zero
    u = tl.sum(a2, axis=0)
    tl.atomic_add(ws + offn, g, sem="relaxed")
    tl.atomic_add(ws + N + offn, u, sem="relaxed")
    done = tl.atomic_add(cnt + nb, 1, sem="acq_rel")
    if done == NS - 1:
        g = tl.load(ws + offn, cache_modifier=".cg")
        u = tl.load(ws + N + offn, cache_modifier=".cg")
        g16 = g.to(tl.float16)
        silu = g16 * tl.sigmoid(g16.to(tl.float32)).to(tl.float16)
        tl.store(y + offn, silu * u.to(tl.float16))
        tl.store(ws + offn, tl.zeros([BN], tl.float32))
        tl.store(ws + N + offn, tl.zeros([BN], tl.float32))
        tl.atomic_xchg(cnt + nb, 0)


def main():
    torch.manual_seed(0)
    dev = "cuda"
    x = torch.randn(1, K, device=dev, dtype=torch.float16)
    w1 = (torch.randn(K, N, device=dev) / 64).half()
    w2 = (torch.randn(K, N, device=dev) / 64).half()

    def eager():
        return torch.nn.functional.silu(x @ w1) * (x @ w2)

    ref = eager().float()
    comp = torch.compile(eager, mode="max-autotune-no-cudagraphs")
    results = {}
    for BK, BN, SUB, nw, ns in [(512, 128, 64, 4, 3), (256, 128, 64, 4, 3), (512, 64, 64, 4, 3), (1024, 128, 64, 4, 3), (256, 64, 64, 4, 4)]:
        NS = K // BK
        p1 = torch.empty(NS, N, device=dev, dtype=torch.float32)
        p2 = torch.empty(NS, N, device=dev, dtype=torch.float32)
        ws = torch.zeros(2, N, device=dev, dtype=torch.float32)
        cnt = torch.zeros(N // BN, device=dev, dtype=torch.int32)
        y = torch.empty(1, N, device=dev, dtype=torch.float16)
        G = NS * (N // BN)
        kw = dict(N=N, BK=BK, BN=BN, SUB=SUB, NS=NS, num_warps=nw, num_stages=ns)
        CB = 64

        def a():
            splitk[(G,)](x, w1, p1, **kw)
            splitk[(G,)](x, w2, p2, **kw)
            combine[(N // CB,)](p1, p2, y, N=N, NS=NS, BN=CB)
            return y

        def b():
            splitk_pair[(2 * G,)](x, w1, w2, p1, p2, G0=G, **kw)
            combine[(N // CB,)](p1, p2, y, N=N, NS=NS, BN=CB)
            return y

        def c():
            splitk_both[(G,)](x, w1, w2, p1, p2, **kw)
            combine[(N // CB,)](p1, p2, y, N=N, NS=NS, BN=CB)
            return y

        def d():
            splitk_both_last[(G,)](x, w1, w2, ws, cnt, y, **kw)
            return y

        for name, fn in [("A two+combine", a), ("B pair+combine", b), ("C both+combine", c), ("D both,last", d)]:
            try:
                out = fn().float()
                torch.cuda.synchronize()
                err = float((out - ref).norm() / ref.norm())
                us = do_bench_cudagraph(fn, rep=200) * 1e3
                err2 = float((fn().float() - ref).norm() / ref.norm())
                print(f"BK={BK} BN={BN} SUB={SUB} w{nw} s{ns} {name:16s} {us:7.1f} us  err {err:.1e}/{err2:.1e}", flush=True)
                results[(BK, BN, name)] = us
            except Exception as e:  # noqa: BLE001
                print(f"BK={BK} BN={BN} {name}: {type(e).__name__}: {str(e)[:200]}", flush=True)
    for name, fn in [("eager", eager), ("compile", comp)]:
        fn()
        us = do_bench_cudagraph(fn, rep=200) * 1e3
        print(f"{name:16s} {us:7.1f} us", flush=True)
    print("floor (64 MiB at 3.03 TB/s)", 2 * K * N * 2 / 3.03e12 * 1e6, "us")


if __name__ == "__main__":
    sys.exit(main())
