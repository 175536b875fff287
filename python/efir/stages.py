"""The Rust stages of `efir.compile` (saturate + compact, translate to
Triton), each written once and run either in-process by the native module
`efir._efir` or as the `efir-opt` / `efir-translate` binaries
(`efir.tools.find`: EFIR_BIN_DIR, else the wheel's, else the repository's
target/release or target/debug); and what reads their output: loading a
generated module (`load`), its static estimate (`estimate`), timing a
stage (`timed`).

Both paths report alike: a failure is a CompileError whose first line is
`TOOL FLAGS failed: <first diagnostic>`, with the rendered diagnostics in
`.diagnostic` and the first code in `.code`; warnings that a normal compile
meets (E0706: a limit reached; E0801: a candidate that cannot be lowered
while another can) go to the caller's `diags` list and the `efir` logger at
DEBUG; other warnings are issued (EfirWarning in-process, UserWarning from
a binary).
"""

import ast
import builtins
import hashlib
import linecache
import logging
import os
import pathlib
import re
import subprocess
import sys
import time
import warnings

from . import log as _log
from . import tools as _tools

try:
    from . import _efir
except ImportError:  # built without the extension
    _efir = None

log = logging.getLogger("efir")

# Warnings that a normal compile meets: logged at DEBUG, kept in the stats.
_ROUTINE = ("E0706", "E0801")


class CompileError(Exception):
    """A stage of the pipeline failed; the message says which and why.
    `diagnostic`: the rendered diagnostics (or the tool's stderr), `code`:
    the first error's code such as "E0801" when known."""

    def __init__(self, message, diagnostic=None, code=None):
        super().__init__(message)
        self.diagnostic = diagnostic
        self.code = code


def native():
    """The native module `efir._efir` when compile uses it (built, and
    EFIR_NO_NATIVE is not 1), else None."""
    if _efir is None or os.environ.get("EFIR_NO_NATIVE") == "1":
        return None
    return _efir


def _bin(name):
    """Tool `name`'s binary (`efir.tools.find`); CompileError when there is
    none."""
    try:
        return _tools.find(name)
    except FileNotFoundError as e:
        raise CompileError(str(e)) from None


def _routine(diags, rendered):
    """Record the warnings (rendered diagnostics) that a normal compile
    meets in `diags`, at DEBUG level; the others are returned."""
    rest = []
    for w in rendered:
        m = re.match(r"warning\[(E\d{4})\]", w.strip())
        if m and m.group(1) in _ROUTINE:
            diags.append(w.strip())
            log.debug("%s", w.strip())
        else:
            rest.append(w.strip())
    return rest


def _stderr_warnings(stderr):
    """The rendered warnings in a tool's stderr, one string each (a headline
    `warning[...]` and the lines up to the next headline)."""
    out, cur = [], None
    for line in stderr.splitlines():
        if re.match(r"(warning|error|note)(\[E\d{4}\])?:", line):
            cur = [line] if line.startswith("warning") else None
            if cur is not None:
                out.append(cur)
        elif cur is not None:
            cur.append(line)
    return ["\n".join(w).rstrip() for w in out]


def _code(headline):
    m = re.match(r"(?:error|warning)\[(E\d{4})\]", headline)
    return m.group(1) if m else None


def _ranking(plans):
    """The ranking that says why the best program was chosen, from
    `efir-translate --print-plan`'s stderr (None if absent)."""
    lines = plans.splitlines()
    at = next((i for i, l in enumerate(lines) if l.startswith("chosen: @")), None)
    if at is None:
        return None
    block = [lines[at]]
    for line in lines[at + 1 :]:
        if not line.startswith("  "):
            break
        block.append(line)
    return "\n".join(block)


# `efir-translate` without `-o` writes each program's module after this line.
_MODULE_HEAD = re.compile(r"^# ===== @(.+) =====\n", re.M)


