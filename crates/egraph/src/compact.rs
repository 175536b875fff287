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
//!   and so is a result computed whole by a pointwise op.
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

use crate::analysis::{Data, EGraph};
use crate::convert::{node_attrs, node_operands, to_func_text, Graph};
use crate::extract::GlobalMemoryCost;
use crate::saturate::{graph_in, lambda_text, library_refs, library_used};
use efir_diagnostics::{codes, Diag};
use efir_ir::pass::{Pass, PassContext, PassFailed, PassInfo, PassOptions};
use efir_ir::{AxisState, Module};
use egg::{Id, SymbolLang};
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Registration of `--compact`.
pub const INFO: PassInfo = PassInfo {
    name: "compact",
    summary: "Enumerate distinct candidate programs from an e-graph, pruning equivalent partial programs early",
    options: &[
        ("mode", "early (default), after or none"),
        ("max-candidates", "stop after this many candidates per function (default 64)"),
        ("time-limit", "stop after this many seconds per function (default 10)"),
        ("max-states", "stop after expanding this many partial programs per function (default 1000000)"),
        ("threads", "search on this many threads sharing one record (default 1; with more, the order of the candidates varies between runs)"),
        ("replicas", "view (default): under a replicated axis, a value that needs a matmul, or whose e-class has a replicate, is only the replicate of the value without that axis, where that value has another axis that is not replicated; compute: it may also be computed there"),
        ("partitions", "view (default): under two or more axes that are not replicated, a value whose e-class has a partition (and that replicas=view leaves alone) is only the partition of the value whole along that axis; compute: it may also be computed in the tile (with replicas=compute, the whole space; a function that either view leaves without a candidate is enumerated in the whole space, warning E0708)"),
        ("sketch", "mode=early only: first search at most this many seconds pruning by canonical form alone, then search soundly from the classes found (default 0, none)"),
    ],
    create: |o| Ok(Box::new(Compact::from_options(o)?)),
};

/// How candidates are deduplicated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Prune equivalent partial programs before expanding them.
    Early,
    /// Build every complete candidate, keep one per class.
    After,
    /// Keep every complete candidate.
    None,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Early => "early",
            Mode::After => "after",
            Mode::None => "none",
        }
    }
}

/// Which e-nodes the candidate space allows where a value lives under a
/// replicated axis (pass option `replicas`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replicas {
    /// Such a value is only ever the replicate (a view) of the value
    /// without that axis, where that value still has a parallel state: in
    /// an e-class whose state replicates an axis and has another one, whose
    /// value needs a matmul (an e-node is a matmul or reads such an
    /// e-class) or that has a `par.replicate` e-node, only the
    /// `par.replicate` e-nodes are options. The other e-nodes compute the
    /// same value in each tile of the replicated axis, which a replicate of
    /// it computed under the other axes also does, and the canonical form
    /// does not see where a replicate sits, so they write the same classes
    /// again (see `docs/passes.md`).
    View,
    /// Every e-node is an option.
    Compute,
}

impl Replicas {
    fn name(self) -> &'static str {
        match self {
            Replicas::View => "view",
            Replicas::Compute => "compute",
        }
    }
}

/// Which e-nodes the candidate space allows where a value lives under two
/// or more axes that are not replicated (pass option `partitions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Partitions {
    /// Such a value, where its e-class has a `par.partition` e-node (and
    /// [`Replicas::View`] does not already restrict it), is only ever the
    /// partition (a view) of the value whole along that axis: only the
    /// `par.partition` e-nodes are options. That value keeps another axis
    /// that is not replicated, so it still has a parallel state (a kernel
    /// does not have to store it), and the canonical form and the Triton
    /// emitter do not see where a partition sits (a value is emitted in the
    /// tiling its reader needs), so computing it in the tile writes the
    /// same classes again (see `docs/passes.md`).
    View,
    /// Every e-node is an option.
    Compute,
}

impl Partitions {
    fn name(self) -> &'static str {
        match self {
            Partitions::View => "view",
            Partitions::Compute => "compute",
        }
    }
}

/// The candidate space: which e-nodes of the e-graph are options (pass
/// options `replicas` and `partitions`). Both restrictions only drop
/// e-nodes that write classes other options write too, on the e-graphs
/// that saturation builds (checked by comparing class sets with the whole
/// space; see `docs/passes.md`); they are not an equivalence that holds on
/// any e-graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Space {
    /// Under replicated axes.
    pub replicas: Replicas,
    /// Under two or more axes that are not replicated.
    pub partitions: Partitions,
}

impl Space {
    /// Every e-node is an option.
    pub const WHOLE: Space = Space {
        replicas: Replicas::Compute,
        partitions: Partitions::Compute,
    };
    /// The pass's default: values are views of values with fewer axes where
    /// the e-graph has them.
    pub const VIEWS: Space = Space {
        replicas: Replicas::View,
        partitions: Partitions::View,
    };
}

impl Default for Space {
    fn default() -> Space {
        Space::VIEWS
    }
}

/// Which options of each class the space keeps (`None`: all of them).
/// - [`Replicas::View`]: in a class whose state replicates an axis and has
///   another one, and whose value needs a matmul or that has a
///   `par.replicate` option, only `par.replicate`.
/// - [`Partitions::View`]: in another class whose state has two axes that
///   are not replicated and that has a `par.partition` option, only
///   `par.partition`.
///
/// Then no option that reads a class that no acyclic program can build
/// with the options left.
fn view_mask(
    eg: &EGraph,
    ids: &[Id],
    options: &[Vec<SymbolLang>],
    kids: &[Vec<Vec<u32>>],
    space: Space,
) -> Option<Vec<Vec<bool>>> {
    if space == Space::WHOLE {
        return None;
    }
    let n = ids.len();
    let parents = readers_of(kids);
    let mut matmul = vec![false; n];
    sweep_to_fixpoint(n, &parents, |c| {
        if matmul[c] {
            return false;
        }
        let needs = options[c].iter().zip(&kids[c]).any(|(o, ks)| {
            matches!(o.op.as_str(), "tile.matmul" | "tensor.matmul")
                || ks.iter().any(|k| matmul[*k as usize])
        });
        matmul[c] = needs;
        needs
    });
    // How many axes of a leaf of the class's type are replicated, and how
    // many are not (partitioned or partial).
    let axes = |c: usize| -> Vec<(usize, usize)> {
        eg[ids[c]].data.ty().map_or_else(Vec::new, |t| {
            t.leaves()
                .iter()
                .map(|l| {
                    let r = l
                        .state
                        .values()
                        .filter(|s| matches!(s, AxisState::Repl))
                        .count();
                    (r, l.state.len() - r)
                })
                .collect()
        })
    };
    let has = |c: usize, op: &str| options[c].iter().any(|o| o.op.as_str() == op);
    let mut keep: Vec<Vec<bool>> = (0..n)
        .map(|c| {
            let a = axes(c);
            // A state that replicates an axis and has another one: without
            // the replicated axes, the value still has a parallel state, so
            // it can be computed in the tile (a matmul without parallel
            // state is stored by its kernel, and computing it in each tile
            // of the replicated axis is then the only way to fuse it into
            // its reader).
            let replicas = space.replicas == Replicas::View
                && a.iter().any(|(r, o)| *r > 0 && *o > 0)
                && (matmul[c] || has(c, "par.replicate"));
            // Likewise, whole along one of two axes that are not
            // replicated, the value keeps the other.
            let partitions = !replicas
                && space.partitions == Partitions::View
                && a.iter().any(|(_, o)| *o >= 2)
                && has(c, "par.partition");
            let only = if replicas {
                Some("par.replicate")
            } else if partitions {
                Some("par.partition")
            } else {
                None
            };
            options[c]
                .iter()
                .map(|o| only.is_none_or(|v| o.op.as_str() == v))
                .collect()
        })
        .collect();
    // The classes an acyclic program can still build (least fixpoint: a
    // class is buildable when a kept option reads only buildable classes),
    // and no option that reads another class: a class left with options
    // that only lead back to itself has no program either.
    let mut buildable = vec![false; n];
    sweep_to_fixpoint(n, &parents, |c| {
        let now = !buildable[c]
            && (0..kids[c].len())
                .any(|j| keep[c][j] && kids[c][j].iter().all(|k| buildable[*k as usize]));
        buildable[c] |= now;
        now
    });
    for c in 0..n {
        for (j, ks) in kids[c].iter().enumerate() {
            if ks.iter().any(|k| !buildable[*k as usize]) {
                keep[c][j] = false;
            }
        }
    }
    Some(keep)
}

/// Keep the elements of `v` whose place `keep` marks.
fn retain_marked<T>(v: &mut Vec<T>, keep: &[bool]) {
    let mut marks = keep.iter();
    v.retain(|_| marks.next().copied().unwrap_or(false));
}

/// The pass.
pub struct Compact {
    /// The mode.
    pub mode: Mode,
    /// Candidate limit per function.
    pub max_candidates: usize,
    /// Time limit per function.
    pub time_limit: f64,
    /// Expansion limit per function.
    pub max_states: usize,
    /// Threads of the search.
    pub threads: usize,
    /// Seconds of sketch before `early`'s search (0: none; see
    /// [`Enumerator::run_sketched`]).
    pub sketch: f64,
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
        if sketch > 0.0 && mode != Mode::Early {
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

/// What one enumeration found.
#[derive(Clone, Debug, Default)]
pub struct Enumeration {
    /// The chosen e-node of every reachable e-class, per candidate.
    pub candidates: Vec<HashMap<Id, SymbolLang>>,
    /// The canonical key of each candidate's class.
    pub keys: Vec<u32>,
    /// Partial programs expanded.
    pub expanded_states: usize,
    /// Partial programs pruned as equivalent to one already seen.
    pub pruned: usize,
    /// Complete programs built (before keeping one per class).
    pub complete_programs: usize,
    /// Distinct classes among the complete programs.
    pub classes: usize,
    /// Whether the search finished (no limit stopped it).
    pub complete: bool,
    /// Which limit stopped it, if any.
    pub stopped_by: Option<&'static str>,
    /// Of `expanded_states`, those of the sketch
    /// ([`Enumerator::run_sketched`]; 0 without one).
    pub sketch_expanded: usize,
    /// The classes the sketch found.
    pub sketch_classes: usize,
    /// The sketch's time in seconds.
    pub sketch_time_s: f64,
}

#[derive(Clone)]
struct State {
    choice: Vec<u16>,
    holes: Vec<u32>,
    /// The label of the op producing each value class, where one was chosen.
    produced: Vec<u32>,
}

const NONE: u16 = u16::MAX;

/// The outcome of a realization in [`Enumerator::frontier_fixed`]:
/// whether it ends a pointwise region, and its symbolic key.
type Outcome = (bool, u64);

/// Symbolic keys over frontier classes, interned, with the inputs of the
/// regions among them.
#[derive(Default)]
struct Terms {
    ids: HashMap<Vec<u64>, u64>,
    inputs: Vec<Vec<u64>>,
}

impl Terms {
    fn get(&mut self, v: Vec<u64>, inputs: Option<Vec<u64>>) -> u64 {
        let n = self.ids.len() as u64;
        let id = *self.ids.entry(v).or_insert(n);
        if id == n {
            self.inputs.push(inputs.unwrap_or_default());
        }
        id
    }

    fn inputs(&self, t: u64) -> &[u64] {
        &self.inputs[t as usize]
    }
}

/// Record what option `j` of a class gives in a bottom-up pass where every
/// realizable option must agree: the first is kept (and picked), a
/// different one marks the class `bad`. True when anything changed.
fn agree<T: PartialEq>(
    slot: &mut Option<T>,
    pick: &mut Option<u16>,
    bad: &mut bool,
    v: T,
    j: usize,
) -> bool {
    match slot {
        None => {
            *slot = Some(v);
            *pick = Some(j as u16);
            true
        }
        Some(prev) if *prev != v => {
            *bad = true;
            true
        }
        Some(_) => false,
    }
}

/// The classes that read each class, given each class's options' operands
/// (`kids[c][j]`), each reader once.
fn readers_of(kids: &[Vec<Vec<u32>>]) -> Vec<Vec<u32>> {
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); kids.len()];
    for (c, opts) in kids.iter().enumerate() {
        for ks in opts {
            for &k in ks {
                let r = &mut out[k as usize];
                if r.last() != Some(&(c as u32)) {
                    r.push(c as u32);
                }
            }
        }
    }
    out
}

/// Run `eval` over classes `0..n` to a fixed point with the result of
/// repeated sweeps `for c in 0..n { changed |= eval(c) }` until a sweep
/// changes nothing, evaluating in the same order, but only the classes that
/// an operand's change can affect: all of them in the first sweep, then
/// those with an operand (`parents` gives the readers of each class) that
/// changed since their last evaluation. `eval(c)` must depend only on `c`'s
/// own state and its operands', and change nothing when none of those
/// changed since its last call. Plain sweeps were quadratic on long chains
/// whose readers come before their operands (one sweep per link).
fn sweep_to_fixpoint(n: usize, parents: &[Vec<u32>], mut eval: impl FnMut(usize) -> bool) {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut now: BinaryHeap<Reverse<u32>> = (0..n as u32).map(Reverse).collect();
    let mut in_now = vec![true; n];
    let mut next: Vec<u32> = Vec::new();
    let mut in_next = vec![false; n];
    loop {
        while let Some(Reverse(c)) = now.pop() {
            let c = c as usize;
            in_now[c] = false;
            if !eval(c) {
                continue;
            }
            for &p in &parents[c] {
                let pu = p as usize;
                if pu > c {
                    if !in_now[pu] {
                        in_now[pu] = true;
                        now.push(Reverse(p));
                    }
                } else if !in_next[pu] {
                    in_next[pu] = true;
                    next.push(p);
                }
            }
        }
        if next.is_empty() {
            return;
        }
        for p in next.drain(..) {
            in_next[p as usize] = false;
            in_now[p as usize] = true;
            now.push(Reverse(p));
        }
    }
}

/// Drop from `cand` the classes that are `bad` or got no value; true when
/// any was dropped (the pass runs again on the smaller set).
fn shrink(cand: &mut [bool], bad: &[bool], defined: impl Fn(usize) -> bool) -> bool {
    let mut shrunk = false;
    for c in 0..cand.len() {
        if cand[c] && (bad[c] || !defined(c)) {
            cand[c] = false;
            shrunk = true;
        }
    }
    shrunk
}

/// The key of a fixed class, and the inputs of the region it ends, if any.
type FixedKey = Option<(u32, Option<Vec<u32>>)>;

/// Context entries (see [`Enumerator::context`]): the class, a tag and a
/// payload in one word.
fn entry(c: u32, tag: u64, payload: u32) -> u64 {
    u64::from(c) << 34 | tag << 32 | u64::from(payload)
}

/// The context entry of a class with a key (resolved, or determined) that
/// reaches the holes `holes`: one word, and the hole words if it reaches
/// any.
fn push_keyed(entries: &mut Vec<u64>, c: u32, key: u32, holes: &[u64]) {
    if holes.iter().all(|w| *w == 0) {
        entries.push(entry(c, RESOLVED, key));
    } else {
        entries.push(entry(c, REACHES, key));
        entries.extend_from_slice(holes);
    }
}

/// An open class; the payload is its value's organization.
const OPEN: u64 = 0;
/// A resolved class that reaches no hole; the payload is its key.
const RESOLVED: u64 = 1;
/// A resolved class that reaches holes; the payload is its key, and the
/// hole words follow.
const REACHES: u64 = 2;

fn tag(w: u64) -> u64 {
    w >> 32 & 3
}

fn payload(w: u64) -> u32 {
    w as u32
}

/// How many earlier contexts with the same canonical form a partial program
/// is checked against for inclusion (checking fewer prunes less, never
/// wrongly).
const COVER_CHECKS: usize = 32;

/// The most context words kept for inclusion checks (512 MiB).
const ARENA_WORDS: usize = 64 << 20;

