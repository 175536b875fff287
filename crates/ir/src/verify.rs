//! The verifier: every op's operands and attributes are checked against
//! its definition, its result type is inferred by its dialect and must equal
//! the written one, reducers in types and attributes are checked, and
//! returns must match the signature. Functions may refer to functions
//! (`kernel.launch<@k>`, the `@f` and `@h` of a repaired reducer), but not
//! in a cycle: the interpreter and the emitter would recurse forever. All
//! errors are collected.

use crate::attr::Attr;
use crate::dialect::{AttrKind, InferCtx, Registry, Signatures, TermCtx};
use crate::module::{Func, Module};
use crate::types::{AxisState, Type};
use efir_diagnostics::{codes, Diag, Span};
use std::collections::HashMap;

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
    diags.extend(verify_acyclic(m, registry));
    diags
}

/// The functions of `m` each function refers to, with the span of the
/// first reference: `Func` attributes (`kernel.launch<@k>`) and the symbols
/// inside reducer terms, in op attributes and in `partial(...)` states.
/// Names that are not functions of `m` are left out (E0209 reports them).
pub fn references(m: &Module, registry: &Registry) -> Vec<Vec<(usize, Span)>> {
    let index: HashMap<&str, usize> = m
        .funcs
        .iter()
        .enumerate()
        .map(|(i, f)| (f.name.as_str(), i))
        .collect();
    m.funcs
        .iter()
        .map(|f| {
            let mut out: Vec<(usize, Span)> = Vec::new();
            let mut add = |name: &str, span: Span| {
                if let Some(&j) = index.get(name) {
                    if !out.iter().any(|(k, _)| *k == j) {
                        out.push((j, span));
                    }
                }
            };
            let in_type = |t: &Type, span: Span, add: &mut dyn FnMut(&str, Span)| {
                for leaf in t.leaves() {
                    for s in leaf.state.values() {
                        if let AxisState::Partial(r) = s {
                            term_symbols(r, &mut |n| add(n, span));
                        }
                    }
                }
            };
            for p in &f.params {
                let v = f.value(*p);
                in_type(&v.ty, v.type_span, &mut add);
            }
            for (t, s) in f.results.iter().zip(&f.result_spans) {
                in_type(t, *s, &mut add);
            }
            for op in &f.ops {
                let v = f.value(op.result);
                in_type(&v.ty, v.type_span, &mut add);
                let Some(def) = registry.op(&op.name) else {
                    continue;
                };
                for spec in def.attrs {
                    let (Some(a), span) = (op.attrs.get(spec.name), op.attr_span(spec.name)) else {
                        continue;
                    };
                    match spec.kind {
                        AttrKind::Func => {
                            if let Some(n) = a.as_symbol() {
                                add(n, span);
                            }
                        }
                        AttrKind::Reducer => term_symbols(a, &mut |n| add(n, span)),
                        _ => {}
                    }
                }
            }
            out
        })
        .collect()
}

/// Every symbol inside a term (iteratively: terms can nest deeply).
fn term_symbols(a: &Attr, f: &mut dyn FnMut(&str)) {
    let mut stack = vec![a];
    while let Some(a) = stack.pop() {
        match a {
            Attr::Symbol(s) => f(s),
            Attr::Term(_, args) => stack.extend(args.iter().rev().map(|(_, x)| x)),
            Attr::Array(xs) => stack.extend(xs.iter().rev()),
            _ => {}
        }
    }
}

/// One error (E0211) per reference that closes a cycle of references
/// between functions, found by an iterative depth-first search (modules can
/// hold long chains of functions).
fn verify_acyclic(m: &Module, registry: &Registry) -> Vec<Diag> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let refs = references(m, registry);
    let mut mark = vec![Mark::New; m.funcs.len()];
    let mut diags = Vec::new();
    for root in 0..m.funcs.len() {
        if mark[root] != Mark::New {
            continue;
        }
        // The path from `root`: each function with the next reference to follow.
        let mut path: Vec<(usize, usize)> = vec![(root, 0)];
        mark[root] = Mark::Open;
        while let Some(&mut (u, ref mut next)) = path.last_mut() {
            let Some(&(v, span)) = refs[u].get(*next) else {
                mark[u] = Mark::Done;
                path.pop();
                continue;
            };
            *next += 1;
            match mark[v] {
                Mark::New => {
                    mark[v] = Mark::Open;
                    path.push((v, 0));
                }
                Mark::Open => {
                    let from = path.iter().position(|(w, _)| *w == v).unwrap_or(0);
                    let names: Vec<&str> = path[from..]
                        .iter()
                        .map(|(w, _)| m.funcs[*w].name.as_str())
                        .collect();
                    diags.push(cycle_diag(m, &names, v, span));
                }
                Mark::Done => {}
            }
        }
    }
    diags
}

fn cycle_diag(m: &Module, names: &[&str], v: usize, span: Span) -> Diag {
    let target = &m.funcs[v];
    let mut shown: Vec<String> = if names.len() > 8 {
        let mut s: Vec<String> = names[..4].iter().map(|n| format!("@{n}")).collect();
        s.push(format!("({} more)", names.len() - 7));
        s.extend(names[names.len() - 3..].iter().map(|n| format!("@{n}")));
        s
    } else {
        names.iter().map(|n| format!("@{n}")).collect()
    };
    shown.push(format!("@{}", target.name));
    let msg = if names.len() == 1 {
        format!("`@{}` refers to itself", target.name)
    } else {
        format!(
            "`@{}` refers to itself through {}",
            target.name,
            shown.join(" -> ")
        )
    };
    Diag::error(codes::E0211, msg, span)
        .with_label("this reference closes a cycle")
        .with_secondary(target.name_span, "function defined here")
        .with_note(
            "functions called by kernels and reducers cannot be recursive: running them would never end",
        )
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
