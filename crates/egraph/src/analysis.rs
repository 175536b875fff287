//! The e-class analysis: every e-class has exactly one value type (dtype,
//! logical shape, parallel state), inferred for each e-node by the same
//! type rules the verifier uses. Attribute leaves (dims, axes, reducers,
//! types) are e-classes of their own with [`Data::Attr`].
//!
//! Merging two classes of different types is a bug: rules union through
//! [`crate::rules::typed_union`], which refuses and records the rule's name;
//! should a merge of different types happen anyway, `merge` fails in debug
//! builds and records an error in release builds.

use efir_ir::dialect::Signatures;
use efir_ir::{Attr, Registry, Type};
use egg::{Analysis, DidMerge, Id, Language, SymbolLang};
use indexmap::{IndexMap, IndexSet};
use std::fmt;
use std::sync::Arc;

/// The e-graph type used throughout efir.
pub type EGraph = egg::EGraph<SymbolLang, TypeAnalysis>;

/// What every e-class knows about its value.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    /// An attribute leaf: index into [`TypeAnalysis::attrs`].
    Attr(usize),
    /// A value of this type.
    Value(Type),
    /// An ill-typed e-node (only ever built by a buggy rule).
    Invalid(String),
}

impl Data {
    /// The value type, if this is a value.
    pub fn ty(&self) -> Option<&Type> {
        match self {
            Data::Value(t) => Some(t),
            _ => None,
        }
    }
}

/// Fixed context of one e-graph: the dialects, the functions reducers refer
/// to, and the parameter types of the function.
pub struct Ctx {
    /// Every value dialect.
    pub registry: Registry,
    /// Signatures of the module's functions (for repaired reducers), shared
    /// by the e-graphs of one module.
    pub sigs: Arc<Signatures>,
    /// Types of the function's parameters (`argN` leaves).
    pub params: Vec<Type>,
}

/// The type analysis, with the interned attributes.
pub struct TypeAnalysis {
    /// The fixed context.
    pub ctx: Arc<Ctx>,
    /// Interned attribute values; leaf `#aN` is `attrs[N]`.
    pub attrs: IndexSet<Attr>,
    /// Bugs found while saturating (a rule that would merge types).
    pub errors: Vec<String>,
}

impl fmt::Debug for TypeAnalysis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "TypeAnalysis({} attrs, {} errors)",
            self.attrs.len(),
            self.errors.len()
        )
    }
}

impl TypeAnalysis {
    /// A fresh analysis.
    pub fn new(ctx: Arc<Ctx>) -> TypeAnalysis {
        TypeAnalysis {
            ctx,
            attrs: IndexSet::new(),
            errors: Vec::new(),
        }
    }

    /// The leaf symbol of an attribute (interning it).
    pub fn attr_leaf(&mut self, a: Attr) -> SymbolLang {
        let (i, _) = self.attrs.insert_full(a);
        SymbolLang::leaf(format!("#a{i}"))
    }
}

/// The leaf of parameter `i`.
pub fn arg_leaf(i: usize) -> SymbolLang {
    SymbolLang::leaf(format!("arg{i}"))
}

/// How many of an op's children are operands (the rest are attributes,
/// then the declared result type for ops whose result type is an input).
pub fn operand_count(reg: &Registry, op: &str, children: usize) -> Option<usize> {
    let def = reg.op(op)?;
    Some(match def.operands {
        efir_ir::dialect::Arity::Exact(n) => n,
        efir_ir::dialect::Arity::AtLeast(_) => {
            children.checked_sub(def.attrs.len() + def.result_from_declared as usize)?
        }
    })
}

/// Infer the data of an e-node `op(children)` from its children's data.
pub fn infer(an: &TypeAnalysis, op: &str, children: &[&Data]) -> Data {
    if let Some(i) = op.strip_prefix("#a").and_then(|s| s.parse::<usize>().ok()) {
        return Data::Attr(i);
    }
    if let Some(i) = op.strip_prefix("arg").and_then(|s| s.parse::<usize>().ok()) {
        return match an.ctx.params.get(i) {
            Some(t) => Data::Value(t.clone()),
            None => Data::Invalid(format!("argument {i} out of range")),
        };
    }
    let reg = &an.ctx.registry;
    let Some(def) = reg.op(op) else {
        return Data::Invalid(format!("unknown op `{op}`"));
    };
    let n = operand_count(reg, op, children.len()).unwrap_or(0);
    let want = n + def.attrs.len() + def.result_from_declared as usize;
    if children.len() != want {
        return Data::Invalid(format!(
            "`{op}` with {} children, expected {want}",
            children.len()
        ));
    }
    let mut operands = Vec::with_capacity(n);
    for c in &children[..n] {
        match c {
            Data::Value(t) => operands.push(t),
            _ => return Data::Invalid(format!("`{op}`: an operand is not a value")),
        }
    }
    let attr = |c: &Data| match c {
        Data::Attr(i) => an.attrs.get_index(*i).cloned(),
        _ => None,
    };
    let mut attrs = IndexMap::new();
    for (spec, c) in def.attrs.iter().zip(&children[n..]) {
        match attr(c) {
            Some(a) => {
                attrs.insert(spec.name.to_string(), a);
            }
            None => {
                return Data::Invalid(format!(
                    "`{op}`: attribute `{}` is not an attribute",
                    spec.name
                ))
            }
        }
    }
    let declared = if def.result_from_declared {
        match children.last().and_then(|c| attr(c)) {
            Some(Attr::Type(t)) => Some(*t),
            _ => return Data::Invalid(format!("`{op}`: missing result type")),
        }
    } else {
        None
    };
    match reg.infer_detached(op, &operands, &attrs, declared.as_ref(), &an.ctx.sigs) {
        Ok(t) => Data::Value(t),
        Err(d) => Data::Invalid(format!("`{op}`: {}: {}", d.code, d.message)),
    }
}

impl Analysis<SymbolLang> for TypeAnalysis {
    type Data = Data;

    fn make(egraph: &mut EGraph, enode: &SymbolLang, _id: Id) -> Data {
        let children: Vec<&Data> = enode.children().iter().map(|c| &egraph[*c].data).collect();
        let d = infer(&egraph.analysis, enode.op.as_str(), &children);
        if let Data::Invalid(why) = &d {
            let msg = format!("ill-typed e-node `{}`: {why}", enode.op);
            debug_assert!(false, "{msg}");
            egraph.analysis.errors.push(msg);
        }
        d
    }

    fn merge(&mut self, a: &mut Data, b: Data) -> DidMerge {
        if *a != b {
            let msg = format!("merged e-classes of different types: {a:?} and {b:?}");
            debug_assert!(false, "{msg}");
            self.errors.push(msg);
        }
        DidMerge(false, false)
    }
}
