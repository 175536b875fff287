"""How well the static estimate ranks candidates, from bench/gpu/run.py
result files: per case, each candidate's estimate and its best measured
time (quick timing, over every schedule tried), the Spearman rank
correlation of the two, and whether the estimate's first choice was the
fastest (and, if not, how much slower it measured than the fastest).

Usage: python3 bench/gpu/ranking.py RESULTS.json [...]
(plain Python 3: reads only the JSON files)
"""

import json
import math
import sys


def ranks(xs):
    """Average ranks (1-based) of the values `xs`, ties sharing their mean."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman(xs, ys):
    """Spearman's rho of two equal-length sequences (None under 3 points or
    when either is constant)."""
    if len(xs) < 3:
        return None
    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def case_ranking(rec):
    """[(candidate, estimate_us, best measured us)] of one case, by estimate."""
    best = {}
    est = {}
    for e in rec.get("efir", []):
        if not e.get("ok"):
            continue
        t = e.get("time_us", e.get("quick_us"))
        if t is None:
            continue
        c = e["candidate"]
        est[c] = e.get("estimate_us")
        best[c] = min(best.get(c, math.inf), t)
    rows = [(c, est[c], best[c]) for c in best if est[c] is not None]
    return sorted(rows, key=lambda r: (r[1], r[0]))


def main(paths):
    rhos = []
    firsts = 0
    n = 0
    for p in paths:
        for rec in json.load(open(p))["results"]:
            rows = case_ranking(rec)
            if not rows:
                continue
            n += 1
            rho = spearman([r[1] for r in rows], [r[2] for r in rows])
            fastest = min(r[2] for r in rows)
            first = rows[0][2]
            firsts += first == fastest
            if rho is not None:
                rhos.append(rho)
            cells = ", ".join(f"{c.split('_')[-1]} est {e:.1f} meas {t:.1f}" for c, e, t in rows)
            rs = "n/a" if rho is None else f"{rho:+.2f}"
            print(f"{rec['workload']:15s} B={rec['B']:<3d} rho {rs:>5s}  first/fastest {first / fastest:5.2f}x  [{cells}]")
    if n:
        mean = sum(rhos) / len(rhos) if rhos else float("nan")
        print(f"{n} cases: the estimate's first choice was the fastest in {firsts}; mean Spearman rho {mean:+.2f} over {len(rhos)} cases with 3+ distinct candidates")


if __name__ == "__main__":
    main(sys.argv[1:])
