"""Probe: efir's generated modules for a prefill-sized matmul (M=512 rows,
f16) at their default schedule and at the tile shapes large GEMMs use,
against torch.mm (cuBLAS) in the same process. CUDA-graph medians (us),
results checked against torch.mm in f32 (relative L2).

    python3 bench/gpu/gemm_probe.py DIR [DIR...] [--out x.json]

DIR: `efir-translate --output-dir` of `mm_M_K_N.efir` (x[M,K] @ w[N,K]^T);
a one-kernel module's grid axes are g0_0 (rows) and g0_1 (columns).
"""
import argparse, glob, importlib.util, json, os, re
import torch, triton


def bench(fn):
    fn(); torch.cuda.synchronize()
    return triton.testing.do_bench_cudagraph(fn, rep=200) * 1000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--out")
    a = ap.parse_args()
    rows = []
    for d in a.dirs:
        M, K, N = [int(x) for x in re.findall(r"\d+", os.path.basename(d.rstrip("/")))[-3:]]
        x = torch.randn(M, K, device="cuda", dtype=torch.float16)
        w = torch.randn(N, K, device="cuda", dtype=torch.float16) / K ** 0.5
        ref = (x.float() @ w.float().T)
        t = bench(lambda: torch.mm(x, w.T))
        flop = 2.0 * M * N * K
        rows.append(dict(shape=[M, K, N], kernel="torch.mm", us=t, tflops=flop / t / 1e6))
        print(f"{M}x{K}x{N} torch.mm {t:.1f} us {flop / t / 1e6:.0f} TFLOP/s", flush=True)
        for path in sorted(glob.glob(os.path.join(d, "*.py"))):
            spec = importlib.util.spec_from_file_location("m_" + os.path.basename(path)[:-3], path)
            mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
            base = dict(mod.DEFAULT_CONFIG)
            kk = next((k for k in base if re.fullmatch(rf"BLOCK_k{K}", k)), None)
            overs = [{}]
            if "BLOCK_g0_0" in base and "BLOCK_g0_1" in base and kk and len([k for k in base if k.startswith("BLOCK_")]) == 3:
                for bm, bn, bk, w_, s in [(128, 128, 64, 8, 3), (128, 128, 64, 4, 4), (128, 256, 64, 8, 3), (128, 128, 64, 8, 4),
                                          (64, 128, 64, 4, 4), (128, 64, 64, 4, 4), (256, 128, 64, 8, 3), (128, 128, 32, 4, 5)]:
                    overs.append({"BLOCK_g0_0": bm, "BLOCK_g0_1": bn, kk: bk, "num_warps": w_, "num_stages": s})
            for o in overs:
                cfg = {**base, **o}
                name = os.path.basename(path)[:-3]
                try:
                    y = mod.run(x, w, config=cfg)
                    e = ((y.float() - ref).norm() / ref.norm()).item()
                    t = bench(lambda: mod.run(x, w, config=cfg))
                    rows.append(dict(shape=[M, K, N], kernel=name, config=cfg, us=t, tflops=flop / t / 1e6, rel_l2=e))
                    print(f"{M}x{K}x{N} {name} {o or 'default ' + json.dumps(base)}: {t:.1f} us {flop / t / 1e6:.0f} TFLOP/s err {e:.1e}", flush=True)
                except Exception as ex:  # noqa: BLE001 (a schedule that does not compile is a row, not a stop)
                    rows.append(dict(shape=[M, K, N], kernel=name, config=cfg, error=f"{type(ex).__name__}: {str(ex)[:200]}"))
                    print(f"{M}x{K}x{N} {name} {o}: {type(ex).__name__} {str(ex)[:150]}", flush=True)
        if a.out:
            json.dump(dict(device=torch.cuda.get_device_name(), triton=triton.__version__, rows=rows), open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
