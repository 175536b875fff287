//! `--compact`: extraction with compaction (the paper's section 5.1).
//!
//! Candidates are complete programs: one e-node chosen for every e-class
//! reachable from the roots, acyclic, tensor-level matmuls replaced by their
//! tiled implementations. They are enumerated depth first over *partial
//! programs*: programs whose unresolved e-classes are named holes `□c`,
//! resolving first the holes that only choose how a pointwise region is
//! written (their pointwise e-nodes before their views), the hole opened
//! last first. With `threads=N` several threads search, sharing the record
//! of partial programs and classes.
//!
//! The candidate space has more rules (see `docs/passes.md`): a value is
//! organized one way per program, no tuple field is dead, no kernel of its
//! own materializes pure pointwise work, a pointwise region reads each value
//! one way, and a stored value is not recomputed by another kernel. Values
//! are grouped into *value classes*: e-classes linked by partitions,
//! replicates and combines that assemble tiles (the same value under
//! different parallel states; a partial result is not its combined value),
//! and e-classes computing the same op over the same values (congruence).
//! Every e-class of a value class that the program computes with an op (not
//! a view) uses the same kind of op, so a value may be recomputed under
//! several states but not computed two different ways.
//!
//! Two candidates are equivalent (`≈`) when their canonical forms agree:
//! - parallel views (`par.partition`, `par.replicate`, and `par.combine` of a
//!   partitioned axis that leaves some parallel state) are transparent: a
//!   value read through views is the value;
//! - a pointwise region (`ew.*`, constants, reshape/transpose/broadcast) is
//!   keyed by the value class it computes and the set of its inputs, so
//!   operand order, association, where casts and factors sit and where the
//!   region sits relative to the views do not matter;
//! - a `par.combine` that leaves a value without parallel state is a
//!   materialization (a kernel boundary) and is keyed;
//! - the ops that organize the computation (`tile.matmul`, `tensor.reduce`,
//!   reducing combines, `par.collect`) are keyed with their attributes and
//!   operands; partitioned and replicated axes are not part of the key,
//!   because their tile sizes are schedule parameters and a full-extent tile
//!   is the unpartitioned form. For the same reason a `par.reduce` (a loop
//!   over an axis's tiles, one iteration with a full-extent tile) is keyed
//!   as its operand, and partial axes are not keyed: a K loop is the matmul
//!   with its whole K in one tile, while a collection of partial results in
//!   memory stays keyed;
//! - storage follows the kernels: a matmul, reduction or reducing combine
//!   without parallel state is written to memory, so it is keyed as a
//!   materialization of the op (like the op computed in tiles and combined),
//!   and so is a result computed whole by a pointwise op;
//! - a read from memory (a slice, a concatenation, a reshape that splits or
//!   merges dims) of a value that is not a buffer under views is a read of
//!   a store of it (`memory.rs`: the lowering stores such a value), so that
//!   programs that differ in such a store (repeat_kv's broadcast K and V
//!   against attention over split query heads) stay distinct; a partial
//!   program's form also says how the classes such a reader may read are
//!   realized, and those classes are never fixed or determined.
//!
//! So candidates with different matmul structure, reduction organization or
//! intermediate storage stay distinct.
//!
//! Modes: `none` keeps every complete candidate; `after` builds every
//! complete candidate and keeps one per class; `early` (the default) also
//! compares partial programs (holes included) and prunes one whose canonical
//! form is already on the search's record with a context that allows at
//! least its completions (`S ≈p T`), before expanding it; it resolves holes
//! with one option, fixed and frontier-fixed classes and *determined*
//! classes (every completion gives them one key) without branching, and
//! drops partial programs whose every completion has a dead tuple field.
//! Every mode that finishes yields the same classes.

mod candidates;
mod canon;
mod context;
mod dead_fields;
mod determined;
mod fixed;
mod fixpoint;
mod index;
mod kinds;
mod limits;
mod memory;
mod order;
mod partial;
mod record;
mod search;
mod space;
#[cfg(feature = "after-tree")]
mod tree;
mod twins;
mod values;

pub use self::candidates::{candidate_func, candidate_funcs, candidate_module, summary};
pub use self::index::Enumerator;
pub use self::limits::{deadline_in, Limits, Progress};
pub use self::record::Enumeration;
pub use self::space::{Mode, Partitions, Replicas, Space};
#[cfg(feature = "after-tree")]
pub use self::tree::TreeCount;

