"""The importer's building blocks: the dtypes, the value type, the builder
that writes `.efir` lines, the call context a lowering reads its arguments
from, and the table of lowerings (ATen op -> function).

A lowering is a function of one `Call` that returns the `Value` of the
call's result (a list of them, `None` where one is not computed, for an op
with several results), registered for its ATen ops with `@lowers(...)`.
"""

import dataclasses
import math
import re

import torch

from . import heads

DTYPES = {
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float32: "f32",
    torch.float64: "f64",
    torch.bool: "i1",
    torch.int32: "i32",
    torch.int64: "i64",
}
TORCH_DTYPES = {v: k for k, v in DTYPES.items()}

# The largest finite f16/bf16 values, and the magnitudes that round to infinity.
_FMAX = {"f16": 65504.0, "bf16": 3.3895313892515355e38}
_FOVER = {"f16": 65520.0, "bf16": 3.3961775292304974e38}
_NAME = re.compile(r"%[\w.]+")


class ImportError_(Exception):
    """An op or program that the importer does not support."""


@dataclasses.dataclass(frozen=True)
class Value:
    """An SSA value of the function being written: its name (`%v3`), static
    shape and efir dtype (`f16`, `i1`, ...)."""

    name: str
    shape: tuple
    dtype: str

    @property
    def rank(self):
        return len(self.shape)


def exact(n, dtype):
    """Whether the number `n` is exactly a value of `dtype` (a count that is
    not is computed in f32: 3001 is 3000 in f16, 262144 overflows it)."""
    if dtype == "f64":
        return True
    if dtype not in ("f16", "bf16", "f32"):
        return False
    v = torch.tensor(float(n), dtype=torch.float64).to(TORCH_DTYPES[dtype])
    return bool(torch.isfinite(v)) and float(v) == float(n)


def eps(dtype):
    """The machine epsilon of a float dtype (PyTorch's default `rms_norm` eps)."""
    return torch.finfo(TORCH_DTYPES[dtype] if dtype in ("f16", "bf16", "f32", "f64") else torch.float32).eps


def ty(shape, dtype):
    """The `.efir` type of a tensor (`tensor<2x8xf16>`, `tensor<f32>`)."""
    dims = "x".join(str(int(d)) for d in shape)
    return f"tensor<{dims}x{dtype}>" if dims else f"tensor<{dtype}>"


def where(node):
    """The Python source line an fx node came from, for error messages."""
    st = node.meta.get("stack_trace") or ""
    lines = [l.strip() for l in st.strip().splitlines() if l.strip()]
    # The last "File ..., line N" entry and its source line.
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("File "):
            src = lines[i + 1] if i + 1 < len(lines) else ""
            return f"{lines[i]}: {src}"
    return "(no source location recorded)"


