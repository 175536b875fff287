"""Re-rank measured candidates with the current static estimate (issue 28).

For each case of bench/gpu/run.py result files, every measured candidate's
best correct time (over its schedules), against the static estimate that the
efir-translate built here gives it now (`--func @<workload>.c<N>` on the
case's candidates file, bench/gpu/gen/src/<workload>_B<B>.cands.efir, made by
bench/gpu/prepare.sh with the same compaction). A candidate whose kernel
count differs from the one the run recorded is a different program under the
same name (the compaction changed since the run): it is left out.

Prints, per case and overall: the Spearman rank correlation of estimate and
time, and how much slower than the fastest the estimate's first choice
measured; the same for the estimates the run recorded, for comparison.
So a change of the estimate can be checked against the H200 measurements on
record without a GPU.

Usage: python3 bench/gpu/rerank.py RESULTS.json [...] [--src bench/gpu/gen/src]
       [--bin target/release/efir-translate]
(plain Python 3)
"""

import argparse
import json
import math
import pathlib
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from ranking import spearman  # noqa: E402


def estimate_now(binary, cands, func, out):
    r = subprocess.run([binary, "--to-triton", str(cands), "--func", f"@{func}", "-o", str(out)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None
    text = out.read_text()
    m = re.search(r"^ESTIMATE = (\{.*\})$", text, re.M)
    return json.loads(m.group(1)) if m else None


def fmt(x):
    return f"{x:+8.2f}" if x is not None else f"{'-':>8s}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="+")
    ap.add_argument("--src", default="bench/gpu/gen/src")
    ap.add_argument("--bin", default="target/release/efir-translate")
    args = ap.parse_args()
    tmp = pathlib.Path(tempfile.mkdtemp())
    cases = {}
    for path in args.results:
        for rec in json.load(open(path))["results"]:
            key = (rec["workload"], rec["B"])
            for e in rec.get("efir", []):
                t = e.get("time_us", e.get("quick_us"))
                if not e.get("ok") or t is None:
                    continue
                c = cases.setdefault(key, {}).setdefault(e["candidate"], {"best": math.inf, "old": e.get("estimate_us"), "kernels": e.get("kernels")})
                c["best"] = min(c["best"], t)
    rows = []
    print(f"{'case':22s} {'n':>2s} {'rho old':>8s} {'rho now':>8s} {'first old':>9s} {'first now':>9s}")
    for (w, b), cands in sorted(cases.items()):
        src = pathlib.Path(args.src) / f"{w}_B{b}.cands.efir"
        if not src.exists():
            continue
        kept = []
        for name, c in cands.items():
            est = estimate_now(args.bin, src, name.replace(f"{w}_c", f"{w}.c"), tmp / "m.py")
            if est is None or est["kernels"] != c["kernels"] or c["old"] is None:
                continue
            kept.append((name, c["old"], est["time_us"], c["best"]))
        if len(kept) < 2:
            continue
        t = [k[3] for k in kept]
        best = min(t)
        first = lambda col: t[min(range(len(kept)), key=lambda i: (kept[i][col], kept[i][0]))] / best
        r = {"case": f"{w} B={b}", "n": len(kept), "rho_old": spearman([k[1] for k in kept], t),
             "rho_now": spearman([k[2] for k in kept], t), "first_old": first(1), "first_now": first(2)}
        rows.append(r)
        print(f"{r['case']:22s} {r['n']:2d} {fmt(r['rho_old'])} {fmt(r['rho_now'])} {r['first_old']:8.2f}x {r['first_now']:8.2f}x")
    if rows:
        def mean(k):
            xs = [r[k] for r in rows if r[k] is not None]
            return sum(xs) / len(xs) if xs else None

        gm = lambda k: math.exp(sum(math.log(r[k]) for r in rows) / len(rows))
        print(f"{'all':22s} {len(rows):2d} {fmt(mean('rho_old'))} {fmt(mean('rho_now'))} {gm('first_old'):8.2f}x {gm('first_now'):8.2f}x"
              f"   first within 1.2x: old {sum(r['first_old'] <= 1.2 for r in rows)}/{len(rows)}, now {sum(r['first_now'] <= 1.2 for r in rows)}/{len(rows)}")


if __name__ == "__main__":
    main()