/// The flash-decoding twins of `built` (`twins.rs`), named on after them
/// (`@<name>.c<n>`, `n` from the number of candidates), with their kernel
/// count and materialized bytes.
fn split_twins(built: &[Func], name: &str) -> Vec<Func> {
    let mut out: Vec<Func> = Vec::new();
    for f in built {
        let n = built.len() + out.len();
        if let Some(mut t) = twins::split_states(f, &format!("{name}.c{n}")) {
            let (kernels, bytes) = summary(&t);
            let count = |n: u64| efir_ir::Attr::Int(i64::try_from(n).unwrap_or(i64::MAX));
            t.attrs.insert("kernels".into(), count(kernels as u64));
            t.attrs
                .insert("materialized_bytes".into(), count(bytes as u64));
            out.push(t);
        }
    }
    out
}

use self::record::TAIL_SECS_PER_NODE;
use crate::convert::Graph;
use crate::saturate::{graph_in, library_refs, reducer_functions};
use efir_diagnostics::{codes, Diag};
use efir_ir::pass::{Pass, PassContext, PassFailed, PassInfo, PassOptions};
use efir_ir::{Func, Module};
use serde_json::json;
use std::time::{Duration, Instant};

/// Registration of `--compact`.
pub const INFO: PassInfo = PassInfo {
    name: "compact",
    summary: "Enumerate distinct candidate programs from an e-graph, pruning equivalent partial programs early",
    options: &[
        ("mode", "early (default), after or none"),
        ("max-candidates", "stop after this many candidates per function (default 64)"),
        ("time-limit", "stop after this many seconds in all (one deadline for every function of the module; default 10)"),
        ("max-states", "stop after expanding this many partial programs per function (default 1000000)"),
        ("threads", "search on this many threads sharing one record (default 1; with more, the order of the candidates varies between runs)"),
        ("replicas", "view (default): under a replicated axis, a value that needs a matmul, or whose e-class has a replicate, is only the replicate of the value without that axis, where that value has another axis that is not replicated; compute: it may also be computed there"),
        ("partitions", "view (default): under two or more axes that are not replicated, a value whose e-class has a partition (and that replicas=view leaves alone) is only the partition of the value whole along that axis; compute: it may also be computed in the tile (with replicas=compute, the whole space; a function that either view leaves without a candidate is enumerated in the whole space, warning E0708)"),
        ("sketch", "mode=early only: first search at most this many seconds pruning by canonical form alone, then search soundly from the classes found (default 0, none)"),
    ],
    create: |o| Ok(Box::new(Compact::from_options(o)?)),
};

/// The pass.
pub struct Compact {
    /// The mode.
    pub mode: Mode,
    /// Candidate limit per function.
    pub max_candidates: usize,
    /// Time limit of the whole pass, in seconds: one deadline shared by
    /// every function of the module.
    pub time_limit: f64,
    /// Expansion limit per function.
    pub max_states: usize,
    /// Threads of the search.
    pub threads: usize,
    /// Time of the sketch before `early`'s search (zero: none; see
    /// [`Enumerator::run_sketched`]).
    pub sketch: Duration,
    /// The candidate space.
    pub space: Space,
}

impl Compact {
    /// From pass options.
    pub fn from_options(o: &PassOptions) -> Result<Compact, String> {
        INFO.check_options(o)?;
        let mode = match o.values.get("mode").map(String::as_str) {
            None | Some("early") => Mode::Early,
            Some("after") => Mode::After,
            Some("none") => Mode::None,
            Some(m) => {
                return Err(format!(
                    "unknown compaction mode `{m}` (modes: early, after, none)"
                ))
            }
        };
        let time_limit = o.get_seconds("time-limit", 10.0, false)?;
        let sketch = o.get_seconds("sketch", 0.0, true)?;
        let sketch = Duration::try_from_secs_f64(sketch).unwrap_or(Duration::MAX);
        if !sketch.is_zero() && mode != Mode::Early {
            return Err("option `sketch` is for `mode=early` only".to_string());
        }
        let view = |name: &str| match o.values.get(name).map(String::as_str) {
            None | Some("view") => Ok(true),
            Some("compute") => Ok(false),
            Some(r) => Err(format!(
                "option `{name}` must be `view` or `compute`, found `{r}`"
            )),
        };
        let space = Space {
            replicas: if view("replicas")? {
                Replicas::View
            } else {
                Replicas::Compute
            },
            partitions: if view("partitions")? {
                Partitions::View
            } else {
                Partitions::Compute
            },
        };
        Ok(Compact {
            mode,
            sketch,
            space,
            max_candidates: o.get_usize("max-candidates", 64)?,
            time_limit,
            max_states: o.get_usize("max-states", 1_000_000)?,
            threads: o.get_usize_in("threads", 1, 1, MAX_THREADS)?,
        })
    }
}

