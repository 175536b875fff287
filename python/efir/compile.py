"""`efir.compile`: a PyTorch program to efir's Triton kernels, end to end.

import (torch.export -> .efir), saturate, compact, translate to Triton (the
best candidate by efir's static estimate, default schedule, checked against
eager PyTorch on the example inputs, the next by estimate where it fails),
and load the generated module. The modules it is made of, bottom up:

- `efir.stages`: the Rust stages, run in-process (`efir._efir`) when built,
  else as the `efir-opt` and `efir-translate` binaries (`efir.tools.find`);
  each written once for both (`Stages`); loading generated modules.
- `efir.program`: the PyTorch side: argument checks, export, the program's
  arguments from a call's inputs.
- `efir.check`: candidates checked against eager PyTorch (`choose`).
- `efir.family`: `compile(..., dynamic=...)`, one compile for a family of
  sizes.
- `efir.partial` and `efir.backend`: the torch.compile backend "efir" (a
  graph compiled once per input shape, or once for its dynamic sizes; the
  parts the importer supports where it refuses an op; eager with one
  warning saying why where nothing compiles).

A successful compile is quiet: limits reached on the way (E0706, candidate
enumeration stopped by a limit) and candidates skipped because they cannot
be lowered (E0801) are normal; they go to the `efir` logger at DEBUG level
and into the returned callable's `.stats["diagnostics"]`, not to
`warnings`. Unless `quiet`, the stages and their times are the `efir`
logger's INFO records, shown on stderr for the while (`log.shown`) when
stderr is a terminal (or always with `quiet=False`), with a progress
indicator on a terminal; EFIR_LOG=info shows them anywhere. Warnings and
errors are shown either way. The temporary work folder is removed
unless `keep_workdir=True` or `workdir=` is given.
"""

import collections
import logging
import os
import pathlib
import shutil
import tempfile

import torch

from . import family as _family
from . import log as _log
from .backend import _backend, register_backend  # noqa: F401 (efir.register_backend)
from .check import CHECK_TOL, CHECK_TRIES, check_outputs, choose, verifier  # noqa: F401
from .importer import ImportError_, import_program  # noqa: F401
from .program import Args, as_module, check_arguments, check_dtypes, export
from .stages import CompileError, Stages, _bin, estimate, load, native, timed  # noqa: F401

log = logging.getLogger("efir")

# The names this module had before it was split (tests and tools use them).
_Stages, _load, _estimate, _export, _Args = Stages, load, estimate, export, Args
_check_outputs = check_outputs


class Report:
    """What `efir.compile` chose and why, as `str(report)` shows it."""

    def __init__(self, program, estimate, source_path, kept, ranking, diags, stages, tuned=None, rejected=()):
        self.tuned = tuned
        self.rejected = list(rejected)
        self.program = program
        self.estimate = estimate
        self.kernels = estimate.get("kernels")
        self.source_path = source_path
        self.kept = kept
        self.ranking = ranking
        self.diagnostics = diags
        self.stages = stages

    def _why(self):
        t = self.tuned
        if not t and self.rejected:
            tried = "; ".join(f"@{p}: {r}" for p, r in self.rejected)
            return f"  the best by efir's static estimate that agrees with PyTorch on the example inputs; {len(self.rejected)} with a better estimate failed the check: {tried}"
        if not t:
            return "  the best by efir's static estimate (what `efir-translate --top 1` emits), checked against PyTorch on the example inputs"
        how = "from the tuning cache" if t.get("cached") else f"{t.get('measured', 0)} schedules measured"
        sched = ",".join(f"{k}={v}" for k, v in (t.get("config") or {}).items())
        why = f"  the fastest measured on the GPU: {t.get('time_us', float('nan')):.1f} us with {sched} ({how})"
        if t.get("kept_eager"):
            why += f"\n  not used: eager PyTorch measured faster ({t['eager_us']:.1f} us against {t['efir_us']:.1f} us), so the compiled callable runs PyTorch's code"
        elif t.get("eager_us") is not None:
            why += f"\n  against eager PyTorch: {t['efir_us']:.1f} us for efir, {t['eager_us']:.1f} us for eager"
        return why

    def __str__(self):
        e = self.estimate
        where = str(self.source_path) if self.kept else f"{self.source_path} (removed; pass keep_workdir=True to keep it)"
        lines = [
            f"chosen candidate: @{self.program}" if self.program else "chosen candidate: (unknown)",
            self._why(),
            f"estimate: {e.get('time_us', float('nan')):.3f} us, {e.get('bytes', 0):.4g} bytes, {e.get('flops', 0):.4g} flops",
            f"kernels: {self.kernels}",
            f"generated source: {where}",
            "stages: " + ", ".join(f"{k} {v:.2f} s" for k, v in self.stages.items()),
        ]
        if self.ranking:
            lines += ["", self.ranking]
        if self.diagnostics:
            lines += ["", f"{len(self.diagnostics)} note(s) from the compile (normal; also logged at DEBUG):"]
            lines += ["  " + d.splitlines()[0] for d in self.diagnostics]
        return "\n".join(lines) + "\n"


