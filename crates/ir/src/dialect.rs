//! Dialects and their op definitions: operand arity, attributes, the
//! custom assembly format (which attributes are written positionally in
//! `<...>`), type inference and optional constant folding. A [`Registry`]
//! holds every registered dialect; `efir-registry` builds the one list.

use crate::attr::Attr;
use crate::module::Op;
use crate::types::{TensorType, Type};
use efir_diagnostics::{codes, Diag, Span};
use indexmap::IndexMap;
use std::collections::HashMap;

/// How many operands an op takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arity {
    /// Exactly this many.
    Exact(usize),
    /// At least this many.
    AtLeast(usize),
}

impl Arity {
    /// Whether `n` operands are allowed.
    pub fn allows(self, n: usize) -> bool {
        match self {
            Arity::Exact(k) => n == k,
            Arity::AtLeast(k) => n >= k,
        }
    }
}

/// The kind of value an attribute must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttrKind {
    /// An integer.
    Int,
    /// A number (integer or float).
    Number,
    /// A `@symbol` (a parallel axis).
    Symbol,
    /// A `@symbol` naming a function of the module (a call); the verifier
    /// rejects cycles of such references.
    Func,
    /// A string.
    Str,
    /// One of the listed bare words.
    Word(&'static [&'static str]),
    /// An array of integers.
    IntArray,
    /// A reducer term (`#red.*`), checked by the `red` dialect.
    Reducer,
}

impl AttrKind {
    /// A description for messages.
    pub fn describe(self) -> String {
        match self {
            AttrKind::Int => "an integer".into(),
            AttrKind::Number => "a number".into(),
            AttrKind::Symbol => "a symbol `@name`".into(),
            AttrKind::Func => "a function symbol `@name`".into(),
            AttrKind::Str => "a string".into(),
            AttrKind::Word(ws) => format!("one of {}", ws.join(", ")),
            AttrKind::IntArray => "an array of integers".into(),
            AttrKind::Reducer => "a reducer `#red.*`".into(),
        }
    }

    /// Whether `a` has this kind (reducer terms are checked further by the
    /// term's own verifier).
    pub fn matches(self, a: &Attr) -> bool {
        match self {
            AttrKind::Int => matches!(a, Attr::Int(_)),
            AttrKind::Number => matches!(a, Attr::Int(_) | Attr::Float(_)),
            AttrKind::Symbol | AttrKind::Func => matches!(a, Attr::Symbol(_)),
            AttrKind::Str => matches!(a, Attr::Str(_)),
            AttrKind::Word(ws) => matches!(a, Attr::Word(w) if ws.contains(&w.as_str())),
            AttrKind::IntArray => a.as_int_array().is_some(),
            AttrKind::Reducer => matches!(a, Attr::Term(n, _) if n.starts_with("red.")),
        }
    }
}

/// One attribute of an op. All declared attributes are required.
#[derive(Clone, Copy, Debug)]
pub struct AttrSpec {
    /// Its name.
    pub name: &'static str,
    /// What it must be.
    pub kind: AttrKind,
}

/// Infers an op's result type from its operands and attributes, or
/// explains why the op is invalid.
pub type InferFn = fn(&InferCtx<'_>) -> Result<Type, Diag>;

/// Folds an op over scalar constants (the values of splat operands).
pub type FoldFn = fn(&[f64], &IndexMap<String, Attr>) -> Option<f64>;

/// The definition of one op.
#[derive(Clone, Copy)]
pub struct OpDef {
    /// `dialect.op`.
    pub name: &'static str,
    /// One line for docs and `--help`.
    pub summary: &'static str,
    /// The operand count.
    pub operands: Arity,
    /// Attribute names written in `<...>` in the custom form, in order.
    pub positional: &'static [&'static str],
    /// Every attribute (all required); positional ones come first.
    pub attrs: &'static [AttrSpec],
    /// Type inference and verification.
    pub infer: InferFn,
    /// Scalar constant folding, for pointwise ops.
    pub fold: Option<FoldFn>,
    /// Whether the result type is an input of the op (constants, reshape,
    /// broadcast, cast) rather than fully inferred from operands and
    /// attributes.
    pub result_from_declared: bool,
    /// Whether attributes beyond `attrs` are allowed (and not checked).
    pub extra_attrs: bool,
}

