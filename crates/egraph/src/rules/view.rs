//! Views: reshapes that split or merge dims move towards the inputs through
//! pointwise ops, broadcasts, reductions, transposes, slices and
//! concatenations, and chains of reshapes or transposes compose, so that a
//! head split (`[b, s, h*d] -> [b, s, h, d]`), the split of query heads
//! into key/value groups (`[b, h, s, d] -> [b, hk, g, s, d]`) and the
//! layout changes between them land on a value that is stored anyway (a
//! matmul's result, a parameter) and become index arithmetic where it is
//! read, instead of a copy of a computed value in a kernel of its own.
//!
//! A reshape is described by its groups: runs of input dims and runs of
//! output dims with equal products (`8x64 -> 8x4x16`: `{8} -> {8}`,
//! `{64} -> {4, 16}`). An operand broadcast along a whole group stays
//! broadcast along the group's output dims; one broadcast along part of a
//! group cannot be reshaped, and the rule does not apply. Only values
//! without parallel state are rewritten (the rules act before refinement
//! decomposes them), and only reshapes that split or merge dims other than
//! unit dims (those are free in a kernel already).

use super::{multi_rule, node, op_multi_rule, rule, Match, Rhs, RuleDef};
use efir_ir::{Attr, DType, Dim, TensorType, Type};
use egg::Id;
use std::ops::Range;

/// The static extents of `t`, if it has no parallel state.
fn plain(t: &TensorType) -> Option<Vec<u64>> {
    if !t.state.is_empty() {
        return None;
    }
    t.shape
        .iter()
        .map(|d| match d {
            Dim::Static(n) => Some(*n),
            Dim::Axis(_) => None,
        })
        .collect()
}

/// The groups of a reshape from `a` to `b`: pairs of input and output dim
/// ranges with equal products, in order, covering both shapes.
fn groups(a: &[u64], b: &[u64]) -> Option<Vec<(Range<usize>, Range<usize>)>> {
    let (n, m) = (a.len(), b.len());
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < n || j < m {
        let (si, sj) = (i, j);
        let (mut pi, mut pj) = (1u64, 1u64);
        if i < n {
            pi = pi.checked_mul(a[i])?;
            i += 1;
        }
        if j < m {
            pj = pj.checked_mul(b[j])?;
            j += 1;
        }
        while pi != pj {
            if pi < pj {
                if i == n {
                    return None;
                }
                pi = pi.checked_mul(a[i])?;
                i += 1;
            } else {
                if j == m {
                    return None;
                }
                pj = pj.checked_mul(b[j])?;
                j += 1;
            }
        }
        out.push((si..i, sj..j));
    }
    Some(out)
}

/// Whether a reshape from `a` to `b` splits or merges dims other than unit
/// dims.
fn splits_or_merges(a: &[u64], b: &[u64]) -> bool {
    let nu = |s: &[u64]| s.iter().copied().filter(|&d| d != 1).collect::<Vec<_>>();
    nu(a) != nu(b)
}

fn ty(dtype: DType, shape: &[u64]) -> Rhs {
    Rhs::Attr(Attr::Type(Box::new(Type::Tensor(TensorType::of(
        dtype, shape,
    )))))
}

/// `reshape(x, shape)` (x itself when it has that shape already).
fn reshaped(x: Rhs, t: &TensorType, shape: &[u64]) -> Rhs {
    if plain(t).as_deref() == Some(shape) {
        x
    } else {
        node("tensor.reshape", vec![x, ty(t.dtype, shape)])
    }
}

/// The declared type of the matched reshape (`?t`) and its operand's
/// extents, when it splits or merges dims of a value without state.
fn split_merge(m: &Match<'_>, operand: &str) -> Option<(Vec<u64>, Vec<u64>)> {
    let from = plain(m.tensor(operand)?)?;
    let to = plain(m.tensor("?r")?)?;
    splits_or_merges(&from, &to).then_some((from, to))
}

