//! Algebraic rewrites (real arithmetic): matmul associativity and
//! distributivity, scaling and division moved across a matmul, and
//! exp/log and reduction identities. Commutativity and associativity of
//! pointwise ops are not included: they bloat the e-graph.

use super::{node, rule, Match, Rhs, RuleDef};
use efir_ir::{Dim, TensorType};

/// A per-row scale of a matmul's left operand: broadcast along its last
/// dim (the contraction), at least a matrix.
fn per_row(s: &TensorType) -> bool {
    s.rank() >= 2 && s.shape.last() == Some(&Dim::Static(1))
}

fn no_state(ts: &[Option<&TensorType>]) -> bool {
    ts.iter().all(|t| t.is_some_and(|t| t.state.is_empty()))
}

/// `cast(a ⊙ b) == cast(a) ⊙ cast(b)` (real arithmetic: a cast changes
/// only the precision).
fn cast_of_mul(m: &Match<'_>) -> Vec<Rhs> {
    let (Some(a), Some(b), Some(r)) = (m.tensor("?a"), m.tensor("?b"), m.ty()) else {
        return vec![];
    };
    let ty = |t: &TensorType| {
        Rhs::Attr(efir_ir::Attr::Type(Box::new(efir_ir::Type::Tensor(
            t.with_dtype(r.dtype),
        ))))
    };
    vec![node(
        "ew.mul",
        vec![
            node("ew.cast", vec![m.class("?a"), ty(a)]),
            node("ew.cast", vec![m.class("?b"), ty(b)]),
        ],
    )]
}

/// `(X ⊙ s) ⊙ G == s ⊙ (X ⊙ G)` for a per-row `s` and a `G` that is not
/// per-row: the per-row factor moves outward (a targeted associativity that
/// exposes `(s ⊙ X)·W`).
fn per_row_outward(m: &Match<'_>) -> Vec<Rhs> {
    let (Some(s), Some(g), Some(x)) = (m.tensor("?s"), m.tensor("?g"), m.tensor("?x")) else {
        return vec![];
    };
    if !per_row(s) || per_row(g) || per_row(x) {
        return vec![];
    }
    vec![node(
        "ew.mul",
        vec![
            m.class("?s"),
            node("ew.mul", vec![m.class("?x"), m.class("?g")]),
        ],
    )]
}

/// `reduce_ρ(X ⊕ c, d) == reduce_ρ(X, d) ⊕ c'` for `c` broadcast along `d`,
/// where `ρ` is max and `⊕` is `+` (the max of shifted values), or `ρ` is
/// sum and `⊕` is `⊙` (a factor out of a sum: `alg.sum-of-scaled`).
fn max_of_shifted(m: &Match<'_>) -> Vec<Rhs> {
    let (Some(c), Some(x), Some(d), Some(r)) =
        (m.tensor("?c"), m.tensor("?x"), m.int("?d"), m.attr("?r"))
    else {
        return vec![];
    };
    if !matches!(r, efir_ir::Attr::Term(n, a) if n == "red.max" && a.is_empty())
        || c.rank() != x.rank()
        || c.shape[d] != Dim::Static(1)
        || !c.state.is_empty()
        || !x.state.is_empty()
    {
        return vec![];
    }
    let mut shape = c.shape.clone();
    shape.remove(d);
    let t = efir_ir::Attr::Type(Box::new(efir_ir::Type::Tensor(TensorType::new(
        c.dtype, shape,
    ))));
    let c1 = node("tensor.reshape", vec![m.class("?c"), Rhs::Attr(t)]);
    vec![node(
        "ew.add",
        vec![
            node(
                "tensor.reduce",
                vec![m.class("?x"), m.class("?r"), m.class("?d")],
            ),
            c1,
        ],
    )]
}