/// Verifies an attribute term (such as a reducer).
pub type TermVerifyFn = fn(&Attr, &TermCtx<'_>) -> Result<(), Diag>;

/// The definition of an attribute term `#dialect.name<...>`.
#[derive(Clone, Copy)]
pub struct AttrTermDef {
    /// `dialect.name`.
    pub name: &'static str,
    /// One line for docs.
    pub summary: &'static str,
    /// Checks its arguments.
    pub verify: TermVerifyFn,
}

/// A dialect: a namespace of ops and attribute terms.
#[derive(Clone, Copy)]
pub struct DialectDef {
    /// The namespace, e.g. `ew`.
    pub name: &'static str,
    /// One line for docs.
    pub summary: &'static str,
    /// Its ops.
    pub ops: &'static [OpDef],
    /// Its attribute terms.
    pub terms: &'static [AttrTermDef],
    /// Checks that span several ops of a function (run on every function
    /// after its ops are verified).
    pub verify_func: Option<FuncVerifyFn>,
}

/// A function-level verifier.
pub type FuncVerifyFn = fn(&crate::module::Func, &Registry, &Signatures) -> Vec<Diag>;

/// Function signatures of a module: name to (parameter types, result types).
pub type Signatures = HashMap<String, (Vec<Type>, Vec<Type>)>;

/// Every registered dialect, with lookup by op and term name.
#[derive(Default)]
pub struct Registry {
    dialects: Vec<&'static DialectDef>,
    ops: HashMap<&'static str, &'static OpDef>,
    terms: HashMap<&'static str, &'static AttrTermDef>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Register a dialect and its ops and terms.
    pub fn register(&mut self, d: &'static DialectDef) {
        self.dialects.push(d);
        for op in d.ops {
            self.ops.insert(op.name, op);
        }
        for t in d.terms {
            self.terms.insert(t.name, t);
        }
    }

    /// The registered dialects in registration order.
    pub fn dialects(&self) -> &[&'static DialectDef] {
        &self.dialects
    }

    /// The definition of an op.
    pub fn op(&self, name: &str) -> Option<&'static OpDef> {
        self.ops.get(name).copied()
    }

    /// The definition of an attribute term.
    pub fn term(&self, name: &str) -> Option<&'static AttrTermDef> {
        self.terms.get(name).copied()
    }

    /// Verify an attribute term and every term nested in it.
    pub fn verify_term(&self, a: &Attr, cx: &TermCtx<'_>) -> Result<(), Diag> {
        let Attr::Term(name, _) = a else {
            return Ok(());
        };
        match self.term(name) {
            Some(def) => (def.verify)(a, cx),
            None => Err(Diag::error(
                if name.starts_with("red.") {
                    codes::E0501
                } else {
                    codes::E0204
                },
                format!("unknown attribute `#{name}`"),
                cx.span,
            )
            .with_label("not defined by any registered dialect")),
        }
    }
}

impl Registry {
    /// Infer the type of op `name` applied to operands of these types with
    /// these attributes, outside any module (for e-graphs): arity and
    /// attributes are checked as the verifier does. `declared` is required
    /// for ops whose result type is an input ([`OpDef::result_from_declared`]).
    pub fn infer_detached(
        &self,
        name: &str,
        operands: &[&Type],
        attrs: &IndexMap<String, Attr>,
        declared: Option<&Type>,
        sigs: &Signatures,
    ) -> Result<Type, Diag> {
        let span = Span::default();
        let def = self.op(name).ok_or_else(|| {
            Diag::error(codes::E0202, format!("unknown operation `{name}`"), span)
        })?;
        if !def.operands.allows(operands.len()) {
            return Err(Diag::error(
                codes::E0203,
                format!("`{name}` applied to {} operands", operands.len()),
                span,
            ));
        }
        for spec in def.attrs {
            match attrs.get(spec.name) {
                Some(a) if spec.kind.matches(a) => {
                    if spec.kind == AttrKind::Reducer {
                        self.verify_term(
                            a,
                            &TermCtx {
                                registry: self,
                                sigs,
                                span,
                            },
                        )?;
                    }
                }
                _ => {
                    return Err(Diag::error(
                        codes::E0204,
                        format!(
                            "`{name}` needs attribute `{}` ({})",
                            spec.name,
                            spec.kind.describe()
                        ),
                        span,
                    ))
                }
            }
        }
        let placeholder = Type::Tuple(Vec::new());
        let declared = match (declared, def.result_from_declared) {
            (Some(t), _) => t,
            (None, false) => &placeholder,
            (None, true) => {
                return Err(Diag::error(
                    codes::E0205,
                    format!("`{name}` needs its result type"),
                    span,
                ))
            }
        };
        let op = Op {
            name: name.to_string(),
            operands: Vec::new(),
            attrs: attrs.clone(),
            result: crate::module::ValueId(0),
            span,
            operand_spans: Vec::new(),
            attr_spans: IndexMap::new(),
        };
        let cx = InferCtx {
            op: &op,
            operands: operands.to_vec(),
            declared,
            sigs,
            registry: self,
        };
        let t = (def.infer)(&cx)?;
        if def.result_from_declared && &t != declared {
            return Err(Diag::error(
                codes::E0205,
                format!("`{name}` produces {t}, but {declared} was given"),
                span,
            ));
        }
        Ok(t)
    }
}

