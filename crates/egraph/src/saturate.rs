//! `--saturate`: turns each function into an e-graph, applies the rule
//! families until saturation or a limit, and writes the e-graph as an
//! `egraph` dialect function (which can be saturated further). Functions
//! that reducers refer to (`@f`, `@h`) are kept as they are.

use crate::convert::{from_egraph_func_in, from_func_in, graph_signatures, to_egraph_func, Graph};
use crate::rules::{rules, DEFAULT_FAMILIES, FAMILIES};
use efir_diagnostics::Span;
use efir_diagnostics::{codes, Diag};
use efir_ir::pass::{Pass, PassContext, PassFailed, PassInfo, PassOptions};
use efir_ir::{Attr, AxisState, Func, Module, Type};
use egg::{Runner, StopReason};
use serde_json::{json, Map, Value};
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

/// Registration of `--saturate`.
pub const INFO: PassInfo = PassInfo {
    name: "saturate",
    summary: "Equality saturation: the module's functions become e-graphs",
    options: &[
        (
            "families",
            "rule families, separated by `,` or `+` (default: all but `split`)",
        ),
        ("iter-limit", "maximum iterations (default 30)"),
        ("node-limit", "maximum e-nodes (default 20000)"),
        (
            "time-limit",
            "maximum seconds in all (one deadline for every function of the module; default 10)",
        ),
    ],
    create: |o| Ok(Box::new(Saturate::from_options(o)?)),
};

/// The pass.
pub struct Saturate {
    families: Vec<String>,
    iter_limit: usize,
    node_limit: usize,
    time_limit: f64,
}

impl Saturate {
    /// From pass options.
    pub fn from_options(o: &PassOptions) -> Result<Saturate, String> {
        INFO.check_options(o)?;
        let families: Vec<String> = match o.values.get("families") {
            None => DEFAULT_FAMILIES.iter().map(|s| s.to_string()).collect(),
            Some(v) => v
                .split(['+', ',', ' '])
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect(),
        };
        for f in &families {
            if !FAMILIES.contains(&f.as_str()) {
                return Err(format!(
                    "unknown rule family `{f}` (families: {})",
                    FAMILIES.join(", ")
                ));
            }
        }
        let time_limit = o.get_seconds("time-limit", 10.0, false)?;
        Ok(Saturate {
            families,
            iter_limit: o.get_usize("iter-limit", 30)?,
            node_limit: o.get_usize("node-limit", 20_000)?,
            time_limit,
        })
    }
}

/// Functions named by reducers (`f = @f`, `h = @h`) anywhere in the module.
pub fn reducer_functions(m: &Module) -> BTreeSet<String> {
    fn walk(a: &Attr, out: &mut BTreeSet<String>) {
        match a {
            Attr::Symbol(s) => {
                out.insert(s.clone());
            }
            Attr::Term(_, args) => args.iter().for_each(|(_, a)| walk(a, out)),
            Attr::Array(v) => v.iter().for_each(|a| walk(a, out)),
            Attr::Type(t) => walk_type(t, out),
            _ => {}
        }
    }
    fn walk_type(t: &Type, out: &mut BTreeSet<String>) {
        for l in t.leaves() {
            for s in l.state.values() {
                if let AxisState::Partial(r) = s {
                    walk(r, out);
                }
            }
        }
    }
    let mut out = BTreeSet::new();
    for f in &m.funcs {
        for v in &f.values {
            walk_type(&v.ty, &mut out);
        }
        for op in &f.ops {
            for a in op.attrs.values() {
                if let Attr::Term(..) = a {
                    walk(a, &mut out);
                }
            }
        }
    }
    out
}

/// The repair-library functions (`@efir.*`) that reducers in `eg` use.
pub fn library_refs(eg: &crate::analysis::EGraph) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    fn walk(a: &Attr, out: &mut BTreeSet<String>) {
        match a {
            Attr::Symbol(s) if s.starts_with("efir.") => {
                out.insert(s.clone());
            }
            Attr::Term(_, args) => args.iter().for_each(|(_, a)| walk(a, out)),
            _ => {}
        }
    }
    for a in &eg.analysis.attrs {
        walk(a, &mut out);
    }
    out
}

