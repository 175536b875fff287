"""One compile for a family of sizes (issue 33): `efir.compile(...,
dynamic=...)` and the torch.compile backend for graphs whose dims vary.

What is symbolic and what is not, today:

- The program is imported twice, at the example sizes and at each dynamic
  dim's size plus a distinct offset; the two texts must be equal except for
  extents that moved by exactly those offsets (`symbolize`). Those extents
  become the symbolic extents `|@dyn0|`, `|@dyn1|`, ... of the IR; anything
  else that changed with the size (a mean's element count, a reshape of a
  product of sizes, a size-dependent branch) keeps the dim static
  (`StaticDim`, with the first differing line).
- Saturation and compaction run once, on the symbolic program (`efir-opt`
  accepts symbolic extents in pointwise ops, reductions, matmuls and
  reshapes that keep each symbolic extent a dim of its own, splitting,
  merging, inserting or removing only the static dims around it, such as a
  norm's keepdim statistic `|@dyn0|` -> `|@dyn0|x1`; its verifier refuses
  a reshape that moves static dims across a symbolic extent or splits one,
  E0404, which keeps such programs per shape). Compaction does not
  partition a symbolic extent over a parallel axis, so the family's
  candidates never tile the batch themselves (the Triton backend's
  automatic grid axes do, in masked blocks): where a compile for one size
  tiles it (`@m8`), the family's kernels at that size are a different,
  valid plan (bench/gpu/family.py measures the difference).
- The kernels are symbolic where the translator accepts the candidates:
  `efir-translate` lowers a free symbolic extent to a size read from the
  inputs' shapes at run time and passed to the kernels as a runtime
  integer, with masks along it (docs/efir-translate.md, "Symbolic
  extents"). Then the candidates are translated once, at build, and ranked
  by the static estimate at the example sizes (`--dim dyn0=N`, or the
  native module's `dims=`), and one loaded module
  per candidate serves every size: no translation at a new size, and
  Triton compiles a kernel once for all sizes (once per power-of-two bucket
  where a kernel holds a symbolic dim whole in one block; its own
  divisibility-by-16 specialization aside). Where the translator refuses
  the symbolic candidates (E0801, naming the value and the extent: a
  reshape that splits or merges dims of a value with a symbolic extent
  inside a kernel, a view read through; or a native module built before
  symbolic kernels), at each new size the
  candidates get the size in place of the symbol and are translated
  (milliseconds in-process) and ranked by the static estimate at that
  size (`symbolic_kernels` False, the reason in `stats["per_size_why"]`).
- Schedule tuning (`tune=` on a CUDA device; `Tuning`): where the kernels
  are symbolic, the first call in each power-of-two bucket of the sizes
  (`bucket`: 5..8 -> 8) tunes the family's shortlisted candidates on that
  call's inputs, checked against eager PyTorch (`efir.tune.tune_modules`),
  and every size of the bucket then runs the chosen candidate at the chosen
  schedule; results are kept in the tuning cache (`efir.tune.Cache`) by the
  candidates' text, the bucket and the environment, so a second process
  spends no GPU time on a bucket tuned before. Kernels translated per size
  are not tuned (said once; the estimate chooses). A tuned bucket's
  kernels are timed against eager PyTorch on the first call in it, and
  where PyTorch is faster the bucket runs the module's own code (one
  warning).
- At each new size the best few candidates by estimate are checked, in
  that order, against eager PyTorch on the first call's inputs at that size
  (`check.choose`, as `efir.compile` checks its choice): the first that
  agrees is kept.
"""

import collections
import logging
import os
import pathlib
import re
import shutil
import tempfile
import time

import torch

from .check import CHECK_TRIES, Choice, choose, verifier
from .importer import import_program
from .program import Args, export
from .stages import CompileError, Stages, estimate, load, native, timed

log = logging.getLogger("efir")

# A static extent as the .efir text writes it in a type: digits glued to
# their `x`, first in `tensor<` or after another extent (`2x64x`,
# `|@p|x8x`); never part of a name (`%a1x`, `@f2x`).
_DIM = re.compile(r"(?:(?<=<)|(?<=\dx)|(?<=\|x))(\d+)(?=x)")
SYMBOL = "dyn"


