"""`efir.compile`: a PyTorch program to efir's Triton kernels, end to end.

import (torch.export -> .efir), saturate, compact, translate to Triton (the
best candidate by efir's static estimate, default schedule), and load the
generated module. The Rust stages run in-process (`efir._efir`) when built,
else as the `efir-opt` and `efir-translate` binaries (`efir.tools.find`:
EFIR_BIN_DIR, else the wheel's, else the repository's target/release or
target/debug); `_Stages` writes each stage
once for both. Also registers `torch.compile` backend "efir": a graph whose
sizes torch.compile made dynamic is compiled once for all of them where the
program takes them as symbolic extents (`efir.family`: saturated and
compacted once, translated at each new size), else once per input shape
(the sizes fixed at each call's values, the reason logged at INFO); a graph
that cannot be compiled falls back to eager with one warning saying why.
`compile(..., dynamic=...)` is the same family for direct calls.

A successful compile is quiet: limits reached on the way (E0706, candidate
enumeration stopped by a limit) and candidates skipped because they cannot
be lowered (E0801) are normal; they go to the `efir` logger at DEBUG level
and into the returned callable's `.stats["diagnostics"]`, not to
`warnings`. The temporary work folder is removed unless `keep_workdir=True`
or `workdir=` is given.
"""

import ast
import builtins
import collections
import collections.abc
import hashlib
import itertools
import linecache
import logging
import operator
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import torch

from .importer import DTYPES, ImportError_, import_program
from . import family as _family
from . import tools as _tools
from .log import bar

try:
    from . import _efir
except ImportError:  # built without the extension
    _efir = None

ROOT = pathlib.Path(__file__).resolve().parents[2]

log = logging.getLogger("efir")

# Warnings that a normal compile meets (a limit reached, a candidate that
# cannot be lowered while another can): logged at DEBUG, kept in the stats.
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
    """Tool `name`'s binary (`efir.tools.find`: EFIR_BIN_DIR, else the
    wheel's `efir/bin`, else the repository's target/release or
    target/debug); CompileError when there is none."""
    try:
        return _tools.find(name)
    except FileNotFoundError as e:
        raise CompileError(str(e)) from None


def _routine(diags, rendered):
    """Record warnings (rendered diagnostics) that a normal compile meets at
    DEBUG level in `diags`; the others are returned."""
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


class _Stages:
    """The Rust stages of `compile`, each written once as the tool's command
    line (`efir-opt FLAGS`, `efir-translate FLAGS`) and run either in-process
    by the native module `efir._efir` (`nat`) or as the binary; both read
    `work/SRC` and write `work/OUT`, and both report alike: a failure is a
    CompileError whose first line is `TOOL FLAGS failed: <first
    diagnostic>`, with the rendered diagnostics in `.diagnostic` and the
    first code in `.code`; routine warnings (E0706, E0801) go to `diags` and
    the DEBUG log, other warnings are issued (EfirWarning in-process,
    UserWarning from a binary)."""

    def __init__(self, work, nat, diags):
        self.work, self.nat, self.diags = work, nat, diags

    def opt(self, flags, src, out):
        """`efir-opt SRC FLAGS -o OUT`."""
        self._run("efir-opt", flags, src, out, lambda text, name: (self.nat.run_passes(text, flags, filename=name), None))

    def translate(self, src, out):
        """`efir-translate --to-triton SRC --top 1 -o OUT`: the best candidate
        by static estimate (a tuned file holds one, with its schedule) as a
        Python module; returns its program name and, from the binary, the
        ranking that `--print-plan` prints (None in-process)."""

        def native(text, name):
            (prog, source), *_ = self.nat.to_triton(text, filename=name, top=1)
            return source, prog

        return self._run("efir-translate", ["--to-triton", "--top", "1"], src, out, native, cli_only=["--print-plan"])

    def _run(self, tool, flags, src, out, native, cli_only=()):
        # (warnings issued here point at compile's caller: _run <- opt or
        # translate <- the stage's lambda <- _stage <- compile <- caller)
        what = " ".join([tool, *flags])
        src, out = self.work / src, self.work / out
        if self.nat is None:
            r = subprocess.run([_bin(tool), str(src), *flags, *cli_only, "-o", str(out)], capture_output=True, text=True)
            if r.returncode != 0:
                lines = [l.strip() for l in r.stderr.splitlines() if l.strip()]
                heads = [l for l in lines if l.startswith(("error", "warning"))]
                reason = heads[0] if heads else (lines[0] if lines else f"exit status {r.returncode}")
                err = r.stderr.strip()[-4000:]
                raise CompileError(f"{what} failed: {reason}\n{err}", diagnostic=err, code=_code(reason))
            for w in _routine(self.diags, _stderr_warnings(r.stderr)):
                warnings.warn(f"efir: {w}", stacklevel=6)
            return _chosen(r.stderr)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", self.nat.EfirWarning)
            try:
                text, result = native(src.read_text(), str(src))
            except self.nat.EfirError as e:
                # The first line names the stage and the first error (the
                # torch.compile fallback warning shows only that line).
                raise CompileError(f"{what} failed: {e}", diagnostic=str(e), code=e.code) from e
        out.write_text(text)
        ours = [w for w in caught if issubclass(w.category, self.nat.EfirWarning)]
        for w in caught:
            if w not in ours:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        for w in _routine(self.diags, [str(w.message) for w in ours]):
            warnings.warn(w, self.nat.EfirWarning, stacklevel=6)
        return result, None


