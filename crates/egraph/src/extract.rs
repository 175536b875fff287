//! `--extract=greedy`: one program per e-graph function, choosing in every
//! e-class the e-node of least estimated cost: bytes moved through global
//! memory plus a fixed cost per kernel launch. Values under parallel axes
//! stay inside a kernel; values without parallel state are materialized.
//!
//! The least costs are found by Knuth's generalization of Dijkstra's
//! algorithm ([`greedy`]): every e-class is costed once, when the cheapest
//! e-node whose operands are all costed is the cheapest left anywhere, so
//! extraction takes O(e-nodes log e-classes), where `egg::Extractor`'s
//! fixpoint re-scans every class once per level of a chain (quadratic:
//! 50-265 s on a chain of 20,000 ops).

use crate::analysis::{Data, EGraph};
use crate::convert::to_func;
use crate::saturate::{graph_in, reducer_functions};
use efir_diagnostics::{codes, Diag};
use efir_ir::pass::{Pass, PassContext, PassFailed, PassInfo, PassOptions};
use efir_ir::{Attr, AxisState, Dim, Func, Module, Type};
use egg::{CostFunction, Id, Language, SymbolLang};
use serde_json::json;
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, VecDeque};
use std::time::Instant;

/// Registration of `--extract`.
pub const INFO: PassInfo = PassInfo {
    name: "extract",
    summary:
        "Extract one program per e-graph (greedy, by estimated global-memory bytes and launches)",
    options: &[
        ("mode", "greedy (default): least estimated cost; target: the program of `file`, which must be in the e-graph"),
        ("file", "with mode=target: a .efir file holding a function of the same name"),
        ("launch-bytes", "cost of a kernel launch in bytes (default 65536)"),
        ("time-limit", "seconds for the whole module (default 10); past it, the e-classes not yet costed take their cheapest e-node whose operands are chosen, with warning E0706"),
    ],
    create: |o| Ok(Box::new(Extract::from_options(o)?)),
};

/// The pass.
pub struct Extract {
    launch: f64,
    target: Option<String>,
    time_limit: f64,
}

impl Extract {
    /// From pass options.
    pub fn from_options(o: &PassOptions) -> Result<Extract, String> {
        INFO.check_options(o)?;
        let target = match o.values.get("mode").map(String::as_str) {
            None | Some("greedy") => None,
            Some("target") => Some(
                o.values
                    .get("file")
                    .cloned()
                    .ok_or("`--extract=target` needs `file=PATH`")?,
            ),
            Some(m) => {
                return Err(format!(
                    "unknown extraction mode `{m}` (modes: greedy, target)"
                ))
            }
        };
        Ok(Extract {
            launch: o.get_usize("launch-bytes", 65536)? as f64,
            target,
            time_limit: o.get_seconds("time-limit", 10.0, true)?,
        })
    }
}

/// Bytes of a value (symbolic dims count as 64).
pub fn bytes(t: &Type) -> f64 {
    t.leaves()
        .iter()
        .map(|t| {
            let n: f64 = t
                .shape
                .iter()
                .map(|d| match d {
                    Dim::Static(n) => *n as f64,
                    Dim::Axis(_) => 64.0,
                })
                .product();
            let w = match t.dtype {
                efir_ir::DType::F16 | efir_ir::DType::BF16 => 2.0,
                efir_ir::DType::F32 | efir_ir::DType::I32 => 4.0,
                efir_ir::DType::F64 | efir_ir::DType::I64 => 8.0,
                efir_ir::DType::I1 => 1.0,
            };
            n * w
        })
        .sum()
}

/// The cost model.
pub struct GlobalMemoryCost<'a> {
    /// The e-graph (for types).
    pub eg: &'a EGraph,
    /// Cost of one launch, in bytes.
    pub launch: f64,
}

impl GlobalMemoryCost<'_> {
    fn node_cost(&self, n: &SymbolLang) -> f64 {
        let op = n.op.as_str();
        if op.starts_with("#a") || op.starts_with("arg") {
            return 0.0;
        }
        let Some(Data::Value(t)) = self.eg.lookup(n.clone()).map(|id| &self.eg[id].data) else {
            return f64::INFINITY;
        };
        let free = t.leaves().iter().all(|l| l.state.is_empty());
        match op {
            // Tensor-level matmuls are skipped in favour of their tiled
            // implementations (the paper's section 5), unless none exists.
            "tensor.matmul" => 1e15,
            // Every parallel reduction is a pass over its axis's tiles (a loop
            // inside a kernel, or a kernel of its own): fused reductions save
            // passes.
            "par.reduce" if !free => self.launch / 8.0,
            "par.reduce" => bytes(t) + self.launch / 8.0,
            "tensor.full" | "tensor.iota" => 1.0,
            "par.partition" | "par.replicate" => 1.0,
            "par.collect" => 2.0 * bytes(t) + self.launch,
            _ if !free => 1.0,
            "par.combine" => bytes(t),
            "tensor.tuple" | "tensor.get" => 1.0,
            _ => bytes(t) + self.launch,
        }
    }
}

