"""The torch.compile backend "efir" (`register_backend`): a graph compiled
once per input signature, the `max_shapes` most recently used kept
(`ShapeCache`); where torch.compile made sizes dynamic and the program
takes them as symbolic extents, once for all of them (`efir.family`: the
candidates of each new size translated and checked against PyTorch). A
graph the importer cannot take whole has the parts it supports compiled
(`efir.partial`); a graph that cannot be compiled falls back to eager with
one warning saying why.

The backend calls `efir.compile` and shares its programs through the
`efir.compile` module's `compile` and `_BUILT`, looked up at each call, so
that a spy set there sees every compile the backend makes.
"""

import collections
import logging
import sys
import warnings

import torch

from . import family as _family
from .check import verifier
from .importer import ImportError_
from . import partial as _partial_mod
from .partial import partial as _partial
from .stages import CompileError, estimate as _estimate

log = logging.getLogger("efir")


def _api():
    """The `efir.compile` module (its `compile` and `_BUILT`)."""
    return sys.modules[__package__ + ".compile"]


_BACKEND_OPTIONS = ("candidates", "tune", "max_shapes")
MAX_SHAPES = 8


def _backend(gm, example_inputs, options=None):
    """The torch.compile backend. Returns a `ShapeCache` for `gm`. Where
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
    return ShapeCache(gm, opts, max_shapes)


def _signature(args):
    """What a graph is compiled for: each tensor's shape, dtype and device,
    and the value of each other argument (a size torch.compile passes as a
    SymInt, a Python scalar)."""
    return tuple((tuple(a.shape), a.dtype, a.device) if isinstance(a, torch.Tensor) else (type(a), a) for a in args)


def _describe(a):
    return "x".join(map(str, a.shape)) + ":" + str(a.dtype).removeprefix("torch.") if isinstance(a, torch.Tensor) else repr(a)


class ShapeCache:
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
            tensors0 = [x for x in args0 if isinstance(x, torch.Tensor)]
            budget = _api()._tune_budget(self.opts.get("tune"), tensors0, True)
            tuning = _family.Tuning(budget) if budget else None
            fam = _family.build(make, sizes_from(args0), self.opts.get("candidates", _api().CANDIDATES), True, max_sizes=self.max_shapes, tuning=tuning)
        except (ImportError_, CompileError) as e:
            reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            self.static_reason = reason
            log.info("efir: the graph's dynamic sizes (%s) are compiled per shape: %s", names, reason)
            return reason
        self.compiles += 1
        log.info("efir: compiled a graph once for all its dynamic sizes (%s at first)", names)

        def call(*a):
            tensors = [x for x in a if isinstance(x, torch.Tensor)]
            # each new size's candidates are checked against the graph run
            # eagerly on this call's arguments (`check.choose`)
            verify = verifier(self.gm, a, lambda _: fam.args(tensors))
            try:
                k = fam.module(sizes_from(a), verify=verify, measure=_family.measurer(self.gm, a, fam.args(tensors)))
            except CompileError as e:
                # a size the family has no (correct) kernels for: this
                # signature is compiled per shape from now on
                reason = str(e).strip().splitlines()[0]
                log.info("efir: the family has no kernels for sizes %s; compiled per shape from now on: %s", sizes_from(a), reason)
                self.families[key] = self.static_reason = reason
                return self._per_shape(a)

            def efir_run(*ts):
                return k.module.run(*fam.args(ts), config=k.config)

            # A tuned bucket whose kernels lose to the graph run eagerly runs
            # the graph (timed once per bucket; graphs of tensors only).
            if fam.tuning is not None and len(tensors) == len(a) and fam.eager_verdict(sizes_from(a), efir_run, self.gm, tensors):
                with torch.no_grad():
                    return self.gm(*a)
            out = efir_run(*tensors)
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
        importer refuses an op, the parts it supports (`partial`), the rest
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

        api = _api()
        try:
            whole = api.compile(module, tensors, quiet=True, reuse=api._BUILT, **self.opts)
            return on_tensors(self._or_chunks(module, tensors, whole))
        except (ImportError_, CompileError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            if isinstance(e, ImportError_):
                try:
                    partial, why = _partial(module, tensors, self.opts, api.compile, api._BUILT)
                except (ImportError_, CompileError) as pe:
                    log.debug("efir: partial compilation failed: %s", pe)
                    partial, why = None, None
                if partial is not None:
                    self._warn(f"efir: left to eager PyTorch: {why}")
                    return on_tensors(partial)
            self._warn(f"efir: falling back to eager: {first}")
            return gm.forward

    def _or_chunks(self, module, tensors, whole):
        """`whole`, or the graph compiled in chunks (`partial.chunked`)
        where that is faster: a graph with more contractions than
        `partial.CHUNK_CONTRACTIONS` whose whole compile the static estimate
        puts above CHUNK_MIN_US. Measured against each other where both
        were tuned on the GPU (CUDA-graph medians), else by the static
        estimates (the chunks' summed). The choice is logged at INFO and
        kept on the callable (`chunks`: the parts, or None)."""
        whole.chunks = None
        est = _estimate(whole.source).get("time_us")
        if est is None or est <= CHUNK_MIN_US:
            return whole
        api = _api()
        try:
            call, parts = _partial_mod.chunked(module, tensors, self.opts, api.compile, api._BUILT)
        except (ImportError_, CompileError) as e:
            log.debug("efir: chunked compilation failed: %s", e)
            return whole
        if call is None:
            return whole
        part_est = sum(_estimate(f.source).get("time_us") or 0.0 for f in parts.values())
        verdict = f"static estimates {part_est:.1f} us in {len(parts)} chunks, {est:.1f} us whole"
        faster = part_est < est
        tuned = whole.tuned is not None and all(f.tuned is not None for f in parts.values())
        if tuned:
            from . import tune as _t

            try:
                with torch.no_grad():
                    tw = _t.graph_time_us(lambda *xs: whole(*xs), list(tensors))
                    tc = _t.graph_time_us(lambda *xs: call(*xs), list(tensors))
                verdict = f"measured {tc:.1f} us in {len(parts)} chunks, {tw:.1f} us whole"
                faster = tc < tw
            except Exception as ex:  # noqa: BLE001 (not capturable: the estimates decide)
                log.debug("efir: chunks not timed: %s: %s", type(ex).__name__, ex)
        if not faster:
            log.info("efir: compiled the graph whole (%s)", verdict)
            return whole
        log.info("efir: compiled the graph in chunks (%s)", verdict)

        def run(*xs):
            out = call(*xs)
            return out[0] if len(out) == 1 else out

        run.chunks = parts
        run.whole = whole
        run.verdict = verdict
        return run


# Whole compiles the static estimate puts above this many microseconds are
# also tried in chunks (`ShapeCache._or_chunks`): a Llama decoder layer at full
# size (hidden 4096) was estimated at 13,294 us whole and measured 4.4 ms on
# an H100 against Inductor's 0.17 ms (bench/results/2026-12-06-s32-h100-layers.json).
CHUNK_MIN_US = 100.0


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



def register_backend():
    """Register `torch.compile(model, backend="efir")` (idempotent)."""
    from torch._dynamo import list_backends, register_backend as reg

    if "efir" not in list_backends(exclude_tags=()):
        reg(name="efir")(_backend)
