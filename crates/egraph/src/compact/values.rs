//! Value classes: which e-classes hold the same value (for the
//! one-organization rule, and, up to `par.reduce` loops, for keys).

use super::kinds::{Kind, TypeTexts};
use crate::analysis::EGraph;
use crate::convert::node_attrs;
use egg::{Id, SymbolLang};
use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;

/// The value classes of an e-graph's classes (dense indices, as in
/// [`super::Enumerator`]).
pub(super) struct ValueClasses {
    /// The value class of each e-class, numbered densely: e-classes that
    /// hold the same value under different parallel states (linked by
    /// views and materializations), and e-classes computing the same op
    /// over the same values. A partial result is not its whole value.
    pub(super) value: Vec<u32>,
    /// The number of value classes.
    pub(super) count: usize,
    /// The value classes up to `par.reduce` loops (what keys name; not
    /// dense).
    pub(super) keyed: Vec<u32>,
}

/// The representative of `x` in the union-find `p` (halving paths).
fn find(p: &mut [u32], mut x: u32) -> u32 {
    while p[x as usize] != x {
        p[x as usize] = p[p[x as usize] as usize];
        x = p[x as usize];
    }
    x
}

/// Join the sets of `a` and `b` (the smaller representative stays).
fn union(p: &mut [u32], a: u32, b: u32) -> bool {
    let (a, b) = (find(p, a), find(p, b));
    if a == b {
        return false;
    }
    p[a.max(b) as usize] = a.min(b);
    true
}

/// The classes whose value classes are found: their ids, options, the
/// options' operands and kinds (dense indices, as in
/// [`super::Enumerator`]).
struct Classes<'g> {
    eg: &'g EGraph,
    ids: &'g [Id],
    options: &'g [Vec<SymbolLang>],
    kids: &'g [Vec<Vec<u32>>],
    kinds: &'g [Vec<Kind<String>>],
}

impl Classes<'_> {
    fn reduce_loop(&self, c: usize, j: usize) -> bool {
        self.options[c][j].op.as_str() == "par.reduce"
    }

    /// Join e-classes that hold the same value under different parallel
    /// states (linked by partitions, replicates and combines that assemble
    /// tiles). A partial result is not its combined value; with `loops`, a
    /// `par.reduce`'s is.
    fn link(&self, parent: &mut [u32], loops: bool) {
        for (c, ks) in self.kinds.iter().enumerate() {
            for (j, kind) in ks.iter().enumerate() {
                let joins = matches!(kind, Kind::View | Kind::Materialize(_))
                    || (loops && self.reduce_loop(c, j));
                if let (true, Some(k)) = (joins, self.kids[c][j].first()) {
                    union(parent, c as u32, *k);
                }
            }
        }
    }

    /// Each option's op, attributes and type (`types`: with the partial
    /// axes of its result, or without parallel state), for ops that compute
    /// (not views, materializations or loops), as the number of that text
    /// (equal for equal texts).
    fn signatures(&self, types: &TypeTexts) -> Vec<Vec<Option<u32>>> {
        use std::fmt::Write;
        let mut numbers: FxHashMap<String, u32> = FxHashMap::default();
        let mut text = String::new();
        // Whether an op has attributes (`node_attrs` is empty otherwise).
        let registry = &self.eg.analysis.ctx.registry;
        let mut has_attrs: FxHashMap<egg::Symbol, bool> = FxHashMap::default();
        (0..self.ids.len())
            .map(|c| {
                (0..self.options[c].len())
                    .map(|j| {
                        let n = &self.options[c][j];
                        let computes = self.kinds[c][j].computes() && !self.reduce_loop(c, j);
                        computes.then(|| {
                            text.clear();
                            let _ = write!(text, "{}|", n.op);
                            let attrs = *has_attrs.entry(n.op).or_insert_with(|| {
                                registry
                                    .op(n.op.as_str())
                                    .is_some_and(|d| !d.attrs.is_empty())
                            });
                            if attrs {
                                for (i, (a, v)) in node_attrs(self.eg, n).iter().enumerate() {
                                    if i > 0 {
                                        text.push(',');
                                    }
                                    let _ = write!(text, "{a}={v}");
                                }
                            }
                            let _ = write!(text, "|{}", types.get(c));
                            if let Some(k) = numbers.get(text.as_str()) {
                                return *k;
                            }
                            let k = numbers.len() as u32;
                            numbers.insert(text.clone(), k);
                            k
                        })
                    })
                    .collect()
            })
            .collect()
    }

    /// Congruence: the same op over the same values computes the same
    /// value, whichever e-classes hold it (say two collections of one
    /// partial result under different parallel states). Joins such classes
    /// until nothing changes.
    fn congruence(&self, parent: &mut [u32], signatures: &[Vec<Option<u32>>]) {
        let mut by_op: FxHashMap<(u32, Operands), u32> = FxHashMap::default();
        loop {
            let mut changed = false;
            by_op.clear();
            for (c, cs) in signatures.iter().enumerate() {
                for (j, op) in cs.iter().enumerate() {
                    let Some(op) = op else { continue };
                    let ks = Operands::new(self.kids[c][j].iter().map(|k| find(parent, *k)));
                    match by_op.entry((*op, ks)) {
                        Entry::Vacant(e) => {
                            e.insert(c as u32);
                        }
                        Entry::Occupied(e) => changed |= union(parent, c as u32, *e.get()),
                    }
                }
            }
            if !changed {
                break;
            }
        }
    }
}

