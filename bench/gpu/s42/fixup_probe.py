"""Session 42 probe: lora's split-K with the reduction done in the same
launch by the last program to finish each column tile (a per-tile arrival
counter, acq_rel atomics), against efir's chosen module (split-K partials,
then a second kernel that sums them and adds the low-rank term).

For each B: efir's module at its DEFAULT_CONFIG and at session 41's best
schedule, and the hand kernel over a few tilings, CUDA-graph medians with
input sets rotated as run.py does (us), each checked against the fp32
reference (relative L2). Prints one JSON line per measurement.

Usage: python3 bench/gpu/s42/fixup_probe.py
"""

import json
import pathlib
import sys

import torch
import triton
import triton.language as tl

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import run as bench  # noqa: E402

BEST = {  # session 41's best schedules (run.py, H100)
    1: ("lora_c94", {"BLOCK_k4096": 1024, "BLOCK_n4096": 32, "BLOCK_g0_0": 16, "BLOCK_g0_1": 128, "BLOCK_g1_0": 16, "BLOCK_g1_1": 16, "BLOCK_g2_0": 16, "num_warps": 4, "num_stages": 3, "pdl": 1, "BLOCK_k4096__k0": 64, "BLOCK_k4096__k1": 64}),
    8: ("lora_c91", {"BLOCK_k4096": 1024, "BLOCK_m8": 16, "BLOCK_g0_0": 16, "BLOCK_g0_1": 128, "BLOCK_g1_0": 16, "BLOCK_g1_1": 16, "BLOCK_g2_1": 16, "num_warps": 4, "num_stages": 3, "pdl": 1, "BLOCK_k4096__k0": 64, "BLOCK_k4096__k1": 64}),
    16: ("lora_c91", {"BLOCK_k4096": 1024, "BLOCK_m16": 16, "BLOCK_g0_0": 16, "BLOCK_g0_1": 128, "BLOCK_g1_0": 16, "BLOCK_g1_1": 16, "BLOCK_g2_1": 16, "num_warps": 4, "num_stages": 3, "pdl": 1, "BLOCK_k4096__k0": 64, "BLOCK_k4096__k1": 64}),
}


