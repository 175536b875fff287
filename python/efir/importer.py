"""Import PyTorch programs into efir's tensor-level IR (`.efir` text).

`import_program(ep)` walks a `torch.export.ExportedProgram` and writes one
`func` whose parameters are the program's parameters and buffers (with their
real names, e.g. `%l.weight`) followed by its user inputs. Composite ops are
expanded into matmuls, reductions and pointwise ops so that saturation can
optimize inside them (RMSNorm, softmax, log_softmax, SiLU, GELU, linear,
SDPA, einsum, the activations, norms and reductions of docs/import.md);
slices, splits and concatenations become `tensor.slice` and
`tensor.concat` with PyTorch's bounds resolved (negative indices, clamped
ends). Constants are values of their dtype: an element count that is not
(262144 in f16) is computed in f32.

An op that is not supported raises `ImportError_` naming the op and the
Python source line it came from.
"""

import math
import operator

import torch

DTYPES = {
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float32: "f32",
    torch.float64: "f64",
    torch.bool: "i1",
    torch.int32: "i32",
    torch.int64: "i64",
}


# The largest finite f16/bf16 values, and the magnitudes that round to infinity.
_FMAX = {"f16": 65504.0, "bf16": 3.3895313892515355e38}
_FOVER = {"f16": 65520.0, "bf16": 3.3961775292304974e38}
_TORCH = {v: k for k, v in DTYPES.items()}


def _exact(n, dtype):
    """Whether the number `n` is exactly a value of `dtype` (a count that is
    not is computed in f32: 3001 is 3000 in f16, 262144 overflows it)."""
    if dtype in ("f64",):
        return True
    if dtype not in ("f16", "bf16", "f32"):
        return False
    v = torch.tensor(float(n), dtype=torch.float64).to(_TORCH[dtype])
    return bool(torch.isfinite(v)) and float(v) == float(n)


def _eps(dtype):
    """The machine epsilon of a float dtype (PyTorch's default `rms_norm` eps)."""
    return torch.finfo(_TORCH[dtype] if dtype in ("f16", "bf16", "f32", "f64") else torch.float32).eps


class ImportError_(Exception):
    """An op or program that the importer does not support."""


def _ty(shape, dtype):
    dims = "x".join(str(int(d)) for d in shape)
    return f"tensor<{dims}x{dtype}>" if dims else f"tensor<{dtype}>"


def _where(node):
    st = node.meta.get("stack_trace") or ""
    lines = [l.strip() for l in st.strip().splitlines() if l.strip()]
    # The last "File ..., line N" entry and its source line.
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("File "):
            src = lines[i + 1] if i + 1 < len(lines) else ""
            return f"{lines[i]}: {src}"
    return "(no source location recorded)"


