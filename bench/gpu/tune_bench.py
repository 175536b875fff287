"""The tuner (efir.tune) against a wide sweep of the same shortlist, on one GPU.

Inputs: the Triton modules that bench/gpu/prepare.sh wrote under
bench/gpu/gen/<workload>_B<B>/. For every case this script

1. shortlists the best `--top` candidates by static estimate (as
   `python -m efir tune` and `efir.compile` do), draws fp16 inputs as
   bench/gpu/run.py does and computes the fp32 PyTorch reference;
2. runs the tuner (`efir.tune.tune_modules`: successive halving, one
   kernel's parameters at a time for multi-kernel candidates, compiling in
   worker processes, checking every schedule, CUDA-graph timing) with a
   budget of `--budget` seconds, from a cold start of the case (Triton's
   disk cache may hold schedules from earlier runs of the same modules);
3. runs a wide sweep of the same shortlist: `--wide` random schedules per
   candidate, then local search around every candidate's best (no
   halving), up to `--wide-budget` seconds;
4. re-times, with more repetitions, the estimate's first choice at its
   DEFAULT_CONFIG (what efir runs untuned), the tuner's best and the wide
   sweep's best.

Prints per case the GPU seconds the tuner spent, the tuner's best, the wide
sweep's best, their distance (tuner / min(tuner, wide) - 1: how far the
tuner stayed from the best known), and the default's time;
writes JSON after every case (`efir` entries in run.py's schema and each
shortlisted candidate's static features, so that `bench/gpu/ranking.py
--fit` reads it). Usage:

    python3 bench/gpu/tune_bench.py --out r.json [--cases attn_prefill:8,gated_mlp:1]
        [--budget 20] [--wide 32] [--wide-budget 60] [--top 4] [--deadline 540]
"""

import argparse
import json
import math
import os
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "python"))

import ranking  # noqa: E402  (static features of the candidates, for a fitted ranking)
import run as bench  # noqa: E402  (workloads, inputs, references; imports torch and triton)
import torch  # noqa: E402
import triton  # noqa: E402

from efir import tune  # noqa: E402

GEN = HERE / "gen"


def shortlist(name, b, top):
    """[(stem, path, module, source)] of the case's best `top` modules by
    static estimate."""
    mods = []
    for path in sorted((GEN / f"{name}_B{b}").glob("*.py")):
        try:
            mods.append((path.stem, path, bench.load(path), path.read_text()))
        except Exception as e:  # noqa: BLE001
            print(f"  {path.name}: import failed: {e}", flush=True)
    mods.sort(key=lambda m: (m[2].ESTIMATE["time_us"], m[0]))
    return mods[:top]


def retime(mod, cfg, inputs, rep):
    try:
        return tune.graph_time_us(lambda *xs: mod.run(*xs, config=cfg), inputs, rep=rep)
    except Exception as e:  # noqa: BLE001
        print(f"  retime failed: {type(e).__name__}: {str(e)[:200]}", flush=True)
        return None


def entries(res, cands, phase):
    est = {n: (m.ESTIMATE["time_us"], m.ESTIMATE["kernels"]) for n, _, m, _ in cands}
    out = []
    for n, cfg, t in res["trace"]:
        e = {"candidate": n, "config": cfg, "estimate_us": est[n][0], "kernels": est[n][1], "ok": t is not None, "phase": phase}
        if t is not None:
            e["quick_us"] = round(t, 3)
        out.append(e)
    return out