class Reuse:
    """Programs built by `compile`, by their imported text and options, the
    `size` most recently used kept: `compile(..., reuse=r)` uses a program's
    kernels again instead of building them again."""

    def __init__(self, size=64):
        self.size = size
        self.built = collections.OrderedDict()

    def get(self, key):
        got = self.built.get(key)
        if got is not None:
            self.built.move_to_end(key)
        return got

    def put(self, key, value):
        self.built[key] = value
        while len(self.built) > self.size:
            self.built.popitem(last=False)


DEFAULT_TUNE_S = 30.0
_cpu_noted = []


def _tune_budget(tune, inputs, quiet):
    """Seconds of GPU tuning for `compile(..., tune=tune)`: `tune` itself
    when a number, else `$EFIR_TUNE` (seconds; 0 turns tuning off), else
    DEFAULT_TUNE_S; None (no tuning) for `tune=False`/0, and where the
    inputs are not on a CUDA device (said once per process)."""
    if tune is None:
        env = os.environ.get("EFIR_TUNE", "").strip()
        try:
            tune = float(env) if env else DEFAULT_TUNE_S
        except ValueError:
            raise CompileError(f"EFIR_TUNE must be a number of seconds, got {env!r}") from None
    if tune is False or not tune or tune <= 0:
        return None
    on_gpu = torch.cuda.is_available() and any(isinstance(x, torch.Tensor) and x.is_cuda for x in inputs)
    if not on_gpu:
        if not _cpu_noted:
            _cpu_noted.append(True)
            log.info("efir: no CUDA inputs: schedule tuning skipped (the static estimate chooses)")
        return None
    return float(tune)


# Distinct candidates enumerated by default (`--compact=max-candidates`, as
# efir-opt's own default): at 8 (the default before session 28) the
# enumeration's first programs held none near the best static estimate for
# rmsnorm_swiglu (a Llama MLP: 242.7 us at batch 16 against 134.9 at 64, 109.8
# against 81.2 at batch 1); for the other benchmark programs 8 and 64 find the
# same best estimate. Ranking 64 takes about a second more for such programs.
CANDIDATES = 64


