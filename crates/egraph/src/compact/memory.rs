//! Stores that reads from memory force. The lowering (`efir_triton::plan`)
//! reads the operand of a slice, a concatenation or a reshape that splits or
//! merges dims from memory, through index arithmetic: where that operand is
//! a buffer (a parameter, a result, a value its kernel stores) reached
//! through views (parallel views; for a reshape, transposes and reshapes;
//! for a slice or concatenation, slices and transposes and reshapes of
//! static extents), it reads the buffer; otherwise the value where that
//! chain ends is stored by a kernel of its own. The canonical form keys such
//! a read as a read of a stored value (see [`Enumerator::node_key_parts`]),
//! so that two programs that differ only in such a store (say attention
//! over key/value heads broadcast to their query group and merged, and the
//! same over split query heads) are different candidates.

use super::index::Enumerator;
use super::kinds::Kind;
use crate::analysis::EGraph;
use efir_ir::Dim;
use egg::{Id, SymbolLang};

/// Readers of slices and concatenations.
pub(super) const SLICE: u8 = 1;
/// Readers of reshapes that split or merge dims.
pub(super) const RESHAPE: u8 = 2;
/// Every reader.
pub(super) const ALL: u8 = SLICE | RESHAPE;

/// What each option reads from memory and passes through, per class and
/// option.
#[derive(Clone, Default)]
pub(super) struct Memory {
    /// The reader an option is (`SLICE`, `RESHAPE` or 0).
    pub(super) read: Vec<Vec<u8>>,
    /// The readers for which an option is a view of its first operand (a
    /// buffer under it is read through it).
    pub(super) pass: Vec<Vec<u8>>,
    /// Whether an option is a buffer whatever reads it (a parameter, a
    /// `par.collect`).
    pub(super) load: Vec<Vec<bool>>,
    /// Classes that are readers or that a reader reaches through views:
    /// their realizations may change a reader's key beyond their own keys,
    /// so `early` does not resolve them as fixed, frontier-fixed or
    /// determined classes.
    pub(super) relevant: Vec<bool>,
    /// Whether a class is a result (stored, whatever computes it).
    pub(super) root: Vec<bool>,
    /// The label of a store a read forces.
    pub(super) forced: u32,
}

fn all_static(t: Option<&efir_ir::Type>) -> bool {
    t.and_then(efir_ir::Type::as_tensor)
        .is_some_and(|t| t.shape.iter().all(|d| matches!(d, Dim::Static(_))))
}

/// Whether reshaping a value of type `a` to `r` splits or merges dims
/// (beyond adding or dropping dims of extent 1), as the lowering decides.
fn splits_or_merges(a: Option<&efir_ir::Type>, r: Option<&efir_ir::Type>) -> bool {
    let dims = |t: Option<&efir_ir::Type>| t.map(efir_ir::Type::non_unit_dims).unwrap_or_default();
    dims(a) != dims(r)
}

impl Memory {
    /// The readers and views of the options (`options`, with operand
    /// classes `kids`) of the classes `ids`; `roots` the result classes.
    pub(super) fn new(
        eg: &EGraph,
        ids: &[Id],
        options: &[Vec<SymbolLang>],
        kids: &[Vec<Vec<u32>>],
        roots: &[u32],
        forced: u32,
    ) -> Memory {
        let n = ids.len();
        let ty = |c: u32| eg[ids[c as usize]].data.ty();
        let mut read = Vec::with_capacity(n);
        let mut pass = Vec::with_capacity(n);
        let mut load = Vec::with_capacity(n);
        for c in 0..n {
            let (mut r, mut p, mut l) = (Vec::new(), Vec::new(), Vec::new());
            for (j, node) in options[c].iter().enumerate() {
                let op = node.op.as_str();
                let first = kids[c][j].first().copied();
                let here = || ty(c as u32);
                let under = || first.and_then(ty);
                r.push(match op {
                    "tensor.slice" | "tensor.concat" => SLICE,
                    "tensor.reshape" if first.is_some() && splits_or_merges(under(), here()) => {
                        RESHAPE
                    }
                    _ => 0,
                });
                p.push(match op {
                    "par.partition" | "par.replicate" | "par.combine" => ALL,
                    "tensor.slice" => SLICE,
                    "tensor.reshape" | "tensor.transpose" if first.is_some() => {
                        RESHAPE
                            | if all_static(here()) && all_static(under()) {
                                SLICE
                            } else {
                                0
                            }
                    }
                    _ => 0,
                });
                l.push(op.starts_with("arg") || op == "par.collect");
            }
            read.push(r);
            pass.push(p);
            load.push(l);
        }
        // Readers, what they read, and what those read through views (so
        // that every class whose `loaded` bits are computed has its
        // operands' computed too).
        let mut relevant = vec![false; n];
        let mut stack: Vec<u32> = (0..n as u32)
            .filter(|c| read[*c as usize].iter().any(|r| *r != 0))
            .collect();
        while let Some(x) = stack.pop() {
            let xi = x as usize;
            if std::mem::replace(&mut relevant[xi], true) {
                continue;
            }
            for j in 0..options[xi].len() {
                if read[xi][j] != 0 {
                    stack.extend_from_slice(&kids[xi][j]);
                } else if pass[xi][j] != 0 {
                    stack.extend(kids[xi][j].first().copied());
                }
            }
        }
        let mut root = vec![false; n];
        for r in roots {
            root[*r as usize] = true;
        }
        Memory {
            read,
            pass,
            load,
            relevant,
            root,
            forced,
        }
    }
}

impl Enumerator<'_> {
    /// For which readers the value of class `c`, realized by option `j`
    /// (its operands' by `loaded`), is a buffer or views of one (bits of
    /// [`ALL`]).
    pub(super) fn loaded_bits(&self, c: usize, j: usize, loaded: impl Fn(u32) -> u8) -> u8 {
        let m = &self.mem;
        if m.root[c]
            || m.load[c][j]
            || self.stores[c][j].is_some()
            || matches!(self.kind[c][j], Kind::Materialize(_))
        {
            return ALL;
        }
        match (m.pass[c][j], self.kids[c][j].first()) {
            (0, _) | (_, None) => 0,
            (p, Some(x)) => p & loaded(*x),
        }
    }
}