/// An operand of an op of shape `full` (broadcast to it, numpy style),
/// reshaped along the groups `gs` of `full -> to`: `None` where it is
/// broadcast along part of a group only.
fn operand_view(
    x: Rhs,
    t: &TensorType,
    full: &[u64],
    to: &[u64],
    gs: &[(Range<usize>, Range<usize>)],
) -> Option<Rhs> {
    let own = plain(t)?;
    if own.is_empty() {
        // A scalar broadcasts to any shape.
        return Some(x);
    }
    if own.len() > full.len() {
        return None;
    }
    let mut padded = vec![1u64; full.len() - own.len()];
    padded.extend(&own);
    let mut shape = Vec::with_capacity(to.len());
    for (gi, go) in gs {
        let whole = gi.clone().all(|k| padded[k] == full[k]);
        let broadcast = gi.clone().all(|k| padded[k] == 1);
        if whole {
            shape.extend(&to[go.clone()]);
        } else if broadcast {
            shape.extend(go.clone().map(|_| 1u64));
        } else {
            return None;
        }
    }
    Some(reshaped(x, t, &shape))
}

/// `reshape(f(A, B, ...), T) == f(reshape(A), reshape(B), ...)` for a
/// pointwise op `op` over the operands `names`, followed by the attribute
/// children `attrs`.
fn before_pointwise(m: &Match<'_>, op: &str, names: &[&str], attrs: &[&str]) -> Vec<Rhs> {
    let Some((from, to)) = split_merge(m, "?y") else {
        return vec![];
    };
    let Some(gs) = groups(&from, &to) else {
        return vec![];
    };
    let mut kids = Vec::new();
    for name in names {
        let Some(t) = m.tensor(name) else {
            return vec![];
        };
        match operand_view(m.class(name), t, &from, &to, &gs) {
            Some(v) => kids.push(v),
            None => return vec![],
        }
    }
    kids.extend(attrs.iter().map(|a| m.class(a)));
    vec![node(op, kids)]
}

fn before_unary(m: &Match<'_>, op: &str) -> Vec<Rhs> {
    before_pointwise(m, op, &["?a"], &[])
}

fn before_binary(m: &Match<'_>, op: &str) -> Vec<Rhs> {
    before_pointwise(m, op, &["?a", "?b"], &[])
}

/// `reshape(cast(X, T1), T) == cast(reshape(X), T)`.
fn before_cast(m: &Match<'_>) -> Vec<Rhs> {
    let (Some((from, to)), Some(x), Some(r)) =
        (split_merge(m, "?y"), m.tensor("?a"), m.tensor("?r"))
    else {
        return vec![];
    };
    if plain(x).as_deref() != Some(&from[..]) {
        return vec![];
    }
    vec![node(
        "ew.cast",
        vec![reshaped(m.class("?a"), x, &to), ty(r.dtype, &to)],
    )]
}

/// The groups of `from -> to` in which dim `d` of `from` is the only dim
/// that is not a unit dim, on both sides: the output dim it becomes.
fn own_group(
    gs: &[(Range<usize>, Range<usize>)],
    from: &[u64],
    to: &[u64],
    d: usize,
) -> Option<usize> {
    let (gi, go) = gs.iter().find(|(gi, _)| gi.contains(&d))?;
    let ins: Vec<usize> = gi.clone().filter(|&k| from[k] != 1).collect();
    let outs: Vec<usize> = go.clone().filter(|&k| to[k] != 1).collect();
    (ins == [d] && outs.len() == 1).then(|| outs[0])
}

/// `reshape(concat(A, B, d), T) == concat(reshape(A), reshape(B), d')` when
/// `d` is a group of its own.
fn before_concat(m: &Match<'_>) -> Vec<Rhs> {
    let (Some((from, to)), Some(d), Some(a), Some(b)) = (
        split_merge(m, "?y"),
        m.int("?d"),
        m.tensor("?a"),
        m.tensor("?b"),
    ) else {
        return vec![];
    };
    let Some(gs) = groups(&from, &to) else {
        return vec![];
    };
    let Some(d2) = own_group(&gs, &from, &to, d) else {
        return vec![];
    };
    let mut kids = Vec::new();
    for (name, t) in [("?a", a), ("?b", b)] {
        let Some(s) = plain(t) else { return vec![] };
        let mut shape = to.clone();
        shape[d2] = s[d];
        kids.push(reshaped(m.class(name), t, &shape));
    }
    kids.push(super::int(d2));
    vec![node("tensor.concat", kids)]
}

fn ints(m: &Match<'_>, name: &str) -> Option<Vec<i64>> {
    m.attr(name)?.as_int_array()
}