class StaticDim(Exception):
    """A dim asked to vary that the program cannot take symbolically; the
    message says which and why. The caller compiles per shape instead."""


def symbol(k):
    return f"|@{SYMBOL}{k}|"


def symbolize(text_a, text_b, pairs):
    """The program of `text_a` (imported at the sizes `pairs[k][0]`) with
    each extent that is `pairs[k][1]` in `text_b` (imported at those sizes)
    written as symbol k. StaticDim when the texts differ elsewhere."""
    if f"@{SYMBOL}" in text_a:
        raise StaticDim(f"the program already uses a symbol @{SYMBOL}...")
    a, b = _DIM.split(text_a), _DIM.split(text_b)
    by_pair = {(str(x), str(y)): k for k, (x, y) in enumerate(pairs)}
    out = []
    for i, (x, y) in enumerate(zip(a, b)):
        if i % 2 == 0 or x == y:  # text between extents, or an extent that did not move
            if x != y:
                raise StaticDim(f"the program changes with the size beyond its extents ({_diff(x, y)})")
            out.append(x)
        elif (x, y) in by_pair:
            out.append(symbol(by_pair[(x, y)]))
        else:
            raise StaticDim(f"an extent is a function of the size, not the size itself ({x} became {y} in `{_line_end(out)}{x}x...`)")
    if len(a) != len(b):
        raise StaticDim("the program's structure changes with the size (one import has more extents)")
    return "".join(out)


def _diff(x, y):
    """Where texts `x` and `y` first differ, a few characters either side."""
    i = next((k for k, (u, v) in enumerate(zip(x, y)) if u != v), min(len(x), len(y)))
    lo = max(0, i - 40)
    one = lambda t: " ".join(t[lo : i + 40].split())  # noqa: E731
    return f"`...{one(x)}...` against `...{one(y)}...`"


def _line_end(parts):
    return "".join(parts[-6:]).splitlines()[-1][-60:].lstrip() if parts else ""


def bucket(sizes):
    """The size bucket that shares a tuned schedule: each size rounded up to
    a power of two (1, 2, 3..4, 5..8, ...)."""
    return tuple(1 << max(0, int(n) - 1).bit_length() for n in sizes)


class Tuning:
    """Schedule tuning for a family: `budget_s` seconds per size bucket;
    `timer(name, mod, cfg, run)` -> microseconds replaces the GPU timing
    (tests, under TRITON_INTERPRET=1); `cache` an `efir.tune.Cache` (default:
    the user's tuning cache)."""

    def __init__(self, budget_s, timer=None, cache=None):
        self.budget_s, self.timer, self.cache = float(budget_s), timer, cache


Kernels = collections.namedtuple("Kernels", "module source program config")
Kernels.__doc__ = """What runs at one size: the loaded `module`, its `source`, the
candidate's name (`program`) and its schedule (`config`: a tuned schedule,
or None for the module's DEFAULT_CONFIG)."""


def instantiate(text, sizes):
    """`text` with each symbol k replaced by the static extent sizes[k]."""
    for k, n in enumerate(sizes):
        text = text.replace(symbol(k) + "x", f"{int(n)}x")
    return text