def _code(headline):
    m = re.match(r"(?:error|warning)\[(E\d{4})\]", headline)
    return m.group(1) if m else None


def _chosen(plans):
    """The chosen program's name and the ranking that says why, from
    `efir-translate --print-plan`'s stderr (None, None if absent)."""
    lines = plans.splitlines()
    at = next((i for i, l in enumerate(lines) if l.startswith("chosen: @")), None)
    if at is None:
        return None, None
    block = [lines[at]]
    block += [l for l in itertools.takewhile(lambda l: l.startswith("  "), lines[at + 1 :])]
    return re.match(r"chosen: @([^\s,]+)", lines[at]).group(1), "\n".join(block)


def _load(path, source):
    """Load the generated module from its text (the file may be removed
    afterwards): the text is registered with linecache, so `inspect` (and
    Triton's JIT) still read the kernels' source."""
    key = hashlib.sha1(source.encode()).hexdigest()[:12]
    filename = f"<efir-generated {path} {key}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    mod = type(sys)(f"efir_compiled_{key}")
    mod.__file__ = filename
    exec(builtins.compile(source, filename, "exec"), mod.__dict__)  # noqa: S102
    return mod


def _estimate(source):
    """The generated module's ESTIMATE dict (kernels, bytes, flops, time_us)."""
    m = re.search(r"^ESTIMATE = (\{.*\})$", source, re.M)
    return ast.literal_eval(m.group(1)) if m else {}


class Report:
    """What `efir.compile` chose and why, as `str(report)` shows it."""

    def __init__(self, program, estimate, source_path, kept, ranking, diags, stages, tuned=None):
        self.tuned = tuned
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
        if not t:
            return "  the best by efir's static estimate (what `efir-translate --top 1` emits)"
        how = "from the tuning cache" if t.get("cached") else f"{t.get('measured', 0)} schedules measured"
        sched = ",".join(f"{k}={v}" for k, v in (t.get("config") or {}).items())
        return f"  the fastest measured on the GPU: {t.get('time_us', float('nan')):.1f} us with {sched} ({how})"

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


def _accepted():
    return ", ".join(str(d).removeprefix("torch.") for d in DTYPES)


def _check_arguments(inputs, config):
    """`compile`'s arguments that would otherwise fail only when the
    compiled function is called: every example input a tensor (else
    CompileError), `config` None or a dict of schedule parameters, names to
    positive integers (else TypeError or ValueError)."""
    for i, x in enumerate(inputs):
        if not isinstance(x, torch.Tensor):
            raise CompileError(f"import failed: example input {i} ({type(x).__name__}) is not a torch.Tensor: efir compiles functions of tensors (bind other arguments first, e.g. with functools.partial)")
    if config is None:
        return
    if not isinstance(config, collections.abc.Mapping):
        raise TypeError(f"config must be a dict of schedule parameters such as {{'num_warps': 4}}, got a {type(config).__name__}")
    for k, v in config.items():
        if not isinstance(k, str):
            raise TypeError(f"config keys are schedule parameter names (str), got {k!r}")
        try:
            ok = not isinstance(v, bool) and operator.index(v) >= 1
        except TypeError:
            ok = False
        if not ok:
            raise ValueError(f"config[{k!r}] must be a positive integer, got {v!r}")


def _check_dtypes(module, inputs):
    """Refuse tensors of a dtype efir has no type for, naming it (before
    the export, which would take long for nothing)."""
    named = [(f"input {i}", x) for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)]
    named += [(f"parameter `{n}`", t) for n, t in module.named_parameters()]
    named += [(f"buffer `{n}`", t) for n, t in module.named_buffers()]
    for what, t in named:
        if t.dtype not in DTYPES:
            raise CompileError(f"import failed: {what} has dtype {t.dtype}, which efir does not support (accepted: {_accepted()})")


