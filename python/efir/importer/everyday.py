"""Lowerings of the everyday ops of issue 29 (docs/import.md), each as a
composite of existing IR ops: activations, clamps, comparisons and boolean
logic, selects and masks, extremes and their indices, `arange`, fills,
`repeat_interleave`, the batch/instance/group norms, no-ops (dropout in
eval, clone, detach, ...), in-place forms, and clear errors for the scans
efir's IR cannot express."""

import math
import operator

import torch

from .core import lower, lowers
from .tensor_ops import normalize

aten = torch.ops.aten


def clamp_values(b, x, lo, hi, shape, dt):
    """`min(max(x, lo), hi)`, each bound a value or a number; a bound of
    None is left out."""
    if lo is not None:
        x = b.ew("ew.max", [x, lo if not isinstance(lo, (int, float)) else b.full(lo, dt)], shape, dt)
    if hi is not None:
        x = b.ew("ew.min", [x, hi if not isinstance(hi, (int, float)) else b.full(hi, dt)], shape, dt)
    return x


def elu(b, x, alpha, scale, input_scale, shape, dt):
    """`scale * x` where x > 0, else `scale * alpha * (exp(input_scale * x) - 1)`."""
    pos = b.cmp("gt", x, b.full(0.0, dt), shape)
    xi = x if input_scale == 1 else b.ew("ew.mul", [x, b.full(input_scale, dt)], shape, dt)
    em1 = b.ew("ew.sub", [b.ew("ew.exp", [xi], shape, dt), b.full(1.0, dt)], shape, dt)
    neg = em1 if alpha * scale == 1 else b.ew("ew.mul", [em1, b.full(alpha * scale, dt)], shape, dt)
    posv = x if scale == 1 else b.ew("ew.mul", [x, b.full(scale, dt)], shape, dt)
    return b.ew("ew.select", [pos, posv, neg], shape, dt)


def softplus_value(b, x, beta, threshold, shape, dt):
    """`log(1 + exp(beta x)) / beta`, as `max(z, 0) + log(1 + exp(-|z|))`
    (no overflow), and `x` itself where `beta x > threshold`."""
    z = x if beta == 1 else b.ew("ew.mul", [x, b.full(beta, dt)], shape, dt)
    e = b.ew("ew.exp", [b.ew("ew.neg", [b.ew("ew.abs", [z], shape, dt)], shape, dt)], shape, dt)
    sp = b.ew("ew.add", [b.ew("ew.max", [z, b.full(0.0, dt)], shape, dt), b.ew("ew.log", [b.ew("ew.add", [e, b.full(1.0, dt)], shape, dt)], shape, dt)], shape, dt)
    if beta != 1:
        sp = b.ew("ew.div", [sp, b.full(beta, dt)], shape, dt)
    big = b.cmp("gt", z, b.full(threshold, dt), shape)
    return b.ew("ew.select", [big, x, sp], shape, dt)


def arg_index(c, x, d, keep, largest):
    """The first index of the largest (smallest) element of `x` along `d`
    (PyTorch's argmax/argmin), as i64: the maximum over `d` of `-i` where
    `x[i]` equals the extreme value, negated. Indices are held in f32, so
    the dim must have at most 2**24 elements."""
    b = c.b
    n = x.shape[d]
    if n > 1 << 24:
        raise c.error(f"`{c.node.target}` over a dim of {n} elements (more than 2**24) is not supported")
    xs = x if largest else b.ew("ew.neg", [x], x.shape, x.dtype)
    m = b.reduce("max", xs, [d], True)
    hit = b.cmp("eq", xs, m, x.shape)
    ishape = tuple(n if k == d else 1 for k in range(x.rank))
    i = b.op(f"tensor.iota<{d}>", ishape, "f32")
    cand = b.ew("ew.select", [hit, b.ew("ew.neg", [i], ishape, "f32"), b.full(-math.inf, "f32")], x.shape, "f32")
    r = b.ew("ew.neg", [b.reduce("max", cand, [d], keep)], None, "f32")
    return b.cast(r, "i64")


# No-ops and in-place forms.

_INPLACE = {
    aten.relu_.default: aten.relu.default,
    aten.hardtanh_.default: aten.hardtanh.default,
    aten.leaky_relu_.default: aten.leaky_relu.default,
    aten.clamp_.default: aten.clamp.default,
    aten.masked_fill_.Scalar: aten.masked_fill.Scalar,
    aten.detach_.default: aten.detach.default,
}


