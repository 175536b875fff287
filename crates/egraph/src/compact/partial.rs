//! Partial programs: a choice per class, the holes, the organization of
//! each value; choosing an option, one-option holes, cycles and the
//! one-organization rule.

use super::index::Enumerator;
use super::record::Counts;
use super::space::Mode;
use egg::{Id, SymbolLang};
use std::collections::HashMap;

#[derive(Clone)]
pub(super) struct State {
    pub(super) choice: Vec<u16>,
    pub(super) holes: Vec<u32>,
    /// The label of the op producing each value class, where one was chosen
    /// ([`UNORGANIZED`] elsewhere).
    pub(super) produced: Vec<u32>,
}

pub(super) const NONE: u16 = u16::MAX;

/// [`State::produced`] of a value whose organization is not chosen yet.
pub(super) const UNORGANIZED: u32 = u32::MAX;

impl<'a> Enumerator<'a> {
    /// The options of class `c` the enumeration tries: a fixed class has
    /// one under `early`.
    pub(super) fn choices(&self, mode: Mode, c: u32) -> std::ops::Range<usize> {
        match (mode, self.fixed[c as usize]) {
            (Mode::Early, Some(j)) => j as usize..j as usize + 1,
            _ => 0..self.options[c as usize].len(),
        }
    }

    /// Whether the one-organization rule lets class `c` choose its option
    /// `j` (once a value's organization is chosen it never changes).
    pub(super) fn allowed(&self, s: &State, c: u32, j: usize) -> bool {
        match self.kind[c as usize][j].org() {
            Some(l) => {
                let p = s.produced[self.value[c as usize] as usize];
                p == UNORGANIZED || p == l
            }
            None => true,
        }
    }

    /// Whether choosing e-node `j` for class `c` closes a cycle through the
    /// chosen e-nodes.
    pub(super) fn cycles(&self, s: &State, c: u32, j: usize) -> bool {
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
    pub(super) fn admissible(&self, s: &State, c: u32, j: usize) -> bool {
        self.allowed(s, c, j) && !self.cycles(s, c, j)
    }

    /// Choose option `j` for the hole `c` (removed from `s.holes` already):
    /// its unresolved operands become holes.
    pub(super) fn settle(&self, s: &mut State, c: u32, j: usize) {
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
    pub(super) fn force(&self, mode: Mode, s: &mut State, expanded: &mut usize) -> bool {
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

    /// Where in `s.holes` the hole [`Enumerator::expand`] resolves next is
    /// (see there; `None` when there are no holes).
    pub(super) fn next_hole(&self, s: &State) -> Option<usize> {
        let route = |i: &usize| self.route[s.holes[*i] as usize];
        if self.first_opened_first {
            (0..s.holes.len())
                .rev()
                .min_by_key(|i| (!route(i), if route(i) { 0 } else { *i }))
        } else {
            (0..s.holes.len()).rev().min_by_key(|i| !route(i))
        }
    }

    /// The first partial program: the roots are holes (one-option holes
    /// resolved). `None` when no completion is a candidate.
    pub(super) fn first(&mut self, mode: Mode, n: &mut Counts) -> Option<State> {
        let mut holes: Vec<u32> = Vec::new();
        for r in self.roots.iter().rev() {
            if !holes.contains(r) {
                holes.push(*r);
            }
        }
        let mut first = State {
            choice: vec![NONE; self.ids.len()],
            holes,
            produced: vec![UNORGANIZED; self.values],
        };
        self.force(mode, &mut first, &mut n.expanded)
            .then_some(first)
    }

    pub(super) fn chosen(&self, s: &State) -> HashMap<Id, SymbolLang> {
        s.choice
            .iter()
            .enumerate()
            .filter(|(_, j)| **j != NONE)
            .map(|(c, j)| (self.ids[c], self.options[c][*j as usize].clone()))
            .collect()
    }
}