def compile(fn_or_module, example_inputs, candidates=None, config=None, quiet=None, workdir=None, keep_workdir=False, tune=None, reuse=None, dynamic=None):  # noqa: A001
    """Compile a module or function of tensors; returns a callable taking the
    same (user) inputs. `candidates`: how many distinct candidates to
    enumerate (default CANDIDATES, 64: at 8, a Llama-style MLP at batch 16,
    rmsnorm_swiglu, had no candidate better than 242.7 us by static
    estimate, at 64 one of 134.9 us); `config`: a Triton schedule for the generated module
    (default: its DEFAULT_CONFIG); `quiet`: True for no progress output,
False for the stages' INFO lines on stderr even when it is not a
terminal, None (default) for them only on a terminal (`EFIR_LOG=info`
shows them anyway; warnings and errors are shown either way); `workdir`:
    a folder for the intermediate files (kept); else a temporary folder,
    removed when compile returns or fails unless `keep_workdir`; `tune`:
    seconds of schedule tuning on the GPU (`efir.tune`: the best few
    candidates by static estimate, their schedules measured against eager
    PyTorch's outputs on the example inputs; results cached), default
    `$EFIR_TUNE` or 30, `False` or 0 for none; skipped (said once) when the
    inputs are not on a CUDA device; after tuning, the compiled program and
    the module itself are timed alike on the example inputs, and where
    eager PyTorch is faster the callable runs the module instead (one
    warning says so; `.kept_eager`, and `.report()` gives both times);
    `reuse`: a `Reuse` (programs built
    before, by the imported program's text and the options): where the
    import gives a program built before, its kernels are used again and
    saturation, compaction, tuning and translation are skipped (the
    torch.compile backend shares one, so that a graph traced again by
    torch.compile does not compile its shapes again).

    `dynamic`: dims whose size may change from call to call, compiled
    once for every size (`efir.family`): `{"batch": [(0, 0), (1, 0)]}`
    (a name per size, each with its (input index, dim) places) or `[(0,
    0)]` (one size per place). The program is saturated and compacted once
    with those extents symbolic; each new size is translated and loaded on
    first use (milliseconds) where the kernels cannot take the sizes at run
    time; with `tune`, the first call in each power-of-two bucket of sizes
    tunes the schedule for the whole bucket (`efir.family`). A dim that the program cannot take
    symbolically is a CompileError saying why (compile per shape instead:
    without `dynamic`, or with the torch.compile backend). `workdir`,
    `keep_workdir` and `reuse` do not apply to a family.

    Without tuning, the candidate with the best static estimate is run once
    on the example inputs against eager PyTorch (`efir.check`): where its
    output is not finite where PyTorch's is, or off by a relative L2 error
    over CHECK_TOL (candidates are equal in real arithmetic, not always in
    floating point), the next by estimate is tried, up to CHECK_TRIES; when
    none agrees, a CompileError names each and why. A family checks each
    size's choice on the first call at that size, the same way.

    The callable has `.report()` (the chosen candidate, its static
    estimate, kernel count and generated source path, as a string),
    `.stats` (`{"stages": seconds per stage, "diagnostics": routine
    warnings such as E0706, a limit reached}`), `.module`, `.source` and
    `.workdir`."""
    module = fn_or_module if isinstance(fn_or_module, torch.nn.Module) else as_module(fn_or_module)
    inputs = tuple(example_inputs)
    candidates = CANDIDATES if candidates is None else candidates
    check_arguments(inputs, config)
    check_dtypes(module, inputs)
    with _log.shown(quiet is False or (quiet is None and _log.interactive())):
        quiet = bool(quiet)
        if dynamic is not None:
            where = _family.parse_dynamic(dynamic, inputs)
            budget = _tune_budget(tune, inputs, quiet)
            tuning = _family.Tuning(budget) if budget else None
            return _family.compile_family(module, inputs, where, candidates, config, quiet, tuning=tuning)
        return _compile(module, inputs, candidates, config, quiet, workdir, keep_workdir, tune, reuse)


