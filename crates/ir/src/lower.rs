//! Builds a [`Module`] from the syntax tree: resolves SSA names and types,
//! maps the custom form's positional attributes to names, and checks what
//! the generic form writes out (operand types). Reports every error it
//! finds; type inference is [`crate::verify`]'s job.

use crate::attr::Attr;
use crate::dialect::Registry;
use crate::module::{Func, Module, Op, ValueId, ValueInfo};
use crate::types::{AxisState, DType, Dim, State, TensorType, Type};
use efir_diagnostics::{codes, Diag, Span};
use efir_syntax::ast;
use indexmap::IndexMap;
use std::collections::HashMap;

/// Convert a parsed file into a module. The module is only valid when no
/// diagnostics are returned.
pub fn build_module(m: &ast::Module, registry: &Registry) -> (Module, Vec<Diag>) {
    let mut diags = Vec::new();
    let mut module = Module::default();
    let mut seen: HashMap<&str, Span> = HashMap::new();
    for f in &m.funcs {
        if let Some(prev) = seen.get(f.name.text.as_str()) {
            diags.push(
                Diag::error(
                    codes::E0207,
                    format!("function `@{}` is defined twice", f.name.text),
                    f.name.span,
                )
                .with_label("redefined here")
                .with_secondary(*prev, "first defined here"),
            );
        } else {
            seen.insert(&f.name.text, f.name.span);
        }
        module.funcs.push(build_func(f, registry, &mut diags));
    }
    (module, diags)
}

fn build_func(f: &ast::Func, registry: &Registry, diags: &mut Vec<Diag>) -> Func {
    let mut func = Func::new(&f.name.text);
    func.name_span = f.name.span;
    func.span = f.span;
    let mut scope: HashMap<String, ValueId> = HashMap::new();
    fn define(
        scope: &mut HashMap<String, ValueId>,
        func: &mut Func,
        name: &ast::Name,
        ty: Type,
        type_span: Span,
        diags: &mut Vec<Diag>,
    ) -> ValueId {
        if let Some(prev) = scope.get(&name.text) {
            diags.push(
                Diag::error(
                    codes::E0200,
                    format!("value `%{}` is defined twice", name.text),
                    name.span,
                )
                .with_label("redefined here")
                .with_secondary(func.value(*prev).span, "first defined here"),
            );
        }
        func.values.push(ValueInfo {
            name: name.text.clone(),
            ty,
            span: name.span,
            type_span,
        });
        let id = ValueId(func.values.len() as u32 - 1);
        scope.insert(name.text.clone(), id);
        id
    }
    for (name, ty) in &f.args {
        let t = convert_type(ty, diags);
        let id = define(&mut scope, &mut func, name, t, ty.span(), diags);
        func.params.push(id);
    }
    for t in &f.results {
        func.results.push(convert_type(t, diags));
        func.result_spans.push(t.span());
    }
    for (k, a) in &f.attrs {
        if func
            .attrs
            .insert(k.text.clone(), convert_attr(a, diags))
            .is_some()
        {
            diags.push(
                Diag::error(
                    codes::E0204,
                    format!("function attribute `{}` is given twice", k.text),
                    k.span,
                )
                .with_label("given again here"),
            );
        }
    }
    for stmt in &f.body {
        match stmt {
            ast::Stmt::Error => {}
            ast::Stmt::Return(r) => {
                func.return_span = r.span;
                let mut ok = true;
                let mut vals = Vec::new();
                for v in &r.values {
                    match scope.get(&v.text) {
                        Some(id) => vals.push(*id),
                        None => {
                            ok = false;
                            diags.push(undefined(v));
                        }
                    }
                }
                if ok && !r.types.is_empty() {
                    if r.types.len() != vals.len() {
                        diags.push(
                            Diag::error(
                                codes::E0206,
                                format!(
                                    "`return` lists {} value(s) but {} type(s)",
                                    vals.len(),
                                    r.types.len()
                                ),
                                r.span,
                            )
                            .with_label("counts differ"),
                        );
                    } else {
                        for (v, t) in vals.iter().zip(&r.types) {
                            let written = convert_type(t, diags);
                            if &written != func.ty(*v) {
                                diags.push(
                                    Diag::error(
                                        codes::E0206,
                                        format!(
                                            "`return` writes {written} for `%{}`, whose type is {}",
                                            func.value(*v).name,
                                            func.ty(*v)
                                        ),
                                        t.span(),
                                    )
                                    .with_label("written type differs"),
                                );
                            }
                        }
                    }
                }
                func.returns = vals;
            }
            ast::Stmt::Op(o) => {
                let before = diags.len();
                let result_ty = convert_type(&o.result_type, diags);
                let type_ok = diags.len() == before;
                // An op whose written type is malformed is not checked
                // further: its inferred type would only disagree with the
                // placeholder.
                let op = build_op(o, &scope, &func, registry, diags).filter(|_| type_ok);
                let id = define(
                    &mut scope,
                    &mut func,
                    &o.result,
                    result_ty,
                    o.result_type.span(),
                    diags,
                );
                if let Some(mut op) = op {
                    op.result = id;
                    func.ops.push(op);
                }
            }
        }
    }
    func
}