fn int_array(v: &[i64]) -> Rhs {
    Rhs::Attr(Attr::Array(v.iter().map(|&i| Attr::Int(i)).collect()))
}

/// `reshape(slice(X), T) == slice(reshape(X))` when every sliced dim is a
/// group of its own (and keeps more than one element).
fn before_slice(m: &Match<'_>) -> Vec<Rhs> {
    let (Some((from, to)), Some(x), Some(start), Some(stop), Some(step)) = (
        split_merge(m, "?y"),
        m.tensor("?a"),
        ints(m, "?start"),
        ints(m, "?stop"),
        ints(m, "?step"),
    ) else {
        return vec![];
    };
    let Some(xs) = plain(x) else { return vec![] };
    let Some(gs) = groups(&from, &to) else {
        return vec![];
    };
    let r = to.len();
    let (mut s2, mut e2, mut t2) = (vec![0i64; r], vec![0i64; r], vec![1i64; r]);
    for (k, e) in e2.iter_mut().enumerate() {
        *e = to[k] as i64;
    }
    let mut shape = to.clone();
    if start.len() != xs.len() || stop.len() != xs.len() || step.len() != xs.len() {
        return vec![];
    }
    for d in 0..xs.len() {
        let whole = start[d] == 0 && stop[d] == xs[d] as i64 && step[d] == 1;
        if whole {
            continue;
        }
        let Some(d2) = own_group(&gs, &from, &to, d) else {
            return vec![];
        };
        shape[d2] = xs[d];
        s2[d2] = start[d];
        e2[d2] = stop[d];
        t2[d2] = step[d];
    }
    vec![node(
        "tensor.slice",
        vec![
            reshaped(m.class("?a"), x, &shape),
            int_array(&s2),
            int_array(&e2),
            int_array(&t2),
        ],
    )]
}

/// `reshape(transpose(X, π), T) == transpose(reshape(X, T'), π')` when each
/// group of the reshape reads a run of consecutive dims of `X` in order.
fn before_transpose(m: &Match<'_>) -> Vec<Rhs> {
    let (Some((from, to)), Some(x), Some(perm)) =
        (split_merge(m, "?y"), m.tensor("?a"), ints(m, "?perm"))
    else {
        return vec![];
    };
    let Some(gs) = groups(&from, &to) else {
        return vec![];
    };
    if perm.len() != from.len() || plain(x).is_none() {
        return vec![];
    }
    // Each group: the first dim of X it reads (groups of unit output dims
    // alone read none and go last).
    let mut order: Vec<(usize, usize)> = Vec::new();
    for (g, (gi, _)) in gs.iter().enumerate() {
        let src: Vec<usize> = gi.clone().map(|k| perm[k] as usize).collect();
        if src.windows(2).any(|w| w[1] != w[0] + 1) {
            return vec![];
        }
        order.push((src.first().copied().unwrap_or(usize::MAX), g));
    }
    order.sort();
    let mut shape = Vec::new();
    let mut pos = vec![0usize; to.len()];
    for &(_, g) in &order {
        for k in gs[g].1.clone() {
            pos[k] = shape.len();
            shape.push(to[k]);
        }
    }
    let perm2: Vec<i64> = pos.iter().map(|&p| p as i64).collect();
    let inner = reshaped(m.class("?a"), x, &shape);
    if perm2.iter().enumerate().all(|(i, &p)| p == i as i64) {
        return vec![inner];
    }
    vec![node("tensor.transpose", vec![inner, int_array(&perm2)])]
}

/// `reshape(reduce(X, ρ, r), T) == reduce(reshape(X, T'), ρ, r')` when the
/// reduced dim lies between groups.
fn before_reduce(m: &Match<'_>) -> Vec<Rhs> {
    let (Some((from, to)), Some(x), Some(r)) = (split_merge(m, "?y"), m.tensor("?a"), m.int("?rd"))
    else {
        return vec![];
    };
    let (Some(xs), Some(gs)) = (plain(x), groups(&from, &to)) else {
        return vec![];
    };
    if r >= xs.len() {
        return vec![];
    }
    // The output dims of the groups before the reduced dim.
    let mut before = None;
    for (gi, go) in &gs {
        if gi.start == r {
            before = Some(go.start);
            break;
        }
    }
    if r == from.len() {
        before = Some(to.len());
    }
    let Some(b) = before else { return vec![] };
    let mut shape = to[..b].to_vec();
    shape.push(xs[r]);
    shape.extend(&to[b..]);
    vec![node(
        "tensor.reduce",
        vec![
            reshaped(m.class("?a"), x, &shape),
            m.class("?rho"),
            super::int(b),
        ],
    )]
}

