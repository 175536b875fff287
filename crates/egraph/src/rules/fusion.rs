//! Reduction fusion (the paper's section 4.2): reductions over one domain
//! become one reduction whose state is the tuple of theirs.
//!
//! - Product fusion: independent reductions `reduce(X, ρA, d)` and
//!   `reduce(Y, ρB, d)` (neither uses the other's result) are the fields of
//!   `reduce(tuple(X, Y), ρA × ρB, d)`.
//! - Repair fusion: a sum whose input depends on a max over the same domain
//!   through `exp(x - max)` is repaired when the running max changes, with
//!   `h(c, s, s') = c · exp(s − s')` ([`crate::repairs`]). The normalizer
//!   alone gives `#red.repair<#red.max, #red.sum, ...>`; the normalizer and a
//!   weighted sum `Σ exp(x − max) · v` together give
//!   `#red.repair<#red.max, #red.prod<#red.sum, #red.sum>, ...>`: the online
//!   softmax state (running max, normalizer, weighted sum).

use super::{multi_rule, node, Match, Rhs, RuleDef};
use crate::analysis::{Data, EGraph};
use crate::repairs::{exp_f, exp_fw, exp_h, exp_h2};

use efir_ir::{Attr, TensorType};
use egg::{Id, Language};
use std::collections::HashSet;

fn attr_of(eg: &EGraph, id: Id) -> Option<&Attr> {
    match &eg[id].data {
        Data::Attr(i) => eg.analysis.attrs.get_index(*i),
        _ => None,
    }
}

fn is_term(a: Option<&Attr>, name: &str) -> bool {
    matches!(a, Some(Attr::Term(n, args)) if n == name && args.is_empty())
}

/// The e-class of `reduce(x, max, d)` if `mb` is its keep-dim reshape or
/// broadcast.
fn max_of(eg: &EGraph, mb: Id, x: Id, d: usize) -> Option<Id> {
    let x = eg.find(x);
    for n in &eg[mb].nodes {
        if !matches!(n.op.as_str(), "tensor.reshape" | "tensor.broadcast") {
            continue;
        }
        let c = n.children()[0];
        for r in &eg[c].nodes {
            if r.op.as_str() == "tensor.reduce"
                && eg.find(r.children()[0]) == x
                && is_term(attr_of(eg, r.children()[1]), "red.max")
                && attr_of(eg, r.children()[2]).and_then(Attr::as_int) == Some(d as i64)
            {
                return Some(eg.find(c));
            }
        }
    }
    None
}

/// Whether `mb` has `x`'s shape with dim `d` kept as 1 or full.
fn keepdim(mb: &TensorType, x: &TensorType, d: usize) -> bool {
    mb.rank() == x.rank()
        && mb.state == x.state
        && (0..x.rank()).all(|i| mb.shape[i] == x.shape[i] || (i == d && mb.shape[i].is_one()))
}

fn repair(consumer: Attr, f: String, h: String) -> Attr {
    Attr::Term(
        "red.repair".into(),
        vec![
            (None, Attr::term("red.max")),
            (None, consumer),
            (Some("f".into()), Attr::Symbol(f)),
            (Some("h".into()), Attr::Symbol(h)),
        ],
    )
}

fn get(t: Rhs, i: usize) -> Rhs {
    node("tensor.get", vec![t, super::int(i)])
}

/// Common checks of the repair fusions: the sum reducers, the max and its
/// keep-dim view; returns the max's class and the reduced dim.
fn softmax_parts(m: &Match<'_>, sums: &[&str]) -> Option<(Id, usize, &'static str)> {
    let d = m.int("?d")?;
    if !sums.iter().all(|r| is_term(m.attr(r), "red.sum")) {
        return None;
    }
    let (x, mb) = (m.tensor("?x")?, m.tensor("?mb")?);
    if !keepdim(mb, x, d)
        || x.state
            .values()
            .any(|s| matches!(s, efir_ir::AxisState::Partial(_)))
        || !x.dtype.is_float()
    {
        return None;
    }
    let mx = max_of(m.eg, m.id("?mb"), m.id("?x"), d)?;
    let dt: &'static str = match x.dtype {
        efir_ir::DType::F16 => "f16",
        efir_ir::DType::BF16 => "bf16",
        efir_ir::DType::F64 => "f64",
        _ => "f32",
    };
    Some((mx, d, dt))
}

fn dtype(name: &str) -> efir_ir::DType {
    efir_ir::DType::from_name(name).unwrap_or(efir_ir::DType::F32)
}

/// `max_d(x), sum_d(exp(x − max)) == get0, get1 of reduce(x, repair(max, sum), d)`.
fn normalizer(m: &Match<'_>) -> Vec<(Id, Rhs)> {
    let Some((mx, d, dt)) = softmax_parts(m, &["?r"]) else {
        return vec![];
    };
    let r = repair(Attr::term("red.sum"), exp_f(dtype(dt)), exp_h(dtype(dt)));
    let t = node(
        "tensor.reduce",
        vec![m.class("?x"), Rhs::Attr(r), super::int(d)],
    );
    vec![(m.id("?l"), get(t.clone(), 1)), (mx, get(t, 0))]
}