def _stage(name, quiet, stages, fn):
    """Run one stage, timed into `stages`: its name and time printed on
    stderr unless `quiet`, else logged at INFO (`EFIR_LOG=info`)."""
    t0 = time.time()
    if not quiet:
        print(f"efir: {name} ...", file=sys.stderr, flush=True)
    out = fn()
    stages[name] = time.time() - t0
    if not quiet:
        print(f"efir: {name} done in {stages[name]:.2f} s", file=sys.stderr, flush=True)
    else:
        log.info("efir: %s done in %.2f s", name, stages[name])
    return out


def as_module(fn):
    """A torch.nn.Module calling function `fn`, whose forward takes `fn`'s
    positional parameters by name, so that the exported program (and the
    .efir) names its inputs as the user did (`%x`, not `%xs_0`); a function
    with `*args` or without a readable signature takes `*xs`."""
    import inspect
    import keyword

    try:
        ps = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        ps = None
    plain = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = [p.name for p in ps or []]
    if ps and all(p.kind in plain and p.default is p.empty for p in ps) and all(n.isidentifier() and not keyword.iskeyword(n) and n not in ("self", "_fn") for n in names):
        # (names are identifiers, checked above: nothing else reaches the code)
        args = ", ".join(names)
        ns = {"_fn": fn}
        exec(f"def forward(self, {args}):\n    return _fn({args})\n", ns)  # noqa: S102
        forward = ns["forward"]
    else:

        def forward(self, *xs):
            return fn(*xs)

    return type("Function", (torch.nn.Module,), {"forward": forward})()


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
            msg = "efir: no CUDA inputs: schedule tuning skipped (the static estimate chooses)"
            if quiet:
                log.info(msg)
            else:
                print(msg, file=sys.stderr, flush=True)
        return None
    return float(tune)


def compile(fn_or_module, example_inputs, candidates=8, config=None, quiet=False, workdir=None, keep_workdir=False, tune=None, reuse=None, dynamic=None):  # noqa: A001
    """Compile a module or function of tensors; returns a callable taking the
    same (user) inputs. `candidates`: how many distinct candidates to
    enumerate; `config`: a Triton schedule for the generated module
    (default: its DEFAULT_CONFIG); `quiet`: no progress output; `workdir`:
    a folder for the intermediate files (kept); else a temporary folder,
    removed when compile returns or fails unless `keep_workdir`; `tune`:
    seconds of schedule tuning on the GPU (`efir.tune`: the best few
    candidates by static estimate, their schedules measured against eager
    PyTorch's outputs on the example inputs; results cached), default
    `$EFIR_TUNE` or 30, `False` or 0 for none; skipped (said once) when the
    inputs are not on a CUDA device; `reuse`: a `Reuse` (programs built
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
    first use (milliseconds, no tuning). A dim that the program cannot take
    symbolically is a CompileError saying why (compile per shape instead:
    without `dynamic`, or with the torch.compile backend). `workdir`,
    `keep_workdir` and `reuse` do not apply to a family.

    Without tuning, the chosen candidate is run once on the example inputs
    against eager PyTorch (`_check_outputs`): a non-finite or wrong output
    is a CompileError (candidates are equal in real arithmetic, not always
    in floating point).

    The callable has `.report()` (the chosen candidate, its static
    estimate, kernel count and generated source path, as a string),
    `.stats` (`{"stages": seconds per stage, "diagnostics": routine
    warnings such as E0706, a limit reached}`), `.module`, `.source` and
    `.workdir`."""
    module = fn_or_module if isinstance(fn_or_module, torch.nn.Module) else as_module(fn_or_module)
    inputs = tuple(example_inputs)
    _check_arguments(inputs, config)
    _check_dtypes(module, inputs)
    if dynamic is not None:
        where = _family.parse_dynamic(dynamic, inputs)
        return _compile_family(lambda sizes: (module, _family.resized(inputs, where, sizes)), _family.sizes_of(inputs, where), where, candidates, config, quiet, tune)
    keep = keep_workdir or workdir is not None
    try:
        work = pathlib.Path(workdir or tempfile.mkdtemp(prefix="efir-"))
        work.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        why = "it is not a folder" if isinstance(e, FileExistsError) else e.strerror or e
        raise CompileError(f"cannot use `{workdir}` as the work folder: {why}") from None
    diags, stages = [], {}
    nat = native()
    tools = _Stages(work, nat, diags)
    try:
        ep = _stage("export", quiet, stages, lambda: _export(module, inputs))
        text = _stage("import", quiet, stages, lambda: import_program(ep, "program"))
        (work / "program.efir").write_text(text)
        budget = _tune_budget(tune, inputs, quiet)
        key = (text, candidates, budget)
        built = reuse.get(key) if reuse is not None else None
        if built is not None:
            mod, source, program, ranking, tuned = built
            (work / "kernels.py").write_text(source)
            stages["reused"] = 0.0
            log.info("efir: program built before: its kernels are used again")
        else:
            flags = ["--saturate", f"--compact=max-candidates={candidates}"]
            _stage("saturate + compact", quiet, stages, lambda: tools.opt(flags, "program.efir", "cands.efir"))
            cands, tuned = "cands.efir", None
            if budget:
                tuned = _stage("tune", quiet, stages, lambda: _tune(work, ep, module, inputs, budget, candidates, quiet))
                cands = "tuned.efir"
            program, ranking = _stage("lower to Triton", quiet, stages, lambda: tools.translate(cands, "kernels.py"))
            source = (work / "kernels.py").read_text()
            mod = _load(work / "kernels.py", source)
            if not budget:
                # The tuner checks what it measures; without it, the
                # estimate's choice is checked here once.
                _stage("check", quiet, stages, lambda: _check_outputs(mod, module, inputs, _Args(ep), config, program))
            if reuse is not None:
                reuse.put(key, (mod, source, program, ranking, tuned))
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    report = Report(program, _estimate(source), work / "kernels.py", keep, ranking, diags, stages, tuned)
    args = _Args(ep)

    def run(*user):
        return mod.run(*args(user), config=config)

    run.module = mod
    run.source = source
    run.workdir = work if keep else None
    run.native = nat is not None  # whether the Rust stages ran in-process
    run.stats = {"stages": stages, "diagnostics": diags}
    run.report = lambda: str(report)
    run.tuned = tuned
    return run