class Family:
    """A program compiled once for every size of its dynamic dims.

    `make(sizes)` returns `(module, example tensors)` at those sizes (one
    per symbol). Building imports at `sizes` and at `sizes + offsets`,
    symbolizes, saturates and compacts once, and translates the symbolic
    candidates once where the translator accepts them (`symbolic_kernels`);
    else each new size is translated and loaded on first use (`module`).
    Each size's choice is kept (the `max_sizes` most recent)."""

    def __init__(self, make, sizes, candidates, quiet, max_sizes=64, tuning=None):
        self.sizes0 = tuple(int(s) for s in sizes)
        self.kernels = collections.OrderedDict()
        self.max_sizes = max_sizes
        self.translations = 0
        self.tuning = tuning
        self.tuned = {}  # bucket -> (candidate, schedule, time_us, cached) or None (tuning failed)
        self.stats = {"stages": {}, "diagnostics": [], "translations": 0, "sizes": [], "rejected": {}, "tuned": {}}
        self._nat = native()
        stages = self.stats["stages"]

        def imported():
            module, inputs = make(self.sizes0)
            self.ep = export(module, inputs)
            text_a = import_program(self.ep, "program")
            other = tuple(s + k + 1 for k, s in enumerate(self.sizes0))
            module_b, inputs_b = make(other)
            text_b = import_program(export(module_b, inputs_b), "program")
            return symbolize(text_a, text_b, list(zip(self.sizes0, other)))

        self.program = timed("export + import (2 sizes)", quiet, stages, imported)
        if not any(symbol(k) in self.program for k in range(len(self.sizes0))):
            log.info("efir: the dynamic dims do not reach the program's types; one program serves every size")
        work = _tmp()
        try:
            tools = Stages(work, self._nat, self.stats["diagnostics"])
            (work / "family.efir").write_text(self.program)
            flags = ["--saturate", f"--compact=max-candidates={candidates}"]
            timed("saturate + compact (symbolic sizes)", quiet, stages, lambda: tools.opt(flags, "family.efir", "cands.efir"))
            self.candidates = (work / "cands.efir").read_text()
            self.symbolic = timed("translate (symbolic sizes)", quiet, stages, lambda: self._translate_symbolic(tools))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        self.symbolic_kernels = self.symbolic is not None
        self.stats["symbolic_kernels"] = self.symbolic_kernels
        self._loaded = {}
        self.args = Args(self.ep)

    def _translate_symbolic(self, tools):
        """The best CHECK_TRIES symbolic candidates ((name, source) pairs,
        best static estimate at the example sizes first), translated once
        for every size; None
        where the translator refuses them (the reason logged and kept in
        `stats["per_size_why"]`)."""
        try:
            # Ranked at the example sizes (the sizes the family was built
            # for), not at the translator's default.
            dims = {f"{SYMBOL}{k}": n for k, n in enumerate(self.sizes0)}
            programs, _ = tools.translate("cands.efir", top=CHECK_TRIES, dims=dims)
        except CompileError as e:
            programs, why = None, str(e).splitlines()[0]
        else:
            why = None if programs else "no candidate was translated"
        if why is not None or not programs:
            self.stats["per_size_why"] = why
            log.info("efir: the family's kernels are translated per size: %s", why)
            return None
        self.translations = 1
        self.stats["translations"] = 1
        log.info("efir: the family's kernels are symbolic: %d candidate(s) translated once for every size", len(programs))
        return programs

    def _loaded_symbolic(self, name, source):
        if name not in self._loaded:
            self._loaded[name] = load(f"family-{name}.py", source)
        return self._loaded[name]

    def module(self, sizes, verify=None, measure=None):
        """The `Kernels` for `sizes`, translated on first use: the
        CHECK_TRIES best candidates by static estimate at those sizes, the
        first that passes `verify(module, program)` (`check.choose`; None:
        no check) kept. With `tuning` and symbolic kernels, `measure()`
        gives this call's (program inputs, expected outputs), on which the
        first size of each bucket is tuned (`_tune`)."""
        sizes = tuple(int(s) for s in sizes)
        got = self.kernels.get(sizes)
        if got is not None:
            self.kernels.move_to_end(sizes)
            return got
        if self.symbolic is not None:
            if self.tuning is not None and measure is not None:
                tuned = self._tuned(bucket(sizes), measure)
                if tuned is not None:
                    name, cfg = tuned[0], tuned[1]
                    source = dict(self.symbolic)[name]
                    return self._keep(sizes, Choice(name, source, self._loaded_symbolic(name, source), []), cfg)
            # The symbolic kernels: only the check at this size.
            programs = self.symbolic if verify is not None else self.symbolic[:1]
            choice = choose(programs, self._loaded_symbolic, verify, what=f"family at sizes {sizes}: ")
            return self._keep(sizes, choice)
        if self.tuning is not None and not self.stats.get("untuned_why"):
            self.stats["untuned_why"] = "kernels translated per size are not tuned"
            log.info("efir: the family's kernels are translated per size and not tuned (the static estimate chooses)")
        work = _tmp()
        try:
            tools = Stages(work, self._nat, self.stats["diagnostics"])
            (work / "cands.efir").write_text(instantiate(self.candidates, sizes))
            t0 = time.time()
            programs, _ = tools.translate("cands.efir", top=CHECK_TRIES if verify is not None else 1)
            dt = time.time() - t0
        finally:
            shutil.rmtree(work, ignore_errors=True)
        choice = choose(programs, lambda name, source: load(work / f"{name}.py", source), verify, what=f"family at sizes {sizes}: ")
        self.translations += 1
        self.stats["translations"] = self.translations
        log.info("efir: family translated for sizes %s in %.3f s (@%s)", sizes, dt, choice.program)
        return self._keep(sizes, choice)

    def _tuned(self, b, measure):
        """The (candidate, schedule, time_us, cached) tuned for bucket `b`,
        tuned now on `measure()`'s inputs where neither this family nor the
        cache has it; None where tuning found no correct schedule (the
        estimate's choice, checked, is used for the bucket instead)."""
        if b in self.tuned:
            return self.tuned[b]
        from . import tune as _t

        t = self.tuning
        names = [n for n, _ in self.symbolic]
        key = _t.cache_key(f"efir.family bucket {list(b)}\n{self.candidates}", _t.environment(), len(names))
        cache = t.cache if t.cache is not None else _t.Cache()
        try:
            hit = cache.get(key)
            if hit is not None and hit["candidate"] in names:
                got = (hit["candidate"], hit["schedule"], hit["time_us"], True)
                log.info("efir: family bucket %s: tuned before (cache): @%s %s", b, got[0], _t.schedule_text(got[1]))
            else:
                got = self._tune_now(b, measure, _t)
                if got is not None:
                    cache.put(key, got[0], got[1], got[2], {"env": _t.environment(), "family_bucket": list(b)})
        finally:
            if t.cache is None:
                cache.close()
        self.tuned[b] = got
        self.stats["tuned"][b] = None if got is None else {"candidate": got[0], "config": got[1], "time_us": got[2], "cached": got[3]}
        return got

    def _tune_now(self, b, measure, _t):
        import torch

        cuda = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
        if not cuda and self.tuning.timer is None:
            log.info("efir: family bucket %s not tuned: no CUDA device", b)
            return None
        inputs, expected = measure()
        device = "cuda" if cuda else "cpu"
        inputs = [x.detach().to(device) for x in inputs]
        expected = [o.detach().float().cpu() for o in expected]
        t0 = time.time()
        with tempfile.TemporaryDirectory(prefix="efir-family-tune-") as d:
            cands = []
            shapes = [tuple(int(n) for n in x.shape) for x in inputs]
            for i, (name, source) in enumerate(self.symbolic):
                path = pathlib.Path(d) / f"cand{i}.py"
                # (The compile workers build inputs of these shapes: the
                # module's INPUTS has the symbolic extents.)
                path.write_text(f"{source}\n\nTUNE_SHAPES = {shapes!r}\n")
                cands.append((name, path, self._loaded_symbolic(name, source), source))
            res = _t.tune_modules(cands, inputs, expected, self.tuning.budget_s, timer=self.tuning.timer, cuda=cuda)
        if res["name"] is None:
            first = res["failures"][0] if res["failures"] else "nothing was measured"
            log.info("efir: family bucket %s: tuning found no correct schedule (first failure: %s); the static estimate chooses", b, first)
            return None
        log.info("efir: family bucket %s tuned in %.1f s: @%s %s, %.1f us", b, time.time() - t0, res["name"], _t.schedule_text(res["config"]), res["time_us"])
        return (res["name"], res["config"], res["time_us"], False)

    def eager_verdict(self, sizes, efir_run, eager_run, inputs):
        """Whether eager PyTorch (`eager_run`) is faster than the family's
        tuned kernels (`efir_run`) at `sizes`' bucket: both timed alike on
        `inputs` (`efir.compile.versus_eager`) once per tuned bucket, on the
        first call in it; said once (a warning) where it is. False where
        the bucket is not tuned (nothing was measured)."""
        b = bucket(sizes)
        rec = self.stats["tuned"].get(b)
        if not rec:
            return False
        if "kept_eager" not in rec:
            from .compile import versus_eager

            rec.update(versus_eager(efir_run, eager_run, inputs))
            if rec["kept_eager"]:
                log.warning(
                    "efir: kept PyTorch's code for sizes up to %s: the family's kernels measured %.1f us against eager PyTorch's %.1f us",
                    b,
                    rec["efir_us"],
                    rec["eager_us"],
                )
        return rec["kept_eager"]

    def _keep(self, sizes, choice, config=None):
        """Keep `choice` (run at `config`) for `sizes` (the `max_sizes` most
        recent)."""
        if choice.rejected:
            self.stats["rejected"][sizes] = choice.rejected
        self.stats["sizes"].append(sizes)
        self.kernels[sizes] = Kernels(choice.module, choice.source, choice.program, config)
        while len(self.kernels) > self.max_sizes:
            self.kernels.popitem(last=False)
        return self.kernels[sizes]


