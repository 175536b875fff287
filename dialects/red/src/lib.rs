//! The `red` dialect: reducers as attribute terms.
//!
//! A reducer ρ is a monoid with an input map: an identity (`init`), an
//! `update(state, input)` for reductions along a tensor dim and a
//! `combine(state, state)` for parallel reductions. Reducers are terms so
//! that they hash-cons and rules can match and build them:
//!
//! - `#red.sum`: identity 0, `update(s, x) = ew.add(s, x)`, combine the same.
//! - `#red.max`: identity -inf, `update(s, x) = ew.max(s, x)`, combine the same.
//! - `#red.prod<ρ1, ρ2, ...>`: the product of independent reducers; the state
//!   and the input are the concatenation of the components'.
//! - `#red.repair<ρP, ρC, f = @f, h = @h>`: a consumer ρC whose inputs depend
//!   on the producer ρP's final state. With producer state s and consumer
//!   state c, one step on inputs x is `s' = ρP.update(s, x)`,
//!   `c' = ρC.combine(h(c, s, s'), f(x, s'))`; the parallel combine rescales
//!   both sides to the merged producer state before combining. `@f` and `@h`
//!   are functions of the module over rank-0 tensors (applied pointwise).
//!   Online softmax is `#red.repair<#red.max, #red.prod<#red.sum, #red.sum>,
//!   f = @f, h = @h>` with `f(x, v, s') = (exp(x - s'), exp(x - s') * v)` and
//!   `h(c, s, s') = c * exp(s - s')` per field.

pub mod eval;

use efir_diagnostics::{codes, Diag};
use efir_ir::dialect::{AttrTermDef, DialectDef, Signatures, TermCtx};
use efir_ir::{Attr, DType, Type};

/// The `red` dialect.
pub static DIALECT: DialectDef = DialectDef {
    name: "red",
    summary: "Reducers: sum, max, products and repaired reducers as terms",
    ops: &[],
    terms: &[
        AttrTermDef {
            name: "red.sum",
            summary: "Sum: identity 0, update s + x",
            verify: verify_leaf,
        },
        AttrTermDef {
            name: "red.max",
            summary: "Maximum: identity -inf, update max(s, x)",
            verify: verify_leaf,
        },
        AttrTermDef {
            name: "red.prod",
            summary: "Product of independent reducers (tuple state)",
            verify: verify_prod,
        },
        AttrTermDef {
            name: "red.repair",
            summary: "Consumer reducer repaired by h(c, s, s') when the producer state changes",
            verify: verify_repair,
        },
    ],
    verify_func: None,
};

/// The shape of a reducer's state and input tuples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arity {
    /// Number of state fields.
    pub states: usize,
    /// Number of input fields.
    pub inputs: usize,
}

/// The state and input counts of a (verified) reducer term.
pub fn arity(r: &Attr, sigs: &Signatures) -> Option<Arity> {
    let Attr::Term(name, args) = r else {
        return None;
    };
    match name.as_str() {
        "red.sum" | "red.max" => Some(Arity {
            states: 1,
            inputs: 1,
        }),
        "red.prod" => args.iter().try_fold(
            Arity {
                states: 0,
                inputs: 0,
            },
            |acc, (_, a)| {
                let x = arity(a, sigs)?;
                Some(Arity {
                    states: acc.states + x.states,
                    inputs: acc.inputs + x.inputs,
                })
            },
        ),
        "red.repair" => {
            let (p, c, f, _) = repair_parts(args)?;
            let p = arity(p, sigs)?;
            let c = arity(c, sigs)?;
            let (fparams, _) = sigs.get(f)?;
            Some(Arity {
                states: p.states + c.states,
                inputs: fparams.len().checked_sub(p.states)?,
            })
        }
        _ => None,
    }
}

