//! Propagation: partitions and replicates move to the inputs of an op,
//! combines move after it, so that a decomposition chosen at one op extends
//! through its neighbours (the paper's section 4.3).

use super::{
    aligned_view, combine, has_axis, node, op_rule, partition, replicate, rule, with_state, Match,
    OpRhsFn, Rhs, RuleDef,
};
use efir_ir::{AxisState, Type};

fn pd(m: &Match<'_>) -> Option<(usize, String)> {
    Some((m.int("?d")?, m.axis("?p")?))
}

/// `part(f(X), d) == f(part(X, d))` for a unary pointwise `f`.
fn partition_unary(m: &Match<'_>, op: &str) -> Vec<Rhs> {
    let (Some((d, p)), Some(x)) = (pd(m), m.tensor("?x")) else {
        return vec![];
    };
    if has_axis(x, &p) {
        return vec![];
    }
    vec![node(op, vec![partition(m.class("?x"), d, &p)])]
}

/// `part(f(A, B), d) == f(view(A), view(B))`, a view partitioning the
/// aligned dim or replicating a broadcast operand.
fn partition_binary(m: &Match<'_>, op: &str, extra: Vec<Rhs>) -> Vec<Rhs> {
    let (Some((d, p)), Some(r), Some(a), Some(b)) = (pd(m), m.ty(), m.tensor("?a"), m.tensor("?b"))
    else {
        return vec![];
    };
    let rank = r.rank();
    let (Some(va), Some(vb)) = (
        aligned_view(m.class("?a"), a, rank, d, &p, &r.shape),
        aligned_view(m.class("?b"), b, rank, d, &p, &r.shape),
    ) else {
        return vec![];
    };
    let mut kids = vec![va, vb];
    kids.extend(extra);
    vec![node(op, kids)]
}

/// `part(select(C, A, B), d) == select(view(C), view(A), view(B))`.
fn partition_select(m: &Match<'_>) -> Vec<Rhs> {
    let (Some((d, p)), Some(r)) = (pd(m), m.ty()) else {
        return vec![];
    };
    let mut kids = Vec::new();
    for name in ["?c", "?a", "?b"] {
        let Some(t) = m.tensor(name) else {
            return vec![];
        };
        match aligned_view(m.class(name), t, r.rank(), d, &p, &r.shape) {
            Some(v) => kids.push(v),
            None => return vec![],
        }
    }
    vec![node("ew.select", kids)]
}

/// `repl(cmp(A, B)) == cmp(repl(A), repl(B))`.
fn replicate_cmp(m: &Match<'_>) -> Vec<Rhs> {
    let Some(p) = m.axis("?p") else { return vec![] };
    let (Some(a), Some(b)) = (m.tensor("?a"), m.tensor("?b")) else {
        return vec![];
    };
    if has_axis(a, &p) || has_axis(b, &p) {
        return vec![];
    }
    vec![node(
        "ew.cmp",
        vec![
            replicate(m.class("?a"), &p),
            replicate(m.class("?b"), &p),
            m.class("?pred"),
        ],
    )]
}

/// `f(combine(X, d)) == combine(f(X), d)` for a unary pointwise `f`.
fn combine_after_unary(m: &Match<'_>, op: &str) -> Vec<Rhs> {
    let Some((d, p)) = pd(m) else { return vec![] };
    vec![combine(node(op, vec![m.class("?x")]), d, &p)]
}

/// `f(combine(X, d), B) == combine(f(X, view(B)), d)` and the mirror image.
fn combine_after_binary(m: &Match<'_>, op: &str, left: bool) -> Vec<Rhs> {
    let (Some((d, p)), Some(r), Some(o)) = (pd(m), m.ty(), m.tensor("?o")) else {
        return vec![];
    };
    let Some(vo) = aligned_view(m.class("?o"), o, r.rank(), d, &p, &r.shape) else {
        return vec![];
    };
    let kids = if left {
        vec![m.class("?x"), vo]
    } else {
        vec![vo, m.class("?x")]
    };
    vec![combine(node(op, kids), d, &p)]
}

