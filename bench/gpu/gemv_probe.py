"""Probe what a fast skinny matmul (GEMV, B=1..16 rows) looks like on this GPU,
and whether efir's emitted kernels lose time to layout conversions of values
reshaped before a K loop. Prints figures; commits nothing.

Usage (GPU machine, repo root, after `bash bench/gpu/prepare.sh`):
    python3 bench/gpu/gemv_probe.py [--quick]

Part 1 times hand-written Triton kernels for Out[M, N] = X[M, K] @ W[K, N]
(W row-major, N contiguous) at the down projection's shape (K 11008, N 4096)
and the gate projection's (K 4096, N 11008): a grid over N blocks, an optional
split of K over S programs (partials in f32, summed by a second small kernel),
and three accumulator forms: `tl.sum` per trip into [M, BN], a 3-D
accumulator [M, BK, BN] reduced once after the loop, and `tl.dot` over a
16-row padded tile.

Part 2 re-times efir's emitted candidates (bench/gpu/gen) as emitted and with
`tl.reshape(v, [N, 1])` of a 1-D value replaced by `v[:, None]`, kernel by
kernel with torch.profiler."""

import collections
import pathlib
import re
import sys

import torch
import triton
import triton.language as tl
from torch.profiler import ProfilerActivity, profile
from triton.testing import do_bench_cudagraph

sys.path.insert(0, "bench/gpu")
import run  # noqa: E402

QUICK = "--quick" in sys.argv


