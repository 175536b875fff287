//! Structural bookkeeping: tuples and the inverse pairs of parallel views.

use super::{rule, Match, Rhs, RuleDef};

/// `get(tuple(A0, ..., An), i) == Ai`.
fn get_tuple(m: &Match<'_>, n: usize) -> Vec<Rhs> {
    let Some(i) = m.int("?i") else { return vec![] };
    let names = ["?a", "?b", "?c"];
    if i < n {
        vec![m.class(names[i])]
    } else {
        vec![]
    }
}

/// The structural rules.
pub fn rules() -> Vec<RuleDef> {
    let f = "structural";
    vec![
        rule(
            f,
            "struct.get-of-tuple2",
            "get(tuple(A, B), i) == [A, B][i]",
            "(tensor.get (tensor.tuple ?a ?b) ?i)",
            |m| get_tuple(m, 2),
        ),
        rule(
            f,
            "struct.get-of-tuple3",
            "get(tuple(A, B, C), i) == [A, B, C][i]",
            "(tensor.get (tensor.tuple ?a ?b ?c) ?i)",
            |m| get_tuple(m, 3),
        ),
        rule(
            f,
            "struct.combine-of-partition",
            "combine(part(X, d, p), d, p) == X",
            "(par.combine (par.partition ?x ?d ?p) ?d ?p)",
            |m| vec![m.class("?x")],
        ),
        rule(
            f,
            "struct.partition-of-combine",
            "part(combine(X, d, p), d, p) == X",
            "(par.partition (par.combine ?x ?d ?p) ?d ?p)",
            |m| vec![m.class("?x")],
        ),
    ]
}
