"""The results file: counts per tool and outcome, per category, the findings
(`render`)."""

from .model import OUTCOMES, TOOLS


def render(recs, args, elapsed):
    outs = OUTCOMES + (["campaign-error"] if any(r["outcome"] == "campaign-error" for r in recs) else [])
    how = f"{elapsed:.0f} s with {args.jobs} jobs" if elapsed else "combined runs: " + ", ".join(args.combine or [])
    lines = [f"# Adversarial campaign (issue 30){' — ' + args.label if args.label else ''}", "",
             f"`tools/adversarial/campaign.py --bin-dir {args.bin_dir}`, {len(recs)} cases, {how}.", "",
             "| tool | cases | " + " | ".join(outs) + " |", "|---|---:|" + "---:|" * len(outs)]
    for t in TOOLS + ["all"]:
        rs = [r for r in recs if r["tool"] == t or t == "all"]
        if rs:
            lines.append(f"| {t} | {len(rs)} | " + " | ".join(str(sum(1 for r in rs if r["outcome"] == o)) for o in outs) + " |")
    cats = sorted({r["cat"] for r in recs})
    lines += ["", "Cases per category:", "", "| tool | " + " | ".join(cats) + " |", "|---|" + "---:|" * len(cats)]
    for t in TOOLS:
        rs = [r for r in recs if r["tool"] == t]
        if rs:
            lines.append(f"| {t} | " + " | ".join(str(sum(1 for r in rs if r["cat"] == c)) for c in cats) + " |")
    bad = sorted([r for r in recs if r["outcome"] not in ("clean", "success")], key=lambda r: (r["tool"], r["outcome"], r["cat"], r["name"]))
    lines += ["", f"## Findings ({len(bad)})", ""]
    for r in bad:
        name = r["name"].replace("\n", "\\n")
        lines.append(f"- {r['tool']} · {r['outcome']} · {r['cat']}/{name}: {r['note']}")
    slow = sorted(recs, key=lambda r: -r["secs"])[:8]
    lines += ["", "Slowest cases: " + ", ".join(f"{r['tool']} {r['name'][:40]} {r['secs']:.1f} s" for r in slow), ""]
    return "\n".join(lines)
