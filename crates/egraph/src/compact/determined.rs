//! Determined classes: open classes that every completion realizes with
//! one key, found per state, and resolved at once by `early`.

use super::canon::Scratch;
use super::index::Enumerator;
use super::kinds::Kind;
use super::partial::{State, NONE, UNORGANIZED};
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

/// A [`Realization`] borrowed from the buffers it was worked out in (see
/// [`Enumerator::compare_option`]).
struct RealizationRef<'b> {
    key: u32,
    region: Option<&'b [u32]>,
    work: bool,
    reach: &'b [u64],
    effects: &'b [(u32, u32)],
}

impl Realization {
    /// Whether it is `r`.
    fn same_as(&self, r: &RealizationRef<'_>) -> bool {
        self.key == r.key
            && self.work == r.work
            && self.region.as_deref() == r.region
            && self.reach[..] == *r.reach
            && self.effects[..] == *r.effects
    }
}

impl RealizationRef<'_> {
    /// An owned copy, in the buffers `spare` (taken from it).
    fn copy_into(&self, spare: &mut Buffers) -> Realization {
        let (mut reach, mut effects, mut region) = std::mem::take(spare);
        reach.clear();
        reach.extend_from_slice(self.reach);
        effects.clear();
        effects.extend_from_slice(self.effects);
        Realization {
            key: self.key,
            region: self.region.map(|r| {
                region.clear();
                region.extend_from_slice(r);
                region
            }),
            work: self.work,
            reach,
            effects,
        }
    }
}

/// Buffers for a [`Realization`]'s reached holes, effects and region
/// inputs.
type Buffers = (Vec<u64>, Vec<(u32, u32)>, Vec<u32>);

/// What the operands of one option are to [`Enumerator::determine_at`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operands {
    /// Each is resolved, a hole of the state, or determined.
    Determined,
    /// One leads back to a class being visited: a completion choosing the
    /// option (while that class reaches it) has a cycle; it is skipped.
    ClosesCycle,
    /// One is open and not determined (so neither is the class).
    Undetermined,
}

/// How one option of a class compares with the options before it
/// ([`Enumerator::compare_option`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Comparison {
    /// No completion chooses it (it closes a cycle through a hole, or fixes
    /// two organizations of one value): it is skipped.
    Skipped,
    /// It realizes the class as the options before it do (or is the first).
    Agrees,
    /// It realizes the class otherwise, or reads a class that is not
    /// determined: the class is not determined.
    Disagrees,
}

/// One visit of [`Enumerator::determine_at`] in progress: the realization
/// its options agree on so far (and the option that gave it first), and
/// buffers for the option at hand, taken from [`Determined`]'s spares by
/// [`Agreement::start`] and given back by [`Agreement::end`].
struct Agreement {
    found: Option<(Realization, u16)>,
    /// The holes the option at hand reaches (`hwords` words).
    reach: Vec<u64>,
    /// The organizations it fixes ((value, label) pairs), sorted.
    effects: Vec<(u32, u32)>,
    /// The inputs of the region it ends, if pointwise (left by
    /// [`Enumerator::node_key_parts`]).
    inputs: Vec<u32>,
    /// Buffers for the first realization found (moved into it).
    spare: Buffers,
}

impl Agreement {
    fn start(d: &mut Determined, hwords: usize) -> Agreement {
        let mut reach = d.spare_words.pop().unwrap_or_default();
        reach.clear();
        reach.resize(hwords, 0);
        let effects = d.spare_effects.pop().unwrap_or_default();
        let inputs = d.spare_keys.pop().unwrap_or_default();
        let spare = (
            d.spare_words.pop().unwrap_or_default(),
            d.spare_effects.pop().unwrap_or_default(),
            d.spare_keys.pop().unwrap_or_default(),
        );
        Agreement {
            found: None,
            reach,
            effects,
            inputs,
            spare,
        }
    }

    /// Give the buffers back to `d`; the realization found, if any.
    fn end(self, d: &mut Determined) -> Option<(Realization, u16)> {
        d.recycle(self.reach, self.effects, self.inputs);
        let (words, effects, keys) = self.spare;
        d.recycle_unused(words, effects, keys);
        self.found
    }
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