/// The text of the library functions used and not already in the module.
pub fn library_used(used: &BTreeSet<String>, present: &BTreeSet<String>) -> String {
    let missing: BTreeSet<String> = used.difference(present).cloned().collect();
    if missing.is_empty() {
        return String::new();
    }
    format!("\n{}", crate::repairs::used_text(&missing))
}

/// Report that function `f` could not be processed (`E0703`).
pub fn func_failed(cx: &mut PassContext<'_>, f: &efir_ir::Func, e: String) -> PassFailed {
    cx.diags.push(Diag::error(
        codes::E0703,
        format!("`@{}`: {e}", f.name),
        f.span,
    ));
    PassFailed
}

/// The module a pass built as IR: the reducer functions kept (`lambdas`),
/// the functions it made (in order) and the library functions they use
/// (`library`). It is verified by the pass manager after the pass; what the
/// verifier does not check, that no two functions share a name, is checked
/// here (else `E0207` on `cx` with `what` in front, a bug of the pass).
pub fn module_of(
    lambdas: Vec<Func>,
    made: Vec<Func>,
    library: Vec<Func>,
    what: &str,
    cx: &mut PassContext<'_>,
) -> Result<Module, PassFailed> {
    let mut m = Module::default();
    m.funcs.extend(lambdas);
    m.funcs.extend(made);
    m.funcs.extend(library);
    let mut seen: HashMap<&str, Span> = HashMap::new();
    let mut twice = false;
    for f in &m.funcs {
        if let Some(first) = seen.insert(&f.name, f.name_span) {
            twice = true;
            cx.diags.push(
                Diag::error(
                    codes::E0207,
                    format!("{what}: function `@{}` is defined twice", f.name),
                    f.name_span,
                )
                .with_label("redefined here")
                .with_secondary(first, "first defined here"),
            );
        }
    }
    if twice {
        return Err(PassFailed);
    }
    Ok(m)
}

/// Saturate `g` with the rules of `families` under the given limits; the
/// runner's iterations and stop reason, and the saturated graph.
pub fn run_rules(
    g: Graph,
    families: &[&str],
    iter_limit: usize,
    node_limit: usize,
    time_limit: f64,
) -> (Graph, Vec<egg::Iteration<()>>, Option<StopReason>) {
    run_rewrites(g, &rewrites(families), iter_limit, node_limit, time_limit)
}

/// The compiled rewrites of `families` (compiling them per function made a
/// module of many small functions slow to saturate).
pub fn rewrites(
    families: &[&str],
) -> Vec<egg::Rewrite<egg::SymbolLang, crate::analysis::TypeAnalysis>> {
    rules(families).iter().map(|r| r.rewrite()).collect()
}

/// [`run_rules`] with rewrites already compiled ([`rewrites`]).
pub fn run_rewrites(
    g: Graph,
    rewrites: &[egg::Rewrite<egg::SymbolLang, crate::analysis::TypeAnalysis>],
    iter_limit: usize,
    node_limit: usize,
    time_limit: f64,
) -> (Graph, Vec<egg::Iteration<()>>, Option<StopReason>) {
    let ctx = g.egraph.analysis.ctx.clone();
    let runner: Runner<_, _, ()> = Runner::new(crate::analysis::TypeAnalysis::new(ctx))
        .with_scheduler(Deadline {
            inner: egg::BackoffScheduler::default(),
            start: std::time::Instant::now(),
            limit: time_limit,
            dropped: false,
        })
        .with_egraph(g.egraph)
        .with_iter_limit(iter_limit)
        .with_node_limit(node_limit)
        .with_time_limit(Duration::from_secs_f64(time_limit))
        .run(rewrites);
    let mut eg = runner.egraph;
    eg.rebuild();
    let roots = g.roots.iter().map(|r| eg.find(*r)).collect();
    (
        Graph {
            egraph: eg,
            roots,
            ..g
        },
        runner.iterations,
        runner.stop_reason,
    )
}

