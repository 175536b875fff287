//! The enumerator: the candidate graph of one e-graph (its classes, their
//! options in the candidate space, how each option is keyed), built once,
//! and the switches of the ablations.

use super::canon::{Keys, Scratch, HOLE};
use super::context::{ContextScratch, COVER_CHECKS};
use super::dead_fields::{field_use, FieldUse};
use super::determined::Determined;
use super::kinds::{
    node_kind, partial_type, stateless, stateless_type, ClassTypes, Kind, TypeTexts,
};
use super::limits::Progress;
use super::memory::Memory;
use super::order::{numbered_classes, ordered_options};
use super::space::{retain_marked, view_mask, Space};
use super::values::{value_classes, ValueClasses};
use crate::analysis::EGraph;
use crate::convert::Graph;
use egg::{Id, SymbolLang};
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::{Arc, Mutex};

/// Enumerates candidates of one e-graph.
#[derive(Clone)]
pub struct Enumerator<'a> {
    pub(super) eg: &'a EGraph,
    pub(super) roots: Vec<u32>,
    pub(super) ids: Vec<Id>,
    pub(super) index: FxHashMap<Id, u32>,
    pub(super) options: Vec<Vec<SymbolLang>>,
    pub(super) kids: Vec<Vec<Vec<u32>>>,
    /// How each option of each class enters the canonical form.
    pub(super) kind: Vec<Vec<Kind>>,
    /// The value class of each e-class (for the one-organization rule):
    /// e-classes that hold the same value under different parallel states
    /// (linked by views and materializations), and e-classes computing the
    /// same op over the same values. A partial result is not its whole
    /// value.
    pub(super) value: Vec<u32>,
    /// The number of value classes.
    pub(super) values: usize,
    /// Whether ops of two labels can produce a value class (otherwise the
    /// one-organization rule never excludes an option of that value).
    pub(super) several_orgs: Vec<bool>,
    /// Interned keys: all of them, or in a parallel enumeration, those
    /// this thread has used (a cache of `shared_keys`, which numbers them).
    pub(super) interner: FxHashMap<Vec<u32>, u32>,
    pub(super) shared_keys: Option<Arc<Mutex<Keys>>>,
    /// Value classes up to `par.reduce` loops (what keys name).
    pub(super) keyed_value: Vec<u32>,
    /// The value class (up to `par.reduce` loops) each interned key
    /// computes (`u32::MAX` for holes and keys not seen in a program yet).
    pub(super) value_of_key: Vec<u32>,
    /// What the progress events of `Enumerator::show_progress` name:
    /// the function, and since when and within what limit the pass runs.
    pub progress: Progress,
    /// For classes whose every realization has the same key, the one
    /// option `early` considers (see [`Enumerator::fixed_options`]), and
    /// likewise for classes whose every realization reads the same frontier
    /// (see [`Enumerator::frontier_fixed`]).
    pub(super) fixed: Vec<Option<u16>>,
    /// The fixed classes proper: no completion depends on them, so they
    /// are not context.
    pub(super) opaque: Vec<bool>,
    /// Classes whose options are all views and pointwise ops (and loads
    /// and constants): they choose only how a region is written.
    pub(super) route: Vec<bool>,
    /// The order in which [`Enumerator::expand`] tries each class's
    /// options (a route class's pointwise ops before its views).
    pub(super) order: Vec<Vec<u16>>,
    /// Where each class's options start in a numbering of all options.
    pub(super) opt_base: Vec<usize>,
    /// The last key interned at each call site of
    /// [`Enumerator::intern_at`], and what it was interned from.
    pub(super) intern_cache: Vec<(u32, Vec<u32>)>,
    /// The interner's lookup buffer.
    pub(super) intern_buf: Vec<u32>,
    pub(super) scratch: Scratch,
    /// Buffers of [`Enumerator::context`].
    pub(super) ctx: ContextScratch,
    /// Buffers of [`Enumerator::determine`].
    pub(super) det: Determined,
    /// Whether `det` holds what [`Enumerator::settle_determined`] found
    /// about the state whose canonical form the scratch buffers hold (then
    /// [`Enumerator::context`] goes on from it).
    pub(super) det_fresh: bool,
    /// Whether `early` resolves determined holes at once and compares
    /// contexts with determined classes as resolved.
    pub(super) use_determined: bool,
    /// Whether `early` drops partial programs whose every completion has a
    /// dead tuple field ([`Enumerator::dead_field_partial`]).
    pub(super) use_dead_fields: bool,
    /// How many earlier contexts [`Enumerator::covers`] is tried against.
    pub(super) cover_checks: usize,
    /// Whether holes other than route holes are resolved in the order they
    /// were opened (an ablation of the hole order).
    pub(super) first_opened_first: bool,
    /// The key of a hole at each class.
    pub(super) hole_key: Vec<u32>,
    /// Whether this is a sketch: partial programs are pruned by canonical
    /// form alone ([`Enumerator::run_sketched`]).
    pub(super) sketching: bool,
    /// The keys of holes.
    pub(super) hole_keys: FxHashSet<u32>,
    /// The text of each label (for [`Enumerator::key_text`]).
    pub(super) label_names: Vec<String>,
    /// Options that compute nothing: parameters and constants.
    pub(super) leaf: Vec<Vec<bool>>,
    /// For matmuls, reductions and reducing combines whose result has no
    /// parallel state (the kernels write those to memory), the label of a
    /// materialization of that type.
    pub(super) stores: Vec<Vec<Option<u32>>>,
    /// What options read from memory and pass through (the stores such
    /// reads force).
    pub(super) mem: Memory,
    /// For each result class, the label of a materialization of its type:
    /// a result is written to memory however it is computed.
    pub(super) root_store: Vec<u32>,
    /// How each option reads the fields of its tuple operands.
    pub(super) fields: Vec<Vec<FieldUse>>,
    /// The number of fields of each tuple-typed class (0 for tensors).
    pub(super) arity: Vec<u32>,
    /// For each class, the tuple-typed classes (and their fields) that
    /// e-nodes of the classes reachable from it read.
    pub(super) tuple_reads: Vec<Vec<(u32, u64)>>,
    /// Buffers of [`Enumerator::dead_field_partial`].
    pub(super) live_by_key: FxHashMap<u64, u64>,
    pub(super) live_by_value: FxHashMap<u32, u64>,
}

