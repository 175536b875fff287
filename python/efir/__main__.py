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

NAME is a torch.nn.Module subclass (constructed without arguments), a
module instance or a function of tensors; each --example-shapes gives one
input's shape and dtype (f16, bf16, f32). The program is captured with
torch.export and written as .efir (stdout without -o).

Exit status: 0 ok, 1 an error in the input, 2 usage; an error is one
`error: ...` line on stderr (a failed write of the output included).
"""

import argparse
import importlib.util
import logging
import math
import os
import re
import sys

# torch is imported by the subcommands that need it (`report` does not)
DT = {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}
# the largest example input `import` allocates
_MAX_EXAMPLE_BYTES = 4 << 30


class _Fail(Exception):
    """A command's error: printed as `error: MESSAGE`, exit status `code`
    (1: an error in the input, 2: usage)."""

    def __init__(self, message, code=1):
        super().__init__(message)
        self.code = code


def _one_line(e):
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


def _example_shape(spec):
    """The shape and dtype name of one --example-shapes value (`2x32:f16`)."""
    shape, _, dt = spec.partition(":")
    if dt and dt not in DT:
        raise _Fail(f"unknown dtype `{dt}` in --example-shapes `{spec}` (f16, bf16, f32)", 2)
    parts = shape.split("x") if shape else []
    if not all(re.fullmatch(r"[0-9]+", d) for d in parts):
        raise _Fail(f"--example-shapes `{spec}`: expected dimensions such as 2x32 (non-negative integers separated by `x`), then an optional :f16, :bf16 or :f32", 2)
    return [int(d) for d in parts], DT.get(dt or "f32")


def _example(spec):
    import torch

    dims, dt = _example_shape(spec)
    dtype = getattr(torch, dt)
    nbytes = math.prod(dims) * torch.empty((), dtype=dtype).element_size()
    if nbytes > _MAX_EXAMPLE_BYTES:
        raise _Fail(f"--example-shapes `{spec}`: {nbytes:,} bytes, more than the {_MAX_EXAMPLE_BYTES >> 30} GiB an example input may take")
    try:
        return torch.randn(*dims, dtype=dtype)
    except (RuntimeError, MemoryError) as e:
        raise _Fail(f"--example-shapes `{spec}`: cannot allocate it: {_one_line(e)}") from None


def _write(text, out):
    """`text` into file `out`, or stdout when None; failures are errors."""
    if out is None:
        try:
            sys.stdout.write(text)
            sys.stdout.flush()
        except OSError as e:
            _quiet_stdout()
            raise _Fail(f"cannot write to stdout: {e.strerror or e}") from None
        return
    try:
        with open(out, "w") as f:
            f.write(text)
    except OSError as e:
        raise _Fail(f"cannot write `{out}`: {e.strerror or e}") from None


def _quiet_stdout():
    """Point stdout at /dev/null after a failed write, so that the flush at
    exit does not fail again (with a traceback)."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, sys.stdout.fileno())
        os.close(fd)
    except (OSError, ValueError):
        pass


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
    # (EFIR_TUNE_BUDGET is read by `tune` itself, so that a bad value fails only there)
    tun.add_argument("--budget", type=float, default=None, help="seconds of measurement (default 60, or EFIR_TUNE_BUDGET)")
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
    try:
        if args.cmd == "report":
            return _report(args)
        if args.cmd == "tune":
            return _tune(args)
        if args.cmd == "cache":
            return _cache(args)
        if args.cmd == "run-ttir":
            return ttir.main(args)
        return _import(args)
    except _Fail as e:
        print(f"error: {e}", file=sys.stderr)
        return e.code


def _report(args):
    """`report`: the table is made first and written by `_write` (a closed
    or full stdout is one error line, exit 1); an unwritable chart path and
    an input beyond the tools' 256 MiB (/dev/zero) too."""
    import contextlib
    import io

    from .report import main as report
    from .tune import MAX_INPUT_BYTES

    # an endless file (/dev/zero) would never end json.load: the tools' limit
    try:
        with open(args.results, "rb") as f:
            big = len(f.read(MAX_INPUT_BYTES + 1)) > MAX_INPUT_BYTES
    except OSError:
        big = False  # report says why it cannot be read
    if big:
        raise _Fail(f"`{args.results}` is larger than {MAX_INPUT_BYTES >> 20} MiB, the most an efir tool reads")
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            rc = report(args)
    except OSError as e:
        raise _Fail(f"cannot write `{args.out}`: {e.strerror or e}") from None
    _write(buf.getvalue(), None)
    return rc