class Stages:
    """The tool runner: `opt` and `translate`, each the tool's command line
    run in-process by `nat` (the native module) or as the binary. Both read
    and write files under `work`; `diags` collects routine warnings."""

    def __init__(self, work, nat, diags):
        # Absolute: a relative work folder named like a flag (`-w`) reached
        # the binaries as `-w/program.efir`, an unknown flag (issue 30).
        self.work, self.nat, self.diags = pathlib.Path(os.path.abspath(work)), nat, diags

    def opt(self, flags, src, out):
        """`efir-opt SRC FLAGS -o OUT`."""

        def native(text, name):
            return self.nat.run_passes(text, flags, filename=name)

        text, _ = self._run("efir-opt", flags, src, native, ["-o", str(self.work / out)])
        if text is not None:
            (self.work / out).write_text(text)

    def translate(self, src, top=1, dims=None):
        """`efir-translate --to-triton SRC --top TOP [--dim NAME=N,...]`: the
        `top` best candidates by static estimate (a tuned file holds one,
        with its schedule), as `(programs, ranking)`: `programs` a list of
        (program name, Python module source), best first; `ranking` what
        `--print-plan` says about the choice (from the binary; None
        in-process). `dims`: the sizes of symbolic extents the estimate
        ranks at (`{"dyn0": 8}`)."""
        flags = ["--to-triton", "--top", str(top)]
        bad = {k: n for k, n in (dims or {}).items() if not isinstance(n, int) or n < 1}
        if bad:
            raise CompileError(f"efir-translate --dim: sizes must be positive integers, got {bad}")
        if dims:
            flags += ["--dim", ",".join(f"{k}={int(n)}" for k, n in sorted(dims.items()))]

        def native(text, name):
            return self.nat.to_triton(text, filename=name, top=top, dims=dict(dims or {}))

        programs, stdout = self._run("efir-translate", flags, src, native, ["--print-plan"])
        if programs is not None:
            return [tuple(p) for p in programs], None
        out, stderr = stdout
        parts = _MODULE_HEAD.split(out)
        programs = list(zip(parts[1::2], parts[2::2]))
        if not programs:
            raise CompileError(f"efir-translate {' '.join(flags)} wrote no module", diagnostic=stderr)
        return programs, _ranking(stderr)

    def _run(self, tool, flags, src, native, cli_extra):
        """Run `tool FLAGS` on `work/SRC`: in-process, `(native(text,
        filename), None)`; as the binary, `(None, (stdout, stderr))`."""
        # (warnings issued here point at compile's caller: _run <- opt or
        # translate <- the stage's lambda <- timed <- compile <- caller)
        what = " ".join([tool, *flags])
        src = self.work / src
        if self.nat is None:
            r = subprocess.run([_bin(tool), str(src), *flags, *cli_extra], capture_output=True, text=True)
            if r.returncode != 0:
                lines = [l.strip() for l in r.stderr.splitlines() if l.strip()]
                heads = [l for l in lines if l.startswith(("error", "warning"))]
                reason = heads[0] if heads else (lines[0] if lines else f"exit status {r.returncode}")
                err = r.stderr.strip()[-4000:]
                raise CompileError(f"{what} failed: {reason}\n{err}", diagnostic=err, code=_code(reason))
            for w in _routine(self.diags, _stderr_warnings(r.stderr)):
                warnings.warn(f"efir: {w}", stacklevel=6)
            return None, (r.stdout, r.stderr)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", self.nat.EfirWarning)
            try:
                result = native(src.read_text(), str(src))
            except self.nat.EfirError as e:
                # The first line names the stage and the first error (the
                # torch.compile fallback warning shows only that line).
                raise CompileError(f"{what} failed: {e}", diagnostic=str(e), code=e.code) from e
        ours = [w for w in caught if issubclass(w.category, self.nat.EfirWarning)]
        for w in caught:
            if w not in ours:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        for w in _routine(self.diags, [str(w.message) for w in ours]):
            warnings.warn(w, self.nat.EfirWarning, stacklevel=6)
        return result, None


def load(path, source):
    """Load a generated module from its text (the file may be removed
    afterwards): the text is registered with linecache, so `inspect` (and
    Triton's JIT) still read the kernels' source."""
    key = hashlib.sha1(source.encode()).hexdigest()[:12]
    filename = f"<efir-generated {path} {key}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    mod = type(sys)(f"efir_compiled_{key}")
    mod.__file__ = filename
    exec(builtins.compile(source, filename, "exec"), mod.__dict__)  # noqa: S102
    return mod


def estimate(source):
    """A generated module's ESTIMATE dict (kernels, bytes, flops, time_us)."""
    m = re.search(r"^ESTIMATE = (\{.*\})$", source, re.M)
    return ast.literal_eval(m.group(1)) if m else {}


def timed(name, quiet, stages, fn, indicator=True):
    """Run one stage, its seconds recorded in `stages[name]`: logged at
    INFO when done (shown unless `quiet`: `log.shown`), with a progress
    indicator (`log.working`) on a terminal meanwhile unless `quiet` or
    not `indicator` (a stage that draws its own bar)."""
    t0 = time.time()
    log.debug("%s ...", name)
    with _log.working(name, enabled=indicator and not quiet):
        out = fn()
    stages[name] = time.time() - t0
    log.info("%s done in %.2f s", name, stages[name])
    return out