/// Enumerates candidates of one e-graph.
#[derive(Clone)]
pub struct Enumerator<'a> {
    eg: &'a EGraph,
    roots: Vec<u32>,
    ids: Vec<Id>,
    index: HashMap<Id, u32>,
    options: Vec<Vec<SymbolLang>>,
    kids: Vec<Vec<Vec<u32>>>,
    /// How each option of each class enters the canonical form.
    kind: Vec<Vec<Kind>>,
    /// The value class of each e-class (for the one-organization rule):
    /// e-classes that hold the same value under different parallel states
    /// (linked by views and materializations), and e-classes computing the
    /// same op over the same values. A partial result is not its whole
    /// value.
    value: Vec<u32>,
    /// The number of value classes.
    values: usize,
    /// Whether ops of two labels can produce a value class (otherwise the
    /// one-organization rule never excludes an option of that value).
    several_orgs: Vec<bool>,
    /// Interned keys: all of them, or in a parallel enumeration, those
    /// this thread has used (a cache of `shared_keys`, which numbers them).
    interner: FxHashMap<Vec<u32>, u32>,
    shared_keys: Option<Arc<Mutex<Keys>>>,
    /// Value classes up to `par.reduce` loops (what keys name).
    kvalue: Vec<u32>,
    /// The value class (up to `par.reduce` loops) each interned key
    /// computes (`u32::MAX` for holes and keys not seen in a program yet).
    key_value: Vec<u32>,
    /// Where set, a progress line about once a second on stderr, naming
    /// this function.
    pub progress: Option<String>,
    /// For classes whose every realization has the same key, the one
    /// option `early` considers (see [`Enumerator::fixed_options`]), and
    /// likewise for classes whose every realization reads the same frontier
    /// (see [`Enumerator::frontier_fixed`]).
    fixed: Vec<Option<u16>>,
    /// The fixed classes proper: no completion depends on them, so they
    /// are not context.
    opaque: Vec<bool>,
    /// Classes whose options are all views and pointwise ops (and loads
    /// and constants): they choose only how a region is written.
    route: Vec<bool>,
    /// The order in which [`Enumerator::expand`] tries each class's
    /// options (a route class's pointwise ops before its views).
    order: Vec<Vec<u16>>,
    /// Where each class's options start in a numbering of all options.
    opt_base: Vec<usize>,
    /// The last key interned at each call site of
    /// [`Enumerator::intern_at`], and what it was interned from.
    icache: Vec<(u32, Vec<u32>)>,
    /// The interner's lookup buffer.
    ibuf: Vec<u32>,
    scratch: Scratch,
    /// Buffers of [`Enumerator::context`].
    ctx: ContextScratch,
    /// Buffers of [`Enumerator::determine`].
    det: Determined,
    /// Whether `det` holds what [`Enumerator::settle_determined`] found
    /// about the state whose canonical form the scratch buffers hold (then
    /// [`Enumerator::context`] goes on from it).
    det_fresh: bool,
    /// Whether `early` resolves determined holes at once and compares
    /// contexts with determined classes as resolved.
    use_determined: bool,
    /// Whether `early` drops partial programs whose every completion has a
    /// dead tuple field ([`Enumerator::dead_field_partial`]).
    use_dead_fields: bool,
    /// How many earlier contexts [`Enumerator::covers`] is tried against.
    cover_checks: usize,
    /// Whether holes other than route holes are resolved in the order they
    /// were opened (an ablation of the hole order).
    first_opened_first: bool,
    /// The key of a hole at each class.
    hole_key: Vec<u32>,
    /// Whether this is a sketch: partial programs are pruned by canonical
    /// form alone ([`Enumerator::run_sketched`]).
    sketch: bool,
    /// The keys of holes.
    hole_of_key: FxHashSet<u32>,
    /// The text of each label (for [`Enumerator::key_text`]).
    label_names: Vec<String>,
    /// Options that compute nothing: parameters and constants.
    leaf: Vec<Vec<bool>>,
    /// For matmuls, reductions and reducing combines whose result has no
    /// parallel state (the kernels write those to memory), the label of a
    /// materialization of that type.
    stores: Vec<Vec<Option<u32>>>,
    /// For each result class, the label of a materialization of its type:
    /// a result is written to memory however it is computed.
    root_store: Vec<u32>,
    /// How each option reads the fields of its tuple operands.
    fields: Vec<Vec<FieldUse>>,
    /// The number of fields of each tuple-typed class (0 for tensors).
    arity: Vec<u32>,
    /// For each class, the tuple-typed classes (and their fields) that
    /// e-nodes of the classes reachable from it read.
    treaders: Vec<Vec<(u32, u64)>>,
    /// Buffers of [`Enumerator::dead_field_partial`].
    live: FxHashMap<u64, u64>,
    valall: FxHashMap<u32, u64>,
}

/// How an e-node reads the fields of its tuple-typed operands.
#[derive(Clone, Copy, PartialEq)]
enum FieldUse {
    /// `tensor.get<i>`: field `i` only.
    Get(u32),
    /// Field `i` of the result needs field `i` of the operand only (views,
    /// combines, collections, reductions with a product reducer).
    Fieldwise,
    /// `tensor.tuple`: builds the fields from tensors.
    Construct,
    /// Every field.
    All,
}

/// Per-class results of the last [`Enumerator::canon_parts`] call, reused
/// between calls: an entry is valid when its stamp is the call's.
#[derive(Clone, Default)]
struct Scratch {
    stamp: Vec<u32>,
    now: u32,
    hwords: usize,
    /// The key of each class reached from the roots.
    memo: Vec<u32>,
    /// Whether its value needs work beyond loads and pointwise ops (holes
    /// count as work: they may be completed either way).
    work: Vec<bool>,
    /// The pointwise region it ends (an index into `regions`), if any.
    region: Vec<u32>,
    /// Keys of materializations of values without work.
    pure: Vec<u32>,
    /// Buffers of one call: the sorted holes, a node's inputs, the
    /// traversal stack, the roots' keys.
    holes: Vec<u32>,
    inputs: Vec<u32>,
    stack: Vec<(u32, bool)>,
    roots: Vec<u32>,
    /// Each region's inputs: a range of `region_keys`.
    regions: Vec<(u32, u32)>,
    region_keys: Vec<u32>,
    /// Keys read by ops and pointwise regions, and keys of values with
    /// work that a kernel stores.
    used: Vec<u32>,
    stored: Vec<u32>,
    /// The value classes of a region's inputs (a buffer).
    vals: Vec<u32>,
    /// The resolved classes reached that are tuple-typed or read a tuple.
    tuples: Vec<u32>,
    /// The holes it reaches through chosen e-nodes (`hwords` words each,
    /// bits over the state's sorted holes).
    hreach: Vec<u64>,
}

impl Scratch {
    fn start(&mut self, n: usize, hwords: usize) {
        if self.stamp.len() != n || self.now == u32::MAX {
            *self = Scratch {
                stamp: vec![0; n],
                memo: vec![0; n],
                work: vec![false; n],
                region: vec![u32::MAX; n],
                ..Scratch::default()
            };
        }
        self.now += 1;
        self.regions.clear();
        self.region_keys.clear();
        self.pure.clear();
        self.used.clear();
        self.stored.clear();
        self.tuples.clear();
        if self.hwords != hwords || self.hreach.len() != n * hwords {
            self.hreach = vec![0; n * hwords];
            self.hwords = hwords;
        }
    }

    fn has(&self, c: usize) -> bool {
        self.stamp[c] == self.now
    }

    fn set(&mut self, c: usize, key: u32, work: bool, region: u32) {
        self.stamp[c] = self.now;
        self.memo[c] = key;
        self.work[c] = work;
        self.region[c] = region;
    }

    fn hreach(&self, c: usize) -> &[u64] {
        &self.hreach[c * self.hwords..(c + 1) * self.hwords]
    }

    /// The key of a class reached, and the inputs of the pointwise region
    /// it ends, if any.
    fn key_region(&self, c: usize) -> (u32, Option<&[u32]>) {
        let r = match self.region[c] {
            u32::MAX => None,
            r => {
                let (a, b) = self.regions[r as usize];
                Some(&self.region_keys[a as usize..b as usize])
            }
        };
        (self.memo[c], r)
    }
}

/// What [`Enumerator::determine`] found for the open classes of a state:
/// for each class whose every completion gives it one key (a
/// *determined* class), that key, the inputs of the pointwise region it
/// ends (if it ends one), whether it needs work, the holes it reaches, and
/// the option `early` chooses for it.
#[derive(Clone, Default)]
struct Determined {
    /// Per class: 0 not visited, 1 being visited, 2 not determined,
    /// 3 determined (its entry at `at`).
    mark: Vec<u8>,
    at: Vec<u32>,
    /// Each entry's realization and picked option.
    found: Vec<(Realization, u16)>,
    /// Per class being visited, how deep.
    depth: Vec<u32>,
    /// Visits left in this state (the work is bounded; a class left
    /// undecided is not determined).
    budget: usize,
    /// Buffers to reuse (their contents are dead).
    spare_words: Vec<Vec<u64>>,
    spare_keys: Vec<Vec<u32>>,
    spare_effects: Vec<Vec<(u32, u32)>>,
}

/// What one option of a class gives it in every completion (see
/// [`Enumerator::determine`]): its key, the inputs of the region it ends,
/// whether it needs work, the holes it reaches (`hwords` words) and the
/// organizations it fixes ((value, label) pairs).
#[derive(Clone, PartialEq)]
struct Realization {
    key: u32,
    region: Option<Vec<u32>>,
    work: bool,
    reach: Vec<u64>,
    effects: Vec<(u32, u32)>,
}

impl Determined {
    fn reset(&mut self, n: usize) {
        self.mark.clear();
        self.mark.resize(n, 0);
        self.at.resize(n, 0);
        self.depth.resize(n, 0);
        self.budget = 8 * n;
        for (r, _) in self.found.drain(..) {
            self.spare_words.push(r.reach);
            self.spare_effects.push(r.effects);
            if let Some(v) = r.region {
                self.spare_keys.push(v);
            }
        }
    }

    /// The realization of the open class `c` (determined, or being used
    /// by the class that asked).
    fn of(&self, c: usize) -> &Realization {
        &self.found[self.at[c] as usize].0
    }

    /// The option picked for the determined class `c`.
    fn pick(&self, c: usize) -> usize {
        self.found[self.at[c] as usize].1 as usize
    }
}

/// Buffers reused by [`Enumerator::context`]: a class is visited when its
/// stamp is the call's.
#[derive(Clone, Default)]
struct ContextScratch {
    stamp: Vec<u32>,
    now: u32,
    stack: Vec<u32>,
    region: Vec<u32>,
    /// The last context, entry by entry (see [`Enumerator::covers`]).
    entries: Vec<u64>,
}

/// What the enumeration has seen: the classes of complete programs, and the
/// partial programs `early` has kept, with their canonical forms and
/// contexts.
#[derive(Default)]
struct Record {
    /// Canonical forms of the complete programs in the candidate space.
    complete: FxHashSet<u32>,
    /// Canonical forms of complete programs outside the candidate space
    /// (its rules depend only on the canonical form, so they are checked
    /// once per form).
    rejected: FxHashSet<u32>,
    /// Canonical form and context hash of each.
    seen: FxHashSet<(u32, u64)>,
    /// The canonical forms of the partial programs kept, in a sketch.
    forms: FxHashSet<u32>,
    /// Their contexts (offset and length in `arena`), by canonical form.
    contexts: FxHashMap<u32, Vec<(usize, usize)>>,
    arena: Vec<u64>,
}

/// What [`Enumerator::prune`] found.
enum Verdict {
    /// Outside the candidate space.
    Invalid,
    /// Equivalent to or covered by a partial program on the record.
    Seen,
    /// Neither: now on the record.
    New,
}

/// A partial program's canonical form and what pruning needs from it.
#[derive(Clone, Copy)]
struct Canon {
    /// The canonical form (equal numbers for equal forms).
    key: u32,
    /// Whether the program materializes a value that only needed loads
    /// and pointwise work (see [`Enumerator::canon_parts`]).
    invalid: bool,
}

/// How an e-node enters the canonical form (the number is its interned
/// label, which names its value class up to `par.reduce` loops; the
/// one-organization rule compares the labels of pointwise ops and ops).
#[derive(Clone, Copy)]
enum Kind {
    /// Transparent: the value read through it is its operand's.
    View,
    /// Part of a pointwise region, keyed by its value and the region's
    /// inputs.
    Pointwise(u32),
    /// Assembles tiles into a value without parallel state: a kernel
    /// boundary.
    Materialize(u32),
    /// Keyed by its label and its operands' keys.
    Op(u32),
    /// A `par.reduce` loop, keyed as its operand (one iteration with a
    /// full-extent tile); organized like the ops that make its operand
    /// (the label they share, if they do).
    Loop(Option<u32>),
}

impl Kind {
    /// The label the one-organization rule compares, if any.
    fn org(self) -> Option<u32> {
        match self {
            Kind::Pointwise(l) | Kind::Op(l) => Some(l),
            Kind::Loop(l) => l,
            Kind::View | Kind::Materialize(_) => None,
        }
    }
}

/// Interned keys: what each is interned from, and its number.
type Keys = FxHashMap<Vec<u32>, u32>;

/// What a thread counts: partial programs expanded and pruned.
#[derive(Clone, Copy, Default)]
struct Counts {
    expanded: usize,
    pruned: usize,
}

/// What [`Enumerator::expand`] gives: the children to explore, whether
/// the candidate limit was reached, and whether options were left then.
#[derive(Default)]
struct Expansion {
    next: Vec<State>,
    stop: bool,
    cut: bool,
}

/// What the threads of an enumeration share: the record (in shards by
/// canonical form, so that threads seldom wait for one another), and what
/// was found.
struct Shared {
    record: Vec<Mutex<Record>>,
    out: Mutex<Enumeration>,
    max_candidates: usize,
    /// Words of contexts kept for inclusion checks, in all shards.
    arena_words: AtomicUsize,
    /// Whether a complete program was left when the limit was reached.
    left: AtomicBool,
    /// E-nodes chosen by the candidates found: what the pass still has to
    /// write out and read back after the enumeration (see [`TAIL_SECS_PER_NODE`]).
    nodes: AtomicUsize,
}

/// Seconds per e-node of a candidate that the pass spends after the
/// enumeration (writing the candidates as functions, then parsing and
/// verifying them; 12 to 17 us per candidate op in a release build on
/// `attn_prefill.efir` and `rmsnorm_mlp.efir`, see `bench --bin limits`;
/// a candidate chooses somewhat more e-nodes than it has ops). The time
/// limit is checked against the time
/// spent plus this for the candidates found.
const TAIL_SECS_PER_NODE: f64 = 12e-6;

impl Shared {
    /// Whether the time spent since `start`, plus the time to write out the
    /// candidates found, is past `limit`.
    fn past(&self, start: Instant, limit: Duration) -> bool {
        let tail = TAIL_SECS_PER_NODE * self.nodes.load(Ordering::Relaxed) as f64;
        start.elapsed().as_secs_f64() + tail > limit.as_secs_f64()
    }
}

/// Shards of the record.
const SHARDS: usize = 64;

impl Shared {
    /// A record that starts with the classes of `found` (their
    /// candidates come first in the result).
    fn new(max_candidates: usize, found: Enumeration) -> Shared {
        let shared = Shared {
            record: (0..SHARDS).map(|_| Mutex::new(Record::default())).collect(),
            out: Mutex::new(Enumeration::default()),
            max_candidates,
            arena_words: AtomicUsize::new(0),
            left: AtomicBool::new(false),
            nodes: AtomicUsize::new(found.candidates.iter().map(HashMap::len).sum()),
        };
        for k in &found.keys {
            shared.record(*k).complete.insert(*k);
        }
        *shared.out() = Enumeration {
            candidates: found.candidates,
            keys: found.keys,
            complete_programs: found.complete_programs,
            ..Enumeration::default()
        };
        shared
    }

    /// The shard of the record that holds the canonical form `key`.
    fn record(&self, key: u32) -> MutexGuard<'_, Record> {
        self.record[key as usize % SHARDS]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The classes found so far.
    fn classes(&self) -> usize {
        (0..SHARDS as u32)
            .map(|k| self.record(k).complete.len())
            .sum()
    }

    fn out(&self) -> MutexGuard<'_, Enumeration> {
        self.out.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The enumeration's result: `left` when a limit stopped it with work
    /// left.
    fn finish(self, n: Counts, stopped_by: Option<&'static str>, left: bool) -> Enumeration {
        let classes = self.classes();
        let mut out = self.out.into_inner().unwrap_or_else(|e| e.into_inner());
        out.expanded_states = n.expanded;
        out.pruned = n.pruned;
        out.classes = classes;
        let stopped_by = out.stopped_by.or(stopped_by);
        let left = left || self.left.load(Ordering::Relaxed);
        out.complete = !(stopped_by.is_some() && left);
        out.stopped_by = if out.complete { None } else { stopped_by };
        out
    }
}

/// The work of a parallel enumeration: partial programs given up by a
/// thread and how many threads wait for one, the number of threads
/// waiting (read without the lock), whether to stop and why, expansions
/// so far, and whether work was left.
struct Pool {
    work: Mutex<(Vec<State>, usize)>,
    idle: AtomicUsize,
    stop: AtomicBool,
    expanded: AtomicUsize,
    left: AtomicBool,
    stopped_by: Mutex<Option<&'static str>>,
}