/// The most worker threads compaction starts.
pub const MAX_THREADS: usize = 256;

impl Compact {
    /// The candidates of one function's e-graph `g` in the space asked for,
    /// or the whole space where that space leaves a result without a
    /// program, or where every program of it breaks a rule of the candidate
    /// space (it is complete and has no candidate) while the whole space has
    /// candidates (warning E0708 for each); whether it fell back.
    fn enumerate(
        &self,
        g: &Graph,
        f: &Func,
        limits: &Limits,
        started: Instant,
        cx: &mut PassContext<'_>,
    ) -> (Enumeration, bool) {
        let warn_whole = |cx: &mut PassContext<'_>, why: String| {
            cx.diags.push(
                Diag::warning(
                    codes::E0708,
                    format!(
                        "`@{}`: {why}; enumerating the whole space (`replicas=compute,partitions=compute`) instead",
                        f.name
                    ),
                    f.name_span,
                )
                .with_label("candidates of this function"),
            );
        };
        // Progress events name the function and count from the pass's
        // start (the limit is the pass's).
        let run = |mut en: Enumerator<'_>| {
            en.progress = Progress {
                function: f.name.clone(),
                since: started,
                limit_s: self.time_limit,
                quiet: false,
            };
            let t = Instant::now();
            let res = en.run_sketched(self.mode, limits, self.threads, self.sketch);
            tracing::info!(target: "efir::progress", done = true);
            tracing::debug!(function = %f.name, seconds = t.elapsed().as_secs_f64(), expanded = res.expanded_states, "compact: enumerated");
            res
        };
        let t = Instant::now();
        let built = Enumerator::new_in(g, self.space);
        tracing::debug!(function = %f.name, seconds = t.elapsed().as_secs_f64(), "compact: candidate graph indexed");
        let restricted = match built {
            Ok(en) => en,
            Err(e) => {
                warn_whole(cx, e);
                return (run(Enumerator::new(g)), true);
            }
        };
        let res = run(restricted);
        if self.space != Space::WHOLE && res.complete && res.candidates.is_empty() {
            let whole = run(Enumerator::new(g));
            if !whole.candidates.is_empty() {
                warn_whole(
                    cx,
                    format!(
                        "`replicas={},partitions={}` has no candidate (every program of it breaks a rule of the candidate space), the whole space has",
                        self.space.replicas.name(),
                        self.space.partitions.name()
                    ),
                );
                return (whole, true);
            }
        }
        (res, false)
    }
}

/// What the pass reports in its statistics, summed over functions.
#[derive(Default)]
struct Totals {
    expanded: usize,
    programs: usize,
    candidates: usize,
    classes: usize,
    pruned: usize,
    sketch_expanded: usize,
    sketch_classes: usize,
    sketch_time: f64,
    complete: bool,
    /// Functions whose candidates come from the whole space instead of
    /// the one asked for (warning E0708).
    fallbacks: usize,
}

impl Totals {
    fn add(&mut self, res: &Enumeration) {
        self.sketch_expanded += res.sketch_expanded;
        self.sketch_classes += res.sketch_classes;
        self.sketch_time += res.sketch_time_s;
        self.expanded += res.expanded_states;
        self.programs += res.complete_programs;
        self.classes += res.classes;
        self.pruned += res.pruned;
        self.candidates += res.candidates.len();
        self.complete &= res.stopped_by.is_none();
    }

