"""`efir.compile`: a PyTorch program to efir's Triton kernels, end to end.

import (torch.export -> .efir), saturate, compact, translate to Triton (the
best candidate by efir's static estimate, default schedule), and load the
generated module. The Rust stages run as the `efir-opt` and
`efir-translate` binaries (EFIR_BIN_DIR, else the repository's
target/release or target/debug). Also registers `torch.compile` backend
"efir": a graph that cannot be compiled falls back to eager with one
warning saying why.
"""

import importlib.util
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import warnings

import torch

from .importer import ImportError_, import_program

try:
    from . import _efir
except ImportError:  # built without the extension
    _efir = None

ROOT = pathlib.Path(__file__).resolve().parents[2]


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
    d = os.environ.get("EFIR_BIN_DIR")
    cands = [pathlib.Path(d)] if d else [ROOT / "target" / "release", ROOT / "target" / "debug"]
    for c in cands:
        if (c / name).exists():
            return str(c / name)
    raise CompileError(f"`{name}` not found (build with `cargo build`, or set EFIR_BIN_DIR)")


def _stage(name, quiet, fn):
    t0 = time.time()
    if not quiet:
        print(f"efir: {name} ...", file=sys.stderr, flush=True)
    out = fn()
    if not quiet:
        print(f"efir: {name} done in {time.time() - t0:.2f} s", file=sys.stderr, flush=True)
    return out


def _run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        # The first diagnostic's headline goes on the first line, which is
        # what the torch.compile backend's fallback warning shows.
        err = r.stderr.strip()[-2000:]
        lines = [l.strip() for l in r.stderr.splitlines() if l.strip()]
        heads = [l for l in lines if l.startswith(("error", "warning"))]
        reason = heads[0] if heads else (lines[0] if lines else f"exit status {r.returncode}")
        raise CompileError(f"{pathlib.Path(args[0]).name} failed: {reason}\n{err}", diagnostic=err)
    return r


def _in_process(what, quiet, fn):
    """Run a native stage: EfirError becomes CompileError with the rendered
    diagnostic; warnings (EfirWarning, such as a candidate limit reached) are
    shown unless `quiet`, like the binaries' stderr."""
    with warnings.catch_warnings():
        if quiet:
            warnings.simplefilter("ignore", _efir.EfirWarning)
        try:
            return fn()
        except _efir.EfirError as e:
            # The first line names the stage and the first error (the torch.compile
            # fallback warning shows only that line).
            raise CompileError(f"{what} failed: {e}", diagnostic=str(e), code=e.code) from e


def _saturate_compact(work, candidates, quiet, nat):
    flags = ["--saturate", f"--compact=max-candidates={candidates}"]
    if nat is None:
        _run([_bin("efir-opt"), str(work / "program.efir"), *flags, "-o", str(work / "cands.efir")])
        return
    text = (work / "program.efir").read_text()
    out = _in_process("efir-opt " + " ".join(flags), quiet, lambda: nat.run_passes(text, flags, filename=str(work / "program.efir")))
    (work / "cands.efir").write_text(out)


def _to_triton(work, quiet, nat):
    if nat is None:
        _run([_bin("efir-translate"), "--to-triton", str(work / "cands.efir"), "--top", "1", "-o", str(work / "kernels.py")])
        return
    text = (work / "cands.efir").read_text()
    progs = _in_process("efir-translate --to-triton --top 1", quiet, lambda: nat.to_triton(text, filename=str(work / "cands.efir"), top=1))
    (work / "kernels.py").write_text(progs[0][1])


def compile(fn_or_module, example_inputs, candidates=8, config=None, quiet=False, workdir=None):  # noqa: A001
    """Compile a module or function of tensors; returns a callable taking the
    same (user) inputs. `candidates`: how many distinct candidates to
    enumerate; `config`: a Triton schedule for the generated module
    (default: its DEFAULT_CONFIG); `quiet`: no progress output."""
    if isinstance(fn_or_module, torch.nn.Module):
        module = fn_or_module
    else:
        fn = fn_or_module

        class _Wrap(torch.nn.Module):
            def forward(self, *xs):
                return fn(*xs)

        module = _Wrap()
    inputs = tuple(example_inputs)
    work = pathlib.Path(workdir or tempfile.mkdtemp(prefix="efir-"))
    work.mkdir(parents=True, exist_ok=True)
    ep = _stage("export", quiet, lambda: torch.export.export(module, inputs))
    text = _stage("import", quiet, lambda: import_program(ep, "program"))
    (work / "program.efir").write_text(text)
    nat = native()
    _stage("saturate + compact", quiet, lambda: _saturate_compact(work, candidates, quiet, nat))
    _stage("lower to Triton", quiet, lambda: _to_triton(work, quiet, nat))
    spec = importlib.util.spec_from_file_location(f"efir_compiled_{id(work)}", work / "kernels.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    # Parameters and buffers, in the program's argument order, then the user inputs.
    state = dict(ep.state_dict)
    state.update(getattr(ep, "constants", {}) or {})
    fixed = []
    n_user = 0
    for s in ep.graph_signature.input_specs:
        if s.target:
            fixed.append((len(fixed) + n_user, state[s.target]))
        else:
            n_user += 1

    def run(*user):
        if len(user) != n_user:
            raise TypeError(f"the compiled program takes {n_user} inputs, got {len(user)}")
        args, it = [], iter(user)
        spec_list = ep.graph_signature.input_specs
        for s in spec_list:
            args.append(state[s.target].to(user[0].device) if s.target else next(it))
        return mod.run(*args, config=config)

    run.module = mod
    run.workdir = work
    run.native = nat is not None  # whether the Rust stages ran in-process
    return run


def _backend(gm, example_inputs):
    try:
        compiled = compile(gm, [torch.empty_like(x) if not isinstance(x, torch.Tensor) else x for x in example_inputs], quiet=True)
    except (ImportError_, CompileError, Exception) as e:  # noqa: BLE001
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        warnings.warn(f"efir: falling back to eager: {first}", stacklevel=2)
        return gm.forward

    def call(*args):
        out = compiled(*args)
        return (out,) if isinstance(out, torch.Tensor) else out

    return call


def register_backend():
    """Register `torch.compile(model, backend="efir")` (idempotent)."""
    from torch._dynamo import list_backends, register_backend as reg

    if "efir" not in list_backends(exclude_tags=()):
        reg(name="efir")(_backend)