@lowers(*_INPLACE)
def inplace(c):
    """An in-place form of a functional op (on a fresh copy, as export
    writes them): the result is also the new value of the mutated operand."""
    out = lower(c.b, c.node, _INPLACE[c.target])
    if isinstance(c.args[0], torch.fx.Node):
        c.b.env[c.args[0]] = out
    return out


@lowers(aten.clone.default, aten.detach.default, aten.lift_fresh_copy.default, aten.alias.default, aten.contiguous.default)
def identity(c):
    return c.value(0)


@lowers(aten.dropout.default, aten.feature_dropout.default, aten.alpha_dropout.default, aten.feature_alpha_dropout.default)
def dropout(c):
    p = c.param(1, "p", 0.5)
    if c.param(2, "train", False) and p:
        raise c.error(f"`{c.name}` in training mode (p={p}) is not supported (call model.eval())")
    return c.value(0)


@lowers(aten.numpy_T.default)
def numpy_t(c):
    x = c.value(0)
    return c.b.transpose(x, list(range(x.rank))[::-1])


# Constructors and repeats.


@lowers(aten.arange.default, aten.arange.start, aten.arange.start_step)
def arange(c):
    b, dt = c.b, c.dtype
    if c.target == aten.arange.default:
        start, end, step = 0, c.args[0], 1
    else:
        start, end, step = c.args[0], c.args[1], c.param(2, "step", 1)
    for v, w in ((start, "start"), (end, "end"), (step, "step")):
        c.scalar(v, w)
    n = c.shape[0] if c.shape else 0
    if n < 1:
        raise c.error(f"`arange({start}, {end}, {step})` gives an empty tensor (efir has none)")
    if dt == "i1":
        raise c.error("`arange` of booleans is not supported")
    idt = "f32" if dt in ("f16", "bf16") else dt
    if idt in ("i32", "i64") and n > 1 << 31:
        raise c.error(f"`arange` of {n} elements is not supported")
    i = b.op("tensor.iota<0>", (n,), idt)
    if step != 1:
        i = b.ew("ew.mul", [i, b.full(step, idt)], (n,), idt)
    if start != 0:
        i = b.ew("ew.add", [i, b.full(start, idt)], (n,), idt)
    return b.cast(i, dt)


@lowers(aten.full.default, aten.zeros.default, aten.ones.default, aten.full_like.default, aten.zeros_like.default, aten.ones_like.default, aten.scalar_tensor.default)
def full(c):
    name = c.name
    v = 0 if name.startswith("zeros") else 1 if name.startswith("ones") else c.args[0] if c.target == aten.scalar_tensor.default else c.args[1]
    c.scalar(v, "the fill value")
    if 0 in c.shape:
        raise c.error(f"`{name}` gives an empty tensor (efir has none)")
    return c.b.full(v, c.dtype, c.shape)


@lowers(aten.repeat_interleave.self_int)
def repeat_interleave(c):
    """A new unit dim after the repeated one, broadcast to the count, and
    the two merged."""
    b, x = c.b, c.value(0)
    r = c.int(c.param(1, "repeats", 1), "repeat count")
    d = c.param(2, "dim", None)
    if r < 1:
        raise c.error(f"`repeat_interleave` by {r} gives an empty tensor (efir has none)")
    if d is None:
        x, d = b.reshape(x, (math.prod(x.shape),)), 0
    d = c.int(d, "dim") % x.rank
    s = x.shape
    x5 = b.reshape(x, s[:d + 1] + (1,) + s[d + 1:])
    xb = b.broadcast(x5, s[:d + 1] + (r,) + s[d + 1:])
    return b.reshape(xb, s[:d] + (s[d] * r,) + s[d + 1:])


@lowers(aten.repeat_interleave.Tensor, aten.repeat_interleave.self_Tensor)
def repeat_interleave_tensor(c):
    raise c.error("`repeat_interleave` by a tensor of counts (a data-dependent shape) is not supported; repeat by an int")


@lowers(aten.cumsum.default, aten.cumprod.default, aten.cummax.default, aten.cummin.default, aten.logcumsumexp.default)
def scan(c):
    raise c.error(f"`{c.name}` (a scan along a dim) is not supported: efir's IR has no scan op")


# Activations.