/// `reshape(broadcast(X, T1), T) == broadcast(reshape(X), T)`.
fn before_broadcast(m: &Match<'_>) -> Vec<Rhs> {
    let (Some((from, to)), Some(x), Some(r)) =
        (split_merge(m, "?y"), m.tensor("?a"), m.tensor("?r"))
    else {
        return vec![];
    };
    let Some(gs) = groups(&from, &to) else {
        return vec![];
    };
    let Some(v) = operand_view(m.class("?a"), x, &from, &to, &gs) else {
        return vec![];
    };
    vec![node("tensor.broadcast", vec![v, ty(r.dtype, &to)])]
}

/// `reshape(reshape(X, T1), T) == reshape(X, T)` (X itself when it has that
/// shape).
fn of_reshape(m: &Match<'_>) -> Vec<Rhs> {
    let (Some(x), Some(r)) = (m.tensor("?a"), m.ty()) else {
        return vec![];
    };
    let (Some(_), Some(to)) = (plain(x), plain(r)) else {
        return vec![];
    };
    vec![reshaped(m.class("?a"), x, &to)]
}

/// `transpose(transpose(X, π1), π2) == transpose(X, π1∘π2)` (X itself for
/// the identity).
fn of_transpose(m: &Match<'_>) -> Vec<Rhs> {
    let (Some(p1), Some(p2), Some(x), Some(r)) =
        (ints(m, "?p1"), ints(m, "?p2"), m.tensor("?a"), m.ty())
    else {
        return vec![];
    };
    if !x.state.is_empty() || !r.state.is_empty() || p1.len() != p2.len() {
        return vec![];
    }
    let Some(p): Option<Vec<i64>> = p2.iter().map(|&k| p1.get(k as usize).copied()).collect()
    else {
        return vec![];
    };
    if p.iter().enumerate().all(|(i, &k)| k == i as i64) {
        vec![m.class("?a")]
    } else {
        vec![node("tensor.transpose", vec![m.class("?a"), int_array(&p)])]
    }
}

/// `concat(neg(A), B, d) == concat(A, B, d) ⊙ S` (and the mirror image),
/// `S` being -1 over the negated operand's positions along `d` and +1
/// elsewhere (an iota compared with its extent): the rotation of rotary
/// embeddings without a negated copy, so that both operands of the
/// concatenation are slices of one stored value.
fn concat_of_neg(m: &Match<'_>, left: bool) -> Vec<Rhs> {
    let (Some(d), Some(a), Some(b), Some(r)) =
        (m.int("?d"), m.tensor("?a"), m.tensor("?b"), m.ty())
    else {
        return vec![];
    };
    let (Some(sa), Some(_), Some(sr)) = (plain(a), plain(b), plain(r)) else {
        return vec![];
    };
    if !r.dtype.is_float() || d >= sr.len() {
        return vec![];
    }
    let mut shape = vec![1u64; sr.len()];
    shape[d] = sr[d];
    let iota = node("tensor.iota", vec![super::int(d), ty(DType::I32, &shape)]);
    let split = node(
        "tensor.full",
        vec![Rhs::Attr(Attr::Int(sa[d] as i64)), ty(DType::I32, &[])],
    );
    let lt = node(
        "ew.cmp",
        vec![iota, split, Rhs::Attr(Attr::Word("lt".into()))],
    );
    let one = |v: f64| {
        node(
            "tensor.full",
            vec![Rhs::Attr(Attr::Float(v)), ty(r.dtype, &[])],
        )
    };
    let (first, second) = if left { (-1.0, 1.0) } else { (1.0, -1.0) };
    let sign = node("ew.select", vec![lt, one(first), one(second)]);
    let cat = node(
        "tensor.concat",
        vec![m.class("?a"), m.class("?b"), m.class("?d")],
    );
    vec![node("ew.mul", vec![cat, sign])]
}

