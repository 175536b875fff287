//! Refinement: tensor-level matmuls and reductions expressed as
//! computations on tiles plus the ops that combine their results (the
//! paper's section 4.1). New axes are named canonically by role and extent
//! ([`super::axis_name`]).

use super::{
    axis_name, combine, has_axis, has_partial, node, partition, replicate, role, rule, Match, Rhs,
    RuleDef,
};
use efir_ir::{AxisState, Dim, TensorType};

fn splittable(d: &Dim) -> bool {
    matches!(d, Dim::Static(n) if *n > 1)
}

fn dim_is_partitioned(t: &TensorType, i: usize) -> bool {
    t.state.values().any(|s| *s == AxisState::Part(i))
}

fn operands<'a>(m: &'a Match<'_>) -> Option<(&'a TensorType, &'a TensorType)> {
    let (a, b) = (m.tensor("?a")?, m.tensor("?b")?);
    (!has_partial(a) && !has_partial(b)).then_some((a, b))
}

/// matmul over M: `A·B == combine_m( tile.matmul(part(A, M, m), repl(B, m)) )`.
fn matmul_m(m: &Match<'_>) -> Vec<Rhs> {
    let Some((a, b)) = operands(m) else {
        return vec![];
    };
    let (ra, rr) = (a.rank(), m.ty().map(|t| t.rank()).unwrap_or(0));
    let ext = &a.shape[ra - 2];
    let p = axis_name('m', ext);
    if !splittable(ext) || has_axis(a, &p) || has_axis(b, &p) || dim_is_partitioned(a, ra - 2) {
        return vec![];
    }
    let inner = node(
        "tile.matmul",
        vec![
            partition(m.class("?a"), ra - 2, &p),
            replicate(m.class("?b"), &p),
        ],
    );
    vec![combine(inner, rr - 2, &p)]
}

/// matmul over N: `A·B == combine_n( tile.matmul(repl(A, n), part(B, N, n)) )`.
fn matmul_n(m: &Match<'_>) -> Vec<Rhs> {
    let Some((a, b)) = operands(m) else {
        return vec![];
    };
    let (rb, rr) = (b.rank(), m.ty().map(|t| t.rank()).unwrap_or(0));
    let ext = &b.shape[rb - 1];
    let p = axis_name('n', ext);
    if !splittable(ext) || has_axis(a, &p) || has_axis(b, &p) || dim_is_partitioned(b, rb - 1) {
        return vec![];
    }
    let inner = node(
        "tile.matmul",
        vec![
            replicate(m.class("?a"), &p),
            partition(m.class("?b"), rb - 1, &p),
        ],
    );
    vec![combine(inner, rr - 1, &p)]
}

/// matmul over K: `A·B == reduce_sum_k( tile.matmul(part(A, K, k), part(B, K, k)) )`.
fn matmul_k(m: &Match<'_>) -> Vec<Rhs> {
    let Some((a, b)) = operands(m) else {
        return vec![];
    };
    let (ra, rb) = (a.rank(), b.rank());
    let ext = &a.shape[ra - 1];
    let p = axis_name('k', ext);
    if !splittable(ext)
        || has_axis(a, &p)
        || has_axis(b, &p)
        || dim_is_partitioned(a, ra - 1)
        || dim_is_partitioned(b, rb - 2)
    {
        return vec![];
    }
    let inner = node(
        "tile.matmul",
        vec![
            partition(m.class("?a"), ra - 1, &p),
            partition(m.class("?b"), rb - 2, &p),
        ],
    );
    vec![node(
        "par.reduce",
        vec![
            inner,
            Rhs::Attr(efir_ir::Attr::term("red.sum")),
            super::axis(&p),
        ],
    )]
}

/// matmul over a batch dim `j`: `A·B == combine_b( tensor.matmul(view(A), view(B)) )`,
/// the view a partition where the operand has the dim and a replicate where
/// it is broadcast.
fn matmul_batch(m: &Match<'_>) -> Vec<Rhs> {
    let Some((a, b)) = operands(m) else {
        return vec![];
    };
    let Some(r) = m.ty() else { return vec![] };
    let rr = r.rank();
    let mut out = Vec::new();
    for j in 0..rr.saturating_sub(2) {
        let ext = &r.shape[j];
        let p = axis_name('b', ext);
        if !splittable(ext) || r.state.values().any(|s| *s == AxisState::Part(j)) {
            continue;
        }
        let batch = &r.shape[..rr - 2];
        let view = |x: Rhs, t: &TensorType| {
            super::aligned_view(
                x,
                &TensorType {
                    shape: t.shape[..t.rank() - 2].to_vec(),
                    ..t.clone()
                },
                rr - 2,
                j,
                &p,
                batch,
            )
        };
        let (Some(va), Some(vb)) = (view(m.class("?a"), a), view(m.class("?b"), b)) else {
            continue;
        };
        out.push(combine(node("tensor.matmul", vec![va, vb]), j, &p));
    }
    out
}