/// The dtypes of the state fields when reducing inputs of `inputs` dtypes.
pub fn state_dtypes(r: &Attr, inputs: &[DType], sigs: &Signatures) -> Option<Vec<DType>> {
    let Attr::Term(name, args) = r else {
        return None;
    };
    match name.as_str() {
        "red.sum" | "red.max" => Some(vec![*inputs.first()?]),
        "red.prod" => {
            let mut out = Vec::new();
            let mut rest = inputs;
            for (_, a) in args {
                let n = arity(a, sigs)?.inputs;
                if rest.len() < n {
                    return None;
                }
                out.extend(state_dtypes(a, &rest[..n], sigs)?);
                rest = &rest[n..];
            }
            Some(out)
        }
        "red.repair" => {
            let (p, c, f, _) = repair_parts(args)?;
            let pa = arity(p, sigs)?;
            let mut out = state_dtypes(p, inputs.get(..pa.inputs)?, sigs)?;
            let (_, fres) = sigs.get(f)?;
            let fdts: Option<Vec<DType>> = fres
                .iter()
                .map(|t| t.as_tensor().map(|t| t.dtype))
                .collect();
            out.extend(state_dtypes(c, &fdts?, sigs)?);
            Some(out)
        }
        _ => None,
    }
}

/// Whether the reducer is `#red.sum`.
pub fn is_sum(r: &Attr) -> bool {
    matches!(r, Attr::Term(n, a) if n == "red.sum" && a.is_empty())
}

/// Whether partial results of this reducer may be reduced again by the
/// same reducer along a tensor dim (sum and max: associative and
/// commutative elementwise).
pub fn is_simple(r: &Attr) -> bool {
    matches!(r, Attr::Term(n, a) if (n == "red.sum" || n == "red.max") && a.is_empty())
}

/// The identity element of every state field: 0 for sum, -inf for max,
/// the components' for products, the producer's then the consumer's for a
/// repaired reducer.
pub fn identity(r: &Attr) -> Option<Vec<f64>> {
    let Attr::Term(name, args) = r else {
        return None;
    };
    match name.as_str() {
        "red.sum" => Some(vec![0.0]),
        "red.max" => Some(vec![f64::NEG_INFINITY]),
        "red.prod" => args.iter().try_fold(Vec::new(), |mut acc, (_, a)| {
            acc.extend(identity(a)?);
            Some(acc)
        }),
        "red.repair" => {
            let (p, c, _, _) = repair_parts(args)?;
            let mut out = identity(p)?;
            out.extend(identity(c)?);
            Some(out)
        }
        _ => None,
    }
}

/// The leaves (`sum`/`max`) of a reducer built from sums, maxima and
/// products, in field order; `None` for repaired reducers.
fn leaves(r: &Attr, out: &mut Vec<&'static str>) -> Option<()> {
    let Attr::Term(name, args) = r else {
        return None;
    };
    match name.as_str() {
        "red.sum" => out.push("ew.add"),
        "red.max" => out.push("ew.max"),
        "red.prod" => {
            for (_, a) in args {
                leaves(a, out)?;
            }
        }
        _ => return None,
    }
    Some(())
}

/// The update `update(s, x)` of a reducer made of sums, maxima and products,
/// written in IR: a function `@update` over the bound state variables
/// `%s0..` and input variables `%x0..` (rank-0 tensors of `dtype`). For
/// these reducers the parallel `combine(s, t)` is the same function.
/// Repaired reducers are defined by their `@f` and `@h` functions instead
/// (`None`).
pub fn update_source(r: &Attr, dtype: DType) -> Option<String> {
    let mut ops = Vec::new();
    leaves(r, &mut ops)?;
    let t = format!("tensor<{dtype}>");
    let params: Vec<String> = (0..ops.len())
        .map(|i| format!("%s{i}: {t}"))
        .chain((0..ops.len()).map(|i| format!("%x{i}: {t}")))
        .collect();
    let results = vec![t.clone(); ops.len()].join(", ");
    let mut body = String::new();
    for (i, op) in ops.iter().enumerate() {
        body.push_str(&format!("  %u{i} = {op} %s{i}, %x{i} : {t}\n"));
    }
    let rets: Vec<String> = (0..ops.len()).map(|i| format!("%u{i}")).collect();
    Some(format!(
        "func @update({}) -> ({results}) {{\n{body}  return {} : {results}\n}}\n",
        params.join(", "),
        rets.join(", ")
    ))
}

/// The parts of a `#red.repair` term: producer, consumer, `f` and `h`.
pub fn repair_parts(args: &[(Option<String>, Attr)]) -> Option<(&Attr, &Attr, &str, &str)> {
    let pos: Vec<&Attr> = args
        .iter()
        .filter(|(k, _)| k.is_none())
        .map(|(_, a)| a)
        .collect();
    let named = |key: &str| {
        args.iter()
            .find(|(k, _)| k.as_deref() == Some(key))
            .and_then(|(_, a)| a.as_symbol())
    };
    match pos.as_slice() {
        [p, c] => Some((p, c, named("f")?, named("h")?)),
        _ => None,
    }
}

