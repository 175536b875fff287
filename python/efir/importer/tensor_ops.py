"""Lowerings of the core tensor ops: arithmetic, casts, reductions, the
norms, softmax and the activations every model uses, views (reshape,
transpose, expand), slices, concatenations and splits, and the matmuls
(linear, addmm, batched products)."""

import math
import operator

import torch

from .core import exact, eps, lowers

aten = torch.ops.aten

_BINARY = {
    aten.add.Tensor: "ew.add",
    aten.sub.Tensor: "ew.sub",
    aten.mul.Tensor: "ew.mul",
    aten.div.Tensor: "ew.div",
    aten.maximum.default: "ew.max",
    aten.minimum.default: "ew.min",
}
_UNARY = {
    aten.rsqrt.default: "ew.rsqrt",
    aten.sqrt.default: "ew.sqrt",
    aten.exp.default: "ew.exp",
    aten.log.default: "ew.log",
    aten.log1p.default: "ew.log1p",
    aten.sigmoid.default: "ew.sigmoid",
    aten.tanh.default: "ew.tanh",
    aten.neg.default: "ew.neg",
    aten.abs.default: "ew.abs",
}


# Arithmetic and casts.


@lowers(*_BINARY)
def binary(c):
    if len(c.args) > 2 or c.kwargs.get("alpha", 1) != 1:
        raise c.error(f"`{c.target}` with alpha is not supported")
    xs = [c.operand(a, c.dtype) for a in c.args[:2]]
    return c.b.ew(_BINARY[c.target], xs, c.shape, c.dtype)


@lowers(*_UNARY)
def unary(c):
    return c.b.ew(_UNARY[c.target], [c.value(0)], c.shape, c.dtype)


@lowers(aten.to.dtype, aten._to_copy.default, aten.to.dtype_layout)
def to(c):
    return c.b.cast(c.value(0), c.dtype)


@lowers(aten.pow.Tensor_Scalar)
def pow_scalar(c):
    x = c.value(0)
    if c.args[1] == 2:
        return c.b.ew("ew.mul", [x, x], c.shape, c.dtype)
    return c.b.ew("ew.pow", [x, c.b.full(c.args[1], c.dtype)], c.shape, c.dtype)


# Reductions and normalizations.


def mean(b, x, dims, keep, dt):
    """The mean of `x` over `dims`: a sum divided by the element count, in
    `dt` where the count is exactly a value of `dt`, else accumulated and
    divided in f32 and cast back (PyTorch accumulates half means in f32)."""
    dims = [d % x.rank for d in dims]
    n = math.prod(x.shape[d] for d in dims)
    cdt = dt if exact(n, dt) else "f32"
    s = b.reduce("sum", b.cast(x, cdt), dims, keep)
    return b.cast(b.ew("ew.div", [s, b.full(float(n), cdt)], s.shape, cdt), dt)


def normalize(b, x, dims, epsilon, dt, center=True):
    """`(x - mean) * rsqrt(var + eps)` over `dims` (biased variance), or
    `x * rsqrt(mean(x*x) + eps)` without `center`. The statistics are in
    `dt` where the element count is exactly a value of `dt`, else in f32
    (a count of 262144 is no f16 value, and such sums overflow f16)."""
    n = math.prod(x.shape[d] for d in dims)
    cdt = dt if exact(n, dt) else "f32"
    xc = b.cast(x, cdt)
    if center:
        xc = b.ew("ew.sub", [xc, mean(b, xc, dims, True, cdt)], xc.shape, cdt)
    var = mean(b, b.ew("ew.mul", [xc, xc], xc.shape, cdt), dims, True, cdt)
    r = b.ew("ew.rsqrt", [b.ew("ew.add", [var, b.full(epsilon, cdt)], var.shape, cdt)], var.shape, cdt)
    return b.cast(b.ew("ew.mul", [xc, r], xc.shape, cdt), dt)


@lowers(aten.mean.dim, aten.sum.dim_IntList, aten.amax.default, aten.amin.default, aten.mean.default, aten.sum.default)
def reduction(c):
    b, t, dt = c.b, c.target, c.dtype
    x = b.cast(c.value(0), dt)
    whole = t in (aten.mean.default, aten.sum.default)
    dims = c.args[1] if not whole and len(c.args) > 1 and c.args[1] is not None else []
    dims = list(dims) or list(range(x.rank))
    keep = False if whole else c.param(2, "keepdim", False)
    if t == aten.amin.default:
        return b.ew("ew.neg", [b.reduce("max", b.ew("ew.neg", [x], x.shape, dt), dims, keep)], c.shape, dt)
    if t in (aten.mean.dim, aten.mean.default):
        return mean(b, x, dims, keep, dt)
    return b.reduce("max" if t == aten.amax.default else "sum", x, dims, keep)


