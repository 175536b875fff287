//! Determined classes: open classes that every completion realizes with
//! one key, found per state, and resolved at once by `early`.

use super::canon::Scratch;
use super::index::Enumerator;
use super::kinds::Kind;
use super::partial::{State, NONE};
use super::space::Mode;

/// How far [`Enumerator::determine`] got with a class in one state. A
/// result that held only below a class being visited is forgotten
/// (`Unvisited` again), so that the class is visited anew from above.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Visit {
    /// Not visited (or its result held only below another class).
    Unvisited,
    /// Being visited (on the current path).
    Visiting,
    /// Not determined: its options disagree or read an undetermined class.
    Undetermined,
    /// Determined: its entry is at `at`.
    Determined,
}

/// What [`Enumerator::determine`] found for the open classes of a state:
/// for each class whose every completion gives it one key (a
/// *determined* class), that key, the inputs of the pointwise region it
/// ends (if it ends one), whether it needs work, the holes it reaches, and
/// the option `early` chooses for it.
#[derive(Clone, Default)]
pub(super) struct Determined {
    /// Per class, how far [`Enumerator::determine`] got with it.
    pub(super) mark: Vec<Visit>,
    pub(super) at: Vec<u32>,
    /// Each entry's realization and picked option.
    pub(super) found: Vec<(Realization, u16)>,
    /// Per class being visited, how deep.
    pub(super) depth: Vec<u32>,
    /// Visits left in this state (the work is bounded; a class left
    /// undecided is not determined).
    pub(super) budget: usize,
    /// Buffers to reuse (their contents are dead).
    pub(super) spare_words: Vec<Vec<u64>>,
    pub(super) spare_keys: Vec<Vec<u32>>,
    pub(super) spare_effects: Vec<Vec<(u32, u32)>>,
}

/// What one option of a class gives it in every completion (see
/// [`Enumerator::determine`]): its key, the inputs of the region it ends,
/// whether it needs work, the holes it reaches (`hwords` words) and the
/// organizations it fixes ((value, label) pairs).
#[derive(Clone, PartialEq)]
pub(super) struct Realization {
    pub(super) key: u32,
    pub(super) region: Option<Vec<u32>>,
    pub(super) work: bool,
    pub(super) reach: Vec<u64>,
    pub(super) effects: Vec<(u32, u32)>,
}

impl Determined {
    pub(super) fn reset(&mut self, n: usize) {
        self.mark.clear();
        self.mark.resize(n, Visit::Unvisited);
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

    /// Keep buffers for later visits (their contents are dead).
    fn recycle(&mut self, words: Vec<u64>, effects: Vec<(u32, u32)>, keys: Vec<u32>) {
        self.spare_words.push(words);
        self.spare_effects.push(effects);
        self.spare_keys.push(keys);
    }

    /// [`Determined::recycle`] for buffers that were taken for a
    /// realization and may have been moved into it (empty then).
    fn recycle_unused(&mut self, words: Vec<u64>, effects: Vec<(u32, u32)>, keys: Vec<u32>) {
        if words.capacity() > 0 {
            self.spare_words.push(words);
        }
        if effects.capacity() > 0 {
            self.spare_effects.push(effects);
        }
        if keys.capacity() > 0 {
            self.spare_keys.push(keys);
        }
    }

    /// The realization of the open class `c` (determined, or being used
    /// by the class that asked).
    pub(super) fn of(&self, c: usize) -> &Realization {
        &self.found[self.at[c] as usize].0
    }

    /// The option picked for the determined class `c`.
    pub(super) fn pick(&self, c: usize) -> usize {
        self.found[self.at[c] as usize].1 as usize
    }
}

impl<'a> Enumerator<'a> {
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
    pub(super) fn determine(
        &mut self,
        s: &State,
        sc: &Scratch,
        d: &mut Determined,
        c: u32,
    ) -> bool {
        self.determine_at(s, sc, d, c, 0).is_some()
    }

    /// Whether two options of class `c` that `s` allows key with different
    /// labels: then they never agree (a shortcut of
    /// [`Enumerator::determine_at`]: it misses a class that only skipping
    /// an option on a cycle would make determined).
    fn heads_differ(&self, s: &State, c: u32) -> bool {
        let ci = c as usize;
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
                Some(_) => return true,
            }
        }
        false
    }

    /// [`Enumerator::determine`] for a class `depth` calls deep: `None`
    /// when not determined; otherwise the least depth of a class being
    /// visited that an option of it or of a class it reads was skipped for
    /// (a completion choosing that option would close a cycle through that
    /// class), or `u32::MAX`. A result that depends on a class being visited
    /// above it holds only below that class and is not kept.
    pub(super) fn determine_at(
        &mut self,
        s: &State,
        sc: &Scratch,
        d: &mut Determined,
        c: u32,
        depth: u32,
    ) -> Option<u32> {
        let ci = c as usize;
        match d.mark[ci] {
            Visit::Undetermined => return None,
            Visit::Determined => return Some(u32::MAX),
            Visit::Unvisited | Visit::Visiting => {}
        }
        d.budget = d.budget.checked_sub(1)?;
        let v = self.value[ci] as usize;
        // (A class whose realization may change how a reader reads it from
        // memory is not determined: see `memory::Memory::relevant`.)
        if self.mem.relevant[ci] || self.heads_differ(s, c) {
            d.mark[ci] = Visit::Undetermined;
            return None;
        }
        d.mark[ci] = Visit::Visiting;
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
                if s.choice[xi] == NONE && d.mark[xi] == Visit::Visiting {
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
        d.recycle(reach, eff, inputs);
        let (words, effects, keys) = spare;
        d.recycle_unused(words, effects, keys);
        let Some(found) = found.filter(|_| ok) else {
            // (Not determined, whatever is above: its options disagree or
            // read a class that is not determined.)
            d.mark[ci] = if taint < depth {
                Visit::Unvisited
            } else {
                Visit::Undetermined
            };
            return None;
        };
        d.at[ci] = d.found.len() as u32;
        d.found.push(found);
        d.mark[ci] = if taint < depth {
            Visit::Unvisited
        } else {
            Visit::Determined
        };
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
    pub(super) fn settle_determined(&mut self, t: &mut State, expanded: &mut usize) -> bool {
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
                if d.mark[ci] != Visit::Determined {
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
}
