"""Probe: how fast can Triton (the GPU machine's version) run the suite's
causal prefill (B, 32 heads, 1024 tokens, head dim 128, f16), and which
kernel habits matter: pointer loads against Hopper tensor descriptors (TMA),
the causal loop split at the diagonal, the order of query blocks (heaviest
first), block sizes, warps, stages. Beside SDPA cuDNN and, where given,
efir's generated module. One process, CUDA-graph medians (us).

Usage (GPU machine):
  python3 bench/gpu/attn_tma_probe.py [--efir bench/gpu/gen/attn_prefill_B16/attn_prefill_c0.py] [--out x.json]
"""
import argparse, json, math, sys, importlib.util, time
import torch, triton, triton.language as tl


@triton.jit
def _inner(acc, l_i, m_i, q, kb, vb, desc_k, desc_v, off_kv, qk_scale, om, lo, hi,
           BN: tl.constexpr, D: tl.constexpr, MASK: tl.constexpr, DESC: tl.constexpr):
    od = tl.arange(0, D)
    for st in tl.range(lo, hi, BN):
        on = st + tl.arange(0, BN)
        if DESC:
            k = desc_k.load([off_kv + st, 0]).T
        else:
            k = tl.load(kb + on[None, :] * D + od[:, None])
        qk = tl.dot(q, k)
        if MASK:
            qk = qk * qk_scale + tl.where(om[:, None] >= on[None, :], 0.0, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk = qk - m_ij[:, None]
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if DESC:
            v = desc_v.load([off_kv + st, 0])
        else:
            v = tl.load(vb + on[:, None] * D + od[None, :])
        acc = tl.dot(p.to(tl.float16), v, acc)
        m_i = m_ij
    return acc, l_i, m_i


@triton.jit
def _fwd(Q, K, V, O, sm_scale, N: tl.constexpr, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
         DESC: tl.constexpr, SPLIT: tl.constexpr, REVERSE: tl.constexpr, NBH):
    if REVERSE:
        pm = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        pm = tl.program_id(0)
    bh = tl.program_id(1)
    om = pm * BM + tl.arange(0, BM)
    od = tl.arange(0, D)
    base = bh.to(tl.int64) * N * D
    off_kv = bh * N
    if DESC:
        desc_q = tl.make_tensor_descriptor(Q, shape=[NBH * N, D], strides=[D, 1], block_shape=[BM, D])
        desc_k = tl.make_tensor_descriptor(K, shape=[NBH * N, D], strides=[D, 1], block_shape=[BN, D])
        desc_v = tl.make_tensor_descriptor(V, shape=[NBH * N, D], strides=[D, 1], block_shape=[BN, D])
        desc_o = tl.make_tensor_descriptor(O, shape=[NBH * N, D], strides=[D, 1], block_shape=[BM, D])
        q = desc_q.load([off_kv + pm * BM, 0])
    else:
        desc_k = K
        desc_v = V
        desc_o = O
        q = tl.load(Q + base + om[:, None] * D + od[None, :])
    m_i = tl.full([BM], float('-inf'), tl.float32)
    l_i = tl.zeros([BM], tl.float32) + 1.0
    acc = tl.zeros([BM, D], tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    kb = K + base
    vb = V + base
    if SPLIT:
        acc, l_i, m_i = _inner(acc, l_i, m_i, q, kb, vb, desc_k, desc_v, off_kv, qk_scale, om, 0, pm * BM,
                               BN, D, False, DESC)
        acc, l_i, m_i = _inner(acc, l_i, m_i, q, kb, vb, desc_k, desc_v, off_kv, qk_scale, om, pm * BM, (pm + 1) * BM,
                               BN, D, True, DESC)
    else:
        acc, l_i, m_i = _inner(acc, l_i, m_i, q, kb, vb, desc_k, desc_v, off_kv, qk_scale, om, 0, (pm + 1) * BM,
                               BN, D, True, DESC)
    o = (acc / l_i[:, None]).to(tl.float16)
    if DESC:
        desc_o.store([off_kv + pm * BM, 0], o)
    else:
        tl.store(O + base + om[:, None] * D + od[None, :], o)


def fwd(q, k, v, o, BM, BN, w, s, desc, split, reverse):
    B, H, N, D = q.shape
    _fwd[(N // BM, B * H)](q, k, v, o, 1 / math.sqrt(D), N, D, BM, BN, desc, split, reverse, B * H,
                           num_warps=w, num_stages=s)
    return o


def bench(fn):
    fn()
    torch.cuda.synchronize()
    return triton.testing.do_bench_cudagraph(fn, rep=200) * 1000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--efir", action="append", default=[], help="B:path of a generated module")
    ap.add_argument("--batches", default="16,1")
    ap.add_argument("--out")
    a = ap.parse_args()
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda"))
    print(torch.cuda.get_device_name(), "triton", triton.__version__, flush=True)
    rows = []
    torch.manual_seed(0)
    efir = {int(s.split(":")[0]): s.split(":", 1)[1] for s in a.efir}
    for B in [int(x) for x in a.batches.split(",")]:
        q, k, v = [torch.randn(B, 32, 1024, 128, device="cuda", dtype=torch.float16) for _ in range(3)]
        ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
        err = lambda o: ((o.float() - ref).norm() / ref.norm()).item()
        from torch.nn.attention import sdpa_kernel, SDPBackend
        for name, be in [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)]:
            with sdpa_kernel([be]):
                t = bench(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True))
            rows.append(dict(B=B, kernel=name, us=t)); print(f"B{B} {name} {t:.1f}", flush=True)
        o = torch.empty_like(q)
        variants = []
        for desc in (False, True):
            for BM, BN, w, s in [(64, 64, 4, 3), (128, 64, 8, 3), (128, 64, 4, 3), (128, 128, 8, 2), (128, 128, 8, 3), (128, 32, 4, 3), (64, 128, 4, 2)]:
                variants.append((BM, BN, w, s, desc, True, True))
        variants += [(128, 64, 8, 3, True, False, True), (128, 64, 8, 3, True, True, False),
                     (64, 64, 4, 3, False, False, True), (64, 64, 4, 3, False, True, False)]
        for BM, BN, w, s, desc, split, rev in variants:
            tag = f"{'desc' if desc else 'ptr'} {BM},{BN},{w},{s} split={int(split)} rev={int(rev)}"
            try:
                t0 = time.time()
                o.zero_()
                fwd(q, k, v, o, BM, BN, w, s, desc, split, rev)
                e = err(o)
                t = bench(lambda: fwd(q, k, v, o, BM, BN, w, s, desc, split, rev))
                rows.append(dict(B=B, kernel="hand", variant=tag, us=t, rel_l2=e, compile_s=time.time() - t0))
                print(f"B{B} {tag}: {t:.1f} err {e:.1e}", flush=True)
            except Exception as ex:
                rows.append(dict(B=B, kernel="hand", variant=tag, error=f"{type(ex).__name__}: {str(ex)[:300]}"))
                print(f"B{B} {tag} failed {type(ex).__name__} {str(ex)[:200]}", flush=True)
        if B in efir:
            spec = importlib.util.spec_from_file_location("efir_mod", efir[B])
            mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
            base_cfg = dict(getattr(mod, "DEFAULT_CONFIG", {}))
            for over in [{}, dict(BLOCK_g0_2=64, BLOCK_k1024=64, num_warps=4, num_stages=3),
                         dict(BLOCK_g0_2=128, BLOCK_k1024=64, num_warps=8, num_stages=3)]:
                cfg = {**base_cfg, **over}
                try:
                    e = err(mod.run(q, k, v, config=cfg))
                    t = bench(lambda: mod.run(q, k, v, config=cfg))
                    rows.append(dict(B=B, kernel="efir", variant=json.dumps(cfg), us=t, rel_l2=e))
                    print(f"B{B} efir {cfg}: {t:.1f} err {e:.1e}", flush=True)
                except Exception as ex:
                    print(f"B{B} efir failed {type(ex).__name__} {str(ex)[:200]}", flush=True)
        if a.out:
            json.dump(dict(device=torch.cuda.get_device_name(), triton=triton.__version__, rows=rows), open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