@lowers(aten.rms_norm.default, aten.layer_norm.default)
def norm(c):
    b, dt, args = c.b, c.dtype, c.args
    x = b.cast(c.value(0), dt)
    dims = list(range(x.rank - len(args[1]), x.rank))
    w = args[2] if len(args) > 2 else None
    if c.target == aten.rms_norm.default:
        epsilon = args[3] if len(args) > 3 and args[3] is not None else eps(dt)
        y = normalize(b, x, dims, epsilon, dt, center=False)
        bias = None
    else:
        bias = args[3] if len(args) > 3 else None
        epsilon = args[4] if len(args) > 4 else 1e-5
        y = normalize(b, x, dims, epsilon, dt)
    if w is not None:
        y = b.ew("ew.mul", [y, b.env[w]], c.shape, dt)
    if bias is not None:
        y = b.ew("ew.add", [y, b.env[bias]], c.shape, dt)
    return y


@lowers(aten.silu.default)
def silu(c):
    x = c.value(0)
    return c.b.ew("ew.mul", [x, c.b.ew("ew.sigmoid", [x], c.shape, c.dtype)], c.shape, c.dtype)


@lowers(aten.gelu.default)
def gelu(c):
    b, x, shape, dt = c.b, c.value(0), c.shape, c.dtype
    approx = c.kwargs.get("approximate", c.args[1] if len(c.args) > 1 else "none")
    if approx == "tanh":
        k = b.full(math.sqrt(2 / math.pi), dt)
        x3 = b.ew("ew.mul", [b.ew("ew.mul", [x, x], shape, dt), x], shape, dt)
        inner = b.ew("ew.mul", [k, b.ew("ew.add", [x, b.ew("ew.mul", [b.full(0.044715, dt), x3], shape, dt)], shape, dt)], shape, dt)
        th = b.ew("ew.tanh", [inner], shape, dt)
    else:
        th = b.ew("ew.erf", [b.ew("ew.mul", [x, b.full(1 / math.sqrt(2), dt)], shape, dt)], shape, dt)
    one = b.ew("ew.add", [th, b.full(1.0, dt)], shape, dt)
    return b.ew("ew.mul", [b.ew("ew.mul", [x, b.full(0.5, dt)], shape, dt), one], shape, dt)


@lowers(aten._softmax.default, aten.softmax.int)
def softmax(c):
    b, shape, dt = c.b, c.shape, c.dtype
    x = b.cast(c.value(0), dt)
    d = c.args[1] % x.rank
    m = b.reduce("max", x, [d], True)
    e = b.ew("ew.exp", [b.ew("ew.sub", [x, m], shape, dt)], shape, dt)
    s = b.reduce("sum", e, [d], True)
    return b.ew("ew.div", [e, s], shape, dt)


@lowers(aten._log_softmax.default, aten.log_softmax.int)
def log_softmax(c):
    """`(x - max) - log(sum(exp(x - max)))`."""
    b, shape, dt = c.b, c.shape, c.dtype
    x = b.cast(c.value(0), dt)
    d = c.args[1] % x.rank
    m = b.reduce("max", x, [d], True)
    z = b.ew("ew.sub", [x, m], shape, dt)
    s = b.reduce("sum", b.ew("ew.exp", [z], shape, dt), [d], True)
    return b.ew("ew.sub", [z, b.ew("ew.log", [s], s.shape, dt)], shape, dt)


# Slices, concatenations and splits.


def bounds(c, n, start, end, step):
    """PyTorch's slice bounds resolved against an extent `n`: negative
    indices count from the end, and both ends are clamped to [0, n]."""
    start = 0 if start is None else c.int(start, "start")
    end = n if end is None else c.int(end, "end")
    step = c.int(step, "step")
    if step < 1:
        raise c.error(f"`{c.node.target}` with step {step} is not supported (steps must be positive)")
    if start < 0:
        start += n
    if end < 0:
        end += n
    start = min(max(start, 0), n)
    end = min(max(end, start), n)
    if end == start:
        raise c.error(f"`{c.node.target}` gives an empty tensor (efir has none)")
    return start, end, step


