"""Lowerings of attention and `einsum`: `scaled_dot_product_attention` as
`Q Kᵀ`, scale, masks, softmax in f32 and `P V`; `einsum` of one or two
operands as reductions, transposes and a batched matmul."""

import math

import torch

from .core import lowers

aten = torch.ops.aten


@lowers(aten.scaled_dot_product_attention.default)
def sdpa(c):
    b, args = c.b, c.args
    q, k, v = (c.value(i) for i in range(3))
    mask = args[3] if len(args) > 3 else c.kwargs.get("attn_mask")
    causal = args[5] if len(args) > 5 else c.kwargs.get("is_causal", False)
    scale = c.kwargs.get("scale") or (args[6] if len(args) > 6 else None)
    dropout = args[4] if len(args) > 4 else c.kwargs.get("dropout_p", 0.0)
    if dropout:
        raise c.error("scaled_dot_product_attention with dropout is not supported")
    r = q.rank
    sq, sk, d = q.shape[-2], k.shape[-2], q.shape[-1]
    hq, hk = q.shape[-3] if r >= 3 else 1, k.shape[-3] if r >= 3 else 1
    if hq != hk:
        # Grouped heads: each key/value head serves hq/hk query heads.
        if r != 4 or hq % hk:
            raise c.error(f"grouped heads {hq}/{hk} are not supported")
        g = hq // hk
        bsz = k.shape[0]

        def spread(x):
            x5 = b.reshape(x, (bsz, hk, 1, sk, d))
            return b.reshape(b.broadcast(x5, (bsz, hk, g, sk, d)), (bsz, hq, sk, d))

        k, v = spread(k), spread(v)
    kt = b.transpose(k, list(range(r - 2)) + [r - 1, r - 2])
    sshape = q.shape[:-1] + (sk,)
    s = b.matmul(q, kt, sshape, q.dtype)
    sf = b.cast(s, "f32")
    scale = scale if scale is not None else 1 / math.sqrt(d)
    z = b.ew("ew.mul", [sf, b.full(scale, "f32")], sshape, "f32")
    if mask is not None:
        mv = b.env[mask]
        if mv.dtype == "i1":
            z = b.ew("ew.select", [mv, z, b.full(-math.inf, "f32")], sshape, "f32")
        else:
            z = b.ew("ew.add", [z, b.cast(mv, "f32")], sshape, "f32")
    if causal:
        row = b.op("tensor.iota<0>", (sq, 1), "i32")
        col = b.op("tensor.iota<1>", (1, sk), "i32")
        keep = b.cmp("ge", row, col, (sq, sk))
        z = b.ew("ew.select", [keep, z, b.full(-math.inf, "f32")], sshape, "f32")
    m = b.reduce("max", z, [r - 1], True)
    e = b.ew("ew.exp", [b.ew("ew.sub", [z, m], sshape, "f32")], sshape, "f32")
    l = b.reduce("sum", e, [r - 1], True)
    p = b.cast(b.ew("ew.div", [e, l], sshape, "f32"), q.dtype)
    return b.matmul(p, v, c.shape, c.dtype)


@lowers(aten.einsum.default)
def einsum(c):
    """`einsum` of one operand (a permutation, sums over dropped letters) or
    two (a batched matmul: letters in both operands and the output are
    batch dims, in both but not the output contracted, in one operand and
    the output the rows or columns; a letter only in one operand and not
    the output is summed out first)."""
    b, dt = c.b, c.dtype
    eq = c.args[0]
    ops = [b.env[a] for a in c.args[1]]
    eq = eq.replace(" ", "")
    if "->" not in eq:
        # Implicit output: the letters that occur once, in alphabetical order.
        lhs = eq
        letters = lhs.replace(",", "").replace("...", "")
        out = "".join(sorted(ch for ch in set(letters) if letters.count(ch) == 1))
        out = ("..." if "..." in lhs else "") + out
    else:
        lhs, out = eq.split("->")
    ins = lhs.split(",")
    if len(ins) != len(ops) or len(ops) not in (1, 2):
        raise c.error(f"`einsum` `{eq}` of {len(ops)} operands is not supported (one or two operands)")
    # Expand the ellipsis into fresh capital letters, aligned from the right.
    nell = max((o.rank - len(s.replace("...", "")) for s, o in zip(ins, ops) if "..." in s), default=0)
    caps = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    ins = [s.replace("...", caps[nell - (o.rank - len(s.replace("...", ""))):nell]) if "..." in s else s for s, o in zip(ins, ops)]
    out = out.replace("...", caps[:nell])
    size = {}
    for s, o in zip(ins, ops):
        if len(s) != o.rank:
            raise c.error(f"`einsum` `{eq}`: subscripts `{s}` for an operand of rank {o.rank}")
        if len(set(s)) != len(s):
            raise c.error(f"`einsum` `{eq}` with a repeated subscript (a diagonal) is not supported")
        for ch, n in zip(s, o.shape):
            size[ch] = max(size.get(ch, 1), n)
    if len(set(out)) != len(out) or any(ch not in size for ch in out):
        raise c.error(f"`einsum` `{eq}`: bad output subscripts")
    xs = []
    for s, o in zip(ins, ops):
        o = b.cast(o, dt)
        other = "".join(ins) if len(ins) == 1 else ins[1] if s == ins[0] else ins[0]
        drop = [k for k, ch in enumerate(s) if ch not in out and (len(ins) == 1 or ch not in other)]
        if drop:
            o = b.reduce("sum", o, drop, False)
            s = "".join(ch for k, ch in enumerate(s) if k not in drop)
        xs.append((s, o))
    if len(xs) == 1:
        s, o = xs[0]
        return b.transpose(o, [s.index(ch) for ch in out])
    (sa, a), (sb, bb) = xs
    batch = [ch for ch in out if ch in sa and ch in sb]
    ms = [ch for ch in out if ch in sa and ch not in sb]
    ns = [ch for ch in out if ch in sb and ch not in sa]
    ks = [ch for ch in sa if ch in sb and ch not in out]
    ea, eb = ms[:-1], ns[:-1]
    if len(ks) == 1 and ms and ns and not (ea and eb) and not (batch and (ea or eb)):
        # No reshape: one row, column and contracted letter each; the other
        # letters of one operand are its own batch dims, which the matmul
        # broadcasts over the other operand (`bij,jk->bik`).
        a = b.transpose(a, [sa.index(ch) for ch in batch + ea + ms[-1:] + ks])
        bb = b.transpose(bb, [sb.index(ch) for ch in batch + eb + ks + ns[-1:]])
        order = batch + ea + eb + ms[-1:] + ns[-1:]
        y = b.matmul(a, bb, tuple(size[ch] for ch in order), dt)
        return b.transpose(y, [order.index(ch) for ch in out])
    a = b.transpose(a, [sa.index(ch) for ch in batch + ms + ks])
    bb = b.transpose(bb, [sb.index(ch) for ch in batch + ks + ns])
    m, n, k = (math.prod(size[ch] for ch in cs) for cs in (ms, ns, ks))
    a = b.reshape(a, a.shape[:len(batch)] + (m, k))
    bb = b.reshape(bb, bb.shape[:len(batch)] + (k, n))
    y = b.matmul(a, bb, tuple(size[ch] for ch in batch) + (m, n), dt)
    y = b.reshape(y, tuple(size[ch] for ch in batch + ms + ns))
    order = batch + ms + ns
    return b.transpose(y, [order.index(ch) for ch in out])