fn undefined(v: &ast::Name) -> Diag {
    Diag::error(
        codes::E0201,
        format!("use of undefined value `%{}`", v.text),
        v.span,
    )
    .with_label("not defined before this use")
}

fn build_op(
    o: &ast::OpStmt,
    scope: &HashMap<String, ValueId>,
    func: &Func,
    registry: &Registry,
    diags: &mut Vec<Diag>,
) -> Option<Op> {
    let before = diags.len();
    let def = registry.op(&o.name.text);
    if def.is_none() {
        let dialect = o.name.text.split('.').next().unwrap_or("");
        let known = registry.dialects().iter().any(|d| d.name == dialect);
        diags.push(
            Diag::error(
                codes::E0202,
                format!("unknown operation `{}`", o.name.text),
                o.name.span,
            )
            .with_label(if known {
                format!("dialect `{dialect}` has no such op")
            } else {
                format!("no dialect `{dialect}` is registered")
            }),
        );
    }
    let mut operands = Vec::new();
    for v in &o.operands {
        match scope.get(&v.text) {
            Some(id) => operands.push(*id),
            None => diags.push(undefined(v)),
        }
    }
    let mut attrs = IndexMap::new();
    let mut attr_spans = IndexMap::new();
    if let Some(def) = def {
        if o.positional.len() > def.positional.len() {
            let extra = &o.positional[def.positional.len()];
            diags.push(
                Diag::error(
                    codes::E0204,
                    format!(
                        "`{}` takes {} positional attribute{}, found {}",
                        def.name,
                        def.positional.len(),
                        if def.positional.len() == 1 { "" } else { "s" },
                        o.positional.len()
                    ),
                    extra.span(),
                )
                .with_label("unexpected attribute"),
            );
        }
        for (name, a) in def.positional.iter().zip(&o.positional) {
            attrs.insert(name.to_string(), convert_attr(a, diags));
            attr_spans.insert(name.to_string(), a.span());
        }
    }
    for (k, a) in &o.attrs {
        if attrs.contains_key(&k.text) {
            diags.push(
                Diag::error(
                    codes::E0204,
                    format!("attribute `{}` is given twice", k.text),
                    k.span,
                )
                .with_label("given again here"),
            );
            continue;
        }
        attrs.insert(k.text.clone(), convert_attr(a, diags));
        attr_spans.insert(k.text.clone(), k.span.to(a.span()));
    }
    if let Some(tys) = &o.operand_types {
        if tys.len() != o.operands.len() {
            diags.push(
                Diag::error(
                    codes::E0208,
                    format!(
                        "{} operands but {} operand types",
                        o.operands.len(),
                        tys.len()
                    ),
                    o.span,
                )
                .with_label("counts differ"),
            );
        } else if operands.len() == tys.len() {
            for ((v, t), name) in operands.iter().zip(tys).zip(&o.operands) {
                let written = convert_type(t, diags);
                if &written != func.ty(*v) {
                    diags.push(
                        Diag::error(
                            codes::E0208,
                            format!(
                                "operand `%{}` is written as {written} but has type {}",
                                name.text,
                                func.ty(*v)
                            ),
                            t.span(),
                        )
                        .with_label("written type differs")
                        .with_secondary(func.value(*v).type_span, "type declared here"),
                    );
                }
            }
        }
    }
    if diags.len() > before {
        return None;
    }
    Some(Op {
        name: o.name.text.clone(),
        operands,
        attrs,
        result: ValueId(0),
        span: o.span,
        operand_spans: o.operands.iter().map(|n| n.span).collect(),
        attr_spans,
    })
}

