"""Attention decode (one query token per head, a long K/V cache): what
Triton 3.6 reaches on the GPU when the query row is padded into `tl.dot`
(K and V tiles then feed tensor-core products, which Triton's pipeliner
loads asynchronously, `num_stages` ahead) against the CUDA-core
multiply-and-sum that efir's kernels use for a row of one (plain loads,
not pipelined: sm_90 compiles of attn_decode B=16 show `ld.global`, no
`cp.async`), beside efir's generated modules and SDPA (cuDNN, FLASH).
CUDA-graph medians (us) and relative L2 against SDPA's math backend.

    python3 bench/gpu/decode_probe.py --out x.json [--b 16] [--efir MODULE.py ...]

Hand kernels: one program per (batch, head), keys in blocks of BLOCK_N,
online softmax in FlashAttention-2's order with exp2 and the scale folded;
`dot`: the query padded to 16 rows (15 masked to zero), both products
`tl.dot`; `sum`: the same loop on the CUDA cores with K loaded in its own
layout (keys x head dim, the head dim contiguous)."""
import argparse
import json
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from module_probe import load  # noqa: E402

H, N, D = 32, 4096, 128
SCALE = 1.0 / D**0.5
LOG2E = 1.4426950408889634


@triton.jit
def _dec_dot(q, k, v, o, N: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr, QK: tl.constexpr):
    bh = tl.program_id(0)
    rows = tl.arange(0, 16)
    d = tl.arange(0, D)
    qb = tl.load(q + bh * D + rows[:, None] * 0 + d[None, :], mask=rows[:, None] < 1, other=0.0)
    m = tl.full([16], float("-inf"), tl.float32)
    l = tl.zeros([16], tl.float32)
    acc = tl.zeros([16, D], tl.float32)
    for j in range(0, N, BLOCK_N):
        n = j + tl.arange(0, BLOCK_N)
        kt = tl.load(k + bh * N * D + n[None, :] * D + d[:, None])
        s = tl.dot(qb, kt)
        mn = tl.maximum(m, tl.max(s, 1) * QK)
        p = tl.exp2(s * (QK * 1.4426950408889634) - mn[:, None] * 1.4426950408889634)
        alpha = tl.exp2((m - mn) * 1.4426950408889634)
        l = l * alpha + tl.sum(p, 1)
        vt = tl.load(v + bh * N * D + n[:, None] * D + d[None, :])
        acc = tl.dot(p.to(tl.float16), vt, acc * alpha[:, None])
        m = mn
    out = acc / l[:, None]
    tl.store(o + bh * D + rows[:, None] * 0 + d[None, :], out.to(tl.float16), mask=rows[:, None] < 1)


@triton.jit
def _dec_sum(q, k, v, o, N: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr, QK: tl.constexpr):
    bh = tl.program_id(0)
    d = tl.arange(0, D)
    qv = tl.load(q + bh * D + d).to(tl.float32)
    m = tl.full([1], float("-inf"), tl.float32)
    l = tl.zeros([1], tl.float32)
    acc = tl.zeros([D], tl.float32)
    for j in range(0, N, BLOCK_N):
        n = j + tl.arange(0, BLOCK_N)
        kb = tl.load(k + bh * N * D + n[:, None] * D + d[None, :]).to(tl.float32)
        s = tl.sum(kb * qv[None, :], 1)
        mn = tl.maximum(m, tl.max(s, 0) * QK)
        p = tl.exp2(s * (QK * 1.4426950408889634) - mn * 1.4426950408889634)
        alpha = tl.exp2((m - mn) * 1.4426950408889634)
        l = l * alpha + tl.sum(p, 0)
        vb = tl.load(v + bh * N * D + n[:, None] * D + d[None, :]).to(tl.float32)
        acc = acc * alpha + tl.sum(p[:, None] * vb, 0)
        m = mn
    tl.store(o + bh * D + d, (acc / l).to(tl.float16))


def hand(kern, bn, nw, ns):
    def f(q, k, v):
        b = q.shape[0]
        o = torch.empty_like(q)
        kern[(b * H,)](q, k, v, o, N=N, D=D, BLOCK_N=bn, QK=SCALE, num_warps=nw, num_stages=ns)
        return o
    return f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--b", type=int, default=16)
    ap.add_argument("--efir", nargs="*", default=[])
    a = ap.parse_args()
    torch.manual_seed(0)
    b = a.b
    q = torch.randn(b, H, 1, D, device="cuda", dtype=torch.float16)
    k = torch.randn(b, H, N, D, device="cuda", dtype=torch.float16)
    v = torch.randn(b, H, N, D, device="cuda", dtype=torch.float16)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    F = torch.nn.functional
    with sdpa_kernel(SDPBackend.MATH):
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float()).to(torch.float16)
    cases = {}

    def sdpa(backend):
        def f(q, k, v):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v)
        return f
    cases["sdpa_cudnn"] = sdpa(SDPBackend.CUDNN_ATTENTION)
    cases["sdpa_flash"] = sdpa(SDPBackend.FLASH_ATTENTION)
    for bn in (64, 128):
        for nw, ns in ((4, 2), (4, 3), (4, 4), (8, 3)):
            cases[f"dot_n{bn}_w{nw}_s{ns}"] = hand(_dec_dot, bn, nw, ns)
    for bn in (32, 64):
        for nw in (4, 8):
            cases[f"sum_n{bn}_w{nw}_s2"] = hand(_dec_sum, bn, nw, 2)
    for py in a.efir:
        mod = load(py)
        cases["efir:" + os.path.basename(py)] = (lambda m: (lambda q, k, v: m.run(q, k, v)))(mod)
    rows = []
    nbytes = 2 * b * H * N * D * 2
    for name, f in cases.items():
        try:
            out = f(q, k, v)
            torch.cuda.synchronize()
            rel = float((out.float() - ref.float()).norm() / ref.float().norm())
            us = triton.testing.do_bench_cudagraph(lambda: f(q, k, v), rep=60) * 1000.0
            rows.append({"case": name, "us": round(us, 2), "rel_l2": rel, "TBps": round(nbytes / us / 1e6, 2)})
        except Exception as e:  # noqa: BLE001 (a variant that does not compile or fit)
            rows.append({"case": name, "error": f"{type(e).__name__}: {str(e)[:160]}"})
        print(json.dumps(rows[-1]), flush=True)
        json.dump({"device": torch.cuda.get_device_name(), "B": b, "rows": rows}, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
