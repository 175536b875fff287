"""How well the static estimate ranks candidates, and a ranking model fitted
to measurements, from bench/gpu/run.py and bench/gpu/tune_bench.py result
files.

Per case: each candidate's estimate and its best measured time (over every
schedule tried, i.e. its tuned time), the Spearman rank correlation of the
two, and whether the estimate's first choice was the fastest (and, if not,
how much slower it measured than the fastest).

`--fit`: a linear model of log(best time) in per-candidate features, fitted
within cases (each case's mean taken out, so only differences between the
candidates of one case count), evaluated leaving one workload out: the
model is fitted on the other workloads' cases and ranks the held-out
workload's candidates. Two feature sets: `json` (log estimate, kernel
count; every result file has them) and `module` (also log bytes, log flops,
the waves of programs over the SMs at the default schedule, and the number
of kernels that cannot fill the SMs; from a tune_bench file's `shortlist`,
or from the generated modules under --gen whose ESTIMATE matches the
entry's estimate). `--coef FILE` writes the fitted coefficients (all
workloads) as JSON.

Usage: python3 bench/gpu/ranking.py RESULTS.json [...] [--fit] [--gen DIR] [--md OUT.md] [--coef OUT.json]
(plain Python 3: reads only JSON files and generated modules' text)
"""

import json
import math
import pathlib
import re


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


def measured_us(e):
    """One timed entry's time for ranking: the quick time every timed schedule
    has (one measurement method across a case's candidates), else the re-timed
    one (run.py's older files). A tune_bench `tuned` entry re-times a schedule
    the tuner already timed quickly, beside the peers: not counted."""
    if e.get("phase") == "tuned":
        return None
    return e.get("quick_us", e.get("time_us"))


def case_ranking(rec):
    """[(candidate, estimate_us, best measured us)] of one case, by estimate."""
    return [(r["candidate"], r["estimate_us"], r["best_us"]) for r in case_rows(rec)]


SMS = 132  # the H200's streaming multiprocessors


