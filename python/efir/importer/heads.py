"""Grouped key/value heads as a broadcast view, not a copy.

Grouped-query attention gives each key/value head to a group of `g` query
heads. PyTorch programs write that as `k[:, :, None].expand(b, hk, g, s, d)
.reshape(b, hk * g, s, d)` (transformers' `repeat_kv`), `repeat_interleave`,
or SDPA with `enable_gqa`; imported literally, the merge of the broadcast
dim is a reshape of a broadcast, which the kernels materialize (the
repeated K and V written to memory and read back).

The builder instead remembers, for such a value `x` of heads `hk * g` at
dim `d`, its *split form* (`Split`): the value with dim `d` split into
`(hk, g)`, or into `(hk, 1)` for the repeated value itself (the unit form:
the heads before the broadcast). Matmuls, pointwise ops, casts, reductions
over other dims and transposes of a value with a split form compute in the
split form too (the other operands split by a reshape, a view, or given a
unit dim where they broadcast), and the merged value is only written where
something else reads it (`Builder.lazy`). Attention over grouped heads then
reads each key/value head once per query group through the matmul's batch
broadcast (`[b, hk, 1, s, d]` against `[b, hk, g, s, d]`), in one kernel.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Split:
    """`v5`: a value equal to another with dim `d` split into `(heads,
    group)`, or (unit form) to the heads it repeats `group` times, where
    `v5` has extent 1 at dim `d + 1`."""

    v5: object
    d: int
    heads: int
    group: int

    @property
    def unit(self):
        return self.v5.shape[self.d + 1] == 1


def _ty_args(xs):
    return ", ".join(x.name for x in xs)


def _plain(b, r5, s, shape):
    """The merged value of split form `r5` (a broadcast first for a unit
    form), written lazily, with its split form recorded."""
    v = r5
    if s.unit:
        full = r5.shape[:s.d + 1] + (s.group,) + r5.shape[s.d + 2:]
        v = b.lazy(f"tensor.broadcast {r5.name}", full, r5.dtype)
    out = b.lazy(f"tensor.reshape {v.name}", shape, r5.dtype)
    b.split[out.name] = s
    return out


def _operands(b, xs, rank, d, heads, group):
    """The split forms of operands `xs` of a result of rank `rank` whose dim
    `d` has `heads * group` extent (right-aligned broadcasting), and whether
    any of them is full (not unit); None where one does not fit."""
    out, full = [], False
    for x in xs:
        k = d - (rank - x.rank)
        s = b.split.get(x.name)
        if s is not None:
            if s.d != k or s.heads != heads or s.group != group:
                return None, False
            out.append(s.v5)
            full |= not s.unit
        elif k < 0:
            out.append(x)  # no such dim: it broadcasts
        elif x.shape[k] == 1:
            out.append(b.lazy(f"tensor.reshape {x.name}", x.shape[:k] + (1, 1) + x.shape[k + 1:], x.dtype))
        elif x.shape[k] == heads * group:
            out.append(b.lazy(f"tensor.reshape {x.name}", x.shape[:k] + (heads, group) + x.shape[k + 1:], x.dtype))
            full = True
        else:
            return None, False
    return out, full


def _common(b, xs, rank):
    """(d, heads, group) of the first operand with a split form, aligned to
    a result of rank `rank`; None if none has one."""
    for x in xs:
        s = b.split.get(x.name)
        if s is not None:
            return s.d + (rank - x.rank), s.heads, s.group
    return None


def ew(b, name, xs, shape, dtype):
    """A pointwise op in the split form, or None."""
    c = _common(b, xs, len(shape))
    if c is None:
        return None
    d, heads, group = c
    if d < 0 or shape[d] != heads * group:
        return None
    xs5, full = _operands(b, xs, len(shape), d, heads, group)
    if xs5 is None:
        return None
    s5 = tuple(shape[:d]) + (heads, group if full else 1) + tuple(shape[d + 1:])
    r5 = b.lazy(f"{name} {_ty_args(xs5)}", s5, dtype)
    return _plain(b, r5, Split(r5, d, heads, group), shape)


def cast(b, x, dtype):
    s = b.split.get(x.name)
    if s is None:
        return None
    r5 = b.lazy(f"ew.cast {s.v5.name}", s.v5.shape, dtype)
    return _plain(b, r5, Split(r5, s.d, s.heads, s.group), x.shape)


def matmul(b, x, y, shape, dtype):
    """A batched matmul in the split form (the split dim a batch dim of
    both operands, of the result's rank), or None."""
    rank = len(shape)
    if x.rank != rank or y.rank != rank:
        return None
    c = _common(b, (x, y), rank)
    if c is None:
        return None
    d, heads, group = c
    if d >= rank - 2 or shape[d] != heads * group:
        return None
    xs5, full = _operands(b, (x, y), rank, d, heads, group)
    if xs5 is None:
        return None
    s5 = tuple(shape[:d]) + (heads, group if full else 1) + tuple(shape[d + 1:])
    r5 = b.lazy(f"tensor.matmul {_ty_args(xs5)}", s5, dtype)
    return _plain(b, r5, Split(r5, d, heads, group), shape)


def reduce(b, red, x, dims, keepdim, shape):
    """A reduction over dims other than the split one, in the split form,
    or None. `dims` are sorted and non-negative; `shape` is the result's."""
    s = b.split.get(x.name)
    if s is None or s.d in dims:
        return None
    cur = s.v5
    for d in reversed(dims):
        d5 = d if d < s.d else d + 1
        cur = b.lazy(f"tensor.reduce<#red.{red}, {d5}> {cur.name}", cur.shape[:d5] + cur.shape[d5 + 1:], cur.dtype)
    nd = s.d
    if keepdim:
        # 5-D dim i is logical dim i before the split, i - 1 after it.
        keep = tuple(1 if i not in (s.d, s.d + 1) and (i if i < s.d else i - 1) in dims else n for i, n in enumerate(s.v5.shape))
        cur = b.lazy(f"tensor.reshape {cur.name}", keep, cur.dtype)
    else:
        nd = s.d - sum(1 for d in dims if d < s.d)
    return _plain(b, cur, Split(cur, nd, s.heads, s.group), shape)


def transpose(b, x, perm, shape):
    """A transpose in the split form (the two halves of the split dim kept
    together), or None."""
    s = b.split.get(x.name)
    if s is None:
        return None
    perm5 = []
    for p in perm:
        perm5 += [s.d, s.d + 1] if p == s.d else [p if p < s.d else p + 1]
    s5 = tuple(s.v5.shape[p] for p in perm5)
    r5 = b.lazy(f"tensor.transpose<[{', '.join(str(p) for p in perm5)}]> {s.v5.name}", s5, s.v5.dtype)
    return _plain(b, r5, Split(r5, list(perm).index(s.d), s.heads, s.group), shape)


def reshape(b, x, shape):
    """`x` reshaped: the merge of a broadcast dim into the heads before it
    (`expand` + `reshape`, `repeat_interleave`) records the unit form; a
    reshape of a value with a full split form reshapes that form (the same
    elements in the same order); None otherwise."""
    s = b.split.get(x.name)
    if s is not None and not s.unit:
        if tuple(shape) == s.v5.shape:
            return s.v5
        return b.op(f"tensor.reshape {s.v5.name}", shape, x.dtype)
    y = b.bcast_of.get(x.name)
    if y is None or y.rank != x.rank or len(shape) != x.rank - 1:
        return None
    grown = [k for k in range(x.rank) if y.shape[k] != x.shape[k]]
    if len(grown) != 1 or grown[0] == 0 or y.shape[grown[0]] != 1:
        return None
    k = grown[0]
    d, group = k - 1, x.shape[k]
    if tuple(shape) != x.shape[:d] + (x.shape[d] * group,) + x.shape[k + 1:]:
        return None
    out = b.lazy(f"tensor.reshape {x.name}", shape, x.dtype)
    b.split[out.name] = Split(y, d, y.shape[d], group)
    return out
