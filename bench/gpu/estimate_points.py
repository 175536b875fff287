"""The static estimate at each measured schedule, against the measurement.

    python3 bench/gpu/estimate_points.py RESULTS.json... [--gen bench/gpu/gen/src]
        [--bin target/release/efir-translate] [--out points.json] [--params NAME=V,...]

For every schedule that bench/gpu/run.py timed (its `efir` rows with a
`quick_us`), the candidate is translated again with that schedule as its
`schedule` attribute, so that the module's ESTIMATE is the static estimate
at the schedule that was measured (not at the default one). Prints, per
case, the Spearman correlation of estimate and measured time over all the
points and over the candidates' best points, and the estimate/measured
ratio's spread; `--out` writes the points (case, candidate, schedule,
estimate, measured) for fitting. Runs on the CPU (needs the Rust build and
the candidate files that bench/gpu/prepare.sh wrote); reads only JSON and
.efir text.
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ranking import spearman  # noqa: E402


def split_funcs(text):
    """Top-level `func` definitions of a module, in order, as text."""
    return [p for p in re.split(r"\n(?=func @)", text) if p.strip()]


def func_name(f):
    m = re.match(r"func @([\w.$]+)", f)
    return m.group(1) if m else None


def with_schedule(f, new_name, schedule):
    """Function text `f` renamed and given a `schedule` attribute."""
    head, sep, body = f.partition("{\n")
    head = re.sub(r"^func @[\w.$]+", f"func @{new_name}", head)
    attr = f'schedule = "{schedule}"'
    if " attributes {" in head:
        head = head.replace(" attributes {", f" attributes {{{attr}, ", 1)
    else:
        head = head.rstrip() + f" attributes {{{attr}}} "
    return head + sep + body


def case_points(res, gen, tool, params=""):
    """(candidate, config, quick_us, estimate_us) of one run.py case."""
    name, b = res["workload"], res["B"]
    src = os.path.join(gen, f"{name}_B{b}.cands.efir")
    if not os.path.exists(src):
        return []
    funcs = split_funcs(open(src).read())
    by_name = {func_name(f): f for f in funcs}
    others = [f for f in funcs if not (func_name(f) or "").startswith(f"{name}.c")]
    rows = [e for e in res.get("efir", []) if e.get("quick_us")]
    parts, keep = list(others), []
    for i, e in enumerate(rows):
        cand = e["candidate"]
        f = by_name.get(cand.replace(f"{name}_c", f"{name}.c", 1))
        if f is None:
            continue
        sched = ",".join(f"{k}={v}" for k, v in e["config"].items())
        parts.append(with_schedule(f, f"{name}.p{i}", sched))
        keep.append((i, e))
    if not keep:
        return []
    with tempfile.TemporaryDirectory() as t:
        path = os.path.join(t, "in.efir")
        open(path, "w").write("\n".join(parts))
        env = dict(os.environ, EFIR_ESTIMATE_PARAMS=params) if params else None
        r = subprocess.run([tool, "--to-triton", "--skip-unsupported", path, "--output-dir", t],
                           capture_output=True, text=True, env=env)
        if r.returncode != 0:
            print(f"{name} B={b}: efir-translate failed: {r.stderr.strip()[-400:]}", file=sys.stderr)
            return []
        out = []
        for i, e in keep:
            py = os.path.join(t, f"{name}_p{i}.py")
            if not os.path.exists(py):
                continue
            m = re.search(r"^ESTIMATE = (\{.*\})$", open(py).read(), re.M)
            est = json.loads(m.group(1)) if m else None
            if est:
                out.append({"candidate": e["candidate"], "config": e["config"],
                            "measured_us": e["quick_us"], "estimate_us": est["time_us"],
                            "bytes": est["bytes"], "flops": est["flops"], "kernels": est["kernels"], "largest_block": est.get("largest_block")})
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="+")
    ap.add_argument("--gen", default="bench/gpu/gen/src")
    ap.add_argument("--bin", default="target/release/efir-translate")
    ap.add_argument("--out", default="")
    ap.add_argument("--params", default="", help="the estimate's GPU parameters (EFIR_ESTIMATE_PARAMS, name=value,...)")
    ap.add_argument("--drop-over", type=float, default=0.0,
                    help="leave out points measured over this many times their case's best (0: none; "
                         "session 41's tuner probed some schedules at 1-2 ms that run.py timed at ~100 us)")
    a = ap.parse_args()
    cases = {}
    for f in a.results:
        for r in json.load(open(f))["results"]:
            # (files of one case, say a suite run and a tuner run, add
            # their points)
            have = cases.setdefault((r["workload"], r["B"]), dict(r, efir=[]))
            have["efir"] = have["efir"] + r.get("efir", [])
    allpts, summary, best_rhos, regrets = [], [], [], []
    print(f"{'case':22} {'points':>6} {'rho(all)':>9} {'rho(best)':>10} {'regret':>7} {'est/meas min..max':>20}")
    for (w, b), r in cases.items():
        pts = case_points(r, a.gen, a.bin, a.params)
        # One point per schedule timed (the fastest of its times).
        one = {}
        for p in pts:
            k = (p["candidate"], json.dumps(p["config"], sort_keys=True))
            if k not in one or p["measured_us"] < one[k]["measured_us"]:
                one[k] = p
        pts = list(one.values())
        if pts and a.drop_over > 0:
            floor = min(p["measured_us"] for p in pts)
            pts = [p for p in pts if p["measured_us"] < a.drop_over * floor]
        if not pts:
            continue
        for p in pts:
            p["workload"], p["B"] = w, b
        allpts += pts
        rho = spearman([p["estimate_us"] for p in pts], [p["measured_us"] for p in pts])
        best = {}
        for p in pts:
            c = p["candidate"]
            if c not in best or p["measured_us"] < best[c]["measured_us"]:
                best[c] = p
        bb = list(best.values())
        rb = spearman([p["estimate_us"] for p in bb], [p["measured_us"] for p in bb])
        ratios = [p["estimate_us"] / p["measured_us"] for p in pts]
        # The measured time of the lowest-estimate point over the case's
        # best: what choosing by the estimate alone costs. Points the
        # estimate ties (within 0.1%: schedules that differ in what it does
        # not model, such as warps on a memory-bound kernel) count at their
        # mean, the cost of breaking the tie at random.
        low = min(p["estimate_us"] for p in pts)
        tied = [p["measured_us"] for p in pts if p["estimate_us"] <= low * 1.001]
        regret = sum(tied) / len(tied) / min(p["measured_us"] for p in pts)
        summary.append(rho)
        regrets.append(regret)
        if len(bb) > 2 and rb is not None:
            best_rhos.append(rb)
        fmt = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
        print(f"{w + ' B=' + str(b):22} {len(pts):6} {fmt(rho):>9} {fmt(rb):>10} {regret:7.2f} {min(ratios):9.2f}..{max(ratios):<9.2f}")
    rhos = [r for r in summary if r is not None]
    if rhos:
        print(f"mean rho(all) over {len(rhos)} cases: {sum(rhos) / len(rhos):.2f}; "
              f"at least 0.8 in {sum(r >= 0.8 for r in rhos)}")
    if best_rhos:
        print(f"mean rho(best) over {len(best_rhos)} cases of 3+ candidates: {sum(best_rhos) / len(best_rhos):.2f}")
    if regrets:
        g = math.exp(sum(math.log(x) for x in regrets) / len(regrets))
        print(f"regret (measured at the lowest estimate, ties at their mean / best measured): geometric mean {g:.3f}, max {max(regrets):.2f}")
    if a.out:
        json.dump({"points": allpts}, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