def _user_object(target):
    """The object NAME of FILE.py:NAME, the file run as a module."""
    path, _, name = target.partition(":")
    if not name or not path:
        raise _Fail(f"expected FILE.py:NAME, got `{target}`", 2)
    if not os.path.isfile(path):
        why = "is not a file" if os.path.exists(path) else "does not exist"
        raise _Fail(f"cannot read `{path}`: it {why}")
    spec = importlib.util.spec_from_file_location("efir_user_program", path)
    if spec is None:
        raise _Fail(f"expected FILE.py:NAME, got `{target}` (`{path}` is not a .py file)", 2)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except SyntaxError as e:
        raise _Fail(f"{e.filename or path}:{e.lineno or 0}: {e.msg}") from None
    except (Exception, SystemExit) as e:  # noqa: BLE001 (the user's module fails: said, not hidden)
        raise _Fail(f"running `{path}` failed: {_one_line(e)}") from None
    obj = getattr(mod, name, None)
    if obj is None:
        raise _Fail(f"`{path}` has no `{name}`")
    return obj, name


def _import(args):
    obj, name = _user_object(args.target)
    import torch

    from .program import as_module, export as _export
    from .stages import CompileError
    from .importer import ImportError_, import_program

    if isinstance(obj, torch.nn.Module):
        m = obj
    elif isinstance(obj, type) and issubclass(obj, torch.nn.Module):
        try:
            m = obj()
        except Exception as e:  # noqa: BLE001 (the user's constructor fails)
            raise _Fail(f"cannot construct `{name}` without arguments: {_one_line(e)}") from None
    elif callable(obj) and not isinstance(obj, type):
        m = as_module(obj)
    else:
        raise _Fail(f"`{name}` ({type(obj).__name__}) is not a torch.nn.Module subclass or a function of tensors")
    inputs = tuple(_example(s) for s in args.example_shapes)
    # torch logs the traceback of an op that fails during the export (a
    # wrong example shape) before raising; the error line says it (-v shows it)
    quiet = [] if args.verbose else [logging.getLogger(n) for n in ("torch", "torch._subclasses.fake_tensor")]
    levels = [lg.level for lg in quiet]
    for lg in quiet:
        lg.setLevel(logging.CRITICAL)
    try:
        ep = _export(m, inputs)
        text = import_program(ep, name)
    except (ImportError_, CompileError) as e:
        raise _Fail(str(e).strip()) from None
    finally:
        for lg, lv in zip(quiet, levels):
            lg.setLevel(lv)
    _write(text, args.out)
    return 0


def _budget(args):
    """--budget, else EFIR_TUNE_BUDGET, else 60: a positive, finite number
    of seconds."""
    b, what = args.budget, "--budget"
    if b is None:
        env = os.environ.get("EFIR_TUNE_BUDGET", "").strip()
        what = "EFIR_TUNE_BUDGET"
        try:
            b = float(env) if env else 60.0
        except ValueError:
            raise _Fail(f"EFIR_TUNE_BUDGET must be a number of seconds, found `{env}`", 2) from None
    if not (0 < b < float("inf")):
        raise _Fail(f"{what} must be a positive number of seconds, found {b}", 2)
    return b


def _tune(args):
    import sqlite3

    from .tune import TuneError, tune_file

    budget = _budget(args)
    if args.top < 1:
        raise _Fail(f"--top must be at least 1, found {args.top}", 2)
    from .log import bar

    with bar("tune", unit="schedule") as b:

        def progress(name, cfg, t, best):
            b.update(1)
            b.set_postfix_str(f"{name} best {best:.1f} us" if best < float("inf") else name)

        try:
            res = tune_file(args.input, args.out, budget_s=budget, top=args.top, progress=progress)
        except (TuneError, OSError, sqlite3.Error) as e:
            raise _Fail(str(e)) from None
    how = "from the cache" if res["cached"] else f"{res['measured']} schedules measured"
    print(f"@{res['candidate']}: {res['time_us']:.1f} us ({how}) -> {args.out}", file=sys.stderr)
    return 0


def _cache(args):
    import sqlite3

    from .tune import Cache, cache_dir

    try:
        c = Cache()
        if args.action == "clear":
            text = f"removed {c.clear()} entries from {c.path}\n"
        else:
            rows = c.entries()
            lines = []
            for r in rows:
                env = r["meta"].get("env", {})
                lines.append(f"{r['key'][:12]}  @{r['candidate']}  {r['time_us']:.1f} us  {env.get('device')}  {r['meta'].get('file', '')}\n")
            text = "".join(lines) + f"{len(rows)} entries in {c.path}\n"
    except (OSError, sqlite3.Error, ValueError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        if isinstance(e, FileExistsError):
            why = f"`{e.filename}` is not a folder"
        env = " (EFIR_CACHE_DIR)" if os.environ.get("EFIR_CACHE_DIR") else ""
        raise _Fail(f"cannot use the tuning cache under `{cache_dir()}`{env}: {why}") from None
    _write(text, None)
    return 0


def _entry():
    """`python -m efir`: main(), with what it printed flushed (a closed or
    full stdout is an error, not a traceback at exit)."""
    rc = main()
    try:
        sys.stdout.flush()
    except OSError as e:
        _quiet_stdout()
        print(f"error: cannot write to stdout: {e.strerror or e}", file=sys.stderr)
        rc = rc or 1
    return rc


if __name__ == "__main__":
    sys.exit(_entry())