class _Builder:
    def __init__(self):
        self.lines = []
        self.n = 0
        self.env = {}  # fx node -> (name, shape, dtype)

    def fresh(self, hint="v"):
        self.n += 1
        return f"%{hint}{self.n}"

    def op(self, text, shape, dtype, hint="v"):
        name = self.fresh(hint)
        self.lines.append(f"  {name} = {text} : {_ty(shape, dtype)}")
        return (name, tuple(shape), dtype)

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
        if x[2] == dtype:
            return x
        return self.op(f"ew.cast {x[0]}", x[1], dtype)

    def ew(self, name, xs, shape, dtype):
        xs = [self.cast(x, dtype) if name != "ew.select" else x for x in xs]
        if shape is None:
            shape = xs[0][1]
        args = ", ".join(x[0] for x in xs)
        return self.op(f"{name} {args}", shape, dtype)

    def reshape(self, x, shape):
        if tuple(shape) == x[1]:
            return x
        return self.op(f"tensor.reshape {x[0]}", shape, x[2])

    def transpose(self, x, perm):
        if list(perm) == list(range(len(perm))):
            return x
        shape = [x[1][p] for p in perm]
        return self.op(f"tensor.transpose<[{', '.join(str(p) for p in perm)}]> {x[0]}", shape, x[2])

    def reduce(self, red, x, dims, keepdim):
        dims = sorted(d % len(x[1]) for d in dims)
        cur = x
        for d in reversed(dims):
            shape = cur[1][:d] + cur[1][d + 1:]
            cur = self.op(f"tensor.reduce<#red.{red}, {d}> {cur[0]}", shape, cur[2])
        if keepdim:
            shape = tuple(1 if i in dims else s for i, s in enumerate(x[1]))
            cur = self.reshape(cur, shape)
        return cur

    def matmul(self, a, b, shape, dtype):
        return self.op(f"tensor.matmul {a[0]}, {b[0]}", shape, dtype)

    def slice(self, x, dim, start, stop, step=1):
        """`x[start:stop:step]` along `dim`, with resolved bounds
        (0 <= start < stop <= extent, step >= 1); the identity if whole."""
        n = x[1][dim]
        if start == 0 and stop == n and step == 1:
            return x
        rank = len(x[1])
        starts = [start if k == dim else 0 for k in range(rank)]
        stops = [stop if k == dim else x[1][k] for k in range(rank)]
        steps = [step if k == dim else 1 for k in range(rank)]
        shape = tuple(-(-(stop - start) // step) if k == dim else x[1][k] for k in range(rank))

        def arr(v):
            return "[" + ", ".join(str(int(i)) for i in v) + "]"

        return self.op(f"tensor.slice<{arr(starts)}, {arr(stops)}, {arr(steps)}> {x[0]}", shape, x[2])

    def concat(self, xs, dim, shape, dtype):
        xs = [self.cast(x, dtype) for x in xs]
        if len(xs) == 1:
            return xs[0]
        return self.op(f"tensor.concat<{dim}> {', '.join(x[0] for x in xs)}", shape, dtype)


def _val(node):
    v = node.meta.get("val")
    return tuple(v.shape), DTYPES[v.dtype]


def import_program(ep, name="main"):
    """The `.efir` text of an exported program (one function `@name`)."""
    if not isinstance(ep, torch.export.ExportedProgram):
        raise TypeError("import_program takes a torch.export.ExportedProgram")
    b = _Builder()
    sig = ep.graph_signature
    names = {}
    for spec in sig.input_specs:
        names[spec.arg.name] = spec.target if spec.target else spec.arg.name
    params = []
    for node in ep.graph.nodes:
        if node.op != "placeholder":
            continue
        v = node.meta.get("val")
        pname = "%" + str(names.get(node.name, node.name))
        if isinstance(v, (bool, int, float, torch.SymBool, torch.SymInt, torch.SymFloat)):
            # A Python scalar input: a rank-0 parameter (torch.export bakes a
            # specialized scalar's value into the graph, which then leaves
            # the parameter unread; a symbolic one is read as a tensor).
            sdt = "i1" if isinstance(v, (bool, torch.SymBool)) else "i64" if isinstance(v, (int, torch.SymInt)) else "f32"
            params.append(f"{pname}: {_ty((), sdt)}")
            b.env[node] = (pname, (), sdt)
            continue
        if not isinstance(v, torch.Tensor):
            raise ImportError_(f"input `{node.name}` is neither a tensor nor a number ({type(v).__name__})")
        for d in v.shape:
            if not isinstance(d, int):
                raise ImportError_(f"input `{node.name}` has a dynamic shape {tuple(v.shape)}; efir needs static shapes")
        shape, dt = _val(node)
        params.append(f"{pname}: {_ty(shape, dt)}")
        b.env[node] = (pname, shape, dt)
    results = []
    for node in ep.graph.nodes:
        if node.op == "call_function":
            try:
                out = _lower(b, node)
            except ImportError_:
                raise
            except Exception as e:  # noqa: BLE001
                raise ImportError_(f"cannot import `{node.target}` ({e}) at {_where(node)}") from e
            if out is not None:
                b.env[node] = out
        elif node.op == "output":
            outs = node.args[0]
            for o in outs:
                results.append(b.env[o])
        elif node.op == "get_attr":
            raise ImportError_(f"constant `{node.target}` is not supported at {_where(node)}")
    ret_types = ", ".join(_ty(r[1], r[2]) for r in results)
    ret_vals = ", ".join(r[0] for r in results)
    header = f"func @{name}({', '.join(params)}) -> " + (f"({ret_types})" if len(results) > 1 else ret_types) + " {"
    return "\n".join([header, *b.lines, f"  return {ret_vals} : {ret_types}", "}", ""])


def unsupported(node):
    """Why the importer cannot lower the call `node` of an exported graph
    (the `ImportError_` message, naming the op and its source line), or None
    where it can. Asks the importer's own lowering, on stand-ins for the
    node's operands (their `meta["val"]`); the torch.compile backend's
    partial compilation uses it to choose what efir compiles."""
    if node.op != "call_function":
        return f"`{node.target}` ({node.op}) is not supported at {_where(node)}"
    b = _Builder()

    def stand_in(n, v):
        if isinstance(v, (bool, torch.SymBool)):
            return (f"%{n.name}", (), "i1")
        if isinstance(v, (int, torch.SymInt)):
            return (f"%{n.name}", (), "i64")
        if isinstance(v, (float, torch.SymFloat)):
            return (f"%{n.name}", (), "f32")
        if isinstance(v, (tuple, list)):
            return [stand_in(n, e) if e is not None else None for e in v]
        if not isinstance(v, torch.Tensor) or v.dtype not in DTYPES or not all(isinstance(d, int) for d in v.shape):
            raise ImportError_(f"operand `{n.name}` of `{node.target}` ({v!r:.60}) is not supported at {_where(node)}")
        return (f"%{n.name}", tuple(v.shape), DTYPES[v.dtype])

    try:
        for n in node.all_input_nodes:
            b.env[n] = stand_in(n, n.meta.get("val"))
        _lower(b, node)
    except ImportError_ as e:
        return str(e)
    except Exception as e:  # noqa: BLE001
        return f"cannot import `{node.target}` ({e}) at {_where(node)}"
    return None


def _int(node, v, what):
    """A static integer argument (a symbolic one is refused)."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise ImportError_(f"`{node.target}` needs a static integer {what}, found {v!r} at {_where(node)}")
    return v


def _param(node, i, name, default):
    """Argument `i` of a call, given positionally or by name."""
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(name, default)


def _bounds(node, n, start, end, step):
    """PyTorch's slice bounds resolved against an extent `n`: negative
    indices count from the end, and both ends are clamped to [0, n]."""
    start = 0 if start is None else _int(node, start, "start")
    end = n if end is None else _int(node, end, "end")
    step = _int(node, step, "step")
    if step < 1:
        raise ImportError_(f"`{node.target}` with step {step} is not supported (steps must be positive) at {_where(node)}")
    if start < 0:
        start += n
    if end < 0:
        end += n
    start = min(max(start, 0), n)
    end = min(max(end, start), n)
    if end == start:
        raise ImportError_(f"`{node.target}` gives an empty tensor (efir has none) at {_where(node)}")
    return start, end, step


def _pieces(b, node, x, dim, sizes):
    """Consecutive slices of `x` along `dim` of the given sizes (split,
    chunk): a list of values, read by `getitem`."""
    if sum(sizes) != x[1][dim] or any(sz < 1 for sz in sizes):
        raise ImportError_(f"`{node.target}` into pieces {list(sizes)} of a dim of {x[1][dim]} is not supported at {_where(node)}")
    out, at = [], 0
    for sz in sizes:
        out.append(b.slice(x, dim, at, at + sz))
        at += sz
    return out


def _arg(b, a, like_dtype):
    """A graph argument: a node's value, or a Python scalar as a constant."""
    if isinstance(a, torch.fx.Node):
        return b.env[a]
    return b.full(a, like_dtype)


def _mean(b, x, dims, keep, dt):
    """The mean of `x` over `dims`: a sum divided by the element count, in
    `dt` where the count is exactly a value of `dt`, else accumulated and
    divided in f32 and cast back (PyTorch accumulates half means in f32)."""
    dims = [d % len(x[1]) for d in dims]
    n = math.prod(x[1][d] for d in dims)
    cdt = dt if _exact(n, dt) else "f32"
    s = b.reduce("sum", b.cast(x, cdt), dims, keep)
    return b.cast(b.ew("ew.div", [s, b.full(float(n), cdt)], s[1], cdt), dt)


def _normalize(b, x, dims, eps, dt, center=True):
    """`(x - mean) * rsqrt(var + eps)` over `dims` (biased variance), or
    `x * rsqrt(mean(x*x) + eps)` without `center`. The statistics are in
    `dt` where the element count is exactly a value of `dt`, else in f32
    (a count of 262144 is no f16 value, and such sums overflow f16)."""
    n = math.prod(x[1][d] for d in dims)
    cdt = dt if _exact(n, dt) else "f32"
    xc = b.cast(x, cdt)
    if center:
        xc = b.ew("ew.sub", [xc, _mean(b, xc, dims, True, cdt)], xc[1], cdt)
    var = _mean(b, b.ew("ew.mul", [xc, xc], xc[1], cdt), dims, True, cdt)
    r = b.ew("ew.rsqrt", [b.ew("ew.add", [var, b.full(eps, cdt)], var[1], cdt)], var[1], cdt)
    return b.cast(b.ew("ew.mul", [xc, r], xc[1], cdt), dt)


def _lower(b, node):
    aten = torch.ops.aten
    t = node.target
    args = node.args
    if t in (aten._assert_tensor_metadata.default,):
        return None
    val = node.meta.get("val")
    if isinstance(val, (tuple, list)) and val and hasattr(val[0], "shape"):
        val = val[0]  # a tuple result (max.dim, batch norm): its first value
    shape, dt = (tuple(val.shape), DTYPES[val.dtype]) if hasattr(val, "shape") else ((), "f32")
    pointwise = {
        aten.add.Tensor: "ew.add",
        aten.sub.Tensor: "ew.sub",
        aten.mul.Tensor: "ew.mul",
        aten.div.Tensor: "ew.div",
        aten.maximum.default: "ew.max",
        aten.minimum.default: "ew.min",
    }
    unary = {
        aten.rsqrt.default: "ew.rsqrt",
        aten.sqrt.default: "ew.sqrt",
        aten.exp.default: "ew.exp",
        aten.log.default: "ew.log",
        aten.sigmoid.default: "ew.sigmoid",
        aten.tanh.default: "ew.tanh",
        aten.neg.default: "ew.neg",
        aten.abs.default: "ew.abs",
    }
    if t in pointwise:
        if len(args) > 2 or node.kwargs.get("alpha", 1) != 1:
            raise ImportError_(f"`{t}` with alpha is not supported at {_where(node)}")
        xs = [_arg(b, a, dt) for a in args[:2]]
        return b.ew(pointwise[t], xs, shape, dt)
    if t in unary:
        return b.ew(unary[t], [b.env[args[0]]], shape, dt)
    if t in (aten.to.dtype, aten._to_copy.default, aten.to.dtype_layout):
        return b.cast(b.env[args[0]], dt)
    if t == aten.pow.Tensor_Scalar:
        x = b.env[args[0]]
        if args[1] == 2:
            return b.ew("ew.mul", [x, x], shape, dt)
        return b.ew("ew.pow", [x, b.full(args[1], dt)], shape, dt)
    if t in (aten.mean.dim, aten.sum.dim_IntList, aten.amax.default, aten.amin.default, aten.mean.default, aten.sum.default):
        x = b.cast(b.env[args[0]], dt)
        allr = t in (aten.mean.default, aten.sum.default)
        dims = args[1] if not allr and len(args) > 1 and args[1] is not None else []
        dims = list(dims) or list(range(len(x[1])))
        keep = False if allr else _param(node, 2, "keepdim", False)
        if t == aten.amin.default:
            return b.ew("ew.neg", [b.reduce("max", b.ew("ew.neg", [x], x[1], dt), dims, keep)], shape, dt)
        if t in (aten.mean.dim, aten.mean.default):
            return _mean(b, x, dims, keep, dt)
        return b.reduce("max" if t == aten.amax.default else "sum", x, dims, keep)
    if t in (aten.rms_norm.default, aten.layer_norm.default):
        x = b.cast(b.env[args[0]], dt)
        nd = len(args[1])
        dims = list(range(len(x[1]) - nd, len(x[1])))
        w = args[2] if len(args) > 2 else None
        if t == aten.rms_norm.default:
            eps = args[3] if len(args) > 3 and args[3] is not None else _eps(dt)
            y = _normalize(b, x, dims, eps, dt, center=False)
            bias = None
        else:
            bias = args[3] if len(args) > 3 else None
            eps = args[4] if len(args) > 4 else 1e-5
            y = _normalize(b, x, dims, eps, dt)
        if w is not None:
            y = b.ew("ew.mul", [y, b.env[w]], shape, dt)
        if bias is not None:
            y = b.ew("ew.add", [y, b.env[bias]], shape, dt)
        return y
    if t == aten.silu.default:
        x = b.env[args[0]]
        s = b.ew("ew.sigmoid", [x], shape, dt)
        return b.ew("ew.mul", [x, s], shape, dt)
    if t == aten.gelu.default:
        x = b.env[args[0]]
        approx = node.kwargs.get("approximate", args[1] if len(args) > 1 else "none")
        if approx == "tanh":
            c = b.full(math.sqrt(2 / math.pi), dt)
            x3 = b.ew("ew.mul", [b.ew("ew.mul", [x, x], shape, dt), x], shape, dt)
            inner = b.ew("ew.mul", [c, b.ew("ew.add", [x, b.ew("ew.mul", [b.full(0.044715, dt), x3], shape, dt)], shape, dt)], shape, dt)
            th = b.ew("ew.tanh", [inner], shape, dt)
        else:
            th = b.ew("ew.erf", [b.ew("ew.mul", [x, b.full(1 / math.sqrt(2), dt)], shape, dt)], shape, dt)
        one = b.ew("ew.add", [th, b.full(1.0, dt)], shape, dt)
        return b.ew("ew.mul", [b.ew("ew.mul", [x, b.full(0.5, dt)], shape, dt), one], shape, dt)
    if t in (aten._softmax.default, aten.softmax.int):
        x = b.env[args[0]]
        d = args[1] % len(x[1])
        x = b.cast(x, dt)
        m = b.reduce("max", x, [d], True)
        e = b.ew("ew.exp", [b.ew("ew.sub", [x, m], shape, dt)], shape, dt)
        s = b.reduce("sum", e, [d], True)
        return b.ew("ew.div", [e, s], shape, dt)
    if t in (aten._log_softmax.default, aten.log_softmax.int):
        # log_softmax(x) = (x - max) - log(sum(exp(x - max))).
        x = b.env[args[0]]
        d = args[1] % len(x[1])
        x = b.cast(x, dt)
        m = b.reduce("max", x, [d], True)
        z = b.ew("ew.sub", [x, m], shape, dt)
        s = b.reduce("sum", b.ew("ew.exp", [z], shape, dt), [d], True)
        return b.ew("ew.sub", [z, b.ew("ew.log", [s], s[1], dt)], shape, dt)
    if t in (aten.slice.Tensor, aten.narrow.default, aten.select.int):
        x = b.env[args[0]]
        d = _int(node, _param(node, 1, "dim", 0), "dim") % len(x[1])
        n = x[1][d]
        if t == aten.slice.Tensor:
            lo, hi, step = _bounds(node, n, _param(node, 2, "start", None), _param(node, 3, "end", None), _param(node, 4, "step", 1))
        else:
            i = _int(node, _param(node, 2, "start" if t == aten.narrow.default else "index", 0), "index")
            length = _int(node, _param(node, 3, "length", 1), "length") if t == aten.narrow.default else 1
            if not -n <= i < n or not 1 <= length <= n - (i % n):
                raise ImportError_(f"`{t}` at {i} (length {length}) is out of range for a dim of {n} at {_where(node)}")
            lo, hi, step = i % n, i % n + length, 1
        y = b.slice(x, d, lo, hi, step)
        if t == aten.select.int:
            y = b.reshape(y, shape)
        if tuple(y[1]) != tuple(shape):
            raise ImportError_(f"`{t}` gave shape {y[1]}, PyTorch says {tuple(shape)} at {_where(node)}")
        return y
    if t in (aten.cat.default, aten.concat.default):
        d = _int(node, _param(node, 1, "dim", 0), "dim") % len(shape)
        # Legacy empty operands (shape (0,)) contribute nothing.
        xs = [b.env[a] for a in args[0] if math.prod(b.env[a][1]) > 0]
        return b.concat(xs, d, shape, dt)
    if t in (aten.split.Tensor, aten.split_with_sizes.default, aten.chunk.default, aten.unbind.int):
        x = b.env[args[0]]
        d = _int(node, _param(node, 1 if t == aten.unbind.int else 2, "dim", 0), "dim") % len(x[1])
        n = x[1][d]
        if t == aten.split.Tensor:
            k = _int(node, args[1], "split size")
            sizes = [min(k, n - i) for i in range(0, n, k)] if k > 0 else []
        elif t == aten.split_with_sizes.default:
            sizes = [_int(node, v, "split size") for v in args[1]]
        elif t == aten.chunk.default:
            c = _int(node, args[1], "chunk count")
            k = -(-n // c) if c > 0 else 0
            sizes = [min(k, n - i) for i in range(0, n, k)] if k > 0 else []
        else:
            sizes = [1] * n
        pieces = _pieces(b, node, x, d, sizes)
        if t == aten.unbind.int:
            pieces = [b.reshape(p, p[1][:d] + p[1][d + 1:]) for p in pieces]
        return pieces
    if t == operator.getitem:
        seq = b.env[args[0]]
        if not isinstance(seq, list):
            raise ImportError_(f"`getitem` of a single value at {_where(node)}")
        if seq[args[1]] is None:
            raise ImportError_(f"result {args[1]} of `{args[0].target}` is not supported at {_where(node)}")
        return seq[args[1]]
    if t in (aten.view.default, aten.reshape.default, aten._unsafe_view.default, aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.default):
        return b.reshape(b.env[args[0]], shape)
    if t in (aten.permute.default,):
        return b.transpose(b.env[args[0]], [p % len(shape) for p in args[1]])
    if t in (aten.transpose.int,):
        x = b.env[args[0]]
        r = len(x[1])
        perm = list(range(r))
        i, j = args[1] % r, args[2] % r
        perm[i], perm[j] = perm[j], perm[i]
        return b.transpose(x, perm)
    if t == aten.t.default:
        return b.transpose(b.env[args[0]], [1, 0])
    if t == aten.expand.default:
        x = b.env[args[0]]
        return b.op(f"tensor.broadcast {x[0]}", shape, x[2])
    if t in (aten.mm.default, aten.bmm.default, aten.matmul.default):
        return b.matmul(b.env[args[0]], b.env[args[1]], shape, dt)
    if t == aten.linear.default:
        x, w = b.env[args[0]], b.env[args[1]]
        wt = b.transpose(w, [1, 0])
        y = b.matmul(x, wt, shape, dt)
        if len(args) > 2 and args[2] is not None:
            y = b.ew("ew.add", [y, b.env[args[2]]], shape, dt)
        return y
    if t == aten.addmm.default:
        bias, x, w = b.env[args[0]], b.env[args[1]], b.env[args[2]]
        y = b.matmul(x, w, shape, dt)
        return b.ew("ew.add", [y, bias], shape, dt)
    if t == aten.scaled_dot_product_attention.default:
        q, k, v = (b.env[a] for a in args[:3])
        mask = args[3] if len(args) > 3 else node.kwargs.get("attn_mask")
        causal = args[5] if len(args) > 5 else node.kwargs.get("is_causal", False)
        scale = node.kwargs.get("scale") or (args[6] if len(args) > 6 else None)
        dropout = args[4] if len(args) > 4 else node.kwargs.get("dropout_p", 0.0)
        if dropout:
            raise ImportError_(f"scaled_dot_product_attention with dropout is not supported at {_where(node)}")
        r = len(q[1])
        sq, sk, d = q[1][-2], k[1][-2], q[1][-1]
        hq, hk = q[1][-3] if r >= 3 else 1, k[1][-3] if r >= 3 else 1
        if hq != hk:
            # Grouped heads: each key/value head serves hq/hk query heads.
            if r != 4 or hq % hk:
                raise ImportError_(f"grouped heads {hq}/{hk} are not supported at {_where(node)}")
            g = hq // hk
            bsz = k[1][0]

            def spread(x):
                x5 = b.reshape(x, (bsz, hk, 1, sk, d))
                xb = b.op(f"tensor.broadcast {x5[0]}", (bsz, hk, g, sk, d), x[2])
                return b.reshape(xb, (bsz, hq, sk, d))

            k, v = spread(k), spread(v)
        kt = b.transpose(k, list(range(r - 2)) + [r - 1, r - 2])
        sshape = q[1][:-1] + (sk,)
        s = b.matmul(q, kt, sshape, q[2])
        sf = b.cast(s, "f32")
        scale = scale if scale is not None else 1 / math.sqrt(d)
        z = b.ew("ew.mul", [sf, b.full(scale, "f32")], sshape, "f32")
        if mask is not None:
            mv = b.env[mask]
            if mv[2] == "i1":
                z = b.ew("ew.select", [mv, z, b.full(-math.inf, "f32")], sshape, "f32")
            else:
                z = b.ew("ew.add", [z, b.cast(mv, "f32")], sshape, "f32")
        if causal:
            row = b.op("tensor.iota<0>", (sq, 1), "i32")
            col = b.op("tensor.iota<1>", (1, sk), "i32")
            keep = b.op(f"ew.cmp<ge> {row[0]}, {col[0]}", (sq, sk), "i1")
            z = b.ew("ew.select", [keep, z, b.full(-math.inf, "f32")], sshape, "f32")
        m = b.reduce("max", z, [r - 1], True)
        e = b.ew("ew.exp", [b.ew("ew.sub", [z, m], sshape, "f32")], sshape, "f32")
        l = b.reduce("sum", e, [r - 1], True)
        p = b.cast(b.ew("ew.div", [e, l], sshape, "f32"), q[2])
        return b.matmul(p, v, shape, dt)
    out = _lower_more(b, node, t, args, shape, dt)
    if out is not None:
        return out
    raise ImportError_(f"unsupported op `{t}` at {_where(node)}")


def _promote(node, *vals):
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


def _scalar(node, v, what):
    """A Python number argument (a tensor or symbolic value is refused)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ImportError_(f"`{node.target}` needs a number for {what}, found {v!r} at {_where(node)}")
    return v


def _clamp(b, x, lo, hi, shape, dt):
    """`min(max(x, lo), hi)`; a bound of None is left out."""
    if lo is not None:
        x = b.ew("ew.max", [x, lo if isinstance(lo, tuple) else b.full(lo, dt)], shape, dt)
    if hi is not None:
        x = b.ew("ew.min", [x, hi if isinstance(hi, tuple) else b.full(hi, dt)], shape, dt)
    return x


def _cmp(b, pred, x, y, shape):
    return b.op(f"ew.cmp<{pred}> {x[0]}, {y[0]}", shape, "i1")


def _elu(b, x, alpha, scale, input_scale, shape, dt):
    """`scale * x` where x > 0, else `scale * alpha * (exp(input_scale * x) - 1)`."""
    pos = _cmp(b, "gt", x, b.full(0.0, dt), shape)
    xi = x if input_scale == 1 else b.ew("ew.mul", [x, b.full(input_scale, dt)], shape, dt)
    em1 = b.ew("ew.sub", [b.ew("ew.exp", [xi], shape, dt), b.full(1.0, dt)], shape, dt)
    neg = em1 if alpha * scale == 1 else b.ew("ew.mul", [em1, b.full(alpha * scale, dt)], shape, dt)
    posv = x if scale == 1 else b.ew("ew.mul", [x, b.full(scale, dt)], shape, dt)
    return b.ew("ew.select", [pos, posv, neg], shape, dt)


def _softplus(b, x, beta, threshold, shape, dt):
    """`log(1 + exp(beta x)) / beta`, as `max(z, 0) + log(1 + exp(-|z|))`
    (no overflow), and `x` itself where `beta x > threshold`."""
    z = x if beta == 1 else b.ew("ew.mul", [x, b.full(beta, dt)], shape, dt)
    e = b.ew("ew.exp", [b.ew("ew.neg", [b.ew("ew.abs", [z], shape, dt)], shape, dt)], shape, dt)
    sp = b.ew("ew.add", [b.ew("ew.max", [z, b.full(0.0, dt)], shape, dt), b.ew("ew.log", [b.ew("ew.add", [e, b.full(1.0, dt)], shape, dt)], shape, dt)], shape, dt)
    if beta != 1:
        sp = b.ew("ew.div", [sp, b.full(beta, dt)], shape, dt)
    big = _cmp(b, "gt", z, b.full(threshold, dt), shape)
    return b.ew("ew.select", [big, x, sp], shape, dt)


def _arg_index(b, node, x, d, keep, largest):
    """The first index of the largest (smallest) element of `x` along `d`
    (PyTorch's argmax/argmin), as i64: the maximum over `d` of `-i` where
    `x[i]` equals the extreme value, negated. Indices are held in f32, so
    the dim must have at most 2**24 elements."""
    n = x[1][d]
    if n > 1 << 24:
        raise ImportError_(f"`{node.target}` over a dim of {n} elements (more than 2**24) is not supported at {_where(node)}")
    xs = x if largest else b.ew("ew.neg", [x], x[1], x[2])
    m = b.reduce("max", xs, [d], True)
    hit = _cmp(b, "eq", xs, m, x[1])
    ishape = tuple(n if k == d else 1 for k in range(len(x[1])))
    i = b.op(f"tensor.iota<{d}>", ishape, "f32")
    cand = b.ew("ew.select", [hit, b.ew("ew.neg", [i], ishape, "f32"), b.full(-math.inf, "f32")], x[1], "f32")
    r = b.ew("ew.neg", [b.reduce("max", cand, [d], keep)], None, "f32")
    return b.cast(r, "i64")


def _einsum(b, node, eq, ops, dt):
    """`einsum` of one operand (a permutation, sums over dropped letters) or
    two (a batched matmul: letters in both operands and the output are
    batch dims, in both but not the output contracted, in one operand and
    the output the rows or columns; a letter only in one operand and not
    the output is summed out first)."""
    where = _where(node)
    eq = eq.replace(" ", "")
    if "->" not in eq:
        # Implicit output: the letters that occur once, in alphabetical order.
        lhs = eq
        letters = lhs.replace(",", "").replace("...", "")
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
        out = ("..." if "..." in lhs else "") + out
    else:
        lhs, out = eq.split("->")
    ins = lhs.split(",")
    if len(ins) != len(ops) or len(ops) not in (1, 2):
        raise ImportError_(f"`einsum` `{eq}` of {len(ops)} operands is not supported (one or two operands) at {where}")
    # Expand the ellipsis into fresh capital letters, aligned from the right.
    nell = max((len(o[1]) - len(s.replace("...", "")) for s, o in zip(ins, ops) if "..." in s), default=0)
    caps = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    ins = [s.replace("...", caps[nell - (len(o[1]) - len(s.replace("...", ""))):nell]) if "..." in s else s for s, o in zip(ins, ops)]
    out = out.replace("...", caps[:nell])
    size = {}
    for s, o in zip(ins, ops):
        if len(s) != len(o[1]):
            raise ImportError_(f"`einsum` `{eq}`: subscripts `{s}` for an operand of rank {len(o[1])} at {where}")
        if len(set(s)) != len(s):
            raise ImportError_(f"`einsum` `{eq}` with a repeated subscript (a diagonal) is not supported at {where}")
        for c, n in zip(s, o[1]):
            size[c] = max(size.get(c, 1), n)
    if len(set(out)) != len(out) or any(c not in size for c in out):
        raise ImportError_(f"`einsum` `{eq}`: bad output subscripts at {where}")
    xs = []
    for s, o in zip(ins, ops):
        o = b.cast(o, dt)
        other = "".join(ins) if len(ins) == 1 else ins[1] if s == ins[0] else ins[0]
        drop = [k for k, c in enumerate(s) if c not in out and (len(ins) == 1 or c not in other)]
        if drop:
            o = b.reduce("sum", o, drop, False)
            s = "".join(c for k, c in enumerate(s) if k not in drop)
        xs.append((s, o))
    if len(xs) == 1:
        s, o = xs[0]
        return b.transpose(o, [s.index(c) for c in out])
    (sa, a), (sb, bb) = xs
    batch = [c for c in out if c in sa and c in sb]
    ms = [c for c in out if c in sa and c not in sb]
    ns = [c for c in out if c in sb and c not in sa]
    ks = [c for c in sa if c in sb and c not in out]
    ea, eb = ms[:-1], ns[:-1]
    if len(ks) == 1 and ms and ns and not (ea and eb) and not (batch and (ea or eb)):
        # No reshape: one row, column and contracted letter each; the other
        # letters of one operand are its own batch dims, which the matmul
        # broadcasts over the other operand (`bij,jk->bik`).
        a = b.transpose(a, [sa.index(c) for c in batch + ea + ms[-1:] + ks])
        bb = b.transpose(bb, [sb.index(c) for c in batch + eb + ks + ns[-1:]])
        order = batch + ea + eb + ms[-1:] + ns[-1:]
        y = b.matmul(a, bb, tuple(size[c] for c in order), dt)
        return b.transpose(y, [order.index(c) for c in out])
    a = b.transpose(a, [sa.index(c) for c in batch + ms + ks])
    bb = b.transpose(bb, [sb.index(c) for c in batch + ks + ns])
    bsh = lambda v, cs: tuple(v[1][k] for k in range(len(cs)))  # noqa: E731
    m, n, k = math.prod(size[c] for c in ms), math.prod(size[c] for c in ns), math.prod(size[c] for c in ks)
    a = b.reshape(a, bsh(a, batch) + (m, k))
    bb = b.reshape(bb, bsh(bb, batch) + (k, n))
    oshape = tuple(size[c] for c in batch) + (m, n)
    y = b.matmul(a, bb, oshape, dt)
    y = b.reshape(y, tuple(size[c] for c in batch + ms + ns))
    order = batch + ms + ns
    return b.transpose(y, [order.index(c) for c in out])


_CMP = {"lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "eq": "eq", "ne": "ne"}


def _lower_more(b, node, t, args, shape, dt):
    """The everyday ops of issue 29, each as a composite of existing IR ops;
    None where `t` is not one of them."""
    aten = torch.ops.aten
    where = _where(node)
    name = getattr(t, "__name__", str(t)).split(".")[0]
    x0 = b.env.get(args[0]) if args and isinstance(args[0], torch.fx.Node) else None
    # In-place forms of functional ops (on a fresh copy, as export writes them).
    inplace = {
        aten.relu_.default: aten.relu.default,
        aten.hardtanh_.default: aten.hardtanh.default,
        aten.leaky_relu_.default: aten.leaky_relu.default,
        aten.clamp_.default: aten.clamp.default,
        aten.masked_fill_.Scalar: aten.masked_fill.Scalar,
        aten.detach_.default: aten.detach.default,
    }
    if t in inplace:
        # The result is also the new value of the mutated operand.
        out = _lower_more(b, node, inplace[t], args, shape, dt)
        if isinstance(args[0], torch.fx.Node):
            b.env[args[0]] = out
        return out
    if t in (aten.clone.default, aten.detach.default, aten.lift_fresh_copy.default, aten.alias.default, aten.contiguous.default):
        return x0
    if t in (aten.dropout.default, aten.feature_dropout.default, aten.alpha_dropout.default, aten.feature_alpha_dropout.default):
        p = _param(node, 1, "p", 0.5)
        train = _param(node, 2, "train", False)
        if train and p:
            raise ImportError_(f"`{name}` in training mode (p={p}) is not supported (call model.eval()) at {where}")
        return x0
    if t == aten.numpy_T.default:
        return b.transpose(x0, list(range(len(x0[1])))[::-1])
    if t in (aten.einsum.default,):
        return _einsum(b, node, args[0], [b.env[a] for a in args[1]], dt)
    if t in (aten.arange.default, aten.arange.start, aten.arange.start_step):
        if t == aten.arange.default:
            start, end, step = 0, args[0], 1
        else:
            start, end, step = args[0], args[1], _param(node, 2, "step", 1)
        for v, w in ((start, "start"), (end, "end"), (step, "step")):
            _scalar(node, v, w)
        n = shape[0] if shape else 0
        if n < 1:
            raise ImportError_(f"`arange({start}, {end}, {step})` gives an empty tensor (efir has none) at {where}")
        if dt == "i1":
            raise ImportError_(f"`arange` of booleans is not supported at {where}")
        idt = "f32" if dt in ("f16", "bf16") else dt
        if idt in ("i32", "i64") and n > 1 << 31:
            raise ImportError_(f"`arange` of {n} elements is not supported at {where}")
        i = b.op("tensor.iota<0>", (n,), idt)
        if step != 1:
            i = b.ew("ew.mul", [i, b.full(step, idt)], (n,), idt)
        if start != 0:
            i = b.ew("ew.add", [i, b.full(start, idt)], (n,), idt)
        return b.cast(i, dt)
    if t in (aten.repeat_interleave.self_int,):
        x = x0
        r = _int(node, _param(node, 1, "repeats", 1), "repeat count")
        d = _param(node, 2, "dim", None)
        if r < 1:
            raise ImportError_(f"`repeat_interleave` by {r} gives an empty tensor (efir has none) at {where}")
        if d is None:
            x, d = b.reshape(x, (math.prod(x[1]),)), 0
        d = _int(node, d, "dim") % len(x[1])
        s = x[1]
        x5 = b.reshape(x, s[:d + 1] + (1,) + s[d + 1:])
        xb = b.op(f"tensor.broadcast {x5[0]}", s[:d + 1] + (r,) + s[d + 1:], x[2])
        return b.reshape(xb, s[:d] + (s[d] * r,) + s[d + 1:])
    if t in (aten.repeat_interleave.Tensor, aten.repeat_interleave.self_Tensor):
        raise ImportError_(f"`repeat_interleave` by a tensor of counts (a data-dependent shape) is not supported; repeat by an int at {where}")
    if t in (aten.cumsum.default, aten.cumprod.default, aten.cummax.default, aten.cummin.default, aten.logcumsumexp.default):
        raise ImportError_(f"`{name}` (a scan along a dim) is not supported: efir's IR has no scan op at {where}")
    if t in (aten.clamp.default, aten.clamp.Tensor, aten.clamp_min.default, aten.clamp_max.default, aten.clamp_min.Tensor, aten.clamp_max.Tensor, aten.hardtanh.default):
        x = b.cast(x0, dt)
        if t in (aten.clamp_min.default, aten.clamp_min.Tensor):
            lo, hi = args[1], None
        elif t in (aten.clamp_max.default, aten.clamp_max.Tensor):
            lo, hi = None, args[1]
        elif t == aten.hardtanh.default:
            lo, hi = _param(node, 1, "min_val", -1.0), _param(node, 2, "max_val", 1.0)
        else:
            lo, hi = _param(node, 1, "min", None), _param(node, 2, "max", None)
        if lo is None and hi is None:
            raise ImportError_(f"`{name}` without a bound at {where}")
        lo = b.cast(b.env[lo], dt) if isinstance(lo, torch.fx.Node) else lo
        hi = b.cast(b.env[hi], dt) if isinstance(hi, torch.fx.Node) else hi
        for v in (lo, hi):
            if v is not None and not isinstance(v, tuple):
                _scalar(node, v, "a bound")
        return _clamp(b, x, lo, hi, shape, dt)
    if t == aten.relu.default:
        return b.ew("ew.max", [x0, b.full(0, x0[2])], shape, dt)
    if t == aten.leaky_relu.default:
        slope = _scalar(node, _param(node, 1, "negative_slope", 0.01), "the slope")
        pos = _cmp(b, "gt", x0, b.full(0.0, dt), shape)
        return b.ew("ew.select", [pos, x0, b.ew("ew.mul", [x0, b.full(slope, dt)], shape, dt)], shape, dt)
    if t == aten.elu.default:
        alpha = _scalar(node, _param(node, 1, "alpha", 1.0), "alpha")
        scale = _scalar(node, _param(node, 2, "scale", 1.0), "scale")
        iscale = _scalar(node, _param(node, 3, "input_scale", 1.0), "input_scale")
        return _elu(b, x0, alpha, scale, iscale, shape, dt)
    if t == aten.selu.default:
        return _elu(b, x0, 1.6732632423543772848170429916717, 1.0507009873554804934193349852946, 1.0, shape, dt)
    if t == aten.celu.default:
        alpha = _scalar(node, _param(node, 1, "alpha", 1.0), "alpha")
        if alpha == 0:
            raise ImportError_(f"`celu` with alpha 0 at {where}")
        return _elu(b, x0, alpha, 1.0, 1.0 / alpha, shape, dt)
    if t == aten.softplus.default:
        beta = _scalar(node, _param(node, 1, "beta", 1.0), "beta")
        thr = _scalar(node, _param(node, 2, "threshold", 20.0), "threshold")
        if beta == 0:
            raise ImportError_(f"`softplus` with beta 0 at {where}")
        return _softplus(b, x0, beta, thr, shape, dt)
    if t == aten.mish.default:
        sp = _softplus(b, x0, 1.0, 20.0, shape, dt)
        return b.ew("ew.mul", [x0, b.ew("ew.tanh", [sp], shape, dt)], shape, dt)
    if t in (aten.hardsigmoid.default, aten.hardswish.default):
        r6 = _clamp(b, b.ew("ew.add", [x0, b.full(3.0, dt)], shape, dt), 0.0, 6.0, shape, dt)
        hs = b.ew("ew.div", [r6, b.full(6.0, dt)], shape, dt)
        return hs if t == aten.hardsigmoid.default else b.ew("ew.mul", [x0, hs], shape, dt)
    if t == aten.logsumexp.default:
        x = b.cast(x0, dt)
        dims = list(args[1]) if len(args) > 1 and args[1] is not None else []
        dims = [d % len(x[1]) for d in dims] or list(range(len(x[1])))
        keep = _param(node, 2, "keepdim", False)
        m = b.reduce("max", x, dims, True)
        # An infinite maximum (all -inf, or some +inf) is shifted by 0, as PyTorch does.
        inf = _cmp(b, "eq", b.ew("ew.abs", [m], m[1], dt), b.full(math.inf, dt), m[1])
        m = b.ew("ew.select", [inf, b.full(0.0, dt), m], m[1], dt)
        s = b.reduce("sum", b.ew("ew.exp", [b.ew("ew.sub", [x, m], x[1], dt)], x[1], dt), dims, True)
        y = b.ew("ew.add", [b.ew("ew.log", [s], s[1], dt), m], s[1], dt)
        return b.reshape(y, shape)
    if t in (aten.max.dim, aten.min.dim):
        x = x0
        d = _int(node, args[1], "dim") % max(len(x[1]), 1)
        keep = _param(node, 2, "keepdim", False)
        vshape = tuple(node.meta["val"][0].shape)
        xs = x if t == aten.max.dim else b.ew("ew.neg", [x], x[1], x[2])
        v = b.reduce("max", xs, [d], keep)
        if t == aten.min.dim:
            v = b.ew("ew.neg", [v], vshape, x[2])
        out = [v, None]
        # The indices only where they are read.
        if any(u.target == operator.getitem and u.args[1] == 1 for u in node.users):
            out[1] = _arg_index(b, node, x, d, keep, t == aten.max.dim)
        return out
    if t in (aten.max.default, aten.min.default):
        x = x0
        xs = x if t == aten.max.default else b.ew("ew.neg", [x], x[1], x[2])
        v = b.reduce("max", xs, list(range(len(x[1]))), False)
        return v if t == aten.max.default else b.ew("ew.neg", [v], (), x[2])
    if t in (aten.argmax.default, aten.argmin.default):
        x = x0
        d = _param(node, 1, "dim", None)
        keep = _param(node, 2, "keepdim", False)
        if d is None:
            r = _arg_index(b, node, b.reshape(x, (math.prod(x[1]),)), 0, False, t == aten.argmax.default)
            return b.reshape(r, shape)
        d = _int(node, d, "dim") % max(len(x[1]), 1)
        return _arg_index(b, node, x, d, keep, t == aten.argmax.default)
    if t in (aten.max.other, aten.min.other, aten.fmax.default, aten.fmin.default):
        op = "ew.max" if t in (aten.max.other, aten.fmax.default) else "ew.min"
        return b.ew(op, [b.env[args[0]], b.env[args[1]]], shape, dt)
    cmpname = name.split("_")[0] if name in ("lt", "le", "gt", "ge", "eq", "ne") else None
    if cmpname and t.__name__.split(".")[-1] in ("Scalar", "Tensor"):
        cdt = _promote(node, args[0], args[1])
        x = b.cast(b.env[args[0]], cdt)
        y = b.cast(b.env[args[1]], cdt) if isinstance(args[1], torch.fx.Node) else b.full(_scalar(node, args[1], "the operand"), cdt)
        return _cmp(b, _CMP[cmpname], x, y, shape)
    if t in (aten.logical_not.default, aten.bitwise_not.default) and x0[2] == "i1":
        return _cmp(b, "eq", x0, b.full(0, "i1"), shape)
    if t in (aten.logical_not.default,):
        return _cmp(b, "eq", x0, b.full(0, x0[2]), shape)
    bitwise = (aten.bitwise_and.Tensor, aten.bitwise_or.Tensor, aten.__and__.Tensor, aten.__or__.Tensor, aten.bitwise_and.Scalar, aten.bitwise_or.Scalar, aten.__and__.Scalar, aten.__or__.Scalar)
    if t in (aten.logical_and.default, aten.logical_or.default) + bitwise:
        xs = [_arg(b, a, "i1") for a in args[:2]]
        if t in bitwise and any(v[2] != "i1" for v in xs):
            raise ImportError_(f"`{name}` of integers is not supported (booleans only) at {where}")
        xs = [v if v[2] == "i1" else _cmp(b, "ne", v, b.full(0, v[2]), v[1]) for v in xs]
        # `a and b` is `a ? b : false`; `a or b` is `a ? true : b`.
        if "and" in name:
            return b.ew("ew.select", [xs[0], xs[1], b.full(0, "i1")], shape, "i1")
        return b.ew("ew.select", [xs[0], b.full(1, "i1"), xs[1]], shape, "i1")
    if t in (aten.where.self, aten.where.ScalarOther, aten.where.ScalarSelf, aten.where.Scalar):
        c = b.env[args[0]]
        if c[2] != "i1":
            c = _cmp(b, "ne", c, b.full(0, c[2]), c[1])
        a, bb = (b.cast(_arg(b, v, dt), dt) for v in args[1:3])
        return b.ew("ew.select", [c, a, bb], shape, dt)
    if t in (aten.masked_fill.Scalar, aten.masked_fill.Tensor):
        x, m = b.cast(x0, dt), b.env[args[1]]
        v = args[2]
        if isinstance(v, torch.fx.Node):
            if b.env[v][1] != ():
                raise ImportError_(f"`masked_fill` with a value of shape {b.env[v][1]} (a 0-dim tensor is needed) at {where}")
            v = b.cast(b.env[v], dt)
        else:
            v = b.full(_scalar(node, v, "the fill value"), dt)
        if m[2] != "i1":
            raise ImportError_(f"`masked_fill` with a mask of type {m[2]} (a bool mask is needed) at {where}")
        return b.ew("ew.select", [m, v, x], shape, dt)
    if t in (aten.triu.default, aten.tril.default):
        x = x0
        if len(x[1]) < 2:
            raise ImportError_(f"`{name}` of a tensor of rank {len(x[1])} (at least 2 needed) at {where}")
        k = _int(node, _param(node, 1, "diagonal", 0), "diagonal")
        rows, cols = x[1][-2], x[1][-1]
        row = b.op("tensor.iota<0>", (rows, 1), "i64")
        col = b.op("tensor.iota<1>", (1, cols), "i64")
        if k:
            row = b.ew("ew.add", [row, b.full(k, "i64")], (rows, 1), "i64")
        keep = _cmp(b, "ge" if t == aten.triu.default else "le", col, row, (rows, cols))
        return b.ew("ew.select", [keep, x, b.full(0, x[2])], shape, x[2])
    if t in (aten.batch_norm.default, aten._native_batch_norm_legit_no_training.default, aten.instance_norm.default):
        x = b.cast(x0, dt)
        if t == aten._native_batch_norm_legit_no_training.default:
            w, bias, rm, rv = args[1:5]
            eps, train = args[6] if len(args) > 6 else 1e-5, False
        else:
            w, bias, rm, rv, train = args[1:6]
            eps = args[7] if len(args) > 7 else 1e-5
        if len(x[1]) < 2:
            raise ImportError_(f"`{name}` of a tensor of rank {len(x[1])} (at least 2 needed) at {where}")
        c = x[1][1]
        pshape = (c,) + (1,) * (len(x[1]) - 2)

        def chan(v):
            return b.reshape(b.cast(b.env[v], dt), pshape)

        if t == aten.instance_norm.default and train:
            # `use_input_stats`: statistics of each sample and channel.
            y = _normalize(b, x, list(range(2, len(x[1]))), eps, dt)
        elif train or rm is None or rv is None:
            raise ImportError_(f"`{name}` in training mode (batch statistics) is not supported (call model.eval()) at {where}")
        else:
            inv = b.ew("ew.rsqrt", [b.ew("ew.add", [chan(rv), b.full(eps, dt)], pshape, dt)], pshape, dt)
            y = b.ew("ew.mul", [b.ew("ew.sub", [x, chan(rm)], shape, dt), inv], shape, dt)
        if w is not None:
            y = b.ew("ew.mul", [y, chan(w)], shape, dt)
        if bias is not None:
            y = b.ew("ew.add", [y, chan(bias)], shape, dt)
        out = b.reshape(y, shape)
        return [out, None, None] if t == aten._native_batch_norm_legit_no_training.default else out
    if t in (aten.group_norm.default,):
        x = b.cast(x0, dt)
        g = _int(node, args[1], "group count")
        w, bias = _param(node, 2, "weight", None), _param(node, 3, "bias", None)
        eps = _param(node, 4, "eps", 1e-5)
        n, c = x[1][0], x[1][1]
        if g < 1 or c % g:
            raise ImportError_(f"`group_norm` of {c} channels into {g} groups at {where}")
        rest = math.prod(x[1][2:])
        xg = b.reshape(x, (n, g, (c // g) * rest))
        y = b.reshape(_normalize(b, xg, [2], eps, dt), x[1])
        pshape = (c,) + (1,) * (len(x[1]) - 2)
        if w is not None:
            y = b.ew("ew.mul", [y, b.reshape(b.cast(b.env[w], dt), pshape)], shape, dt)
        if bias is not None:
            y = b.ew("ew.add", [y, b.reshape(b.cast(b.env[bias], dt), pshape)], shape, dt)
        return y
    if t in (aten.full.default, aten.zeros.default, aten.ones.default, aten.full_like.default, aten.zeros_like.default, aten.ones_like.default, aten.scalar_tensor.default):
        v = 0 if name.startswith("zeros") else 1 if name.startswith("ones") else args[0] if t == aten.scalar_tensor.default else args[1]
        _scalar(node, v, "the fill value")
        if 0 in shape:
            raise ImportError_(f"`{name}` gives an empty tensor (efir has none) at {where}")
        return b.full(v, dt, shape)
    return None