impl CostFunction<SymbolLang> for GlobalMemoryCost<'_> {
    type Cost = f64;
    fn cost<C>(&mut self, enode: &SymbolLang, mut costs: C) -> f64
    where
        C: FnMut(Id) -> f64,
    {
        let kids: f64 = enode.children().iter().map(|c| costs(*c)).sum();
        kids + self.node_cost(enode)
    }
}

/// The least cost of every e-class and the e-node that achieves it.
pub struct Greedy {
    /// Dense number of each canonical class.
    index: HashMap<Id, usize>,
    /// Per class: its cost and the index of its chosen e-node, once costed.
    chosen: Vec<Option<(f64, usize)>>,
    /// Whether the deadline passed before every class was costed by least
    /// cost (the rest then took their first e-node whose operands were
    /// chosen).
    pub stopped: bool,
    /// Classes costed by least cost (all of them unless `stopped`).
    pub costed: usize,
}

impl Greedy {
    /// The cost of the term chosen for `c`, if it has one.
    pub fn cost(&self, eg: &EGraph, c: Id) -> Option<f64> {
        let i = *self.index.get(&eg.find(c))?;
        self.chosen[i].map(|(x, _)| x)
    }

    /// The e-node chosen for `c`, if it has one.
    pub fn node<'g>(&self, eg: &'g EGraph, c: Id) -> Option<&'g SymbolLang> {
        let c = eg.find(c);
        let i = *self.index.get(&c)?;
        self.chosen[i].map(|(_, j)| &eg[c].nodes[j])
    }
}

/// Costs `f64` ordered totally (the heap's keys).
#[derive(Clone, Copy, PartialEq)]
struct Key(f64);

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Key {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}

