"""The report of a bench/gpu/run.py result: the table (Markdown), the
geometric-mean summary and the whole Markdown page. Plain Python."""

import math


def _best(r):
    if r.get("best"):
        return r["best"]
    ok = [e for e in r.get("efir", []) if e.get("ok") and "time_us" in e]
    if not ok:
        return None
    e = min(ok, key=lambda e: e["time_us"])
    return {"candidate": e["candidate"], "config": e.get("config", {}), "time_us": e["time_us"], "kernels": e.get("kernels", "")}


def _best_peer(r):
    peers = {k: v for k, v in r.get("peers", {}).items() if v.get("ok") and "time_us" in v}
    if not peers:
        return None, None
    k = min(peers, key=lambda k: peers[k]["time_us"])
    return k, peers[k]["time_us"]


def table(res):
    lines = [
        "| workload | B | floor (us) | best efir (us) | kernels | schedule | best peer | peer (us) | speedup | efir/floor |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in res["results"]:
        if "efir" not in r:
            lines.append(f"| {r['workload']} | {r['B']} | | error: {str(r.get('error', ''))[:60]} | | | | | | |")
            continue
        best = _best(r)
        bp, pt = _best_peer(r)
        fl = r.get("floor_us", float("nan"))
        cells = [r["workload"], str(r["B"]), f"{fl:.1f}"]
        if best:
            sched = best.get("schedule") or schedule(best.get("config", {}))
            cells += [f"{best['time_us']:.1f}", str(best["kernels"]), f"`{sched}`"]
        else:
            cells += ["none correct", "", ""]
        cells += [bp or "", f"{pt:.1f}" if pt else ""]
        cells.append(f"{pt / best['time_us']:.2f}x" if best and pt else "")
        cells.append(f"{fl / best['time_us']:.2f}" if best and fl == fl else "")  # as before: floor / efir time
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary(res):
    sp = []
    for r in res["results"]:
        best = _best(r) if "efir" in r else None
        _, pt = _best_peer(r)
        if best and pt:
            sp.append(pt / best["time_us"])
    if not sp:
        return "No case has both an efir time and a peer time."
    gm = math.exp(sum(math.log(s) for s in sp) / len(sp))
    ahead = sum(s > 1.0 for s in sp)
    return f"Geometric mean speedup over the best peer: {gm:.2f}x over {len(sp)} cases; efir ahead of the best peer in {ahead} of {len(sp)}."


def report(res):
    head = [
        f"# efir against PyTorch, {res.get('gpu', '?')}",
        "",
        f"- date: {res.get('date', '?')}; torch {res.get('torch', '?')}, Triton {res.get('triton', '?')}; compile mode {res.get('compile_mode', '?')}",
    ]
    if "copy_bandwidth_Bps" in res:
        head.append(f"- ceilings: copy bandwidth {res['copy_bandwidth_Bps'] / 1e12:.2f} TB/s, fp16 matmul {res['fp16_matmul_flops'] / 1e12:.0f} TFLOP/s (floor = max(bytes / bandwidth, flops / matmul rate))")
    if "sweep" in res:
        head.append(f"- sweep: up to {res['sweep']} schedules for each of the best {res.get('candidates', '?')} candidates (by static estimate) per case; the best {res.get('retime', 4)} by a quick time re-checked and re-timed")
    head.append("- times: CUDA-graph replays, median, in microseconds; speedup = best peer / best efir; efir/floor = floor / best efir time (1.0 would be at the floor)")
    return "\n".join(head + ["", table(res), "", summary(res)])