def build(make, sizes, candidates, quiet, max_sizes=64, tuning=None):
    """A `Family` (the program saturated and compacted once with symbolic
    extents, the kernels of the `max_sizes` most recent sizes kept, tuned
    per size bucket with `tuning`); CompileError when a dim cannot be
    symbolic."""
    try:
        return Family(make, sizes, candidates, quiet, max_sizes=max_sizes, tuning=tuning)
    except StaticDim as e:
        raise CompileError(f"dynamic dims stay static: {e}") from None
    except CompileError as e:
        first = str(e).splitlines()[0]
        raise CompileError(f"dynamic dims stay static: the symbolic program does not compile: {first}", diagnostic=e.diagnostic, code=e.code) from None


def measurer(reference, args, program_inputs):
    """`measure()` for `Family.module`: the program's inputs for this call
    and `reference(*args)`'s outputs (eager PyTorch) as a list."""

    def measure():
        with torch.no_grad():
            out = reference(*args)
        return program_inputs, list(out) if isinstance(out, (tuple, list)) else [out]

    return measure


def compile_family(module, inputs, where, candidates, config, quiet, tuning=None):
    """`efir.compile(module, inputs, ..., dynamic=...)`: one `Family` for
    every size of the dynamic dims (`where`: each size's (input index, dim)
    places); at each new size the candidates are checked against `module`
    run eagerly on that call's inputs (`check.choose`), or, with `tuning`
    (and no `config`), the first size of each bucket tuned on them."""
    if config is not None:
        tuning = None  # the user's schedule is used at every size
    fam = build(lambda sizes: (module, resized(inputs, where, sizes)), sizes_of(inputs, where), candidates, quiet, tuning=tuning)

    def run(*user):
        if len(user) != fam.args.n_user:
            raise TypeError(f"the compiled program takes {fam.args.n_user} inputs, got {len(user)}")
        for i, u in enumerate(user):
            if not isinstance(u, torch.Tensor):
                raise TypeError(f"input {i} is a {type(u).__name__}, not a torch.Tensor")
        verify = verifier(module, user, fam.args, config)
        sizes = sizes_of(user, where)
        k = fam.module(sizes, verify=verify, measure=measurer(module, user, fam.args(user)))
        run.module, run.source = k.module, k.source

        def efir_run(*u):
            return k.module.run(*fam.args(u), config=config if config is not None else k.config)

        if fam.tuning is not None and fam.eager_verdict(sizes, efir_run, module, user):
            with torch.no_grad():
                return module(*user)
        return efir_run(*user)

    run.family = fam
    run.module = run.source = None
    run.workdir = None
    run.native = fam._nat is not None
    run.stats = fam.stats
    run.report = lambda: report(fam)
    run.tuned = None
    return run