/// The least cost of every e-class under `cf` (a cost that is the sum of
/// the operands' costs plus the e-node's own, never below an operand's),
/// by Knuth's generalization of Dijkstra's algorithm: an e-node is costed
/// once all its operands' classes are, and the class whose best costed
/// e-node is the cheapest left is settled next. Each class takes its first
/// e-node (in the class's order) of least cost among those whose operands
/// were settled before it, so the choices never form a cycle, even between
/// e-nodes of equal cost. Classes without a finite term keep no choice.
///
/// Past `deadline` (checked every 1,024 classes), the classes left are
/// settled in the order their first e-node becomes available, each taking
/// the cheapest of its e-nodes available then: a valid choice, in linear
/// time, that may not be the least cost; `stopped` is then set.
pub fn greedy(
    eg: &EGraph,
    cf: &mut impl CostFunction<SymbolLang, Cost = f64>,
    deadline: Option<Instant>,
) -> Greedy {
    let mut ids: Vec<Id> = eg.classes().map(|c| c.id).collect();
    ids.sort();
    let index: HashMap<Id, usize> = ids.iter().enumerate().map(|(i, c)| (*c, i)).collect();
    let dense = |c: Id| index[&eg.find(c)];
    // Per class and e-node: operands not yet settled, then the e-node's
    // cost once they are (NaN: not available).
    let mut pending: Vec<Vec<usize>> = Vec::with_capacity(ids.len());
    let mut node_cost: Vec<Vec<f64>> = Vec::with_capacity(ids.len());
    let mut users: Vec<Vec<(u32, u32)>> = vec![Vec::new(); ids.len()];
    for (i, c) in ids.iter().enumerate() {
        let nodes = &eg[*c].nodes;
        pending.push(nodes.iter().map(|n| n.children().len()).collect());
        node_cost.push(vec![f64::NAN; nodes.len()]);
        for (j, n) in nodes.iter().enumerate() {
            for k in n.children() {
                users[dense(*k)].push((i as u32, j as u32));
            }
        }
    }
    let mut settled: Vec<Option<f64>> = vec![None; ids.len()];
    let mut best: Vec<Option<f64>> = vec![None; ids.len()];
    let mut heap: BinaryHeap<Reverse<(Key, usize)>> = BinaryHeap::new();
    let mut fifo: VecDeque<usize> = VecDeque::new();
    let mut stopped = false;
    let mut costed = 0usize;
    let mut chosen: Vec<Option<(f64, usize)>> = vec![None; ids.len()];
    // The cost of e-node `j` of class `i`, whose operands are settled (a
    // NaN cost counts as infinite, so that it compares).
    let mut cost_of = |i: usize, j: usize, settled: &[Option<f64>]| -> f64 {
        let x = cf.cost(&eg[ids[i]].nodes[j], |k| {
            settled[dense(k)].unwrap_or(f64::INFINITY)
        });
        if x.is_nan() {
            f64::INFINITY
        } else {
            x
        }
    };
    let offer = |i: usize,
                 x: f64,
                 best: &mut [Option<f64>],
                 heap: &mut BinaryHeap<Reverse<(Key, usize)>>,
                 fifo: &mut VecDeque<usize>,
                 stopped: bool| {
        if best[i].is_none_or(|b| x < b) {
            let first = best[i].is_none();
            best[i] = Some(x);
            if !stopped {
                heap.push(Reverse((Key(x), i)));
            } else if first {
                fifo.push_back(i);
            }
        }
    };
    for i in 0..ids.len() {
        for j in 0..pending[i].len() {
            if pending[i][j] == 0 {
                let x = cost_of(i, j, &settled);
                node_cost[i][j] = x;
                offer(i, x, &mut best, &mut heap, &mut fifo, false);
            }
        }
    }
    let mut popped = 0usize;
    loop {
        if !stopped && popped.is_multiple_of(1024) && deadline.is_some_and(|d| Instant::now() >= d)
        {
            stopped = true;
            // The classes offered so far, cheapest first, then the rest as
            // they become available.
            let mut left: Vec<(Key, usize)> = heap.drain().map(|Reverse(e)| e).collect();
            left.sort();
            let mut seen = std::collections::HashSet::new();
            fifo.extend(
                left.into_iter()
                    .filter(|(_, i)| seen.insert(*i))
                    .map(|(_, i)| i),
            );
        }
        let i = if stopped {
            match fifo.pop_front() {
                Some(i) => i,
                None => break,
            }
        } else {
            match heap.pop() {
                Some(Reverse((_, i))) => i,
                None => break,
            }
        };
        popped += 1;
        if settled[i].is_some() {
            continue;
        }
        let Some(x) = best[i] else { continue };
        settled[i] = Some(x);
        costed += usize::from(!stopped);
        // The first e-node of least cost among the available ones (all of
        // whose operands were settled before this class).
        let j = node_cost[i]
            .iter()
            .position(|c| *c == x)
            .unwrap_or_default();
        chosen[i] = Some((x, j));
        for &(p, n) in &users[i] {
            let (p, n) = (p as usize, n as usize);
            pending[p][n] -= 1;
            if pending[p][n] == 0 && settled[p].is_none() {
                let y = cost_of(p, n, &settled);
                node_cost[p][n] = y;
                offer(p, y, &mut best, &mut heap, &mut fifo, stopped);
            }
        }
    }
    Greedy {
        index,
        chosen,
        stopped,
        costed,
    }
}

/// The repair-library functions (`@efir.*`) that a function names: in its
/// ops' attributes and in its values' types (the reducers of partial
/// states), at any depth.
fn library_names_in(f: &Func, out: &mut BTreeSet<String>) {
    fn attr(a: &Attr, out: &mut BTreeSet<String>) {
        match a {
            Attr::Symbol(s) if s.starts_with("efir.") => {
                out.insert(s.clone());
            }
            Attr::Term(_, args) => args.iter().for_each(|(_, a)| attr(a, out)),
            Attr::Array(v) => v.iter().for_each(|a| attr(a, out)),
            Attr::Type(t) => ty(t, out),
            _ => {}
        }
    }
    fn ty(t: &Type, out: &mut BTreeSet<String>) {
        for l in t.leaves() {
            for s in l.state.values() {
                if let AxisState::Partial(r) = s {
                    attr(r, out);
                }
            }
        }
    }
    for v in &f.values {
        ty(&v.ty, out);
    }
    for op in &f.ops {
        op.attrs.values().for_each(|a| attr(a, out));
    }
    f.attrs.values().for_each(|a| attr(a, out));
}

