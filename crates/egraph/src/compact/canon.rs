//! Canonical keys: the interner, the key of one e-node given its operands'
//! (the one place the canonical form is defined node by node), and the
//! canonical form of a partial program with the rules of the candidate space
//! it checks.

use super::index::Enumerator;
use super::kinds::Kind;
use super::memory;
use super::partial::{State, NONE};
use super::record::Enumeration;
use rustc_hash::FxHashMap;
use std::collections::HashMap;

/// Per-class results of the last [`Enumerator::canon_parts`] call, reused
/// between calls: an entry is valid when its stamp is the call's.
#[derive(Clone, Default)]
pub(super) struct Scratch {
    pub(super) stamp: Vec<u32>,
    pub(super) now: u32,
    pub(super) hwords: usize,
    /// The key of each class reached from the roots.
    pub(super) memo: Vec<u32>,
    /// Whether its value needs work beyond loads and pointwise ops (holes
    /// count as work: they may be completed either way).
    pub(super) work: Vec<bool>,
    /// For which readers it is a buffer or views of one (bits of
    /// [`memory::ALL`]; holes count as buffers until resolved).
    pub(super) loaded: Vec<u8>,
    /// The pointwise region it ends (an index into `regions`; [`NO_REGION`]
    /// if none).
    pub(super) region: Vec<u32>,
    /// Keys of materializations of values without work.
    pub(super) pure: Vec<u32>,
    /// Buffers of one call: the sorted holes, a node's inputs, the
    /// traversal stack, the roots' keys.
    pub(super) holes: Vec<u32>,
    pub(super) inputs: Vec<u32>,
    pub(super) stack: Vec<(u32, bool)>,
    pub(super) roots: Vec<u32>,
    /// The relevant classes reached and their `loaded` bits (see
    /// [`memory::Memory::relevant`]).
    pub(super) digest: Vec<(u32, u8)>,
    /// Each region's inputs: a range of `region_keys`.
    pub(super) regions: Vec<(u32, u32)>,
    pub(super) region_keys: Vec<u32>,
    /// Keys read by ops and pointwise regions, and keys of values with
    /// work that a kernel stores.
    pub(super) used: Vec<u32>,
    pub(super) stored: Vec<u32>,
    /// The value classes of a region's inputs (a buffer).
    pub(super) vals: Vec<u32>,
    /// The resolved classes reached that are tuple-typed or read a tuple.
    pub(super) tuples: Vec<u32>,
    /// The holes it reaches through chosen e-nodes (`hwords` words each,
    /// bits over the state's sorted holes).
    pub(super) hreach: Vec<u64>,
}

impl Scratch {
    pub(super) fn start(&mut self, n: usize, hwords: usize) {
        if self.stamp.len() != n || self.now == u32::MAX {
            *self = Scratch {
                stamp: vec![0; n],
                memo: vec![0; n],
                work: vec![false; n],
                loaded: vec![0; n],
                region: vec![NO_REGION; n],
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
        self.digest.clear();
        if self.hwords != hwords || self.hreach.len() != n * hwords {
            self.hreach = vec![0; n * hwords];
            self.hwords = hwords;
        }
    }

    pub(super) fn has(&self, c: usize) -> bool {
        self.stamp[c] == self.now
    }

    pub(super) fn set(&mut self, c: usize, key: u32, work: bool, region: u32) {
        self.stamp[c] = self.now;
        self.memo[c] = key;
        self.work[c] = work;
        self.region[c] = region;
    }

    pub(super) fn hreach(&self, c: usize) -> &[u64] {
        &self.hreach[c * self.hwords..(c + 1) * self.hwords]
    }

    /// The key of a class reached, and the inputs of the pointwise region
    /// it ends, if any.
    pub(super) fn key_region(&self, c: usize) -> (u32, Option<&[u32]>) {
        let r = match self.region[c] {
            NO_REGION => None,
            r => {
                let (a, b) = self.regions[r as usize];
                Some(&self.region_keys[a as usize..b as usize])
            }
        };
        (self.memo[c], r)
    }
}

/// A partial program's canonical form and what pruning needs from it.
#[derive(Clone, Copy)]
pub(super) struct Canon {
    /// The canonical form (equal numbers for equal forms).
    pub(super) key: u32,
    /// Whether the program materializes a value that only needed loads
    /// and pointwise work (see [`Enumerator::canon_parts`]).
    pub(super) invalid: bool,
}

/// A class's key and the inputs of the pointwise region it ends, if any.
pub(super) type KeyRegion<'r> = (u32, Option<&'r [u32]>);

/// Interned keys: what each is interned from, and its number.
pub(super) type Keys = FxHashMap<Vec<u32>, u32>;

/// The label of a hole's key (over its class).
pub(super) const HOLE: u32 = u32::MAX;

/// [`Scratch::region`] of a class that ends no pointwise region.
pub(super) const NO_REGION: u32 = u32::MAX;

/// The label of a program's key (over its results' keys and, while it has
/// holes, its digest of `loaded` bits).
pub(super) const ROOTS: u32 = u32::MAX - 1;

impl<'a> Enumerator<'a> {
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