/// Seconds per e-node that the pass spends after the runner: writing the
/// e-graph as text, then parsing and verifying it (about 25 us in a release
/// build on `attn_prefill.efir`; measured by `bench --bin limits`).
const TAIL_SECS_PER_NODE: f64 = 30e-6;

/// egg's default scheduler (backoff) that also stops the search of an
/// iteration, before each rule, and skips the rest of its applications,
/// once the time spent plus the time to write
/// out and read back an e-graph of the current size would pass the limit:
/// egg checks its own limit only after each rule, and the pass's work after
/// the runner made `--saturate` overshoot its limit by 0.27 s (issue 30).
struct Deadline {
    inner: egg::BackoffScheduler,
    start: std::time::Instant,
    limit: f64,
    /// Whether matches were dropped at the deadline.
    dropped: bool,
}

type Lang = egg::SymbolLang;
type An = crate::analysis::TypeAnalysis;

impl egg::RewriteScheduler<Lang, An> for Deadline {
    fn can_stop(&mut self, iteration: usize) -> bool {
        // An iteration whose matches were dropped is not saturation: the
        // next one's search stops on the time limit instead.
        !self.dropped
            && <egg::BackoffScheduler as egg::RewriteScheduler<Lang, An>>::can_stop(
                &mut self.inner,
                iteration,
            )
    }

    fn search_rewrite<'a>(
        &mut self,
        iteration: usize,
        egraph: &egg::EGraph<Lang, An>,
        rewrite: &'a egg::Rewrite<Lang, An>,
    ) -> Vec<egg::SearchMatches<'a, Lang>> {
        self.inner.search_rewrite(iteration, egraph, rewrite)
    }

    fn search_rewrites<'a>(
        &mut self,
        iteration: usize,
        egraph: &egg::EGraph<Lang, An>,
        rewrites: &[&'a egg::Rewrite<Lang, An>],
        limits: &egg::RunnerLimits,
    ) -> egg::RunnerResult<Vec<Vec<egg::SearchMatches<'a, Lang>>>> {
        let mut matches = Vec::new();
        for rw in rewrites {
            let projected = self.start.elapsed().as_secs_f64()
                + TAIL_SECS_PER_NODE * egraph.total_size() as f64;
            if projected > self.limit {
                return Err(StopReason::TimeLimit(projected));
            }
            matches.push(self.search_rewrite(iteration, egraph, rw));
            limits.check_limits(iteration, egraph)?;
        }
        Ok(matches)
    }

    fn apply_rewrite(
        &mut self,
        iteration: usize,
        egraph: &mut egg::EGraph<Lang, An>,
        rewrite: &egg::Rewrite<Lang, An>,
        matches: Vec<egg::SearchMatches<Lang>>,
    ) -> usize {
        // Past the deadline (with the tail), the rest of the iteration's
        // matches are dropped: applying them and rebuilding made a
        // 1-second `--saturate` take 1.34 s on eight copies of
        // rmsnorm_swiglu (`bench --bin limits`); the runner stops on its
        // time limit after this iteration's rebuild.
        let projected =
            self.start.elapsed().as_secs_f64() + TAIL_SECS_PER_NODE * egraph.total_size() as f64;
        if projected > self.limit {
            self.dropped = true;
            return 0;
        }
        self.inner
            .apply_rewrite(iteration, egraph, rewrite, matches)
    }
}

/// The e-graph of a function, whether it is already an e-graph or not.
pub fn graph_of(f: &efir_ir::Func, m: &Module) -> Result<Graph, String> {
    graph_in(f, graph_signatures(m))
}