def bench_case(name, b, args, pool, log):
    rec = {"workload": name, "B": b}
    cands = shortlist(name, b, args.top)
    if not cands:
        rec["error"] = f"no modules under {GEN / f'{name}_B{b}'}"
        return rec
    rec["shortlist"] = [{"candidate": n, "estimate_us": m.ESTIMATE["time_us"], "kernels": m.ESTIMATE["kernels"], "groups": tune.groups(src, m.CONFIG_SPACE)[0], "features": ranking.module_features(src)} for n, _, m, src in cands]
    inputs = bench.make_inputs(name, b, 0)
    expected = [bench.reference(name, inputs)]

    def progress_for(phase):
        last = [time.monotonic()]

        def progress(n, cfg, t, best):
            if time.monotonic() - last[0] > 10:
                last[0] = time.monotonic()
                log(f"    {phase}: @{n} best so far {best:.1f} us")
        return progress

    t0 = time.monotonic()
    cuda = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
    tuned = tune.tune_modules(cands, inputs, expected, args.budget, pool=pool, cuda=cuda, seed=0, progress=progress_for("tuner"))
    log(f"  tuner: {tuned['seconds']:.1f} s, {tuned['measured']} schedules in {tuned['rounds']} rounds, best @{tuned['name']} {tuned['time_us'] or float('nan'):.1f} us")
    wide = tune.tune_modules(cands, inputs, expected, args.wide_budget, pool=pool, cuda=cuda, seed=1, first=args.wide, width=16, halve=False, progress=progress_for("wide"))
    log(f"  wide:  {wide['seconds']:.1f} s, {wide['measured']} schedules in {wide['rounds']} rounds, best @{wide['name']} {wide['time_us'] or float('nan'):.1f} us")
    mods = {n: m for n, _, m, _ in cands}
    first = cands[0][0]
    rec["default"] = {"candidate": first, "config": dict(mods[first].DEFAULT_CONFIG), "time_us": retime(mods[first], mods[first].DEFAULT_CONFIG, inputs, args.rep)}
    for key, res in (("tuner", tuned), ("wide", wide)):
        r = {k: res[k] for k in ("measured", "rounds")}
        r["seconds"] = round(res["seconds"], 2)
        r["failures"] = len(res["failures"])
        r["first_failures"] = res["failures"][:3]
        if res["name"] is not None:
            r.update({"candidate": res["name"], "config": res["config"], "quick_us": res["time_us"], "time_us": retime(mods[res["name"]], res["config"], inputs, args.rep)})
        rec[key] = r
    rec["efir"] = entries(tuned, cands, "tuner") + entries(wide, cands, "wide")
    if args.peers != "none":
        # run.py's comparison: the tuner's best and the peers timed alike
        # (input sets in rotation), the floor from this run's ceilings
        rec.update(bench.case_size(name, b))
        t = rec["tuner"]
        if t.get("candidate"):
            mod, cfg = mods[t["candidate"]], t["config"]
            t["peer_timed_us"] = bench.timed(lambda *a, m=mod, c=cfg: m.run(*a, config=c), name, b, rec["copies"])
            rec["efir"].append({"candidate": t["candidate"], "config": cfg, "ok": True, "time_us": t["peer_timed_us"], "phase": "tuned"})
        rec["peers"] = bench.time_peers(name, b, args.peers, rec["copies"], log)
        bw, mm = args.ceilings
        rec["floor_us"] = max(rec["bytes"] / bw, rec["flops"] / mm) * 1e6
        best = min((v["time_us"] for v in rec["peers"].values() if v.get("ok") and v.get("time_us")), default=None)
        if best and t.get("peer_timed_us"):
            rec["vs_best_peer"] = best / t["peer_timed_us"]
            log(f"  tuned {t['peer_timed_us']:.1f} us, best peer {best:.1f} us ({rec['vs_best_peer']:.2f}x), floor {rec['floor_us']:.1f} us")
    tt, wt, dt = rec["tuner"].get("time_us"), rec["wide"].get("time_us"), rec["default"]["time_us"]
    if tt and wt:
        # distance to the best known (the wide sweep's, or the tuner's where it found better)
        rec["distance"] = tt / min(tt, wt) - 1.0
        rec["tuner_over_wide"] = tt / wt
    if tt and dt:
        rec["tuned_over_default"] = dt / tt
    rec["wall_s"] = round(time.monotonic() - t0, 1)
    return rec


def fmt(x, f="{:.1f}"):
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f.format(x)


def peer_text(r):
    ok = [(v["time_us"], k) for k, v in r.get("peers", {}).items() if v.get("ok") and v.get("time_us")]
    return f"{min(ok)[0]:.1f} ({min(ok)[1]})" if ok else "n/a"