/// `max_d(x), sum_d(exp(x − max)), sum_d(exp(x − max) · v) == the fields of
/// reduce(tuple(x, v), repair(max, sum × sum), d)`.
fn weighted(m: &Match<'_>) -> Vec<(Id, Rhs)> {
    let Some((mx, d, dt)) = softmax_parts(m, &["?r1", "?r2"]) else {
        return vec![];
    };
    let (Some(x), Some(v)) = (m.tensor("?x"), m.tensor("?v")) else {
        return vec![];
    };
    if v.shape != x.shape || v.state != x.state || v.dtype != x.dtype {
        return vec![];
    }
    let consumer = Attr::Term(
        "red.prod".into(),
        vec![(None, Attr::term("red.sum")), (None, Attr::term("red.sum"))],
    );
    let r = repair(consumer, exp_fw(dtype(dt)), exp_h2(dtype(dt)));
    let t = node(
        "tensor.reduce",
        vec![
            node("tensor.tuple", vec![m.class("?x"), m.class("?v")]),
            Rhs::Attr(r),
            super::int(d),
        ],
    );
    vec![
        (m.id("?w"), get(t.clone(), 2)),
        (m.id("?l"), get(t.clone(), 1)),
        (mx, get(t, 0)),
    ]
}

/// Whether e-class `from` reaches `target` through operand children.
fn reaches(eg: &EGraph, from: Id, target: Id) -> bool {
    let (target, mut stack, mut seen) = (eg.find(target), vec![eg.find(from)], HashSet::new());
    while let Some(c) = stack.pop() {
        if c == target {
            return true;
        }
        if !seen.insert(c) || seen.len() > 4096 {
            continue;
        }
        for n in &eg[c].nodes {
            stack.extend(n.children().iter().map(|k| eg.find(*k)));
        }
    }
    false
}

/// `reduce(X, ρA, d), reduce(Y, ρB, d) == the fields of reduce(tuple(X, Y), ρA × ρB, d)`
/// for independent tensor-level sums and maxima over one domain.
fn product(m: &Match<'_>) -> Vec<(Id, Rhs)> {
    let (a, b) = (m.eg.find(m.id("?a")), m.eg.find(m.id("?b")));
    let (x, y) = (m.eg.find(m.id("?x")), m.eg.find(m.id("?y")));
    if a >= b || x == y {
        return vec![];
    }
    let (Some(tx), Some(ty), Some(ra), Some(rb)) =
        (m.tensor("?x"), m.tensor("?y"), m.attr("?r1"), m.attr("?r2"))
    else {
        return vec![];
    };
    if tx.shape != ty.shape
        || !tx.state.is_empty()
        || !ty.state.is_empty()
        || !efir_dialect_red::is_simple(ra)
        || !efir_dialect_red::is_simple(rb)
    {
        return vec![];
    }
    if m.eg[a].data.ty().and_then(|t| t.as_tensor()).is_none()
        || reaches(m.eg, x, b)
        || reaches(m.eg, y, a)
    {
        return vec![];
    }
    let r = Attr::Term(
        "red.prod".into(),
        vec![(None, ra.clone()), (None, rb.clone())],
    );
    let t = node(
        "tensor.reduce",
        vec![
            node("tensor.tuple", vec![m.class("?x"), m.class("?y")]),
            Rhs::Attr(r),
            m.class("?d"),
        ],
    );
    vec![(a, get(t.clone(), 0)), (b, get(t, 1))]
}