/// What a term verifier can see.
pub struct TermCtx<'a> {
    /// The registry (to verify nested terms).
    pub registry: &'a Registry,
    /// Function signatures of the module.
    pub sigs: &'a Signatures,
    /// Where the term was written.
    pub span: Span,
}

/// What an op's type inference can see.
pub struct InferCtx<'a> {
    /// The op.
    pub op: &'a Op,
    /// The types of its operands.
    pub operands: Vec<&'a Type>,
    /// The result type written in the file.
    pub declared: &'a Type,
    /// Function signatures of the module.
    pub sigs: &'a Signatures,
    /// The registry.
    pub registry: &'a Registry,
}

impl InferCtx<'_> {
    /// An error at the op.
    pub fn err(&self, code: &'static str, msg: impl Into<String>) -> Diag {
        Diag::error(code, msg, self.op.span)
    }

    /// An error at operand `i`.
    pub fn operand_err(&self, i: usize, code: &'static str, msg: impl Into<String>) -> Diag {
        Diag::error(code, msg, self.op.operand_span(i))
    }

    /// An error at attribute `name`.
    pub fn attr_err(&self, name: &str, code: &'static str, msg: impl Into<String>) -> Diag {
        Diag::error(code, msg, self.op.attr_span(name))
    }

    /// Operand `i` as a tensor type.
    pub fn tensor(&self, i: usize) -> Result<&TensorType, Diag> {
        match self.operands[i] {
            Type::Tensor(t) => Ok(t),
            t => Err(self
                .operand_err(
                    i,
                    codes::E0210,
                    format!("`{}` expects a tensor operand", self.op.name),
                )
                .with_label(format!("this is {t}"))),
        }
    }

    /// Every operand as a tensor type.
    pub fn tensors(&self) -> Result<Vec<&TensorType>, Diag> {
        (0..self.operands.len()).map(|i| self.tensor(i)).collect()
    }

    /// The declared result type as a tensor type.
    pub fn declared_tensor(&self) -> Result<&TensorType, Diag> {
        match self.declared {
            Type::Tensor(t) => Ok(t),
            t => Err(self.err(
                codes::E0210,
                format!("`{}` produces a tensor, but {t} is declared", self.op.name),
            )),
        }
    }

    /// An attribute (kinds are checked before inference runs).
    pub fn attr(&self, name: &str) -> &Attr {
        static MISSING: Attr = Attr::Int(0);
        self.op.attrs.get(name).unwrap_or(&MISSING)
    }

    /// An integer attribute.
    pub fn int(&self, name: &str) -> i64 {
        self.attr(name).as_int().unwrap_or(0)
    }

    /// An integer attribute naming a dim of a rank-`rank` tensor.
    pub fn dim(&self, name: &str, rank: usize) -> Result<usize, Diag> {
        let i = self.int(name);
        if i < 0 || i as usize >= rank {
            return Err(self
                .attr_err(name, codes::E0403, format!("dimension {i} is out of range"))
                .with_label(format!("the tensor has rank {rank}")));
        }
        Ok(i as usize)
    }

    /// A symbol attribute's name.
    pub fn symbol(&self, name: &str) -> &str {
        self.attr(name).as_symbol().unwrap_or("")
    }
}
