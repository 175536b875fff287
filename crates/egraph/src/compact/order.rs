use crate::analysis::EGraph;
use crate::convert::{node_attrs, node_operands};
use crate::extract::GlobalMemoryCost;
use egg::{Id, SymbolLang};
use std::collections::{HashMap, HashSet};

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
        let ops = node_operands(eg, n);
        match op {
            "tile.matmul" if ops.len() == 2 => {
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
            "tensor.reduce" if !ops.is_empty() => {
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
/// re-evaluated only when one of its children's cost falls.
pub(super) fn best_costs(
    eg: &EGraph,
    cf: &mut impl egg::CostFunction<SymbolLang, Cost = f64>,
) -> HashMap<Id, f64> {
    let mut parents: HashMap<Id, Vec<Id>> = HashMap::new();
    for c in eg.classes() {
        for n in &c.nodes {
            for &k in &n.children {
                parents.entry(eg.find(k)).or_default().push(c.id);
            }
        }
    }
    let mut costs: HashMap<Id, f64> = HashMap::new();
    let mut queue: std::collections::VecDeque<Id> = eg.classes().map(|c| c.id).collect();
    let mut queued: HashSet<Id> = queue.iter().copied().collect();
    while let Some(c) = queue.pop_front() {
        queued.remove(&c);
        let mut best: Option<f64> = None;
        for n in &eg[c].nodes {
            if n.children.iter().all(|k| costs.contains_key(&eg.find(*k))) {
                let x = cf.cost(n, |k| costs[&eg.find(k)]);
                if best.is_none_or(|b| x < b) {
                    best = Some(x);
                }
            }
        }
        let Some(b) = best else { continue };
        if costs.get(&c).is_none_or(|old| b < *old) {
            costs.insert(c, b);
            for p in parents.get(&c).map(Vec::as_slice).unwrap_or(&[]) {
                let p = eg.find(*p);
                if queued.insert(p) {
                    queue.push_back(p);
                }
            }
        }
    }
    costs
}
