//! The verifier: every op's operands and attributes are checked against
//! its definition, its result type is inferred by its dialect and must equal
//! the written one, reducers in types and attributes are checked, and
//! returns must match the signature. All errors are collected.

use crate::attr::Attr;
use crate::dialect::{AttrKind, InferCtx, Registry, Signatures, TermCtx};
use crate::module::{Func, Module};
use crate::types::{AxisState, Type};
use efir_diagnostics::{codes, Diag, Span};

/// The signature of `f`: its parameter and result types.
pub fn signature(f: &Func) -> (Vec<Type>, Vec<Type>) {
    (
        f.params.iter().map(|p| f.ty(*p).clone()).collect(),
        f.results.clone(),
    )
}

/// The signatures of every function in `m`.
pub fn signatures(m: &Module) -> Signatures {
    m.funcs
        .iter()
        .map(|f| (f.name.clone(), signature(f)))
        .collect()
}

/// Verify a whole module; returns every error found.
pub fn verify(m: &Module, registry: &Registry) -> Vec<Diag> {
    let sigs = signatures(m);
    let mut diags = Vec::new();
    for f in &m.funcs {
        verify_func(f, &sigs, registry, &mut diags);
        for d in registry.dialects() {
            if let Some(check) = d.verify_func {
                diags.extend(check(f, registry, &sigs));
            }
        }
    }
    diags
}

fn verify_type_terms(
    t: &Type,
    span: Span,
    sigs: &Signatures,
    registry: &Registry,
    diags: &mut Vec<Diag>,
) {
    for leaf in t.leaves() {
        for (axis, s) in &leaf.state {
            if let AxisState::Partial(r) = s {
                let cx = TermCtx {
                    registry,
                    sigs,
                    span,
                };
                let res = if matches!(r, Attr::Term(n, _) if n.starts_with("red.")) {
                    registry.verify_term(r, &cx)
                } else {
                    Err(Diag::error(
                        codes::E0501,
                        format!(
                            "`partial(...)` of axis `@{axis}` must name a reducer, found `{r}`"
                        ),
                        span,
                    )
                    .with_label("expected `#red.sum`, `#red.max`, ..."))
                };
                if let Err(d) = res {
                    diags.push(d);
                }
            }
        }
    }
}

fn verify_func(f: &Func, sigs: &Signatures, registry: &Registry, diags: &mut Vec<Diag>) {
    for p in &f.params {
        let v = f.value(*p);
        verify_type_terms(&v.ty, v.type_span, sigs, registry, diags);
    }
    for (t, s) in f.results.iter().zip(&f.result_spans) {
        verify_type_terms(t, *s, sigs, registry, diags);
    }
    for op in &f.ops {
        let declared = f.ty(op.result);
        let before = diags.len();
        verify_type_terms(
            declared,
            f.value(op.result).type_span,
            sigs,
            registry,
            diags,
        );
        let Some(def) = registry.op(&op.name) else {
            diags.push(
                Diag::error(
                    codes::E0202,
                    format!("unknown operation `{}`", op.name),
                    op.span,
                )
                .with_label("not registered"),
            );
            continue;
        };
        if !def.operands.allows(op.operands.len()) {
            let want = match def.operands {
                crate::dialect::Arity::Exact(n) => format!("{n}"),
                crate::dialect::Arity::AtLeast(n) => format!("at least {n}"),
            };
            diags.push(
                Diag::error(
                    codes::E0203,
                    format!(
                        "`{}` takes {want} operand{}, found {}",
                        def.name,
                        if want == "1" || want == "at least 1" {
                            ""
                        } else {
                            "s"
                        },
                        op.operands.len()
                    ),
                    op.span,
                )
                .with_label("wrong number of operands"),
            );
        }
        for spec in def.attrs {
            match op.attrs.get(spec.name) {
                None => diags.push(
                    Diag::error(
                        codes::E0204,
                        format!("`{}` needs attribute `{}`", def.name, spec.name),
                        op.span,
                    )
                    .with_label(format!(
                        "missing `{}` ({})",
                        spec.name,
                        spec.kind.describe()
                    )),
                ),
                Some(a) if !spec.kind.matches(a) => diags.push(
                    Diag::error(
                        codes::E0204,
                        format!(
                            "attribute `{}` of `{}` must be {}, found `{a}`",
                            spec.name,
                            def.name,
                            spec.kind.describe()
                        ),
                        op.attr_span(spec.name),
                    )
                    .with_label("wrong kind of attribute"),
                ),
                Some(a) if spec.kind == AttrKind::Reducer => {
                    let cx = TermCtx {
                        registry,
                        sigs,
                        span: op.attr_span(spec.name),
                    };
                    if let Err(d) = registry.verify_term(a, &cx) {
                        diags.push(d);
                    }
                }
                Some(_) => {}
            }
        }
        for name in op.attrs.keys() {
            if !def.extra_attrs && !def.attrs.iter().any(|s| s.name == name) {
                diags.push(
                    Diag::error(
                        codes::E0204,
                        format!("`{}` has no attribute `{name}`", def.name),
                        op.attr_span(name),
                    )
                    .with_label("unknown attribute"),
                );
            }
        }
        if diags.len() > before {
            continue;
        }
        let cx = InferCtx {
            op,
            operands: op.operands.iter().map(|v| f.ty(*v)).collect(),
            declared,
            sigs,
            registry,
        };
        match (def.infer)(&cx) {
            Err(d) => diags.push(d),
            Ok(inferred) if &inferred != declared => diags.push(
                Diag::error(
                    codes::E0205,
                    format!(
                        "`{}` produces {inferred}, but {declared} is declared",
                        def.name
                    ),
                    f.value(op.result).type_span,
                )
                .with_label(format!("inferred {inferred}"))
                .with_secondary(op.span, "for this op"),
            ),
            Ok(_) => {}
        }
    }
    if f.returns.len() != f.results.len() {
        diags.push(
            Diag::error(
                codes::E0206,
                format!(
                    "`@{}` returns {} value{} but its signature has {}",
                    f.name,
                    f.returns.len(),
                    if f.returns.len() == 1 { "" } else { "s" },
                    f.results.len()
                ),
                f.return_span,
            )
            .with_label("wrong number of returned values")
            .with_secondary(f.name_span, "function declared here"),
        );
    } else {
        for (i, (v, t)) in f.returns.iter().zip(&f.results).enumerate() {
            if f.ty(*v) != t {
                diags.push(
                    Diag::error(
                        codes::E0206,
                        format!(
                            "result #{i} of `@{}` is {t}, but `%{}` has type {}",
                            f.name,
                            f.value(*v).name,
                            f.ty(*v)
                        ),
                        f.return_span,
                    )
                    .with_label("type differs from the signature")
                    .with_secondary(
                        f.result_spans.get(i).copied().unwrap_or(f.span),
                        "declared here",
                    ),
                );
            }
        }
    }
}
