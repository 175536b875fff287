//! The `egraph` dialect: an e-graph as an ordinary function, so that the
//! output of `--saturate` parses, verifies, prints and can be saturated
//! further.
//!
//! ```text
//! func @f(%x: tensor<8x64xf16>, ...) -> tensor<8x32xf16> {
//!   %n0 = egraph.node<0, "arg", []> {param = 0} : tensor<8x64xf16>
//!   %n1 = egraph.node<2, "tensor.matmul", [0, 1]> : tensor<8x32xf16>
//!   %n2 = egraph.node<2, "par.combine", [5]> {dim = 0, axis = @m64} : tensor<8x32xf16>
//!   %r = egraph.root<2> : tensor<8x32xf16>
//!   return %r : tensor<8x32xf16>
//! }
//! ```
//!
//! Each `egraph.node` is one e-node: its e-class id, its op, the e-classes
//! of its operands (by id, so cycles are fine) and the op's attributes; its
//! result type is the e-class's type. `egraph.root` names an e-class that is
//! a result. The function-level verifier checks that every class has one
//! type, that children exist, and that every e-node's inferred type equals
//! its class's type.

use efir_diagnostics::{codes, Diag};
use efir_ir::dialect::{Arity, AttrKind, AttrSpec, DialectDef, OpDef, Signatures};
use efir_ir::{Attr, Func, Registry, Type};
use indexmap::IndexMap;
use std::collections::HashMap;

/// The `egraph` dialect.
pub static DIALECT: DialectDef = DialectDef {
    name: "egraph",
    summary: "Serialized e-graphs: e-classes with their type, their e-nodes, the roots",
    ops: &[
        OpDef {
            name: "egraph.node",
            summary: "one e-node: its e-class, op, operand e-classes and attributes",
            operands: Arity::Exact(0),
            positional: &["class", "op", "children"],
            attrs: &[
                AttrSpec {
                    name: "class",
                    kind: AttrKind::Int,
                },
                AttrSpec {
                    name: "op",
                    kind: AttrKind::Str,
                },
                AttrSpec {
                    name: "children",
                    kind: AttrKind::IntArray,
                },
            ],
            infer: |cx| Ok(cx.declared.clone()),
            fold: None,
            result_from_declared: true,
            extra_attrs: true,
        },
        OpDef {
            name: "egraph.root",
            summary: "an e-class that is a result of the function",
            operands: Arity::Exact(0),
            positional: &["class"],
            attrs: &[AttrSpec {
                name: "class",
                kind: AttrKind::Int,
            }],
            infer: |cx| Ok(cx.declared.clone()),
            fold: None,
            result_from_declared: true,
            extra_attrs: false,
        },
    ],
    terms: &[],
    verify_func: Some(verify_egraph),
};

/// The attributes of an `egraph.node` that belong to its op.
pub fn op_attrs(attrs: &IndexMap<String, Attr>) -> IndexMap<String, Attr> {
    attrs
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "class" | "op" | "children" | "param"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn verify_egraph(f: &Func, registry: &Registry, sigs: &Signatures) -> Vec<Diag> {
    if !f.ops.iter().any(|o| o.dialect() == "egraph") {
        return Vec::new();
    }
    let mut diags = Vec::new();
    let mut classes: HashMap<i64, &Type> = HashMap::new();
    for op in &f.ops {
        if op.dialect() != "egraph" {
            diags.push(
                Diag::error(
                    codes::E0704,
                    format!("`{}` in an e-graph function", op.name),
                    op.span,
                )
                .with_label("only `egraph.node` and `egraph.root` may appear here"),
            );
            continue;
        }
        if op.name != "egraph.node" {
            continue;
        }
        let id = op.attrs.get("class").and_then(Attr::as_int).unwrap_or(-1);
        let ty = f.ty(op.result);
        match classes.get(&id) {
            Some(t) if *t != ty => diags.push(
                Diag::error(
                    codes::E0701,
                    format!("e-class {id} has e-nodes of types {t} and {ty}"),
                    op.span,
                )
                .with_label("every e-class has exactly one type"),
            ),
            _ => {
                classes.insert(id, ty);
            }
        }
    }
    for op in f.ops.iter().filter(|o| o.dialect() == "egraph") {
        let class = op.attrs.get("class").and_then(Attr::as_int).unwrap_or(-1);
        let Some(cty) = classes.get(&class) else {
            diags.push(
                Diag::error(
                    codes::E0702,
                    format!("e-class {class} has no e-node"),
                    op.span,
                )
                .with_label("unknown e-class"),
            );
            continue;
        };
        if op.name == "egraph.root" {
            if f.ty(op.result) != *cty {
                diags.push(
                    Diag::error(
                        codes::E0703,
                        format!(
                            "root e-class {class} has type {cty}, not {}",
                            f.ty(op.result)
                        ),
                        op.span,
                    )
                    .with_label("type differs"),
                );
            }
            continue;
        }
        let Some(name) = op.attrs.get("op").and_then(|a| match a {
            Attr::Str(s) => Some(s.as_str()),
            _ => None,
        }) else {
            continue;
        };
        let children = op
            .attrs
            .get("children")
            .and_then(Attr::as_int_array)
            .unwrap_or_default();
        let mut child_types = Vec::new();
        for c in &children {
            match classes.get(c) {
                Some(t) => child_types.push(*t),
                None => diags.push(
                    Diag::error(
                        codes::E0702,
                        format!("e-node refers to e-class {c}, which has no e-node"),
                        op.span,
                    )
                    .with_label("unknown e-class"),
                ),
            }
        }
        if child_types.len() != children.len() {
            continue;
        }
        let inferred = if name == "arg" {
            let i = op.attrs.get("param").and_then(Attr::as_int).unwrap_or(-1);
            match usize::try_from(i).ok().and_then(|i| f.params.get(i)) {
                Some(p) => Ok(f.ty(*p).clone()),
                None => Err(Diag::error(
                    codes::E0703,
                    format!("`arg` e-node with index {i} out of range"),
                    op.span,
                )),
            }
        } else {
            registry.infer_detached(name, &child_types, &op_attrs(&op.attrs), Some(cty), sigs)
        };
        match inferred {
            Ok(t) if &t == *cty => {}
            Ok(t) => diags.push(
                Diag::error(
                    codes::E0703,
                    format!("e-node `{name}` has type {t}, but its e-class {class} has type {cty}"),
                    op.span,
                )
                .with_label("every e-node's type must equal its class's"),
            ),
            Err(d) => diags.push(
                Diag::error(
                    codes::E0703,
                    format!("e-node `{name}` is ill-typed: {}", d.message),
                    op.span,
                )
                .with_label("ill-typed e-node"),
            ),
        }
    }
    diags
}
