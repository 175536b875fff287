//! How an e-node enters the canonical form ([`Kind`]), pointwise ops, and
//! types without parallel state as text.

use crate::analysis::EGraph;
use crate::convert::node_attrs;
use efir_ir::AxisState;
use egg::{Id, SymbolLang};
use rustc_hash::FxHashMap;

/// How an e-node enters the canonical form, with its label `L`: the text
/// [`node_kind`] gives, then its interned number, which names its value
/// class up to `par.reduce` loops (the one-organization rule compares the
/// labels of pointwise ops and ops).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind<L = u32> {
    /// Transparent: the value read through it is its operand's.
    View,
    /// Part of a pointwise region, keyed by its value and the region's
    /// inputs.
    Pointwise(L),
    /// Assembles tiles into a value without parallel state: a kernel
    /// boundary.
    Materialize(L),
    /// Keyed by its label and its operands' keys.
    Op(L),
    /// A `par.reduce` loop, keyed as its operand (one iteration with a
    /// full-extent tile); organized like the ops that make its operand
    /// (the label they share, if they do).
    Loop(Option<L>),
}

impl<L> Kind<L> {
    /// Whether it computes its value (a pointwise op or another op), as
    /// opposed to a view, a materialization or a loop.
    pub(super) fn computes(&self) -> bool {
        matches!(self, Kind::Pointwise(_) | Kind::Op(_))
    }
}

impl Kind {
    /// The label the one-organization rule compares, if any.
    pub(super) fn org(self) -> Option<u32> {
        match self {
            Kind::Pointwise(l) | Kind::Op(l) => Some(l),
            Kind::Loop(l) => l,
            Kind::View | Kind::Materialize(_) => None,
        }
    }
}

/// Ops inside pointwise regions: their canonical form is the region's value
/// and the set of its inputs, whatever the expression's shape.
pub(super) fn pointwise(op: &str) -> bool {
    op.starts_with("ew.")
        || matches!(
            op,
            "tensor.broadcast"
                | "tensor.reshape"
                | "tensor.transpose"
                | "tensor.full"
                | "tensor.iota"
        )
}

/// A type's tensors without their parallel state, as text.
pub(super) fn stateless_type(ty: Option<&efir_ir::Type>) -> String {
    ty.map(|t| {
        t.leaves()
            .iter()
            .map(|l| efir_ir::TensorType::new(l.dtype, l.shape.clone()).to_string())
            .collect::<Vec<_>>()
            .join(",")
    })
    .unwrap_or_default()
}

/// Each class's type, numbered (equal numbers for equal types).
pub(super) struct ClassTypes<'g> {
    of: Vec<u32>,
    types: Vec<Option<&'g efir_ir::Type>>,
}

impl<'g> ClassTypes<'g> {
    /// The types of the classes `ids`.
    pub(super) fn new(eg: &'g EGraph, ids: &[Id]) -> ClassTypes<'g> {
        let mut seen: FxHashMap<Option<&efir_ir::Type>, u32> = FxHashMap::default();
        let mut types = Vec::new();
        // (Neighbouring classes often have one type: compared before
        // hashing.)
        let mut last: Option<(Option<&efir_ir::Type>, u32)> = None;
        let of = ids
            .iter()
            .map(|id| {
                let ty = eg[*id].data.ty();
                if let Some((t, n)) = last {
                    if t == ty {
                        return n;
                    }
                }
                let n = *seen.entry(ty).or_insert_with(|| {
                    types.push(ty);
                    types.len() as u32 - 1
                });
                last = Some((ty, n));
                n
            })
            .collect();
        ClassTypes { of, types }
    }

    /// `text` of each class's type, made once per distinct type.
    pub(super) fn texts(&self, text: impl Fn(Option<&efir_ir::Type>) -> String) -> TypeTexts {
        let mut numbers: FxHashMap<String, u32> = FxHashMap::default();
        let mut texts = Vec::new();
        let by_type: Vec<u32> = self
            .types
            .iter()
            .map(|ty| {
                *numbers.entry(text(*ty)).or_insert_with_key(|t| {
                    texts.push(t.clone());
                    texts.len() as u32 - 1
                })
            })
            .collect();
        TypeTexts {
            of: self.of.iter().map(|t| by_type[*t as usize]).collect(),
            texts,
        }
    }
}

/// A text of each class's type ([`stateless_type`] or [`partial_type`]),
/// made once per distinct type (see [`ClassTypes::texts`]).
pub(super) struct TypeTexts {
    /// The number of each class's text in `texts`.
    of: Vec<u32>,
    texts: Vec<String>,
}

impl TypeTexts {
    /// The text of class `c`'s type.
    pub(super) fn get(&self, c: usize) -> &str {
        &self.texts[self.of[c] as usize]
    }

