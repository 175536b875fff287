#!/usr/bin/env python3
"""The counted adversarial campaign of issue 30.

Runs a few hundred crafted inputs and command lines against `efir-opt`,
`efir-translate`, `efir-run` (release binaries by default) and the Python
package (`python -m efir ...` and `efir.compile`, through the binaries), each
under a timeout, and classifies every outcome:

- `clean`: exit 1 with an `error` diagnostic, or exit 2 with a usage message
  (for Python: a documented exception such as CompileError, or argparse's
  usage error);
- `success`: exit 0 (and the result checked where the case has a check);
- `panic`: exit 101 / "panicked" (Python: an uncaught traceback, or an
  undocumented exception type from `efir.compile`);
- `crash`: killed by a signal (a closed pipe's SIGPIPE excepted);
- `hang`: the timeout passed;
- `wrong`: a wrong answer or a misleading exit: efir-run's result differs
  from numpy's, a translated module differs from the interpreter under
  TRITON_INTERPRET=1, a pass changes a program's meaning or prints text its
  own parser rejects, exit 0 where the input or the output was bad, an exit
  1 without a message, an undocumented exit code;
- `injection`: a hostile name made generated code run something (a
  sentinel file appeared).

Usage (from the repository root):

    cargo build --release -q -p efir-opt -p efir-translate -p efir-run
    ~/.cache/efir-venv/bin/python tools/adversarial/campaign.py \
        [--bin-dir target/release] [--jobs 2] [--only TOOL] [--out FILE.md]

It prints the table of counts per tool per outcome and every case that is
not `clean` or `success`, and writes both to `--out` (default
bench/results/<date>-adversarial.md). The cases, checks and runner are the
package `adv/` beside this file, one module per concern (`adv/__init__.py`).
"""

import argparse
import datetime
import json
import pathlib
import random
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from adv import make_cases  # noqa: E402
from adv.model import ROOT, TOOLS  # noqa: E402
from adv.report import render  # noqa: E402
from adv.runner import Ctx, execute  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin-dir", default=str(ROOT / "target" / "release"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", action="append", choices=TOOLS)
    ap.add_argument("--cat", action="append", help="only these categories")
    ap.add_argument("--grep", help="only cases whose name contains this")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / f"{datetime.date.today()}-adversarial.md"))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--json", help="also write every case's outcome here")
    ap.add_argument("--combine", nargs="+", help="render the table of these --json files (no run)")
    ap.add_argument("--verbose", action="store_true", help="print every case's outcome as it ends")
    ap.add_argument("--label", default="", help="a title suffix for the results file (e.g. 'before fixes')")
    args = ap.parse_args()
    ctx = Ctx(pathlib.Path(args.bin_dir).resolve())
    cases = make_cases(random.Random(30), args.only)
    if args.cat:
        cases = [c for c in cases if c.cat in args.cat]
    if args.grep:
        cases = [c for c in cases if args.grep in c.name]
    if args.combine:
        recs = [r for f in args.combine for r in json.loads(pathlib.Path(f).read_text())]
        report = render(recs, args, 0.0)
        print(report)
        if not args.no_write:
            pathlib.Path(args.out).write_text(report)
        return 0
    results, elapsed = execute(cases, ctx, args.jobs, args.verbose)
    recs = [dict(tool=c.tool, cat=c.cat, name=c.name, outcome=o, note=n, secs=t) for c, o, n, t in results]
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(recs, indent=0))
    report = render(recs, args, elapsed)
    print(report)
    if not args.no_write:
        pathlib.Path(args.out).write_text(report)
        print(f"written to {args.out}")
    bad = [r for r in results if r[1] not in ("clean", "success")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
