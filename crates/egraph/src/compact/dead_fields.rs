//! Dead tuple fields: how e-nodes read tuple fields, and the rule that no
//! program builds a field nothing reads (on complete programs, and bounded
//! from above on partial ones).

use super::index::Enumerator;
use super::partial::{State, NONE};
use crate::analysis::EGraph;
use crate::convert::node_attrs;
use egg::SymbolLang;
use rustc_hash::{FxHashMap, FxHashSet};

/// How an e-node reads the fields of its tuple-typed operands.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum FieldUse {
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

impl<'a> Enumerator<'a> {
    /// Every field of the tuple-typed class `c`, as bits.
    pub(super) fn all_fields(&self, c: u32) -> u64 {
        (1u64 << self.arity[c as usize].min(63)) - 1
    }

    /// The fields of its operand `k` that an e-node reading them as `how`
    /// needs, when its own live fields are `here`.
    pub(super) fn fields_read(&self, how: FieldUse, here: u64, k: u32) -> u64 {
        match how {
            FieldUse::Get(i) => 1u64 << i.min(63),
            FieldUse::Fieldwise => here,
            FieldUse::Construct | FieldUse::All => self.all_fields(k),
        }
    }

    /// [`Enumerator::tuple_reads`]: a fixed point over the e-graph (it may
    /// have cycles), merging fields per tuple class.
    pub(super) fn tuple_readers(&self) -> Vec<Vec<(u32, u64)>> {
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
    pub(super) fn dead_field(&self, s: &State) -> bool {
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
    pub(super) fn dead_field_partial(&mut self, s: &State) -> bool {
        let mut live = std::mem::take(&mut self.live_by_key);
        let mut live_by_value = std::mem::take(&mut self.live_by_value);
        let dead = self.dead_field_bound(s, &mut live, &mut live_by_value);
        self.live_by_key = live;
        self.live_by_value = live_by_value;
        dead
    }

    /// [`Enumerator::dead_field_partial`] with its buffers.
    pub(super) fn dead_field_bound(
        &self,
        s: &State,
        live: &mut FxHashMap<u64, u64>,
        live_by_value: &mut FxHashMap<u32, u64>,
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
        let val = |c: u32| VAL | u64::from(self.keyed_value[c as usize]);
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
            for &(k, bits) in &self.tuple_reads[*h as usize] {
                *live.entry(slot(k)).or_insert(0) |= bits;
            }
        }
        let get = |live: &FxHashMap<u64, u64>, k: u64| live.get(&k).copied().unwrap_or(0);
        // Live fields only grow: propagate to a fixed point. A class whose
        // key may still change reads as much as any key of its value.
        let mut changed = true;
        while changed {
            changed = false;
            live_by_value.clear();
            for &c in &sc.tuples {
                if self.arity[c as usize] > 0 {
                    let here = get(live, slot(c)) | get(live, val(c));
                    *live_by_value
                        .entry(self.keyed_value[c as usize])
                        .or_insert(0) |= here;
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
                    live_by_value
                        .get(&self.keyed_value[ci])
                        .copied()
                        .unwrap_or(0)
                        | get(live, val(c))
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
                    live_by_value
                        .get(&self.keyed_value[c as usize])
                        .copied()
                        .unwrap_or(0)
                };
                (bound | get(live, val(c))) != all(c)
            }
        })
    }
}

/// How an e-node reads the fields of its tuple operands.
pub(super) fn field_use(eg: &EGraph, n: &SymbolLang) -> FieldUse {
    let attr = |k: &str| {
        node_attrs(eg, n)
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