def table(res):
    lines = [
        "| workload | B | tuner GPU s | schedules | tuner best (us) | wide best (us) | distance | wide s | default (us) | default/tuned | tuned, peers' timing (us) | best peer (us) | vs best peer | efir/floor |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res["results"]:
        if "tuner" not in r:
            lines.append(f"| {r['workload']} | {r['B']} | error: {r.get('error', '')[:80]} | | | | | | | |")
            continue
        t, w, d = r["tuner"], r["wide"], r["default"]
        lines.append(
            f"| {r['workload']} | {r['B']} | {t['seconds']:.1f} | {t['measured']} | {fmt(t.get('time_us'))} (@{t.get('candidate', '-')}) | {fmt(w.get('time_us'))} (@{w.get('candidate', '-')}) "
            f"| {fmt(r.get('distance'), '{:+.1%}')} | {w['seconds']:.0f} | {fmt(d.get('time_us'))} | {fmt(r.get('tuned_over_default'), '{:.2f}x')} "
            f"| {fmt(t.get('peer_timed_us'))} | {peer_text(r)} | {fmt(r.get('vs_best_peer'), '{:.2f}x')} "
            f"| {fmt(r['floor_us'] / t['peer_timed_us'] if r.get('floor_us') and t.get('peer_timed_us') else None, '{:.2f}')} |"
        )
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--md", default="", help="also write the table as Markdown here")
    ap.add_argument("--cases", default="attn_prefill:8,gated_mlp:1,attn_decode:16,gated_mlp:16", help="name:B pairs, comma separated")
    ap.add_argument("--budget", type=float, default=20.0, help="the tuner's budget per case, seconds")
    ap.add_argument("--wide", type=int, default=32, help="random schedules per candidate in the wide sweep")
    ap.add_argument("--wide-budget", type=float, default=60.0, help="the wide sweep's budget per case, seconds")
    ap.add_argument("--top", type=int, default=4, help="shortlisted candidates (by static estimate)")
    ap.add_argument("--rep", type=int, default=100, help="milliseconds of CUDA-graph replays per final time")
    ap.add_argument("--workers", type=int, default=0, help="compile workers (default: min(8, CPUs - 1))")
    ap.add_argument("--deadline", type=float, default=540.0, help="start no case that would end past this many seconds")
    ap.add_argument("--peers", default="max-autotune-no-cudagraphs", help="torch.compile mode of the peers timed beside the tuned result (run.py's peers and floor; 'none': no peers)")
    ap.add_argument("--warm", type=int, default=4, help="torch.compile the peers in N processes first (0: in the main process)")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    t_start = time.monotonic()

    def log(s):
        print(f"[{time.monotonic() - t_start:6.1f}s] {s}", flush=True)

    res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__, "date": time.strftime("%Y-%m-%d"),
           "budget": args.budget, "wide": args.wide, "wide_budget": args.wide_budget, "top": args.top, "results": []}
    cases = [(c.split(":")[0], int(c.split(":")[1])) for c in args.cases.split(",")]
    if args.peers != "none":
        if args.warm:
            bench.warm_compile(cases, args.peers, args.warm, log)
        bw, mm, _ = bench.ceilings()
        args.ceilings = (bw, mm)
        res["copy_bandwidth_Bps"], res["fp16_matmul_flops"] = bw, mm
        log(f"copy bandwidth {bw / 1e12:.2f} TB/s, fp16 matmul {mm / 1e12:.0f} TFLOP/s")
    pool = tune.CompilePool(args.workers or None)
    try:
        t0 = time.monotonic()
        ready = pool.start()
        res["pool_start_s"] = round(time.monotonic() - t0, 1)
        log(f"{ready} compile workers ready in {res['pool_start_s']} s (not counted in the tuner's seconds)")
        per_case = args.budget + args.wide_budget + (45.0 if args.peers != "none" else 30.0)
        for name, b in cases:
            if time.monotonic() - t_start + per_case > args.deadline:
                log(f"{name} B={b}: skipped (deadline {args.deadline:.0f} s)")
                res["results"].append({"workload": name, "B": int(b), "error": "skipped: deadline"})
                continue
            log(f"{name} B={b}")
            try:
                rec = bench_case(name, int(b), args, pool, log)
            except Exception as e:  # noqa: BLE001
                rec = {"workload": name, "B": int(b), "error": f"{type(e).__name__}: {str(e)[-400:]}"}
                log(f"  FAILED: {rec['error']}")
            res["results"].append(rec)
            pathlib.Path(args.out).write_text(json.dumps(res, indent=1))
            torch.cuda.empty_cache()
    finally:
        pool.close()
    pathlib.Path(args.out).write_text(json.dumps(res, indent=1))
    print(table(res), flush=True)
    if args.md:
        pathlib.Path(args.md).write_text(f"# Tuning against a wide sweep and the peers ({res['gpu']}, {res['date']})\n\n"
                                         f"`{' '.join(sys.argv)}`; torch {res['torch']}, Triton {res['triton']}\n\n" + table(res) + "\n")


if __name__ == "__main__":
    main()