/// The algebraic rules.
pub fn rules() -> Vec<RuleDef> {
    let f = "algebraic";
    vec![
        rule(
            f,
            "alg.cast-of-mul",
            "cast(a ⊙ b) == cast(a) ⊙ cast(b)",
            "(ew.cast (ew.mul ?a ?b) ?t)",
            cast_of_mul,
        ),
        rule(
            f,
            "alg.per-row-factor-outward",
            "(X ⊙ s) ⊙ G == s ⊙ (X ⊙ G) for per-row s",
            "(ew.mul (ew.mul ?x ?s) ?g)",
            per_row_outward,
        ),
        rule(
            f,
            "alg.matmul-assoc-right",
            "(A·B)·C == A·(B·C)",
            "(tensor.matmul (tensor.matmul ?a ?b) ?c)",
            |m: &Match<'_>| {
                vec![node(
                    "tensor.matmul",
                    vec![
                        m.class("?a"),
                        node("tensor.matmul", vec![m.class("?b"), m.class("?c")]),
                    ],
                )]
            },
        ),
        rule(
            f,
            "alg.matmul-assoc-left",
            "A·(B·C) == (A·B)·C",
            "(tensor.matmul ?a (tensor.matmul ?b ?c))",
            |m: &Match<'_>| {
                vec![node(
                    "tensor.matmul",
                    vec![
                        node("tensor.matmul", vec![m.class("?a"), m.class("?b")]),
                        m.class("?c"),
                    ],
                )]
            },
        ),
        rule(
            f,
            "alg.matmul-factor-left",
            "A·B + A·C == A·(B + C)",
            "(ew.add (tensor.matmul ?a ?b) (tensor.matmul ?a ?c))",
            |m: &Match<'_>| {
                vec![node(
                    "tensor.matmul",
                    vec![
                        m.class("?a"),
                        node("ew.add", vec![m.class("?b"), m.class("?c")]),
                    ],
                )]
            },
        ),
        rule(
            f,
            "alg.matmul-factor-right",
            "A·C + B·C == (A + B)·C",
            "(ew.add (tensor.matmul ?a ?c) (tensor.matmul ?b ?c))",
            |m: &Match<'_>| {
                vec![node(
                    "tensor.matmul",
                    vec![
                        node("ew.add", vec![m.class("?a"), m.class("?b")]),
                        m.class("?c"),
                    ],
                )]
            },
        ),
        rule(
            f,
            "alg.scale-after-matmul",
            "(s ⊙ X)·W == s ⊙ (X·W) for per-row s",
            "(tensor.matmul (ew.mul ?s ?x) ?w)",
            |m: &Match<'_>| {
                if !no_state(&[m.tensor("?s"), m.tensor("?x"), m.tensor("?w")])
                    || !m.tensor("?s").is_some_and(per_row)
                {
                    return vec![];
                }
                vec![node(
                    "ew.mul",
                    vec![
                        m.class("?s"),
                        node("tensor.matmul", vec![m.class("?x"), m.class("?w")]),
                    ],
                )]
            },
        ),
        rule(
            f,
            "alg.scale-after-matmul-rhs",
            "(X ⊙ s)·W == (X·W) ⊙ s for per-row s",
            "(tensor.matmul (ew.mul ?x ?s) ?w)",
            |m: &Match<'_>| {
                if !no_state(&[m.tensor("?s"), m.tensor("?x"), m.tensor("?w")])
                    || !m.tensor("?s").is_some_and(per_row)
                {
                    return vec![];
                }
                vec![node(
                    "ew.mul",
                    vec![
                        node("tensor.matmul", vec![m.class("?x"), m.class("?w")]),
                        m.class("?s"),
                    ],
                )]
            },
        ),
        rule(
            f,
            "alg.scale-before-matmul",
            "s ⊙ (X·W) == (s ⊙ X)·W for per-row s",
            "(ew.mul ?s (tensor.matmul ?x ?w))",
            |m: &Match<'_>| {
                if !no_state(&[m.tensor("?s"), m.tensor("?x"), m.tensor("?w")])
                    || !m.tensor("?s").is_some_and(per_row)
                {
                    return vec![];
                }
                vec![node(
                    "tensor.matmul",
                    vec![
                        node("ew.mul", vec![m.class("?s"), m.class("?x")]),
                        m.class("?w"),
                    ],
                )]
            },
        ),
        rule(
            f,
            "alg.div-after-matmul",
            "(X / s)·W == (X·W) / s for per-row s",
            "(tensor.matmul (ew.div ?x ?s) ?w)",
            |m: &Match<'_>| {
                if !no_state(&[m.tensor("?s"), m.tensor("?x"), m.tensor("?w")])
                    || !m.tensor("?s").is_some_and(per_row)
                {
                    return vec![];
                }
                vec![node(
                    "ew.div",
                    vec![
                        node("tensor.matmul", vec![m.class("?x"), m.class("?w")]),
                        m.class("?s"),
                    ],
                )]
            },
        ),
        rule(
            f,
            "alg.div-before-matmul",
            "(X·W) / s == (X / s)·W for per-row s",
            "(ew.div (tensor.matmul ?x ?w) ?s)",
            |m: &Match<'_>| {
                if !no_state(&[m.tensor("?s"), m.tensor("?x"), m.tensor("?w")])
                    || !m.tensor("?s").is_some_and(per_row)
                {
                    return vec![];
                }
                vec![node(
                    "tensor.matmul",
                    vec![
                        node("ew.div", vec![m.class("?x"), m.class("?s")]),
                        m.class("?w"),
                    ],
                )]
            },
        ),
        // exp(a) ⊙ exp(b) and exp(a) / exp(b) are only ever folded, never
        // introduced: exp(a − b) is bounded where exp(a) and exp(b) may
        // both overflow (a softmax's exp(z − max z)), and inf / inf or
        // inf ⊙ 0 is NaN in floating point (issue 30).
        rule(
            f,
            "alg.exp-of-sum",
            "exp(a) ⊙ exp(b) == exp(a + b), folded only (exp(a + b) is never split)",
            "(ew.mul (ew.exp ?a) (ew.exp ?b))",
            |m: &Match<'_>| {
                vec![node(
                    "ew.exp",
                    vec![node("ew.add", vec![m.class("?a"), m.class("?b")])],
                )]
            },
        ),
        rule(
            f,
            "alg.exp-of-difference",
            "exp(a) / exp(b) == exp(a − b), folded only (exp(a − b) is never split)",
            "(ew.div (ew.exp ?a) (ew.exp ?b))",
            |m: &Match<'_>| {
                vec![node(
                    "ew.exp",
                    vec![node("ew.sub", vec![m.class("?a"), m.class("?b")])],
                )]
            },
        ),
        rule(
            f,
            "alg.max-of-shifted",
            "max_d(X + c) == max_d(X) + c' for c broadcast along d",
            "(tensor.reduce (ew.add ?x ?c) ?r ?d)",
            max_of_shifted,
        ),
        rule(
            f,
            "alg.log-of-exp",
            "log(exp(x)) == x",
            "(ew.log (ew.exp ?x))",
            |m: &Match<'_>| vec![m.class("?x")],
        ),
        rule(
            f,
            "alg.sum-of-scaled",
            "sum_d(s ⊙ X) == s' ⊙ sum_d(X) for s broadcast along d",
            "(tensor.reduce (ew.mul ?s ?x) ?r ?d)",
            |m: &Match<'_>| {
                let (Some(s), Some(x), Some(d), Some(r)) =
                    (m.tensor("?s"), m.tensor("?x"), m.int("?d"), m.attr("?r"))
                else {
                    return vec![];
                };
                if !efir_dialect_red::is_sum(r)
                    || s.rank() != x.rank()
                    || s.shape[d] != Dim::Static(1)
                    || !s.state.is_empty()
                    || !x.state.is_empty()
                {
                    return vec![];
                }
                // s' is s with dim d dropped (a reshape).
                let mut shape = s.shape.clone();
                shape.remove(d);
                let t = efir_ir::Attr::Type(Box::new(efir_ir::Type::Tensor(TensorType::new(
                    s.dtype, shape,
                ))));
                let s1 = node("tensor.reshape", vec![m.class("?s"), Rhs::Attr(t)]);
                vec![node(
                    "ew.mul",
                    vec![
                        s1,
                        node(
                            "tensor.reduce",
                            vec![m.class("?x"), m.class("?r"), m.class("?d")],
                        ),
                    ],
                )]
            },
        ),
    ]
}
