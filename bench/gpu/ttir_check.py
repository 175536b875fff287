"""The TTIR build against the Python build, on the GPU (issue 31).

For every case that bench/gpu/ttir_prepare.sh wrote under bench/gpu/ttir/
(a workload at one B, `<workload>_B<B>` its source program and
`<workload>_B<B>_best` efir's best candidate: `<stem>.ttir.json` with its
`.ttir` kernels, and `<stem>.py`, the Python build of the same program at
the same schedule),
compile the TTIR kernels with Triton, run both builds on the same random
inputs, and print the relative L2 error of the results (<= 1e-2 passes) and
both times with their ratio: by triton.testing.do_bench (median, host launch
costs included: the Python build's run() launches through Triton's JIT
dispatch, tens of us per kernel, the TTIR build calls its compiled kernels
directly, so small kernels measure the host, not the GPU) and by
do_bench_cudagraph (median of a CUDA graph replay: GPU time only, the
kernels' comparison; the builds alternate for --rounds rounds and each
keeps its fastest median).

    python3 bench/gpu/ttir_check.py [--dir bench/gpu/ttir] [--cases REGEX] [--rounds 3] [--out results.json]

The attention workloads' source programs (attn_*_B<B> without _best) plan
their softmax reductions as whole-row blocks (1x32x64x1024 f32 at B=1, in
both builds): Triton takes minutes to compile those kernels; --cases leaves
them out. Rows are written to --out as each case finishes.

Runs with the repository as cwd (imports python/efir/ttir.py); needs torch
and Triton, no Rust.
"""

import argparse
import glob
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

from efir import ttir  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="bench/gpu/ttir")
    ap.add_argument("--out", help="write the rows as JSON here")
    ap.add_argument("--rep", type=int, default=200, help="do_bench rep (ms)")
    ap.add_argument("--rounds", type=int, default=3, help="CUDA-graph timings of each build, alternating; the fastest median counts")
    ap.add_argument("--cases", default="", help="only cases whose name matches this regex (e.g. 'mlp|lora|ngpt|layernorm')")
    args = ap.parse_args()
    from triton.testing import do_bench, do_bench_cudagraph

    rows = []
    bad = 0
    mans = sorted(glob.glob(os.path.join(args.dir, "*", "*.ttir.json")))
    if not mans:
        raise SystemExit(f"no cases under {args.dir} (run bench/gpu/ttir_prepare.sh and carry bench/gpu/ttir)")
    print(f"{'case':24} {'kernels/launches':>7} {'rel L2':>10} {'TTIR us':>9} {'Python us':>10} {'ratio':>7}"
          f" {'graph TTIR':>10} {'graph Py':>9} {'g.ratio':>7} {'compile s':>9}")
    for man in mans:
        case = os.path.basename(os.path.dirname(man))
        if args.cases and not re.search(args.cases, case):
            continue
        py = man[: -len(".ttir.json")] + ".py"
        row = {"case": case}
        try:
            t0 = time.time()
            prog = ttir.load(man)
            row["compile_s"] = time.time() - t0
            mod = ttir._python_build(py)
            xs = ttir.random_inputs(prog, 0)
            y = prog.run(*xs)
            r = mod.run(*xs)
            ys = y if isinstance(y, tuple) else (y,)
            rs = r if isinstance(r, tuple) else (r,)
            row["rel_l2"] = max(ttir.rel_l2(a, b) for a, b in zip(ys, rs))
            row["ttir_us"] = do_bench(lambda: prog.run(*xs), rep=args.rep, return_mode="median") * 1e3
            row["python_us"] = do_bench(lambda: mod.run(*xs), rep=args.rep, return_mode="median") * 1e3
            row["ratio"] = row["ttir_us"] / row["python_us"]
            try:
                # The two builds alternate, round after round, and each
                # keeps its fastest median: one build timed only after the
                # other must not carry the GPU's state (clocks, L2) alone.
                tg, pg = [], []
                for _ in range(args.rounds):
                    tg.append(do_bench_cudagraph(lambda: prog.run(*xs), rep=args.rep, return_mode="median") * 1e3)
                    pg.append(do_bench_cudagraph(lambda: mod.run(*xs), rep=args.rep, return_mode="median") * 1e3)
                row["ttir_graph_rounds_us"], row["python_graph_rounds_us"] = tg, pg
                row["ttir_graph_us"], row["python_graph_us"] = min(tg), min(pg)
                row["graph_ratio"] = row["ttir_graph_us"] / row["python_graph_us"]
                graph = f"{row['ttir_graph_us']:>10.2f} {row['python_graph_us']:>9.2f} {row['graph_ratio']:>7.3f}"
            except Exception as e:  # a build that cannot be captured: the plain times stand
                row["graph_error"] = f"{type(e).__name__}: {e}"
                graph = f"{'-':>10} {'-':>9} {'-':>7}"
            row["kernels"] = len(prog.kernels)
            row["launches"] = len(prog.launches())
            # The group launches checked on their own too (the members alone
            # ran above only where the build has no group).
            if prog.groups:
                prog.use_groups = False
                row["rel_l2_members"] = max(ttir.rel_l2(a, b) for a, b in zip(
                    (lambda t: t if isinstance(t, tuple) else (t,))(prog.run(*xs)), rs))
                prog.use_groups = True
                row["rel_l2"] = max(row["rel_l2"], row["rel_l2_members"])
            ok = row["rel_l2"] <= 1e-2
            bad += not ok
            print(f"{case:24} {str(row['kernels']) + '/' + str(row['launches']):>7} {row['rel_l2']:>10.2e} {row['ttir_us']:>9.2f} {row['python_us']:>10.2f} {row['ratio']:>7.3f} {graph} {row['compile_s']:>9.1f}{'' if ok else '  MISMATCH'}")
        except Exception as e:  # report and go on with the other cases
            bad += 1
            row["error"] = f"{type(e).__name__}: {e}"
            print(f"{case:24} ERROR {row['error'][:300]}")
        rows.append(row)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(rows, f, indent=1)
    print(f"{len(rows) - bad}/{len(rows)} cases correct")
    for key, what in (("ratio", "time TTIR/Python"), ("graph_ratio", "CUDA-graph time TTIR/Python")):
        ratios = [r[key] for r in rows if key in r]
        if ratios:
            within = sum(abs(x - 1) <= 0.05 for x in ratios)
            gm = 1.0
            for x in ratios:
                gm *= x ** (1 / len(ratios))
            print(f"{what}: geometric mean {gm:.3f}, {within}/{len(ratios)} within 5%")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