/// `repl(f(A, ...)) == f(repl(A), ...)` for pointwise and matmul ops.
fn replicate_through(m: &Match<'_>, op: &str, n: usize) -> Vec<Rhs> {
    let Some(p) = m.axis("?p") else { return vec![] };
    let names = ["?a", "?b", "?c"];
    let mut kids = Vec::new();
    for name in &names[..n] {
        match m.tensor(name) {
            Some(t) if !has_axis(t, &p) => kids.push(replicate(m.class(name), &p)),
            _ => return vec![],
        }
    }
    vec![node(op, kids)]
}

/// `part(A·B, d)`: M → tile.matmul(part(A), repl(B)); N → tile.matmul(repl(A), part(B));
/// batch → matmul of the aligned views.
fn partition_matmul(m: &Match<'_>, op: &str) -> Vec<Rhs> {
    let (Some((d, p)), Some(r), Some(a), Some(b)) = (pd(m), m.ty(), m.tensor("?a"), m.tensor("?b"))
    else {
        return vec![];
    };
    if has_axis(a, &p) || has_axis(b, &p) {
        return vec![];
    }
    let (ra, rb, rr) = (a.rank(), b.rank(), r.rank());
    if d == rr - 2 {
        vec![node(
            "tile.matmul",
            vec![
                partition(m.class("?a"), ra - 2, &p),
                replicate(m.class("?b"), &p),
            ],
        )]
    } else if d == rr - 1 {
        vec![node(
            "tile.matmul",
            vec![
                replicate(m.class("?a"), &p),
                partition(m.class("?b"), rb - 1, &p),
            ],
        )]
    } else {
        let batch = &r.shape[..rr - 2];
        let view = |x: Rhs, t: &efir_ir::TensorType| {
            aligned_view(
                x,
                &efir_ir::TensorType {
                    shape: t.shape[..t.rank() - 2].to_vec(),
                    ..t.clone()
                },
                rr - 2,
                d,
                &p,
                batch,
            )
        };
        match (view(m.class("?a"), a), view(m.class("?b"), b)) {
            (Some(va), Some(vb)) => vec![node(op, vec![va, vb])],
            _ => vec![],
        }
    }
}

/// `part(reduce(X, ρ, r), d) == reduce(part(X, d'), ρ, r)`.
fn partition_reduce(m: &Match<'_>) -> Vec<Rhs> {
    let (Some((d, p)), Some(x), Some(r)) = (pd(m), m.tensor("?x"), m.int("?r")) else {
        return vec![];
    };
    if has_axis(x, &p) {
        return vec![];
    }
    let dx = if d < r { d } else { d + 1 };
    vec![node(
        "tensor.reduce",
        vec![
            partition(m.class("?x"), dx, &p),
            m.class("?rho"),
            m.class("?r"),
        ],
    )]
}

/// `repl(reduce(X, ρ, r)) == reduce(repl(X), ρ, r)`.
fn replicate_reduce(m: &Match<'_>) -> Vec<Rhs> {
    let (Some(p), Some(x)) = (m.axis("?p"), m.tensor("?x")) else {
        return vec![];
    };
    if has_axis(x, &p) {
        return vec![];
    }
    vec![node(
        "tensor.reduce",
        vec![replicate(m.class("?x"), &p), m.class("?rho"), m.class("?r")],
    )]
}

/// `part(transpose(X, π), d) == transpose(part(X, π[d]), π)`.
fn partition_transpose(m: &Match<'_>) -> Vec<Rhs> {
    let (Some((d, p)), Some(x), Some(perm)) = (
        pd(m),
        m.tensor("?x"),
        m.attr("?perm").and_then(|a| a.as_int_array()),
    ) else {
        return vec![];
    };
    if has_axis(x, &p) {
        return vec![];
    }
    let Some(&src) = perm.get(d) else {
        return vec![];
    };
    vec![node(
        "tensor.transpose",
        vec![partition(m.class("?x"), src as usize, &p), m.class("?perm")],
    )]
}

/// The declared type of `?t`, with one more axis.
fn declared_with(m: &Match<'_>, p: &str, s: AxisState) -> Option<Rhs> {
    match m.attr("?t")? {
        efir_ir::Attr::Type(t) => match t.as_ref() {
            Type::Tensor(t) => Some(Rhs::Attr(with_state(t, p, s))),
            Type::Tuple(_) => None,
        },
        _ => None,
    }
}

