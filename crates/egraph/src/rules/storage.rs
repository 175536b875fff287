//! Intermediate storage: a parallel reduction can store its inputs (one
//! slice per coordinate, `par.collect`) and reduce them along the new
//! leading dim in a later kernel (split-K style; the paper's section 4.4).

use super::{node, rule, Match, Rhs, RuleDef};

/// `reduce_ρ,p(X) == reduce(collect_p(X), ρ, 0)` for ρ a sum or a max (whose
/// update along a dim is its combine).
fn collect_before_reduce(m: &Match<'_>) -> Vec<Rhs> {
    let (Some(r), Some(_)) = (m.attr("?r"), m.tensor("?x")) else {
        return vec![];
    };
    if !efir_dialect_red::is_simple(r) {
        return vec![];
    }
    let collected = node("par.collect", vec![m.class("?x"), m.class("?p")]);
    vec![node(
        "tensor.reduce",
        vec![collected, m.class("?r"), super::int(0)],
    )]
}

/// The storage rules.
pub fn rules() -> Vec<RuleDef> {
    vec![rule(
        "storage",
        "store.collect-before-reduce",
        "reduce_ρ,p(X) == reduce(collect_p(X), ρ, 0)",
        "(par.reduce ?x ?r ?p)",
        collect_before_reduce,
    )]
}