/// Convert an attribute.
pub fn convert_attr(a: &ast::Attr, diags: &mut Vec<Diag>) -> Attr {
    match a {
        ast::Attr::Int(i, _) => Attr::Int(*i),
        ast::Attr::Float(f, _) => Attr::Float(*f),
        ast::Attr::Str(s, _) => Attr::Str(s.clone()),
        ast::Attr::Bool(b, _) => Attr::Bool(*b),
        ast::Attr::Symbol(n) => Attr::Symbol(n.text.clone()),
        ast::Attr::Word(n) => Attr::Word(n.text.clone()),
        ast::Attr::Array(v, _) => Attr::Array(v.iter().map(|a| convert_attr(a, diags)).collect()),
        ast::Attr::Term(n, args, _) => Attr::Term(
            n.text.clone(),
            args.iter()
                .map(|(k, a)| (k.as_ref().map(|k| k.text.clone()), convert_attr(a, diags)))
                .collect(),
        ),
        ast::Attr::Type(t) => Attr::Type(Box::new(convert_type(t, diags))),
    }
}

/// Convert a type, reporting unknown dtypes and malformed states. On error
/// a best-effort type is returned so that checking can go on.
pub fn convert_type(t: &ast::Type, diags: &mut Vec<Diag>) -> Type {
    match t {
        ast::Type::Tuple(ts, _) => Type::Tuple(ts.iter().map(|t| convert_type(t, diags)).collect()),
        ast::Type::Tensor {
            dims,
            dtype,
            states,
            span,
        } => {
            let dt = DType::from_name(&dtype.text).unwrap_or_else(|| {
                diags.push(
                    Diag::error(
                        codes::E0104,
                        format!("unknown element type `{}`", dtype.text),
                        dtype.span,
                    )
                    .with_label("expected f16, bf16, f32, f64, i1, i32 or i64"),
                );
                DType::F32
            });
            let shape: Vec<Dim> = dims
                .iter()
                .map(|d| match d {
                    ast::Dim::Static(n) => Dim::Static(*n),
                    ast::Dim::Axis(a) => Dim::Axis(a.clone()),
                })
                .collect();
            let mut state = State::new();
            let mut part_dims: HashMap<usize, &str> = HashMap::new();
            for (axis, s) in states {
                let st = match s {
                    ast::State::Part(i) => {
                        if *i < 0 || *i as usize >= shape.len() {
                            diags.push(
                                Diag::error(
                                    codes::E0105,
                                    format!(
                                        "`part({i})` names a dimension outside a rank-{} shape",
                                        shape.len()
                                    ),
                                    axis.span,
                                )
                                .with_label("dimension out of range")
                                .with_secondary(*span, "in this type"),
                            );
                            continue;
                        }
                        let i = *i as usize;
                        if let Some(other) = part_dims.insert(i, &axis.text) {
                            diags.push(
                                Diag::error(
                                    codes::E0105,
                                    format!(
                                        "dimension {i} is partitioned by both `@{other}` and `@{}`",
                                        axis.text
                                    ),
                                    axis.span,
                                )
                                .with_label("second partition of the same dimension"),
                            );
                        }
                        AxisState::Part(i)
                    }
                    ast::State::Repl => AxisState::Repl,
                    ast::State::Partial(a) => AxisState::Partial(convert_attr(a, diags)),
                };
                if state.insert(axis.text.clone(), st).is_some() {
                    diags.push(
                        Diag::error(
                            codes::E0105,
                            format!("parallel axis `@{}` appears twice in a type", axis.text),
                            axis.span,
                        )
                        .with_label("repeated axis"),
                    );
                }
            }
            Type::Tensor(TensorType {
                dtype: dt,
                shape,
                state,
            })
        }
    }
}