@lowers(aten.clamp.default, aten.clamp.Tensor, aten.clamp_min.default, aten.clamp_max.default, aten.clamp_min.Tensor, aten.clamp_max.Tensor, aten.hardtanh.default)
def clamp(c):
    b, t, dt = c.b, c.target, c.dtype
    x = b.cast(c.value(0), dt)
    if t in (aten.clamp_min.default, aten.clamp_min.Tensor):
        lo, hi = c.args[1], None
    elif t in (aten.clamp_max.default, aten.clamp_max.Tensor):
        lo, hi = None, c.args[1]
    elif t == aten.hardtanh.default:
        lo, hi = c.param(1, "min_val", -1.0), c.param(2, "max_val", 1.0)
    else:
        lo, hi = c.param(1, "min", None), c.param(2, "max", None)
    if lo is None and hi is None:
        raise c.error(f"`{c.name}` without a bound")
    lo, hi = (b.cast(b.env[v], dt) if isinstance(v, torch.fx.Node) else c.scalar(v, "a bound") if v is not None else None for v in (lo, hi))
    return clamp_values(b, x, lo, hi, c.shape, dt)


@lowers(aten.relu.default)
def relu(c):
    x = c.value(0)
    return c.b.ew("ew.max", [x, c.b.full(0, x.dtype)], c.shape, c.dtype)


@lowers(aten.leaky_relu.default)
def leaky_relu(c):
    b, x, shape, dt = c.b, c.value(0), c.shape, c.dtype
    slope = c.scalar(c.param(1, "negative_slope", 0.01), "the slope")
    pos = b.cmp("gt", x, b.full(0.0, dt), shape)
    return b.ew("ew.select", [pos, x, b.ew("ew.mul", [x, b.full(slope, dt)], shape, dt)], shape, dt)


@lowers(aten.elu.default)
def elu_(c):
    alpha = c.scalar(c.param(1, "alpha", 1.0), "alpha")
    scale = c.scalar(c.param(2, "scale", 1.0), "scale")
    iscale = c.scalar(c.param(3, "input_scale", 1.0), "input_scale")
    return elu(c.b, c.value(0), alpha, scale, iscale, c.shape, c.dtype)


@lowers(aten.selu.default)
def selu(c):
    return elu(c.b, c.value(0), 1.6732632423543772848170429916717, 1.0507009873554804934193349852946, 1.0, c.shape, c.dtype)


@lowers(aten.celu.default)
def celu(c):
    alpha = c.scalar(c.param(1, "alpha", 1.0), "alpha")
    if alpha == 0:
        raise c.error("`celu` with alpha 0")
    return elu(c.b, c.value(0), alpha, 1.0, 1.0 / alpha, c.shape, c.dtype)


@lowers(aten.softplus.default)
def softplus(c):
    beta = c.scalar(c.param(1, "beta", 1.0), "beta")
    thr = c.scalar(c.param(2, "threshold", 20.0), "threshold")
    if beta == 0:
        raise c.error("`softplus` with beta 0")
    return softplus_value(c.b, c.value(0), beta, thr, c.shape, c.dtype)


@lowers(aten.mish.default)
def mish(c):
    b, x, shape, dt = c.b, c.value(0), c.shape, c.dtype
    sp = softplus_value(b, x, 1.0, 20.0, shape, dt)
    return b.ew("ew.mul", [x, b.ew("ew.tanh", [sp], shape, dt)], shape, dt)


@lowers(aten.hardsigmoid.default, aten.hardswish.default)
def hard(c):
    """`min(max(x + 3, 0), 6) / 6` (times `x` for hardswish)."""
    b, x, shape, dt = c.b, c.value(0), c.shape, c.dtype
    r6 = clamp_values(b, b.ew("ew.add", [x, b.full(3.0, dt)], shape, dt), 0.0, 6.0, shape, dt)
    hs = b.ew("ew.div", [r6, b.full(6.0, dt)], shape, dt)
    return hs if c.target == aten.hardsigmoid.default else b.ew("ew.mul", [x, hs], shape, dt)


# Reductions to extremes and their indices.


@lowers(aten.logsumexp.default)
def logsumexp(c):
    b, dt = c.b, c.dtype
    x = b.cast(c.value(0), dt)
    dims = list(c.args[1]) if len(c.args) > 1 and c.args[1] is not None else []
    dims = [d % x.rank for d in dims] or list(range(x.rank))
    m = b.reduce("max", x, dims, True)
    # An infinite maximum (all -inf, or some +inf) is shifted by 0, as PyTorch does.
    inf = b.cmp("eq", b.ew("ew.abs", [m], m.shape, dt), b.full(math.inf, dt), m.shape)
    m = b.ew("ew.select", [inf, b.full(0.0, dt), m], m.shape, dt)
    s = b.reduce("sum", b.ew("ew.exp", [b.ew("ew.sub", [x, m], x.shape, dt)], x.shape, dt), dims, True)
    y = b.ew("ew.add", [b.ew("ew.log", [s], s.shape, dt), m], s.shape, dt)
    return b.reshape(y, c.shape)