def _build_family(make, sizes, candidates, quiet, max_sizes=64):
    """A `family.Family` (the program saturated and compacted once with
    symbolic extents, the kernels of the `max_sizes` most recent sizes
    kept); CompileError when a dim cannot be symbolic."""
    nat = native()
    try:
        return _family.Family(make, sizes, candidates, quiet, nat, _Stages, _export, import_program, _load, _Args, max_sizes=max_sizes)
    except _family.StaticDim as e:
        raise CompileError(f"dynamic dims stay static: {e}") from None
    except CompileError as e:
        first = str(e).splitlines()[0]
        raise CompileError(f"dynamic dims stay static: the symbolic program does not compile: {first}", diagnostic=e.diagnostic, code=e.code) from None


def _compile_family(make, sizes, where, candidates, config, quiet, tune):
    """`compile(..., dynamic=...)`: one `Family` for every size of the
    dynamic dims (`where`: each size's (input index, dim) places)."""
    if _tune_budget(tune, make(sizes)[1], True):
        log.info("efir: a family of sizes is not tuned (the static estimate chooses at each size)")
    fam = _build_family(make, sizes, candidates, quiet)

    def run(*user):
        if len(user) != fam.args.n_user:
            raise TypeError(f"the compiled program takes {fam.args.n_user} inputs, got {len(user)}")
        for i, u in enumerate(user):
            if not isinstance(u, torch.Tensor):
                raise TypeError(f"input {i} is a {type(u).__name__}, not a torch.Tensor")
        mod, source, program = fam.module(_family.sizes_of(user, where))
        run.module, run.source = mod, source
        return mod.run(*fam.args(user), config=config)

    run.family = fam
    run.module = run.source = None
    run.workdir = None
    run.native = native() is not None
    run.stats = fam.stats
    run.report = lambda: _family_report(fam)
    run.tuned = None
    return run


def _family_report(fam):
    lines = [
        f"a family of sizes: {len(fam.sizes0)} symbolic dim(s), compiled once (example sizes {fam.sizes0})",
        "stages: " + ", ".join(f"{k} {v:.2f} s" for k, v in fam.stats["stages"].items()),
        f"sizes translated: {fam.translations} ({', '.join(str(s) for s in fam.stats['sizes'][-8:])})",
    ]
    for sizes, (mod, source, program) in list(fam.kernels.items())[-4:]:
        e = _estimate(source)
        lines.append(f"  {sizes}: @{program}, {e.get('kernels')} kernel(s), estimate {e.get('time_us', float('nan')):.3f} us")
    return "\n".join(lines) + "\n"


def _export(module, inputs):
    """torch.export of `module` on `inputs`; its failures (of many kinds:
    unsupported Python, data-dependent control flow, an op that fails on
    the inputs) become CompileError, with the original as the cause."""
    try:
        return torch.export.export(module, tuple(inputs))
    except Exception as e:  # noqa: BLE001 (torch.export raises many types; reclassified, not hidden)
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise CompileError(f"export failed: {type(e).__name__}: {first}", diagnostic=str(e)) from e


def _state(ep):
    """The exported program's parameters, buffers and constants by name."""
    state = dict(ep.state_dict)
    state.update(getattr(ep, "constants", {}) or {})
    return state