    fn report(&self, pass: &Compact, start: Instant, cx: &mut PassContext<'_>) {
        let s = &mut cx.stats;
        s.insert("mode".into(), json!(pass.mode.name()));
        s.insert("replicas".into(), json!(pass.space.replicas.name()));
        s.insert("partitions".into(), json!(pass.space.partitions.name()));
        s.insert("space_fallbacks".into(), json!(self.fallbacks));
        s.insert("expanded_states".into(), json!(self.expanded));
        s.insert("pruned_states".into(), json!(self.pruned));
        s.insert("complete_programs".into(), json!(self.programs));
        s.insert("candidates".into(), json!(self.candidates));
        s.insert("classes".into(), json!(self.classes));
        s.insert("complete".into(), json!(self.complete));
        if !pass.sketch.is_zero() {
            s.insert("sketch_expanded".into(), json!(self.sketch_expanded));
            s.insert("sketch_classes".into(), json!(self.sketch_classes));
            s.insert("sketch_time_s".into(), json!(self.sketch_time));
        }
        s.insert(
            "enumeration_time_s".into(),
            json!(start.elapsed().as_secs_f64()),
        );
    }
}

impl Pass for Compact {
    fn name(&self) -> &'static str {
        "compact"
    }

    fn run(&mut self, m: &mut Module, cx: &mut PassContext<'_>) -> Result<(), PassFailed> {
        // The functions reducers refer to are kept as they are.
        let lambdas = reducer_functions(m);
        // The candidate functions, in order.
        let mut funcs: Vec<Func> = Vec::new();
        let mut used = std::collections::BTreeSet::new();
        let mut totals = Totals {
            complete: true,
            ..Totals::default()
        };
        // One deadline for the whole module, counted from here: building
        // each function's e-graph and enumerator counts too (issue 30).
        let start = Instant::now();
        let limits = Limits {
            max_candidates: self.max_candidates,
            max_states: self.max_states,
            deadline: deadline_in(self.time_limit),
        };
        let sigs = crate::convert::graph_signatures(m);
        // E-nodes chosen by the candidates of the functions done: the time
        // to verify them after the pass is kept from the deadline of the
        // functions after them (each enumeration counts its own).
        let mut nodes = 0usize;
        for f in m.funcs.iter().filter(|f| !lambdas.contains(&f.name)) {
            let fail = |cx: &mut PassContext<'_>, e: String| crate::saturate::func_failed(cx, f, e);
            let t = Instant::now();
            let g = graph_in(f, sigs.clone()).map_err(|e| fail(cx, e))?;
            tracing::debug!(function = %f.name, seconds = t.elapsed().as_secs_f64(), "compact: e-graph read");
            let kept = Duration::from_secs_f64(TAIL_SECS_PER_NODE * nodes as f64);
            let limits = limits
                .with_deadline((limits.deadline.checked_sub(kept)).unwrap_or(limits.deadline));
            let (res, fell_back) = self.enumerate(&g, f, &limits, start, cx);
            nodes += res.candidates.iter().map(|c| c.len()).sum::<usize>();
            totals.fallbacks += usize::from(fell_back);
            totals.add(&res);
            if let Some(why) = res.stopped_by {
                cx.diags.push(Diag::warning(
                    codes::E0706,
                    format!(
                        "`@{}`: enumeration stopped by {why} after {} expanded partial programs; emitting the {} candidates found so far",
                        f.name,
                        res.expanded_states,
                        res.candidates.len()
                    ),
                    f.name_span,
                )
                .with_label("candidates of this function"));
            }
            used.extend(library_refs(&g.egraph));
            let t = Instant::now();
            let built = candidate_funcs(&g, f.name_span, &res.candidates, self.threads)
                .map_err(|e| fail(cx, e))?;
            tracing::debug!(function = %f.name, seconds = t.elapsed().as_secs_f64(), "compact: candidates built");
            let twins = split_twins(&built, &g.name);
            if !twins.is_empty() {
                tracing::debug!(function = %f.name, twins = twins.len(), "compact: flash-decoding twins appended");
            }
            funcs.extend(built);
            funcs.extend(twins);
        }
        let kept: Vec<Func> = std::mem::take(&mut m.funcs)
            .into_iter()
            .filter(|f| lambdas.contains(&f.name))
            .collect();
        let library = crate::repairs::used_funcs(&used.difference(&lambdas).cloned().collect());
        *m = candidate_module(kept, funcs, library, cx)?;
        totals.report(self, start, cx);
        Ok(())
    }
}