@lowers(aten.max.dim, aten.min.dim)
def extreme_dim(c):
    """Values and indices over a dim; the indices only where they are read."""
    b, x = c.b, c.value(0)
    largest = c.target == aten.max.dim
    d = c.int(c.args[1], "dim") % max(x.rank, 1)
    keep = c.param(2, "keepdim", False)
    vshape = tuple(c.node.meta["val"][0].shape)
    xs = x if largest else b.ew("ew.neg", [x], x.shape, x.dtype)
    v = b.reduce("max", xs, [d], keep)
    if not largest:
        v = b.ew("ew.neg", [v], vshape, x.dtype)
    out = [v, None]
    if any(u.target == operator.getitem and u.args[1] == 1 for u in c.node.users):
        out[1] = arg_index(c, x, d, keep, largest)
    return out


@lowers(aten.max.default, aten.min.default)
def extreme(c):
    b, x = c.b, c.value(0)
    if c.target == aten.max.default:
        return b.reduce("max", x, list(range(x.rank)), False)
    v = b.reduce("max", b.ew("ew.neg", [x], x.shape, x.dtype), list(range(x.rank)), False)
    return b.ew("ew.neg", [v], (), x.dtype)


@lowers(aten.argmax.default, aten.argmin.default)
def argextreme(c):
    b, x = c.b, c.value(0)
    largest = c.target == aten.argmax.default
    d = c.param(1, "dim", None)
    keep = c.param(2, "keepdim", False)
    if d is None:
        return b.reshape(arg_index(c, b.reshape(x, (math.prod(x.shape),)), 0, False, largest), c.shape)
    return arg_index(c, x, c.int(d, "dim") % max(x.rank, 1), keep, largest)


@lowers(aten.max.other, aten.min.other, aten.fmax.default, aten.fmin.default)
def extreme_of_two(c):
    op = "ew.max" if c.target in (aten.max.other, aten.fmax.default) else "ew.min"
    return c.b.ew(op, [c.value(0), c.value(1)], c.shape, c.dtype)


# Comparisons, boolean logic, selects and masks.

_CMP = ("lt", "le", "gt", "ge", "eq", "ne")


@lowers(*(getattr(getattr(aten, p), o) for p in _CMP for o in ("Scalar", "Tensor")))
def compare(c):
    b, args = c.b, c.args
    cdt = c.promote(args[0], args[1])
    x = b.cast(c.value(0), cdt)
    y = b.cast(b.env[args[1]], cdt) if isinstance(args[1], torch.fx.Node) else b.full(c.scalar(args[1], "the operand"), cdt)
    return b.cmp(c.name, x, y, c.shape)


@lowers(aten.logical_not.default, aten.bitwise_not.default)
def logical_not(c):
    x = c.value(0)
    if c.target == aten.bitwise_not.default and x.dtype != "i1":
        raise c.error(f"unsupported op `{c.target}`")
    return c.b.cmp("eq", x, c.b.full(0, x.dtype), c.shape)


_BITWISE = (aten.bitwise_and.Tensor, aten.bitwise_or.Tensor, aten.__and__.Tensor, aten.__or__.Tensor, aten.bitwise_and.Scalar, aten.bitwise_or.Scalar, aten.__and__.Scalar, aten.__or__.Scalar)


@lowers(aten.logical_and.default, aten.logical_or.default, *_BITWISE)
def logical(c):
    """`a and b` is `a ? b : false`; `a or b` is `a ? true : b`."""
    b = c.b
    xs = [c.operand(a, "i1") for a in c.args[:2]]
    if c.target in _BITWISE and any(v.dtype != "i1" for v in xs):
        raise c.error(f"`{c.name}` of integers is not supported (booleans only)")
    xs = [v if v.dtype == "i1" else b.cmp("ne", v, b.full(0, v.dtype), v.shape) for v in xs]
    if "and" in c.name:
        return b.ew("ew.select", [xs[0], xs[1], b.full(0, "i1")], c.shape, "i1")
    return b.ew("ew.select", [xs[0], b.full(1, "i1"), xs[1]], c.shape, "i1")


@lowers(aten.where.self, aten.where.ScalarOther, aten.where.ScalarSelf, aten.where.Scalar)
def where_(c):
    b, dt = c.b, c.dtype
    cond = c.value(0)
    if cond.dtype != "i1":
        cond = b.cmp("ne", cond, b.full(0, cond.dtype), cond.shape)
    x, y = (b.cast(c.operand(v, dt), dt) for v in c.args[1:3])
    return b.ew("ew.select", [cond, x, y], c.shape, dt)


