"""A numpy interpreter for the TTIR that `efir-translate --to-ttir` writes.

Enough of the Triton dialect (and arith, math, scf) to run those kernels on
the CPU, one program at a time, so that a TTIR build's numerics can be
checked without a GPU (test_ttir.py compares it with efir's interpreter).
Blocks are numpy arrays; a block of pointers is (buffer index, offsets).
Arithmetic runs in the blocks' own types (f16 adds round to f16, as on the
GPU); tt.dot multiplies in f32 and accumulates in f32.

It reads the printed form of exactly the ops the builder emits: Triton ops
in generic form, arith/math/scf in their custom forms. Anything else is an
error, not a guess.
"""

import re

import numpy as np

NP = {"f16": np.float16, "bf16": np.float32, "f32": np.float32, "f64": np.float64,
      "i1": np.bool_, "i32": np.int32, "i64": np.int64}

SSA = re.compile(r"%[\w$.-]+(?:#\d+)?")


class Ptr:
    def __init__(self, buf, off):
        self.buf, self.off = buf, off


def elt(ty):
    """The element type name of `tensor<...xT>`, `!tt.ptr<T>` or `T`."""
    ty = ty.strip()
    m = re.match(r"tensor<(?:[0-9]+x)*(.+)>$", ty)
    if m:
        ty = m.group(1)
    m = re.match(r"!tt\.ptr<(.+)>$", ty)
    return ("ptr", m.group(1)) if m else ty


def shape(ty):
    m = re.match(r"tensor<((?:[0-9]+x)*)", ty.strip())
    return tuple(int(x) for x in m.group(1).split("x") if x) if m else ()


def const(text):
    """`dense<V> : T` or `V : T` as a numpy value."""
    m = re.match(r"(?:dense<(.+)>|(.+?)) : (.+)$", text.strip())
    lit, ty = m.group(1) or m.group(2), m.group(3)
    e = elt(ty)
    if lit in ("true", "false"):
        v = lit == "true"
    elif lit.startswith("0x"):
        bits = int(lit, 16)
        u, f = {"f16": (np.uint16, np.float16), "f32": (np.uint32, np.float32), "f64": (np.uint64, np.float64)}[e]
        v = np.array(bits, u).view(f).item()
    else:
        v = float(lit) if e.startswith(("f", "bf")) else int(lit)
    return np.full(shape(ty), v, dtype=NP[e]) if shape(ty) else NP[e](v)


def split_modules(text):
    return [m for m in re.split(r"(?m)^// =====.*$", text) if m.strip()]