/// Right-hand sides that join the matched reshape `?r`.
fn at_root(rhs: Vec<Rhs>, m: &Match<'_>) -> Vec<(Id, Rhs)> {
    let r = m.id("?r");
    rhs.into_iter().map(|x| (r, x)).collect()
}

/// The last-two-dims swap of a rank-`n` transpose (`[0, .., n-1, n-2]`).
fn swaps_last_two(perm: &[i64]) -> bool {
    let n = perm.len();
    n >= 2
        && perm.iter().enumerate().all(|(i, &p)| {
            let want = if i + 2 == n {
                n - 1
            } else if i + 1 == n {
                n - 2
            } else {
                i
            };
            p == want as i64
        })
}

fn swap_last_two(n: usize) -> Vec<i64> {
    let mut p: Vec<i64> = (0..n as i64).collect();
    p.swap(n - 2, n - 1);
    p
}

/// `A·reshape(B5) == reshape(reshape(A)·B5)` (and with `B` transposed in
/// its last two dims) where the reshape splits or merges batch dims only:
/// `A`'s batch dims are split the same way (or stay broadcast), so that a
/// key/value head broadcast to its query group and merged with it (`[b,
/// hk, g, s, d] -> [b, hk*g, s, d]`, `repeat_kv`) is read by a batched
/// matmul over the split heads instead of being stored.
fn matmul_split_batch(m: &Match<'_>, transposed: bool) -> Vec<(Id, Rhs)> {
    let (Some(a), Some(bm), Some(b5), Some(r)) = (
        m.tensor("?a"),
        m.tensor("?bm"),
        m.tensor("?b5"),
        m.tensor("?r"),
    ) else {
        return vec![];
    };
    let (Some(sa), Some(sbm), Some(sb5), Some(_)) = (plain(a), plain(bm), plain(b5), plain(r))
    else {
        return vec![];
    };
    if transposed && !ints(m, "?perm").is_some_and(|p| swaps_last_two(&p)) {
        return vec![];
    }
    let (n, n5) = (sbm.len(), sb5.len());
    if n < 2 || n5 < 2 || sa.len() < 2 || sbm[n - 2..] != sb5[n5 - 2..] {
        return vec![];
    }
    let (batch, batch5) = (&sbm[..n - 2], &sb5[..n5 - 2]);
    if !splits_or_merges(batch, batch5) {
        return vec![];
    }
    let Some(gs) = groups(batch, batch5) else {
        return vec![];
    };
    // A's batch dims, split along the same groups.
    let ra = sa.len() - 2;
    if ra > batch.len() {
        return vec![];
    }
    let mut padded = vec![1u64; batch.len() - ra];
    padded.extend(&sa[..ra]);
    let mut shape = Vec::new();
    for (gi, go) in &gs {
        if gi.clone().all(|k| padded[k] == batch[k]) {
            shape.extend(&batch5[go.clone()]);
        } else if gi.clone().all(|k| padded[k] == 1) {
            shape.extend(go.clone().map(|_| 1u64));
        } else {
            return vec![];
        }
    }
    shape.extend(&sa[ra..]);
    let a5 = reshaped(m.class("?a"), a, &shape);
    let b = if transposed {
        node(
            "tensor.transpose",
            vec![m.class("?b5"), int_array(&swap_last_two(n5))],
        )
    } else {
        m.class("?b5")
    };
    let mm = node("tensor.matmul", vec![a5, b]);
    let Some(rt) = m.tensor("?r") else {
        return vec![];
    };
    let Some(rs) = plain(rt) else { return vec![] };
    vec![(
        m.id("?r"),
        node("tensor.reshape", vec![mm, ty(rt.dtype, &rs)]),
    )]
}