@lowers(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def masked_fill(c):
    b, dt = c.b, c.dtype
    x, m = b.cast(c.value(0), dt), c.value(1)
    v = c.args[2]
    if isinstance(v, torch.fx.Node):
        if b.env[v].shape != ():
            raise c.error(f"`masked_fill` with a value of shape {b.env[v].shape} (a 0-dim tensor is needed)")
        v = b.cast(b.env[v], dt)
    else:
        v = b.full(c.scalar(v, "the fill value"), dt)
    if m.dtype != "i1":
        raise c.error(f"`masked_fill` with a mask of type {m.dtype} (a bool mask is needed)")
    return b.ew("ew.select", [m, v, x], c.shape, dt)


@lowers(aten.triu.default, aten.tril.default)
def triangle(c):
    b, x = c.b, c.value(0)
    if x.rank < 2:
        raise c.error(f"`{c.name}` of a tensor of rank {x.rank} (at least 2 needed)")
    k = c.int(c.param(1, "diagonal", 0), "diagonal")
    rows, cols = x.shape[-2], x.shape[-1]
    row = b.op("tensor.iota<0>", (rows, 1), "i64")
    col = b.op("tensor.iota<1>", (1, cols), "i64")
    if k:
        row = b.ew("ew.add", [row, b.full(k, "i64")], (rows, 1), "i64")
    keep = b.cmp("ge" if c.target == aten.triu.default else "le", col, row, (rows, cols))
    return b.ew("ew.select", [keep, x, b.full(0, x.dtype)], c.shape, x.dtype)


# Norms over channels.


@lowers(aten.batch_norm.default, aten._native_batch_norm_legit_no_training.default, aten.instance_norm.default)
def channel_norm(c):
    b, t, args, shape, dt = c.b, c.target, c.args, c.shape, c.dtype
    x = b.cast(c.value(0), dt)
    if t == aten._native_batch_norm_legit_no_training.default:
        w, bias, rm, rv = args[1:5]
        epsilon, train = args[6] if len(args) > 6 else 1e-5, False
    else:
        w, bias, rm, rv, train = args[1:6]
        epsilon = args[7] if len(args) > 7 else 1e-5
    if x.rank < 2:
        raise c.error(f"`{c.name}` of a tensor of rank {x.rank} (at least 2 needed)")
    pshape = (x.shape[1],) + (1,) * (x.rank - 2)

    def chan(v):
        return b.reshape(b.cast(b.env[v], dt), pshape)

    if t == aten.instance_norm.default and train:
        # `use_input_stats`: statistics of each sample and channel.
        y = normalize(b, x, list(range(2, x.rank)), epsilon, dt)
    elif train or rm is None or rv is None:
        raise c.error(f"`{c.name}` in training mode (batch statistics) is not supported (call model.eval())")
    else:
        inv = b.ew("ew.rsqrt", [b.ew("ew.add", [chan(rv), b.full(epsilon, dt)], pshape, dt)], pshape, dt)
        y = b.ew("ew.mul", [b.ew("ew.sub", [x, chan(rm)], shape, dt), inv], shape, dt)
    if w is not None:
        y = b.ew("ew.mul", [y, chan(w)], shape, dt)
    if bias is not None:
        y = b.ew("ew.add", [y, chan(bias)], shape, dt)
    out = b.reshape(y, shape)
    return [out, None, None] if t == aten._native_batch_norm_legit_no_training.default else out


@lowers(aten.group_norm.default)
def group_norm(c):
    b, shape, dt = c.b, c.shape, c.dtype
    x = b.cast(c.value(0), dt)
    g = c.int(c.args[1], "group count")
    w, bias = c.param(2, "weight", None), c.param(3, "bias", None)
    epsilon = c.param(4, "eps", 1e-5)
    n, ch = x.shape[0], x.shape[1]
    if g < 1 or ch % g:
        raise c.error(f"`group_norm` of {ch} channels into {g} groups")
    rest = math.prod(x.shape[2:])
    xg = b.reshape(x, (n, g, (ch // g) * rest))
    y = b.reshape(normalize(b, xg, [2], epsilon, dt), x.shape)
    pshape = (ch,) + (1,) * (x.rank - 2)
    if w is not None:
        y = b.ew("ew.mul", [y, b.reshape(b.cast(b.env[w], dt), pshape)], shape, dt)
    if bias is not None:
        y = b.ew("ew.add", [y, b.reshape(b.cast(b.env[bias], dt), pshape)], shape, dt)
    return y