def _compile(module, inputs, candidates, config, quiet, workdir, keep_workdir, tune, reuse):
    """`compile` for the example inputs' shapes."""
    keep = keep_workdir or workdir is not None
    try:
        work = pathlib.Path(workdir or tempfile.mkdtemp(prefix="efir-"))
        work.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        why = "it is not a folder" if isinstance(e, FileExistsError) else e.strerror or e
        raise CompileError(f"cannot use `{workdir}` as the work folder: {why}") from None
    diags, stages = [], {}
    nat = native()
    tools = Stages(work, nat, diags)
    try:
        ep = timed("export", quiet, stages, lambda: export(module, inputs))
        text = timed("import", quiet, stages, lambda: import_program(ep, "program"))
        (work / "program.efir").write_text(text)
        budget = _tune_budget(tune, inputs, quiet)
        key = (text, candidates, budget)
        built = reuse.get(key) if reuse is not None else None
        if built is not None:
            mod, source, program, ranking, tuned, rejected = built
            (work / "kernels.py").write_text(source)
            stages["reused"] = 0.0
            log.info("efir: program built before: its kernels are used again")
        else:
            flags = ["--saturate", f"--compact=max-candidates={candidates}"]
            timed("saturate + compact", quiet, stages, lambda: tools.opt(flags, "program.efir", "cands.efir"))
            cands, tuned = "cands.efir", None
            if budget:
                tuned = timed("tune", quiet, stages, lambda: _tune(work, ep, module, inputs, budget, candidates, quiet), indicator=False)
                cands = "tuned.efir"
            programs, ranking = timed("lower to Triton", quiet, stages, lambda: tools.translate(cands, top=1 if budget else CHECK_TRIES))
            # The tuner checks what it measures; without it, the estimate's
            # choice is checked here (and the next tried where it fails).
            verify = None if budget else verifier(module, inputs, Args(ep), config)
            choice = timed("check", quiet, stages, lambda: choose(programs, lambda name, source: load(work / "kernels.py", source), verify))
            mod, source, program, rejected = choice.module, choice.source, choice.program, choice.rejected
            (work / "kernels.py").write_text(source)
            if reuse is not None:
                reuse.put(key, (mod, source, program, ranking, tuned, rejected))
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    report = Report(program, estimate(source), work / "kernels.py", keep, ranking, diags, stages, tuned, rejected)
    args = Args(ep)

    def efir_run(*user):
        return mod.run(*args(user), config=config)

    run_fn = efir_run
    if tuned is not None:
        # Tuned on the GPU: efir's kernels against the PyTorch code they
        # would replace, timed alike; where PyTorch's is faster it is kept
        # (said once, here). A program built before keeps its verdict.
        if "eager_us" not in tuned:
            tuned.update(timed("time against eager", quiet, stages, lambda: versus_eager(efir_run, module, inputs)))
        if tuned.get("kept_eager"):
            log.warning(
                "efir: kept PyTorch's code: efir's kernels measured %.1f us against eager PyTorch's %.1f us on the example inputs",
                tuned["efir_us"],
                tuned["eager_us"],
            )

            def run_fn(*user):
                with torch.no_grad():
                    return module(*user)

    def run(*user):
        return run_fn(*user)

    run.module = mod
    run.source = source
    run.workdir = work if keep else None
    run.native = nat is not None  # whether the Rust stages ran in-process
    run.stats = {"stages": stages, "diagnostics": diags, "rejected": rejected}
    run.report = lambda: str(report)
    run.tuned = tuned
    run.kept_eager = bool(tuned and tuned.get("kept_eager"))
    return run


def versus_eager(efir_run, module, inputs):
    """`{"efir_us", "eager_us", "kept_eager"}`: CUDA-graph medians of the
    compiled program and of `module` itself on the example inputs (the same
    inputs rotated alike, weights in place for both), and whether eager
    PyTorch was faster; `{"eager_us": None, ...}` where either cannot be
    timed (then efir's kernels are kept)."""
    from . import tune as _t

    try:
        with torch.no_grad():
            e = _t.graph_time_us(lambda *xs: efir_run(*xs), list(inputs))
            p = _t.graph_time_us(lambda *xs: module(*xs), list(inputs))
    except Exception as ex:  # noqa: BLE001 (a module that a CUDA graph cannot capture: keep efir's)
        log.debug("efir: eager PyTorch not timed: %s: %s", type(ex).__name__, ex)
        return {"efir_us": None, "eager_us": None, "kept_eager": False}
    return {"efir_us": e, "eager_us": p, "kept_eager": p < e}


def _tune(work, ep, module, inputs, budget, candidates, quiet):
    """Tune `work/cands.efir` into `work/tuned.efir` on the example inputs,
    checked against eager PyTorch; the tuner's summary. A progress bar
    (schedules measured, best time) is drawn on a terminal unless `quiet`."""
    from . import tune as _t

    with torch.no_grad():
        expected = module(*inputs)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    with _log.bar("tune", unit="schedule", enabled=not quiet) as b:

        def progress(name, cfg, t, best):
            b.update(1)
            b.set_postfix_str(f"best {best:.1f} us" if best < float("inf") else name)

        try:
            return _t.tune_file(
                work / "cands.efir",
                work / "tuned.efir",
                budget_s=budget,
                top=max(1, min(4, candidates)),
                inputs=Args(ep)(inputs),
                expected=expected,
                progress=progress,
            )
        except _t.TuneError as e:
            raise CompileError(f"tuning found no correct schedule: {e}") from e


# The programs the torch.compile backend built, shared by its graphs:
# torch.compile traces a function again once a dim varies, and the new
# graph's shapes that the old one compiled import to programs built before.
_BUILT = Reuse()