def report(fam):
    """What a family compiled, as `str`: its stages, the sizes translated,
    the candidate chosen at the last few (and those rejected there)."""
    lines = [
        f"a family of sizes: {len(fam.sizes0)} symbolic dim(s), compiled once (example sizes {fam.sizes0})",
        "stages: " + ", ".join(f"{k} {v:.2f} s" for k, v in fam.stats["stages"].items()),
    ]
    seen = ", ".join(str(s) for s in fam.stats["sizes"][-8:])
    if fam.symbolic_kernels:
        lines.append(f"kernels: symbolic, translated once ({len(fam.symbolic)} candidate(s)); sizes run: {len(fam.stats['sizes'])} ({seen})")
    else:
        lines.append(f"kernels per size ({fam.stats.get('per_size_why')}); sizes translated: {fam.translations} ({seen})")
    if fam.tuning is not None:
        done = {b: t for b, t in fam.tuned.items() if t is not None}
        why = fam.stats.get("untuned_why")
        lines.append(f"tuning: {why}" if why else f"tuning: per size bucket ({fam.tuning.budget_s:g} s each); buckets tuned: {len(done)} of {len(fam.tuned)}")
    for sizes, k in list(fam.kernels.items())[-4:]:
        e = estimate(k.source)
        line = f"  {sizes}: @{k.program}, {e.get('kernels')} kernel(s), estimate {e.get('time_us', float('nan')):.3f} us"
        tuned = fam.tuned.get(bucket(sizes)) if fam.tuning is not None else None
        if tuned is not None and k.config is not None:
            sched = " ".join(f"{n}={v}" for n, v in sorted(k.config.items()))
            line += f", tuned for sizes up to {bucket(sizes)}: {sched}, {tuned[2]:.1f} us" + (" (cache)" if tuned[3] else "")
            rec = fam.stats["tuned"].get(bucket(sizes)) or {}
            if rec.get("kept_eager"):
                line += f"; not used: eager PyTorch measured faster ({rec['eager_us']:.1f} us against {rec['efir_us']:.1f} us)"
        lines.append(line)
        for name, why in fam.stats["rejected"].get(sizes, []):
            lines.append(f"    rejected @{name}: {why}")
    return "\n".join(lines) + "\n"