/// `part(broadcast(X, T), d) == broadcast(view(X), T + part(d))`.
fn partition_broadcast(m: &Match<'_>) -> Vec<Rhs> {
    let (Some((d, p)), Some(r), Some(x)) = (pd(m), m.ty(), m.tensor("?x")) else {
        return vec![];
    };
    // Only where the dim is not stretched: a replicated operand broadcasts
    // to a replicated value, never to a partitioned one.
    if efir_ir::shape::is_broadcast_along(&x.shape, r.rank(), d, &r.shape) {
        return vec![];
    }
    let (Some(vx), Some(t)) = (
        aligned_view(m.class("?x"), x, r.rank(), d, &p, &r.shape),
        declared_with(m, &p, AxisState::Part(d)),
    ) else {
        return vec![];
    };
    vec![node("tensor.broadcast", vec![vx, t])]
}

/// `part(cast(X, T), d) == cast(part(X, d), T + part(d))`.
fn partition_cast(m: &Match<'_>) -> Vec<Rhs> {
    let (Some((d, p)), Some(x)) = (pd(m), m.tensor("?x")) else {
        return vec![];
    };
    if has_axis(x, &p) {
        return vec![];
    }
    let Some(t) = declared_with(m, &p, AxisState::Part(d)) else {
        return vec![];
    };
    vec![node("ew.cast", vec![partition(m.class("?x"), d, &p), t])]
}

/// `repl(cast(X, T)) == cast(repl(X), T + repl)`.
fn replicate_cast(m: &Match<'_>) -> Vec<Rhs> {
    let (Some(p), Some(x)) = (m.axis("?p"), m.tensor("?x")) else {
        return vec![];
    };
    if has_axis(x, &p) {
        return vec![];
    }
    let Some(t) = declared_with(m, &p, AxisState::Repl) else {
        return vec![];
    };
    vec![node("ew.cast", vec![replicate(m.class("?x"), &p), t])]
}

/// `part(full(v, T), d) == full(v, T + part(d))`; likewise for replicate.
fn partition_full(m: &Match<'_>) -> Vec<Rhs> {
    let Some((d, p)) = pd(m) else { return vec![] };
    let Some(t) = declared_with(m, &p, AxisState::Part(d)) else {
        return vec![];
    };
    vec![node("tensor.full", vec![m.class("?v"), t])]
}

fn replicate_full(m: &Match<'_>) -> Vec<Rhs> {
    let Some(p) = m.axis("?p") else { return vec![] };
    let Some(t) = declared_with(m, &p, AxisState::Repl) else {
        return vec![];
    };
    vec![node("tensor.full", vec![m.class("?v"), t])]
}

/// `part(reshape(X, T), d) == reshape(part(X, d), T + part(d))` when dims
/// `0..=d` are unchanged by the reshape.
fn partition_reshape(m: &Match<'_>) -> Vec<Rhs> {
    let (Some((d, p)), Some(x), Some(r)) = (pd(m), m.tensor("?x"), m.ty()) else {
        return vec![];
    };
    if has_axis(x, &p) || d >= x.rank() || x.shape[..=d] != r.shape[..=d] {
        return vec![];
    }
    let Some(t) = declared_with(m, &p, AxisState::Part(d)) else {
        return vec![];
    };
    vec![node(
        "tensor.reshape",
        vec![partition(m.class("?x"), d, &p), t],
    )]
}