impl Pass for Extract {
    fn name(&self) -> &'static str {
        "extract"
    }

    fn run(&mut self, m: &mut Module, cx: &mut PassContext<'_>) -> Result<(), PassFailed> {
        let lambdas = reducer_functions(m);
        let mut total = 0.0;
        let mut complete = true;
        let mut used_lib = BTreeSet::new();
        let mut funcs = Vec::new();
        let sigs = crate::convert::graph_signatures(m);
        // One deadline for the whole module (issue 30).
        let deadline = crate::deadline::deadline_in(self.time_limit);
        for f in m.funcs.iter().filter(|f| !lambdas.contains(&f.name)) {
            let fail = |cx: &mut PassContext<'_>, e: String| crate::saturate::func_failed(cx, f, e);
            let mut g = graph_in(f, sigs.clone()).map_err(|e| fail(cx, e))?;
            let span = f.name_span;
            let out = if let Some(path) = &self.target {
                let text = std::fs::File::open(path)
                    .map_err(|e| format!("cannot read `{path}`: {e}"))
                    .and_then(|r| efir_ir::input::read_limited(r, &format!("`{path}`")))
                    .map_err(|e| fail(cx, e))?;
                let (tm, d) = efir_ir::parse_and_verify(&text, cx.registry);
                if let Some(d) = d.first() {
                    return Err(fail(
                        cx,
                        format!("`{path}` is not a valid program: {}", d.message),
                    ));
                }
                let Some(tf) = tm.func(&f.name) else {
                    return Err(fail(cx, format!("`{path}` has no function `@{}`", f.name)));
                };
                let (roots, nodes) = match crate::convert::lookup_func_nodes(&mut g, tf) {
                    Ok(r) => r,
                    Err(e) => {
                        cx.diags.push(
                            Diag::error(
                                codes::E0707,
                                format!(
                                    "the target `@{}` of `{path}` is not in the e-graph: {e}",
                                    f.name
                                ),
                                f.name_span,
                            )
                            .with_label("saturate further, or check the target"),
                        );
                        return Err(PassFailed);
                    }
                };
                let want: Vec<Id> = g.roots.iter().map(|r| g.egraph.find(*r)).collect();
                if roots != want {
                    cx.diags.push(Diag::error(
                        codes::E0707,
                        format!("the target `@{}` of `{path}` computes other e-classes than the function's roots", f.name),
                        f.name_span,
                    ));
                    return Err(PassFailed);
                }
                let eg = &g.egraph;
                to_func(&g, &f.name, span, &|c| {
                    nodes
                        .get(&eg.find(c))
                        .cloned()
                        .unwrap_or_else(|| eg[c].nodes[0].clone())
                })
                .map_err(|e| fail(cx, e))?
            } else {
                let mut cf = GlobalMemoryCost {
                    eg: &g.egraph,
                    launch: self.launch,
                };
                let eg = &g.egraph;
                let choice = greedy(eg, &mut cf, Some(deadline));
                for r in &g.roots {
                    total += choice.cost(eg, *r).ok_or_else(|| {
                        fail(
                            cx,
                            "a result of the e-graph has no finite program (every e-node of its class depends on itself)".into(),
                        )
                    })?;
                }
                if choice.stopped {
                    complete = false;
                    cx.diags.push(
                        Diag::warning(
                            codes::E0706,
                            format!(
                                "`@{}`: extraction stopped by time-limit={} after costing {} of {} e-classes; the rest take their cheapest e-node whose operands are chosen",
                                f.name,
                                self.time_limit,
                                choice.costed,
                                eg.number_of_classes()
                            ),
                            f.name_span,
                        )
                        .with_label("the program of this function may not be the cheapest"),
                    );
                }
                // Every class reachable from the roots has a choice: a
                // chosen e-node's operands were settled before it.
                to_func(&g, &f.name, span, &|c| {
                    choice
                        .node(eg, c)
                        .unwrap_or_else(|| &eg[c].nodes[0])
                        .clone()
                })
                .map_err(|e| fail(cx, e))?
            };
            library_names_in(&out, &mut used_lib);
            funcs.push(out);
        }
        let kept: Vec<Func> = std::mem::take(&mut m.funcs)
            .into_iter()
            .filter(|f| lambdas.contains(&f.name))
            .collect();
        let library = crate::repairs::used_funcs(&used_lib.difference(&lambdas).cloned().collect());
        *m = crate::saturate::module_of(kept, funcs, library, "in the extracted program", cx)?;
        cx.stats.insert(
            "mode".into(),
            json!(if self.target.is_some() {
                "target"
            } else {
                "greedy"
            }),
        );
        cx.stats.insert("cost".into(), json!(total));
        cx.stats.insert("complete".into(), json!(complete));
        Ok(())
    }
}