def _tmp():
    return pathlib.Path(tempfile.mkdtemp(prefix="efir-family-"))


def resized(tensors, where, sizes):
    """Copies (zeros) of `tensors` whose dims `where[k]` (pairs (tensor
    index, dim)) have size sizes[k]; the others unchanged."""
    shapes = [list(t.shape) for t in tensors]
    for k, places in enumerate(where):
        for i, d in places:
            shapes[i][d] = sizes[k]
    out = []
    for t, s in zip(tensors, shapes):
        out.append(t if list(t.shape) == s else torch.zeros(s, dtype=t.dtype, device=t.device))
    return out


def sizes_of(tensors, where, what="input"):
    """The size of each symbol in a call's `tensors`: `where[k]` lists its
    (tensor index, dim) places, which must agree (else ValueError)."""
    sizes = []
    for k, places in enumerate(where):
        vals = {int(tensors[i].shape[d]) for i, d in places}
        if len(vals) != 1:
            desc = ", ".join(f"{what} {i} dim {d} = {tensors[i].shape[d]}" for i, d in places)
            raise ValueError(f"dynamic dim {k} has different sizes in one call ({desc})")
        sizes.append(vals.pop())
    return tuple(sizes)


def parse_dynamic(dynamic, inputs):
    """`compile(..., dynamic=...)` as a list of symbols, each a list of
    (input index, dim) places; accepted: a dict name -> place or list of
    places (one symbol per name: places that are the same size, such as
    the batch of two inputs), or a list of places (one symbol each), a place
    being `(input index, dim)`. ValueError/TypeError saying what is wrong."""
    if isinstance(dynamic, dict):
        groups = list(dynamic.values())
    elif isinstance(dynamic, (list, tuple)):
        groups = [[p] for p in dynamic] if not _is_place(dynamic) else [[tuple(dynamic)]]
    else:
        raise TypeError(f"dynamic must be a dict name -> (input, dim) places or a list of (input, dim) places, got {type(dynamic).__name__}")
    out = []
    for g in groups:
        places = [tuple(g)] if _is_place(g) else [tuple(p) for p in g]
        for p in places:
            if not _is_place(p):
                raise TypeError(f"a dynamic place is (input index, dim), got {p!r}")
            i, d = p
            if not 0 <= i < len(inputs):
                raise ValueError(f"dynamic place {p}: there are {len(inputs)} inputs")
            if not -inputs[i].dim() <= d < inputs[i].dim():
                raise ValueError(f"dynamic place {p}: input {i} has {inputs[i].dim()} dims")
        places = [(i, d % inputs[i].dim()) for i, d in places]
        sizes = {int(inputs[i].shape[d]) for i, d in places}
        if len(sizes) != 1:
            raise ValueError(f"the places {places} of one dynamic dim have different sizes in the example inputs: {sorted(sizes)}")
        if places:
            out.append(places)
    seen = [p for g in out for p in g]
    if len(seen) != len(set(seen)):
        raise ValueError("a dynamic place is named twice")
    return out


def _is_place(p):
    return isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in p)