class Kernel:
    """A module's functions; `run` runs its public one (a launch group's
    module has private members that the public one calls)."""

    def __init__(self, text):
        lines = [line.strip() for line in text.splitlines()]
        self.funcs = {}
        entry = None
        for i, line in enumerate(lines):
            if line.startswith("^bb0(") and lines[i - 1].startswith('"tt.func"'):
                body, j = self.block(lines, i + 1)
                name = re.search(r'sym_name = "([^"]+)"', lines[j]).group(1)
                self.funcs[name] = (SSA.findall(line), body)
                if entry is None or 'sym_visibility = "public"' in lines[j]:
                    entry = name
        self.args, self.body = self.funcs[entry]

    def block(self, lines, i):
        """Ops until the closing brace of the enclosing region."""
        ops = []
        while i < len(lines):
            line = lines[i]
            if line.startswith("}"):
                return ops, i
            if " = scf.for " in line:
                body, j = self.block(lines, i + 1)
                ops.append(("for", line, body))
                i = j + 1
                continue
            if line.startswith("scf.if "):
                then, j = self.block(lines, i + 1)
                other = []
                if lines[j].startswith("} else {"):
                    other, j = self.block(lines, j + 1)
                ops.append(("if", line, (then, other)))
                i = j + 1
                continue
            if '"tt.reduce"(' in line:
                j = i + 1
                while not lines[j].startswith("})"):
                    j += 1
                comb = next(line2 for line2 in lines[i + 1:j] if line2.startswith("%"))
                ops.append(("reduce", line + " " + lines[j], comb.split("=")[1].split()[0]))
                i = j + 1
                continue
            if line and not line.startswith(("^", "//")):
                ops.append(("op", line, None))
            i += 1
        return ops, i

    def run(self, bufs, args, pid):
        env = {a: Ptr(b, np.int64(0)) for a, b in zip(self.args, args)}
        self.exec(self.body, env, bufs, pid)

    def exec(self, ops, env, bufs, pid):
        for kind, line, extra in ops:
            if kind == "for":
                m = re.match(r"(%\S+) = scf.for (%\S+) = (%\S+) to (%\S+) step (%\S+) iter_args\((.*)\) -> ", line)
                res, iv, lo, hi, st = m.group(1, 2, 3, 4, 5)
                carried = [x.split(" = ") for x in m.group(6).split(", ")]
                vals = [env[v] for _, v in carried]
                for k in range(int(env[lo]), int(env[hi]), int(env[st])):
                    env[iv] = np.int32(k)
                    for (name, _), v in zip(carried, vals):
                        env[name] = v
                    vals = self.exec(extra, env, bufs, pid)
                # `%r` for one result; `%r:n`, used as `%r#i`, for several.
                name, _, n = res.partition(":")
                if n:
                    for j, v in enumerate(vals):
                        env[f"{name}#{j}"] = v
                else:
                    env[name] = vals[0]
                continue
            if kind == "if":
                self.exec(extra[0] if env[SSA.findall(line)[0]] else extra[1], env, bufs, pid)
                continue
            if kind == "reduce":
                m = re.match(r'(%\S+) = "tt.reduce"\((%\S+)\).*axis = (\d+) : i32', line)
                f = {"arith.addf": np.sum, "arith.maxnumf": np.max, "arith.minnumf": np.min,
                     "arith.addi": np.sum, "arith.maxsi": np.max, "arith.minsi": np.min}[extra]
                x = env[m.group(2)]
                env[m.group(1)] = f(x, axis=int(m.group(3))).astype(x.dtype)
                continue
            out = self.op(line, env, bufs, pid)
            if out is not None and out[0] == "yield":
                return out[1]
        return None

    def op(self, line, env, bufs, pid):
        res, _, rhs = line.partition(" = ") if line.startswith("%") else (None, None, line)
        g = re.match(r'"([\w.]+)"\((.*?)\)\s*(\{.*?\})?\s*:\s*\((.*?)\)\s*->\s*(.+)$', rhs)
        if g:
            name, ops, attrs, _, rty = g.groups()
            a = [env[x] for x in SSA.findall(ops)]
            attrs = attrs or ""
            ax = re.search(r"axis = (\d+)", attrs)
            if name == "tt.get_program_id":
                v = np.int32(pid)
            elif name == "tt.make_range":
                s, e = (int(x) for x in re.search(r"end = (\d+) : i32, start = (\d+)", attrs).group(2, 1))
                v = np.arange(s, e, dtype=np.int32)
            elif name == "tt.splat":
                x = a[0]
                v = Ptr(x.buf, np.full(shape(rty), x.off, np.int64)) if isinstance(x, Ptr) else np.full(shape(rty), x, dtype=np.asarray(x).dtype)
            elif name == "tt.broadcast":
                x = a[0]
                v = Ptr(x.buf, np.broadcast_to(x.off, shape(rty)).copy()) if isinstance(x, Ptr) else np.broadcast_to(x, shape(rty)).copy()
            elif name == "tt.expand_dims":
                x = a[0]
                v = Ptr(x.buf, np.expand_dims(x.off, int(ax.group(1)))) if isinstance(x, Ptr) else np.expand_dims(x, int(ax.group(1)))
            elif name == "tt.reshape":
                v = a[0].reshape(shape(rty))
            elif name == "tt.trans":
                order = [int(x) for x in re.search(r"order = array<i32: ([\d, ]+)>", attrs).group(1).split(",")]
                v = np.transpose(a[0], order).copy()
            elif name == "tt.addptr":
                v = Ptr(a[0].buf, a[0].off + a[1].astype(np.int64))
            elif name == "tt.load":
                p = a[0]
                buf = bufs[p.buf]
                if len(a) == 1:
                    v = buf[p.off].copy() if np.ndim(p.off) else buf[int(p.off)]
                else:
                    m, other = a[1], a[2]
                    v = np.where(m, buf[np.where(m, p.off, 0)], other).astype(buf.dtype)
            elif name == "tt.store":
                p, x = a[0], a[1]
                buf = bufs[p.buf]
                if len(a) == 2:
                    buf[p.off] = x
                else:
                    buf[p.off[a[2]]] = x[a[2]]
                v = None
            elif name == "tt.dot":
                v = (a[0].astype(np.float32) @ a[1].astype(np.float32) + a[2]).astype(np.float32)
            elif name == "tt.elementwise_inline_asm" and "griddepcontrol." in attrs:
                # programmatic dependent launch: programs here run one after
                # another, launches in order
                v = np.int32(0)
            elif name == "tt.return":
                v = None
            elif name == "tt.call":
                params, body = self.funcs[re.search(r"callee = @([\w$.-]+)", attrs).group(1)]
                self.exec(body, dict(zip(params, a)), bufs, pid)
                v = None
            else:
                raise NotImplementedError(name)
            if res:
                env[res] = v
            return None
        m = re.match(r"([\w.]+)\s*(.*)$", rhs)
        name, rest = m.groups()
        if name == "scf.yield":
            return ("yield", [env[x] for x in SSA.findall(rest.split(":")[0])])
        if name == "arith.constant":
            env[res] = const(rest)
            return None
        pred = None
        if name in ("arith.cmpi", "arith.cmpf"):
            pred, _, rest = rest.partition(", ")
        body, _, tys = rest.rpartition(" : ")
        a = [env[x] for x in SSA.findall(body)]
        to = NP.get(elt(tys.split(" to ")[-1]), None) if " to " in tys else None
        x = a[0]
        f = {
            "arith.addi": lambda: x + a[1], "arith.subi": lambda: x - a[1], "arith.muli": lambda: x * a[1],
            "arith.remsi": lambda: np.fmod(x, a[1]), "arith.divsi": lambda: (np.trunc(np.true_divide(x, a[1]))).astype(np.asarray(x).dtype),
            "arith.andi": lambda: x & a[1], "arith.addf": lambda: x + a[1], "arith.subf": lambda: x - a[1],
            "arith.mulf": lambda: x * a[1], "arith.divf": lambda: x / a[1], "arith.maxnumf": lambda: np.fmax(x, a[1]),
            "arith.minnumf": lambda: np.fmin(x, a[1]), "arith.maxsi": lambda: np.maximum(x, a[1]),
            "arith.minsi": lambda: np.minimum(x, a[1]), "arith.negf": lambda: -x,
            "arith.select": lambda: np.where(x, a[1], a[2]).astype(np.asarray(a[1]).dtype),
            "math.exp": lambda: np.exp(x), "math.exp2": lambda: np.exp2(x), "math.log": lambda: np.log(x), "math.sqrt": lambda: np.sqrt(x),
            "math.rsqrt": lambda: (1 / np.sqrt(x)).astype(np.asarray(x).dtype), "math.absf": lambda: np.abs(x),
            "math.erf": lambda: _erf(x),
            "arith.extf": lambda: np.asarray(x).astype(to), "arith.truncf": lambda: np.asarray(x).astype(to),
            "arith.sitofp": lambda: np.asarray(x).astype(to), "arith.uitofp": lambda: np.asarray(x).astype(to),
            "arith.fptosi": lambda: np.trunc(x).astype(to), "arith.extsi": lambda: np.asarray(x).astype(to),
            "arith.extui": lambda: np.asarray(x).astype(to), "arith.trunci": lambda: np.asarray(x).astype(to),
        }.get(name)
        if pred is not None:
            op = {"eq": np.equal, "ne": np.not_equal, "slt": np.less, "sle": np.less_equal, "sgt": np.greater,
                  "sge": np.greater_equal, "oeq": np.equal, "une": np.not_equal, "olt": np.less, "ole": np.less_equal,
                  "ogt": np.greater, "oge": np.greater_equal}[pred]
            env[res] = op(x, a[1])
            return None
        if f is None:
            raise NotImplementedError(name)
        with np.errstate(all="ignore"):
            env[res] = f()
        return None