    /// The number of class `c`'s text (equal for equal texts).
    pub(super) fn number(&self, c: usize) -> u32 {
        self.of[c]
    }
}

/// A type's tensors with only the partial axes of their parallel state
/// (which axes hold partial results), as text.
pub(super) fn partial_type(ty: Option<&efir_ir::Type>) -> String {
    ty.map(|t| {
        t.leaves()
            .iter()
            .map(|l| {
                let partial: Vec<String> = l
                    .state
                    .iter()
                    .filter(|(_, st)| matches!(st, AxisState::Partial(_)))
                    .map(|(x, st)| format!("@{x}: {st}"))
                    .collect();
                format!(
                    "{}[{}]",
                    efir_ir::TensorType::new(l.dtype, l.shape.clone()),
                    partial.join(",")
                )
            })
            .collect::<Vec<_>>()
            .join(",")
    })
    .unwrap_or_default()
}

/// How an e-node enters the canonical form (never as a loop: a
/// `par.reduce` is an op here), with its label as text (without parallel state:
/// partitioned and replicated axes are views whose tile sizes are schedule
/// parameters, a full-extent tile being the unpartitioned form, and partial
/// axes are reduced by loops, one iteration with a full-extent tile, or
/// collected by a `par.collect` that is keyed itself).
///
/// `whole` is the class's [`stateless_type`].
pub(super) fn node_kind(
    eg: &EGraph,
    n: &SymbolLang,
    id: Id,
    kids: &[u32],
    ids: &[Id],
    whole: &str,
) -> Kind<String> {
    let op = n.op.as_str();
    if op == "par.partition" || op == "par.replicate" {
        // A view is transparent: a value read through a partition or a
        // replicate is the same value, whatever the chain.
        return Kind::View;
    }
    if pointwise(op) {
        // A pointwise region is keyed by the value it computes and its
        // inputs: how the expression is written (operand order, association,
        // where casts and factors sit, where it sits relative to the views)
        // does not matter.
        return Kind::Pointwise(format!("pointwise|{whole}"));
    }
    if op == "par.combine" {
        let ty = eg[id].data.ty();
        let kid_ty = kids.first().and_then(|k| eg[ids[*k as usize]].data.ty());
        let reduces = match (kid_ty, ty) {
            (Some(a), Some(b)) => a.leaves().iter().zip(b.leaves()).any(|(a, b)| {
                a.state
                    .iter()
                    .any(|(x, st)| matches!(st, AxisState::Partial(_)) && !b.state.contains_key(x))
            }),
            _ => false,
        };
        if !reduces {
            // Assembling tiles: a view, unless it leaves a value without
            // parallel state, which is materialized (a kernel boundary).
            return if stateless(ty) {
                Kind::Materialize(format!("materialize|{whole}"))
            } else {
                Kind::View
            };
        }
    }
    let attrs: Vec<String> = node_attrs(eg, n)
        .iter()
        .map(|(a, v)| format!("{a}={v}"))
        .collect();
    Kind::Op(format!("{op}|{}|{whole}", attrs.join(",")))
}

/// Whether a type's tensors have no parallel state.
pub(super) fn stateless(ty: Option<&efir_ir::Type>) -> bool {
    ty.is_some_and(|t| t.leaves().iter().all(|l| l.state.is_empty()))
}
