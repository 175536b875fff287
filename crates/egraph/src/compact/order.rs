//! The order of options: the classes that hold values, each one's options
//! cheapest first (by the greedy extractor's cost with a penalty for long
//! unsplit reductions).

use crate::analysis::Data;
use crate::analysis::EGraph;
use crate::convert::{node_attrs, node_operands};
use crate::extract::GlobalMemoryCost;
use egg::{Id, SymbolLang};
use rustc_hash::FxHashMap;

/// The order in which the enumeration tries a class's e-nodes: the greedy
/// extractor's global-memory cost, plus a penalty for reducing a long dim
/// inside one program (a matmul's K or a reduction's dim, unsplit and longer
/// than 512): such a block does not fit in registers, while splitting the dim
/// (a loop or a collect) does. Only the order changes, not the candidates.
pub(super) struct OrderCost<'a> {
    pub(super) inner: GlobalMemoryCost<'a>,
}

impl OrderCost<'_> {
    pub(super) fn penalty(&self, n: &SymbolLang) -> f64 {
        let eg = self.inner.eg;
        let op = n.op.as_str();
        let long = |c: Id, d: usize| -> f64 {
            let Some(t) = eg[c].data.ty() else { return 0.0 };
            let Some(l) = t.leaves().first().copied() else {
                return 0.0;
            };
            let split = l
                .state
                .values()
                .any(|s| matches!(s, efir_ir::AxisState::Part(i) if *i == d));
            match l.shape.get(d) {
                Some(efir_ir::Dim::Static(e)) if !split && *e > 512 => crate::extract::bytes(t),
                _ => 0.0,
            }
        };
        match op {
            "tile.matmul" if node_operands(eg, n).len() == 2 => {
                let ops = node_operands(eg, n);
                let r = eg[ops[0]]
                    .data
                    .ty()
                    .and_then(|t| t.leaves().first().map(|l| l.shape.len()))
                    .unwrap_or(0);
                if r == 0 {
                    0.0
                } else {
                    long(ops[0], r - 1)
                }
            }
            "tensor.reduce" if !node_operands(eg, n).is_empty() => {
                let ops = node_operands(eg, n);
                let d = node_attrs(eg, n)
                    .iter()
                    .find(|(k, _)| k == "dim")
                    .and_then(|(_, a)| a.as_int())
                    .unwrap_or(0) as usize;
                long(ops[0], d)
            }
            _ => 0.0,
        }
    }
}

impl egg::CostFunction<SymbolLang> for OrderCost<'_> {
    type Cost = f64;
    fn cost<C>(&mut self, enode: &SymbolLang, mut costs: C) -> f64
    where
        C: FnMut(Id) -> f64,
    {
        let p = self.penalty(enode);
        self.inner.cost(enode, &mut costs) + p
    }
}