impl<'a> Enumerator<'a> {
    /// Prepare the enumeration of `g`'s candidates, in the whole space
    /// ([`Space::WHOLE`]).
    pub fn new(g: &'a Graph) -> Enumerator<'a> {
        match Enumerator::new_in(g, Space::WHOLE) {
            Ok(en) => en,
            Err(e) => unreachable!("the whole space removes no e-node: {e}"),
        }
    }

    /// Prepare the enumeration of `g`'s candidates in the space `space`
    /// says (see [`Space`]). Fails when that space leaves a result without
    /// a program.
    pub fn new_in(g: &'a Graph, space: Space) -> Result<Enumerator<'a>, String> {
        let eg = &g.egraph;
        let SpaceClasses {
            ids,
            index,
            options,
            kids,
            kinds,
            values,
            whole,
        } = space_classes(eg, space);
        let roots = result_classes(g, &index, &options, space)?;
        let labels = label_options(eg, &ids, &whole, &options, &kids, &kinds, &values.keyed);
        let mem = Memory::new(eg, &ids, &options, &kids, &roots, labels.forced);
        let kind = labels.kind;
        let (opt_base, total) = option_bases(&options);
        let route = route_classes(&kind);
        let order = option_order(&kind, &route);
        let several_orgs = several_organizations(&kind, &values.value, values.count);
        let mut en = Enumerator {
            eg,
            progress: Progress::new(&g.name),
            stores: labels.stores,
            mem,
            root_store: labels.root_store,
            fixed: Vec::new(),
            leaf: leaf_options(&options),
            fields: field_uses(eg, &options),
            arity: tuple_arity(eg, &ids),
            tuple_reads: Vec::new(),
            live_by_key: FxHashMap::default(),
            live_by_value: FxHashMap::default(),
            roots,
            ids,
            index,
            options,
            kids,
            several_orgs,
            values: values.count,
            opaque: Vec::new(),
            kind,
            value: values.value,
            keyed_value: values.keyed,
            interner: FxHashMap::default(),
            shared_keys: None,
            value_of_key: Vec::new(),
            intern_buf: Vec::new(),
            opt_base,
            intern_cache: vec![(u32::MAX, Vec::new()); 2 * total],
            route,
            order,
            scratch: Scratch::default(),
            ctx: ContextScratch::default(),
            det: Determined::default(),
            det_fresh: false,
            use_determined: true,
            use_dead_fields: true,
            cover_checks: COVER_CHECKS,
            first_opened_first: false,
            hole_key: Vec::new(),
            sketching: false,
            hole_keys: FxHashSet::default(),
            label_names: labels.names,
        };
        en.set_fixed(true);
        en.hole_key = (0..en.ids.len() as u32)
            .map(|c| en.intern(HOLE, &[c]))
            .collect();
        en.hole_keys = en.hole_key.iter().copied().collect();
        en.tuple_reads = en.tuple_readers();
        Ok(en)
    }

    /// Turn determined classes off (an ablation, used to test that they
    /// lose no class: `early` then neither resolves determined holes at
    /// once nor compares contexts with determined classes as resolved) or
    /// back on.
    pub fn use_determined(&mut self, on: bool) {
        self.use_determined = on;
    }

    /// Turn the early dead-field check (`Enumerator::dead_field_partial`)
    /// off (an ablation, used to test that it loses no class: such programs
    /// are then rejected when complete) or back on.
    pub fn use_dead_fields(&mut self, on: bool) {
        self.use_dead_fields = on;
    }

    /// Resolve the holes that are not route holes in the order they were
    /// opened instead of the last opened first (an ablation, used to test
    /// that the hole order changes which partial programs are expanded, not
    /// the classes), or back.
    pub fn use_first_opened_first(&mut self, on: bool) {
        self.first_opened_first = on;
    }

    /// The dense index of an e-class.
    pub fn index_of(&self, id: Id) -> Option<u32> {
        self.index.get(&self.eg.find(id)).copied()
    }
}

/// The classes of an e-graph in a candidate space: their ids and dense
/// index, each one's options (the e-nodes the space leaves), the options'
/// operands and kinds (labels as text), and the value classes, which come
/// from every e-node.
struct SpaceClasses {
    ids: Vec<Id>,
    index: FxHashMap<Id, u32>,
    options: Vec<Vec<SymbolLang>>,
    kids: Vec<Vec<Vec<u32>>>,
    kinds: Vec<Vec<Kind<String>>>,
    values: ValueClasses,
    /// Each class's type without parallel state, as text.
    whole: TypeTexts,
}

/// The classes of `eg` and their options in `space` (see [`SpaceClasses`]).
fn space_classes(eg: &EGraph, space: Space) -> SpaceClasses {
    let (ids, index) = numbered_classes(eg);
    let (options, kids) = ordered_options(eg, &ids, &index);
    let keep = view_mask(eg, &ids, &options, &kids, space);
    let types = ClassTypes::new(eg, &ids);
    let whole = types.texts(stateless_type);
    let kinds: Vec<Vec<Kind<String>>> = (0..ids.len())
        .map(|c| {
            (0..options[c].len())
                .map(|j| node_kind(eg, &options[c][j], ids[c], &kids[c][j], &ids, whole.get(c)))
                .collect()
        })
        .collect();
    // Value classes are the values', so they come from every e-node;
    // the options the space leaves are the rest's.
    let values = value_classes(
        eg,
        &ids,
        &options,
        &kids,
        &kinds,
        &types.texts(partial_type),
        &whole,
    );
    let (mut options, mut kids, mut kinds) = (options, kids, kinds);
    if let Some(keep) = &keep {
        for (c, keep) in keep.iter().enumerate() {
            retain_marked(&mut options[c], keep);
            retain_marked(&mut kids[c], keep);
            retain_marked(&mut kinds[c], keep);
        }
    }
    SpaceClasses {
        ids,
        index,
        options,
        kids,
        kinds,
        values,
        whole,
    }
}

/// The classes of `g`'s results, in order. Fails where `space` left one
/// without options.
fn result_classes(
    g: &Graph,
    index: &FxHashMap<Id, u32>,
    options: &[Vec<SymbolLang>],
    space: Space,
) -> Result<Vec<u32>, String> {
    let eg = &g.egraph;
    let mut roots = Vec::new();
    for r in &g.roots {
        if let Some(i) = index.get(&eg.find(*r)) {
            if options[*i as usize].is_empty() {
                return Err(format!(
                    "`replicas={},partitions={}` leaves result {} without a program: every e-node of its e-class reads, directly or through others, a value that this space allows only as a view (`par.replicate` or `par.partition`) and that has no such view with a program, or leads back to it",
                    space.replicas.name(),
                    space.partitions.name(),
                    roots.len(),
                ));
            }
            roots.push(*i);
        }
    }
    Ok(roots)
}

/// Which options compute nothing (see [`is_leaf`]).
fn leaf_options(options: &[Vec<SymbolLang>]) -> Vec<Vec<bool>> {
    options
        .iter()
        .map(|os| os.iter().map(|n| is_leaf(n.op.as_str())).collect())
        .collect()
}

/// The number of fields of each tuple-typed class (0 for tensors).
fn tuple_arity(eg: &EGraph, ids: &[Id]) -> Vec<u32> {
    ids.iter()
        .map(|id| match eg[*id].data.ty() {
            Some(efir_ir::Type::Tuple(ts)) => ts.len() as u32,
            _ => 0,
        })
        .collect()
}

/// How each option reads the fields of its tuple operands.
fn field_uses(eg: &EGraph, options: &[Vec<SymbolLang>]) -> Vec<Vec<FieldUse>> {
    options
        .iter()
        .map(|os| os.iter().map(|n| field_use(eg, n)).collect())
        .collect()
}

/// Where each class's options start in a numbering of all options, and
/// the number of all options.
fn option_bases(options: &[Vec<SymbolLang>]) -> (Vec<usize>, usize) {
    let mut opt_base = Vec::with_capacity(options.len());
    let mut total = 0;
    for os in options {
        opt_base.push(total);
        total += os.len();
    }
    (opt_base, total)
}

/// The classes whose options are all views and pointwise ops (see
/// [`Enumerator::route`]).
fn route_classes(kind: &[Vec<Kind>]) -> Vec<bool> {
    kind.iter()
        .map(|ks| {
            ks.iter()
                .all(|k| matches!(k, Kind::View | Kind::Pointwise(_)))
        })
        .collect()
}

/// The order in which [`Enumerator::expand`] tries each class's options:
/// a route class's pointwise ops before its views, the others' as they
/// come.
fn option_order(kind: &[Vec<Kind>], route: &[bool]) -> Vec<Vec<u16>> {
    kind.iter()
        .enumerate()
        .map(|(c, ks)| {
            let mut o: Vec<u16> = (0..ks.len() as u16).collect();
            if route[c] {
                o.sort_by_key(|j| matches!(ks[*j as usize], Kind::View));
            }
            o
        })
        .collect()
}

/// Options that compute nothing: parameters and constants.
pub(super) fn is_leaf(op: &str) -> bool {
    op.starts_with("arg") || matches!(op, "tensor.full" | "tensor.iota")
}

/// The options' kinds with interned labels, and the labels of the stores
/// kernels make (see the fields of [`Enumerator`] of the same names).
struct Labels {
    kind: Vec<Vec<Kind>>,
    stores: Vec<Vec<Option<u32>>>,
    root_store: Vec<u32>,
    names: Vec<String>,
    forced: u32,
}

/// Labels numbered in the order they are first seen.
#[derive(Default)]
struct LabelNumbers(FxHashMap<String, u32>);

impl LabelNumbers {
    fn id(&mut self, label: &str) -> u32 {
        if let Some(i) = self.0.get(label) {
            return *i;
        }
        let n = self.0.len() as u32;
        self.0.insert(label.to_string(), n);
        n
    }

    /// The text of each label, by number.
    fn names(self) -> Vec<String> {
        let mut names = vec![String::new(); self.0.len()];
        for (l, i) in self.0 {
            names[i as usize] = l;
        }
        names
    }
}

/// Number the labels of the options (`kinds`, with their text): the
/// labels of pointwise ops and other ops name their value class up to
/// loops (`keyed_value`); a `par.reduce` is a loop, organized like the ops
/// that make its operand where they share one label.
fn label_options(
    eg: &EGraph,
    ids: &[Id],
    whole: &TypeTexts,
    options: &[Vec<SymbolLang>],
    kids: &[Vec<Vec<u32>>],
    kinds: &[Vec<Kind<String>>],
    keyed_value: &[u32],
) -> Labels {
    use std::fmt::Write;
    let mut labels = LabelNumbers::default();
    let mut text = String::new();
    let label: Vec<Vec<u32>> = kinds
        .iter()
        .enumerate()
        .map(|(c, ks)| {
            ks.iter()
                .map(|k| match k {
                    Kind::Pointwise(t) | Kind::Op(t) => {
                        text.clear();
                        let _ = write!(text, "k{}|{t}", keyed_value[c]);
                        labels.id(&text)
                    }
                    Kind::Materialize(t) => labels.id(t),
                    Kind::View | Kind::Loop(_) => labels.id(""),
                })
                .collect()
        })
        .collect();
    // The label of a materialization of each distinct type text (made
    // when first needed, so numbered as if made for each class).
    let mut store_of: Vec<Option<u32>> = Vec::new();
    let mut store = |c: usize, labels: &mut LabelNumbers| {
        let t = whole.number(c) as usize;
        if store_of.len() <= t {
            store_of.resize(t + 1, None);
        }
        *store_of[t].get_or_insert_with(|| labels.id(&format!("materialize|{}", whole.get(c))))
    };
    let stores = store_labels(eg, ids, options, kinds, &mut labels, &mut store);
    let root_store: Vec<u32> = (0..options.len()).map(|c| store(c, &mut labels)).collect();
    let forced = labels.id("forced-store");
    Labels {
        kind: labelled_kinds(options, kids, kinds, &label),
        stores,
        root_store,
        names: labels.names(),
        forced,
    }
}

/// For each option that kernels write to memory (a matmul, a reduction or
/// a reducing combine whose result has no parallel state), the label of a
/// materialization of its type (see [`Enumerator::stores`]).
fn store_labels(
    eg: &EGraph,
    ids: &[Id],
    options: &[Vec<SymbolLang>],
    kinds: &[Vec<Kind<String>>],
    labels: &mut LabelNumbers,
    store: &mut impl FnMut(usize, &mut LabelNumbers) -> u32,
) -> Vec<Vec<Option<u32>>> {
    (0..ids.len())
        .map(|c| {
            let ty = || eg[ids[c]].data.ty();
            (0..options[c].len())
                .map(|j| {
                    let op = options[c][j].op.as_str();
                    let structural = matches!(
                        op,
                        "tile.matmul" | "tensor.matmul" | "tensor.reduce" | "par.reduce"
                    ) || (op == "par.combine"
                        && matches!(kinds[c][j], Kind::Op(_)));
                    (structural && stateless(ty())).then(|| store(c, labels))
                })
                .collect()
        })
        .collect()
}

/// The options' kinds with their numbered labels (`label`): a
/// `par.reduce` is a loop, organized like the ops that make its operand
/// where those (other than loops) share one label.
fn labelled_kinds(
    options: &[Vec<SymbolLang>],
    kids: &[Vec<Vec<u32>>],
    kinds: &[Vec<Kind<String>>],
    label: &[Vec<u32>],
) -> Vec<Vec<Kind>> {
    let reduce_loop = |c: usize, j: usize| options[c][j].op.as_str() == "par.reduce";
    kinds
        .iter()
        .enumerate()
        .map(|(c, ks)| {
            ks.iter()
                .enumerate()
                .map(|(j, k)| {
                    let l = label[c][j];
                    if reduce_loop(c, j) {
                        let k = kids[c][j][0] as usize;
                        let mut ls = (0..options[k].len())
                            .filter(|jk| kinds[k][*jk].computes() && !reduce_loop(k, *jk))
                            .map(|jk| label[k][jk]);
                        let org = match ls.next() {
                            Some(l) if ls.all(|m| m == l) => Some(l),
                            _ => None,
                        };
                        return Kind::Loop(org);
                    }
                    match k {
                        Kind::View | Kind::Loop(_) => Kind::View,
                        Kind::Pointwise(_) => Kind::Pointwise(l),
                        Kind::Materialize(_) => Kind::Materialize(l),
                        Kind::Op(_) => Kind::Op(l),
                    }
                })
                .collect()
        })
        .collect()
}

/// Whether ops of two labels can produce each value class (`value` gives
/// each class's; `kind` the options' kinds).
fn several_organizations(kind: &[Vec<Kind>], value: &[u32], values: usize) -> Vec<bool> {
    let mut org: Vec<Option<u32>> = vec![None; values];
    let mut several = vec![false; values];
    for (c, ks) in kind.iter().enumerate() {
        let v = value[c] as usize;
        for k in ks {
            if let Some(l) = k.org() {
                match org[v] {
                    None => org[v] = Some(l),
                    Some(o) if o != l => several[v] = true,
                    Some(_) => {}
                }
            }
        }
    }
    several
}
