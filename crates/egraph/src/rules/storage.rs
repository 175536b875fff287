//! Intermediate storage: a parallel reduction can store its inputs (one
//! slice per coordinate, `par.collect`) and reduce them along the new
//! leading dim in a later kernel (split-K style; the paper's section 4.4).
//! For online softmax (a repaired reducer) the stored values are the
//! partial states of each coordinate, merged in the later kernel by the
//! reducer's parallel combine written out as IR (flash-decoding: the keys
//! split across programs, the states merged after).

use super::{int, node, rule, Match, Rhs, RuleDef};
use efir_ir::{Attr, DType, Dim, TensorType, Type};

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

/// The number of consumer fields of a repaired reducer whose parallel
/// combine this module can write as IR: producer `#red.max`, consumer a
/// sum (`h` = the library's `efir.exp_h.<dt>`) or a product of two sums
/// (`efir.exp_h2.<dt>`), i.e. online softmax's normalizer and weighted sum.
pub fn exp_repair_fields(r: &Attr) -> Option<usize> {
    let Attr::Term(name, args) = r else {
        return None;
    };
    if name != "red.repair" {
        return None;
    }
    let (p, c, _, h) = efir_dialect_red::repair_parts(args)?;
    if !matches!(p, Attr::Term(n, a) if n == "red.max" && a.is_empty()) {
        return None;
    }
    let sums = match c {
        Attr::Term(n, a) if n == "red.sum" && a.is_empty() => 1,
        Attr::Term(n, a)
            if n == "red.prod"
                && a.len() == 2
                && a.iter()
                    .all(|(k, x)| k.is_none() && efir_dialect_red::is_sum(x)) =>
        {
            2
        }
        _ => return None,
    };
    let lib = if sums == 1 {
        "efir.exp_h."
    } else {
        "efir.exp_h2."
    };
    h.strip_prefix(lib).and_then(DType::from_name).map(|_| sums)
}

/// The SMs of the GPU the kernels are for (the H200's 132).
const SMS: u64 = 132;
/// The shortest reduced dim whose loop is worth splitting across programs.
const LONG: u64 = 1024;

/// The elements of a loop's result that one program of a kernel covers
/// along its last dim at most (a row of a head dim of 128).
const PER_PROGRAM: u64 = 128;

/// Whether a loop over `axis` that leaves values of type `t` (a state
/// field) runs too few programs for the GPU over too long a dim: fewer
/// programs than SMs where one program covers at most 128 elements of the
/// last dim, and an axis that splits a dim of at least 1,024 (read off its
/// canonical name, `rules::axis_name`). Attention decode at batch 1 is one:
/// 32 heads of 128, 32 programs on 132 SMs, each streaming 4,096 keys.
/// There the partial states of key blocks are worth storing and merging
/// after (flash-decoding); not elsewhere, so the rule stays out of every
/// other search (decode at batch 8 has 256 programs, prefill 256 per head
/// row of 128 queries).
pub fn few_rows_long_loop(t: &TensorType, axis: &str) -> bool {
    let long = axis
        .get(1..)
        .and_then(|e| e.parse::<u64>().ok())
        .is_some_and(|e| e >= LONG);
    let elements: Option<u64> = t
        .shape
        .iter()
        .map(|d| match d {
            Dim::Static(e) => Some(*e),
            Dim::Axis(_) => None,
        })
        .product();
    let tile = match t.shape.last() {
        Some(Dim::Static(e)) => (*e).clamp(1, PER_PROGRAM),
        Some(Dim::Axis(_)) => return false,
        None => 1,
    };
    long && elements.is_some_and(|n| n / tile < SMS)
}

/// `reduce_ρ,p(X) == merge(collect_p(X))` for ρ online softmax's repaired
/// reducer `repair<max, C, f, h>` with `h(c, s, s') = c * exp(s - s')` (the
/// library's, guarded: 1 where `s == s'`): with the collected states
/// `(M_i, C_i)`, `M = max_i M_i` and `C = sum_i C_i * e_i`,
/// `e_i = select(M_i == M, 1, exp(M_i - M))`, for each consumer field.
/// That is the reducer's parallel combine (`red` dialect) applied along the
/// collected dim. Only for plain fields (no other parallel axis), whose
/// constants need no state, and where a loop would leave the GPU idle
/// ([`few_rows_long_loop`]).
fn collect_repair_states(m: &Match<'_>) -> Vec<Rhs> {
    let (Some(r), Some(p)) = (m.attr("?r"), m.axis("?p")) else {
        return vec![];
    };
    let Some(sums) = exp_repair_fields(r) else {
        return vec![];
    };
    let Some(Type::Tuple(fields)) = m.eg[m.id("?x")].data.ty() else {
        return vec![];
    };
    let fields: Vec<&TensorType> = fields.iter().filter_map(Type::as_tensor).collect();
    if fields.len() != 1 + sums {
        return vec![];
    }
    let first = fields[0];
    let only_p = |t: &TensorType| t.state.len() == 1 && t.state.contains_key(&p);
    if !first.dtype.is_float()
        || !fields
            .iter()
            .all(|t| only_p(t) && t.shape == first.shape && t.dtype == first.dtype)
    {
        return vec![];
    }
    if !few_rows_long_loop(first, &p) {
        return vec![];
    }
    let dt = first.dtype;
    let collected = node("par.collect", vec![m.class("?x"), m.class("?p")]);
    let get = |i: usize| node("tensor.get", vec![collected.clone(), int(i)]);
    let reduce = |x: Rhs, name: &str| {
        node(
            "tensor.reduce",
            vec![x, Rhs::Attr(Attr::Term(name.into(), vec![])), int(0)],
        )
    };
    let mc = get(0);
    let max = reduce(mc.clone(), "red.max");
    let mut one_shape = vec![Dim::Static(1)];
    one_shape.extend(first.shape.iter().cloned());
    let ty = |shape: Vec<Dim>| {
        Rhs::Attr(Attr::Type(Box::new(Type::Tensor(TensorType::new(
            dt, shape,
        )))))
    };
    let max1 = node("tensor.reshape", vec![max.clone(), ty(one_shape)]);
    let same = node(
        "ew.cmp",
        vec![mc.clone(), max1.clone(), Rhs::Attr(Attr::Word("eq".into()))],
    );
    let one = node("tensor.full", vec![Rhs::Attr(Attr::Float(1.0)), ty(vec![])]);
    let ex = node("ew.exp", vec![node("ew.sub", vec![mc, max1])]);
    let e = node("ew.select", vec![same, one, ex]);
    let mut out = vec![max];
    for i in 1..=sums {
        out.push(reduce(node("ew.mul", vec![get(i), e.clone()]), "red.sum"));
    }
    vec![node("tensor.tuple", out)]
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

/// The `split` family (opt-in, not among `DEFAULT_FAMILIES`): online
/// softmax's loop over key blocks as stored partial states merged after
/// (flash-decoding).
pub fn split_rules() -> Vec<RuleDef> {
    vec![
        rule(
            "split",
            "split.collect-repair-states",
            "reduce_repair<max,C>,p(X) == (M, sum_0(C_i * e_i)), M = max_0(M_i), e_i = select(M_i == M, 1, exp(M_i - M)), (M_i, C_i) = collect_p(X)",
            "(par.reduce ?x ?r ?p)",
            collect_repair_states,
        ),
    ]
}