@triton.jit
def gemv_kernel(x, w, part, M: tl.constexpr, K: tl.constexpr, N: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, KS: tl.constexpr, FORM: tl.constexpr):
    pn = tl.program_id(0)
    ps = tl.program_id(1)
    offs_n = pn * BN + tl.arange(0, BN)
    offs_m = tl.arange(0, BM)
    k0 = ps * KS
    if FORM == 0:
        acc = tl.zeros([BM, BN], dtype=tl.float32)
        for kk in range(0, KS, BK):
            offs_k = k0 + kk + tl.arange(0, BK)
            a = tl.load(x + offs_m[:, None] * K + offs_k[None, :], mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
            b = tl.load(w + offs_k[:, None] * N + offs_n[None, :], mask=offs_k[:, None] < K, other=0.0)
            acc += tl.sum(a.to(tl.float32)[:, :, None] * b.to(tl.float32)[None, :, :], axis=1)
        res = acc
    elif FORM == 1:
        acc3 = tl.zeros([BM, BK, BN], dtype=tl.float32)
        for kk in range(0, KS, BK):
            offs_k = k0 + kk + tl.arange(0, BK)
            a = tl.load(x + offs_m[:, None] * K + offs_k[None, :], mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
            b = tl.load(w + offs_k[:, None] * N + offs_n[None, :], mask=offs_k[:, None] < K, other=0.0)
            acc3 += a.to(tl.float32)[:, :, None] * b.to(tl.float32)[None, :, :]
        res = tl.sum(acc3, axis=1)
    else:
        acc = tl.zeros([BM, BN], dtype=tl.float32)
        for kk in range(0, KS, BK):
            offs_k = k0 + kk + tl.arange(0, BK)
            a = tl.load(x + offs_m[:, None] * K + offs_k[None, :], mask=(offs_m[:, None] < M) & (offs_k[None, :] < K), other=0.0)
            b = tl.load(w + offs_k[:, None] * N + offs_n[None, :], mask=offs_k[:, None] < K, other=0.0)
            acc = tl.dot(a, b, acc)
        res = acc
    tl.store(part + ps * (M * N) + offs_m[:, None] * N + offs_n[None, :], res, mask=offs_m[:, None] < M)


def us(fn):
    return do_bench_cudagraph(fn, rep=30) * 1000.0


def part1():
    print("== part 1: hand-written skinny matmuls (kernel only; the split-K sum is timed apart)")
    for (K, N) in ((11008, 4096),):
        for M in (1, 8):
            x = torch.randn(M, K, device="cuda", dtype=torch.float16)
            w = torch.randn(K, N, device="cuda", dtype=torch.float16) / K**0.5
            ref = (x.float() @ w.float())
            floor = K * N * 2 / 4.3e12 * 1e6
            rows = []
            for form in (0, 1, 2):
                BM = 16 if form == 2 else max(1, triton.next_power_of_2(M))
                for BN in (32, 64, 128, 256):
                    for BK in (64, 128):
                        if form == 1 and BM * BK * BN > 16384:
                            continue
                        if form == 0 and BM * BK * BN > 65536:
                            continue
                        for S in (1, 8, 32):
                            KS = triton.cdiv(triton.cdiv(K, S), BK) * BK
                            for warps in (4,):
                                part = torch.empty(S, M, N, device="cuda", dtype=torch.float32)
                                grid = (N // BN, S)

                                def f():
                                    gemv_kernel[grid](x, w, part, M, K, N, BM, BN, BK, KS, form, num_warps=warps, num_stages=3)
                                try:
                                    f()
                                    torch.cuda.synchronize()
                                    err = ((part.sum(0) - ref).norm() / ref.norm()).item()
                                    t = us(f)
                                except Exception as e:  # noqa: BLE001
                                    rows.append((1e9, form, BN, BK, S, warps, str(e)[:60]))
                                    continue
                                rows.append((t, form, BN, BK, S, warps, f"err {err:.1e}"))
            rows.sort()
            print(f"-- M={M} K={K} N={N}: floor {floor:.1f} us; best 12 of {len(rows)}")
            for t, form, BN, BK, S, warps, note in rows[:12]:
                print(f"   {t:7.1f} us  form {['sum', 'acc3', 'dot16'][form]:5s} BN {BN:3d} BK {BK:3d} S {S:2d} w{warps}  {note}")
            for form in (0, 1, 2):
                best = min((r for r in rows if r[1] == form), default=None)
                if best:
                    print(f"   best of form {['sum', 'acc3', 'dot16'][form]}: {best[0]:.1f} us BN {best[2]} BK {best[3]} S {best[4]} w{best[5]}")
            for S in (4, 8, 16, 32):
                part = torch.empty(S, M, N, device="cuda", dtype=torch.float32)
                print(f"   split sum over S={S}: torch {us(lambda: part.sum(0)):.1f} us")


def kernel_times(mod, ins, cfg, reps=20):
    for _ in range(3):
        mod.run(*ins, config=cfg)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            mod.run(*ins, config=cfg)
        torch.cuda.synchronize()
    times = collections.OrderedDict()
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            times.setdefault(ev.name, 0.0)
            times[ev.name] += ev.device_time / reps
    return times


RESHAPE = re.compile(r"tl\.reshape\((\w+), \[(\w+), 1\]\)")


def part2():
    print("== part 2: emitted candidates, as emitted and with 1-D reshapes as [:, None]")
    cases = [("rmsnorm_swiglu", 8, "rmsnorm_swiglu_c34"), ("rmsnorm_swiglu", 1, "rmsnorm_swiglu_c48"), ("layernorm_gemm", 1, None), ("rmsnorm_mlp", 1, None)]
    tmp = pathlib.Path("/tmp/gemv_probe")
    tmp.mkdir(exist_ok=True)
    for name, b, cand in cases:
        d = run.GEN / f"{name}_B{b}"
        files = [d / f"{cand}.py"] if cand and (d / f"{cand}.py").exists() else sorted(d.glob("*.py"))[:2]
        ins = run.make_inputs(name, b, 1)
        ref = run.reference(name, ins)
        for path in files:
            src = path.read_text()
            patched = RESHAPE.sub(lambda m: f"{m.group(1)}[:, None]", src)
            n = len(RESHAPE.findall(src))
            p2 = tmp / f"{path.stem}_p.py"
            p2.write_text(patched)
            for label, p in (("emitted", path), (f"patched({n})", p2)):
                try:
                    mod = run.load(p)
                    out = mod.run(*ins)
                    err = run.rel_l2(out[0] if isinstance(out, tuple) else out, ref)
                    t = us(lambda: mod.run(*ins))
                    kt = kernel_times(mod, ins, None)
                    ks = " ".join(f"{v:.1f}" for v in kt.values())
                    print(f"   {name} B={b} {path.stem} {label:12s} {t:7.1f} us (err {err:.1e})  kernels: {ks}")
                except Exception as e:  # noqa: BLE001
                    print(f"   {name} B={b} {path.stem} {label}: FAILED {str(e)[:200]}")


if __name__ == "__main__":
    part2()
    part1()
