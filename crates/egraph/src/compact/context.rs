//! Contexts: what the completions of a partial program depend on besides
//! its canonical form, as explicit entries, and the inclusion check
//! (`S ≈p T` relaxed: an earlier partial program covers a later one).

use super::determined::Visit;
use super::index::Enumerator;
use super::partial::{State, NONE, UNORGANIZED};
use super::space::Mode;
use rustc_hash::FxHashSet;

/// Context entries (see [`Enumerator::context`]): the class, a tag and a
/// payload in one word.
pub(super) fn entry(c: u32, tag: u64, payload: u32) -> u64 {
    u64::from(c) << 34 | tag << 32 | u64::from(payload)
}

/// The context entry of a class with a key (resolved, or determined) that
/// reaches the holes `holes`: one word, and the hole words if it reaches
/// any.
pub(super) fn push_keyed(entries: &mut Vec<u64>, c: u32, key: u32, holes: &[u64]) {
    if holes.iter().all(|w| *w == 0) {
        entries.push(entry(c, RESOLVED, key));
    } else {
        entries.push(entry(c, REACHES, key));
        entries.extend_from_slice(holes);
    }
}

/// An open class; the payload is its value's organization.
pub(super) const OPEN: u64 = 0;

/// A resolved class that reaches no hole; the payload is its key.
pub(super) const RESOLVED: u64 = 1;

/// A resolved class that reaches holes; the payload is its key, and the
/// hole words follow.
pub(super) const REACHES: u64 = 2;

pub(super) fn tag(w: u64) -> u64 {
    w >> 32 & 3
}

pub(super) fn payload(w: u64) -> u32 {
    w as u32
}

/// How many earlier contexts with the same canonical form a partial program
/// is checked against for inclusion (checking fewer prunes less, never
/// wrongly).
pub(super) const COVER_CHECKS: usize = 32;

/// Buffers reused by [`Enumerator::context`]: a class is visited when its
/// stamp is the call's.
#[derive(Clone, Default)]
pub(super) struct ContextScratch {
    pub(super) stamp: Vec<u32>,
    pub(super) now: u32,
    pub(super) stack: Vec<u32>,
    pub(super) region: Vec<u32>,
    /// The last context, entry by entry (see [`Enumerator::covers`]).
    pub(super) entries: Vec<u64>,
}

impl<'a> Enumerator<'a> {
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
    pub(super) fn context(&mut self, s: &State) -> u64 {
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
            if s.choice[ci] == NONE && d.mark[ci] == Visit::Determined {
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
    pub(super) fn covers(&self, a: &[u64], b: &State) -> bool {
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
                        (OPEN, OPEN) => payload(wa) == UNORGANIZED || wa == wb,
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
    /// value of class `c` agrees with `b`'s ([`UNORGANIZED`]: none chosen).
    pub(super) fn agrees(&self, b: &State, c: usize, p: u32) -> bool {
        let v = self.value[c] as usize;
        let q = b.produced[v];
        !self.several_orgs[v] || p == UNORGANIZED || q == UNORGANIZED || p == q
    }

    /// For [`Enumerator::covers`]: whether the earlier context `a`, where
    /// the class `c` is open, lets a completion realize `c` as the state `b`
    /// (the one whose determined classes are in `self.det`) would with its
    /// picks: every open class those picks reach is open in `a` with an
    /// organization that agrees, or resolved in `a` to the key and holes it
    /// has in `b`.
    pub(super) fn realizable_in(&self, a: &[u64], b: &State, c: u32) -> bool {
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
            if d.mark.get(xi) != Some(&Visit::Determined) {
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

    /// Turn pruning by context inclusion (`Enumerator::covers`) off (an
    /// ablation, used to test that it loses no class: only partial programs
    /// with equal contexts are pruned then) or back on.
    pub fn use_covering(&mut self, on: bool) {
        self.cover_checks = if on { COVER_CHECKS } else { 0 };
    }
}