impl Pool {
    fn lock(&self) -> MutexGuard<'_, (Vec<State>, usize)> {
        self.work.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A partial program to expand, waiting for one while another thread
    /// works; `None` when every thread waits (the search is over) or the
    /// search stops.
    fn take(&self, threads: usize) -> Option<State> {
        let mut waiting = false;
        loop {
            {
                let mut w = self.lock();
                if let Some(s) = w.0.pop() {
                    if waiting {
                        w.1 -= 1;
                        self.idle.store(w.1, Ordering::Relaxed);
                    }
                    return Some(s);
                }
                if !waiting {
                    waiting = true;
                    w.1 += 1;
                    self.idle.store(w.1, Ordering::Relaxed);
                }
                if w.1 == threads {
                    return None;
                }
            }
            if self.stop.load(Ordering::Relaxed) {
                return None;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

const HOLE: u32 = u32::MAX;
const ROOTS: u32 = u32::MAX - 1;

/// Ops inside pointwise regions: their canonical form is the region's value
/// and the set of its inputs, whatever the expression's shape.
fn pointwise(op: &str) -> bool {
    op.starts_with("ew.")
        || matches!(
            op,
            "tensor.broadcast"
                | "tensor.reshape"
                | "tensor.transpose"
                | "tensor.full"
                | "tensor.iota"
        )
}

/// The order in which the enumeration tries a class's e-nodes: the greedy
/// extractor's global-memory cost, plus a penalty for reducing a long dim
/// inside one program (a matmul's K or a reduction's dim, unsplit and longer
/// than 512): such a block does not fit in registers, while splitting the dim
/// (a loop or a collect) does. Only the order changes, not the candidates.
struct OrderCost<'a> {
    inner: GlobalMemoryCost<'a>,
}

impl OrderCost<'_> {
    fn penalty(&self, n: &SymbolLang) -> f64 {
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

    /// The canonical keys of `e`'s classes as text, comparable between
    /// enumerators of one e-graph in different spaces (keys are numbered
    /// per enumerator; labels name value classes, which come from every
    /// e-node in any space).
    pub fn class_texts(&self, e: &Enumeration) -> std::collections::BTreeSet<String> {
        let mut parts: Vec<&[u32]> = vec![&[]; self.interner.len()];
        for (v, k) in &self.interner {
            if let Some(p) = parts.get_mut(*k as usize) {
                *p = v;
            }
        }
        let mut memo: HashMap<u32, String> = HashMap::new();
        e.keys
            .iter()
            .map(|k| self.key_text(*k, &parts, &mut memo))
            .collect()
    }

    fn key_text(&self, k: u32, parts: &[&[u32]], memo: &mut HashMap<u32, String>) -> String {
        if let Some(t) = memo.get(&k) {
            return t.clone();
        }
        let p = parts.get(k as usize).copied().unwrap_or(&[]);
        let t = match p.split_first() {
            None => format!("?{k}"),
            Some((&HOLE, rest)) => format!("hole{rest:?}"),
            Some((&l, rest)) => {
                let head = match l {
                    ROOTS => "roots",
                    l => self.label_names.get(l as usize).map_or("?", String::as_str),
                };
                let mut kids: Vec<String> = rest
                    .iter()
                    .map(|x| self.key_text(*x, parts, memo))
                    .collect();
                // A pointwise region's inputs are a set, ordered by key
                // number, which is per enumerator.
                if head.contains("|pointwise|") {
                    kids.sort();
                }
                format!("{head}({})", kids.join(", "))
            }
        };
        memo.insert(k, t.clone());
        t
    }

    /// The classes that read each class (an option has it as an operand),
    /// each once.
    fn readers(&self) -> Vec<Vec<u32>> {
        readers_of(&self.kids)
    }

    /// Every field of the tuple-typed class `c`, as bits.
    fn all_fields(&self, c: u32) -> u64 {
        (1u64 << self.arity[c as usize].min(63)) - 1
    }

    /// The fields of its operand `k` that an e-node reading them as `how`
    /// needs, when its own live fields are `here`.
    fn fields_read(&self, how: FieldUse, here: u64, k: u32) -> u64 {
        match how {
            FieldUse::Get(i) => 1u64 << i.min(63),
            FieldUse::Fieldwise => here,
            FieldUse::Construct | FieldUse::All => self.all_fields(k),
        }
    }

    /// [`Enumerator::treaders`]: a fixed point over the e-graph (it may
    /// have cycles), merging fields per tuple class.
    fn tuple_readers(&self) -> Vec<Vec<(u32, u64)>> {
        let n = self.ids.len();
        let mut r: Vec<Vec<(u32, u64)>> = vec![Vec::new(); n];
        let add = |v: &mut Vec<(u32, u64)>, k: u32, bits: u64| -> bool {
            match v.iter_mut().find(|(x, _)| *x == k) {
                Some((_, b)) if *b | bits == *b => false,
                Some((_, b)) => {
                    *b |= bits;
                    true
                }
                None => {
                    v.push((k, bits));
                    true
                }
            }
        };
        for (c, rc) in r.iter_mut().enumerate() {
            for (j, kids) in self.kids[c].iter().enumerate() {
                for &k in kids {
                    if self.arity[k as usize] == 0 {
                        continue;
                    }
                    // (What a reader's own liveness lets through is not
                    // known here: every field.)
                    let bits = self.fields_read(self.fields[c][j], self.all_fields(k), k);
                    add(rc, k, bits);
                }
            }
        }
        let mut changed = true;
        while changed {
            changed = false;
            for c in 0..n {
                for j in 0..self.kids[c].len() {
                    for &k in &self.kids[c][j] {
                        if k as usize == c || r[k as usize].is_empty() {
                            continue;
                        }
                        let theirs = r[k as usize].clone();
                        for (x, bits) in theirs {
                            changed |= add(&mut r[c], x, bits);
                        }
                    }
                }
            }
        }
        r
    }

    /// The classes whose every realization gives the same canonical key and
    /// the option `early` uses for each (`None` elsewhere). A class is fixed
    /// when every option is a parameter, a constant, a view or a pointwise
    /// op over fixed classes (a `par.combine` of a fixed class into a whole
    /// buffer is never a candidate unless its key is a result's, which needs
    /// a result of the same value; see [`Enumerator::canon_parts`]), no
    /// e-class of its value is computed by
    /// another kind of op, and all its realizable options give one key.
    ///
    /// Why `early` may fix them (no class is lost): take any candidate and
    /// replace the choice of every fixed class by its fixed option. Fixed
    /// classes only reference fixed classes, and the fixed options are
    /// acyclic (each was chosen when its operands already had keys), so the
    /// result is acyclic; keys of fixed classes do not change, so neither
    /// does any other key, and the one-organization rule still holds (a
    /// fixed class's value has no other kind of producer). And a completion
    /// never has a choice to make for a fixed class, so whether one is
    /// resolved yet is not context.
    fn fixed_options(&mut self) -> (Vec<Option<u16>>, Vec<FixedKey>) {
        let n = self.ids.len();
        let parents = self.readers();
        let mut other_op = vec![false; n];
        for c in 0..n {
            for j in 0..self.options[c].len() {
                if matches!(self.kind[c][j], Kind::Op(_) | Kind::Loop(_)) && !self.leaf[c][j] {
                    other_op[self.value[c] as usize] = true;
                }
            }
        }
        let mut cand: Vec<bool> = (0..n).map(|c| !other_op[self.value[c] as usize]).collect();
        let mut result_value = vec![false; n];
        for r in &self.roots {
            result_value[self.kvalue[*r as usize] as usize] = true;
        }
        loop {
            // Greatest set closed under "every option is a leaf, a view or
            // pointwise over candidates (or an invalid materialization)".
            sweep_to_fixpoint(n, &parents, |c| {
                if !cand[c] {
                    return false;
                }
                {
                    let ok = (0..self.options[c].len()).all(|j| {
                        self.leaf[c][j]
                            || match self.kind[c][j] {
                                Kind::View | Kind::Pointwise(_) => {
                                    self.kids[c][j].iter().all(|k| cand[*k as usize])
                                }
                                // Invalid unless its key is a result's, which
                                // needs a result of the same value.
                                Kind::Materialize(_) => {
                                    !result_value[self.kvalue[c] as usize]
                                        && self.kids[c][j].iter().all(|k| cand[*k as usize])
                                }
                                Kind::Op(_) | Kind::Loop(_) => false,
                            }
                    });
                    if !ok {
                        cand[c] = false;
                        return true;
                    }
                }
                false
            });
            // Keys bottom up (least fixed point): an option counts once its
            // operands have keys; every counted option must agree.
            let mut key: Vec<Option<(u32, Option<Vec<u32>>)>> = vec![None; n];
            let mut inputs: Vec<u32> = Vec::new();
            let mut pick: Vec<Option<u16>> = vec![None; n];
            let mut bad = vec![false; n];
            sweep_to_fixpoint(n, &parents, |c| {
                let mut changed = false;
                {
                    if !cand[c] || bad[c] {
                        return false;
                    }
                    for j in 0..self.options[c].len() {
                        if matches!(self.kind[c][j], Kind::Materialize(_)) {
                            continue;
                        }
                        if self.kids[c][j].iter().any(|k| key[*k as usize].is_none()) {
                            continue;
                        }
                        let k = self.node_key(
                            c,
                            j,
                            |x| {
                                let (k, r) = key[x as usize].as_ref().expect("operands are keyed");
                                (*k, r.as_deref())
                            },
                            &mut inputs,
                        );
                        let region = match self.kind[c][j] {
                            Kind::View => key[self.kids[c][j][0] as usize]
                                .as_ref()
                                .and_then(|(_, r)| r.clone()),
                            Kind::Pointwise(_) => Some(inputs.clone()),
                            _ => None,
                        };
                        changed |= agree(&mut key[c], &mut pick[c], &mut bad[c], (k, region), j);
                    }
                }
                changed
            });
            if !shrink(&mut cand, &bad, |c| key[c].is_some()) {
                let picks = (0..n)
                    .map(|c| if cand[c] { pick[c] } else { None })
                    .collect();
                let keys = (0..n)
                    .map(|c| if cand[c] { key[c].clone() } else { None })
                    .collect();
                return (picks, keys);
            }
        }
    }

    /// Classes whose every realization has the same canonical form over
    /// the same frontier, and the option `early` uses for each (`None`
    /// elsewhere). The frontier of a class is what its realizations reach
    /// that is neither fixed nor frontier-fixed: classes whose choice stays
    /// free. A class is frontier-fixed when it is not fixed, every option
    /// that organizes its value does so for a value with one organization,
    /// and every realizable option gives the same *outcome*: the symbolic
    /// key of [`Enumerator::node_key_parts`] with frontier classes as
    /// variables (and fixed classes as their keys). Say a pointwise region
    /// written `partition(mul(cast(x), s))` or `mul(partition(cast(x)),
    /// partition(s))` over a row statistic `s` whose organization is still
    /// open, or a stored matmul computed whole, in row tiles combined, or as
    /// a K loop.
    ///
    /// Why `early` may use one option (no class is lost): take any candidate
    /// and replace the choice of every frontier-fixed class it reaches by its
    /// option (chosen when its operands already had outcomes, so these
    /// choices are acyclic). Each such class then has the same outcome over
    /// the same frontier classes, which keep their choices, so its key,
    /// whether it needs work and the inputs of the region it ends do not
    /// change, and neither does any other key; a cycle through a replaced
    /// class would run through its frontier, which every realization
    /// reaches, so the candidate had one too; and the one-organization rule
    /// still holds, because every choice that organizes a value is for a
    /// value with one organization. The rules of the candidate space depend
    /// only on the canonical form. Unlike fixed classes they are context: a
    /// completion that reaches one reaches its frontier.
    fn frontier_fixed(&self, fixed: &[Option<u16>], keys: &[FixedKey]) -> Vec<Option<u16>> {
        let n = self.ids.len();
        let parents = self.readers();
        // Candidates: not fixed, and every option that organizes a value
        // does so for a value with one organization (so the rule never
        // excludes it).
        let mut cand: Vec<bool> = (0..n)
            .map(|c| {
                fixed[c].is_none()
                    && (0..self.options[c].len()).all(|j| {
                        self.kind[c][j].org().is_none()
                            || !self.several_orgs[self.value[c] as usize]
                    })
            })
            .collect();
        loop {
            let mut terms = Terms::default();
            let mut out: Vec<Option<Outcome>> = vec![None; n];
            let mut pick: Vec<Option<u16>> = vec![None; n];
            let mut bad = vec![false; n];
            sweep_to_fixpoint(n, &parents, |c| {
                let mut changed = false;
                {
                    if !cand[c] || bad[c] {
                        return false;
                    }
                    for j in 0..self.options[c].len() {
                        // What each operand contributes: a candidate's
                        // outcome once known, a fixed class's key (and its
                        // region's inputs), a frontier class itself.
                        let mut parts: Vec<Outcome> = Vec::new();
                        let mut ready = true;
                        for &x in &self.kids[c][j] {
                            let x = x as usize;
                            let p = if cand[x] {
                                match out[x] {
                                    Some(p) => p,
                                    None => {
                                        ready = false;
                                        break;
                                    }
                                }
                            } else if let Some((k, r)) = &keys[x] {
                                match r {
                                    Some(r) => {
                                        let inputs: Vec<u64> = r
                                            .iter()
                                            .map(|k| terms.get(vec![1, u64::from(*k)], None))
                                            .collect();
                                        (true, terms.get(vec![3, u64::from(*k)], Some(inputs)))
                                    }
                                    None => (false, terms.get(vec![1, u64::from(*k)], None)),
                                }
                            } else {
                                (false, terms.get(vec![0, x as u64], None))
                            };
                            parts.push(p);
                        }
                        if !ready {
                            continue;
                        }
                        let o = self.outcome(c, j, &parts, &mut terms);
                        changed |= agree(&mut out[c], &mut pick[c], &mut bad[c], o, j);
                    }
                }
                changed
            });
            if !shrink(&mut cand, &bad, |c| out[c].is_some()) {
                return (0..n)
                    .map(|c| if cand[c] { pick[c] } else { None })
                    .collect();
            }
        }
    }

    /// The outcome of option `j` of class `c` given its operands': the
    /// symbolic form of [`Enumerator::node_key_parts`] over frontier
    /// classes.
    fn outcome(&self, c: usize, j: usize, parts: &[Outcome], terms: &mut Terms) -> Outcome {
        let stored = |t: u64, terms: &mut Terms| match self.stores[c][j] {
            Some(m) => (false, terms.get(vec![5, u64::from(m), t], None)),
            None => (false, t),
        };
        match self.kind[c][j] {
            Kind::View => parts[0],
            Kind::Loop(_) => match self.stores[c][j] {
                Some(_) => stored(parts[0].1, terms),
                None => parts[0],
            },
            Kind::Pointwise(label) => {
                let mut inputs: Vec<u64> = Vec::new();
                for (r, t) in parts {
                    if *r {
                        inputs.extend_from_slice(terms.inputs(*t));
                    } else {
                        inputs.push(*t);
                    }
                }
                inputs.sort_unstable();
                inputs.dedup();
                let mut v = vec![4, u64::from(label)];
                v.extend_from_slice(&inputs);
                (true, terms.get(v, Some(inputs)))
            }
            Kind::Materialize(label) => (
                false,
                terms.get(vec![5, u64::from(label), parts[0].1], None),
            ),
            Kind::Op(label) => {
                let mut v = vec![6, u64::from(label)];
                v.extend(parts.iter().map(|p| p.1));
                let t = terms.get(v, None);
                stored(t, terms)
            }
        }
    }

    /// What the completions of a partial program depend on besides its
    /// canonical form. A completion chooses e-nodes for the unresolved
    /// classes reachable from the holes through unresolved classes (the
    /// open region) and references the resolved classes on the region's
    /// frontier as they are. So it depends on: for each open class, the
    /// organization already chosen for its value (the one-organization
    /// rule); for each frontier class, its key (the canonical form of what
    /// it computes, which also fixes the inputs of a pointwise region it
    /// ends) and the holes its chosen e-nodes reach (which completions would
    /// close a cycle). Two partial programs with the same canonical form
    /// (holes included) and the same context allow the same completions,
    /// and each completion gives equivalent programs: pruning one never
    /// removes a class.
    fn context(&mut self, s: &State) -> u64 {
        use std::hash::{Hash, Hasher};
        // Completions choose e-nodes for the unresolved classes reachable
        // from the holes through unresolved classes, and reference the
        // resolved classes on that region's frontier as they are. Visited
        // classes carry this call's stamp.
        let n = self.ids.len();
        if self.ctx.stamp.len() != n || self.ctx.now == u32::MAX {
            self.ctx.stamp = vec![0; n];
            self.ctx.now = 0;
        }
        self.ctx.now += 1;
        let now = self.ctx.now;
        let mut stack = std::mem::take(&mut self.ctx.stack);
        let mut region = std::mem::take(&mut self.ctx.region);
        stack.clear();
        region.clear();
        stack.extend_from_slice(&s.holes);
        let sc = std::mem::take(&mut self.scratch);
        let mut d = std::mem::take(&mut self.det);
        if !std::mem::take(&mut self.det_fresh) {
            d.reset(n);
        }
        while let Some(c) = stack.pop() {
            let ci = c as usize;
            if self.opaque[ci] || self.ctx.stamp[ci] == now {
                continue;
            }
            self.ctx.stamp[ci] = now;
            region.push(c);
            if s.choice[ci] != NONE {
                continue;
            }
            // A determined class is as good as resolved: every completion
            // gives it the same key and holes (see
            // [`Enumerator::determine`]), and what only it reaches is never
            // referenced otherwise.
            if self.use_determined && self.determine(s, &sc, &mut d, c) {
                continue;
            }
            // Options the one-organization rule already rules out are never
            // chosen by a completion: what they reference is not context.
            // (Only `early` compares contexts: a frontier-fixed class has
            // one option there.)
            for j in self.choices(Mode::Early, c) {
                if self.allowed(s, c, j) {
                    stack.extend(
                        self.kids[ci][j]
                            .iter()
                            .copied()
                            .filter(|k| self.ctx.stamp[*k as usize] != now),
                    );
                }
            }
        }
        region.sort_unstable();
        // The context as explicit entries, for [`Enumerator::covers`]: per
        // class of the region in order, one word (see [`entry`]) and, for
        // a resolved class that reaches holes, the hole words.
        let entries = &mut self.ctx.entries;
        entries.clear();
        for &c in &region {
            let ci = c as usize;
            if s.choice[ci] == NONE && d.mark[ci] == 3 {
                let r = d.of(ci);
                push_keyed(entries, c, r.key, &r.reach);
            } else if s.choice[ci] == NONE {
                // The organization chosen for its value matters only where
                // the value has several.
                let v = self.value[ci] as usize;
                let p = if self.several_orgs[v] {
                    s.produced[v]
                } else {
                    0
                };
                entries.push(entry(c, OPEN, p));
            } else {
                push_keyed(entries, c, sc.memo[ci], sc.hreach(ci));
            }
        }
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        entries.hash(&mut hasher);
        self.ctx.stack = stack;
        self.ctx.region = region;
        self.scratch = sc;
        self.det = d;
        hasher.finish()
    }

    /// Whether every completion of the partial program `b` (the state whose
    /// canonical form and context were computed last, its context entries
    /// in `self.ctx.entries`) has an equivalent completion of an earlier
    /// partial program with the same canonical form and the context `a`
    /// (`S ≈p T` relaxed to inclusion: exploring `a` covers `b`).
    ///
    /// Both have the same holes. Given a completion of `b`, complete `a` the
    /// same way on the classes open in both, and where `a` has a class open
    /// that `b` resolved, choose what `b` chose (down `b`'s choices, until
    /// a class `a` resolved the same way). That completion has the same
    /// canonical form, reaches the same holes from each class (so it is
    /// acyclic) and keeps one organization per value, when:
    /// - every class open in `b`'s region is open in `a`'s, with the same
    ///   organization for its value or none chosen yet in `a`;
    /// - every class resolved in `b`'s region is resolved in `a`'s with the
    ///   same key and holes, or open in `a` with an organization `b`'s
    ///   choice agrees with;
    /// - every class only in `a`'s region that `b` resolved is, if open in
    ///   `a`, one whose organization agrees with `b`'s, and if resolved in
    ///   `a`, resolved to the same key and holes.
    ///
    /// Classes of `a`'s region that `b`'s program does not reach are never
    /// chosen by that completion.
    fn covers(&self, a: &[u64], b: &State) -> bool {
        let e = &self.ctx.entries;
        let sc = &self.scratch;
        let hw = sc.hwords;
        let len = |w: u64| if tag(w) == REACHES { 1 + hw } else { 1 };
        let agrees = |c: usize, p: u32| self.agrees(b, c, p);
        let none = [0u64; 4];
        let (mut i, mut k) = (0, 0);
        loop {
            let ca = a.get(i).map(|w| w >> 34);
            let cb = e.get(k).map(|w| w >> 34);
            match (ca, cb) {
                (None, None) => return true,
                (Some(x), Some(y)) if x == y => {
                    let c = x as usize;
                    let (wa, wb) = (a[i], e[k]);
                    let ok = match (tag(wa), tag(wb)) {
                        (OPEN, OPEN) => payload(wa) == u32::MAX || wa == wb,
                        // Where `b` left it open but determined, `a` must be
                        // able to realize it as `b`'s picks do: classes it
                        // resolved below it are not compared otherwise.
                        (OPEN, _) => {
                            agrees(c, payload(wa))
                                && (b.choice[c] != NONE || self.realizable_in(a, b, c as u32))
                        }
                        (_, OPEN) => false,
                        _ => a[i..i + len(wa)] == e[k..k + len(wb)],
                    };
                    if !ok {
                        return false;
                    }
                    i += len(wa);
                    k += len(wb);
                }
                (Some(x), y) if y.is_none_or(|y| x < y) => {
                    let c = x as usize;
                    let wa = a[i];
                    if sc.has(c) {
                        // `b`'s program reaches it: `b` resolved it (a hole
                        // of `b` would be in `b`'s region).
                        let ok = b.choice[c] != NONE
                            && match tag(wa) {
                                OPEN => agrees(c, payload(wa)),
                                t => {
                                    let holes = if t == REACHES {
                                        &a[i + 1..i + 1 + hw]
                                    } else {
                                        &none[..hw.min(4)]
                                    };
                                    payload(wa) == sc.memo[c] && hw <= 4 && sc.hreach(c) == holes
                                }
                            };
                        if !ok {
                            return false;
                        }
                    }
                    i += len(wa);
                }
                _ => return false,
            }
        }
    }

    /// Whether the organization `p` that an earlier context records for the
    /// value of class `c` agrees with `b`'s (`u32::MAX`: none chosen).
    fn agrees(&self, b: &State, c: usize, p: u32) -> bool {
        let v = self.value[c] as usize;
        let q = b.produced[v];
        !self.several_orgs[v] || p == u32::MAX || q == u32::MAX || p == q
    }

    /// For [`Enumerator::covers`]: whether the earlier context `a`, where
    /// the class `c` is open, lets a completion realize `c` as the state `b`
    /// (the one whose determined classes are in `self.det`) would with its
    /// picks: every open class those picks reach is open in `a` with an
    /// organization that agrees, or resolved in `a` to the key and holes it
    /// has in `b`.
    fn realizable_in(&self, a: &[u64], b: &State, c: u32) -> bool {
        let d = &self.det;
        let hw = self.scratch.hwords;
        // Where each class's entry starts (entries are sorted by class).
        let mut starts: Vec<(u32, usize)> = Vec::with_capacity(a.len());
        let mut i = 0;
        while i < a.len() {
            starts.push(((a[i] >> 34) as u32, i));
            i += if tag(a[i]) == REACHES { 1 + hw } else { 1 };
        }
        let at = |x: u32| {
            starts
                .binary_search_by_key(&x, |e| e.0)
                .ok()
                .map(|k| starts[k].1)
        };
        let mut stack = vec![c];
        let mut seen: FxHashSet<u32> = FxHashSet::default();
        while let Some(x) = stack.pop() {
            let xi = x as usize;
            // (Fixed classes proper have one realization whatever the
            // context, and are not in it.)
            if b.choice[xi] != NONE || self.opaque[xi] || !seen.insert(x) {
                continue;
            }
            if x != c && self.scratch.has(xi) {
                // A hole of `b` below `c` (and of `a`, which has the same
                // canonical form): open in both, completed the same way.
                // (`c` itself may be a hole too: its picks are walked.)
                match at(x) {
                    Some(ia) if tag(a[ia]) == OPEN && self.agrees(b, xi, payload(a[ia])) => {
                        continue
                    }
                    _ => return false,
                }
            }
            if d.mark.get(xi) != Some(&3) {
                return false;
            }
            let Some(ia) = at(x) else {
                return false;
            };
            let wa = a[ia];
            if tag(wa) == OPEN {
                if !self.agrees(b, xi, payload(wa)) {
                    return false;
                }
                stack.extend_from_slice(&self.kids[xi][d.pick(xi)]);
            } else {
                // The same entry as a resolved class with its key and holes.
                let r = d.of(xi);
                let mut mine = Vec::with_capacity(1 + hw);
                push_keyed(&mut mine, x, r.key, &r.reach);
                // (An entry without holes is one word: it may end `a`.)
                // (An entry without holes is one word: it may end `a`.)
                if a.get(ia..ia + mine.len()) != Some(&mine[..]) {
                    return false;
                }
            }
        }
        true
    }

    /// Whether a pointwise region with these inputs reads one value in two
    /// ways (say a stored buffer and the same value computed in the tile,
    /// or two buffers of it): its kernel would do that work twice. Holes
    /// are not counted (a region only gains inputs as they are resolved,
    /// so the check is monotone).
    fn reads_twice(&self, inputs: &[u32], vals: &mut Vec<u32>) -> bool {
        vals.clear();
        vals.extend(
            inputs
                .iter()
                .map(|k| self.key_value.get(*k as usize).copied().unwrap_or(u32::MAX))
                .filter(|v| *v != u32::MAX),
        );
        vals.sort_unstable();
        vals.windows(2).any(|w| w[0] == w[1])
    }

    /// The options of class `c` the enumeration tries: a fixed class has
    /// one under `early`.
    fn choices(&self, mode: Mode, c: u32) -> std::ops::Range<usize> {
        match (mode, self.fixed[c as usize]) {
            (Mode::Early, Some(j)) => j as usize..j as usize + 1,
            _ => 0..self.options[c as usize].len(),
        }
    }

    /// Whether the one-organization rule lets class `c` choose its option
    /// `j` (once a value's organization is chosen it never changes).
    fn allowed(&self, s: &State, c: u32, j: usize) -> bool {
        match self.kind[c as usize][j].org() {
            Some(l) => {
                let p = s.produced[self.value[c as usize] as usize];
                p == u32::MAX || p == l
            }
            None => true,
        }
    }

    /// Whether a complete program builds a tuple field that nothing reads:
    /// a fused reduction that also computes a value the program gets some
    /// other way (or not at all). The same program without that field does
    /// strictly less work, so such programs are not candidates.
    ///
    /// Fields are live per canonical key, not per e-class: a program that
    /// reads one field of a fused reduction under one parallel state and
    /// the other field under another computes the same as one that reads
    /// both under one state, and is the same class. So the rule depends only
    /// on the canonical form (the keys [`Enumerator::canon_parts`] left in
    /// the scratch buffers for `s`), like the other rules of the space.
    fn dead_field(&self, s: &State) -> bool {
        let sc = &self.scratch;
        let mut reach: Vec<u32> = Vec::new();
        let mut seen: FxHashSet<u32> = FxHashSet::default();
        let mut stack: Vec<u32> = self.roots.clone();
        while let Some(c) = stack.pop() {
            if !seen.insert(c) {
                continue;
            }
            reach.push(c);
            let j = s.choice[c as usize];
            if j != NONE {
                stack.extend(self.kids[c as usize][j as usize].iter().copied());
            }
        }
        if reach.iter().all(|c| self.arity[*c as usize] == 0) {
            return false;
        }
        let all = |c: u32| self.all_fields(c);
        let key = |c: u32| sc.memo[c as usize];
        let mut live: FxHashMap<u32, u64> = FxHashMap::default();
        for r in &self.roots {
            *live.entry(key(*r)).or_insert(0) |= all(*r);
        }
        // Live fields only grow: propagate to a fixed point.
        let mut changed = true;
        while changed {
            changed = false;
            for &c in &reach {
                let j = s.choice[c as usize];
                if j == NONE {
                    continue;
                }
                let here = live.get(&key(c)).copied().unwrap_or(0);
                let use_ = self.fields[c as usize][j as usize];
                for k in &self.kids[c as usize][j as usize] {
                    if self.arity[*k as usize] == 0 {
                        continue;
                    }
                    let add = self.fields_read(use_, here, *k);
                    let e = live.entry(key(*k)).or_insert(0);
                    if *e | add != *e {
                        *e |= add;
                        changed = true;
                    }
                }
            }
        }
        // (Fields are bits of a word: a tuple of 64 fields or more is not
        // checked.)
        reach.iter().any(|&c| {
            let j = s.choice[c as usize];
            j != NONE
                && self.fields[c as usize][j as usize] == FieldUse::Construct
                && (1..64).contains(&self.arity[c as usize])
                && live.get(&key(c)).copied().unwrap_or(0) != all(c)
        })
    }

    /// Whether every completion of the partial program `s` builds a tuple
    /// field that nothing reads (see [`Enumerator::dead_field`]; the scratch
    /// buffers hold `s`'s canonical form). Field liveness is bounded from
    /// above: per final key (of a class that reaches no hole) and per value
    /// (for classes whose key may still change, and classes completions may
    /// yet choose), where the e-nodes completions may choose (every allowed
    /// option of an open class reachable from the holes) read every field
    /// they could. A tuple with a field outside the bound of its key (of
    /// its value, while its key may change) stays dead in every
    /// completion.
    fn dead_field_partial(&mut self, s: &State) -> bool {
        let mut live = std::mem::take(&mut self.live);
        let mut valall = std::mem::take(&mut self.valall);
        let dead = self.dead_field_bound(s, &mut live, &mut valall);
        self.live = live;
        self.valall = valall;
        dead
    }

    /// [`Enumerator::dead_field_partial`] with its buffers.
    fn dead_field_bound(
        &self,
        s: &State,
        live: &mut FxHashMap<u64, u64>,
        valall: &mut FxHashMap<u32, u64>,
    ) -> bool {
        let sc = &self.scratch;
        let final_key = |c: usize| sc.has(c) && sc.hreach(c).iter().all(|w| *w == 0);
        let construct = |c: u32| {
            let ci = c as usize;
            self.fields[ci][s.choice[ci] as usize] == FieldUse::Construct
                && (1..64).contains(&self.arity[ci])
        };
        if !sc.tuples.iter().any(|c| construct(*c)) {
            return false;
        }
        let all = |c: u32| self.all_fields(c);
        const VAL: u64 = 1 << 32;
        let val = |c: u32| VAL | u64::from(self.kvalue[c as usize]);
        let slot = |c: u32| -> u64 {
            let ci = c as usize;
            if s.choice[ci] != NONE && final_key(ci) {
                u64::from(sc.memo[ci])
            } else {
                val(c)
            }
        };
        live.clear();
        for r in &self.roots {
            *live.entry(slot(*r)).or_insert(0) |= all(*r);
        }
        // What completions may choose: e-nodes of classes reachable from
        // the holes, reading every field they could.
        for h in &s.holes {
            for &(k, bits) in &self.treaders[*h as usize] {
                *live.entry(slot(k)).or_insert(0) |= bits;
            }
        }
        let get = |live: &FxHashMap<u64, u64>, k: u64| live.get(&k).copied().unwrap_or(0);
        // Live fields only grow: propagate to a fixed point. A class whose
        // key may still change reads as much as any key of its value.
        let mut changed = true;
        while changed {
            changed = false;
            valall.clear();
            for &c in &sc.tuples {
                if self.arity[c as usize] > 0 {
                    let here = get(live, slot(c)) | get(live, val(c));
                    *valall.entry(self.kvalue[c as usize]).or_insert(0) |= here;
                }
            }
            for &c in &sc.tuples {
                let ci = c as usize;
                let j = s.choice[ci] as usize;
                let here = if self.arity[ci] == 0 {
                    0
                } else if slot(c) & VAL == 0 {
                    get(live, slot(c)) | get(live, val(c))
                } else {
                    valall.get(&self.kvalue[ci]).copied().unwrap_or(0) | get(live, val(c))
                };
                for &k in &self.kids[ci][j] {
                    if self.arity[k as usize] == 0 {
                        continue;
                    }
                    let add = self.fields_read(self.fields[ci][j], here, k);
                    let e = live.entry(slot(k)).or_insert(0);
                    if *e | add != *e {
                        *e |= add;
                        changed = true;
                    }
                }
            }
        }
        // (A tuple whose key may still change is bounded by its value.)
        sc.tuples.iter().any(|&c| {
            construct(c) && {
                let bound = if slot(c) & VAL == 0 {
                    get(live, slot(c))
                } else {
                    valall.get(&self.kvalue[c as usize]).copied().unwrap_or(0)
                };
                (bound | get(live, val(c))) != all(c)
            }
        })
    }

    /// The key of option `j` of class `c`, given each operand's key and,
    /// where a pointwise region ends at the operand, the region's inputs
    /// (`kid`). The one place the canonical form is defined node by node:
    /// a view is its operand; a pointwise op is its value's label over the
    /// set of its region's inputs (left in `inputs`); a materialization or
    /// another op is its label over its operands' keys, and an op whose
    /// kernel writes its result to memory is keyed as materialized.
    fn node_key<'r>(
        &mut self,
        c: usize,
        j: usize,
        kid: impl Fn(u32) -> (u32, Option<&'r [u32]>),
        inputs: &mut Vec<u32>,
    ) -> u32 {
        self.node_key_parts(c, j, kid, inputs).0
    }

    /// Whether option `j` of class `c` needs work beyond loads and
    /// pointwise ops, given whether each operand does (`work`).
    fn needs_work(&self, c: usize, j: usize, work: impl Fn(u32) -> bool) -> bool {
        let kids = &self.kids[c][j];
        !self.leaf[c][j]
            && match self.kind[c][j] {
                Kind::View => work(kids[0]),
                Kind::Pointwise(_) => kids.iter().any(|x| work(*x)),
                Kind::Materialize(_) => false,
                // An op whose kernel writes its result to memory is a load
                // for its readers, like a materialization.
                Kind::Op(_) | Kind::Loop(_) => self.stores[c][j].is_none(),
            }
    }

    /// [`Enumerator::node_key`], and the key before a kernel's store wraps
    /// it (the same where nothing is stored).
    fn node_key_parts<'r>(
        &mut self,
        c: usize,
        j: usize,
        kid: impl Fn(u32) -> (u32, Option<&'r [u32]>),
        inputs: &mut Vec<u32>,
    ) -> (u32, u32) {
        inputs.clear();
        let kids = &self.kids[c][j];
        let k = match self.kind[c][j] {
            Kind::View => {
                let k = kid(kids[0]).0;
                return (k, k);
            }
            Kind::Loop(_) => kid(kids[0]).0,
            Kind::Pointwise(label) => {
                for x in kids {
                    match kid(*x) {
                        (_, Some(r)) => inputs.extend_from_slice(r),
                        (k, None) => inputs.push(k),
                    }
                }
                inputs.sort_unstable();
                inputs.dedup();
                self.intern_at(2 * (self.opt_base[c] + j), label, inputs)
            }
            Kind::Materialize(label) | Kind::Op(label) => {
                inputs.extend(kids.iter().map(|x| kid(*x).0));
                self.intern_at(2 * (self.opt_base[c] + j), label, inputs)
            }
        };
        match self.stores[c][j] {
            // Written to memory by its kernel: keyed like the same op
            // computed in tiles and combined into a whole buffer (the grid
            // is a schedule parameter).
            Some(m) => (self.intern_at(2 * (self.opt_base[c] + j) + 1, m, &[k]), k),
            None => (k, k),
        }
    }

    /// [`Enumerator::intern`] through a one-entry cache per call site
    /// (`slot`): a node is usually keyed over the same operand keys as in
    /// the partial program before.
    fn intern_at(&mut self, slot: usize, label: u32, kids: &[u32]) -> u32 {
        let (k, last) = &self.icache[slot];
        if *k != u32::MAX && last.first() == Some(&label) && last[1..] == *kids {
            return *k;
        }
        let k = self.intern(label, kids);
        let e = &mut self.icache[slot];
        e.0 = k;
        e.1.clear();
        e.1.push(label);
        e.1.extend_from_slice(kids);
        k
    }

    fn intern(&mut self, label: u32, kids: &[u32]) -> u32 {
        self.ibuf.clear();
        self.ibuf.push(label);
        self.ibuf.extend_from_slice(kids);
        if let Some(k) = self.interner.get(self.ibuf.as_slice()) {
            return *k;
        }
        let k = match &self.shared_keys {
            None => self.interner.len() as u32,
            Some(m) => {
                let mut m = m.lock().unwrap_or_else(|e| e.into_inner());
                let n = m.len() as u32;
                *m.entry(self.ibuf.clone()).or_insert(n)
            }
        };
        self.interner.insert(self.ibuf.clone(), k);
        k
    }

    /// The canonical form of a (partial) program: a number that is equal for
    /// two programs exactly when their canonical forms are equal. The key of
    /// every class reached from the roots and the holes (bitsets over
    /// `s.holes`) each reaches through chosen e-nodes are left in the
    /// scratch buffers for [`Enumerator::context`]. It also checks one rule
    /// of the candidate space: a program does not materialize (combine into
    /// a whole buffer) a value whose computation is only loads and pointwise
    /// work over parameters, constants and other materialized values, unless
    /// it is a result (its key is a result's key: the rule depends only on
    /// the canonical form, not on which e-class materializes). Such a kernel
    /// only moves data that every reader could compute from the same loads;
    /// it is what fusion removes. The check is monotone (a hole counts as
    /// work, and it waits until no result reaches a hole), so partial
    /// programs that fail it are dropped at once.
    fn canon_parts(&mut self, s: &State) -> Canon {
        // Per-class results live in the scratch buffers, valid where their
        // stamp is this call's: the key of each class reached, the holes it
        // reaches, whether it needs work, and for classes computed by a
        // pointwise region, the region's inputs (sorted keys).
        self.det_fresh = false;
        let mut sc = std::mem::take(&mut self.scratch);
        sc.start(self.ids.len(), s.holes.len().div_ceil(64).max(1));
        let hw = sc.hwords;
        let mut sorted_holes = std::mem::take(&mut sc.holes);
        sorted_holes.clear();
        sorted_holes.extend_from_slice(&s.holes);
        sorted_holes.sort_unstable();
        let mut invalid = false;
        let mut inputs = std::mem::take(&mut sc.inputs);
        let mut stack = std::mem::take(&mut sc.stack);
        stack.clear();
        stack.extend(self.roots.iter().rev().map(|r| (*r, false)));
        while let Some((c, done)) = stack.pop() {
            let ci = c as usize;
            if sc.has(ci) {
                continue;
            }
            let j = s.choice[ci];
            if j == NONE {
                let k = self.hole_key[ci];
                sc.set(ci, k, true, u32::MAX);
                sc.hreach[ci * hw..(ci + 1) * hw].fill(0);
                if let Ok(i) = sorted_holes.binary_search(&c) {
                    sc.hreach[ci * hw + i / 64] |= 1 << (i % 64);
                }
                continue;
            }
            let ji = j as usize;
            if !done {
                stack.push((c, true));
                for k in self.kids[ci][ji].iter().rev() {
                    if !sc.has(*k as usize) {
                        stack.push((*k, false));
                    }
                }
                continue;
            }
            let kids = &self.kids[ci][ji];
            sc.hreach[ci * hw..(ci + 1) * hw].fill(0);
            for x in kids {
                let x = *x as usize;
                for w in 0..hw {
                    sc.hreach[ci * hw + w] |= sc.hreach[x * hw + w];
                }
            }
            let w = self.needs_work(ci, ji, |x| sc.work[x as usize]);
            let (k, inner) =
                self.node_key_parts(ci, ji, |x| sc.key_region(x as usize), &mut inputs);
            // The value a key computes, for keys that reach no hole (a key
            // with holes may still change shape: a hole resolved as a
            // pointwise op merges into the region reading it).
            if sc.hreach(ci).iter().all(|w| *w == 0) {
                if self.key_value.len() <= k as usize {
                    self.key_value.resize(k as usize + 1, u32::MAX);
                }
                self.key_value[k as usize] = self.kvalue[ci];
            }
            match self.kind[ci][ji] {
                Kind::Pointwise(_) => {
                    invalid |= self.reads_twice(&inputs, &mut sc.vals);
                    // A hole read by a region may yet merge into it (if it
                    // is resolved as a pointwise op): not a use yet.
                    let holes = &self.hole_of_key;
                    sc.used
                        .extend(inputs.iter().filter(|k| !holes.contains(*k)));
                }
                Kind::Materialize(_) => {
                    if sc.work[self.kids[ci][ji][0] as usize] {
                        sc.stored.push(inputs[0]);
                    } else {
                        // Materializes a value without work: only a result
                        // may (checked below, by key). A key names one
                        // value, so a materialization of a value that no
                        // result has never becomes a result's: invalid now
                        // (the rest of the check waits for the results).
                        let v = self.kvalue[ci];
                        invalid |= !self.roots.iter().any(|r| self.kvalue[*r as usize] == v);
                        sc.pure.push(k);
                    }
                }
                Kind::Op(_) => sc.used.extend_from_slice(&inputs),
                Kind::View | Kind::Loop(_) => {}
            }
            if self.stores[ci][ji].is_some() {
                sc.stored.push(inner);
            }
            let region = match self.kind[ci][ji] {
                Kind::View => sc.region[self.kids[ci][ji][0] as usize],
                Kind::Loop(_) if self.stores[ci][ji].is_none() => {
                    sc.region[self.kids[ci][ji][0] as usize]
                }
                Kind::Pointwise(_) => {
                    let a = sc.region_keys.len() as u32;
                    sc.region_keys.extend_from_slice(&inputs);
                    sc.regions.push((a, sc.region_keys.len() as u32));
                    sc.regions.len() as u32 - 1
                }
                Kind::Materialize(_) | Kind::Op(_) | Kind::Loop(_) => u32::MAX,
            };
            if self.arity[ci] > 0
                || self.kids[ci][ji]
                    .iter()
                    .any(|x| self.arity[*x as usize] > 0)
            {
                sc.tuples.push(c);
            }
            sc.set(ci, k, w, region);
        }
        // A result computed whole by a pointwise op is stored like one
        // computed in tiles and combined.
        let mut roots = std::mem::take(&mut sc.roots);
        roots.clear();
        for i in 0..self.roots.len() {
            let ri = self.roots[i] as usize;
            let k = sc.memo[ri];
            let j = s.choice[ri];
            // (By the region the result ends, whatever e-node ends it: a
            // view of a region is the region.)
            let k = if j != NONE && sc.region[ri] != u32::MAX {
                // Stored like a materialization of the region, for the rule
                // below too.
                if sc.work[ri] {
                    sc.stored.push(k);
                }
                self.intern(self.root_store[ri], &[k])
            } else {
                k
            };
            roots.push(k);
        }
        let key = self.intern(ROOTS, &roots);
        // A materialization of a value without work is a result's (by key,
        // so that the rule depends only on the canonical form). While a
        // result still reaches holes its key may yet become one of these,
        // so the check waits (it stays monotone).
        let settled = self
            .roots
            .iter()
            .all(|r| sc.hreach(*r as usize).iter().all(|w| *w == 0));
        if settled {
            invalid |= sc.pure.iter().any(|k| {
                !roots.contains(k) && !self.roots.iter().any(|r| sc.memo[*r as usize] == *k)
            });
        }
        // A value computed with work and stored is not computed again in
        // another kernel: that kernel could load it instead (kernels write
        // one buffer each, so a reader computing it is a second kernel).
        sc.stored.sort_unstable();
        sc.stored.dedup();
        invalid |= sc.used.iter().any(|k| sc.stored.binary_search(k).is_ok());
        sc.holes = sorted_holes;
        sc.inputs = inputs;
        sc.stack = stack;
        sc.roots = roots;
        self.scratch = sc;
        Canon { key, invalid }
    }

    /// Whether choosing e-node `j` for class `c` closes a cycle through the
    /// chosen e-nodes.
    fn cycles(&self, s: &State, c: u32, j: usize) -> bool {
        // (Per-thread buffers: a class is seen when its stamp is the
        // call's.)
        thread_local! {
            static WALK: std::cell::RefCell<(Vec<u32>, u32, Vec<u32>)> =
                const { std::cell::RefCell::new((Vec::new(), 0, Vec::new())) };
        }
        WALK.with(|w| {
            let (seen, now, stack) = &mut *w.borrow_mut();
            let n = self.ids.len();
            if seen.len() != n || *now == u32::MAX {
                *seen = vec![0; n];
                *now = 0;
            }
            *now += 1;
            stack.clear();
            stack.extend_from_slice(&self.kids[c as usize][j]);
            while let Some(x) = stack.pop() {
                if x == c {
                    return true;
                }
                let xi = x as usize;
                if seen[xi] == *now {
                    continue;
                }
                seen[xi] = *now;
                let jx = s.choice[xi];
                if jx != NONE {
                    stack.extend_from_slice(&self.kids[xi][jx as usize]);
                }
            }
            false
        })
    }

    /// Whether class `c` may choose its option `j` in `s`: the choice
    /// closes no cycle, and the one-organization rule allows it (a value
    /// that several parallel states of the program need is computed the
    /// same way in each; recomputing it is fine, computing it differently
    /// is not).
    fn admissible(&self, s: &State, c: u32, j: usize) -> bool {
        self.allowed(s, c, j) && !self.cycles(s, c, j)
    }

    /// Choose option `j` for the hole `c` (removed from `s.holes` already):
    /// its unresolved operands become holes.
    fn settle(&self, s: &mut State, c: u32, j: usize) {
        let ci = c as usize;
        s.choice[ci] = j as u16;
        if let Some(l) = self.kind[ci][j].org() {
            s.produced[self.value[ci] as usize] = l;
        }
        // New holes go on the list last operand first, so that among holes
        // with as many options the first operand is resolved first.
        let first = s.holes.len();
        for &k in &self.kids[ci][j] {
            if s.choice[k as usize] == NONE && !s.holes.contains(&k) {
                s.holes.push(k);
            }
        }
        s.holes[first..].reverse();
    }

    /// Resolve every hole of `s` with one option (and the holes that
    /// makes), counting each as an expanded partial program. False when one
    /// of them cannot be resolved (a cycle or a second organization): then
    /// no completion of `s` is a candidate.
    fn force(&self, mode: Mode, s: &mut State, expanded: &mut usize) -> bool {
        while let Some(pos) = s
            .holes
            .iter()
            .rposition(|h| self.choices(mode, *h).len() == 1)
        {
            let h = s.holes.remove(pos);
            let j = self.choices(mode, h).start;
            *expanded += 1;
            if !self.admissible(s, h, j) {
                return false;
            }
            self.settle(s, h, j);
        }
        true
    }

    /// Whether the open class `c` of `s` is *determined*: every way a
    /// completion of `s` can realize it gives it the same [`Realization`]
    /// (key, region inputs, need for work, reached holes and the
    /// organizations it fixes, of values that have several and none chosen
    /// yet). Checked option by option, over the options `early` tries that
    /// the one-organization rule allows: each operand must be resolved or a
    /// hole of `s` (its key is in the scratch buffers of the last
    /// [`Enumerator::canon_parts`] of `s`; a hole is keyed by itself, and
    /// every completion resolves it one way whatever reads it) or open and
    /// determined itself, and all options must agree. (An option of a hole
    /// that reaches the hole itself is skipped: it closes a cycle.) An option that leads back to a class
    /// being checked is skipped (no acyclic completion realizes it while
    /// that class reaches it); a result that relied on skipping one for a
    /// class above is not kept (it holds only below that class). Options
    /// whose realizations fix two organizations of one value are skipped
    /// too (never a candidate). Results go to `d`; the work per state is
    /// bounded (past it, classes are not determined).
    fn determine(&mut self, s: &State, sc: &Scratch, d: &mut Determined, c: u32) -> bool {
        self.determine_at(s, sc, d, c, 0).is_some()
    }

    /// [`Enumerator::determine`] for a class `depth` calls deep: `None`
    /// when not determined; otherwise the least depth of a class being
    /// visited that an option of it or of a class it reads was skipped for
    /// (a completion choosing that option would close a cycle through that
    /// class), or `u32::MAX`. A result that depends on a class being visited
    /// above it holds only below that class and is not kept.
    fn determine_at(
        &mut self,
        s: &State,
        sc: &Scratch,
        d: &mut Determined,
        c: u32,
        depth: u32,
    ) -> Option<u32> {
        let ci = c as usize;
        match d.mark[ci] {
            2 => return None,
            3 => return Some(u32::MAX),
            _ => {}
        }
        d.budget = d.budget.checked_sub(1)?;
        let v = self.value[ci] as usize;
        // Two options whose keys start with different labels never agree
        // (a shortcut: it misses a class that only skipping an option on a
        // cycle would make determined).
        let mut head: Option<u32> = None;
        for j in self.choices(Mode::Early, c) {
            let l = match self.kind[ci][j] {
                Kind::Pointwise(l) | Kind::Op(l) | Kind::Materialize(l) => l,
                Kind::View | Kind::Loop(_) => continue,
            };
            if !self.allowed(s, c, j) {
                continue;
            }
            // (A matmul or reduction its kernel stores is keyed as a
            // materialization, like the op in tiles combined into a
            // buffer: its key starts with the materialization's label.)
            let h = self.stores[ci][j].unwrap_or(l);
            match head {
                None => head = Some(h),
                Some(h0) if h0 == h => {}
                Some(_) => {
                    d.mark[ci] = 2;
                    return None;
                }
            }
        }
        d.mark[ci] = 1;
        d.depth[ci] = depth;
        let mut taint = u32::MAX;
        let hw = sc.hwords;
        let mut found: Option<(Realization, u16)> = None;
        let mut reach = d.spare_words.pop().unwrap_or_default();
        reach.clear();
        reach.resize(hw, 0);
        let mut eff = d.spare_effects.pop().unwrap_or_default();
        let mut inputs = d.spare_keys.pop().unwrap_or_default();
        // (Buffers for the realization found, if one is.)
        let mut spare = (
            d.spare_words.pop().unwrap_or_default(),
            d.spare_effects.pop().unwrap_or_default(),
            d.spare_keys.pop().unwrap_or_default(),
        );
        let mut ok = true;
        'options: for j in self.choices(Mode::Early, c) {
            // Options the one-organization rule rules out are never chosen.
            if !self.allowed(s, c, j) {
                continue;
            }
            for xk in 0..self.kids[ci][j].len() {
                let x = self.kids[ci][j][xk];
                let xi = x as usize;
                if s.choice[xi] == NONE && d.mark[xi] == 1 {
                    // Back to a class being visited: a completion choosing
                    // this option (while that class reaches it) has a cycle.
                    taint = taint.min(d.depth[xi]);
                    continue 'options;
                }
                // (A hole of `s` is keyed like a resolved class: every
                // completion resolves it the same way whatever reads it.)
                let known = if s.choice[xi] == NONE && !sc.has(xi) {
                    match self.determine_at(s, sc, d, x, depth + 1) {
                        Some(t) => {
                            taint = taint.min(t);
                            true
                        }
                        None => false,
                    }
                } else {
                    sc.has(xi)
                };
                if !known {
                    ok = false;
                    break 'options;
                }
            }
            // An operand's key and region inputs, need for work and holes:
            // a determined class's realization, or a resolved class's.
            let open = |xi: usize| s.choice[xi] == NONE && !sc.has(xi);
            let kid = |x: u32| -> (u32, Option<&[u32]>) {
                let xi = x as usize;
                if open(xi) {
                    let r = d.of(xi);
                    (r.key, r.region.as_deref())
                } else {
                    sc.key_region(xi)
                }
            };
            let (k, _) = self.node_key_parts(ci, j, kid, &mut inputs);
            let kids = &self.kids[ci][j];
            let w = self.needs_work(ci, j, |x| {
                let xi = x as usize;
                if open(xi) {
                    d.of(xi).work
                } else {
                    sc.work[xi]
                }
            });
            if let Some((r0, _)) = &found {
                if r0.key != k || r0.work != w {
                    ok = false;
                    break;
                }
            }
            let region: Option<&[u32]> = match self.kind[ci][j] {
                Kind::View => kid(kids[0]).1,
                Kind::Loop(_) if self.stores[ci][j].is_none() => kid(kids[0]).1,
                Kind::Pointwise(_) => Some(&inputs[..]),
                _ => None,
            };
            reach.fill(0);
            for &x in kids {
                let xi = x as usize;
                let h = if open(xi) {
                    &d.of(xi).reach[..]
                } else {
                    sc.hreach(xi)
                };
                for (a, b) in reach.iter_mut().zip(h) {
                    *a |= *b;
                }
            }
            // An option of a hole that reaches the hole itself closes a
            // cycle: no completion chooses it.
            if s.choice[ci] == NONE
                && sc.has(ci)
                && reach.iter().zip(sc.hreach(ci)).any(|(a, b)| a & b != 0)
            {
                continue;
            }
            // The organizations the option fixes (of values with several
            // whose organization is still open), its operands' included.
            eff.clear();
            if let Some(l) = self.kind[ci][j].org() {
                if self.several_orgs[v] && s.produced[v] == u32::MAX {
                    eff.push((v as u32, l));
                }
            }
            for &x in kids {
                let xi = x as usize;
                if open(xi) {
                    eff.extend_from_slice(&d.of(xi).effects);
                }
            }
            eff.sort_unstable();
            eff.dedup();
            if eff.windows(2).any(|p| p[0].0 == p[1].0) {
                // Two organizations of one value: never a candidate.
                continue;
            }
            match &found {
                None => {
                    let copy = |mut v: Vec<u32>, from: &[u32]| {
                        v.clear();
                        v.extend_from_slice(from);
                        v
                    };
                    let (mut rr, mut re, rk) = std::mem::take(&mut spare);
                    rr.clear();
                    rr.extend_from_slice(&reach);
                    re.clear();
                    re.extend_from_slice(&eff);
                    let r = Realization {
                        key: k,
                        region: region.map(|x| copy(rk, x)),
                        work: w,
                        reach: rr,
                        effects: re,
                    };
                    found = Some((r, j as u16));
                }
                Some((r0, _)) => {
                    if r0.region.as_deref() != region || r0.reach != reach || r0.effects != eff {
                        ok = false;
                        break;
                    }
                }
            }
        }
        d.spare_words.push(reach);
        d.spare_effects.push(eff);
        d.spare_keys.push(inputs);
        if spare.0.capacity() > 0 {
            d.spare_words.push(spare.0);
        }
        if spare.1.capacity() > 0 {
            d.spare_effects.push(spare.1);
        }
        if spare.2.capacity() > 0 {
            d.spare_keys.push(spare.2);
        }
        let Some(found) = found.filter(|_| ok) else {
            // (Not determined, whatever is above: its options disagree or
            // read a class that is not determined.)
            d.mark[ci] = if taint < depth { 0 } else { 2 };
            return None;
        };
        d.at[ci] = d.found.len() as u32;
        d.found.push(found);
        d.mark[ci] = if taint < depth { 0 } else { 3 };
        Some(if taint < depth { taint } else { u32::MAX })
    }

    /// Resolve the determined holes of `t` (see [`Enumerator::determine`];
    /// the scratch buffers hold `t`'s canonical form) and the determined
    /// classes their picked options reach, with the picked option of each:
    /// the first option that realizes it. A hole is resolved only when its
    /// picks reach resolved classes, other holes (which stay holes) and
    /// classes determined on their own (not only below a class that was
    /// being visited), and they close no cycle: all its picks are made, or
    /// none.
    ///
    /// No class is lost: given any completion of `t`, choose the picked
    /// option for every class of such a hole's picks instead. Each keeps its
    /// key, region inputs, need for work and reached holes (they do not
    /// depend on how it is realized), so every other class keeps its key and
    /// the canonical form does not change (and with it whether the program
    /// is in the candidate space); the picks reach only those classes and
    /// resolved ones, so the program stays complete; it stays acyclic (each
    /// class reaches the same holes as before, and a pick that would close a
    /// cycle through the chosen e-nodes is not made); and the picks fix the
    /// same organizations as the choices they replace. True when it
    /// resolved something.
    fn settle_determined(&mut self, t: &mut State, expanded: &mut usize) -> bool {
        let n = self.ids.len();
        let mut d = std::mem::take(&mut self.det);
        let sc = std::mem::take(&mut self.scratch);
        d.reset(n);
        let holes: Vec<u32> = t
            .holes
            .iter()
            .copied()
            .filter(|h| self.choices(Mode::Early, *h).len() > 1)
            .collect();
        let mut todo: Vec<u32> = Vec::new();
        for h in holes {
            if self.determine(t, &sc, &mut d, h) {
                todo.push(h);
            }
        }
        let mut any = false;
        for h in todo {
            if t.choice[h as usize] != NONE {
                continue;
            }
            // The hole's picks and its open operands' picks, on a copy: all
            // of them, or none if an operand is determined only below a
            // class that was being visited, or if a pick would close a
            // cycle (a pick found through an operand's stored result may
            // lead back).
            let mut u = t.clone();
            let mut n = 0;
            let mut stack = vec![h];
            let mut whole = true;
            while let Some(c) = stack.pop() {
                let ci = c as usize;
                // (Another hole of `t` stays a hole: the picks read it as
                // every completion does.)
                if u.choice[ci] != NONE || (c != h && sc.has(ci)) {
                    continue;
                }
                if d.mark[ci] != 3 {
                    whole = false;
                    break;
                }
                let j = d.pick(ci);
                if self.cycles(&u, c, j) {
                    whole = false;
                    break;
                }
                if let Some(pos) = u.holes.iter().position(|x| *x == c) {
                    u.holes.remove(pos);
                }
                self.settle(&mut u, c, j);
                n += 1;
                stack.extend_from_slice(&self.kids[ci][j]);
            }
            if whole {
                *t = u;
                *expanded += n;
                any = true;
            }
        }
        self.scratch = sc;
        self.det = d;
        // (Nothing changed: what was found about `t` still holds.)
        self.det_fresh = !any;
        any
    }

    /// Record the complete program `t`: a candidate when it is in the
    /// candidate space and of a class not seen yet (or always, under
    /// `none`). True when that reaches the candidate limit.
    fn complete(&mut self, t: &State, mode: Mode, shared: &Shared) -> bool {
        let cn = self.canon_parts(t);
        let key = cn.key;
        let mut record = shared.record(key);
        if record.rejected.contains(&key) {
            return false;
        }
        let fresh = !record.complete.contains(&key);
        if fresh && (cn.invalid || self.dead_field(t)) {
            record.rejected.insert(key);
            return false;
        }
        let mut out = shared.out();
        if out.candidates.len() >= shared.max_candidates {
            // (Another thread reached the limit: this program is left.)
            shared.left.store(true, Ordering::Relaxed);
            return true;
        }
        record.complete.insert(key);
        out.complete_programs += 1;
        if fresh || mode == Mode::None {
            let c = self.chosen(t);
            shared.nodes.fetch_add(c.len(), Ordering::Relaxed);
            out.candidates.push(c);
            out.keys.push(key);
            if out.candidates.len() >= shared.max_candidates {
                out.stopped_by = Some("max-candidates");
                return true;
            }
        }
        false
    }

    /// Whether `early` prunes the partial program `t`: it is outside the
    /// candidate space, or equivalent to (or covered by) one on the record.
    /// Otherwise it goes on the record.
    fn prune(&mut self, t: &State, canon: Option<Canon>, shared: &Shared) -> Verdict {
        // (`canon` is `t`'s canonical form where the scratch buffers hold it
        // already.)
        let cn = match canon {
            Some(cn) => cn,
            None => self.canon_parts(t),
        };
        if cn.invalid || (self.use_dead_fields && self.dead_field_partial(t)) {
            self.det_fresh = false;
            return Verdict::Invalid;
        }
        if self.sketch {
            // (A sketch drops every partial program whose canonical form
            // was kept before, whatever its context, which it never
            // computes: what was found about `t`'s determined classes is
            // not carried to another partial program.)
            self.det_fresh = false;
            return if shared.record(cn.key).forms.insert(cn.key) {
                Verdict::New
            } else {
                Verdict::Seen
            };
        }
        let h = self.context(t);
        let mut guard = shared.record(cn.key);
        let record = &mut *guard;
        if !record.seen.insert((cn.key, h)) {
            return Verdict::Seen;
        }
        // An earlier partial program with the same canonical form whose
        // completions cover this one's (the latest few are checked).
        let earlier = record.contexts.entry(cn.key).or_default();
        if earlier
            .iter()
            .rev()
            .take(self.cover_checks)
            .any(|&(o, l)| self.covers(&record.arena[o..o + l], t))
        {
            return Verdict::Seen;
        }
        // Past a memory budget, new contexts are no longer kept for
        // inclusion checks (equal contexts are still pruned).
        let words = self.ctx.entries.len();
        if shared.arena_words.fetch_add(words, Ordering::Relaxed) < ARENA_WORDS {
            earlier.push((record.arena.len(), words));
            record.arena.extend_from_slice(&self.ctx.entries);
        }
        Verdict::New
    }

    /// Where in `s.holes` the hole [`Enumerator::expand`] resolves next is
    /// (see there; `None` when there are no holes).
    fn next_hole(&self, s: &State) -> Option<usize> {
        let route = |i: &usize| self.route[s.holes[*i] as usize];
        if self.first_opened_first {
            (0..s.holes.len())
                .rev()
                .min_by_key(|i| (!route(i), if route(i) { 0 } else { *i }))
        } else {
            (0..s.holes.len()).rev().min_by_key(|i| !route(i))
        }
    }

    /// Expand the partial program `s`: resolve one hole every way the
    /// rules allow, and return the children to explore (complete ones are
    /// recorded, pruned ones dropped).
    fn expand(&mut self, mode: Mode, mut s: State, shared: &Shared, n: &mut Counts) -> Expansion {
        let mut e = Expansion::default();
        // Resolve a hole that only chooses how a region is written (its
        // options are views and pointwise ops) first, and among those,
        // and then among the others, the one opened last: a region is
        // written down to its inputs before the next real choice, so
        // the classes it reaches are resolved (and the classes that read
        // them determined) when the search branches again. (One-option
        // holes were resolved already.) The order depends only on the
        // state, so pruning stays sound; it changes how many partial
        // programs are expanded, not the classes.
        let Some(pos) = self.next_hole(&s) else {
            return e;
        };
        let h = s.holes.remove(pos);
        n.expanded += 1;
        // A route hole tries its pointwise ops before its views: the
        // region is written where it is read, and its inputs are read
        // through views (which a later, more general partial program
        // cannot cover as often the other way round). Other holes try
        // their e-nodes in order (cheapest-looking first).
        let range = self.choices(mode, h);
        let order: &[u16] = if range.len() == self.options[h as usize].len() {
            &self.order[h as usize]
        } else {
            &[]
        };
        let options: Vec<usize> = if order.is_empty() {
            range.collect()
        } else {
            order.iter().map(|j| *j as usize).collect()
        };
        for (at, &j) in options.iter().enumerate() {
            if !self.admissible(&s, h, j) {
                continue;
            }
            let mut t = s.clone();
            self.settle(&mut t, h, j);
            // Holes with one option never branch: resolve them all now
            // (in any order, the result is the same), and compare the
            // partial program once they are.
            if !self.force(mode, &mut t, &mut n.expanded) {
                continue;
            }
            // The canonical form of `t` when it is known already.
            let mut canon = None;
            if mode == Mode::Early && self.use_determined && !t.holes.is_empty() {
                let cn = self.canon_parts(&t);
                if cn.invalid {
                    continue;
                }
                if !self.settle_determined(&mut t, &mut n.expanded) {
                    canon = Some(cn);
                } else if !self.force(mode, &mut t, &mut n.expanded) {
                    continue;
                }
            }
            if t.holes.is_empty() {
                if self.complete(&t, mode, shared) {
                    // Options of `h` after `j` are left unexplored.
                    e.cut |= at + 1 < options.len();
                    e.stop = true;
                    break;
                }
                continue;
            }
            if mode == Mode::Early {
                match self.prune(&t, canon, shared) {
                    Verdict::Invalid => continue,
                    Verdict::Seen => {
                        n.pruned += 1;
                        continue;
                    }
                    Verdict::New => {}
                }
            }
            e.next.push(t);
        }
        e
    }

    /// The first partial program: the roots are holes (one-option holes
    /// resolved). `None` when no completion is a candidate.
    fn first(&mut self, mode: Mode, n: &mut Counts) -> Option<State> {
        let mut holes: Vec<u32> = Vec::new();
        for r in self.roots.iter().rev() {
            if !holes.contains(r) {
                holes.push(*r);
            }
        }
        let mut first = State {
            choice: vec![NONE; self.ids.len()],
            holes,
            produced: vec![u32::MAX; self.values],
        };
        self.force(mode, &mut first, &mut n.expanded)
            .then_some(first)
    }

    /// A progress line on stderr, about once a second, where asked for.
    fn show_progress(
        &self,
        shown: &mut Instant,
        start: Instant,
        time_limit: f64,
        expanded: usize,
        shared: &Shared,
    ) {
        if let Some(name) = &self.progress {
            if shown.elapsed() >= Duration::from_secs(1) {
                *shown = Instant::now();
                let classes = shared.classes();
                #[allow(clippy::print_stderr)]
                {
                    eprintln!(
                        "compact: @{name}: {expanded} partial programs expanded, {classes} classes, {:.1} s of {:.1} s",
                        start.elapsed().as_secs_f64(),
                        time_limit
                    );
                }
            }
        }
    }

    /// Enumerate candidates: depth first, but the subtrees of the first
    /// real choice (the first partial program with several children) are
    /// explored in turns, one expansion each, so that a limited enumeration
    /// finds candidates of every top-level organization, not only of the
    /// cheapest-looking one. The order changes nothing else.
    pub fn run(
        &mut self,
        mode: Mode,
        max_candidates: usize,
        time_limit: f64,
        max_states: usize,
    ) -> Enumeration {
        self.run_threads(mode, max_candidates, time_limit, max_states, 1)
    }

    /// [`Enumerator::run`] on `threads` threads that share the record of
    /// partial programs and complete classes (one thread: `run`). Each
    /// explores depth first and gives the oldest partial program on its
    /// stack to a thread that has run out of work. Every mode finds the
    /// same classes as with one thread; the order of the candidates (and,
    /// under a limit, which are found) varies from run to run.
    pub fn run_threads(
        &mut self,
        mode: Mode,
        max_candidates: usize,
        time_limit: f64,
        max_states: usize,
        threads: usize,
    ) -> Enumeration {
        let found = Enumeration::default();
        self.run_from(mode, max_candidates, time_limit, max_states, threads, found)
    }

    /// `early` after a sketch of at most `sketch` seconds (none where 0):
    /// a first search that prunes a partial program as soon as one with
    /// the same canonical form was kept, whatever their contexts. That is
    /// not sound (it can miss classes), but it keeps far fewer partial
    /// programs and finds most classes soon: every program it completes is
    /// a candidate like any other. The search of `early` then starts with
    /// the classes the sketch found (it does not emit them again) and, when
    /// it finishes, has found every class: the result is the same set of
    /// classes as without the sketch. The limits hold for both together.
    pub fn run_sketched(
        &mut self,
        mode: Mode,
        max_candidates: usize,
        time_limit: f64,
        max_states: usize,
        threads: usize,
        sketch: f64,
    ) -> Enumeration {
        if sketch <= 0.0 || mode != Mode::Early {
            return self.run_threads(mode, max_candidates, time_limit, max_states, threads);
        }
        let start = Instant::now();
        self.sketch = true;
        let first = self.run_threads(
            mode,
            max_candidates,
            sketch.min(time_limit),
            max_states,
            threads,
        );
        self.sketch = false;
        let (expanded, classes) = (first.expanded_states, first.classes);
        let sketch_time_s = start.elapsed().as_secs_f64();
        let mut out = if first.stopped_by == Some("max-candidates")
            || first.stopped_by == Some("max-states")
        {
            first
        } else {
            let left = (time_limit - sketch_time_s).max(1e-3);
            let mut out = self.run_from(
                mode,
                max_candidates,
                left,
                max_states.saturating_sub(expanded),
                threads,
                first,
            );
            out.expanded_states += expanded;
            out
        };
        out.sketch_expanded = expanded;
        out.sketch_classes = classes;
        out.sketch_time_s = sketch_time_s;
        out
    }

    /// [`Enumerator::run_threads`], starting with the classes of `found`.
    fn run_from(
        &mut self,
        mode: Mode,
        max_candidates: usize,
        time_limit: f64,
        max_states: usize,
        threads: usize,
        found: Enumeration,
    ) -> Enumeration {
        let threads = threads.max(1);
        let start = Instant::now();
        let limit = Duration::from_secs_f64(time_limit);
        let shared = Shared::new(max_candidates, found);
        let mut n = Counts::default();
        // With several threads, keys are numbered by one interner from now
        // on; each thread's own map is a cache of it that starts empty
        // (copying it to every thread took about 0.2 s per copy after a
        // sketch had interned a few million keys).
        let keys = (threads > 1).then(|| {
            let keys = Arc::new(Mutex::new(std::mem::take(&mut self.interner)));
            self.shared_keys = Some(keys.clone());
            keys
        });
        let pool = Pool {
            work: Mutex::new((Vec::new(), 0)),
            idle: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            expanded: AtomicUsize::new(0),
            left: AtomicBool::new(false),
            stopped_by: Mutex::new(None),
        };
        // Up to the first real choice here; its subtrees go to the
        // threads in turn, and each explores its own in turns (as `run`
        // does).
        let mut split: Vec<State> = Vec::new();
        let mut stop = false;
        let mut cut = false;
        // (Partial programs expanded before the split: where the turns
        // start.)
        let mut turn = 0;
        if let Some(first) = self.first(mode, &mut n) {
            let mut s = first;
            loop {
                turn += 1;
                if s.holes.is_empty() {
                    stop = self.complete(&s, mode, &shared);
                    break;
                }
                let why = if n.expanded >= max_states {
                    Some("max-states")
                } else if shared.past(start, limit) {
                    Some("time-limit")
                } else {
                    None
                };
                if let Some(why) = why {
                    *pool.stopped_by.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
                    split = vec![s];
                    stop = true;
                    break;
                }
                let e = self.expand(mode, s, &shared, &mut n);
                cut |= e.cut;
                stop |= e.stop;
                if stop || e.next.len() != 1 {
                    split = e.next;
                    break;
                }
                s = e.next.into_iter().next().unwrap_or_else(|| unreachable!());
            }
        }
        pool.expanded.store(n.expanded, Ordering::Relaxed);
        if stop {
            pool.stop.store(true, Ordering::Relaxed);
            pool.left.store(cut || !split.is_empty(), Ordering::Relaxed);
            split.clear();
        }
        let mut initial: Vec<Vec<Vec<State>>> = vec![Vec::new(); threads];
        for (i, t) in split.into_iter().enumerate() {
            initial[i % threads].push(vec![t]);
        }
        let lim = (start, limit, time_limit, max_states);
        let counts: Vec<Counts> = if keys.is_none() {
            // One thread: this one.
            let stacks = initial.pop().unwrap_or_default();
            vec![self.worker(mode, (stacks, turn), &shared, &pool, 1, lim)]
        } else {
            std::thread::scope(|scope| {
                let workers: Vec<_> = initial
                    .into_iter()
                    .enumerate()
                    .map(|(w, stacks)| {
                        let mut en = self.clone();
                        if w > 0 {
                            en.progress = None;
                        }
                        let (shared, pool) = (&shared, &pool);
                        scope
                            .spawn(move || en.worker(mode, (stacks, 0), shared, pool, threads, lim))
                    })
                    .collect();
                workers
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                    .collect()
            })
        };
        n.expanded = pool.expanded.load(Ordering::Relaxed);
        n.pruned += counts.iter().map(|c| c.pruned).sum::<usize>();
        if let Some(keys) = keys {
            self.shared_keys = None;
            self.interner = std::mem::take(&mut *keys.lock().unwrap_or_else(|e| e.into_inner()));
        }
        let stopped_by = *pool.stopped_by.lock().unwrap_or_else(|e| e.into_inner());
        let left = pool.left.load(Ordering::Relaxed) || !pool.lock().0.is_empty();
        shared.finish(n, stopped_by, left)
    }

    /// One thread of [`Enumerator::run_threads`], starting from its
    /// stacks (explored in turns from the given one, depth first each): its
    /// prunings. `lim` is the start, the time limit (and in seconds) and
    /// the expansion limit.
    fn worker(
        &mut self,
        mode: Mode,
        (mut stacks, mut turn): (Vec<Vec<State>>, usize),
        shared: &Shared,
        pool: &Pool,
        threads: usize,
        lim: (Instant, Duration, f64, usize),
    ) -> Counts {
        let (start, limit, time_limit, max_states) = lim;
        // A thread that panics stops the others (they would wait for it
        // forever); the panic then reaches the caller.
        struct StopOnPanic<'p>(&'p Pool);
        impl Drop for StopOnPanic<'_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.0.stop.store(true, Ordering::Relaxed);
                }
            }
        }
        let _guard = StopOnPanic(pool);
        let mut n = Counts::default();
        let (mut pops, mut counted) = (0usize, 0usize);
        let mut shown = start;
        let stop = |why: &'static str| {
            pool.stop.store(true, Ordering::Relaxed);
            pool.stopped_by
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_or_insert(why);
        };
        loop {
            if pool.stop.load(Ordering::Relaxed) {
                break;
            }
            stacks.retain(|st| !st.is_empty());
            if stacks.is_empty() {
                match pool.take(threads) {
                    Some(s) => stacks.push(vec![s]),
                    None => break,
                }
            }
            let i = turn % stacks.len();
            turn += 1;
            let Some(s) = stacks[i].pop() else {
                continue;
            };
            pops += 1;
            let total = pool
                .expanded
                .fetch_add(n.expanded - counted, Ordering::Relaxed)
                + (n.expanded - counted);
            counted = n.expanded;
            let why = if total >= max_states {
                Some("max-states")
            } else if pops.is_multiple_of(64) && shared.past(start, limit) {
                Some("time-limit")
            } else {
                None
            };
            if let Some(why) = why {
                stacks[i].push(s);
                stop(why);
                break;
            }
            if pops.is_multiple_of(64) {
                self.show_progress(&mut shown, start, time_limit, total, shared);
            }
            let e = self.expand(mode, s, shared, &mut n);
            stacks[i].extend(e.next.into_iter().rev());
            if e.stop {
                if e.cut {
                    pool.left.store(true, Ordering::Relaxed);
                }
                stop("max-candidates");
                break;
            }
            // A thread is out of work: give it the oldest partial program
            // of the largest stack (the largest subtree), keeping one.
            if pool.idle.load(Ordering::Relaxed) > 0 {
                let total: usize = stacks.iter().map(Vec::len).sum();
                if total > 1 {
                    let big = (0..stacks.len())
                        .max_by_key(|k| stacks[*k].len())
                        .unwrap_or(0);
                    let s0 = stacks[big].remove(0);
                    pool.lock().0.push(s0);
                }
            }
        }
        if stacks.iter().any(|st| !st.is_empty()) {
            pool.left.store(true, Ordering::Relaxed);
        }
        pool.expanded
            .fetch_add(n.expanded - counted, Ordering::Relaxed);
        n.expanded = 0;
        n
    }

    fn chosen(&self, s: &State) -> HashMap<Id, SymbolLang> {
        s.choice
            .iter()
            .enumerate()
            .filter(|(_, j)| **j != NONE)
            .map(|(c, j)| (self.ids[c], self.options[c][*j as usize].clone()))
            .collect()
    }

    /// Turn the fixed-class shortcut of `early` off (an ablation, used to
    /// test that it loses no class) or back on.
    pub fn use_fixed_classes(&mut self, on: bool) {
        self.set_fixed(on);
    }

    /// Fixed and frontier-fixed classes on or off.
    fn set_fixed(&mut self, on: bool) {
        let n = self.ids.len();
        if !on {
            self.fixed = vec![None; n];
            self.opaque = vec![false; n];
            return;
        }
        let (fixed, keys) = self.fixed_options();
        self.opaque = fixed.iter().map(Option::is_some).collect();
        let frontier = self.frontier_fixed(&fixed, &keys);
        self.fixed = (0..n).map(|c| fixed[c].or(frontier[c])).collect();
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

    /// Turn pruning by context inclusion ([`Enumerator::covers`]) off (an
    /// ablation, used to test that it loses no class: only partial programs
    /// with equal contexts are pruned then) or back on.
    pub fn use_covering(&mut self, on: bool) {
        self.cover_checks = if on { COVER_CHECKS } else { 0 };
    }

    /// The dense index of an e-class.
    pub fn index_of(&self, id: Id) -> Option<u32> {
        self.index.get(&self.eg.find(id)).copied()
    }
}