/// `A·broadcast(X) == A·X` (and with the operand transposed in its last two
/// dims) when the broadcast stretches only batch dims along which `A`
/// already has the full extent: the matmul's own batch broadcast reads `X`
/// once per coordinate instead of a stored copy.
fn matmul_of_broadcast(m: &Match<'_>, transposed: bool) -> Vec<(Id, Rhs)> {
    let (Some(a), Some(x), Some(bb), Some(r)) = (
        m.tensor("?a"),
        m.tensor("?x"),
        m.tensor("?bb"),
        m.tensor("?r"),
    ) else {
        return vec![];
    };
    let (Some(sa), Some(sx), Some(sb), Some(_)) = (plain(a), plain(x), plain(bb), plain(r)) else {
        return vec![];
    };
    if transposed && !ints(m, "?perm").is_some_and(|p| swaps_last_two(&p)) {
        return vec![];
    }
    let n = sb.len();
    if n < 2 || sx.len() != n || sx[n - 2..] != sb[n - 2..] || sa.len() < 2 {
        return vec![];
    }
    let ra = sa.len() - 2;
    for k in 0..n - 2 {
        if sx[k] == sb[k] {
            continue;
        }
        // A stretched batch dim: A must have it, at the full extent.
        let from_end = n - 2 - k;
        if from_end > ra || sa[ra - from_end] != sb[k] {
            return vec![];
        }
    }
    let b = if transposed {
        node(
            "tensor.transpose",
            vec![m.class("?x"), int_array(&swap_last_two(n))],
        )
    } else {
        m.class("?x")
    };
    vec![(m.id("?r"), node("tensor.matmul", vec![m.class("?a"), b]))]
}