/// `part(get_i(reduce(X, ρ, r)), d) == get_i(reduce(part(X, d'), ρ, r))`
/// for reductions with several state fields (and likewise for a tuple input
/// of two fields).
fn partition_get_reduce(m: &Match<'_>, tuple: bool) -> Vec<Rhs> {
    let (Some((d, p)), Some(r)) = (pd(m), m.int("?r")) else {
        return vec![];
    };
    let dx = if d < r { d } else { d + 1 };
    let input = if tuple {
        let (Some(a), Some(b)) = (m.tensor("?a"), m.tensor("?b")) else {
            return vec![];
        };
        if has_axis(a, &p) || has_axis(b, &p) || a.shape != b.shape {
            return vec![];
        }
        node(
            "tensor.tuple",
            vec![
                partition(m.class("?a"), dx, &p),
                partition(m.class("?b"), dx, &p),
            ],
        )
    } else {
        let Some(x) = m.tensor("?x") else {
            return vec![];
        };
        if has_axis(x, &p) {
            return vec![];
        }
        partition(m.class("?x"), dx, &p)
    };
    vec![node(
        "tensor.get",
        vec![
            node("tensor.reduce", vec![input, m.class("?rho"), m.class("?r")]),
            m.class("?i"),
        ],
    )]
}