/// The size of the search tree `mode=after` (and `mode=none`) explores when
/// it runs to the end, counted without building its complete programs (see
/// [`Enumerator::after_tree`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeCount {
    /// Partial programs expanded: what `expanded_states` reports for a run
    /// that finishes.
    pub expanded: u128,
    /// Complete programs reached, in or out of the candidate space.
    pub complete: u128,
    /// Distinct subtrees counted (the size of the memo).
    pub subtrees: usize,
    /// Whether the whole tree was counted; otherwise a limit stopped the
    /// count and the figures are lower bounds (the subtrees counted so
    /// far).
    pub whole: bool,
}

/// A 128-bit hash of a sequence of words for [`Enumerator::after_tree`]'s
/// memo (two independent multiply-xorshift lanes; SipHash was a sixth of
/// the counting time).
struct Mix128 {
    a: u64,
    b: u64,
}

impl Default for Mix128 {
    fn default() -> Mix128 {
        Mix128 {
            a: 0x243f_6a88_85a3_08d3,
            b: 0x1319_8a2e_0370_7344,
        }
    }
}

impl Mix128 {
    fn mum(x: u64, y: u64) -> u64 {
        let p = u128::from(x) * u128::from(y);
        (p as u64) ^ ((p >> 64) as u64)
    }