/// `softmax(z)·V == (Σ_k exp(z−m)·v) / (Σ_k exp(z−m))` as one repaired
/// reduction over the key dim: the composition of moving the division after
/// the matmul, the matmul as a reduction over K, and repair fusion of max,
/// normalizer and weighted sum. With `z: [..., M, K]` and `V: [..., K, N]`,
/// both operands are laid out as `[..., M, K, N]` (z broadcast along N, V
/// along M) and reduced over K; the state fields are `[..., M, N]`.
fn softmax_matmul(m: &Match<'_>) -> Vec<Rhs> {
    let (Some(d), Some(z), Some(mb), Some(v), Some(out)) = (
        m.int("?d"),
        m.tensor("?z"),
        m.tensor("?mb"),
        m.tensor("?v"),
        m.ty(),
    ) else {
        return vec![];
    };
    let r = z.rank();
    if r < 2
        || d + 1 != r
        || !is_term(m.attr("?rs"), "red.sum")
        || !keepdim(mb, z, d)
        || !z.dtype.is_float()
    {
        return vec![];
    }
    // V's batch dims are z's, or 1 where V is shared along one (grouped
    // query attention: the key/value heads of a group of query heads).
    if !z.state.is_empty()
        || !v.state.is_empty()
        || v.rank() != r
        || z.shape[..r - 2]
            .iter()
            .zip(&v.shape[..r - 2])
            .any(|(a, b)| a != b && !b.is_one())
        || z.shape[r - 1] != v.shape[r - 2]
    {
        return vec![];
    }
    if max_of(m.eg, m.id("?mb"), m.id("?z"), d).is_none() {
        return vec![];
    }
    let ty = |dt: efir_ir::DType, shape: Vec<efir_ir::Dim>| {
        Rhs::Attr(Attr::Type(Box::new(efir_ir::Type::Tensor(
            TensorType::new(dt, shape),
        ))))
    };
    let batch = &z.shape[..r - 2];
    let (mm, k, n) = (
        z.shape[r - 2].clone(),
        z.shape[r - 1].clone(),
        v.shape[r - 1].clone(),
    );
    let one = efir_ir::Dim::Static(1);
    let shape = |a: &[efir_ir::Dim]| -> Vec<efir_ir::Dim> {
        batch.iter().cloned().chain(a.iter().cloned()).collect()
    };
    let full = shape(&[mm.clone(), k.clone(), n.clone()]);
    let zr = node(
        "tensor.reshape",
        vec![
            m.class("?z"),
            ty(z.dtype, shape(&[mm.clone(), k.clone(), one.clone()])),
        ],
    );
    let zb = node("tensor.broadcast", vec![zr, ty(z.dtype, full.clone())]);
    let vshape = |a: &[efir_ir::Dim]| -> Vec<efir_ir::Dim> {
        v.shape[..r - 2]
            .iter()
            .cloned()
            .chain(a.iter().cloned())
            .collect()
    };
    let vr = node(
        "tensor.reshape",
        vec![m.class("?v"), ty(v.dtype, vshape(&[one, k, n.clone()]))],
    );
    let vc = node(
        "ew.cast",
        vec![
            vr,
            ty(
                z.dtype,
                vshape(&[efir_ir::Dim::Static(1), z.shape[r - 1].clone(), n]),
            ),
        ],
    );
    let vb = node("tensor.broadcast", vec![vc, ty(z.dtype, full)]);
    let consumer = Attr::Term(
        "red.prod".into(),
        vec![(None, Attr::term("red.sum")), (None, Attr::term("red.sum"))],
    );
    let dt = z.dtype;
    let red = repair(consumer, exp_fw(dt), exp_h2(dt));
    let t = node(
        "tensor.reduce",
        vec![
            node("tensor.tuple", vec![zb, vb]),
            Rhs::Attr(red),
            super::int(r - 1),
        ],
    );
    let o = node("ew.div", vec![get(t.clone(), 2), get(t, 1)]);
    if out.dtype == z.dtype {
        vec![o]
    } else {
        vec![node("ew.cast", vec![o, ty(out.dtype, out.shape.clone())])]
    }
}

/// The reduction-fusion rules.
pub fn rules() -> Vec<RuleDef> {
    let f = "fusion";
    vec![
        super::rule(
            f,
            "fuse.softmax-matmul",
            "cast(exp(z−m)/Σexp(z−m))·V == cast(get2(T)/get1(T)), T = reduce(tuple(z↑, V↑), repair(max, sum×sum; h = c·exp(s − s')), K)",
            "(tensor.matmul (ew.cast (ew.div (ew.exp (ew.sub ?z ?mb)) (tensor.reshape (tensor.reduce (ew.exp (ew.sub ?z ?mb)) ?rs ?d) ?t2)) ?t) ?v)",
            softmax_matmul,
        ),
        super::rule(
            f,
            "fuse.softmax-matmul-uncast",
            "(exp(z−m)/Σexp(z−m))·V == get2(T)/get1(T), T = reduce(tuple(z↑, V↑), repair(max, sum×sum; h = c·exp(s − s')), K)",
            "(tensor.matmul (ew.div (ew.exp (ew.sub ?z ?mb)) (tensor.reshape (tensor.reduce (ew.exp (ew.sub ?z ?mb)) ?rs ?d) ?t2)) ?v)",
            softmax_matmul,
        ),
        multi_rule(
            f,
            "fuse.product",
            "reduce(X,ρA,d), reduce(Y,ρB,d) == get_i(reduce(tuple(X, Y), ρA×ρB, d)) for independent X, Y",
            "?a = (tensor.reduce ?x ?r1 ?d), ?b = (tensor.reduce ?y ?r2 ?d)",
            product,
        ),
        multi_rule(
            f,
            "fuse.repair-normalizer",
            "max_d(x), sum_d(exp(x − max)) == get_0,1(reduce(x, repair(max, sum; h = c·exp(s − s')), d))",
            "?l = (tensor.reduce ?e ?r ?d), ?e = (ew.exp (ew.sub ?x ?mb))",
            normalizer,
        ),
        multi_rule(
            f,
            "fuse.repair-weighted-sum",
            "max_d(x), sum_d(exp(x − max)), sum_d(exp(x − max)·v) == get_0,1,2(reduce(tuple(x, v), repair(max, sum×sum; h = c·exp(s − s')), d))",
            "?e = (ew.exp (ew.sub ?x ?mb)), ?l = (tensor.reduce ?e ?r1 ?d), ?w = (tensor.reduce (ew.mul ?e ?v) ?r2 ?d)",
            weighted,
        ),
    ]
}