fn malformed(cx: &TermCtx<'_>, msg: String) -> Diag {
    Diag::error(codes::E0502, msg, cx.span).with_label("malformed reducer")
}

fn verify_leaf(a: &Attr, cx: &TermCtx<'_>) -> Result<(), Diag> {
    match a {
        Attr::Term(n, args) if !args.is_empty() => {
            Err(malformed(cx, format!("`#{n}` takes no arguments")))
        }
        _ => Ok(()),
    }
}

fn verify_reducer_arg(a: &Attr, cx: &TermCtx<'_>) -> Result<(), Diag> {
    match a {
        Attr::Term(n, _) if n.starts_with("red.") => cx.registry.verify_term(a, cx),
        other => Err(malformed(
            cx,
            format!("expected a reducer `#red.*`, found `{other}`"),
        )),
    }
}

fn verify_prod(a: &Attr, cx: &TermCtx<'_>) -> Result<(), Diag> {
    let Attr::Term(_, args) = a else {
        return Ok(());
    };
    if args.len() < 2 || args.iter().any(|(k, _)| k.is_some()) {
        return Err(malformed(
            cx,
            "`#red.prod` takes two or more reducers, without keys".into(),
        ));
    }
    for (_, r) in args {
        verify_reducer_arg(r, cx)?;
    }
    Ok(())
}

fn scalar_fn_sig<'a>(name: &str, cx: &'a TermCtx<'_>) -> Result<&'a (Vec<Type>, Vec<Type>), Diag> {
    let sig = cx.sigs.get(name).ok_or_else(|| {
        Diag::error(
            codes::E0209,
            format!("reducer refers to unknown function `@{name}`"),
            cx.span,
        )
        .with_label("no such function in this module")
    })?;
    for t in sig.0.iter().chain(&sig.1) {
        let ok = matches!(t, Type::Tensor(t) if t.shape.is_empty() && t.state.is_empty());
        if !ok {
            return Err(Diag::error(
                codes::E0503,
                format!("`@{name}` must take and return rank-0 tensors, found {t}"),
                cx.span,
            )
            .with_label("reducer functions are pointwise (scalar) functions"));
        }
    }
    Ok(sig)
}

fn verify_repair(a: &Attr, cx: &TermCtx<'_>) -> Result<(), Diag> {
    let Attr::Term(_, args) = a else {
        return Ok(());
    };
    let Some((p, c, f, h)) = repair_parts(args) else {
        return Err(malformed(
            cx,
            "`#red.repair` is `#red.repair<producer, consumer, f = @f, h = @h>`".into(),
        ));
    };
    if args.len() != 4 {
        return Err(malformed(
            cx,
            "`#red.repair` takes exactly a producer, a consumer, `f` and `h`".into(),
        ));
    }
    verify_reducer_arg(p, cx)?;
    verify_reducer_arg(c, cx)?;
    let (Some(pa), Some(ca)) = (arity(p, cx.sigs), arity(c, cx.sigs)) else {
        return Err(malformed(cx, "cannot determine the reducer's arity".into()));
    };
    let (fp, fr) = scalar_fn_sig(f, cx)?;
    if fp.len() < pa.states + pa.inputs || fr.len() != ca.inputs {
        return Err(Diag::error(
            codes::E0503,
            format!(
                "`@{f}` must take the inputs (at least {}) then {} new producer state(s) and return {} consumer input(s); it takes {} and returns {}",
                pa.inputs,
                pa.states,
                ca.inputs,
                fp.len(),
                fr.len()
            ),
            cx.span,
        )
        .with_label("wrong signature for the input map f(x, s')"));
    }
    let (hp, hr) = scalar_fn_sig(h, cx)?;
    if hp.len() != ca.states + 2 * pa.states || hr.len() != ca.states {
        return Err(Diag::error(
            codes::E0503,
            format!(
                "`@{h}` must take {} consumer state(s), {} old and {} new producer state(s) and return {} consumer state(s); it takes {} and returns {}",
                ca.states,
                pa.states,
                pa.states,
                ca.states,
                hp.len(),
                hr.len()
            ),
            cx.span,
        )
        .with_label("wrong signature for the repair h(c, s, s')"));
    }
    Ok(())
}