def _erf(x):
    import math

    return np.vectorize(math.erf, otypes=[np.float64])(x).astype(np.asarray(x).dtype)


def run(manifest, texts, inputs, groups=None):
    """Run a program: `manifest` (the .ttir.json), the kernels' texts, and
    the inputs (numpy arrays); returns the results. With `groups` (the
    manifest's launch groups' texts), each group runs in place of its
    members, as `efir.ttir` launches them."""
    bufs = []
    for b in manifest["buffers"]:
        dt = NP[b["dtype"]]
        if b["input"] is not None:
            bufs.append(np.ascontiguousarray(inputs[b["input"]], dtype=dt).ravel().copy())
        else:
            bufs.append(np.zeros(int(np.prod(b["shape"], dtype=np.int64)), dtype=dt))
    units = list(zip(manifest["kernels"], texts))
    if groups is not None:
        first = {g["members"][0]: (g, t) for g, t in zip(manifest.get("groups", []), groups)}
        skip = {i for g, _ in first.values() for i in g["members"][1:]}
        units = [first.get(i, u) for i, u in enumerate(units) if i not in skip]
    for k, text in units:
        kern = Kernel(text)
        for pid in range(k["grid"]):
            kern.run(bufs, k["args"], pid)
    outs = sorted((b for b in manifest["buffers"] if b["output"] is not None), key=lambda b: b["output"])
    return [bufs[manifest["buffers"].index(b)].reshape(b["shape"]) for b in outs]
