//! The printer. The custom form writes `%r = dialect.op<pos> %a, %b {k = v}
//! : T`; the generic form writes `%r = "dialect.op"(%a, %b) {attrs} : (A, B)
//! -> T`. Both parse back to the same module, so printing is a fixed point.

use crate::dialect::Registry;
use crate::module::{Func, Module, Op};
use efir_syntax::literal::quote;
use std::fmt::Write;

/// Printing options.
#[derive(Clone, Copy, Debug, Default)]
pub struct PrintOptions {
    /// Print every op in the generic form.
    pub generic: bool,
}

/// Print a module.
pub fn print_module(m: &Module, registry: &Registry, opts: PrintOptions) -> String {
    let mut out = String::new();
    for (i, f) in m.funcs.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        print_func(&mut out, f, registry, opts);
    }
    out
}

fn print_func(out: &mut String, f: &Func, registry: &Registry, opts: PrintOptions) {
    let _ = write!(out, "func @{}(", f.name);
    for (i, p) in f.params.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let v = f.value(*p);
        let _ = write!(out, "%{}: {}", v.name, v.ty);
    }
    out.push(')');
    match f.results.len() {
        0 => {}
        1 => {
            let _ = write!(out, " -> {}", f.results[0]);
        }
        _ => {
            let ts: Vec<String> = f.results.iter().map(|t| t.to_string()).collect();
            let _ = write!(out, " -> ({})", ts.join(", "));
        }
    }
    if !f.attrs.is_empty() {
        out.push_str(" attributes");
        print_attr_dict(out, f.attrs.iter().map(|(k, v)| (k.as_str(), v)));
    }
    out.push_str(" {\n");
    for op in &f.ops {
        out.push_str("  ");
        print_op(out, f, op, registry, opts);
        out.push('\n');
    }
    out.push_str("  return");
    if !f.returns.is_empty() {
        let vs: Vec<String> = f
            .returns
            .iter()
            .map(|v| format!("%{}", f.value(*v).name))
            .collect();
        let ts: Vec<String> = f.returns.iter().map(|v| f.ty(*v).to_string()).collect();
        let _ = write!(out, " {} : {}", vs.join(", "), ts.join(", "));
    }
    out.push_str("\n}\n");
}

/// Print one op (without indentation or newline).
pub fn print_op(out: &mut String, f: &Func, op: &Op, registry: &Registry, opts: PrintOptions) {
    let operands: Vec<String> = op
        .operands
        .iter()
        .map(|v| format!("%{}", f.value(*v).name))
        .collect();
    let result = f.value(op.result);
    let def = registry.op(&op.name);
    let generic =
        opts.generic || def.is_none_or(|d| !d.positional.iter().all(|p| op.attrs.contains_key(*p)));
    let _ = write!(out, "%{} = ", result.name);
    if generic {
        let _ = write!(out, "{}({})", quote(&op.name), operands.join(", "));
        // Attributes in the op definition's order, then any others.
        let mut attrs: Vec<(&str, &crate::attr::Attr)> = Vec::new();
        if let Some(d) = def {
            attrs.extend(
                d.attrs
                    .iter()
                    .filter_map(|s| op.attrs.get_key_value(s.name))
                    .map(|(k, v)| (k.as_str(), v)),
            );
        }
        for (k, v) in &op.attrs {
            if !attrs.iter().any(|(n, _)| n == k) {
                attrs.push((k.as_str(), v));
            }
        }
        print_attr_dict(out, attrs.into_iter());
        let tys: Vec<String> = op.operands.iter().map(|v| f.ty(*v).to_string()).collect();
        let _ = write!(out, " : ({}) -> {}", tys.join(", "), result.ty);
        return;
    }
    let def = def.expect("checked above");
    out.push_str(&op.name);
    if !def.positional.is_empty() {
        let ps: Vec<String> = def
            .positional
            .iter()
            .map(|p| op.attrs[*p].to_string())
            .collect();
        let _ = write!(out, "<{}>", ps.join(", "));
    }
    if !operands.is_empty() {
        let _ = write!(out, " {}", operands.join(", "));
    }
    print_attr_dict(
        out,
        op.attrs
            .iter()
            .filter(|(k, _)| !def.positional.contains(&k.as_str()))
            .map(|(k, v)| (k.as_str(), v)),
    );
    let _ = write!(out, " : {}", result.ty);
}

fn print_attr_dict<'a>(
    out: &mut String,
    attrs: impl Iterator<Item = (&'a str, &'a crate::attr::Attr)>,
) {
    let items: Vec<String> = attrs.map(|(k, v)| format!("{k} = {v}")).collect();
    if !items.is_empty() {
        let _ = write!(out, " {{{}}}", items.join(", "));
    }
}