    /// Record the end of a visit of the open class `c`, `depth` calls
    /// deep, that skipped options for classes being visited down to depth
    /// `taint`: `found` is the realization its options agree on, if they
    /// do. A result that held only below a class being visited (`taint <
    /// depth`) is forgotten: the class is `Unvisited` again. The answer of
    /// [`Enumerator::determine_at`].
    fn finish(
        &mut self,
        c: usize,
        depth: u32,
        taint: u32,
        found: Option<(Realization, u16)>,
    ) -> Option<u32> {
        let below_only = taint < depth;
        let Some(found) = found else {
            // (Not determined, whatever is above: its options disagree or
            // read a class that is not determined.)
            self.mark[c] = if below_only {
                Visit::Unvisited
            } else {
                Visit::Undetermined
            };
            return None;
        };
        self.at[c] = self.found.len() as u32;
        self.found.push(found);
        self.mark[c] = if below_only {
            Visit::Unvisited
        } else {
            Visit::Determined
        };
        Some(if below_only { taint } else { u32::MAX })
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
    ///
    /// The steps: a class visited before answers from its mark; a class
    /// that never is determined is marked so; otherwise each option the
    /// one-organization rule allows has its operands visited
    /// ([`Enumerator::visit_operands`]) and is compared with the options
    /// before it ([`Enumerator::compare_option`]), and the outcome is
    /// recorded ([`Determined::finish`]).
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
            Visit::Undetermined => return None,
            Visit::Determined => return Some(u32::MAX),
            Visit::Unvisited | Visit::Visiting => {}
        }
        d.budget = d.budget.checked_sub(1)?;
        // (A class whose realization may change how a reader reads it from
        // memory is not determined: see `memory::Memory::relevant`.)
        if self.mem.relevant[ci] || self.heads_differ(s, c) {
            d.mark[ci] = Visit::Undetermined;
            return None;
        }
        d.mark[ci] = Visit::Visiting;
        d.depth[ci] = depth;
        // (The least depth of a class being visited that an option was
        // skipped for, here or below.)
        let mut taint = u32::MAX;
        let mut a = Agreement::start(d, sc.hwords);
        let mut agree = true;
        for j in self.choices(Mode::Early, c) {
            // Options the one-organization rule rules out are never chosen.
            if !self.allowed(s, c, j) {
                continue;
            }
            let (operands, skipped_for) = self.visit_operands(s, sc, d, c, j, depth);
            taint = taint.min(skipped_for);
            let compared = match operands {
                Operands::ClosesCycle => continue,
                Operands::Undetermined => Comparison::Disagrees,
                Operands::Determined => self.compare_option(s, sc, d, c, j, &mut a),
            };
            if compared == Comparison::Disagrees {
                agree = false;
                break;
            }
        }
        let found = a.end(d);
        d.finish(ci, depth, taint, found.filter(|_| agree))
    }

    /// Step 1 of [`Enumerator::determine_at`] for option `j` of class `c`:
    /// visit its open operands (each must be determined, or resolved or a
    /// hole of `s`). Also the least depth of a class being visited that an
    /// option was skipped for on the way (`u32::MAX` if none).
    fn visit_operands(
        &mut self,
        s: &State,
        sc: &Scratch,
        d: &mut Determined,
        c: u32,
        j: usize,
        depth: u32,
    ) -> (Operands, u32) {
        let ci = c as usize;
        let mut taint = u32::MAX;
        for xk in 0..self.kids[ci][j].len() {
            let x = self.kids[ci][j][xk];
            let xi = x as usize;
            if s.choice[xi] == NONE && d.mark[xi] == Visit::Visiting {
                // Back to a class being visited: a completion choosing
                // this option (while that class reaches it) has a cycle.
                taint = taint.min(d.depth[xi]);
                return (Operands::ClosesCycle, taint);
            }
            // (A hole of `s` is keyed like a resolved class: every
            // completion resolves it the same way whatever reads it.)
            let known = if from_determined(s, sc, xi) {
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
                return (Operands::Undetermined, taint);
            }
        }
        (Operands::Determined, taint)
    }

    /// Step 2 of [`Enumerator::determine_at`] for option `j` of class `c`,
    /// whose operands are known: what it realizes (key and need for work,
    /// region inputs, reached holes, fixed organizations), compared with
    /// what the options before it realize (in `a`), or kept in `a` if it
    /// is the first. An option that no completion chooses is skipped.
    fn compare_option(
        &mut self,
        s: &State,
        sc: &Scratch,
        d: &Determined,
        c: u32,
        j: usize,
        a: &mut Agreement,
    ) -> Comparison {
        let ci = c as usize;
        // An operand's key and region inputs, and need for work.
        let kid = |x: u32| -> (u32, Option<&[u32]>) {
            let xi = x as usize;
            if from_determined(s, sc, xi) {
                let r = d.of(xi);
                (r.key, r.region.as_deref())
            } else {
                sc.key_region(xi)
            }
        };
        let (key, _) = self.node_key_parts(ci, j, kid, &mut a.inputs);
        let work = self.needs_work(ci, j, |x| {
            let xi = x as usize;
            if from_determined(s, sc, xi) {
                d.of(xi).work
            } else {
                sc.work[xi]
            }
        });
        if let Some((r0, _)) = &a.found {
            if r0.key != key || r0.work != work {
                return Comparison::Disagrees;
            }
        }
        let kids = &self.kids[ci][j];
        let region: Option<&[u32]> = match self.kind[ci][j] {
            Kind::View => kid(kids[0]).1,
            Kind::Loop(_) if self.stores[ci][j].is_none() => kid(kids[0]).1,
            Kind::Pointwise(_) => Some(&a.inputs[..]),
            _ => None,
        };
        self.option_reach(s, sc, d, c, j, &mut a.reach);
        // An option of a hole that reaches the hole itself closes a
        // cycle: no completion chooses it.
        if s.choice[ci] == NONE
            && sc.has(ci)
            && a.reach.iter().zip(sc.hreach(ci)).any(|(w, b)| w & b != 0)
        {
            return Comparison::Skipped;
        }
        if !self.option_effects(s, sc, d, c, j, &mut a.effects) {
            // Two organizations of one value: never a candidate.
            return Comparison::Skipped;
        }
        let option = RealizationRef {
            key,
            region,
            work,
            reach: &a.reach,
            effects: &a.effects,
        };
        match &a.found {
            None => {
                a.found = Some((option.copy_into(&mut a.spare), j as u16));
                Comparison::Agrees
            }
            Some((r0, _)) if r0.same_as(&option) => Comparison::Agrees,
            Some(_) => Comparison::Disagrees,
        }
    }

    /// The holes option `j` of class `c` reaches: its operands' (into
    /// `reach`, `hwords` words).
    fn option_reach(
        &self,
        s: &State,
        sc: &Scratch,
        d: &Determined,
        c: u32,
        j: usize,
        reach: &mut [u64],
    ) {
        reach.fill(0);
        for &x in &self.kids[c as usize][j] {
            let xi = x as usize;
            let h = if from_determined(s, sc, xi) {
                &d.of(xi).reach[..]
            } else {
                sc.hreach(xi)
            };
            for (w, b) in reach.iter_mut().zip(h) {
                *w |= *b;
            }
        }
    }

    /// The organizations option `j` of class `c` fixes (of values with
    /// several whose organization is still open in `s`), its operands'
    /// included, sorted into `effects`; false when two are of one value.
    fn option_effects(
        &self,
        s: &State,
        sc: &Scratch,
        d: &Determined,
        c: u32,
        j: usize,
        effects: &mut Vec<(u32, u32)>,
    ) -> bool {
        let ci = c as usize;
        let v = self.value[ci] as usize;
        effects.clear();
        if let Some(l) = self.kind[ci][j].org() {
            if self.several_orgs[v] && s.produced[v] == UNORGANIZED {
                effects.push((v as u32, l));
            }
        }
        for &x in &self.kids[ci][j] {
            let xi = x as usize;
            if from_determined(s, sc, xi) {
                effects.extend_from_slice(&d.of(xi).effects);
            }
        }
        effects.sort_unstable();
        effects.dedup();
        !effects.windows(2).any(|p| p[0].0 == p[1].0)
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

/// Whether the realization of class `c` (an operand) is in [`Determined`]:
/// it is open in `s` and not one of its holes (a hole, like a resolved
/// class, has its key in the scratch buffers of the last
/// [`Enumerator::canon_parts`] of `s`).
fn from_determined(s: &State, sc: &Scratch, c: usize) -> bool {
    s.choice[c] == NONE && !sc.has(c)
}