class _Args:
    """The program's arguments from the user's inputs: parameters, buffers
    and constants in the program's argument order, then the user inputs.
    The state is moved to the inputs' device once per device (on its own
    device it is the module's own tensor, so in-place updates are seen)."""

    def __init__(self, ep):
        state = _state(ep)
        self.order = [state[s.target] if s.target else None for s in ep.graph_signature.input_specs]
        self.n_user = sum(1 for t in self.order if t is None)
        self.on = {}

    def __call__(self, user):
        if len(user) != self.n_user:
            raise TypeError(f"the compiled program takes {self.n_user} inputs, got {len(user)}")
        dev = next((u.device for u in user if isinstance(u, torch.Tensor)), None)
        fixed = self.on.get(dev)
        if fixed is None:
            fixed = self.on[dev] = [t.to(dev) if isinstance(t, torch.Tensor) and dev is not None else t for t in self.order]
        it = iter(user)
        return [next(it) if t is None else t for t in fixed]


# Relative L2 error above which a candidate's outputs on the example inputs
# disagree with eager PyTorch's (f16 rounding of a reordered sum stays far
# below it; an overflow, a NaN or a wrong kernel far above).
CHECK_TOL = 5e-2


def _check_outputs(mod, module, inputs, args, config, program):
    """Run the chosen module once on the example inputs against eager
    PyTorch: an output that is not finite where PyTorch's is, or whose
    relative L2 error is over CHECK_TOL, is a CompileError (the torch.compile
    backend then keeps PyTorch's code). Candidates are equal to the source
    in real arithmetic; in floating point a reformulation can overflow
    (exp(a - b) as exp(a) / exp(b))."""
    with torch.no_grad():
        expected = module(*inputs)
        got = mod.run(*args(inputs), config=config)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    for i, (r, o) in enumerate(zip(expected, got)):
        if not isinstance(r, torch.Tensor) or not isinstance(o, torch.Tensor):
            continue
        r64 = r.detach().to("cpu", torch.float64)
        o64 = o.detach().to("cpu", torch.float64)
        if r64.shape != o64.shape:
            raise CompileError(f"the chosen candidate @{program} gives output {i} of shape {tuple(o64.shape)}, PyTorch {tuple(r64.shape)}")
        finite = torch.isfinite(r64)
        if bool((finite & ~torch.isfinite(o64)).any()):
            raise CompileError(f"the chosen candidate @{program} gives non-finite values in output {i} where PyTorch's are finite (a reformulation overflowed on the example inputs)")
        diff = torch.where(finite, o64 - r64, torch.zeros_like(r64))
        norm = float(torch.where(finite, r64, torch.zeros_like(r64)).norm())
        err = float(diff.norm()) / max(norm, 1e-30)
        if err > CHECK_TOL:
            raise CompileError(f"the chosen candidate @{program} disagrees with PyTorch on the example inputs: output {i} relative L2 error {err:.3g} > {CHECK_TOL}")


def _tune(work, ep, module, inputs, budget, candidates, quiet):
    """Tune `work/cands.efir` into `work/tuned.efir` on the example inputs,
    checked against eager PyTorch; the tuner's summary. A progress bar
    (schedules measured, best time) is drawn on a terminal unless `quiet`."""
    from . import tune as _t

    with torch.no_grad():
        expected = module(*inputs)
    expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
    with bar("tune", unit="schedule", enabled=not quiet) as b:

        def progress(name, cfg, t, best):
            b.update(1)
            b.set_postfix_str(f"best {best:.1f} us" if best < float("inf") else name)

        try:
            return _t.tune_file(
                work / "cands.efir",
                work / "tuned.efir",
                budget_s=budget,
                top=max(1, min(4, candidates)),
                inputs=_Args(ep)(inputs),
                expected=expected,
                progress=progress,
            )
        except _t.TuneError as e:
            raise CompileError(f"tuning found no correct schedule: {e}") from e


_BACKEND_OPTIONS = ("candidates", "tune", "max_shapes")
MAX_SHAPES = 8
# The programs the backend built, shared by its graphs: torch.compile traces
# a function again once a dim varies, and the new graph's shapes that the
# old one compiled import to programs built before.
_BUILT = Reuse()


def _backend(gm, example_inputs, options=None):
    """The torch.compile backend. Returns a `_ShapeCache` for `gm`. Where
    torch.compile made sizes dynamic (SymInt dims and arguments, once a dim
    varies or with `dynamic=True`), the graph is compiled once for all of
    them (`efir.family`; each new size is only translated) if its program
    takes them symbolically; otherwise, and for static graphs, at each call
    with input shapes (and integer arguments) it has not seen, the graph is
    compiled for those shapes and kept, at most `max_shapes` of them (least
    recently used dropped; a family keeps as many sizes' kernels). So a
    graph runs compiled at every size, and each size is compiled at most
    once.
    `options` (torch.compile's `options=`): `candidates` and `tune`, passed
    to `compile`, and `max_shapes` (default MAX_SHAPES)."""
    opts = dict(options or {})
    bad = sorted(set(opts) - set(_BACKEND_OPTIONS))
    if bad:
        raise ValueError(f"efir backend: unknown option(s) {bad} (accepted: {', '.join(_BACKEND_OPTIONS)})")
    max_shapes = opts.pop("max_shapes", MAX_SHAPES)
    if not isinstance(max_shapes, int) or max_shapes < 1:
        raise ValueError(f"efir backend: max_shapes must be a positive integer, got {max_shapes!r}")
    return _ShapeCache(gm, opts, max_shapes)