/// The operands' value classes of an op (few, so mostly kept inline).
#[derive(PartialEq, Eq, Hash)]
enum Operands {
    Few(u8, [u32; 4]),
    Many(Vec<u32>),
}

impl Operands {
    fn new(ks: impl ExactSizeIterator<Item = u32>) -> Operands {
        let n = ks.len();
        if n > 4 {
            return Operands::Many(ks.collect());
        }
        let mut a = [0; 4];
        for (x, k) in a.iter_mut().zip(ks) {
            *x = k;
        }
        Operands::Few(n as u8, a)
    }
}

/// The set of each element of the union-find `parent`, numbered densely
/// (states keep one word per value) in the order of first appearance, and
/// the number of sets.
fn numbered_densely(parent: &mut [u32]) -> (Vec<u32>, usize) {
    let mut dense: FxHashMap<u32, u32> = FxHashMap::default();
    let value: Vec<u32> = (0..parent.len() as u32)
        .map(|c| {
            let v = find(parent, c);
            let n = dense.len() as u32;
            *dense.entry(v).or_insert(n)
        })
        .collect();
    (value, dense.len())
}

/// The value classes of the classes `ids` whose options are `options`
/// (with operands `kids` and kinds `kinds`, as [`super::kinds::node_kind`]
/// gives them, and their types as `partial` and `whole` texts, see
/// [`super::kinds::partial_type`] and [`super::kinds::stateless_type`]):
/// every e-node counts, whatever the candidate space keeps.
pub(super) fn value_classes(
    eg: &EGraph,
    ids: &[Id],
    options: &[Vec<SymbolLang>],
    kids: &[Vec<Vec<u32>>],
    kinds: &[Vec<Kind<String>>],
    partial: &TypeTexts,
    whole: &TypeTexts,
) -> ValueClasses {
    let classes = Classes {
        eg,
        ids,
        options,
        kids,
        kinds,
    };
    let mut parent: Vec<u32> = (0..ids.len() as u32).collect();
    classes.link(&mut parent, false);
    classes.congruence(&mut parent, &classes.signatures(partial));
    let (value, count) = numbered_densely(&mut parent);
    // For keys, a `par.reduce` is a loop over an axis's tiles: with a
    // full-extent tile it is one iteration, so the partial result it
    // reduces is keyed as the whole value (like a full-extent tile of a
    // partitioned axis). A `par.collect` keeps partial results in memory
    // and stays keyed.
    classes.link(&mut parent, true);
    classes.congruence(&mut parent, &classes.signatures(whole));
    let keyed = (0..ids.len() as u32)
        .map(|c| find(&mut parent, c))
        .collect();
    ValueClasses {
        value,
        count,
        keyed,
    }
}