    fn word(&mut self, w: u64) {
        self.a = Mix128::mum(self.a ^ w, 0xa076_1d64_78bd_642f);
        self.b = Mix128::mum(self.b ^ w.rotate_left(29), 0xe703_7ed1_a0b4_28db);
    }

    fn finish(&self) -> u128 {
        let a = Mix128::mum(self.a, 0x8ebc_6af0_9c88_c6e3);
        let b = Mix128::mum(self.b, 0x5899_65cc_7537_4cc3);
        u128::from(a) << 64 | u128::from(b)
    }
}

/// The smallest subtree (in partial programs expanded) that
/// [`Enumerator::after_tree`] keeps in its memo.
const TREE_MEMO_MIN: u128 = 8;

/// One partial program of [`Enumerator::after_tree`] whose children are
/// being counted.
struct TreeFrame {
    key: u128,
    expanded: u128,
    complete: u128,
    kids: Vec<State>,
}

/// Buffers of [`Enumerator::tree_key`].
#[derive(Default)]
struct TreeScratch {
    stamp: Vec<u32>,
    now: u32,
    /// Per class, the holes its chosen e-nodes reach (bits over the sorted
    /// holes, `words` words each), valid where `reach_stamp` is `now`.
    reach: Vec<u64>,
    reach_stamp: Vec<u32>,
    words: usize,
    sorted: Vec<u32>,
    stack: Vec<u32>,
    entries: Vec<u64>,
    /// A class's reached holes while they are collected.
    acc: Vec<u64>,
}