    pub(super) fn key_text(
        &self,
        k: u32,
        parts: &[&[u32]],
        memo: &mut HashMap<u32, String>,
    ) -> String {
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

    /// Whether a pointwise region with these inputs reads one value in two
    /// ways (say a stored buffer and the same value computed in the tile,
    /// or two buffers of it): its kernel would do that work twice. Holes
    /// are not counted (a region only gains inputs as they are resolved,
    /// so the check is monotone).
    pub(super) fn reads_twice(&self, inputs: &[u32], vals: &mut Vec<u32>) -> bool {
        vals.clear();
        vals.extend(
            inputs
                .iter()
                .map(|k| {
                    self.value_of_key
                        .get(*k as usize)
                        .copied()
                        .unwrap_or(u32::MAX)
                })
                .filter(|v| *v != u32::MAX),
        );
        vals.sort_unstable();
        vals.windows(2).any(|w| w[0] == w[1])
    }

    /// The key of option `j` of class `c`, given each operand's key and,
    /// where a pointwise region ends at the operand, the region's inputs
    /// (`kid`). The one place the canonical form is defined node by node:
    /// a view is its operand; a pointwise op is its value's label over the
    /// set of its region's inputs (left in `inputs`); a materialization or
    /// another op is its label over its operands' keys, and an op whose
    /// kernel writes its result to memory is keyed as materialized.
    pub(super) fn node_key<'r>(
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
    pub(super) fn needs_work(&self, c: usize, j: usize, work: impl Fn(u32) -> bool) -> bool {
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
    /// it (the same where nothing is stored). For the classes whose keys do
    /// not depend on how their operands are stored ([`memory::Memory`]'s
    /// `relevant` classes are never resolved through it by fixed,
    /// frontier-fixed or determined classes).
    pub(super) fn node_key_parts<'r>(
        &mut self,
        c: usize,
        j: usize,
        kid: impl Fn(u32) -> (u32, Option<&'r [u32]>),
        inputs: &mut Vec<u32>,
    ) -> (u32, u32) {
        self.node_key_parts_in(c, j, kid, |_| memory::ALL, inputs)
    }

    /// [`Enumerator::node_key_parts`] given for which readers each operand
    /// is a buffer or views of one (`loaded`): a slice, concatenation or
    /// splitting/merging reshape reads an operand that is not from a store
    /// of it (keyed `forced-store` over its key), which is an input of its
    /// region like a load.
    pub(super) fn node_key_parts_in<'r>(
        &mut self,
        c: usize,
        j: usize,
        kid: impl Fn(u32) -> (u32, Option<&'r [u32]>),
        loaded: impl Fn(u32) -> u8,
        inputs: &mut Vec<u32>,
    ) -> (u32, u32) {
        let m = self.mem.read[c][j];
        if m != 0 && self.kids[c][j].iter().any(|x| loaded(*x) & m == 0) {
            // The operands keyed first (in order), forced stores interned.
            let kids = self.kids[c][j].clone();
            let forced = self.mem.forced;
            let mut keys: Vec<(u32, KeyRegion<'r>)> = Vec::with_capacity(kids.len());
            for x in kids {
                let (k, r) = kid(x);
                let key = if loaded(x) & m == 0 {
                    (self.intern(forced, &[k]), None)
                } else {
                    (k, r)
                };
                keys.push((x, key));
            }
            // (Every operand is in `keys`.)
            let keyed = |x: u32| {
                keys.iter()
                    .find(|(y, _)| *y == x)
                    .map_or((u32::MAX, None), |(_, key)| *key)
            };
            return self.option_key(c, j, keyed, inputs);
        }
        self.option_key(c, j, kid, inputs)
    }

    /// The key of option `j` of class `c` given its operands' (`kid`), and
    /// the key before a kernel's store wraps it: the body of
    /// [`Enumerator::node_key_parts_in`].
    fn option_key<'r>(
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
    pub(super) fn intern_at(&mut self, slot: usize, label: u32, kids: &[u32]) -> u32 {
        let (k, last) = &self.intern_cache[slot];
        if *k != u32::MAX && last.first() == Some(&label) && last[1..] == *kids {
            return *k;
        }
        let k = self.intern(label, kids);
        let e = &mut self.intern_cache[slot];
        e.0 = k;
        e.1.clear();
        e.1.push(label);
        e.1.extend_from_slice(kids);
        k
    }

    pub(super) fn intern(&mut self, label: u32, kids: &[u32]) -> u32 {
        self.intern_buf.clear();
        self.intern_buf.push(label);
        self.intern_buf.extend_from_slice(kids);
        if let Some(k) = self.interner.get(self.intern_buf.as_slice()) {
            return *k;
        }
        let k = match &self.shared_keys {
            None => self.interner.len() as u32,
            Some(m) => {
                let mut m = m.lock().unwrap_or_else(|e| e.into_inner());
                let n = m.len() as u32;
                *m.entry(self.intern_buf.clone()).or_insert(n)
            }
        };
        self.interner.insert(self.intern_buf.clone(), k);
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
    pub(super) fn canon_parts(&mut self, s: &State) -> Canon {
        // Per-class results live in the scratch buffers, valid where their
        // stamp is this call's: the key of each class reached, the holes it
        // reaches, whether it needs work, and for classes computed by a
        // pointwise region, the region's inputs (sorted keys).
        self.det_fresh = false;
        let mut sc = std::mem::take(&mut self.scratch);
        sc.start(self.ids.len(), s.holes.len().div_ceil(64).max(1));
        let mut sorted_holes = std::mem::take(&mut sc.holes);
        sorted_holes.clear();
        sorted_holes.extend_from_slice(&s.holes);
        sorted_holes.sort_unstable();
        let mut invalid = false;
        let mut inputs = std::mem::take(&mut sc.inputs);
        let mut stack = std::mem::take(&mut sc.stack);
        stack.clear();
        // Classes keyed after their operands (depth first from the roots).
        stack.extend(self.roots.iter().rev().map(|r| (*r, false)));
        while let Some((c, done)) = stack.pop() {
            let ci = c as usize;
            if sc.has(ci) {
                continue;
            }
            let j = s.choice[ci];
            if j == NONE {
                self.key_hole(&mut sc, c, &sorted_holes);
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
            invalid |= self.key_class(&mut sc, c, ji, &mut inputs);
        }
        let mut roots = std::mem::take(&mut sc.roots);
        self.root_keys(s, &mut sc, !sorted_holes.is_empty(), &mut roots);
        let key = self.intern(ROOTS, &roots);
        invalid |= self.materializes_pure(&sc, &roots);
        invalid |= recomputes_stored(&mut sc);
        sc.holes = sorted_holes;
        sc.inputs = inputs;
        sc.stack = stack;
        sc.roots = roots;
        self.scratch = sc;
        Canon { key, invalid }
    }

    /// [`Enumerator::canon_parts`] for the hole `c`: keyed by itself, it
    /// needs work, is a buffer for every reader and reaches itself (its bit
    /// among the state's `sorted_holes`).
    fn key_hole(&self, sc: &mut Scratch, c: u32, sorted_holes: &[u32]) {
        let ci = c as usize;
        let hw = sc.hwords;
        sc.set(ci, self.hole_key[ci], true, NO_REGION);
        sc.loaded[ci] = memory::ALL;
        sc.hreach[ci * hw..(ci + 1) * hw].fill(0);
        if let Ok(i) = sorted_holes.binary_search(&c) {
            sc.hreach[ci * hw + i / 64] |= 1 << (i % 64);
        }
    }

    /// [`Enumerator::canon_parts`] for class `c`, resolved by its option
    /// `j` and with its operands keyed: its key, the holes it reaches,
    /// whether it needs work, the region it ends, and what the rules of the
    /// candidate space need (uses, stores, tuples). True when it already
    /// breaks one of those rules.
    fn key_class(&mut self, sc: &mut Scratch, c: u32, j: usize, inputs: &mut Vec<u32>) -> bool {
        let ci = c as usize;
        let hw = sc.hwords;
        sc.hreach[ci * hw..(ci + 1) * hw].fill(0);
        for x in &self.kids[ci][j] {
            let x = *x as usize;
            for w in 0..hw {
                sc.hreach[ci * hw + w] |= sc.hreach[x * hw + w];
            }
        }
        let w = self.needs_work(ci, j, |x| sc.work[x as usize]);
        let (k, inner) = self.node_key_parts_in(
            ci,
            j,
            |x| sc.key_region(x as usize),
            |x| sc.loaded[x as usize],
            inputs,
        );
        // (Only readers and the classes they read through views have
        // `loaded` bits that matter: see `memory::Memory::relevant`.)
        if self.mem.relevant[ci] {
            self.note_loaded(sc, c, j);
        }
        // The value a key computes, for keys that reach no hole (a key
        // with holes may still change shape: a hole resolved as a
        // pointwise op merges into the region reading it).
        if sc.hreach(ci).iter().all(|w| *w == 0) {
            if self.value_of_key.len() <= k as usize {
                self.value_of_key.resize(k as usize + 1, u32::MAX);
            }
            self.value_of_key[k as usize] = self.keyed_value[ci];
        }
        let invalid = self.note_uses(sc, c, j, k, inputs);
        if self.stores[ci][j].is_some() {
            sc.stored.push(inner);
        }
        let region = match self.kind[ci][j] {
            Kind::View => sc.region[self.kids[ci][j][0] as usize],
            Kind::Loop(_) if self.stores[ci][j].is_none() => {
                sc.region[self.kids[ci][j][0] as usize]
            }
            Kind::Pointwise(_) => {
                let a = sc.region_keys.len() as u32;
                sc.region_keys.extend_from_slice(inputs);
                sc.regions.push((a, sc.region_keys.len() as u32));
                sc.regions.len() as u32 - 1
            }
            Kind::Materialize(_) | Kind::Op(_) | Kind::Loop(_) => NO_REGION,
        };
        if self.arity[ci] > 0 || self.kids[ci][j].iter().any(|x| self.arity[*x as usize] > 0) {
            sc.tuples.push(c);
        }
        sc.set(ci, k, w, region);
        invalid
    }

    /// [`Enumerator::key_class`] for a class whose `loaded` bits matter
    /// (resolved by option `j`): its operands that a read forces into
    /// memory, computed with work and reaching no hole, are stored (by the
    /// rule of [`recomputes_stored`]: no other kernel computes them again);
    /// its own bits, and the digest entry they give.
    fn note_loaded(&self, sc: &mut Scratch, c: u32, j: usize) {
        let ci = c as usize;
        let m = self.mem.read[ci][j];
        if m != 0 {
            for x in &self.kids[ci][j] {
                let xi = *x as usize;
                if sc.loaded[xi] & m == 0 && sc.work[xi] && sc.hreach(xi).iter().all(|w| *w == 0) {
                    sc.stored.push(sc.memo[xi]);
                }
            }
        }
        sc.loaded[ci] = self.loaded_bits(ci, j, |x| sc.loaded[x as usize]);
        sc.digest.push((c, sc.loaded[ci]));
    }

    /// [`Enumerator::key_class`] for what option `j` of class `c` (keyed
    /// `k`, over `inputs`) uses and stores, for the rules checked at the
    /// end of [`Enumerator::canon_parts`]. True when the option breaks a
    /// rule already: a region that reads one value twice, or a
    /// materialization of a value without work that no result has.
    fn note_uses(&self, sc: &mut Scratch, c: u32, j: usize, k: u32, inputs: &[u32]) -> bool {
        let ci = c as usize;
        match self.kind[ci][j] {
            Kind::Pointwise(_) => {
                let invalid = self.reads_twice(inputs, &mut sc.vals);
                // A hole read by a region may yet merge into it (if it
                // is resolved as a pointwise op): not a use yet.
                let holes = &self.hole_keys;
                sc.used
                    .extend(inputs.iter().filter(|k| !holes.contains(*k)));
                invalid
            }
            Kind::Materialize(_) => {
                if sc.work[self.kids[ci][j][0] as usize] {
                    sc.stored.push(inputs[0]);
                    false
                } else {
                    // Materializes a value without work: only a result
                    // may (checked below, by key). A key names one
                    // value, so a materialization of a value that no
                    // result has never becomes a result's: invalid now
                    // (the rest of the check waits for the results).
                    let v = self.keyed_value[ci];
                    sc.pure.push(k);
                    !self
                        .roots
                        .iter()
                        .any(|r| self.keyed_value[*r as usize] == v)
                }
            }
            Kind::Op(_) => {
                sc.used.extend_from_slice(inputs);
                false
            }
            Kind::View | Kind::Loop(_) => false,
        }
    }

    /// The results' keys (into `roots`), and with `holes` (the state has
    /// some), the digest of `loaded` bits.
    fn root_keys(&mut self, s: &State, sc: &mut Scratch, holes: bool, roots: &mut Vec<u32>) {
        // A result computed whole by a pointwise op is stored like one
        // computed in tiles and combined.
        roots.clear();
        for i in 0..self.roots.len() {
            let ri = self.roots[i] as usize;
            let k = sc.memo[ri];
            let j = s.choice[ri];
            // (By the region the result ends, whatever e-node ends it: a
            // view of a region is the region.)
            let k = if j != NONE && sc.region[ri] != NO_REGION {
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
        // A partial program's form also says, for each class reached whose
        // realization a reader may read from memory, for which readers it is
        // a buffer or views of one: a reader still open (a hole) keys it
        // only once resolved, so two partial programs that differ there are
        // not the same (a complete program's readers key it already).
        if holes && !sc.digest.is_empty() {
            sc.digest.sort_unstable();
            for (c, b) in &sc.digest {
                roots.push(*c);
                roots.push(u32::from(*b));
            }
        }
    }

    /// The rule on materializations of values without work, given the
    /// results' keys (`roots`): each is a result's (by key, so that the
    /// rule depends only on the canonical form). While a result still
    /// reaches holes its key may yet become one of these, so the check
    /// waits (it stays monotone). True when it is broken.
    fn materializes_pure(&self, sc: &Scratch, roots: &[u32]) -> bool {
        let settled = self
            .roots
            .iter()
            .all(|r| sc.hreach(*r as usize).iter().all(|w| *w == 0));
        settled
            && sc.pure.iter().any(|k| {
                !roots.contains(k) && !self.roots.iter().any(|r| sc.memo[*r as usize] == *k)
            })
    }
}

/// The rule on stored values: a value computed with work and stored is not
/// computed again in another kernel, which could load it instead (kernels
/// write one buffer each, so a reader computing it is a second kernel).
/// True when it is broken (sorts `stored`).
fn recomputes_stored(sc: &mut Scratch) -> bool {
    sc.stored.sort_unstable();
    sc.stored.dedup();
    sc.used.iter().any(|k| sc.stored.binary_search(k).is_ok())
}
