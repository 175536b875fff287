"""What one launch could do for lora (Y = X @ W + (X @ A) @ Bm, X[B, 4096],
W[4096, 4096], A[4096, 16], Bm[16, 4096], fp16): hand-written split-K
kernels in ONE launch against efir's emitted module (two launches: the
split-K partials, then a combine), to decide whether a single-launch
split-K is worth building into the emitter (issue 27: lora at 0.73 of the
floor on the H100). Prints one JSON line per variant; commits nothing.

Each program (tile n, split s) computes its K slice of X @ W and, by
linearity, its slice's low-rank term (X[:, ks] @ A[ks, :]) @ Bm[:, n], so
no program waits on another's X @ A. The splits of a tile are summed:

- mode "atomic": fp32 atomic adds into a scratch accumulator; the last
  program of the tile (a per-tile counter, acq_rel) casts it to fp16,
  stores the result and zeroes the accumulator and the counter for the next
  call (no memset launch);
- mode "scratch": each split stores its partial; the tile's last program
  sums them;
- mode "barrier": the partials, then combine programs in the same launch
  that wait on one counter for all partial programs (the generic
  dependent launch group);
- mode "two_pdl": two launches with programmatic dependent launch (as
  efir emits them);
- mode "two": the partials, then a second combine launch (the emitted
  structure, hand-written).

Usage (GPU, repo root, after bench/gpu/prepare.sh):
    python3 bench/gpu/s45/lora_probe.py [OUT.json] [MODES,...] [B,...]
"""

import importlib.util
import itertools
import json
import pathlib
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, "bench/gpu")
import run  # noqa: E402

K = 4096
N = 4096
R = 16


@triton.jit
def lora_split(x, w, a, bm, acc32, part, cnt, out, M, K: tl.constexpr, N: tl.constexpr, R: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, NS: tl.constexpr, MODE: tl.constexpr):
    pid = tl.program_id(0)
    pn = pid // NS
    ps = pid % NS
    KS: tl.constexpr = K // NS
    offs_n = pn * BN + tl.arange(0, BN)
    offs_m = tl.arange(0, BM)
    offs_r = tl.arange(0, R)
    mrow = offs_m[:, None] < M
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    accr = tl.zeros([BM, R], dtype=tl.float32)
    for kk in range(0, KS, BK):
        offs_k = ps * KS + kk + tl.arange(0, BK)
        xa = tl.load(x + offs_m[:, None] * K + offs_k[None, :], mask=mrow, other=0.0)
        wb = tl.load(w + offs_k[:, None] * N + offs_n[None, :])
        ab = tl.load(a + offs_k[:, None] * R + offs_r[None, :])
        acc = tl.dot(xa, wb, acc)
        accr = tl.dot(xa, ab, accr)
    bmb = tl.load(bm + offs_r[:, None] * N + offs_n[None, :])
    acc = tl.dot(accr.to(tl.float16), bmb, acc)
    tile = offs_m[:, None] * N + offs_n[None, :]
    if MODE == 0:
        tl.atomic_add(acc32 + tile, acc, mask=mrow, sem="relaxed")
        tl.debug_barrier()
        c = tl.atomic_add(cnt + pn, 1, sem="acq_rel")
        if c == NS - 1:
            tot = tl.load(acc32 + tile, mask=mrow, other=0.0, cache_modifier=".cg")
            tl.store(out + tile, tot.to(tl.float16), mask=mrow)
            tl.store(acc32 + tile, tl.zeros([BM, BN], dtype=tl.float32), mask=mrow)
            tl.store(cnt + pn, 0)
    elif MODE == 1:
        tl.store(part + ps * (BM * N) + tile, acc)
        tl.debug_barrier()
        c = tl.atomic_add(cnt + pn, 1, sem="acq_rel")
        if c == NS - 1:
            offs_s = tl.arange(0, NS)
            p = tl.load(part + offs_s[:, None, None] * (BM * N) + tile[None, :, :], cache_modifier=".cg")
            tot = tl.sum(p, axis=0)
            tl.store(out + tile, tot.to(tl.float16), mask=mrow)
            tl.store(cnt + pn, 0)
    else:
        if MODE == 3:
            tl.extra.cuda.gdc_wait()
            tl.extra.cuda.gdc_launch_dependents()
        tl.store(part + ps * (BM * N) + tile, acc)


