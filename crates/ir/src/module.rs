//! Modules, functions, ops and SSA values.
//!
//! A function owns its values in an arena ([`ValueId`] indexes
//! [`Func::values`]); ops are a straight-line list in definition order
//! (expressions are pure, so there are no regions or blocks). Source spans
//! are kept for diagnostics; ops built by passes carry the span of the op
//! they came from.

use crate::attr::Attr;
use crate::types::Type;
use efir_diagnostics::Span;
use indexmap::IndexMap;

/// Index of a value in its function's arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ValueId(pub u32);

impl ValueId {
    /// As an index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A value: its printed name (without `%`), its type and where it is
/// defined.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueInfo {
    /// The name printed after `%`.
    pub name: String,
    /// The type.
    pub ty: Type,
    /// The span of the definition (parameter or op result).
    pub span: Span,
    /// The span of the written type, if any.
    pub type_span: Span,
}

/// One operation: `%result = dialect.op<...> operands {attrs} : type`.
#[derive(Clone, Debug, PartialEq)]
pub struct Op {
    /// `dialect.op`.
    pub name: String,
    /// Operand values.
    pub operands: Vec<ValueId>,
    /// Attributes by name, in definition order of the op.
    pub attrs: IndexMap<String, Attr>,
    /// The defined value.
    pub result: ValueId,
    /// The whole op.
    pub span: Span,
    /// Spans of operands as written (same length as `operands` when parsed).
    pub operand_spans: Vec<Span>,
    /// Spans of attributes as written.
    pub attr_spans: IndexMap<String, Span>,
}

impl Op {
    /// The span of operand `i`, or of the op.
    pub fn operand_span(&self, i: usize) -> Span {
        self.operand_spans.get(i).copied().unwrap_or(self.span)
    }

    /// The span of attribute `name`, or of the op.
    pub fn attr_span(&self, name: &str) -> Span {
        self.attr_spans.get(name).copied().unwrap_or(self.span)
    }

    /// The dialect prefix of the name (`ew` for `ew.add`).
    pub fn dialect(&self) -> &str {
        self.name.split('.').next().unwrap_or("")
    }
}

/// A function: parameters, a straight-line body and returned values.
#[derive(Clone, Debug, PartialEq)]
pub struct Func {
    /// The symbol (without `@`).
    pub name: String,
    /// Where the name was written.
    pub name_span: Span,
    /// The whole function.
    pub span: Span,
    /// Parameters.
    pub params: Vec<ValueId>,
    /// Declared result types.
    pub results: Vec<Type>,
    /// Spans of the declared result types.
    pub result_spans: Vec<Span>,
    /// Function attributes (`attributes {kernels = 2}`), not checked by the
    /// verifier; passes document the ones they write.
    pub attrs: IndexMap<String, Attr>,
    /// The body in definition order.
    pub ops: Vec<Op>,
    /// Returned values.
    pub returns: Vec<ValueId>,
    /// The `return` statement.
    pub return_span: Span,
    /// Every value of this function.
    pub values: Vec<ValueInfo>,
}

impl Func {
    /// An empty function.
    pub fn new(name: &str) -> Func {
        Func {
            name: name.to_string(),
            name_span: Span::default(),
            span: Span::default(),
            params: Vec::new(),
            results: Vec::new(),
            result_spans: Vec::new(),
            attrs: IndexMap::new(),
            ops: Vec::new(),
            returns: Vec::new(),
            return_span: Span::default(),
            values: Vec::new(),
        }
    }

    /// The value's record.
    pub fn value(&self, v: ValueId) -> &ValueInfo {
        &self.values[v.index()]
    }

    /// The value's type.
    pub fn ty(&self, v: ValueId) -> &Type {
        &self.values[v.index()].ty
    }

    /// Add a value with a fresh name based on `hint` (numbered if empty or
    /// taken).
    pub fn add_value(&mut self, hint: &str, ty: Type, span: Span) -> ValueId {
        let taken: std::collections::HashSet<&str> =
            self.values.iter().map(|v| v.name.as_str()).collect();
        let name = if !hint.is_empty() && !taken.contains(hint) {
            hint.to_string()
        } else {
            (0..)
                .map(|i| {
                    if hint.is_empty() {
                        format!("{i}")
                    } else {
                        format!("{hint}_{i}")
                    }
                })
                .find(|n| !taken.contains(n.as_str()))
                .unwrap_or_default()
        };
        self.values.push(ValueInfo {
            name,
            ty,
            span,
            type_span: span,
        });
        ValueId(self.values.len() as u32 - 1)
    }

    /// Add a value named `name`, which the caller keeps unique (unlike
    /// [`Func::add_value`], nothing is looked up: building a function of
    /// many values stays linear).
    pub fn push_value(&mut self, name: String, ty: Type, span: Span) -> ValueId {
        self.values.push(ValueInfo {
            name,
            ty,
            span,
            type_span: span,
        });
        ValueId(self.values.len() as u32 - 1)
    }

    /// Append the op `name` over `operands` with `attrs` (in the op
    /// definition's order), defining the value `result` of type `ty`
    /// ([`Func::push_value`]); the op and its value carry `span`.
    pub fn push_op(
        &mut self,
        name: &str,
        operands: Vec<ValueId>,
        attrs: IndexMap<String, Attr>,
        result: String,
        ty: Type,
        span: Span,
    ) -> ValueId {
        let id = self.push_value(result, ty, span);
        self.ops.push(Op {
            name: name.to_string(),
            operand_spans: vec![span; operands.len()],
            attr_spans: attrs.keys().map(|k| (k.clone(), span)).collect(),
            operands,
            attrs,
            result: id,
            span,
        });
        id
    }

    /// How many times each value is used (by ops and by `return`).
    pub fn use_counts(&self) -> Vec<usize> {
        let mut uses = vec![0; self.values.len()];
        for op in &self.ops {
            for v in &op.operands {
                uses[v.index()] += 1;
            }
        }
        for v in &self.returns {
            uses[v.index()] += 1;
        }
        uses
    }

    /// Replace every use of `from` by `to`.
    pub fn replace_uses(&mut self, from: ValueId, to: ValueId) {
        for op in &mut self.ops {
            for v in &mut op.operands {
                if *v == from {
                    *v = to;
                }
            }
        }
        for v in &mut self.returns {
            if *v == from {
                *v = to;
            }
        }
    }
}

/// A module: functions in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Module {
    /// The functions.
    pub funcs: Vec<Func>,
}

impl Module {
    /// The function named `name`.
    pub fn func(&self, name: &str) -> Option<&Func> {
        self.funcs.iter().find(|f| f.name == name)
    }

    /// The number of ops in all functions.
    pub fn num_ops(&self) -> usize {
        self.funcs.iter().map(|f| f.ops.len()).sum()
    }
}