@lowers(aten.slice.Tensor, aten.narrow.default, aten.select.int)
def slice_(c):
    t = c.target
    x = c.value(0)
    d = c.int(c.param(1, "dim", 0), "dim") % x.rank
    n = x.shape[d]
    if t == aten.slice.Tensor:
        lo, hi, step = bounds(c, n, c.param(2, "start", None), c.param(3, "end", None), c.param(4, "step", 1))
    else:
        i = c.int(c.param(2, "start" if t == aten.narrow.default else "index", 0), "index")
        length = c.int(c.param(3, "length", 1), "length") if t == aten.narrow.default else 1
        if not -n <= i < n or not 1 <= length <= n - (i % n):
            raise c.error(f"`{t}` at {i} (length {length}) is out of range for a dim of {n}")
        lo, hi, step = i % n, i % n + length, 1
    y = c.b.slice(x, d, lo, hi, step)
    if t == aten.select.int:
        y = c.b.reshape(y, c.shape)
    if y.shape != tuple(c.shape):
        raise c.error(f"`{t}` gave shape {y.shape}, PyTorch says {tuple(c.shape)}")
    return y


@lowers(aten.cat.default, aten.concat.default)
def cat(c):
    d = c.int(c.param(1, "dim", 0), "dim") % len(c.shape)
    # Legacy empty operands (shape (0,)) contribute nothing.
    xs = [c.b.env[a] for a in c.args[0] if math.prod(c.b.env[a].shape) > 0]
    return c.b.concat(xs, d, c.shape, c.dtype)


@lowers(aten.split.Tensor, aten.split_with_sizes.default, aten.chunk.default, aten.unbind.int)
def split(c):
    """Consecutive slices along a dim: a list of values, read by `getitem`."""
    t, b = c.target, c.b
    x = c.value(0)
    d = c.int(c.param(1 if t == aten.unbind.int else 2, "dim", 0), "dim") % x.rank
    n = x.shape[d]
    if t == aten.split.Tensor:
        k = c.int(c.args[1], "split size")
        sizes = [min(k, n - i) for i in range(0, n, k)] if k > 0 else []
    elif t == aten.split_with_sizes.default:
        sizes = [c.int(v, "split size") for v in c.args[1]]
    elif t == aten.chunk.default:
        k = c.int(c.args[1], "chunk count")
        k = -(-n // k) if k > 0 else 0
        sizes = [min(k, n - i) for i in range(0, n, k)] if k > 0 else []
    else:
        sizes = [1] * n
    if sum(sizes) != n or any(sz < 1 for sz in sizes):
        raise c.error(f"`{c.node.target}` into pieces {list(sizes)} of a dim of {n} is not supported")
    pieces, at = [], 0
    for sz in sizes:
        pieces.append(b.slice(x, d, at, at + sz))
        at += sz
    if t == aten.unbind.int:
        pieces = [b.reshape(p, p.shape[:d] + p.shape[d + 1:]) for p in pieces]
    return pieces


@lowers(operator.getitem)
def getitem(c):
    seq = c.value(0)
    if not isinstance(seq, list):
        raise c.error("`getitem` of a single value")
    if seq[c.args[1]] is None:
        raise c.error(f"result {c.args[1]} of `{c.args[0].target}` is not supported")
    return seq[c.args[1]]


# Views.


@lowers(aten.view.default, aten.reshape.default, aten._unsafe_view.default, aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.default)
def reshape(c):
    return c.b.reshape(c.value(0), c.shape)


@lowers(aten.permute.default)
def permute(c):
    return c.b.transpose(c.value(0), [p % len(c.shape) for p in c.args[1]])


@lowers(aten.transpose.int)
def transpose(c):
    x = c.value(0)
    perm = list(range(x.rank))
    i, j = c.args[1] % x.rank, c.args[2] % x.rank
    perm[i], perm[j] = perm[j], perm[i]
    return c.b.transpose(x, perm)


@lowers(aten.t.default)
def t(c):
    return c.b.transpose(c.value(0), [1, 0])


@lowers(aten.expand.default)
def expand(c):
    return c.b.broadcast(c.value(0), c.shape)


# Matrix products.


@lowers(aten.mm.default, aten.bmm.default, aten.matmul.default)
def matmul(c):
    return c.b.matmul(c.value(0), c.value(1), c.shape, c.dtype)


@lowers(aten.linear.default)
def linear(c):
    b = c.b
    y = b.matmul(c.value(0), b.transpose(c.value(1), [1, 0]), c.shape, c.dtype)
    if len(c.args) > 2 and c.args[2] is not None:
        y = b.ew("ew.add", [y, c.value(2)], c.shape, c.dtype)
    return y


@lowers(aten.addmm.default)
def addmm(c):
    y = c.b.matmul(c.value(1), c.value(2), c.shape, c.dtype)
    return c.b.ew("ew.add", [y, c.value(0)], c.shape, c.dtype)

