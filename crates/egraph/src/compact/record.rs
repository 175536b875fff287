//! What an enumeration records and shares between its threads: the
//! result, the record of classes and partial programs (in shards), the pool
//! of work.

use super::partial::State;
use egg::{Id, SymbolLang};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

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
    /// ([`crate::compact::Enumerator::run_sketched`]; 0 without one).
    pub sketch_expanded: usize,
    /// The classes the sketch found.
    pub sketch_classes: usize,
    /// The sketch's time in seconds.
    pub sketch_time_s: f64,
}

/// The most context words kept for inclusion checks (512 MiB).
pub(super) const ARENA_WORDS: usize = 64 << 20;

/// What the enumeration has seen: the classes of complete programs, and the
/// partial programs `early` has kept, with their canonical forms and
/// contexts.
#[derive(Default)]
pub(super) struct Record {
    /// Canonical forms of the complete programs in the candidate space.
    pub(super) complete: FxHashSet<u32>,
    /// Canonical forms of complete programs outside the candidate space
    /// (its rules depend only on the canonical form, so they are checked
    /// once per form).
    pub(super) rejected: FxHashSet<u32>,
    /// Canonical form and context hash of each.
    pub(super) seen: FxHashSet<(u32, u64)>,
    /// The canonical forms of the partial programs kept, in a sketch.
    pub(super) forms: FxHashSet<u32>,
    /// Their contexts (offset and length in `arena`), by canonical form.
    pub(super) contexts: FxHashMap<u32, Vec<(usize, usize)>>,
    pub(super) arena: Vec<u64>,
}

/// What [`Enumerator::prune`] found.
pub(super) enum Verdict {
    /// Outside the candidate space.
    Invalid,
    /// Equivalent to or covered by a partial program on the record.
    Seen,
    /// Neither: now on the record.
    New,
}

/// What a thread counts: partial programs expanded and pruned.
#[derive(Clone, Copy, Default)]
pub(super) struct Counts {
    pub(super) expanded: usize,
    pub(super) pruned: usize,
}

/// What [`Enumerator::expand`] gives: the children to explore, whether
/// the candidate limit was reached, and whether options were left then.
#[derive(Default)]
pub(super) struct Expansion {
    pub(super) next: Vec<State>,
    pub(super) stop: bool,
    pub(super) cut: bool,
}

/// What the threads of an enumeration share: the record (in shards by
/// canonical form, so that threads seldom wait for one another), and what
/// was found.
pub(super) struct Shared {
    pub(super) record: Vec<Mutex<Record>>,
    pub(super) out: Mutex<Enumeration>,
    pub(super) max_candidates: usize,
    /// Words of contexts kept for inclusion checks, in all shards.
    pub(super) arena_words: AtomicUsize,
    /// Whether a complete program was left when the limit was reached.
    pub(super) left: AtomicBool,
    /// E-nodes chosen by the candidates found: what is still to build and
    /// verify after the enumeration (see [`TAIL_SECS_PER_NODE`]).
    pub(super) nodes: AtomicUsize,
}

/// Seconds per e-node of a candidate spent after the enumeration: building
/// the candidates as functions, and verifying them (which the pass manager
/// does after the pass). It was 12 to 17 us per candidate op in a release
/// build on `attn_prefill.efir` and `rmsnorm_mlp.efir` (`bench --bin
/// limits`) when candidates were written as text, parsed back and verified
/// twice; built as IR they take less, so this is an upper bound (a
/// candidate chooses somewhat more e-nodes than it has ops). The time limit
/// is checked against the time spent plus this for the candidates found.
pub(super) const TAIL_SECS_PER_NODE: f64 = 12e-6;

impl Shared {
    /// Whether now, plus the time to write out the candidates found, is
    /// past `deadline`.
    pub(super) fn past(&self, deadline: Instant) -> bool {
        let tail = TAIL_SECS_PER_NODE * self.nodes.load(Ordering::Relaxed) as f64;
        let now = Instant::now();
        now >= deadline || deadline.duration_since(now).as_secs_f64() < tail
    }
}

/// Shards of the record.
pub(super) const SHARDS: usize = 64;

impl Shared {
    /// A record that starts with the classes of `found` (their
    /// candidates come first in the result).
    pub(super) fn new(max_candidates: usize, found: Enumeration) -> Shared {
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
    pub(super) fn record(&self, key: u32) -> MutexGuard<'_, Record> {
        self.record[key as usize % SHARDS]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The classes found so far.
    pub(super) fn classes(&self) -> usize {
        (0..SHARDS as u32)
            .map(|k| self.record(k).complete.len())
            .sum()
    }

    pub(super) fn out(&self) -> MutexGuard<'_, Enumeration> {
        self.out.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The enumeration's result: `left` when a limit stopped it with work
    /// left.
    pub(super) fn finish(
        self,
        n: Counts,
        stopped_by: Option<&'static str>,
        left: bool,
    ) -> Enumeration {
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
pub(super) struct Pool {
    pub(super) work: Mutex<(Vec<State>, usize)>,
    pub(super) idle: AtomicUsize,
    pub(super) stop: AtomicBool,
    pub(super) expanded: AtomicUsize,
    pub(super) left: AtomicBool,
    pub(super) stopped_by: Mutex<Option<&'static str>>,
}

impl Pool {
    pub(super) fn lock(&self) -> MutexGuard<'_, (Vec<State>, usize)> {
        self.work.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A partial program to expand, waiting for one while another thread
    /// works; `None` when every thread waits (the search is over) or the
    /// search stops.
    pub(super) fn take(&self, threads: usize) -> Option<State> {
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