impl Enumerator<'_> {
    /// Count the partial programs `mode=after` expands (and the complete
    /// programs it reaches) when it runs to the end, without running it.
    ///
    /// `after` never prunes: the subtree below a partial program depends
    /// only on its holes in their order (which hole is resolved next, which
    /// holes one-option resolution meets first) and on what its
    /// completions can choose and must respect: for every unresolved class
    /// reachable from the holes through the options the one-organization
    /// rule still allows, the organization already chosen for its value
    /// (where it has several), and for every resolved class those options
    /// read, the holes its chosen e-nodes reach (which choices would close
    /// a cycle). Partial programs that agree on these have subtrees of the
    /// same size, so each is counted once (keyed by a 128-bit hash). Test
    /// `after_tree_counts_what_after_expands` compares the count with runs
    /// of `after` that finish.
    ///
    /// Past `max_subtrees` distinct subtrees kept or `time_limit` seconds,
    /// it stops and returns what it counted so far (`whole` false: lower
    /// bounds).
    pub fn after_tree(&mut self, max_subtrees: usize, time_limit: f64) -> TreeCount {
        let limit = Duration::from_secs_f64(time_limit);
        let mut n = Counts::default();
        let Some(first) = self.first(Mode::After, &mut n) else {
            return TreeCount {
                expanded: n.expanded as u128,
                complete: 0,
                subtrees: 0,
                whole: true,
            };
        };
        if first.holes.is_empty() {
            return TreeCount {
                expanded: n.expanded as u128,
                complete: 1,
                subtrees: 0,
                whole: true,
            };
        }
        let mut memo: FxHashMap<u128, (u128, u128)> = FxHashMap::default();
        let mut sc = TreeScratch::default();
        let mut stack: Vec<TreeFrame> = Vec::new();
        let mut shown = Instant::now();
        let start = Instant::now();
        match self.tree_frame(first, &memo, &mut sc) {
            Ok(f) => stack.push(f),
            Err((e, c)) => {
                return TreeCount {
                    expanded: n.expanded as u128 + e,
                    complete: c,
                    subtrees: 0,
                    whole: true,
                }
            }
        }
        loop {
            let Some(top) = stack.last_mut() else {
                unreachable!("the root's total is returned when it is popped")
            };
            if let Some(t) = top.kids.pop() {
                match self.tree_frame(t, &memo, &mut sc) {
                    Ok(f) => stack.push(f),
                    Err((e, c)) => {
                        top.expanded += e;
                        top.complete += c;
                    }
                }
                continue;
            }
            let Some(f) = stack.pop() else { unreachable!() };
            // (Small subtrees are cheaper to count again than to keep.)
            if f.expanded >= TREE_MEMO_MIN {
                memo.insert(f.key, (f.expanded, f.complete));
            }
            if memo.len() > max_subtrees || start.elapsed() > limit {
                // What was counted so far: the subtrees finished below the
                // partial programs still open.
                let (e, c) = stack.iter().fold((f.expanded, f.complete), |(e, c), t| {
                    (e + t.expanded, c + t.complete)
                });
                return TreeCount {
                    expanded: n.expanded as u128 + e,
                    complete: c,
                    subtrees: memo.len(),
                    whole: false,
                };
            }
            if let Some(name) = &self.progress {
                if shown.elapsed() >= Duration::from_secs(1) {
                    shown = Instant::now();
                    #[allow(clippy::print_stderr)]
                    {
                        let so_far: u128 = stack.iter().map(|t| t.expanded).sum();
                        eprintln!(
                            "compact: @{name}: counting the tree of `after`: {} subtrees, {} deep, at least {} expansions, {:.1} s",
                            memo.len(),
                            stack.len(),
                            so_far + f.expanded,
                            start.elapsed().as_secs_f64()
                        );
                    }
                }
            }
            match stack.last_mut() {
                Some(p) => {
                    p.expanded += f.expanded;
                    p.complete += f.complete;
                }
                None => {
                    return TreeCount {
                        expanded: n.expanded as u128 + f.expanded,
                        complete: f.complete,
                        subtrees: memo.len(),
                        whole: true,
                    }
                }
            }
        }
    }

    /// For [`Enumerator::after_tree`]: the partial program `s` (with holes)
    /// counted already (`Err` with its subtree's totals), or a frame with
    /// its own expansion counted and its children to count, as
    /// [`Enumerator::expand`] makes them under `after`.
    fn tree_frame(
        &self,
        mut s: State,
        memo: &FxHashMap<u128, (u128, u128)>,
        sc: &mut TreeScratch,
    ) -> Result<TreeFrame, (u128, u128)> {
        let key = self.tree_key(&s, sc);
        if let Some(&v) = memo.get(&key) {
            return Err(v);
        }
        let Some(pos) = self.next_hole(&s) else {
            unreachable!("a frame has holes")
        };
        let h = s.holes.remove(pos);
        let mut f = TreeFrame {
            key,
            expanded: 1,
            complete: 0,
            kids: Vec::new(),
        };
        for j in self.choices(Mode::After, h) {
            if !self.admissible(&s, h, j) {
                continue;
            }
            let mut t = s.clone();
            self.settle(&mut t, h, j);
            let mut forced = 0;
            let ok = self.force(Mode::After, &mut t, &mut forced);
            f.expanded += forced as u128;
            if !ok {
                continue;
            }
            if t.holes.is_empty() {
                f.complete += 1;
            } else {
                f.kids.push(t);
            }
        }
        Ok(f)
    }

    /// For [`Enumerator::after_tree`]: a 128-bit hash of what the subtree
    /// below `s` depends on (its ordered holes; the unresolved classes
    /// reachable from them through allowed options, with their values'
    /// organizations; the resolved classes those options read, with the
    /// holes they reach).
    fn tree_key(&self, s: &State, sc: &mut TreeScratch) -> u128 {
        let n = self.ids.len();
        if sc.stamp.len() != n || sc.now == u32::MAX {
            sc.stamp = vec![0; n];
            sc.reach_stamp = vec![0; n];
            sc.now = 0;
        }
        sc.now += 1;
        let now = sc.now;
        sc.sorted.clear();
        sc.sorted.extend_from_slice(&s.holes);
        sc.sorted.sort_unstable();
        sc.words = s.holes.len().div_ceil(64).max(1);
        if sc.reach.len() < n * sc.words {
            sc.reach.resize(n * sc.words, 0);
        }
        sc.entries.clear();
        sc.stack.clear();
        sc.stack.extend_from_slice(&s.holes);
        while let Some(c) = sc.stack.pop() {
            let ci = c as usize;
            if sc.stamp[ci] == now {
                continue;
            }
            sc.stamp[ci] = now;
            if s.choice[ci] != NONE {
                // A resolved class an option reads: the holes it reaches.
                self.tree_reach(s, c, sc);
                let w = sc.words;
                sc.entries.push(u64::from(c) << 1 | 1);
                sc.entries
                    .extend_from_slice(&sc.reach[ci * w..(ci + 1) * w]);
                continue;
            }
            let v = self.value[ci] as usize;
            let org = if self.several_orgs[v] {
                s.produced[v]
            } else {
                0
            };
            sc.entries.push(u64::from(c) << 1);
            sc.entries.push(u64::from(org));
            for j in self.choices(Mode::After, c) {
                if self.allowed(s, c, j) {
                    for &k in &self.kids[ci][j] {
                        if sc.stamp[k as usize] != now {
                            sc.stack.push(k);
                        }
                    }
                }
            }
        }
        // Entries in the order of a traversal that depends only on what is
        // hashed: the ordered holes and the e-graph.
        let mut h = Mix128::default();
        h.word(s.holes.len() as u64);
        for &x in &s.holes {
            h.word(u64::from(x));
        }
        for &x in &sc.entries {
            h.word(x);
        }
        h.finish()
    }

    /// The holes the resolved class `c` reaches through chosen e-nodes,
    /// into `sc.reach` (memoized per key computation).
    fn tree_reach(&self, s: &State, c: u32, sc: &mut TreeScratch) {
        let w = sc.words;
        let mut todo: Vec<(u32, bool)> = vec![(c, false)];
        while let Some((x, done)) = todo.pop() {
            let xi = x as usize;
            if sc.reach_stamp[xi] == sc.now {
                continue;
            }
            let j = s.choice[xi] as usize;
            if !done {
                todo.push((x, true));
                for &k in &self.kids[xi][j] {
                    if s.choice[k as usize] != NONE && sc.reach_stamp[k as usize] != sc.now {
                        todo.push((k, false));
                    }
                }
                continue;
            }
            sc.acc.clear();
            sc.acc.resize(w, 0);
            for &k in &self.kids[xi][j] {
                let ki = k as usize;
                if s.choice[ki] == NONE {
                    let i = sc.sorted.binary_search(&k).unwrap_or_else(|_| {
                        unreachable!("an unresolved operand of a resolved class is a hole")
                    });
                    sc.acc[i / 64] |= 1 << (i % 64);
                } else {
                    for (a, r) in sc.acc.iter_mut().zip(&sc.reach[ki * w..(ki + 1) * w]) {
                        *a |= *r;
                    }
                }
            }
            sc.reach[xi * w..(xi + 1) * w].copy_from_slice(&sc.acc);
            sc.reach_stamp[xi] = sc.now;
        }
    }
}

