"""`python -m efir report RESULTS.json [-o PLOT.png] [--markdown]`: a
`bench/gpu/run.py` results file as a table, and as a bar chart.

The file's schema is run.py's (and `bench/gpu/table.py`'s merged files):
`{"gpu", "torch", "triton", "date", ..., "results": [case, ...]}`, each
case with `workload`, `B`, `efir` (the candidates and schedules measured:
`time_us` where correct, `ok`), `best` (the fastest, when recorded),
`peers` (`{"eager": {"time_us", "ok"}, "compile": ..., ...}`), `bytes`,
`flops` and `floor_us` (`max(bytes / copy bandwidth, flops / matmul
rate)`). A case that failed has `error` instead of `efir`.

The table needs nothing but the standard library; the chart needs
matplotlib (an optional dependency: `pip install matplotlib`).
"""

import json
import math


class ReportError(Exception):
    """The file is not a results file this command reads; says why."""


def load(path):
    """The results file at `path`, checked for the fields the table uses."""
    try:
        with open(path) as f:
            res = json.load(f)
    except OSError as e:
        raise ReportError(f"cannot read `{path}`: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise ReportError(f"`{path}` is not JSON: {e}") from None
    if not isinstance(res, dict) or not isinstance(res.get("results"), list):
        raise ReportError(f"`{path}` is not a bench/gpu/run.py results file: no `results` list at the top level")
    for i, r in enumerate(res["results"]):
        missing = [k for k in ("workload", "B") if not isinstance(r, dict) or k not in r]
        if missing:
            raise ReportError(f"`{path}`: results[{i}] has no {' or '.join(f'`{k}`' for k in missing)} (bench/gpu/run.py writes both)")
    return res


def best_efir(r):
    """The fastest correct efir time of a case: (time_us, kernels,
    candidate), or None."""
    if r.get("best") and "time_us" in r["best"]:
        b = r["best"]
        return b["time_us"], b.get("kernels"), b.get("candidate")
    ok = [e for e in r.get("efir") or [] if e.get("ok") and "time_us" in e]
    if not ok:
        return None
    e = min(ok, key=lambda e: e["time_us"])
    return e["time_us"], e.get("kernels"), e.get("candidate")


def peers(r):
    """The correct peers' times of a case, {name: time_us}, fastest first."""
    ps = {k: v["time_us"] for k, v in (r.get("peers") or {}).items() if isinstance(v, dict) and v.get("ok") and "time_us" in v}
    return dict(sorted(ps.items(), key=lambda kv: kv[1]))


def rows(res):
    """One dict per case: workload, B, efir_us, kernels, candidate, peer
    (the best's name), peer_us, speedup (peer / efir), floor_us, at_floor
    (floor / efir), peers (all correct peers' times), error."""
    out = []
    for r in res["results"]:
        best = best_efir(r)
        ps = peers(r)
        peer, peer_us = next(iter(ps.items()), (None, None))
        efir_us = best[0] if best else None
        floor = r.get("floor_us")
        out.append(
            {
                "workload": r["workload"],
                "B": r["B"],
                "efir_us": efir_us,
                "kernels": best[1] if best else None,
                "candidate": best[2] if best else None,
                "peer": peer,
                "peer_us": peer_us,
                "speedup": peer_us / efir_us if efir_us and peer_us else None,
                "floor_us": floor,
                "at_floor": floor / efir_us if efir_us and floor else None,
                "peers": ps,
                "error": None if "efir" in r else str(r.get("error", "no efir result"))[:60],
            }
        )
    return out


def _f(x, fmt):
    return "" if x is None else format(x, fmt)


COLUMNS = ["workload", "B", "efir (us)", "kernels", "best peer", "peer (us)", "speedup", "floor (us)", "efir/floor"]


def _cells(row):
    if row["error"] is not None:
        return [row["workload"], str(row["B"]), f"error: {row['error']}", "", "", "", "", _f(row["floor_us"], ".1f"), ""]
    return [
        row["workload"],
        str(row["B"]),
        _f(row["efir_us"], ".1f") if row["efir_us"] is not None else "none correct",
        "" if row["kernels"] is None else str(row["kernels"]),
        row["peer"] or "",
        _f(row["peer_us"], ".1f"),
        _f(row["speedup"], ".2f") + ("x" if row["speedup"] is not None else ""),
        _f(row["floor_us"], ".1f"),
        _f(row["at_floor"], ".2f"),
    ]


def summary(rs):
    """The geometric mean speedup line."""
    sp = [r["speedup"] for r in rs if r["speedup"]]
    if not sp:
        return "No case has both an efir time and a peer time."
    gm = math.exp(sum(math.log(s) for s in sp) / len(sp))
    ahead = sum(s > 1.0 for s in sp)
    return f"Geometric mean speedup over the best peer: {gm:.2f}x over {len(sp)} cases; efir ahead of the best peer in {ahead} of {len(sp)}."


def header(res):
    """One line: the GPU, versions and date of the run."""
    parts = [str(res.get("gpu", "unknown GPU"))]
    if "torch" in res:
        parts.append(f"torch {res['torch']}")
    if "triton" in res:
        parts.append(f"Triton {res['triton']}")
    if "date" in res:
        parts.append(str(res["date"]))
    return ", ".join(parts)


def table(res, markdown=False):
    """The cases as an aligned text table (or Markdown), a header line and
    the summary line; times in microseconds, speedup = best peer / efir,
    efir/floor = floor / efir (1.0 would be at the floor)."""
    rs = rows(res)
    body = [_cells(r) for r in rs]
    if markdown:
        lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        lines += ["| " + " | ".join(c) + " |" for c in body]
    else:
        widths = [max(len(h), *(len(c[i]) for c in body)) if body else len(h) for i, h in enumerate(COLUMNS)]
        right = {1, 2, 3, 5, 6, 7, 8}

        def fmt(cells):
            return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

        lines = [fmt(COLUMNS), fmt(["-" * w for w in widths])] + [fmt(c) for c in body]
    return "\n".join([header(res), "", *lines, "", summary(rs)]) + "\n"


def plot(res, path, title=None):
    """Draw the cases as a PNG (or any format matplotlib knows by `path`'s
    suffix): above, efir's speedup over the best peer per case (bars, 1.0
    marked); below, floor / time for efir and every peer per case (1.0
    would be at the floor). Raises ReportError when matplotlib is absent."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ReportError("drawing the chart needs matplotlib, which is not installed (pip install matplotlib); the table needs nothing") from None
    rs = [r for r in rows(res) if r["efir_us"] is not None]
    if not rs:
        raise ReportError("no case has a correct efir time: nothing to draw")
    labels = [f"{r['workload']}\nB={r['B']}" for r in rs]
    xs = list(range(len(rs)))
    names = ["efir"] + sorted({p for r in rs for p in r["peers"]})
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(6.0, 1.1 * len(rs) + 2), 8), constrained_layout=True)
    sp = [r["speedup"] or 0.0 for r in rs]
    ax1.bar(xs, sp, color=["tab:green" if s >= 1.0 else "tab:red" for s in sp])
    ax1.axhline(1.0, color="black", linewidth=0.8)
    ax1.set_ylim(0, 1.25 * max(sp + [1.0]))  # room for the labels
    for x, r in zip(xs, rs):
        if r["speedup"]:
            ax1.annotate(f"{r['speedup']:.2f}x\nvs {r['peer']}", (x, r["speedup"]), ha="center", va="bottom", fontsize=7)
    ax1.set_ylabel("speedup over the best peer")
    ax1.set_title(title or f"efir against PyTorch: {header(res)}")
    ax1.set_xticks(xs, labels, fontsize=8)
    width = 0.8 / len(names)
    top = 1.0
    for i, n in enumerate(names):
        vals = []
        for r in rs:
            t = r["efir_us"] if n == "efir" else r["peers"].get(n)
            vals.append(r["floor_us"] / t if t and r["floor_us"] else 0.0)
        top = max(top, *vals)
        ax2.bar([x - 0.4 + width * (i + 0.5) for x in xs], vals, width, label=n)
    ax2.axhline(1.0, color="black", linewidth=0.8)
    ax2.set_ylim(0, 1.3 * top)  # room for the legend
    ax2.set_ylabel("floor / time (1.0: at the floor)")
    ax2.set_xticks(xs, labels, fontsize=8)
    ax2.legend(fontsize=8, ncol=min(len(names), 6), loc="upper center")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(args):
    """The `report` subcommand: the table on stdout, the chart to `args.out`."""
    import sys

    try:
        res = load(args.results)
        sys.stdout.write(table(res, markdown=args.markdown))
        if args.out:
            plot(res, args.out)
            print(f"wrote {args.out}", file=sys.stderr)
    except ReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0
