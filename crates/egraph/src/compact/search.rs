//! The search: expanding a partial program, recording complete ones,
//! pruning by the record (`early`), and the runs on one or more threads,
//! with or without a sketch.

use super::canon::{Canon, Keys};
use super::index::Enumerator;
use super::limits::Limits;
use super::partial::State;
use super::record::{Counts, Enumeration, Expansion, Pool, Shared, Verdict, ARENA_WORDS};
use super::space::Mode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

impl<'a> Enumerator<'a> {
    /// Record the complete program `t`: a candidate when it is in the
    /// candidate space and of a class not seen yet (or always, under
    /// `none`). True when that reaches the candidate limit.
    pub(super) fn complete(&mut self, t: &State, mode: Mode, shared: &Shared) -> bool {
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
    pub(super) fn prune(&mut self, t: &State, canon: Option<Canon>, shared: &Shared) -> Verdict {
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
        if self.sketching {
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

    /// Expand the partial program `s`: resolve one hole every way the
    /// rules allow, and return the children to explore (complete ones are
    /// recorded, pruned ones dropped).
    pub(super) fn expand(
        &mut self,
        mode: Mode,
        mut s: State,
        shared: &Shared,
        n: &mut Counts,
    ) -> Expansion {
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
        let options = self.hole_options(mode, h);
        for (at, &j) in options.iter().enumerate() {
            if !self.admissible(&s, h, j) {
                continue;
            }
            let Some((t, canon)) = self.child(mode, &s, h, j, n) else {
                continue;
            };
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

    /// About once a second, a progress event (target `efir::progress`,
    /// see [`Progress`]); what shows it, if anything, is the tool's
    /// `tracing` subscriber.
    pub(super) fn show_progress(&self, shown: &mut Instant, expanded: usize, shared: &Shared) {
        let p = &self.progress;
        if p.quiet || shown.elapsed() < Duration::from_secs(1) {
            return;
        }
        *shown = Instant::now();
        tracing::info!(
            target: "efir::progress",
            "compact: @{}: {expanded} partial programs expanded, {} classes, {:.1} s of {:.1} s",
            p.function,
            shared.classes(),
            p.since.elapsed().as_secs_f64(),
            p.limit_s
        );
    }

    /// Enumerate candidates: depth first, but the subtrees of the first
    /// real choice (the first partial program with several children) are
    /// explored in turns, one expansion each, so that a limited enumeration
    /// finds candidates of every top-level organization, not only of the
    /// cheapest-looking one. The order changes nothing else.
    pub fn run(&mut self, mode: Mode, limits: &Limits) -> Enumeration {
        self.run_threads(mode, limits, 1)
    }

    /// [`Enumerator::run`] on `threads` threads that share the record of
    /// partial programs and complete classes (one thread: `run`). Each
    /// explores depth first and gives the oldest partial program on its
    /// stack to a thread that has run out of work. Every mode finds the
    /// same classes as with one thread; the order of the candidates (and,
    /// under a limit, which are found) varies from run to run.
    pub fn run_threads(&mut self, mode: Mode, limits: &Limits, threads: usize) -> Enumeration {
        self.run_from(mode, limits, threads, Enumeration::default())
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
        limits: &Limits,
        threads: usize,
        sketch: Duration,
    ) -> Enumeration {
        if sketch.is_zero() || mode != Mode::Early {
            return self.run_threads(mode, limits, threads);
        }
        let start = Instant::now();
        self.sketching = true;
        let sketch_end = start.checked_add(sketch).unwrap_or(limits.deadline);
        let first = self.run_threads(
            mode,
            &limits.with_deadline(sketch_end.min(limits.deadline)),
            threads,
        );
        self.sketching = false;
        let (expanded, classes) = (first.expanded_states, first.classes);
        let sketch_time_s = start.elapsed().as_secs_f64();
        let mut out = if first.stopped_by == Some("max-candidates")
            || first.stopped_by == Some("max-states")
        {
            first
        } else {
            // (At least a millisecond, as a search of its own would have.)
            let rest = Limits {
                max_states: limits.max_states.saturating_sub(expanded),
                deadline: limits
                    .deadline
                    .max(Instant::now() + Duration::from_millis(1)),
                ..*limits
            };
            let mut out = self.run_from(mode, &rest, threads, first);
            out.expanded_states += expanded;
            out
        };
        out.sketch_expanded = expanded;
        out.sketch_classes = classes;
        out.sketch_time_s = sketch_time_s;
        out
    }

    /// [`Enumerator::run_threads`], starting with the classes of `found`.
    pub(super) fn run_from(
        &mut self,
        mode: Mode,
        limits: &Limits,
        threads: usize,
        found: Enumeration,
    ) -> Enumeration {
        let threads = threads.max(1);
        let start = Instant::now();
        let shared = Shared::new(limits.max_candidates, found);
        let budget = Budget {
            start,
            limits: *limits,
            grace: if shared.past(limits.deadline) {
                self.ids.len()
            } else {
                0
            },
        };
        let mut n = Counts::default();
        let keys = self.share_keys(threads);
        let pool = Pool {
            work: Mutex::new((Vec::new(), 0)),
            idle: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            expanded: AtomicUsize::new(0),
            left: AtomicBool::new(false),
            stopped_by: Mutex::new(None),
        };
        let split = self.descend_to_first_choice(mode, &shared, &pool, budget, &mut n);
        let counts = self.run_workers(mode, split, &shared, &pool, threads, budget);
        n.expanded = pool.expanded.load(Ordering::Relaxed);
        n.pruned += counts.iter().map(|c| c.pruned).sum::<usize>();
        self.unshare_keys(keys);
        let stopped_by = *pool.stopped_by.lock().unwrap_or_else(|e| e.into_inner());
        let left = pool.left.load(Ordering::Relaxed) || !pool.lock().0.is_empty();
        shared.finish(n, stopped_by, left)
    }

    /// With several threads, keys are numbered by one interner from now
    /// on (returned, and what `shared_keys` points to); each thread's own
    /// map is a cache of it that starts empty (copying it to every thread
    /// took about 0.2 s per copy after a sketch had interned a few million
    /// keys).
    fn share_keys(&mut self, threads: usize) -> Option<Arc<Mutex<Keys>>> {
        (threads > 1).then(|| {
            let keys = Arc::new(Mutex::new(std::mem::take(&mut self.interner)));
            self.shared_keys = Some(keys.clone());
            keys
        })
    }

    /// The interner back from [`Enumerator::share_keys`].
    fn unshare_keys(&mut self, keys: Option<Arc<Mutex<Keys>>>) {
        if let Some(keys) = keys {
            self.shared_keys = None;
            self.interner = std::mem::take(&mut *keys.lock().unwrap_or_else(|e| e.into_inner()));
        }
    }

    /// Expand from the first partial program up to the first real choice
    /// (a partial program with several children), whose subtrees go to
    /// the threads in turn (each explores its own in turns, as `run`
    /// does). Returns those subtrees (none where the search stopped on the
    /// way: `pool` then says so) and the number of partial programs
    /// expanded before them (where the turns start).
    fn descend_to_first_choice(
        &mut self,
        mode: Mode,
        shared: &Shared,
        pool: &Pool,
        budget: Budget,
        n: &mut Counts,
    ) -> (Vec<State>, usize) {
        let mut split: Vec<State> = Vec::new();
        let mut stop = false;
        let mut cut = false;
        let mut turn = 0;
        if let Some(first) = self.first(mode, n) {
            let mut s = first;
            loop {
                turn += 1;
                if s.holes.is_empty() {
                    stop = self.complete(&s, mode, shared);
                    break;
                }
                if let Some(why) = budget.stops(shared, n.expanded, true) {
                    *pool.stopped_by.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
                    split = vec![s];
                    stop = true;
                    break;
                }
                let e = self.expand(mode, s, shared, n);
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
        (split, turn)
    }

    /// Explore the subtrees `split` (dealt to the threads in turn) on
    /// `threads` threads (one: this one, from the given turn), and return
    /// each thread's counts.
    fn run_workers(
        &mut self,
        mode: Mode,
        (split, turn): (Vec<State>, usize),
        shared: &Shared,
        pool: &Pool,
        threads: usize,
        budget: Budget,
    ) -> Vec<Counts> {
        let mut initial: Vec<Vec<Vec<State>>> = vec![Vec::new(); threads];
        for (i, t) in split.into_iter().enumerate() {
            initial[i % threads].push(vec![t]);
        }
        if threads == 1 {
            let stacks = initial.pop().unwrap_or_default();
            return vec![self.worker(mode, (stacks, turn), shared, pool, 1, budget)];
        }
        std::thread::scope(|scope| {
            let workers: Vec<_> = initial
                .into_iter()
                .enumerate()
                .map(|(w, stacks)| {
                    let mut en = self.clone();
                    // (One thread reports progress.)
                    en.progress.quiet |= w > 0;
                    scope.spawn(move || en.worker(mode, (stacks, 0), shared, pool, threads, budget))
                })
                .collect();
            workers
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        })
    }

    /// The options of hole `h` in the order [`Enumerator::expand`] tries
    /// them: a route hole its pointwise ops before its views (the region
    /// is written where it is read, and its inputs are read through views,
    /// which a later, more general partial program cannot cover as often
    /// the other way round); other holes their e-nodes in order
    /// (cheapest-looking first).
    fn hole_options(&self, mode: Mode, h: u32) -> Vec<usize> {
        let range = self.choices(mode, h);
        let order: &[u16] = if range.len() == self.options[h as usize].len() {
            &self.order[h as usize]
        } else {
            &[]
        };
        if order.is_empty() {
            range.collect()
        } else {
            order.iter().map(|j| *j as usize).collect()
        }
    }

    /// The partial program `s` with hole `h` resolved to option `j`, then
    /// its holes with one option (they never branch: resolved all now, in
    /// any order, the result is the same) and, under `early`, its
    /// determined classes; with its canonical form where that is known
    /// already. `None` where it has no completion.
    fn child(
        &mut self,
        mode: Mode,
        s: &State,
        h: u32,
        j: usize,
        n: &mut Counts,
    ) -> Option<(State, Option<Canon>)> {
        let mut t = s.clone();
        self.settle(&mut t, h, j);
        if !self.force(mode, &mut t, &mut n.expanded) {
            return None;
        }
        let mut canon = None;
        if mode == Mode::Early && self.use_determined && !t.holes.is_empty() {
            let cn = self.canon_parts(&t);
            if cn.invalid {
                return None;
            }
            if !self.settle_determined(&mut t, &mut n.expanded) {
                canon = Some(cn);
            } else if !self.force(mode, &mut t, &mut n.expanded) {
                return None;
            }
        }
        Some((t, canon))
    }

    /// One thread of [`Enumerator::run_threads`], starting from its
    /// stacks (explored in turns from the given one, depth first each): its
    /// prunings, within the search's `budget`.
    pub(super) fn worker(
        &mut self,
        mode: Mode,
        (mut stacks, mut turn): (Vec<Vec<State>>, usize),
        shared: &Shared,
        pool: &Pool,
        threads: usize,
        budget: Budget,
    ) -> Counts {
        let _guard = StopOnPanic(pool);
        let mut n = Counts::default();
        let (mut pops, mut counted) = (0usize, 0usize);
        let mut shown = budget.start;
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
            if let Some(why) = budget.stops(shared, total, pops.is_multiple_of(64)) {
                stacks[i].push(s);
                stop_all(pool, why);
                break;
            }
            if pops.is_multiple_of(64) {
                self.show_progress(&mut shown, total, shared);
            }
            let e = self.expand(mode, s, shared, &mut n);
            stacks[i].extend(e.next.into_iter().rev());
            if e.stop {
                if e.cut {
                    pool.left.store(true, Ordering::Relaxed);
                }
                stop_all(pool, "max-candidates");
                break;
            }
            if pool.idle.load(Ordering::Relaxed) > 0 {
                give_away(&mut stacks, pool);
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
}

/// What one search may spend: the limits of the enumeration, when the
/// search started (for progress), and its grace: a search that starts past
/// the deadline (a function reached after the module's deadline, which its
/// functions share) may still expand `grace` partial programs (as many as
/// the function has classes: about one descent, work of the order of
/// building its e-graph) or run until it finds a first candidate, so that
/// such a function still has one where it is easy to find.
#[derive(Clone, Copy, Debug)]
pub(super) struct Budget {
    pub(super) start: Instant,
    pub(super) limits: Limits,
    pub(super) grace: usize,
}

impl Budget {
    /// Why the search stops `expanded` partial programs in, if it does:
    /// `max-states`, or (where `check_time`: the clock is read only now and
    /// then) `time-limit`, past the deadline (with the time to write out the
    /// candidates found) and the grace.
    fn stops(&self, shared: &Shared, expanded: usize, check_time: bool) -> Option<&'static str> {
        if expanded >= self.limits.max_states {
            Some("max-states")
        } else if check_time
            && shared.past(self.limits.deadline)
            && (expanded >= self.grace || !shared.out().candidates.is_empty())
        {
            Some("time-limit")
        } else {
            None
        }
    }
}

/// Stops the other threads of a search when its thread panics (they would
/// wait for it forever); the panic then reaches the caller.
struct StopOnPanic<'p>(&'p Pool);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.stop.store(true, Ordering::Relaxed);
        }
    }
}

/// Stop every thread of a search, for the reason `why` (the first one
/// given stays).
fn stop_all(pool: &Pool, why: &'static str) {
    pool.stop.store(true, Ordering::Relaxed);
    pool.stopped_by
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert(why);
}

/// A thread is out of work: give it the oldest partial program of the
/// largest of `stacks` (the largest subtree), keeping one.
fn give_away(stacks: &mut [Vec<State>], pool: &Pool) {
    let total: usize = stacks.iter().map(Vec::len).sum();
    if total > 1 {
        let big = (0..stacks.len())
            .max_by_key(|k| stacks[*k].len())
            .unwrap_or(0);
        let s0 = stacks[big].remove(0);
        pool.lock().0.push(s0);
    }
}
