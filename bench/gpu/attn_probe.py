"""Probe: efir's one-kernel causal prefill attention (a generated module)
against hand-written Triton variants of the same algorithm and plain
FlashAttention-2, and SDPA cuDNN, in one process (triton.testing.do_bench,
ms -> us), at B=16 and B=1, 32 heads, 1024 tokens, head dim 128, f16.

Variants of the hand kernel: old-form (the tile's own max, then the merge
rescales both sides, as efir emitted before 2026-12-01 s21), rebase-exp2
(probabilities at the merged max, exp2; S rounded to f16 as the source
program does), fa2 (no rounding of S, no guards).

Usage (GPU machine, after `bash bench/gpu/prepare.sh`):
  cd bench/gpu/gen && python3 ../attn_probe.py attn_prefill_B16/attn_prefill_c0.py attn_prefill_B1/attn_prefill_c0.py
Results: bench/results/2026-12-01-s21-h200-attn-probe.md
"""
import importlib.util, sys, itertools, math, json
import torch, triton, triton.language as tl
from triton.testing import do_bench

def load(p):
    spec = importlib.util.spec_from_file_location("m" + str(abs(hash(p))), p)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m

@triton.jit
def _fa(Q, K, V, O, sm, N: tl.constexpr, H: tl.constexpr, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
        REBASE: tl.constexpr, EXP2: tl.constexpr, ROUND: tl.constexpr, GUARD: tl.constexpr):
    pm = tl.program_id(0); bh = tl.program_id(1)
    base = bh.to(tl.int64) * N * D
    om = pm * BM + tl.arange(0, BM); od = tl.arange(0, D)
    q = tl.load(Q + base + om[:, None] * D + od[None, :])
    m_i = tl.full([BM], float('-inf'), tl.float32); l_i = tl.zeros([BM], tl.float32); acc = tl.zeros([BM, D], tl.float32)
    hi = (pm + 1) * BM
    lo = (pm * BM) // BN * BN
    if EXP2:
        qs = sm * 1.4426950408889634
    else:
        qs = sm
    for st in range(0, hi, BN):
        on = st + tl.arange(0, BN)
        k = tl.load(K + base + on[None, :] * D + od[:, None])
        s = tl.dot(q, k)
        if ROUND:
            s = s.to(tl.float16).to(tl.float32)
        s = s * qs
        if st >= lo:
            s = tl.where(om[:, None] >= on[None, :], s, float('-inf'))
        v = tl.load(V + base + on[:, None] * D + od[None, :])
        if REBASE:
            m_new = tl.maximum(m_i, tl.max(s, 1))
            if EXP2:
                p = tl.math.exp2(s - m_new[:, None]); alpha = tl.math.exp2(m_i - m_new)
            else:
                p = tl.exp(s - m_new[:, None]); alpha = tl.exp(m_i - m_new)
            if GUARD:
                p = tl.where((m_new == float('-inf'))[:, None], 0.0, p)
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = tl.dot(p.to(tl.float16), v, acc * alpha[:, None])
            m_i = m_new
        else:
            sl = tl.max(s, 1)
            p = tl.exp(s - sl[:, None])
            if GUARD:
                p = tl.where((sl == float('-inf'))[:, None], 0.0, p)
            ls = tl.sum(p, 1)
            m_new = tl.maximum(m_i, sl)
            alpha = tl.where(m_i == m_new, 1.0, tl.exp(m_i - m_new))
            beta = tl.where(sl == m_new, 1.0, tl.exp(sl - m_new))
            l_i = l_i * alpha + ls * beta
            acc = tl.dot((p * beta[:, None]).to(tl.float16), v, acc * alpha[:, None])
            m_i = m_new
    o = acc / l_i[:, None]
    tl.store(O + base + om[:, None] * D + od[None, :], o.to(tl.float16))

def fa(q, k, v, BM, BN, w, s, **kw):
    B, H, N, D = q.shape
    o = torch.empty_like(q)
    _fa[(N // BM, B * H)](q, k, v, o, 1 / math.sqrt(D), N, H, D, BM, BN, num_warps=w, num_stages=s, **kw)
    return o

def main():
    torch.manual_seed(0)
    res = {}
    for B, path in [(16, sys.argv[1]), (1, sys.argv[2])]:
        q, k, v = [torch.randn(B, 32, 1024, 128, device='cuda', dtype=torch.float16) for _ in range(3)]
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        def err(o): return ((o.float() - ref.float()).norm() / ref.float().norm()).item()
        from torch.nn.attention import sdpa_kernel, SDPBackend
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            t = do_bench(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True), warmup=50, rep=300)
        print(f"B{B} cudnn {t*1000:.1f}", flush=True)
        mod = load(path)
        for BM, BN, w, s in [(64, 64, 4, 2), (128, 64, 8, 2), (128, 64, 8, 3), (64, 32, 4, 3), (128, 32, 8, 3), (128, 128, 8, 2), (64, 64, 4, 3)]:
            cfg = {"BLOCK_g0_2": BM, "BLOCK_k1024": BN, "num_warps": w, "num_stages": s}
            try:
                o = mod.run(q, k, v, config=cfg); e = err(o)
                t = do_bench(lambda: mod.run(q, k, v, config=cfg), warmup=50, rep=300)
                print(f"B{B} efir {BM},{BN},{w},{s}: {t*1000:.1f} err {e:.1e}", flush=True)
            except Exception as ex:
                print(f"B{B} efir {cfg} failed {type(ex).__name__} {str(ex)[:200]}", flush=True)
            for name, kw in [("old-form", dict(REBASE=False, EXP2=False, ROUND=True, GUARD=True)),
                             ("rebase-exp2", dict(REBASE=True, EXP2=True, ROUND=True, GUARD=True)),
                             ("fa2", dict(REBASE=True, EXP2=True, ROUND=False, GUARD=False))]:
                try:
                    o = fa(q, k, v, BM, BN, w, s, **kw); e = err(o)
                    t = do_bench(lambda: fa(q, k, v, BM, BN, w, s, **kw), warmup=50, rep=300)
                    print(f"B{B} {name} {BM},{BN},{w},{s}: {t*1000:.1f} err {e:.1e}", flush=True)
                except Exception as ex:
                    print(f"B{B} {name} failed {type(ex).__name__} {str(ex)[:200]}", flush=True)
if __name__ == '__main__':
    main()