/// A type's tensors without their parallel state, as text.
/// The text of candidate `i` of `g`: the function `@<name>.c<i>` with the
/// e-nodes `chosen`, and its attributes.
fn candidate_text(g: &Graph, chosen: &HashMap<Id, SymbolLang>, i: usize) -> Result<String, String> {
    let body = to_func_text(g, &|c| chosen[&g.egraph.find(c)].clone())?;
    let (kernels, bytes) = summary(&g.egraph, chosen, &g.roots);
    let name = format!("{}.c{i}", g.name);
    let body = body.replacen(&format!("func @{}(", g.name), &format!("func @{name}("), 1);
    let attrs = format!(
        " attributes {{kernels = {kernels}, materialized_bytes = {}, source = @{}}} {{",
        bytes as u64, g.name
    );
    Ok(match body.find(" {\n") {
        Some(i) => format!("{}{}{}", &body[..i], attrs, &body[i + 2..]),
        None => body,
    })
}

/// The module of the candidates: the reducer functions kept (`lambdas`,
/// their text), the candidate functions (`bodies`, in order) and the
/// library functions they use (`library`, their text, and their names),
/// parsed and verified like [`crate::saturate::replace_module`] does,
/// errors reported on `cx`. With `workers` above one, the candidates are
/// split into that many runs, and each is parsed and verified on its own
/// thread with the reducer and library functions it may refer to; the
/// functions are then put together in the same order as from one run.
pub fn parse_candidates(
    lambdas: &str,
    bodies: &[String],
    library: &str,
    library_names: &std::collections::BTreeSet<String>,
    workers: usize,
    cx: &mut PassContext<'_>,
) -> Result<Module, PassFailed> {
    let chunk_text = |run: &[String]| -> String {
        let mut t = lambdas.to_string();
        for b in run {
            if !t.is_empty() {
                t.push('\n');
            }
            t.push_str(b);
        }
        t.push_str(library);
        t
    };
    let workers = workers.clamp(1, bodies.len().max(1));
    let size = bodies.len().div_ceil(workers).max(1);
    let registry = cx.registry;
    let parsed: Vec<(Module, Vec<Diag>)> = if workers == 1 {
        vec![efir_ir::parse_and_verify(&chunk_text(bodies), registry)]
    } else {
        std::thread::scope(|scope| {
            let hs: Vec<_> = bodies
                .chunks(size)
                .map(|run| {
                    let text = chunk_text(run);
                    scope.spawn(move || efir_ir::parse_and_verify(&text, registry))
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        })
    };
    let mut out = Module::default();
    let mut library_funcs = Vec::new();
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    for run in parsed {
        let mut m = Module::default();
        crate::saturate::take_parsed(&mut m, run, "in the candidates", cx)?;
        // Each run's module is the reducer functions, its candidates, then
        // the library functions: each reducer and library function is kept
        // once, the library functions last.
        for f in m.funcs {
            if !seen.insert(f.name.clone()) {
                continue;
            }
            if library_names.contains(&f.name) {
                library_funcs.push(f);
            } else {
                out.funcs.push(f);
            }
        }
    }
    out.funcs.extend(library_funcs);
    Ok(out)
}

fn stateless_type(ty: Option<&efir_ir::Type>) -> String {
    ty.map(|t| {
        t.leaves()
            .iter()
            .map(|l| efir_ir::TensorType::new(l.dtype, l.shape.clone()).to_string())
            .collect::<Vec<_>>()
            .join(",")
    })
    .unwrap_or_default()
}

/// A type's tensors with only the partial axes of their parallel state
/// (which axes hold partial results), as text.
fn partial_type(ty: Option<&efir_ir::Type>) -> String {
    ty.map(|t| {
        t.leaves()
            .iter()
            .map(|l| {
                let partial: Vec<String> = l
                    .state
                    .iter()
                    .filter(|(_, st)| matches!(st, AxisState::Partial(_)))
                    .map(|(x, st)| format!("@{x}: {st}"))
                    .collect();
                format!(
                    "{}[{}]",
                    efir_ir::TensorType::new(l.dtype, l.shape.clone()),
                    partial.join(",")
                )
            })
            .collect::<Vec<_>>()
            .join(",")
    })
    .unwrap_or_default()
}

/// How an e-node reads the fields of its tuple operands.
fn field_use(eg: &EGraph, n: &SymbolLang) -> FieldUse {
    let attrs = node_attrs(eg, n);
    let attr = |k: &str| {
        attrs
            .iter()
            .find(|(a, _)| a == k)
            .map(|(_, v)| v.to_string())
    };
    match n.op.as_str() {
        "tensor.get" => FieldUse::Get(attr("index").and_then(|v| v.parse().ok()).unwrap_or(0)),
        "tensor.tuple" => FieldUse::Construct,
        "par.partition" | "par.replicate" | "par.combine" | "par.collect" => FieldUse::Fieldwise,
        // A product of independent reducers: field i of the state only
        // needs field i of the input. Repaired reducers mix fields.
        "tensor.reduce" | "par.reduce"
            if attr("reducer").is_some_and(|r| r.starts_with("#red.prod")) =>
        {
            FieldUse::Fieldwise
        }
        _ => FieldUse::All,
    }
}

/// How an e-node enters the canonical form: 0 view, 1 pointwise, 2
/// materialize, 3 other op; and its label (without parallel state:
/// partitioned and replicated axes are views whose tile sizes are schedule
/// parameters, a full-extent tile being the unpartitioned form, and partial
/// axes are reduced by loops, one iteration with a full-extent tile, or
/// collected by a `par.collect` that is keyed itself).
fn node_kind(eg: &EGraph, n: &SymbolLang, id: Id, kids: &[u32], ids: &[Id]) -> (u8, String) {
    let op = n.op.as_str();
    let ty = eg[id].data.ty();
    let whole = stateless_type(ty);
    if op == "par.partition" || op == "par.replicate" {
        // A view is transparent: a value read through a partition or a
        // replicate is the same value, whatever the chain.
        return (0, String::new());
    }
    if pointwise(op) {
        // A pointwise region is keyed by the value it computes and its
        // inputs: how the expression is written (operand order, association,
        // where casts and factors sit, where it sits relative to the views)
        // does not matter.
        return (1, format!("pointwise|{whole}"));
    }
    if op == "par.combine" {
        let kid_ty = kids.first().and_then(|k| eg[ids[*k as usize]].data.ty());
        let reduces = match (kid_ty, ty) {
            (Some(a), Some(b)) => a.leaves().iter().zip(b.leaves()).any(|(a, b)| {
                a.state
                    .iter()
                    .any(|(x, st)| matches!(st, AxisState::Partial(_)) && !b.state.contains_key(x))
            }),
            _ => false,
        };
        if !reduces {
            // Assembling tiles: a view, unless it leaves a value without
            // parallel state, which is materialized (a kernel boundary).
            return if stateless(ty) {
                (2, format!("materialize|{whole}"))
            } else {
                (0, String::new())
            };
        }
    }
    let attrs: Vec<String> = node_attrs(eg, n)
        .iter()
        .map(|(a, v)| format!("{a}={v}"))
        .collect();
    (3, format!("{op}|{}|{whole}", attrs.join(",")))
}

/// The least cost of every e-class under `cf` (the values of
/// `egg::Extractor`'s, which re-scans every class until nothing changes, a
/// pass per level of a chain: quadratic on long chains). A class is
/// re-evaluated only when one of its children's cost falls.
fn best_costs(
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

/// Whether a type's tensors have no parallel state.
fn stateless(ty: Option<&efir_ir::Type>) -> bool {
    ty.is_some_and(|t| t.leaves().iter().all(|l| l.state.is_empty()))
}

/// Kernel count and materialized bytes of a candidate, as the lowering
/// plans it (`efir_triton::plan`): every value that lives in global memory,
/// other than a parameter, is written by one kernel. Those are the results,
/// `par.collect` buffers, values without parallel state made by a matmul, a
/// reduction or a combine, and pointwise values without parallel state that
/// a slice or concatenation reads (pointwise values are otherwise
/// recomputed by their readers). Bytes count the buffers that are not
/// results.
pub fn summary(eg: &EGraph, chosen: &HashMap<Id, SymbolLang>, roots: &[Id]) -> (usize, f64) {
    let roots: HashSet<Id> = roots.iter().map(|r| eg.find(*r)).collect();
    let mut sliced: HashSet<Id> = HashSet::new();
    for n in chosen.values() {
        if matches!(n.op.as_str(), "tensor.slice" | "tensor.concat") {
            sliced.extend(node_operands(eg, n).iter().map(|c| eg.find(*c)));
        }
    }
    let mut kernels = 0;
    let mut bytes = 0.0;
    let made = |c: Id, op: &str| {
        roots.contains(&c)
            || op == "par.collect"
            || (stateless(eg[c].data.ty())
                && matches!(
                    op,
                    "tile.matmul"
                        | "tensor.matmul"
                        | "tensor.reduce"
                        | "par.reduce"
                        | "par.combine"
                ))
    };
    let mut stored: HashSet<Id> = chosen
        .iter()
        .filter(|(c, n)| made(eg.find(**c), n.op.as_str()))
        .map(|(c, _)| eg.find(*c))
        .collect();
    // Epilogues fused into their one consumer kernel (as the lowering's
    // `epilogues` does).
    let mut users: HashMap<Id, Vec<Id>> = HashMap::new();
    for (c, n) in chosen {
        for o in node_operands(eg, n) {
            users.entry(eg.find(*o)).or_default().push(eg.find(*c));
        }
    }
    let shape_of = |c: Id| -> Option<Vec<efir_ir::Dim>> {
        let t = eg[c].data.ty()?;
        let ls = t.leaves();
        let s = ls.first()?.shape.clone();
        ls.iter()
            .all(|l| l.shape == s && l.state.is_empty())
            .then_some(s)
    };
    let node_of = |c: Id| {
        chosen.get(&c).or_else(|| {
            chosen
                .iter()
                .find(|(k, _)| eg.find(**k) == c)
                .map(|(_, n)| n)
        })
    };
    let mut fused: Vec<Id> = Vec::new();
    for &v in &stored {
        let Some(n) = node_of(v) else { continue };
        if roots.contains(&v)
            || !matches!(
                n.op.as_str(),
                "par.reduce" | "tensor.reduce" | "tile.matmul" | "tensor.matmul"
            )
        {
            continue;
        }
        let Some(shape) = shape_of(v) else { continue };
        let mut targets: HashSet<Id> = HashSet::new();
        let mut seen: HashSet<Id> = HashSet::new();
        let mut stack = vec![v];
        let mut ok = true;
        'walk: while let Some(x) = stack.pop() {
            if !seen.insert(x) {
                continue;
            }
            for &u in users.get(&x).map(Vec::as_slice).unwrap_or(&[]) {
                let Some(un) = node_of(u) else { continue };
                let op = un.op.as_str();
                if !(op.starts_with("ew.") || op == "tensor.get")
                    || shape_of(u).as_ref() != Some(&shape)
                {
                    ok = false;
                    break 'walk;
                }
                if stored.contains(&u) {
                    targets.insert(u);
                } else {
                    stack.push(u);
                }
            }
        }
        if ok && targets.len() == 1 {
            fused.push(v);
        }
    }
    for v in fused {
        stored.remove(&v);
    }
    for (c, n) in chosen {
        let c = eg.find(*c);
        let op = n.op.as_str();
        if op.starts_with("arg") || matches!(op, "tensor.full" | "tensor.iota") {
            continue;
        }
        let buffer = stored.contains(&c) || (pointwise(op) && sliced.contains(&c));
        if !buffer {
            continue;
        }
        kernels += 1;
        if !roots.contains(&c) {
            if let Some(t) = eg[c].data.ty() {
                bytes += crate::extract::bytes(t);
            }
        }
    }
    (kernels, bytes)
}

impl Pass for Compact {
    fn name(&self) -> &'static str {
        "compact"
    }

    fn run(&mut self, m: &mut Module, cx: &mut PassContext<'_>) -> Result<(), PassFailed> {
        let (text, lambdas) = lambda_text(m, cx.registry);
        // The text of each candidate function, in order.
        let mut bodies: Vec<String> = Vec::new();
        let mut used = std::collections::BTreeSet::new();
        let (mut expanded, mut programs, mut candidates, mut classes, mut pruned) = (0, 0, 0, 0, 0);
        let (mut sketch_expanded, mut sketch_classes, mut sketch_time) = (0, 0, 0.0);
        let mut complete = true;
        // Functions whose candidates come from the whole space instead of
        // the one asked for (warning E0708).
        let mut fallbacks = 0usize;
        let start = Instant::now();
        let sigs = crate::convert::graph_signatures(m);
        for f in m.funcs.iter().filter(|f| !lambdas.contains(&f.name)) {
            // The time limit counts from here: building the e-graph and the
            // enumerator of a long chain took 0.2 s before the enumeration's
            // own clock started (issue 30).
            let f_start = Instant::now();
            let fail = |cx: &mut PassContext<'_>, e: String| crate::saturate::func_failed(cx, f, e);
            let g = graph_in(f, sigs.clone()).map_err(|e| fail(cx, e))?;
            // A restricted space that leaves a result without a program, or
            // whose every program breaks a rule of the candidate space (it
            // is complete and has no candidate), is abandoned for the whole
            // space, with a warning.
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
            let restricted = match Enumerator::new_in(&g, self.space) {
                Ok(en) => Some(en),
                Err(e) => {
                    warn_whole(cx, e);
                    fallbacks += 1;
                    None
                }
            };
            let tried = restricted.is_some() && self.space != Space::WHOLE;
            // Progress on long enumerations, when a person is watching (or
            // EFIR_PROGRESS is set).
            let watched = std::env::var_os("EFIR_PROGRESS").is_some() || {
                use std::io::IsTerminal;
                std::io::stderr().is_terminal()
            };
            let run = |mut en: Enumerator<'_>| {
                if watched {
                    en.progress = Some(f.name.clone());
                }
                let left = (self.time_limit - f_start.elapsed().as_secs_f64()).max(1e-3);
                en.run_sketched(
                    self.mode,
                    self.max_candidates,
                    left,
                    self.max_states,
                    self.threads,
                    self.sketch,
                )
            };
            let mut res = run(restricted.unwrap_or_else(|| Enumerator::new(&g)));
            if tried && res.complete && res.candidates.is_empty() {
                let r = run(Enumerator::new(&g));
                if !r.candidates.is_empty() {
                    warn_whole(
                        cx,
                        format!(
                            "`replicas={},partitions={}` has no candidate (every program of it breaks a rule of the candidate space), the whole space has",
                            self.space.replicas.name(),
                            self.space.partitions.name()
                        ),
                    );
                    fallbacks += 1;
                    res = r;
                }
            }
            sketch_expanded += res.sketch_expanded;
            sketch_classes += res.sketch_classes;
            sketch_time += res.sketch_time_s;
            expanded += res.expanded_states;
            programs += res.complete_programs;
            classes += res.classes;
            pruned += res.pruned;
            candidates += res.candidates.len();
            if let Some(why) = res.stopped_by {
                complete = false;
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
            // The candidates' text, in order, written by the search's
            // threads (each writes every `threads`-th one).
            let n = res.candidates.len();
            let workers = self.threads.clamp(1, n.max(1));
            let write = |w: usize| -> Result<Vec<(usize, String)>, String> {
                (w..n)
                    .step_by(workers)
                    .map(|i| candidate_text(&g, &res.candidates[i], i).map(|t| (i, t)))
                    .collect()
            };
            let parts: Vec<Result<Vec<(usize, String)>, String>> = if workers == 1 {
                vec![write(0)]
            } else {
                std::thread::scope(|scope| {
                    let hs: Vec<_> = (0..workers)
                        .map(|w| scope.spawn(move || write(w)))
                        .collect();
                    hs.into_iter()
                        .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                        .collect()
                })
            };
            let mut texts: Vec<String> = vec![String::new(); n];
            for part in parts {
                for (i, t) in part.map_err(|e| fail(cx, e))? {
                    texts[i] = t;
                }
            }
            bodies.extend(texts);
        }
        let library = library_used(&used, &lambdas);
        let library_names: std::collections::BTreeSet<String> =
            used.difference(&lambdas).cloned().collect();
        // (Below a few hundred candidates, one thread is as fast.)
        let workers = self.threads.min(bodies.len().div_ceil(256));
        *m = parse_candidates(&text, &bodies, &library, &library_names, workers, cx)?;
        cx.stats.insert("mode".into(), json!(self.mode.name()));
        cx.stats
            .insert("replicas".into(), json!(self.space.replicas.name()));
        cx.stats
            .insert("partitions".into(), json!(self.space.partitions.name()));
        cx.stats.insert("space_fallbacks".into(), json!(fallbacks));
        cx.stats.insert("expanded_states".into(), json!(expanded));
        cx.stats.insert("pruned_states".into(), json!(pruned));
        cx.stats.insert("complete_programs".into(), json!(programs));
        cx.stats.insert("candidates".into(), json!(candidates));
        cx.stats.insert("classes".into(), json!(classes));
        cx.stats.insert("complete".into(), json!(complete));
        if self.sketch > 0.0 {
            cx.stats
                .insert("sketch_expanded".into(), json!(sketch_expanded));
            cx.stats
                .insert("sketch_classes".into(), json!(sketch_classes));
            cx.stats.insert("sketch_time_s".into(), json!(sketch_time));
        }
        cx.stats.insert(
            "enumeration_time_s".into(),
            json!(start.elapsed().as_secs_f64()),
        );
        Ok(())
    }
}