@triton.jit
def lora_fixup(x, w, a, bm, y, part, parta, cnt, B, N: tl.constexpr, K: tl.constexpr, R: tl.constexpr,
               BB: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SUB: tl.constexpr, S: tl.constexpr, SC: tl.constexpr,
               BARRIER: tl.constexpr = 0):
    pid = tl.program_id(0)
    s = pid % S
    nt = pid // S
    offs_n = nt * BN + tl.arange(0, BN)
    offs_b = tl.arange(0, BB)
    offs_r = tl.arange(0, R)
    rows = offs_b < B
    acc = tl.zeros([BB, BN], tl.float32)
    acca = tl.zeros([BB, R], tl.float32)
    for i in range(BK // SUB):
        offs_k = s * BK + i * SUB + tl.arange(0, SUB)
        xk = tl.load(x + offs_b[:, None] * K + offs_k[None, :], mask=rows[:, None], other=0.0)
        wk = tl.load(w + offs_k[:, None] * N + offs_n[None, :])
        ak = tl.load(a + offs_k[:, None] * R + offs_r[None, :])
        acc = tl.dot(xk, wk, acc)
        acca = tl.dot(xk, ak, acca)
    base = nt * S + s
    tl.store(part + base * BB * BN + offs_b[:, None] * BN + tl.arange(0, BN)[None, :], acc, mask=rows[:, None])
    tl.store(parta + base * BB * R + offs_b[:, None] * R + offs_r[None, :], acca, mask=rows[:, None])
    if BARRIER:
        # a grid-wide barrier (every program resident at once), then
        # program p < the tile count combines tile p
        G = tl.num_programs(0)
        tl.atomic_add(cnt, 1, sem="release", scope="gpu")
        seen = tl.atomic_add(cnt, 0, sem="acquire", scope="gpu")
        while seen < G:
            seen = tl.atomic_add(cnt, 0, sem="acquire", scope="gpu")
        nt = pid
        offs_n = nt * BN + tl.arange(0, BN)
        go = pid < G // S
    else:
        old = tl.atomic_add(cnt + nt, 1, sem="acq_rel", scope="gpu")
        go = old == S - 1
    if go:
        tot = tl.zeros([BB, BN], tl.float32)
        tota = tl.zeros([BB, R], tl.float32)
        for j in range(0, S, SC):
            ss = nt * S + j + tl.arange(0, SC)
            p = tl.load(part + ss[:, None, None] * (BB * BN) + offs_b[None, :, None] * BN + tl.arange(0, BN)[None, None, :],
                        mask=rows[None, :, None], other=0.0, cache_modifier=".cg")
            tot += tl.sum(p, axis=0)
            pa = tl.load(parta + ss[:, None, None] * (BB * R) + offs_b[None, :, None] * R + offs_r[None, None, :],
                         mask=rows[None, :, None], other=0.0, cache_modifier=".cg")
            tota += tl.sum(pa, axis=0)
        xa = tota.to(tl.float16)
        bt = tl.load(bm + offs_r[:, None] * N + offs_n[None, :])
        low = tl.dot(xa, bt).to(tl.float16)
        out = tot.to(tl.float16) + low
        tl.store(y + offs_b[:, None] * N + offs_n[None, :], out, mask=rows[:, None])
        if not BARRIER:
            tl.atomic_xchg(cnt + nt, 0)
    if BARRIER:
        # the last program to leave resets both counters for the next call
        left = tl.atomic_add(cnt + 1, 1, sem="acq_rel", scope="gpu")
        if left == tl.num_programs(0) - 1:
            tl.atomic_xchg(cnt, 0)
            tl.atomic_xchg(cnt + 1, 0)


@triton.jit
def gated_fixup(x, w1, w2, y, part, cnt, B, N: tl.constexpr, K: tl.constexpr,
                BB: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, SUB: tl.constexpr, S: tl.constexpr, SC: tl.constexpr):
    pid = tl.program_id(0)
    s = pid % S
    nt = pid // S
    offs_n = nt * BN + tl.arange(0, BN)
    offs_b = tl.arange(0, BB)
    rows = offs_b < B
    accg = tl.zeros([BB, BN], tl.float32)
    accu = tl.zeros([BB, BN], tl.float32)
    for i in range(BK // SUB):
        offs_k = s * BK + i * SUB + tl.arange(0, SUB)
        xk = tl.load(x + offs_b[:, None] * K + offs_k[None, :], mask=rows[:, None], other=0.0)
        accg = tl.dot(xk, tl.load(w1 + offs_k[:, None] * N + offs_n[None, :]), accg)
        accu = tl.dot(xk, tl.load(w2 + offs_k[:, None] * N + offs_n[None, :]), accu)
    base = (nt * S + s) * 2
    cols = tl.arange(0, BN)
    tl.store(part + base * BB * BN + offs_b[:, None] * BN + cols[None, :], accg, mask=rows[:, None])
    tl.store(part + (base + 1) * BB * BN + offs_b[:, None] * BN + cols[None, :], accu, mask=rows[:, None])
    old = tl.atomic_add(cnt + nt, 1, sem="acq_rel", scope="gpu")
    if old == S - 1:
        g = tl.zeros([BB, BN], tl.float32)
        u = tl.zeros([BB, BN], tl.float32)
        for j in range(0, S, SC):
            ss = (nt * S + j + tl.arange(0, SC)) * 2
            g += tl.sum(tl.load(part + ss[:, None, None] * (BB * BN) + offs_b[None, :, None] * BN + cols[None, None, :],
                                mask=rows[None, :, None], other=0.0, cache_modifier=".cg"), axis=0)
            u += tl.sum(tl.load(part + (ss + 1)[:, None, None] * (BB * BN) + offs_b[None, :, None] * BN + cols[None, None, :],
                                mask=rows[None, :, None], other=0.0, cache_modifier=".cg"), axis=0)
        g16 = g.to(tl.float16)
        sg = tl.sigmoid(g16.to(tl.float32)).to(tl.float16)
        out = (g16 * sg) * u.to(tl.float16)
        tl.store(y + offs_b[:, None] * N + offs_n[None, :], out, mask=rows[:, None])
        tl.atomic_xchg(cnt + nt, 0)


def make_gated(b, bn, bk, sub, warps, stages, sc):
    N = K = 4096
    S = K // bk
    nt = N // bn
    part = torch.empty(nt * S * 2 * 16 * bn, device="cuda", dtype=torch.float32)
    cnt = torch.zeros(nt, device="cuda", dtype=torch.int32)

    def run(x, w1, w2):
        y = torch.empty((b, N), device="cuda", dtype=torch.float16)
        gated_fixup[(nt * S,)](x, w1, w2, y, part, cnt, b, N, K, 16, bn, bk, sub, S, min(sc, S), num_warps=warps, num_stages=stages)
        return y

    return run


GATED_BEST = {
    1: ("gated_mlp_c12", {"BLOCK_k4096": 1024, "BLOCK_n4096": 32, "BLOCK_g0_0": 16, "BLOCK_g0_1": 128, "BLOCK_g1_0": 16, "BLOCK_g1_1": 128, "num_warps": 4, "num_stages": 3, "pdl": 1, "BLOCK_k4096__k0": 64, "BLOCK_k4096__k1": 64}),
    16: ("gated_mlp_c22", {"BLOCK_k4096": 1024, "BLOCK_n4096": 32, "BLOCK_g0_0": 16, "BLOCK_g0_1": 128, "BLOCK_g1_0": 16, "BLOCK_g1_1": 128, "BLOCK_g2_0": 16, "num_warps": 8, "num_stages": 3, "pdl": 1, "BLOCK_k4096__k0": 64, "BLOCK_k4096__k1": 64}),
}


def make_fixup(b, bn, bk, sub, warps, stages, sc, barrier=0):
    N = K = 4096
    R = 16
    S = K // bk
    nt = N // bn
    dev = "cuda"
    part = torch.empty(nt * S * 16 * bn, device=dev, dtype=torch.float32)
    parta = torch.empty(nt * S * 16 * R, device=dev, dtype=torch.float32)
    cnt = torch.zeros(max(nt, 2), device=dev, dtype=torch.int32)

    def run(x, w, a, bm):
        y = torch.empty((b, N), device=dev, dtype=torch.float16)
        lora_fixup[(nt * S,)](x, w, a, bm, y, part, parta, cnt, b, N, K, R, 16, bn, bk, sub, S, min(sc, S), BARRIER=barrier,
                              num_warps=warps, num_stages=stages)
        return y

    return run


def measure(work, b, inputs, ref, variants, copies=4):
    for label, fn in variants:
        rec = {"work": work, "B": b, "variant": label}
        try:
            out = fn(*inputs)
            torch.cuda.synchronize()
            rec["rel_l2"] = bench.rel_l2(out, ref)
            out2 = fn(*inputs)  # the counters reset: a second call is right too
            torch.cuda.synchronize()
            rec["rel_l2_again"] = bench.rel_l2(out2, ref)
            rec["us"] = round(min(bench.timed(fn, work, b, copies) for _ in range(2)), 2)
        except Exception as e:  # noqa: BLE001
            rec["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        print(json.dumps(rec), flush=True)


TILINGS = ((128, 1024, 64, 4, 3), (64, 1024, 64, 4, 3), (128, 512, 64, 4, 3), (64, 512, 64, 4, 3),
           (32, 1024, 64, 4, 3), (128, 256, 64, 4, 3), (128, 1024, 128, 8, 3), (64, 256, 64, 4, 4))


def main():
    for b in (1, 8, 16):
        inputs = bench.make_inputs("lora", b, 0)
        ref = bench.reference("lora", inputs)
        name, best = BEST[b]
        mod = bench.load(HERE.parent / "gen" / f"lora_B{b}" / f"{name}.py")
        variants = [(f"efir {name} default", lambda *xs, m=mod: m.run(*xs)),
                    (f"efir {name} s41 best", lambda *xs, m=mod, c=best: m.run(*xs, config=c)),
                    ("eager", bench.FUNCS["lora"])]
        variants += [(f"fixup bn{bn} bk{bk} sub{sub} w{w} s{st}", make_fixup(b, bn, bk, sub, w, st, 4)) for bn, bk, sub, w, st in TILINGS]
        # the grid barrier only where every program is resident at once
        variants += [(f"barrier bn{bn} bk{bk} sub{sub} w{w} s{st}", make_fixup(b, bn, bk, sub, w, st, 4, barrier=1)) for bn, bk, sub, w, st in TILINGS
                     if (4096 // bn) * (4096 // bk) <= 132]
        measure("lora", b, inputs, ref, variants)
    for b in (1, 16):
        inputs = bench.make_inputs("gated_mlp", b, 0)
        ref = bench.reference("gated_mlp", inputs)
        name, best = GATED_BEST[b]
        mod = bench.load(HERE.parent / "gen" / f"gated_mlp_B{b}" / f"{name}.py")
        variants = [(f"efir {name} default", lambda *xs, m=mod: m.run(*xs)),
                    (f"efir {name} s41 best", lambda *xs, m=mod, c=best: m.run(*xs, config=c))]
        variants += [(f"fixup bn{bn} bk{bk} sub{sub} w{w} s{st}", make_gated(b, bn, bk, sub, w, st, 4)) for bn, bk, sub, w, st in TILINGS[:6]]
        measure("gated_mlp", b, inputs, ref, variants)


if __name__ == "__main__":
    main()