@triton.jit
def lora_barrier(x, w, a, bm, part, cnt, out, M, K: tl.constexpr, N: tl.constexpr, R: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, NS: tl.constexpr):
    """The split programs, then N // BN combine programs that wait for all
    of them (one counter; the last combine program resets it)."""
    pid = tl.program_id(0)
    G: tl.constexpr = (N // BN) * NS
    if pid < G:
        lora_split(x, w, a, bm, part, part, cnt, out, M, K, N, R, BM, BN, BK, NS, 2)
        tl.debug_barrier()
        tl.atomic_add(cnt, 1, sem="release")
    else:
        while tl.atomic_add(cnt, 0, sem="acquire") < G:
            pass
        tl.debug_barrier()
        lora_combine(part, out, M, N, BM, BN, NS, 0, G)
        tl.debug_barrier()
        d = tl.atomic_add(cnt + 1, 1, sem="relaxed")
        if d == N // BN - 1:
            tl.store(cnt, 0)
            tl.store(cnt + 1, 0)


@triton.jit
def read_sum(w, out, NEL: tl.constexpr, BLOCK: tl.constexpr):
    """Reads NEL fp16 elements once (a read-only stream: what any lora
    kernel must at least do with W), one partial sum a program."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(w + offs)
    tl.store(out + pid, tl.sum(v.to(tl.float32), axis=0))


@triton.jit
def lora_combine(part, out, M, N: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, NS: tl.constexpr, PDL: tl.constexpr = 0, PID_OFF=0):
    if PDL:
        tl.extra.cuda.gdc_wait()
        tl.extra.cuda.gdc_launch_dependents()
    pn = tl.program_id(0) - PID_OFF
    offs_n = pn * BN + tl.arange(0, BN)
    offs_m = tl.arange(0, BM)
    offs_s = tl.arange(0, NS)
    tile = offs_m[:, None] * N + offs_n[None, :]
    p = tl.load(part + offs_s[:, None, None] * (BM * N) + tile[None, :, :])
    tl.store(out + tile, tl.sum(p, axis=0).to(tl.float16), mask=offs_m[:, None] < M)


class Variant:
    def __init__(self, mode, bn, bk, ns, warps, stages, dev):
        self.mode, self.bn, self.bk, self.ns, self.warps, self.stages = mode, bn, bk, ns, warps, stages
        self.acc32 = torch.zeros((16, N), dtype=torch.float32, device=dev)
        self.part = torch.empty((ns, 16, N), dtype=torch.float32, device=dev)
        self.cnt = torch.zeros((max(2, N // bn),), dtype=torch.int32, device=dev)

    def __call__(self, x, w, a, bm):
        m = x.shape[0]
        out = torch.empty((m, N), dtype=torch.float16, device=x.device)
        mode = {"atomic": 0, "scratch": 1, "two": 2, "two_pdl": 3, "barrier": 4}[self.mode]
        if mode == 4:
            lora_barrier[(N // self.bn * (self.ns + 1),)](x, w, a, bm, self.part, self.cnt, out, m, K=K, N=N, R=R, BM=16, BN=self.bn, BK=self.bk, NS=self.ns, num_warps=self.warps, num_stages=self.stages)
            return out
        lora_split[(N // self.bn * self.ns,)](x, w, a, bm, self.acc32, self.part, self.cnt, out, m, K=K, N=N, R=R, BM=16, BN=self.bn, BK=self.bk, NS=self.ns, MODE=mode, num_warps=self.warps, num_stages=self.stages)
        if mode in (2, 3):
            extra = {"launch_pdl": True} if mode == 3 else {}
            lora_combine[(N // self.bn,)](self.part, out, m, N=N, BM=16, BN=self.bn, NS=self.ns, PDL=mode == 3, num_warps=4, **extra)
        return out


def efir_modules(b):
    """efir's emitted modules for lora at B (bench/gpu/gen): {stem: module}."""
    out = {}
    for p in sorted(pathlib.Path(f"bench/gpu/gen/lora_B{b}").glob("*.py")):
        spec = importlib.util.spec_from_file_location(f"m_{b}_{p.stem}", p)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        out[p.stem] = mod
    return out


def main():
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    print(json.dumps({"gpu": torch.cuda.get_device_name(), "triton": triton.__version__}), flush=True)
    copies = run.case_size("lora", 1)["copies"]
    results = []
    for b in BS:
        ins = run.make_inputs("lora", b, 7)
        ref = run.reference("lora", ins)
        floor = run.case_size("lora", b)["bytes"] / 3.0e12 * 1e6
        row = {"B": b, "copies": copies}
        for stem, mod in efir_modules(b).items():
            fn = mod.run
            err = run.rel_l2(fn(*ins), ref)
            row[stem] = {"rel_l2": err, "us": run.timed(fn, "lora", b, copies)}
        for peer, fn in (("eager", run.lora),):
            row[peer] = run.timed(fn, "lora", b, copies)
        print(json.dumps(row), flush=True)
        if b == 1:
            # What the weight's read alone takes: cuBLAS's x @ w, and a
            # read-only Triton stream over W (blocks of 4096..32768).
            row2 = {"B": b, "cublas_xw": run.timed(lambda x, w, a, bm: x @ w, "lora", b, copies)}
            part = torch.empty((K * N // 1024,), dtype=torch.float32, device=dev)
            for blk in (4096, 8192, 16384, 32768):
                for warps in (4, 8):
                    row2[f"read_w_{blk}_{warps}"] = run.timed(lambda x, w, a, bm: read_sum[(K * N // blk,)](w, part, NEL=K * N, BLOCK=blk, num_warps=warps), "lora", b, copies)
            print(json.dumps(row2), flush=True)
        for mode in MODES:
            best_v = None
            for bn, bk, ns, warps, stages in itertools.product((64, 128), (64, 128, 256), (8, 16, 32), (4,), (3, 4)):
                if K // ns < bk:
                    continue
                try:
                    v = Variant(mode, bn, bk, ns, warps, stages, dev)
                    err = max(run.rel_l2(v(*ins), ref) for _ in range(3))
                    us = run.timed(v, "lora", b, copies)
                except Exception as e:  # noqa: BLE001
                    print(json.dumps({"B": b, "mode": mode, "cfg": [bn, bk, ns, warps, stages], "error": str(e)[:200]}), flush=True)
                    continue
                rec = {"B": b, "mode": mode, "cfg": [bn, bk, ns, warps, stages], "rel_l2": err, "us": us, "of_floor": floor / us}
                results.append(rec)
                if best_v is None or us < best_v["us"]:
                    best_v = rec
            print(json.dumps({"best": best_v}), flush=True)
    pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/lora_probe.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