def module_features(src):
    """Static features of a generated module (its text; nothing imported):
    ESTIMATE's fields, and the program count of each kernel's launch grid at
    DEFAULT_CONFIG (tile counts from `nt_x = triton.cdiv(extent, block_x)`)."""
    est = json.loads(re.search(r"^ESTIMATE = (\{.*\})$", src, re.M).group(1))
    body = re.search(r"^DEFAULT_CONFIG = \{(.*?)\n\}", src, re.M | re.S).group(1)
    default = {k: int(v) for k, v in re.findall(r'"(\w+)": (\d+)', body)}
    nt = {}
    for a, ext, b in re.findall(r"^    nt_(\w+) = triton\.cdiv\((\w+), block_(\w+)\)", src, re.M):
        e = int(ext) if ext.isdigit() else 1
        nt[a] = -(-e // max(1, default.get("BLOCK_" + b, 1)))
    progs = []
    for grid in re.findall(r"^[ \t]+\w+\[\((.*),\)\]\(", src, re.M):
        n = 1
        for factor in grid.split("*"):
            f = factor.strip()
            n *= int(f) if f.isdigit() else nt.get(f[3:] if f.startswith("nt_") else f, 1)
        progs.append(n)
    return {**est, "programs": progs}


def feature_vector(row, kind):
    """The features of one candidate (a case_rows row) for model `kind`."""
    v = [math.log(max(row["estimate_us"], 1e-3)), float(row["kernels"])]
    if kind == "module":
        f = row["features"]
        progs = f.get("programs") or [1]
        waves = sum(math.ceil(p / SMS) for p in progs)
        v += [math.log(max(f["bytes"], 1.0)), math.log(max(f["flops"], 1.0)), math.log(waves), float(sum(p < SMS for p in progs))]
    return v


FEATURES = {"json": ["log estimate", "kernels"], "module": ["log estimate", "kernels", "log bytes", "log flops", "log waves", "underfilled kernels"]}


def case_rows(rec, gen=None):
    """[{candidate, estimate_us, kernels, best_us, features}] of one case:
    each candidate's best correct time over its schedules; `features` from
    the record's shortlist (tune_bench) or a generated module under `gen`
    whose estimate matches, else None."""
    # The estimate and kernel count of each candidate from any entry that
    # has them (a tune_bench `tuned` entry carries neither).
    static = {}
    for e in rec.get("efir", []):
        if e.get("estimate_us") is not None:
            static.setdefault(e["candidate"], (e["estimate_us"], e.get("kernels") or 1))
    for s in rec.get("shortlist", []):
        static.setdefault(s["candidate"], (s["estimate_us"], s.get("kernels") or 1))
    rows = {}
    for e in rec.get("efir", []):
        t = measured_us(e)
        if not e.get("ok") or t is None or e["candidate"] not in static:
            continue
        est, kernels = static[e["candidate"]]
        r = rows.setdefault(e["candidate"], {"candidate": e["candidate"], "estimate_us": est, "kernels": kernels, "best_us": math.inf, "features": None})
        r["best_us"] = min(r["best_us"], t)
    short = {s["candidate"]: s.get("features") for s in rec.get("shortlist", [])}
    for r in rows.values():
        if short.get(r["candidate"]):
            r["features"] = short[r["candidate"]]
        elif gen is not None:
            path = pathlib.Path(gen) / f"{rec['workload']}_B{rec['B']}" / f"{r['candidate']}.py"
            if path.exists():
                f = module_features(path.read_text())
                if abs(f["time_us"] - r["estimate_us"]) < 1e-3:
                    r["features"] = f
    return sorted(rows.values(), key=lambda r: (r["estimate_us"], r["candidate"]))


def load_cases(paths, gen=None):
    cases = []
    for p in paths:
        for rec in json.load(open(p)).get("results", []):
            if rec.get("B") is None:
                continue
            rows = case_rows(rec, gen)
            if len(rows) >= 2:
                cases.append({"file": pathlib.Path(p).name, "workload": rec["workload"], "B": rec["B"], "rows": rows})
    return cases


def _solve(a, b):
    """x with a x = b (Gaussian elimination with partial pivoting)."""
    n = len(b)
    m = [list(a[i]) + [b[i]] for i in range(n)]
    for c in range(n):
        p = max(range(c, n), key=lambda i: abs(m[i][c]))
        m[c], m[p] = m[p], m[c]
        if abs(m[c][c]) < 1e-12:
            continue
        for i in range(n):
            if i != c:
                f = m[i][c] / m[c][c]
                m[i] = [x - f * y for x, y in zip(m[i], m[c])]
    return [m[i][n] / m[i][i] if abs(m[i][i]) >= 1e-12 else 0.0 for i in range(n)]


def _centred(case, kind):
    xs = [feature_vector(r, kind) for r in case["rows"]]
    ys = [math.log(r["best_us"]) for r in case["rows"]]
    mx = [sum(c) / len(xs) for c in zip(*xs)]
    my = sum(ys) / len(ys)
    return [[x - m for x, m in zip(row, mx)] for row in xs], [y - my for y in ys]


def fit(cases, kind, ridge=1e-2):
    """Ridge least squares of log time on the features, within cases (each
    case centred), features scaled to unit variance; coefficients in the
    unscaled features."""
    X, Y = [], []
    for c in cases:
        x, y = _centred(c, kind)
        X += x
        Y += y
    k = len(FEATURES[kind])
    sd = [math.sqrt(sum(r[j] ** 2 for r in X) / max(len(X), 1)) or 1.0 for j in range(k)]
    Z = [[r[j] / sd[j] for j in range(k)] for r in X]
    a = [[sum(z[i] * z[j] for z in Z) + (ridge * len(Z) if i == j else 0.0) for j in range(k)] for i in range(k)]
    b = [sum(z[i] * y for z, y in zip(Z, Y)) for i in range(k)]
    w = _solve(a, b)
    return [wi / s for wi, s in zip(w, sd)]


def score(row, coef, kind):
    return sum(c * x for c, x in zip(coef, feature_vector(row, kind)))


def evaluate(cases, kind):
    """Leave one workload out: per case, Spearman rho of the estimate and of
    the fitted model against the measured best times, and whether each
    one's first choice measured within 1.2x of the fastest."""
    out = []
    for w in sorted({c["workload"] for c in cases}):
        train = [c for c in cases if c["workload"] != w]
        if not train:
            continue
        coef = fit(train, kind)
        for c in cases:
            if c["workload"] != w:
                continue
            t = [r["best_us"] for r in c["rows"]]
            est = [r["estimate_us"] for r in c["rows"]]
            fitted = [score(r, coef, kind) for r in c["rows"]]
            best = min(t)
            first_est = t[min(range(len(t)), key=lambda i: (est[i], i))]
            first_fit = t[min(range(len(t)), key=lambda i: (fitted[i], i))]
            out.append({"case": c, "rho_est": spearman(est, t), "rho_fit": spearman(fitted, t), "first_est": first_est / best, "first_fit": first_fit / best})
    return out


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else float("nan")


def fit_report(paths, gen=None):
    """The leave-one-workload-out comparison as Markdown, and the
    coefficients fitted on every case, per feature set."""
    cases = load_cases(paths, gen)
    lines, coefs = [], {}
    for kind in ("json", "module"):
        cs = cases if kind == "json" else [c for c in cases if all(r["features"] for r in c["rows"])]
        wl = sorted({c["workload"] for c in cs})
        lines += ["", f"### Features `{kind}`: {', '.join(FEATURES[kind])}", "",
                  f"{len(cs)} cases ({sum(len(c['rows']) for c in cs)} candidates) of {len(wl)} workloads."]
        if len(wl) < 2:
            lines.append("Fewer than two workloads have these features: no leave-one-workload-out evaluation.")
            continue
        coefs[kind] = dict(zip(FEATURES[kind], fit(cs, kind)))
        res = evaluate(cs, kind)
        lines += ["", "| held-out workload | cases | rho estimate | rho fitted | first within 1.2x: estimate | fitted |", "|---|---|---|---|---|---|"]
        for w in wl:
            rs = [r for r in res if r["case"]["workload"] == w]
            lines.append(f"| {w} | {len(rs)} | {_mean(r['rho_est'] for r in rs):+.2f} | {_mean(r['rho_fit'] for r in rs):+.2f} | "
                         f"{sum(r['first_est'] <= 1.2 for r in rs)}/{len(rs)} | {sum(r['first_fit'] <= 1.2 for r in rs)}/{len(rs)} |")
        lines.append(f"| all | {len(res)} | {_mean(r['rho_est'] for r in res):+.2f} | {_mean(r['rho_fit'] for r in res):+.2f} | "
                     f"{sum(r['first_est'] <= 1.2 for r in res)}/{len(res)} | {sum(r['first_fit'] <= 1.2 for r in res)}/{len(res)} |")
        lines += ["", "Coefficients fitted on all these cases (log time per unit of feature): " + ", ".join(f"{k} {v:+.3f}" for k, v in coefs[kind].items()) + "."]
    return "\n".join(lines), coefs


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
        mean = f"{sum(rhos) / len(rhos):+.2f}" if rhos else "n/a"
        print(f"{n} cases: the estimate's first choice was the fastest in {firsts}; mean Spearman rho {mean} over {len(rhos)} cases with 3+ distinct candidates")


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="+")
    ap.add_argument("--fit", action="store_true", help="fit and evaluate the ranking model")
    ap.add_argument("--gen", default=None, help="generated modules (bench/gpu/gen) for the module features")
    ap.add_argument("--md", default=None, help="write the fit report here")
    ap.add_argument("--coef", default=None, help="write the fitted coefficients here (JSON)")
    args = ap.parse_args()
    if not args.fit:
        main(args.results)
    else:
        text, coefs = fit_report(args.results, args.gen)
        print(text)
        if args.md:
            pathlib.Path(args.md).write_text(text.lstrip() + "\n")
        if args.coef:
            pathlib.Path(args.coef).write_text(json.dumps(coefs, indent=1) + "\n")
