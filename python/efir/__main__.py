"""Command line:

- `python -m efir import FILE.py:NAME --example-shapes 2x32:f16 ... [-o OUT.efir]`
- `python -m efir tune CANDS.efir -o TUNED.efir [--budget SECONDS] [--top K]`
  (see `efir.tune`)
- `python -m efir cache list|clear`: the tuning cache
- `python -m efir report RESULTS.json [-o PLOT.png] [--markdown]`: a
  bench/gpu/run.py results file as a table, and as a bar chart with -o
  (matplotlib; see `efir.report`)

`-v`/`--verbose` (before the subcommand) prints the `efir` logger's INFO
records on stderr, `-vv` its DEBUG records (as EFIR_LOG=info|debug does).

NAME is a torch.nn.Module subclass (constructed without arguments) or a
function of tensors; each --example-shapes gives one input's shape and dtype
(f16, bf16, f32). The program is captured with torch.export and written as
.efir (stdout without -o).
"""

import argparse
import importlib.util
import os
import sys

# torch is imported by the subcommands that need it (`report` does not)
DT = {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}


def _example(spec):
    import torch

    shape, _, dt = spec.partition(":")
    if dt and dt not in DT:
        raise SystemExit(f"error: unknown dtype `{dt}` in `{spec}` (f16, bf16, f32)")
    dims = [int(d) for d in shape.split("x") if d]
    return torch.randn(*dims, dtype=getattr(torch, DT.get(dt or "f32")))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m efir")
    ap.add_argument("-v", "--verbose", action="count", default=0, help="print the efir logger's INFO records (-vv: DEBUG) on stderr, as EFIR_LOG does")
    sub = ap.add_subparsers(dest="cmd", required=True)
    imp = sub.add_parser("import", help="import a PyTorch program as .efir")
    imp.add_argument("target", help="FILE.py:NAME")
    imp.add_argument("--example-shapes", action="append", default=[], help="one input: 2x32:f16")
    imp.add_argument("-o", dest="out")
    tun = sub.add_parser("tune", help="tune the schedules of a file's candidates on the GPU")
    tun.add_argument("input", help="candidates (.efir, as efir-opt --saturate --compact writes them)")
    tun.add_argument("-o", dest="out", required=True, help="the tuned file (.efir)")
    tun.add_argument("--budget", type=float, default=float(os.environ.get("EFIR_TUNE_BUDGET", "60")), help="seconds of measurement (default 60, or EFIR_TUNE_BUDGET)")
    tun.add_argument("--top", type=int, default=4, help="candidates shortlisted by static estimate (default 4)")
    cac = sub.add_parser("cache", help="the tuning cache")
    cac.add_argument("action", choices=["list", "clear"])
    rep = sub.add_parser("report", help="a bench/gpu/run.py results file as a table (and a chart with -o)")
    rep.add_argument("results", help="RESULTS.json, as bench/gpu/run.py or table.py writes it")
    rep.add_argument("-o", dest="out", help="draw the chart into this file (PNG; needs matplotlib)")
    rep.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    from . import ttir  # `run-ttir` (efir.ttir)
    ttir.add_parser(sub)
    args = ap.parse_args(argv)
    if args.verbose:
        from .log import configure

        configure("debug" if args.verbose > 1 else "info")
    if args.cmd == "report":
        from .report import main as report

        return report(args)
    if args.cmd == "tune":
        return _tune(args)
    if args.cmd == "cache":
        return _cache(args)
    if args.cmd == "run-ttir":
        return ttir.main(args)
    import torch

    from .importer import ImportError_, import_program

    path, _, name = args.target.partition(":")
    spec = importlib.util.spec_from_file_location("efir_user_program", path)
    if spec is None or not name:
        raise SystemExit(f"error: expected FILE.py:NAME, got `{args.target}`")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    obj = getattr(mod, name, None)
    if obj is None:
        raise SystemExit(f"error: `{path}` has no `{name}`")
    if isinstance(obj, type) and issubclass(obj, torch.nn.Module):
        m = obj()
    else:
        from .compile import as_module

        m = as_module(obj)
    inputs = tuple(_example(s) for s in args.example_shapes)
    try:
        ep = torch.export.export(m, inputs)
        text = import_program(ep, name)
    except ImportError_ as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.out:
        open(args.out, "w").write(text)
    else:
        sys.stdout.write(text)
    return 0


def _tune(args):
    from .tune import TuneError, tune_file

    if args.budget <= 0 or args.budget != args.budget or args.budget == float("inf"):
        print(f"error: --budget must be a positive number of seconds, found {args.budget}", file=sys.stderr)
        return 2
    if args.top < 1:
        print(f"error: --top must be at least 1, found {args.top}", file=sys.stderr)
        return 2
    from .log import bar

    with bar("tune", unit="schedule") as b:

        def progress(name, cfg, t, best):
            b.update(1)
            b.set_postfix_str(f"{name} best {best:.1f} us" if best < float("inf") else name)

        try:
            res = tune_file(args.input, args.out, budget_s=args.budget, top=args.top, progress=progress)
        except (TuneError, OSError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
    how = "from the cache" if res["cached"] else f"{res['measured']} schedules measured"
    print(f"@{res['candidate']}: {res['time_us']:.1f} us ({how}) -> {args.out}", file=sys.stderr)
    return 0


def _cache(args):
    from .tune import Cache

    c = Cache()
    if args.action == "clear":
        print(f"removed {c.clear()} entries from {c.path}")
        return 0
    rows = c.entries()
    for r in rows:
        env = r["meta"].get("env", {})
        print(f"{r['key'][:12]}  @{r['candidate']}  {r['time_us']:.1f} us  {env.get('device')}  {r['meta'].get('file', '')}")
    print(f"{len(rows)} entries in {c.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