class Builder:
    """The lines of the function being written, and the value of each fx
    node lowered so far (`env`: node -> `Value`, or a list of them)."""

    def __init__(self):
        self.lines = []
        self.n = 0
        self.env = {}
        # Values written only when a later line reads them (`lazy`): name -> line.
        self.pending = {}
        # Grouped heads (`heads.py`): value name -> its `Split` form, and
        # broadcast results -> their operand.
        self.split = {}
        self.bcast_of = {}

    def fresh(self, hint="v"):
        self.n += 1
        return f"%{hint}{self.n}"

    def op(self, text, shape, dtype, hint="v"):
        self.flush(text)
        name = self.fresh(hint)
        self.lines.append(f"  {name} = {text} : {ty(shape, dtype)}")
        return Value(name, tuple(shape), dtype)

    def lazy(self, text, shape, dtype, hint="v"):
        """A value whose line is written only once a later line (or the
        return) reads it: the forms of grouped-head values that may never
        be used."""
        name = self.fresh(hint)
        self.pending[name] = f"  {name} = {text} : {ty(shape, dtype)}"
        return Value(name, tuple(shape), dtype)

    def flush(self, text):
        """Writes the pending values that `text` reads (and theirs first)."""
        if not self.pending:
            return
        for tok in _NAME.findall(text):
            line = self.pending.pop(tok, None)
            if line is not None:
                self.flush(line.split("=", 1)[1])
                self.lines.append(line)

    def full(self, value, dtype, shape=()):
        v = float(value)
        if dtype in ("f16", "bf16") and math.isfinite(v):
            # A finite scalar beyond the dtype's range is what PyTorch's
            # conversion gives: an infinity (or the largest finite value
            # where it rounds to it).
            big = _FMAX[dtype]
            if abs(v) > big:
                v = math.copysign(math.inf if abs(v) >= _FOVER[dtype] else big, v)
        lit = "inf" if v == math.inf else "-inf" if v == -math.inf else "nan" if v != v else repr(v)
        if dtype in ("i32", "i64", "i1"):
            lit = str(int(value))
        return self.op(f"tensor.full<{lit}>", shape, dtype, "c")

    def cast(self, x, dtype):
        if x.dtype == dtype:
            return x
        if x.name in self.split:
            return heads.cast(self, x, dtype)
        return self.op(f"ew.cast {x.name}", x.shape, dtype)

    def ew(self, name, xs, shape, dtype):
        """A pointwise op; its operands are cast to `dtype` (except a
        select's, whose condition is boolean). `shape` None: the first
        operand's."""
        xs = [self.cast(x, dtype) if name != "ew.select" else x for x in xs]
        if shape is None:
            shape = xs[0].shape
        if self.split and any(x.name in self.split for x in xs):
            out = heads.ew(self, name, xs, shape, dtype)
            if out is not None:
                return out
        args = ", ".join(x.name for x in xs)
        return self.op(f"{name} {args}", shape, dtype)

    def cmp(self, pred, x, y, shape):
        return self.op(f"ew.cmp<{pred}> {x.name}, {y.name}", shape, "i1")

    def reshape(self, x, shape):
        if tuple(shape) == x.shape:
            return x
        out = heads.reshape(self, x, shape)
        if out is not None:
            return out
        return self.op(f"tensor.reshape {x.name}", shape, x.dtype)

    def broadcast(self, x, shape):
        # Lazy: the broadcast of repeated heads is often read only in its
        # split form (`heads.reshape`).
        out = self.lazy(f"tensor.broadcast {x.name}", shape, x.dtype)
        self.bcast_of[out.name] = x
        return out

    def transpose(self, x, perm):
        if list(perm) == list(range(len(perm))):
            return x
        shape = [x.shape[p] for p in perm]
        if x.name in self.split:
            return heads.transpose(self, x, perm, tuple(shape))
        return self.op(f"tensor.transpose<[{', '.join(str(p) for p in perm)}]> {x.name}", shape, x.dtype)

    def reduce(self, red, x, dims, keepdim):
        dims = sorted(d % x.rank for d in dims)
        if x.name in self.split:
            shape = tuple(1 if i in dims else s for i, s in enumerate(x.shape)) if keepdim else tuple(s for i, s in enumerate(x.shape) if i not in dims)
            out = heads.reduce(self, red, x, dims, keepdim, shape)
            if out is not None:
                return out
        cur = x
        for d in reversed(dims):
            shape = cur.shape[:d] + cur.shape[d + 1:]
            cur = self.op(f"tensor.reduce<#red.{red}, {d}> {cur.name}", shape, cur.dtype)
        if keepdim:
            shape = tuple(1 if i in dims else s for i, s in enumerate(x.shape))
            cur = self.reshape(cur, shape)
        return cur

    def matmul(self, a, b, shape, dtype):
        if self.split and (a.name in self.split or b.name in self.split):
            out = heads.matmul(self, a, b, tuple(shape), dtype)
            if out is not None:
                return out
        return self.op(f"tensor.matmul {a.name}, {b.name}", shape, dtype)

    def slice(self, x, dim, start, stop, step=1):
        """`x[start:stop:step]` along `dim`, with resolved bounds
        (0 <= start < stop <= extent, step >= 1); the identity if whole."""
        n = x.shape[dim]
        if start == 0 and stop == n and step == 1:
            return x
        starts = [start if k == dim else 0 for k in range(x.rank)]
        stops = [stop if k == dim else x.shape[k] for k in range(x.rank)]
        steps = [step if k == dim else 1 for k in range(x.rank)]
        shape = tuple(-(-(stop - start) // step) if k == dim else x.shape[k] for k in range(x.rank))

        def arr(v):
            return "[" + ", ".join(str(int(i)) for i in v) + "]"

        return self.op(f"tensor.slice<{arr(starts)}, {arr(stops)}, {arr(steps)}> {x.name}", shape, x.dtype)

    def concat(self, xs, dim, shape, dtype):
        xs = [self.cast(x, dtype) for x in xs]
        if len(xs) == 1:
            return xs[0]
        return self.op(f"tensor.concat<{dim}> {', '.join(x.name for x in xs)}", shape, dtype)


class Call:
    """One call of the exported graph as a lowering sees it: the builder,
    the fx node, the ATen op it lowers as (`target`: the functional op of an
    in-place call), its arguments and its result's shape and dtype (of the
    first result of an op with several)."""

    def __init__(self, b, node, target=None):
        self.b = b
        self.node = node
        self.target = node.target if target is None else target
        self.args = node.args
        self.kwargs = node.kwargs
        val = node.meta.get("val")
        if isinstance(val, (tuple, list)) and val and hasattr(val[0], "shape"):
            val = val[0]  # a tuple result (max.dim, batch norm): its first value
        self.shape, self.dtype = (tuple(val.shape), DTYPES[val.dtype]) if hasattr(val, "shape") else ((), "f32")

    @property
    def name(self):
        """The op's name without its overload (`clamp`, `relu_`)."""
        return getattr(self.target, "__name__", str(self.target)).split(".")[0]

    @property
    def where(self):
        return where(self.node)

    def error(self, msg):
        """An `ImportError_` whose message ends with the source line."""
        return ImportError_(f"{msg} at {self.where}")

    def value(self, i):
        """The value of argument `i` (an fx node)."""
        return self.b.env[self.args[i]]

    def operand(self, a, dtype):
        """A graph argument: a node's value, or a Python scalar as a
        constant of `dtype`."""
        if isinstance(a, torch.fx.Node):
            return self.b.env[a]
        return self.b.full(a, dtype)

    def param(self, i, name, default):
        """Argument `i` of the call, given positionally or by name."""
        if len(self.args) > i:
            return self.args[i]
        return self.kwargs.get(name, default)

    def int(self, v, what):
        """A static integer argument (a symbolic one is refused)."""
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.error(f"`{self.node.target}` needs a static integer {what}, found {v!r}")
        return v

    def scalar(self, v, what):
        """A Python number argument (a tensor or symbolic value is refused)."""
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.error(f"`{self.node.target}` needs a number for {what}, found {v!r}")
        return v

    def promote(self, *vals):
        """The efir dtype PyTorch computes `vals` (nodes or scalars) in."""
        ts = []
        for v in vals:
            if isinstance(v, torch.fx.Node):
                mv = v.meta.get("val")
                ts.append(mv if isinstance(mv, torch.Tensor) else torch.tensor(mv))
            elif v is not None:
                ts.append(v)
        d = ts[0] if isinstance(ts[0], torch.Tensor) else torch.tensor(ts[0])
        for o in ts[1:]:
            d = torch.empty((), dtype=torch.result_type(d, o))
        return DTYPES[d.dtype]


# ATen op (an OpOverload, or `operator.getitem`) -> its lowering.
LOWERINGS = {}


def lowers(*targets):
    """Registers the decorated function as the lowering of `targets`."""

    def register(fn):
        for t in targets:
            if t in LOWERINGS:
                raise ValueError(f"two lowerings for `{t}`: {LOWERINGS[t].__name__} and {fn.__name__}")
            LOWERINGS[t] = fn
        return fn

    return register


def lower(b, node, target=None):
    """The value of the call `node` (lowered as `target`, default its own
    op), its lines written to `b`; `ImportError_` for an op without a
    lowering."""
    t = node.target if target is None else target
    if t == torch.ops.aten._assert_tensor_metadata.default:
        return None
    c = Call(b, node, t)
    fn = LOWERINGS.get(t)
    if fn is None:
        raise ImportError_(f"unsupported op `{t}` at {where(node)}")
    return fn(c)