/// The view rules.
pub fn rules() -> Vec<RuleDef> {
    let f = "view";
    let mut v = Vec::new();
    // (The pointwise ops come from the `ew` op table.)
    for op in efir_dialect_ew::pointwise_ops(1) {
        let short = &op[3..];
        v.push(op_multi_rule(
            f,
            format!("view.reshape-before-{short}"),
            format!("reshape({short}(X), T) == {short}(reshape(X, T))"),
            format!("?r = (tensor.reshape ?y ?t), ?y = ({op} ?a)"),
            |m, op| at_root(before_unary(m, op), m),
            op,
        ));
    }
    for op in efir_dialect_ew::pointwise_ops(2) {
        let short = &op[3..];
        v.push(op_multi_rule(
            f,
            format!("view.reshape-before-{short}"),
            format!("reshape({short}(A, B), T) == {short}(view(A), view(B))"),
            format!("?r = (tensor.reshape ?y ?t), ?y = ({op} ?a ?b)"),
            |m, op| at_root(before_binary(m, op), m),
            op,
        ));
    }
    v.push(multi_rule(
        f,
        "view.reshape-before-cmp",
        "reshape(cmp(A, B), T) == cmp(view(A), view(B))",
        "?r = (tensor.reshape ?y ?t), ?y = (ew.cmp ?a ?b ?pred)",
        |m| at_root(before_pointwise(m, "ew.cmp", &["?a", "?b"], &["?pred"]), m),
    ));
    v.push(multi_rule(
        f,
        "view.reshape-before-select",
        "reshape(select(C, A, B), T) == select(view(C), view(A), view(B))",
        "?r = (tensor.reshape ?y ?t), ?y = (ew.select ?c ?a ?b)",
        |m| {
            at_root(
                before_pointwise(m, "ew.select", &["?c", "?a", "?b"], &[]),
                m,
            )
        },
    ));
    v.push(multi_rule(
        f,
        "view.reshape-before-cast",
        "reshape(cast(X, T1), T) == cast(reshape(X), T)",
        "?r = (tensor.reshape ?y ?t), ?y = (ew.cast ?a ?t1)",
        |m| at_root(before_cast(m), m),
    ));
    v.push(multi_rule(
        f,
        "view.reshape-before-broadcast",
        "reshape(broadcast(X, T1), T) == broadcast(view(X), T)",
        "?r = (tensor.reshape ?y ?t), ?y = (tensor.broadcast ?a ?t1)",
        |m| at_root(before_broadcast(m), m),
    ));
    v.push(multi_rule(
        f,
        "view.reshape-before-reduce",
        "reshape(reduce(X, ρ, r), T) == reduce(reshape(X), ρ, r') if r lies between groups",
        "?r = (tensor.reshape ?y ?t), ?y = (tensor.reduce ?a ?rho ?rd)",
        |m| at_root(before_reduce(m), m),
    ));
    v.push(multi_rule(
        f,
        "view.reshape-before-transpose",
        "reshape(transpose(X, π), T) == transpose(reshape(X), π') if each group reads consecutive dims of X",
        "?r = (tensor.reshape ?y ?t), ?y = (tensor.transpose ?a ?perm)",
        |m| at_root(before_transpose(m), m),
    ));
    v.push(multi_rule(
        f,
        "view.reshape-before-slice",
        "reshape(slice(X), T) == slice(reshape(X)) if each sliced dim is a group of its own",
        "?r = (tensor.reshape ?y ?t), ?y = (tensor.slice ?a ?start ?stop ?step)",
        |m| at_root(before_slice(m), m),
    ));
    v.push(multi_rule(
        f,
        "view.reshape-before-concat",
        "reshape(concat(A, B, d), T) == concat(reshape(A), reshape(B), d') if d is a group of its own",
        "?r = (tensor.reshape ?y ?t), ?y = (tensor.concat ?a ?b ?d)",
        |m| at_root(before_concat(m), m),
    ));
    v.push(rule(
        f,
        "view.reshape-of-reshape",
        "reshape(reshape(X, T1), T) == reshape(X, T)",
        "(tensor.reshape (tensor.reshape ?a ?t1) ?t)",
        of_reshape,
    ));
    v.push(rule(
        f,
        "view.transpose-of-transpose",
        "transpose(transpose(X, π1), π2) == transpose(X, π1∘π2)",
        "(tensor.transpose (tensor.transpose ?a ?p1) ?p2)",
        of_transpose,
    ));
    v.push(rule(
        f,
        "view.concat-of-neg-lhs",
        "concat(neg(A), B, d) == concat(A, B, d) ⊙ select(iota_d < |A|, -1, 1)",
        "(tensor.concat (ew.neg ?a) ?b ?d)",
        |m| concat_of_neg(m, true),
    ));
    v.push(rule(
        f,
        "view.concat-of-neg-rhs",
        "concat(A, neg(B), d) == concat(A, B, d) ⊙ select(iota_d < |A|, 1, -1)",
        "(tensor.concat ?a (ew.neg ?b) ?d)",
        |m| concat_of_neg(m, false),
    ));
    v.push(multi_rule(
        f,
        "view.matmul-split-batch",
        "A·reshape(B5) == reshape(split(A)·B5) if the reshape changes batch dims only",
        "?r = (tensor.matmul ?a ?bm), ?bm = (tensor.reshape ?b5 ?t)",
        |m| matmul_split_batch(m, false),
    ));
    v.push(multi_rule(
        f,
        "view.matmul-split-batch-transposed",
        "A·reshape(B5)ᵀ == reshape(split(A)·B5ᵀ) if the reshape changes batch dims only",
        "?r = (tensor.matmul ?a ?b), ?b = (tensor.transpose ?bm ?perm), ?bm = (tensor.reshape ?b5 ?t)",
        |m| matmul_split_batch(m, true),
    ));
    v.push(multi_rule(
        f,
        "view.matmul-of-broadcast",
        "A·broadcast(X) == A·X if only batch dims that A has are stretched",
        "?r = (tensor.matmul ?a ?bb), ?bb = (tensor.broadcast ?x ?t)",
        |m| matmul_of_broadcast(m, false),
    ));
    v.push(multi_rule(
        f,
        "view.matmul-of-broadcast-transposed",
        "A·broadcast(X)ᵀ == A·Xᵀ if only batch dims that A has are stretched",
        "?r = (tensor.matmul ?a ?b), ?b = (tensor.transpose ?bb ?perm), ?bb = (tensor.broadcast ?x ?t)",
        |m| matmul_of_broadcast(m, true),
    ));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_pair_equal_products() {
        let g = groups(&[1, 8, 64], &[1, 8, 4, 16]).unwrap();
        assert_eq!(g, vec![(0..1, 0..1), (1..2, 1..2), (2..3, 2..4)]);
        let g = groups(&[1, 4, 8, 16], &[1, 2, 2, 8, 16]).unwrap();
        assert_eq!(g[1], (1..2, 1..3));
        assert!(groups(&[6, 4], &[4, 6]).is_some_and(|g| g.len() == 1));
        assert!(groups(&[6], &[4]).is_none());
        assert!(splits_or_merges(&[1, 8, 64], &[1, 8, 4, 16]));
        assert!(!splits_or_merges(&[1, 8, 1], &[1, 8]));
    }
}
