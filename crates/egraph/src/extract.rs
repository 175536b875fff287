//! `--extract=greedy`: one program per e-graph function, choosing in every
//! e-class the e-node of least estimated cost: bytes moved through global
//! memory plus a fixed cost per kernel launch. Values under parallel axes
//! stay inside a kernel; values without parallel state are materialized.

use crate::analysis::{Data, EGraph};
use crate::convert::to_func;
use crate::saturate::{graph_in, reducer_functions};
use efir_diagnostics::{codes, Diag};
use efir_ir::pass::{Pass, PassContext, PassFailed, PassInfo, PassOptions};
use efir_ir::{Attr, AxisState, Dim, Func, Module, Type};
use egg::{CostFunction, Extractor, Id, Language, SymbolLang};
use serde_json::json;
use std::collections::BTreeSet;

/// Registration of `--extract`.
pub const INFO: PassInfo = PassInfo {
    name: "extract",
    summary:
        "Extract one program per e-graph (greedy, by estimated global-memory bytes and launches)",
    options: &[
        ("mode", "greedy (default): least estimated cost; target: the program of `file`, which must be in the e-graph"),
        ("file", "with mode=target: a .efir file holding a function of the same name"),
        ("launch-bytes", "cost of a kernel launch in bytes (default 65536)"),
    ],
    create: |o| Ok(Box::new(Extract::from_options(o)?)),
};

/// The pass.
pub struct Extract {
    launch: f64,
    target: Option<String>,
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
        let mut used_lib = BTreeSet::new();
        let mut funcs = Vec::new();
        let sigs = crate::convert::graph_signatures(m);
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
                let ex = Extractor::new(
                    &g.egraph,
                    GlobalMemoryCost {
                        eg: &g.egraph,
                        launch: self.launch,
                    },
                );
                for r in &g.roots {
                    total += ex.find_best_cost(*r);
                }
                to_func(&g, &f.name, span, &|c| ex.find_best_node(c).clone())
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
        Ok(())
    }
}