/// reduce over an output dim `i`: `reduce(X, ρ, d) == combine_i( reduce(part(X, i), ρ, d) )`.
fn reduce_out(m: &Match<'_>) -> Vec<Rhs> {
    // Tuple results (reducers with several state fields) are not combined.
    let (Some(x), Some(d), Some(_)) = (m.tensor("?x"), m.int("?d"), m.ty()) else {
        return vec![];
    };
    if has_partial(x) {
        return vec![];
    }
    let mut out = Vec::new();
    for i in (0..x.rank()).filter(|i| *i != d) {
        let ext = &x.shape[i];
        let p = axis_name(role(i, x.rank()), ext);
        if !splittable(ext) || has_axis(x, &p) || dim_is_partitioned(x, i) {
            continue;
        }
        let inner = node(
            "tensor.reduce",
            vec![
                partition(m.class("?x"), i, &p),
                m.class("?r"),
                m.class("?d"),
            ],
        );
        out.push(combine(inner, if i < d { i } else { i - 1 }, &p));
    }
    out
}

/// reduce over the reduced dim: `reduce(X, ρ, d) == reduce_ρ,k( reduce(part(X, d, k), ρ, d) )`
/// (ρ associative with an identity; every reducer here is).
fn reduce_split(m: &Match<'_>) -> Vec<Rhs> {
    let (Some(x), Some(d)) = (m.tensor("?x"), m.int("?d")) else {
        return vec![];
    };
    let ext = &x.shape[d];
    let p = axis_name('k', ext);
    if has_partial(x) || !splittable(ext) || has_axis(x, &p) || dim_is_partitioned(x, d) {
        return vec![];
    }
    let inner = node(
        "tensor.reduce",
        vec![
            partition(m.class("?x"), d, &p),
            m.class("?r"),
            m.class("?d"),
        ],
    );
    vec![node(
        "par.reduce",
        vec![inner, m.class("?r"), super::axis(&p)],
    )]
}

/// reduce over the reduced dim of a tuple input (fused reductions):
/// `reduce(tuple(A, B), ρ, d) == reduce_ρ,k( reduce(tuple(part(A, d, k), part(B, d, k)), ρ, d) )`.
fn reduce_split_tuple(m: &Match<'_>) -> Vec<Rhs> {
    let (Some(a), Some(b), Some(d)) = (m.tensor("?a"), m.tensor("?b"), m.int("?d")) else {
        return vec![];
    };
    if a.shape != b.shape || a.state != b.state || d >= a.rank() {
        return vec![];
    }
    let ext = &a.shape[d];
    let p = axis_name('k', ext);
    if has_partial(a) || !splittable(ext) || has_axis(a, &p) || dim_is_partitioned(a, d) {
        return vec![];
    }
    let tuple = node(
        "tensor.tuple",
        vec![
            partition(m.class("?a"), d, &p),
            partition(m.class("?b"), d, &p),
        ],
    );
    let inner = node("tensor.reduce", vec![tuple, m.class("?r"), m.class("?d")]);
    vec![node(
        "par.reduce",
        vec![inner, m.class("?r"), super::axis(&p)],
    )]
}

/// The refinement rules.
pub fn rules() -> Vec<RuleDef> {
    let f = "refinement";
    let mut v = Vec::new();
    for op in ["tensor.matmul", "tile.matmul"] {
        let short = op.split('.').next().unwrap_or("");
        v.push(rule(
            f,
            format!("refine.{short}-matmul-m"),
            "A·B == combine_m(tile.matmul(part(A,M,m), repl(B,m)))",
            format!("({op} ?a ?b)"),
            matmul_m,
        ));
        v.push(rule(
            f,
            format!("refine.{short}-matmul-n"),
            "A·B == combine_n(tile.matmul(repl(A,n), part(B,N,n)))",
            format!("({op} ?a ?b)"),
            matmul_n,
        ));
        v.push(rule(
            f,
            format!("refine.{short}-matmul-k"),
            "A·B == reduce_sum_k(tile.matmul(part(A,K,k), part(B,K,k)))",
            format!("({op} ?a ?b)"),
            matmul_k,
        ));
    }
    v.push(rule(
        f,
        "refine.matmul-batch",
        "A·B == combine_b(tensor.matmul(view_b(A), view_b(B)))",
        "(tensor.matmul ?a ?b)",
        matmul_batch,
    ));
    v.push(rule(
        f,
        "refine.reduce-output-dim",
        "reduce(X,ρ,d) == combine_i(reduce(part(X,i),ρ,d))",
        "(tensor.reduce ?x ?r ?d)",
        reduce_out,
    ));
    v.push(rule(
        f,
        "refine.reduce-tuple-reduced-dim",
        "reduce(tuple(A,B),ρ,d) == reduce_ρ,k(reduce(tuple(part(A,d,k), part(B,d,k)),ρ,d))",
        "(tensor.reduce (tensor.tuple ?a ?b) ?r ?d)",
        reduce_split_tuple,
    ));
    v.push(rule(
        f,
        "refine.reduce-reduced-dim",
        "reduce(X,ρ,d) == reduce_ρ,k(reduce(part(X,d,k),ρ,d))",
        "(tensor.reduce ?x ?r ?d)",
        reduce_split,
    ));
    v
}
