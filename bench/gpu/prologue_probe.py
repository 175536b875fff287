"""Does a GEMM whose A operand is computed in its K loop (an RMS norm
applied to the A tile: x * rstd[row] * gamma[k]) run as fast as the plain
GEMM on stored normed rows?  Llama prefill's q projection (512 x 4096 x
4096, bf16), one hand kernel with the prologue on or off, over block sizes,
warps and stages; beside torch.matmul and the norm + matmul in eager.

    python3 bench/gpu/prologue_probe.py --out x.json [--m 512 --n 4096 --k 4096]
"""
import argparse, itertools, json
import torch, triton
import triton.language as tl


@triton.jit
def gemm(x, rstd, gamma, w, out, M, N, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
         BK: tl.constexpr, PRO: tl.constexpr, GROUP: tl.constexpr):
    pid = tl.program_id(0)
    npm = tl.cdiv(M, BM)
    npn = tl.cdiv(N, BN)
    if GROUP > 1:
        width = GROUP * npn
        g = pid // width
        first = g * GROUP
        sz = min(npm - first, GROUP)
        pm = first + (pid % width) % sz
        pn = (pid % width) // sz
    else:
        pm = pid % npm
        pn = pid // npm
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    acc = tl.zeros([BM, BN], tl.float32)
    if PRO:
        rs = tl.load(rstd + rm)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(x + rm[:, None] * K + rk[None, :])
        if PRO:
            gm = tl.load(gamma + rk)
            a = ((a.to(tl.float32) * rs[:, None]).to(tl.bfloat16).to(tl.float32) * gm[None, :].to(tl.float32)).to(tl.bfloat16)
        b = tl.load(w + rn[None, :] * K + rk[:, None])
        acc = tl.dot(a, b, acc)
    tl.store(out + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16))


def bench(fn):
    fn(); torch.cuda.synchronize()
    return triton.testing.do_bench_cudagraph(fn, rep=50) * 1000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=512)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    M, N, K = a.m, a.n, a.k
    torch.manual_seed(0)
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    gamma = torch.randn(K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16) / K ** 0.5
    rstd = torch.rsqrt(x.float().pow(2).mean(-1) + 1e-6)
    xn = ((x.float() * rstd[:, None]).bfloat16().float() * gamma.float()).bfloat16()
    ref = (xn.float() @ w.float().t())
    out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
    rows = []
    rows.append({"kind": "torch.matmul(normed)", "us": bench(lambda: torch.matmul(xn, w.t(), out=out))})
    def eager():
        r = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6)
        return torch.matmul(((x.float() * r).bfloat16() * gamma), w.t())
    rows.append({"kind": "eager norm+matmul", "us": bench(eager)})
    print(rows, flush=True)
    for BM, BN, BK, nw, ns, grp in itertools.product([64, 128], [64, 128, 256], [64, 128], [4, 8], [3, 4], [1, 8]):
        if BM * BN >= 128 * 256 and nw == 4:
            continue
        for pro in (0, 1):
            src = x if pro else xn
            grid = (triton.cdiv(M, BM) * triton.cdiv(N, BN),)
            f = lambda: gemm[grid](src, rstd, gamma, w, out, M, N, K, BM, BN, BK, pro, grp, num_warps=nw, num_stages=ns)
            try:
                t = bench(f)
                err = ((out.float() - ref).norm() / ref.norm()).item()
            except Exception as e:  # noqa: BLE001 (an infeasible configuration)
                t, err = None, str(e)[:80]
            r = {"kind": "prologue" if pro else "plain", "BM": BM, "BN": BN, "BK": BK, "warps": nw, "stages": ns, "group": grp, "us": t, "err": err}
            rows.append(r)
            print(r, flush=True)
    best = {}
    for r in rows:
        if r.get("us") and "BM" in r and (r["kind"] not in best or r["us"] < best[r["kind"]]["us"]):
            best[r["kind"]] = r
    print("BEST", best, flush=True)
    json.dump({"M": M, "N": N, "K": K, "device": torch.cuda.get_device_name(), "rows": rows, "best": best}, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
