use super::canon::{Keys, Scratch, HOLE};
use super::context::{ContextScratch, COVER_CHECKS};
use super::dead_fields::{field_use, FieldUse};
use super::determined::Determined;
use super::kinds::{node_kind, partial_type, stateless, stateless_type, Kind};
use super::order::{best_costs, OrderCost};
use super::space::{retain_marked, view_mask, Space};
use crate::analysis::{Data, EGraph};
use crate::convert::{node_attrs, node_operands, Graph};
use crate::extract::GlobalMemoryCost;
use egg::{Id, SymbolLang};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Enumerates candidates of one e-graph.
#[derive(Clone)]
pub struct Enumerator<'a> {
    pub(super) eg: &'a EGraph,
    pub(super) roots: Vec<u32>,
    pub(super) ids: Vec<Id>,
    pub(super) index: HashMap<Id, u32>,
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
    pub(super) kvalue: Vec<u32>,
    /// The value class (up to `par.reduce` loops) each interned key
    /// computes (`u32::MAX` for holes and keys not seen in a program yet).
    pub(super) key_value: Vec<u32>,
    /// Where set, a progress line about once a second on stderr, naming
    /// this function.
    pub progress: Option<String>,
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
    pub(super) icache: Vec<(u32, Vec<u32>)>,
    /// The interner's lookup buffer.
    pub(super) ibuf: Vec<u32>,
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
    pub(super) sketch: bool,
    /// The keys of holes.
    pub(super) hole_of_key: FxHashSet<u32>,
    /// The text of each label (for [`Enumerator::key_text`]).
    pub(super) label_names: Vec<String>,
    /// Options that compute nothing: parameters and constants.
    pub(super) leaf: Vec<Vec<bool>>,
    /// For matmuls, reductions and reducing combines whose result has no
    /// parallel state (the kernels write those to memory), the label of a
    /// materialization of that type.
    pub(super) stores: Vec<Vec<Option<u32>>>,
    /// For each result class, the label of a materialization of its type:
    /// a result is written to memory however it is computed.
    pub(super) root_store: Vec<u32>,
    /// How each option reads the fields of its tuple operands.
    pub(super) fields: Vec<Vec<FieldUse>>,
    /// The number of fields of each tuple-typed class (0 for tensors).
    pub(super) arity: Vec<u32>,
    /// For each class, the tuple-typed classes (and their fields) that
    /// e-nodes of the classes reachable from it read.
    pub(super) treaders: Vec<Vec<(u32, u64)>>,
    /// Buffers of [`Enumerator::dead_field_partial`].
    pub(super) live: FxHashMap<u64, u64>,
    pub(super) valall: FxHashMap<u32, u64>,
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
        let mut ids = Vec::new();
        let mut index = HashMap::new();
        for c in eg.classes() {
            if matches!(c.data, Data::Value(_)) {
                index.insert(c.id, ids.len() as u32);
                ids.push(c.id);
            }
        }
        // Options are tried cheapest first (by the greedy extractor's
        // global-memory cost of choosing the e-node with the cheapest
        // children), so that limited enumerations find good candidates first.
        let order = || OrderCost {
            inner: GlobalMemoryCost {
                eg,
                launch: 65536.0,
            },
        };
        let best = best_costs(eg, &mut order());
        let mut cf = order();
        let mut options = Vec::new();
        let mut kids = Vec::new();
        for id in &ids {
            let nodes: Vec<SymbolLang> = eg[*id].nodes.clone();
            // Tensor-level matmuls are replaced by their tiled implementations.
            let tiled: Vec<SymbolLang> = nodes
                .iter()
                .filter(|n| n.op.as_str() != "tensor.matmul")
                .cloned()
                .collect();
            let mut opts = if tiled.is_empty() { nodes } else { tiled };
            opts.sort();
            let mut costed: Vec<(f64, SymbolLang)> = opts
                .into_iter()
                .map(|n| {
                    (
                        egg::CostFunction::cost(&mut cf, &n, |c| {
                            best.get(&eg.find(c)).copied().unwrap_or(f64::INFINITY)
                        }),
                        n,
                    )
                })
                .collect();
            costed.sort_by(|a, b| a.0.total_cmp(&b.0));
            let opts: Vec<SymbolLang> = costed.into_iter().map(|(_, n)| n).collect();
            let ks: Vec<Vec<u32>> = opts
                .iter()
                .map(|n| {
                    node_operands(eg, n)
                        .iter()
                        .filter_map(|c| index.get(&eg.find(*c)).copied())
                        .collect()
                })
                .collect();
            options.push(opts);
            kids.push(ks);
        }
        let keep = view_mask(eg, &ids, &options, &kids, space);
        let cats: Vec<Vec<(u8, String)>> = (0..ids.len())
            .map(|c| {
                (0..options[c].len())
                    .map(|j| node_kind(eg, &options[c][j], ids[c], &kids[c][j], &ids))
                    .collect()
            })
            .collect();
        // Value classes: e-classes that hold the same value under different
        // parallel states (linked by partitions, replicates and combines
        // that assemble tiles) share one (union-find). A partial result is
        // not its combined value.
        let parent: Vec<u32> = (0..ids.len() as u32).collect();
        fn find(p: &mut [u32], mut x: u32) -> u32 {
            while p[x as usize] != x {
                p[x as usize] = p[p[x as usize] as usize];
                x = p[x as usize];
            }
            x
        }
        let reduce_loop = |c: usize, j: usize| options[c][j].op.as_str() == "par.reduce";
        let link = |parent: &mut Vec<u32>, loops: bool| {
            for (c, cs) in cats.iter().enumerate() {
                for (j, (cat, ..)) in cs.iter().enumerate() {
                    if *cat == 0 || *cat == 2 || (loops && reduce_loop(c, j)) {
                        if let Some(k) = kids[c][j].first() {
                            let (a, b) = (find(parent, c as u32), find(parent, *k));
                            parent[a.max(b) as usize] = a.min(b);
                        }
                    }
                }
            }
        };
        // Each option's op, attributes and type (with the partial axes of
        // its result where `partial`), for ops that compute (not views,
        // materializations or loops).
        let cong_of = |partial: bool| -> Vec<Vec<Option<String>>> {
            (0..ids.len())
                .map(|c| {
                    (0..options[c].len())
                        .map(|j| {
                            let n = &options[c][j];
                            let computes = matches!(cats[c][j].0, 1 | 3) && !reduce_loop(c, j);
                            computes.then(|| {
                                let attrs: Vec<String> = node_attrs(eg, n)
                                    .iter()
                                    .map(|(a, v)| format!("{a}={v}"))
                                    .collect();
                                let ty = eg[ids[c]].data.ty();
                                let ty = if partial {
                                    partial_type(ty)
                                } else {
                                    stateless_type(ty)
                                };
                                format!("{}|{}|{ty}", n.op, attrs.join(","))
                            })
                        })
                        .collect()
                })
                .collect()
        };
        // Congruence: the same op over the same values computes the same
        // value, whichever e-classes hold it (say two collections of one
        // partial result under different parallel states).
        let congruence = |parent: &mut Vec<u32>, cong: &[Vec<Option<String>>]| loop {
            let mut changed = false;
            let mut by_op: HashMap<(&str, Vec<u32>), u32> = HashMap::new();
            for (c, cs) in cong.iter().enumerate() {
                for (j, op) in cs.iter().enumerate() {
                    let Some(op) = op else { continue };
                    let ks: Vec<u32> = kids[c][j].iter().map(|k| find(parent, *k)).collect();
                    match by_op.entry((op.as_str(), ks)) {
                        std::collections::hash_map::Entry::Vacant(e) => {
                            e.insert(c as u32);
                        }
                        std::collections::hash_map::Entry::Occupied(e) => {
                            let (a, b) = (find(parent, c as u32), find(parent, *e.get()));
                            if a != b {
                                parent[a.max(b) as usize] = a.min(b);
                                changed = true;
                            }
                        }
                    }
                }
            }
            if !changed {
                break;
            }
        };
        let mut parent = parent;
        link(&mut parent, false);
        congruence(&mut parent, &cong_of(true));
        let value: Vec<u32> = (0..ids.len() as u32)
            .map(|c| find(&mut parent, c))
            .collect();
        // Value classes numbered densely (states keep one word per value).
        let mut dense: HashMap<u32, u32> = HashMap::new();
        let value: Vec<u32> = value
            .iter()
            .map(|v| {
                let n = dense.len() as u32;
                *dense.entry(*v).or_insert(n)
            })
            .collect();
        let values = dense.len();
        // For keys, a `par.reduce` is a loop over an axis's tiles: with a
        // full-extent tile it is one iteration, so the partial result it
        // reduces is keyed as the whole value (like a full-extent tile of a
        // partitioned axis). A `par.collect` keeps partial results in memory
        // and stays keyed.
        let mut kparent = parent;
        link(&mut kparent, true);
        congruence(&mut kparent, &cong_of(false));
        let kvalue: Vec<u32> = (0..ids.len() as u32)
            .map(|c| find(&mut kparent, c))
            .collect();
        // Value classes are the values', so they come from every e-node;
        // the options the space leaves are the rest's.
        let (mut options, mut kids, mut cats) = (options, kids, cats);
        if let Some(keep) = &keep {
            for (c, keep) in keep.iter().enumerate() {
                retain_marked(&mut options[c], keep);
                retain_marked(&mut kids[c], keep);
                retain_marked(&mut cats[c], keep);
            }
        }
        let reduce_loop = |c: usize, j: usize| options[c][j].op.as_str() == "par.reduce";
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
        // Labels of pointwise ops and other ops name their value class.
        let mut labels: HashMap<String, u32> = HashMap::new();
        let mut label_id = |label: String| {
            let n = labels.len() as u32;
            *labels.entry(label).or_insert(n)
        };
        let klabel: Vec<Vec<u32>> = (0..ids.len())
            .map(|c| {
                (0..options[c].len())
                    .map(|j| {
                        let (cat, kl) = &cats[c][j];
                        label_id(match cat {
                            1 | 3 => format!("k{}|{kl}", kvalue[c]),
                            _ => kl.clone(),
                        })
                    })
                    .collect()
            })
            .collect();
        let stores: Vec<Vec<Option<u32>>> = (0..ids.len())
            .map(|c| {
                let ty = eg[ids[c]].data.ty();
                (0..options[c].len())
                    .map(|j| {
                        let op = options[c][j].op.as_str();
                        let structural = matches!(
                            op,
                            "tile.matmul" | "tensor.matmul" | "tensor.reduce" | "par.reduce"
                        ) || (op == "par.combine" && cats[c][j].0 == 3);
                        (structural && stateless(ty))
                            .then(|| label_id(format!("materialize|{}", stateless_type(ty))))
                    })
                    .collect()
            })
            .collect();
        let root_store: Vec<u32> = ids
            .iter()
            .map(|id| label_id(format!("materialize|{}", stateless_type(eg[*id].data.ty()))))
            .collect();
        let mut label_names = vec![String::new(); labels.len()];
        for (l, i) in labels {
            label_names[i as usize] = l;
        }
        let kind: Vec<Vec<Kind>> = cats
            .iter()
            .enumerate()
            .map(|(c, cs)| {
                cs.iter()
                    .enumerate()
                    .map(|(j, (cat, _))| {
                        let l = klabel[c][j];
                        if reduce_loop(c, j) {
                            let k = kids[c][j][0] as usize;
                            let mut ls = (0..options[k].len())
                                .filter(|jk| {
                                    matches!(cats[k][*jk].0, 1 | 3) && !reduce_loop(k, *jk)
                                })
                                .map(|jk| klabel[k][jk]);
                            let org = match ls.next() {
                                Some(l) if ls.all(|m| m == l) => Some(l),
                                _ => None,
                            };
                            return Kind::Loop(org);
                        }
                        match cat {
                            0 => Kind::View,
                            1 => Kind::Pointwise(l),
                            2 => Kind::Materialize(l),
                            _ => Kind::Op(l),
                        }
                    })
                    .collect()
            })
            .collect();
        let leaf = options
            .iter()
            .map(|os| {
                os.iter()
                    .map(|n| {
                        let op = n.op.as_str();
                        op.starts_with("arg") || matches!(op, "tensor.full" | "tensor.iota")
                    })
                    .collect()
            })
            .collect();
        let arity = ids
            .iter()
            .map(|id| match eg[*id].data.ty() {
                Some(efir_ir::Type::Tuple(ts)) => ts.len() as u32,
                _ => 0,
            })
            .collect();
        let fields = options
            .iter()
            .map(|os| os.iter().map(|n| field_use(eg, n)).collect())
            .collect();
        let mut opt_base = Vec::with_capacity(options.len());
        let mut total = 0;
        for os in &options {
            opt_base.push(total);
            total += os.len();
        }
        let icache = vec![(u32::MAX, Vec::new()); 2 * total];
        let route: Vec<bool> = kind
            .iter()
            .map(|ks: &Vec<Kind>| {
                ks.iter()
                    .all(|k| matches!(k, Kind::View | Kind::Pointwise(_)))
            })
            .collect();
        let order = kind
            .iter()
            .enumerate()
            .map(|(c, ks)| {
                let mut o: Vec<u16> = (0..ks.len() as u16).collect();
                if route[c] {
                    o.sort_by_key(|j| matches!(ks[*j as usize], Kind::View));
                }
                o
            })
            .collect();
        let mut en = Enumerator {
            eg,
            progress: None,
            stores,
            root_store,
            fixed: Vec::new(),
            leaf,
            fields,
            arity,
            treaders: Vec::new(),
            live: FxHashMap::default(),
            valall: FxHashMap::default(),
            roots,
            ids,
            index,
            options,
            kids,
            several_orgs: Vec::new(),
            values,
            opaque: Vec::new(),

            kind,
            value,
            kvalue,
            interner: FxHashMap::default(),
            shared_keys: None,
            key_value: Vec::new(),
            ibuf: Vec::new(),
            opt_base,
            icache,
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
            sketch: false,
            hole_of_key: FxHashSet::default(),
            label_names,
        };
        let mut org: Vec<Option<u32>> = vec![None; en.ids.len()];
        en.several_orgs = vec![false; en.values];
        for c in 0..en.ids.len() {
            let v = en.value[c] as usize;
            for k in &en.kind[c] {
                if let Some(l) = k.org() {
                    match org[v] {
                        None => org[v] = Some(l),
                        Some(o) if o != l => en.several_orgs[v] = true,
                        Some(_) => {}
                    }
                }
            }
        }
        en.set_fixed(true);
        en.hole_key = (0..en.ids.len() as u32)
            .map(|c| en.intern(HOLE, &[c]))
            .collect();
        en.hole_of_key = en.hole_key.iter().copied().collect();
        en.treaders = en.tuple_readers();
        Ok(en)
    }

    /// Turn determined classes off (an ablation, used to test that they
    /// lose no class: `early` then neither resolves determined holes at
    /// once nor compares contexts with determined classes as resolved) or
    /// back on.
    pub fn use_determined(&mut self, on: bool) {
        self.use_determined = on;
    }

    /// Turn the early dead-field check ([`Enumerator::dead_field_partial`])
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
