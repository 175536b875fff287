"""Command line: `python -m efir import FILE.py:NAME --example-shapes 2x32:f16 ... [-o OUT.efir]`.

NAME is a torch.nn.Module subclass (constructed without arguments) or a
function of tensors; each --example-shapes gives one input's shape and dtype
(f16, bf16, f32). The program is captured with torch.export and written as
.efir (stdout without -o).
"""

import argparse
import importlib.util
import sys

import torch

from .importer import ImportError_, import_program

DT = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}


def _example(spec):
    shape, _, dt = spec.partition(":")
    if dt and dt not in DT:
        raise SystemExit(f"error: unknown dtype `{dt}` in `{spec}` (f16, bf16, f32)")
    dims = [int(d) for d in shape.split("x") if d]
    return torch.randn(*dims, dtype=DT.get(dt or "f32"))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m efir")
    sub = ap.add_subparsers(dest="cmd", required=True)
    imp = sub.add_parser("import", help="import a PyTorch program as .efir")
    imp.add_argument("target", help="FILE.py:NAME")
    imp.add_argument("--example-shapes", action="append", default=[], help="one input: 2x32:f16")
    imp.add_argument("-o", dest="out")
    args = ap.parse_args(argv)
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
        class Wrap(torch.nn.Module):
            def forward(self, *xs):
                return obj(*xs)

        m = Wrap()
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


if __name__ == "__main__":
    sys.exit(main())