/// [`graph_of`] with the module's signatures computed once
/// ([`graph_signatures`]): what passes use for each function in turn.
pub fn graph_in(
    f: &efir_ir::Func,
    sigs: std::sync::Arc<efir_ir::dialect::Signatures>,
) -> Result<Graph, String> {
    if f.ops.iter().any(|o| o.name == "egraph.node") {
        from_egraph_func_in(f, sigs)
    } else {
        from_func_in(f, sigs)
    }
}

fn stop_name(r: &Option<StopReason>) -> &'static str {
    match r {
        Some(StopReason::Saturated) => "saturated",
        Some(StopReason::IterationLimit(_)) => "iter-limit",
        Some(StopReason::NodeLimit(_)) => "node-limit",
        Some(StopReason::TimeLimit(_)) => "time-limit",
        Some(StopReason::Other(_)) | None => "other",
    }
}

impl Pass for Saturate {
    fn name(&self) -> &'static str {
        "saturate"
    }

    fn run(&mut self, m: &mut Module, cx: &mut PassContext<'_>) -> Result<(), PassFailed> {
        let fams: Vec<&str> = self.families.iter().map(String::as_str).collect();
        let lambdas = reducer_functions(m);
        let mut made = Vec::new();
        let (mut enodes, mut eclasses, mut iterations) = (0usize, 0usize, 0usize);
        let mut applied: Map<String, Value> = Map::new();
        let mut stop = "saturated";
        let mut used_lib = BTreeSet::new();
        let sigs = graph_signatures(m);
        let rws = rewrites(&fams);
        // One deadline for the whole module: each function gets the time
        // the ones before it left (issue 30).
        let deadline = crate::deadline::deadline_in(self.time_limit);
        for f in m.funcs.iter().filter(|f| !lambdas.contains(&f.name)) {
            let g = graph_in(f, sigs.clone()).map_err(|e| func_failed(cx, f, e))?;
            // Less the tail (writing out and reading back) of the e-graphs
            // of the functions before it, which the module's result holds.
            let left = (deadline
                .saturating_duration_since(std::time::Instant::now())
                .as_secs_f64()
                - TAIL_SECS_PER_NODE * enodes as f64)
                .max(0.0);
            let (g, iters, stop_reason) =
                run_rewrites(g, &rws, self.iter_limit, self.node_limit, left);
            let reason = stop_name(&stop_reason);
            if reason != "saturated" {
                stop = reason;
            }
            iterations += iters.len();
            for it in &iters {
                for (rule, n) in &it.applied {
                    let e = applied.entry(rule.to_string()).or_insert(json!(0));
                    *e = json!(e.as_u64().unwrap_or(0) + *n as u64);
                }
            }
            if !g.egraph.analysis.errors.is_empty() {
                for e in &g.egraph.analysis.errors {
                    cx.diags.push(
                        Diag::error(codes::E0705, format!("`@{}`: {e}", f.name), f.span)
                            .with_note("this is a bug in a rewrite rule"),
                    );
                }
                return Err(PassFailed);
            }
            used_lib.extend(library_refs(&g.egraph));
            enodes += g.egraph.total_size();
            eclasses += g.egraph.number_of_classes();
            made.push(to_egraph_func(&g, f.name_span).map_err(|e| func_failed(cx, f, e))?);
        }
        let kept: Vec<Func> = std::mem::take(&mut m.funcs)
            .into_iter()
            .filter(|f| lambdas.contains(&f.name))
            .collect();
        let library = crate::repairs::used_funcs(&used_lib.difference(&lambdas).cloned().collect());
        *m = module_of(kept, made, library, "in the saturated e-graph", cx)?;
        cx.stats.insert("enodes".into(), json!(enodes));
        cx.stats.insert("eclasses".into(), json!(eclasses));
        cx.stats.insert("iterations".into(), json!(iterations));
        cx.stats.insert("stop_reason".into(), json!(stop));
        cx.stats.insert("families".into(), json!(self.families));
        cx.stats
            .insert("rules_applied".into(), Value::Object(applied));
        Ok(())
    }
}