def _signature(args):
    """What a graph is compiled for: each tensor's shape, dtype and device,
    and the value of each other argument (a size torch.compile passes as a
    SymInt, a Python scalar)."""
    return tuple((tuple(a.shape), a.dtype, a.device) if isinstance(a, torch.Tensor) else (type(a), a) for a in args)


def _describe(a):
    return "x".join(map(str, a.shape)) + ":" + str(a.dtype).removeprefix("torch.") if isinstance(a, torch.Tensor) else repr(a)


class _ShapeCache:
    """A torch.compile graph compiled once per input signature (`_signature`),
    the `max_shapes` most recently used kept. `compiles` counts the
    compiles made; `shapes` lists the signatures kept."""

    def __init__(self, gm, opts, max_shapes):
        self.gm, self.opts, self.max_shapes = gm, opts, max_shapes
        self.cache = collections.OrderedDict()
        self.compiles = 0
        self.warned = set()
        # torch.compile's dynamic sizes (`_dynamic_plan`): compiled once as
        # a family per static signature (`families`: a callable, or the
        # reason why the graph is compiled per shape instead)
        self.plan = _dynamic_plan(gm)
        self.families = {}
        self.static_reason = self.plan if isinstance(self.plan, str) else None

    @property
    def translations(self):
        """Sizes translated by this graph's families (no saturation)."""
        return sum(f.family.translations for f in self.families.values() if callable(f))

    @property
    def shapes(self):
        return list(self.cache)

    def __call__(self, *args):
        if self.plan and not isinstance(self.plan, str):
            fn = self._family(args)
            if fn is not None:
                return fn(*args)
        return self._per_shape(args)

    def _per_shape(self, args):
        key = _signature(args)
        fn = self.cache.get(key)
        if fn is None:
            log.info("efir: compiling a graph for inputs %s (compile %d)", ", ".join(_describe(a) for a in args), self.compiles + 1)
            fn = self._compile(args)
            self.compiles += 1
            self.cache[key] = fn
            if len(self.cache) > self.max_shapes:
                self.cache.popitem(last=False)
        else:
            self.cache.move_to_end(key)
        return fn(*args)

    def _family(self, args):
        """The family compiled for `args`' static signature (the dynamic
        sizes left out), built on first use; None where the graph is
        compiled per shape (the reason in `static_reason`, logged at INFO)."""
        dyn = {p for places, _ in self.plan for p in places}
        ints = {i for _, iis in self.plan for i in iis}
        key = tuple(
            (tuple(None if (i, d) in dyn else s for d, s in enumerate(a.shape)), a.dtype, a.device) if isinstance(a, torch.Tensor) else ("size",) if i in ints else (type(a), a)
            for i, a in enumerate(args)
        )
        got = self.families.get(key)
        if got is None:
            got = self.families[key] = self._build_family(args, key)
        return got if callable(got) else None

    def _build_family(self, args, key):
        plan, args0 = self.plan, list(args)

        def sizes_from(a):
            return tuple(int(a[places[0][0]].shape[places[0][1]]) if places else int(a[iis[0]]) for places, iis in plan)

        def make(sizes):
            a = list(args0)
            shapes = {i: list(x.shape) for i, x in enumerate(a) if isinstance(x, torch.Tensor)}
            for (places, iis), n in zip(plan, sizes):
                for i in iis:
                    a[i] = n
                for i, d in places:
                    shapes[i][d] = n
            for i, shape in shapes.items():
                if list(a[i].shape) != shape:
                    a[i] = torch.zeros(shape, dtype=a[i].dtype, device=a[i].device)
            tensors = [x for x in a if isinstance(x, torch.Tensor)]
            return (self.gm if len(tensors) == len(a) else _fixed(self.gm, a)), tensors

        names = ", ".join(f"s{k}={n}" for k, n in enumerate(sizes_from(args0)))
        try:
            fam = _build_family(make, sizes_from(args0), self.opts.get("candidates", 8), True, max_sizes=self.max_shapes)
        except (ImportError_, CompileError) as e:
            reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            self.static_reason = reason
            log.info("efir: the graph's dynamic sizes (%s) are compiled per shape: %s", names, reason)
            return reason
        self.compiles += 1
        log.info("efir: compiled a graph once for all its dynamic sizes (%s at first)", names)

        def call(*a):
            tensors = [x for x in a if isinstance(x, torch.Tensor)]
            try:
                mod = fam.module(sizes_from(a))[0]
            except CompileError as e:
                # a size the family cannot be translated at: this signature
                # is compiled per shape from now on
                reason = str(e).strip().splitlines()[0]
                log.info("efir: the family cannot be translated at sizes %s; compiled per shape from now on: %s", sizes_from(a), reason)
                self.families[key] = self.static_reason = reason
                return self._per_shape(a)
            out = mod.run(*fam.args(tensors))
            return (out,) if isinstance(out, torch.Tensor) else out

        call.family = fam
        return call

    def _warn(self, msg):
        # once per graph and message: a graph that falls back at every new
        # shape says so once
        if msg not in self.warned:
            self.warned.add(msg)
            warnings.warn(msg, stacklevel=3)

    def _compile(self, args):
        """`gm` for these arguments: compiled whole by `compile`; where the
        importer refuses an op, the parts it supports (`_partial`), the rest
        left to PyTorch; where that fails too, `gm` itself (eager). One
        warning says what runs eagerly and why."""
        gm = self.gm
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        # A graph with non-tensor arguments (sizes) is compiled with their
        # values fixed: the graph takes the tensors alone.
        module = gm if len(tensors) == len(args) else _fixed(gm, args)

        def on_tensors(fn):
            def call(*a):
                out = fn(*[x for x in a if isinstance(x, torch.Tensor)])
                return (out,) if isinstance(out, torch.Tensor) else out

            return call

        try:
            return on_tensors(compile(module, tensors, quiet=True, reuse=_BUILT, **self.opts))
        except (ImportError_, CompileError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            if isinstance(e, ImportError_):
                try:
                    partial, why = _partial(module, tensors, self.opts)
                except (ImportError_, CompileError) as pe:
                    log.debug("efir: partial compilation failed: %s", pe)
                    partial, why = None, None
                if partial is not None:
                    self._warn(f"efir: left to eager PyTorch: {why}")
                    return on_tensors(partial)
            self._warn(f"efir: falling back to eager: {first}")
            return gm.forward


def _dynamic_plan(gm):
    """torch.compile's dynamic sizes in graph `gm`, from its placeholders'
    example values: one entry per size symbol, `(places, ints)`: the
    (argument index, dim) places of tensors whose dim is that symbol, and
    the indices of the SymInt arguments that are it. None when no size is
    dynamic; a string saying why not where a size is a function of others
    (`2*s0`: compiled per shape)."""
    syms = {}
    holders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, n in enumerate(holders):
        v = n.meta.get("example_value")
        if isinstance(v, torch.SymInt):
            e = v.node.expr
            if getattr(e, "is_number", False):
                continue
            if not getattr(e, "is_Symbol", False):
                return f"argument `{n.name}` is the size expression {e}"
            syms.setdefault(str(e), ([], []))[1].append(i)
        elif isinstance(v, torch.Tensor):
            for d, size in enumerate(v.shape):
                if isinstance(size, torch.SymInt):
                    e = size.node.expr
                    if getattr(e, "is_number", False):
                        continue  # specialized by a guard (`16`): static
                    if not getattr(e, "is_Symbol", False):
                        return f"dim {d} of `{n.name}` is the size expression {e}"
                    syms.setdefault(str(e), ([], []))[0].append((i, d))
    return list(syms.values()) or None


def _fixed(gm, args):
    """A copy of graph `gm` with its non-tensor arguments (sizes that
    torch.compile passes as SymInts, Python scalars) replaced by their
    values in `args`: it takes the tensors alone, in order, and keeps each
    node's metadata (the source lines that messages cite)."""
    holders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(holders) != len(args):
        raise CompileError(f"the graph takes {len(holders)} arguments, called with {len(args)}")
    g = torch.fx.Graph()
    env = {}
    for n, a in zip(holders, args):
        if isinstance(a, torch.Tensor):
            env[n] = g.placeholder(n.name)
            env[n].meta = dict(n.meta)
        else:
            env[n] = a
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            env[n] = g.node_copy(n, lambda x: env[x])
    return torch.fx.GraphModule(gm, g)


# Ops that move or relabel data (and casts): a partition of these alone, or
# of one other cheap op, is left to PyTorch.
_VIEWS = {
    "view.default", "reshape.default", "_unsafe_view.default", "unsqueeze.default", "squeeze.dim", "squeeze.dims",
    "squeeze.default", "permute.default", "transpose.int", "t.default", "expand.default", "slice.Tensor",
    "select.int", "narrow.default", "alias.default", "detach.default", "clone.default", "contiguous.default",
    "lift_fresh_copy.default", "_assert_tensor_metadata.default", "_to_copy.default", "to.dtype",
    "to.dtype_layout", "numpy_T.default",
}
# Ops worth a partition on their own: contractions, normalizations,
# softmax and reductions.
_HEAVY = {
    "mm.default", "bmm.default", "matmul.default", "linear.default", "addmm.default", "einsum.default",
    "scaled_dot_product_attention.default", "_softmax.default", "softmax.int", "_log_softmax.default",
    "log_softmax.int", "layer_norm.default", "rms_norm.default", "group_norm.default", "batch_norm.default",
    "instance_norm.default", "_native_batch_norm_legit_no_training.default", "logsumexp.default",
    "mean.dim", "mean.default", "sum.dim_IntList", "sum.default", "amax.default", "amin.default",
}


def _opname(node):
    t = node.target
    return t.__name__ if isinstance(t, torch._ops.OpOverload) else getattr(t, "__name__", str(t))


def _worth(nodes):
    """Whether efir should compile a partition: two ops that compute, or one
    heavy one (a single pointwise op, or views alone, stay PyTorch)."""
    names = [_opname(n) for n in nodes if n.op == "call_function" and n.target is not operator.getitem]
    work = [n for n in names if n not in _VIEWS]
    return len(work) >= 2 or any(n in _HEAVY for n in work)


class _Compiled(torch.nn.Module):
    """A partition compiled by efir, in place of its submodule: returns a
    tuple, as the submodule (fused with `always_return_tuple`) did."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        out = self.fn(*args)
        return (out,) if isinstance(out, torch.Tensor) else tuple(out)


def _partial(gm, inputs, opts):
    """Compile the parts of `gm` that efir supports: export it, cut its
    graph into connected groups of supported ops (torch.fx's
    CapabilityBasedPartitioner asks `importer.unsupported` of each op),
    compile each group that does real work with `compile`, and run the rest
    with PyTorch. Returns (callable, the warning's text), or (None, None)
    where no part was compiled."""
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
    from torch.fx.passes.operator_support import OperatorSupportBase
    from torch.fx.passes.utils.fuser_utils import fuse_by_partitions

    from .importer import unsupported

    ep = _export(gm, inputs)
    kinds = {s.kind for s in ep.graph_signature.output_specs}
    if kinds != {torch.export.graph_signature.OutputKind.USER_OUTPUT}:
        return None, None  # mutations of inputs or buffers: not partitioned
    lifted = ep.graph_module
    reasons = {}
    order = {n: i for i, n in enumerate(lifted.graph.nodes)}

    class _Support(OperatorSupportBase):
        def is_node_supported(self, submodules, node):
            if node.op != "call_function":
                return False
            why = unsupported(node)
            if why is not None:
                reasons[node] = why
            return why is None

    parts = CapabilityBasedPartitioner(lifted, _Support(), allows_single_node_partition=True).propose_partitions()
    parts = [p for p in parts if _worth(p.nodes)]
    if not parts or not reasons:
        return None, None
    fused = fuse_by_partitions(lifted, [dict.fromkeys(p.nodes) for p in parts], prefix="efir_", always_return_tuple=True)
    # Each partition's example inputs: the graph run eagerly on the backend's.
    seen = {}

    class _Record(torch.fx.Interpreter):
        def call_module(self, target, args, kwargs):
            seen.setdefault(target, args)
            return super().call_module(target, args, kwargs)

    args = _Args(ep)
    with torch.no_grad():
        _Record(fused).run(*args(inputs))
    done, failed = 0, []
    for name in sorted(seen):
        try:
            fn = compile(getattr(fused, name), seen[name], quiet=True, reuse=_BUILT, **opts)
        except (ImportError_, CompileError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            failed.append(first)
            log.debug("efir: partition %s left to PyTorch: %s", name, e)
            continue
        setattr(fused, name, _Compiled(fn))
        done += 1
    if not done:
        return None, None
    fused.recompile()

    def call(*user):
        return tuple(fused(*args(user)))

    call.partitions = done
    bad = sorted(reasons, key=order.get)
    why = reasons[bad[0]]
    if len(bad) > 1:
        others = sorted({_opname(n) for n in bad[1:]})
        why += f" (and {len(bad) - 1} more unsupported op(s): {', '.join(others)})"
    why += f"; efir compiled the rest ({done} part(s))"
    if failed:
        why += f"; {len(failed)} other part(s) failed to compile and run eagerly too: {failed[0]}"
    return call, why


def register_backend():
    """Register `torch.compile(model, backend="efir")` (idempotent)."""
    from torch._dynamo import list_backends, register_backend as reg

    if "efir" not in list_backends(exclude_tags=()):
        reg(name="efir")(_backend)
