"""Import PyTorch programs into efir's tensor-level IR (`.efir` text).

`import_program(ep)` walks a `torch.export.ExportedProgram` and writes one
`func` whose parameters are the program's parameters and buffers (with their
real names, e.g. `%l.weight`) followed by its user inputs. Composite ops are
expanded into matmuls, reductions and pointwise ops so that saturation can
optimize inside them (RMSNorm, softmax, log_softmax, SiLU, GELU, linear,
SDPA, ...); slices, splits and concatenations become `tensor.slice` and
`tensor.concat` with PyTorch's bounds resolved (negative indices, clamped
ends).

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

    def full(self, value, dtype):
        v = float(value)
        lit = "inf" if v == math.inf else "-inf" if v == -math.inf else repr(v)
        if dtype in ("i32", "i64", "i1"):
            lit = str(int(value))
        return self.op(f"tensor.full<{lit}>", (), dtype, "c")

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
        if not isinstance(v, torch.Tensor):
            raise ImportError_(f"input `{node.name}` is not a tensor")
        for d in v.shape:
            if not isinstance(d, int):
                raise ImportError_(f"input `{node.name}` has a dynamic shape {tuple(v.shape)}; efir needs static shapes")
        pname = "%" + str(names.get(node.name, node.name))
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


def _lower(b, node):
    aten = torch.ops.aten
    t = node.target
    args = node.args
    if t in (aten._assert_tensor_metadata.default,):
        return None
    shape, dt = _val(node) if hasattr(node.meta.get("val"), "shape") else ((), "f32")
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
    if t in (aten.mean.dim, aten.sum.dim_IntList, aten.amax.default):
        x = b.cast(b.env[args[0]], dt)
        dims = args[1] if len(args) > 1 and args[1] is not None else list(range(len(x[1])))
        keep = args[2] if len(args) > 2 else node.kwargs.get("keepdim", False)
        red = "max" if t == aten.amax.default else "sum"
        r = b.reduce(red, x, dims, keep)
        if t == aten.mean.dim:
            n = math.prod(x[1][d % len(x[1])] for d in dims)
            r = b.ew("ew.div", [r, b.full(float(n), dt)], r[1], dt)
        return r
    if t in (aten.rms_norm.default, aten.layer_norm.default):
        x = b.cast(b.env[args[0]], dt)
        nd = len(args[1])
        dims = list(range(len(x[1]) - nd, len(x[1])))
        n = float(math.prod(x[1][d] for d in dims))
        if t == aten.rms_norm.default:
            w = args[2] if len(args) > 2 else None
            eps = args[3] if len(args) > 3 and args[3] is not None else torch.finfo(torch.float32 if dt == "f32" else torch.float16).eps
            ms = b.ew("ew.div", [b.reduce("sum", b.ew("ew.mul", [x, x], shape, dt), dims, True), b.full(n, dt)], None, dt)
            y = b.ew("ew.mul", [x, b.ew("ew.rsqrt", [b.ew("ew.add", [ms, b.full(eps, dt)], ms[1], dt)], ms[1], dt)], shape, dt)
            bias = None
        else:
            w = args[2] if len(args) > 2 else None
            bias = args[3] if len(args) > 3 else None
            eps = args[4] if len(args) > 4 else 1e-5
            mu = b.ew("ew.div", [b.reduce("sum", x, dims, True), b.full(n, dt)], None, dt)
            xc = b.ew("ew.sub", [x, mu], shape, dt)
            var = b.ew("ew.div", [b.reduce("sum", b.ew("ew.mul", [xc, xc], shape, dt), dims, True), b.full(n, dt)], None, dt)
            y = b.ew("ew.mul", [xc, b.ew("ew.rsqrt", [b.ew("ew.add", [var, b.full(eps, dt)], var[1], dt)], var[1], dt)], shape, dt)
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
    raise ImportError_(f"unsupported op `{t}` at {_where(node)}")
