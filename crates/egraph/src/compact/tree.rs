//! Counting the search tree of `mode=after` without running it (feature
//! `after-tree`: for the compaction benchmark and its test, not the pass).

use super::index::Enumerator;
use super::partial::{State, NONE};
use super::record::Counts;
use super::space::Mode;
use rustc_hash::FxHashMap;
use std::time::{Duration, Instant};

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
pub(super) struct Mix128 {
    pub(super) a: u64,
    pub(super) b: u64,
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
    pub(super) fn mum(x: u64, y: u64) -> u64 {
        let p = u128::from(x) * u128::from(y);
        (p as u64) ^ ((p >> 64) as u64)
    }

    pub(super) fn word(&mut self, w: u64) {
        self.a = Mix128::mum(self.a ^ w, 0xa076_1d64_78bd_642f);
        self.b = Mix128::mum(self.b ^ w.rotate_left(29), 0xe703_7ed1_a0b4_28db);
    }

    pub(super) fn finish(&self) -> u128 {
        let a = Mix128::mum(self.a, 0x8ebc_6af0_9c88_c6e3);
        let b = Mix128::mum(self.b, 0x5899_65cc_7537_4cc3);
        u128::from(a) << 64 | u128::from(b)
    }
}

/// The smallest subtree (in partial programs expanded) that
/// [`Enumerator::after_tree`] keeps in its memo.
pub(super) const TREE_MEMO_MIN: u128 = 8;

/// One partial program of [`Enumerator::after_tree`] whose children are
/// being counted.
pub(super) struct TreeFrame {
    pub(super) key: u128,
    pub(super) expanded: u128,
    pub(super) complete: u128,
    pub(super) kids: Vec<State>,
}

/// Buffers of [`Enumerator::tree_key`].
#[derive(Default)]
pub(super) struct TreeScratch {
    pub(super) stamp: Vec<u32>,
    pub(super) now: u32,
    /// Per class, the holes its chosen e-nodes reach (bits over the sorted
    /// holes, `words` words each), valid where `reach_stamp` is `now`.
    pub(super) reach: Vec<u64>,
    pub(super) reach_stamp: Vec<u32>,
    pub(super) words: usize,
    pub(super) sorted: Vec<u32>,
    pub(super) stack: Vec<u32>,
    pub(super) entries: Vec<u64>,
    /// A class's reached holes while they are collected.
    pub(super) acc: Vec<u64>,
}

impl<'a> Enumerator<'a> {
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
            if shown.elapsed() >= Duration::from_secs(1) {
                shown = Instant::now();
                let so_far: u128 = stack.iter().map(|t| t.expanded).sum();
                tracing::info!(
                    target: "efir::progress",
                    "compact: @{}: counting the tree of `after`: {} subtrees, {} deep, at least {} expansions, {:.1} s",
                    self.progress.function,
                    memo.len(),
                    stack.len(),
                    so_far + f.expanded,
                    start.elapsed().as_secs_f64()
                );
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
    pub(super) fn tree_frame(
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
    pub(super) fn tree_key(&self, s: &State, sc: &mut TreeScratch) -> u128 {
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
    pub(super) fn tree_reach(&self, s: &State, c: u32, sc: &mut TreeScratch) {
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