/// The propagation rules.
pub fn rules() -> Vec<RuleDef> {
    let f = "propagation";
    let mut v = Vec::new();
    // (The pointwise ops come from the `ew` op table.)
    for op in efir_dialect_ew::pointwise_ops(1) {
        let short = &op[3..];
        v.push(op_rule(
            f,
            format!("prop.partition-through-{short}"),
            format!("part({short}(X), d) == {short}(part(X, d))"),
            format!("(par.partition ({op} ?x) ?d ?p)"),
            partition_unary,
            op,
        ));
        v.push(op_rule(
            f,
            format!("prop.combine-after-{short}"),
            format!("{short}(combine(X, d)) == combine({short}(X), d)"),
            format!("({op} (par.combine ?x ?d ?p))"),
            combine_after_unary,
            op,
        ));
    }
    for op in efir_dialect_ew::pointwise_ops(2) {
        let short = &op[3..];
        let part: OpRhsFn = |m, op| partition_binary(m, op, vec![]);
        let left: OpRhsFn = |m, op| combine_after_binary(m, op, true);
        let right: OpRhsFn = |m, op| combine_after_binary(m, op, false);
        let repl: OpRhsFn = |m, op| replicate_through(m, op, 2);
        v.push(op_rule(
            f,
            format!("prop.partition-through-{short}"),
            format!("part({short}(A, B), d) == {short}(view(A), view(B))"),
            format!("(par.partition ({op} ?a ?b) ?d ?p)"),
            part,
            op,
        ));
        v.push(op_rule(
            f,
            format!("prop.combine-after-{short}-lhs"),
            format!("{short}(combine(X, d), B) == combine({short}(X, view(B)), d)"),
            format!("({op} (par.combine ?x ?d ?p) ?o)"),
            left,
            op,
        ));
        v.push(op_rule(
            f,
            format!("prop.combine-after-{short}-rhs"),
            format!("{short}(A, combine(X, d)) == combine({short}(view(A), X), d)"),
            format!("({op} ?o (par.combine ?x ?d ?p))"),
            right,
            op,
        ));
        v.push(op_rule(
            f,
            format!("prop.replicate-through-{short}"),
            format!("repl({short}(A, B)) == {short}(repl(A), repl(B))"),
            format!("(par.replicate ({op} ?a ?b) ?p)"),
            repl,
            op,
        ));
    }
    v.push(rule(
        f,
        "prop.partition-through-select",
        "part(select(C, A, B), d) == select(view(C), view(A), view(B))",
        "(par.partition (ew.select ?c ?a ?b) ?d ?p)",
        partition_select,
    ));
    v.push(rule(
        f,
        "prop.replicate-through-select",
        "repl(select(C, A, B)) == select(repl(C), repl(A), repl(B))",
        "(par.replicate (ew.select ?a ?b ?c) ?p)",
        |m| replicate_through(m, "ew.select", 3),
    ));
    v.push(rule(
        f,
        "prop.replicate-through-cmp",
        "repl(cmp(A, B)) == cmp(repl(A), repl(B))",
        "(par.replicate (ew.cmp ?a ?b ?pred) ?p)",
        replicate_cmp,
    ));
    v.push(rule(
        f,
        "prop.partition-through-get-of-reduce",
        "part(get_i(reduce(X, ρ, r)), d) == get_i(reduce(part(X, d'), ρ, r))",
        "(par.partition (tensor.get (tensor.reduce ?x ?rho ?r) ?i) ?d ?p)",
        |m| partition_get_reduce(m, false),
    ));
    v.push(rule(f, "prop.partition-through-get-of-tuple-reduce", "part(get_i(reduce(tuple(A, B), ρ, r)), d) == get_i(reduce(tuple(part(A, d'), part(B, d')), ρ, r))", "(par.partition (tensor.get (tensor.reduce (tensor.tuple ?a ?b) ?rho ?r) ?i) ?d ?p)", |m| partition_get_reduce(m, true)));
    v.push(rule(
        f,
        "prop.partition-through-cmp",
        "part(cmp(A, B), d) == cmp(view(A), view(B))",
        "(par.partition (ew.cmp ?a ?b ?pred) ?d ?p)",
        |m| partition_binary(m, "ew.cmp", vec![m.class("?pred")]),
    ));
    v.push(rule(
        f,
        "prop.partition-through-tensor-matmul",
        "part(A·B, d) == tile.matmul(view(A), view(B))",
        "(par.partition (tensor.matmul ?a ?b) ?d ?p)",
        |m| partition_matmul(m, "tensor.matmul"),
    ));
    v.push(rule(
        f,
        "prop.replicate-through-tensor-matmul",
        "repl(A·B) == repl(A)·repl(B)",
        "(par.replicate (tensor.matmul ?a ?b) ?p)",
        |m| replicate_through(m, "tensor.matmul", 2),
    ));
    v.push(rule(
        f,
        "prop.replicate-through-tile-matmul",
        "repl(tile.matmul(A, B)) == tile.matmul(repl(A), repl(B))",
        "(par.replicate (tile.matmul ?a ?b) ?p)",
        |m| replicate_through(m, "tile.matmul", 2),
    ));
    v.push(rule(
        f,
        "prop.partition-through-reduce",
        "part(reduce(X, ρ, r), d) == reduce(part(X, d'), ρ, r)",
        "(par.partition (tensor.reduce ?x ?rho ?r) ?d ?p)",
        partition_reduce,
    ));
    v.push(rule(
        f,
        "prop.replicate-through-reduce",
        "repl(reduce(X, ρ, r)) == reduce(repl(X), ρ, r)",
        "(par.replicate (tensor.reduce ?x ?rho ?r) ?p)",
        replicate_reduce,
    ));
    v.push(rule(
        f,
        "prop.partition-through-transpose",
        "part(transpose(X, π), d) == transpose(part(X, π[d]), π)",
        "(par.partition (tensor.transpose ?x ?perm) ?d ?p)",
        partition_transpose,
    ));
    v.push(rule(
        f,
        "prop.partition-through-broadcast",
        "part(broadcast(X, T), d) == broadcast(view(X), T + part(d))",
        "(par.partition (tensor.broadcast ?x ?t) ?d ?p)",
        partition_broadcast,
    ));
    v.push(rule(
        f,
        "prop.partition-through-cast",
        "part(cast(X, T), d) == cast(part(X, d), T + part(d))",
        "(par.partition (ew.cast ?x ?t) ?d ?p)",
        partition_cast,
    ));
    v.push(rule(
        f,
        "prop.replicate-through-cast",
        "repl(cast(X, T)) == cast(repl(X), T + repl)",
        "(par.replicate (ew.cast ?x ?t) ?p)",
        replicate_cast,
    ));
    v.push(rule(
        f,
        "prop.partition-full",
        "part(full(v, T), d) == full(v, T + part(d))",
        "(par.partition (tensor.full ?v ?t) ?d ?p)",
        partition_full,
    ));
    v.push(rule(
        f,
        "prop.replicate-full",
        "repl(full(v, T)) == full(v, T + repl)",
        "(par.replicate (tensor.full ?v ?t) ?p)",
        replicate_full,
    ));
    v.push(rule(
        f,
        "prop.partition-through-reshape",
        "part(reshape(X, T), d) == reshape(part(X, d), T + part(d)) if dims 0..=d are kept",
        "(par.partition (tensor.reshape ?x ?t) ?d ?p)",
        partition_reshape,
    ));
    v
}