/// The least cost of every e-class under `cf` (the values of
/// `egg::Extractor`'s, which re-scans every class until nothing changes, a
/// pass per level of a chain: quadratic on long chains). A class is
/// re-evaluated only when one of its children's cost falls. Indexed by
/// canonical id (`None`: no cost, or not a class).
pub(super) fn best_costs(
    eg: &EGraph,
    cf: &mut impl egg::CostFunction<SymbolLang, Cost = f64>,
) -> Vec<Option<f64>> {
    let slots = eg
        .classes()
        .map(|c| usize::from(c.id) + 1)
        .max()
        .unwrap_or(0);
    // Each class's e-nodes by id, the classes in the e-graph's order, and
    // each e-node's operand classes (with its class), in that order.
    let mut nodes: Vec<&[SymbolLang]> = vec![&[]; slots];
    let mut order: std::collections::VecDeque<Id> = std::collections::VecDeque::new();
    let mut edges: Vec<(u32, Id)> = Vec::new();
    let mut start = vec![0usize; slots + 1];
    for c in eg.classes() {
        nodes[usize::from(c.id)] = &c.nodes;
        order.push_back(c.id);
        for n in &c.nodes {
            for &k in &n.children {
                let k = usize::from(eg.find(k));
                start[k + 1] += 1;
                edges.push((k as u32, c.id));
            }
        }
    }
    // The readers of each class (with repeats, in the order of the
    // classes and their e-nodes), as ranges of one array.
    for i in 0..slots {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut parents = vec![Id::from(0usize); edges.len()];
    for (k, c) in edges {
        let f = &mut fill[k as usize];
        parents[*f] = c;
        *f += 1;
    }
    let mut costs: Vec<Option<f64>> = vec![None; slots];
    let mut queue = order;
    let mut queued = vec![false; slots];
    for c in &queue {
        queued[usize::from(*c)] = true;
    }
    while let Some(c) = queue.pop_front() {
        let ci = usize::from(c);
        queued[ci] = false;
        let mut best: Option<f64> = None;
        for n in nodes[ci] {
            if n.children
                .iter()
                .all(|k| costs[usize::from(eg.find(*k))].is_some())
            {
                let x = cf.cost(n, |k| {
                    costs[usize::from(eg.find(k))].expect("operands are costed")
                });
                if best.is_none_or(|b| x < b) {
                    best = Some(x);
                }
            }
        }
        let Some(b) = best else { continue };
        if costs[ci].is_none_or(|old| b < old) {
            costs[ci] = Some(b);
            for p in &parents[start[ci]..start[ci + 1]] {
                let p = eg.find(*p);
                let pi = usize::from(p);
                if !queued[pi] {
                    queued[pi] = true;
                    queue.push_back(p);
                }
            }
        }
    }
    costs
}

/// The e-classes that hold values, numbered densely, and each one's
/// number.
pub(super) fn numbered_classes(eg: &EGraph) -> (Vec<Id>, FxHashMap<Id, u32>) {
    let mut ids = Vec::new();
    let mut index = FxHashMap::default();
    for c in eg.classes() {
        if matches!(c.data, Data::Value(_)) {
            index.insert(c.id, ids.len() as u32);
            ids.push(c.id);
        }
    }
    (ids, index)
}

/// Each class's options, cheapest first, and each option's operands (as
/// dense indices). Tensor-level matmuls are replaced by their tiled
/// implementations where a class has them. Options are tried cheapest first
/// (by the greedy extractor's global-memory cost of choosing the e-node with
/// the cheapest children, see [`OrderCost`]), so that limited enumerations
/// find good candidates first.
#[allow(clippy::type_complexity)]
pub(super) fn ordered_options(
    eg: &EGraph,
    ids: &[Id],
    index: &FxHashMap<Id, u32>,
) -> (Vec<Vec<SymbolLang>>, Vec<Vec<Vec<u32>>>) {
    let order = || OrderCost {
        inner: GlobalMemoryCost {
            eg,
            launch: 65536.0,
        },
    };
    let best = best_costs(eg, &mut order());
    let mut cf = order();
    let mut options = Vec::with_capacity(ids.len());
    let mut kids = Vec::with_capacity(ids.len());
    let matmul = egg::Symbol::from("tensor.matmul");
    for id in ids {
        let nodes = &eg[*id].nodes;
        let tiled = |n: &&SymbolLang| n.op != matmul;
        let mut opts: Vec<SymbolLang> = if nodes.iter().any(|n| tiled(&n)) {
            nodes.iter().filter(tiled).cloned().collect()
        } else {
            nodes.clone()
        };
        if opts.len() > 1 {
            opts.sort();
            let mut costed: Vec<(f64, SymbolLang)> = opts
                .into_iter()
                .map(|n| {
                    let cost = egg::CostFunction::cost(&mut cf, &n, |c| {
                        best.get(usize::from(eg.find(c)))
                            .copied()
                            .flatten()
                            .unwrap_or(f64::INFINITY)
                    });
                    (cost, n)
                })
                .collect();
            costed.sort_by(|a, b| a.0.total_cmp(&b.0));
            opts = costed.into_iter().map(|(_, n)| n).collect();
        }
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
    (options, kids)
}
