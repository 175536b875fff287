//! Fixed and frontier-fixed classes: classes whose every realization has
//! one key (or one outcome over its frontier), which `early` resolves with
//! one option.

use super::fixpoint::{agree_bottom_up, readers_of, sweep_to_fixpoint, Readers};
use super::index::Enumerator;
use super::kinds::Kind;
use rustc_hash::FxHashMap;

/// The outcome of a realization in [`Enumerator::frontier_fixed`]:
/// whether it ends a pointwise region, and its symbolic key.
pub(super) type Outcome = (bool, u64);

/// What a symbolic key of [`Terms`] is (its first word; its parts
/// follow).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub(super) enum Term {
    /// A frontier class itself, a variable: over its class.
    Frontier = 0,
    /// A fixed class's key (or an input of a fixed class's region): over
    /// the key.
    Key = 1,
    /// A fixed class that ends a pointwise region: over its key (the
    /// region's inputs are the term's inputs).
    Region = 3,
    /// A pointwise op: over its label and the set of its region's inputs.
    Pointwise = 4,
    /// A materialization, or a kernel's store of an op's result: over its
    /// label and its operand.
    Stored = 5,
    /// Another op: over its label and its operands.
    Op = 6,
}

/// Symbolic keys over frontier classes, interned, with the inputs of the
/// regions among them.
#[derive(Default)]
pub(super) struct Terms {
    pub(super) ids: FxHashMap<Vec<u64>, u64>,
    pub(super) inputs: Vec<Vec<u64>>,
    /// The lookup buffer.
    buf: Vec<u64>,
}

impl Terms {
    /// The number of the term `what` over `parts`, with the inputs of the
    /// region it ends (if it ends one).
    pub(super) fn get(&mut self, what: Term, parts: &[u64], inputs: Option<Vec<u64>>) -> u64 {
        self.buf.clear();
        self.buf.push(what as u64);
        self.buf.extend_from_slice(parts);
        if let Some(id) = self.ids.get(self.buf.as_slice()) {
            return *id;
        }
        let n = self.ids.len() as u64;
        self.ids.insert(self.buf.clone(), n);
        self.inputs.push(inputs.unwrap_or_default());
        n
    }

    pub(super) fn inputs(&self, t: u64) -> &[u64] {
        &self.inputs[t as usize]
    }
}

/// The key of a fixed class, and the inputs of the region it ends, if any
/// (their number in [`Regions`]).
pub(super) type FixedKey = Option<(u32, Option<u32>)>;

/// The inputs of regions, interned (equal numbers for equal inputs).
#[derive(Default)]
pub(super) struct Regions {
    numbers: FxHashMap<Vec<u32>, u32>,
    inputs: Vec<Vec<u32>>,
}

impl Regions {
    fn number(&mut self, inputs: &[u32]) -> u32 {
        if let Some(r) = self.numbers.get(inputs) {
            return *r;
        }
        let r = self.inputs.len() as u32;
        self.numbers.insert(inputs.to_vec(), r);
        self.inputs.push(inputs.to_vec());
        r
    }

    pub(super) fn inputs(&self, r: u32) -> &[u32] {
        &self.inputs[r as usize]
    }
}

impl<'a> Enumerator<'a> {
    /// The classes that read each class (an option has it as an operand),
    /// each once.
    pub(super) fn readers(&self) -> Readers {
        readers_of(&self.kids)
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
    pub(super) fn fixed_options(
        &mut self,
        parents: &Readers,
    ) -> (Vec<Option<u16>>, Vec<FixedKey>, Regions) {
        let n = self.ids.len();
        let mut regions = Regions::default();
        let mut other_op = vec![false; n];
        for c in 0..n {
            for j in 0..self.options[c].len() {
                if matches!(self.kind[c][j], Kind::Op(_) | Kind::Loop(_)) && !self.leaf[c][j] {
                    other_op[self.value[c] as usize] = true;
                }
            }
        }
        // (Classes whose realization may change how a reader reads them
        // from memory are never fixed: see `memory::Memory::relevant`.)
        let mut cand: Vec<bool> = (0..n)
            .map(|c| !other_op[self.value[c] as usize] && !self.mem.relevant[c])
            .collect();
        let mut result_value = vec![false; n];
        for r in &self.roots {
            result_value[self.keyed_value[*r as usize] as usize] = true;
        }
        let options: Vec<usize> = self.options.iter().map(Vec::len).collect();
        loop {
            // Greatest set closed under "every option is a leaf, a view or
            // pointwise over candidates (or an invalid materialization)".
            sweep_to_fixpoint(n, parents, |c| {
                if !cand[c] {
                    return false;
                }
                let ok = (0..self.options[c].len()).all(|j| {
                    self.leaf[c][j]
                        || match self.kind[c][j] {
                            Kind::View | Kind::Pointwise(_) => {
                                self.kids[c][j].iter().all(|k| cand[*k as usize])
                            }
                            // Invalid unless its key is a result's, which
                            // needs a result of the same value.
                            Kind::Materialize(_) => {
                                !result_value[self.keyed_value[c] as usize]
                                    && self.kids[c][j].iter().all(|k| cand[*k as usize])
                            }
                            Kind::Op(_) | Kind::Loop(_) => false,
                        }
                });
                if !ok {
                    cand[c] = false;
                    return true;
                }
                false
            });
            // Keys bottom up (least fixed point): an option counts once its
            // operands have keys; every counted option must agree.
            let mut inputs: Vec<u32> = Vec::new();
            let keyed = agree_bottom_up(parents, &cand, &options, |c, j, key: &[FixedKey]| {
                if matches!(self.kind[c][j], Kind::Materialize(_)) {
                    return None;
                }
                if self.kids[c][j].iter().any(|k| key[*k as usize].is_none()) {
                    return None;
                }
                let k = self.node_key(
                    c,
                    j,
                    |x| {
                        let (k, r) = key[x as usize].expect("operands are keyed");
                        (k, r.map(|r| regions.inputs(r)))
                    },
                    &mut inputs,
                );
                let region = match self.kind[c][j] {
                    Kind::View => key[self.kids[c][j][0] as usize].and_then(|(_, r)| r),
                    Kind::Pointwise(_) => Some(regions.number(&inputs)),
                    _ => None,
                };
                Some((k, region))
            });
            if !keyed.shrink(&mut cand) {
                let picks = (0..n)
                    .map(|c| if cand[c] { keyed.picks[c] } else { None })
                    .collect();
                let keys = keyed
                    .values
                    .into_iter()
                    .zip(&cand)
                    .map(|(k, c)| if *c { k } else { None })
                    .collect();
                return (picks, keys, regions);
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
    pub(super) fn frontier_fixed(
        &self,
        fixed: &[Option<u16>],
        keys: &[FixedKey],
        regions: &Regions,
        parents: &Readers,
    ) -> Vec<Option<u16>> {
        let n = self.ids.len();
        // Candidates: not fixed, and every option that organizes a value
        // does so for a value with one organization (so the rule never
        // excludes it).
        let mut cand: Vec<bool> = (0..n)
            .map(|c| {
                fixed[c].is_none()
                    && !self.mem.relevant[c]
                    && (0..self.options[c].len()).all(|j| {
                        self.kind[c][j].org().is_none()
                            || !self.several_orgs[self.value[c] as usize]
                    })
            })
            .collect();
        let options: Vec<usize> = self.options.iter().map(Vec::len).collect();
        loop {
            let mut terms = Terms::default();
            let outcomes = agree_bottom_up(parents, &cand, &options, |c, j, out| {
                // What each operand contributes: a candidate's outcome once
                // known, a fixed class's key (and its region's inputs), a
                // frontier class itself.
                let mut parts: Vec<Outcome> = Vec::new();
                for &x in &self.kids[c][j] {
                    let x = x as usize;
                    let p = if cand[x] {
                        out[x]?
                    } else if let Some((k, r)) = keys[x] {
                        match r {
                            Some(r) => {
                                let inputs: Vec<u64> = regions
                                    .inputs(r)
                                    .iter()
                                    .map(|k| terms.get(Term::Key, &[u64::from(*k)], None))
                                    .collect();
                                (true, terms.get(Term::Region, &[u64::from(k)], Some(inputs)))
                            }
                            None => (false, terms.get(Term::Key, &[u64::from(k)], None)),
                        }
                    } else {
                        (false, terms.get(Term::Frontier, &[x as u64], None))
                    };
                    parts.push(p);
                }
                Some(self.outcome(c, j, &parts, &mut terms))
            });
            if !outcomes.shrink(&mut cand) {
                return (0..n)
                    .map(|c| if cand[c] { outcomes.picks[c] } else { None })
                    .collect();
            }
        }
    }

    /// The outcome of option `j` of class `c` given its operands': the
    /// symbolic form of [`Enumerator::node_key_parts`] over frontier
    /// classes.
    pub(super) fn outcome(
        &self,
        c: usize,
        j: usize,
        parts: &[Outcome],
        terms: &mut Terms,
    ) -> Outcome {
        let stored = |t: u64, terms: &mut Terms| match self.stores[c][j] {
            Some(m) => (false, terms.get(Term::Stored, &[u64::from(m), t], None)),
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
                let mut v = vec![u64::from(label)];
                v.extend_from_slice(&inputs);
                (true, terms.get(Term::Pointwise, &v, Some(inputs)))
            }
            Kind::Materialize(label) => (
                false,
                terms.get(Term::Stored, &[u64::from(label), parts[0].1], None),
            ),
            Kind::Op(label) => {
                let mut v = vec![u64::from(label)];
                v.extend(parts.iter().map(|p| p.1));
                let t = terms.get(Term::Op, &v, None);
                stored(t, terms)
            }
        }
    }

    /// Turn the fixed-class shortcut of `early` off (an ablation, used to
    /// test that it loses no class) or back on.
    pub fn use_fixed_classes(&mut self, on: bool) {
        self.set_fixed(on);
    }

    /// Fixed and frontier-fixed classes on or off.
    pub(super) fn set_fixed(&mut self, on: bool) {
        let n = self.ids.len();
        if !on {
            self.fixed = vec![None; n];
            self.opaque = vec![false; n];
            return;
        }
        let parents = self.readers();
        let (fixed, keys, regions) = self.fixed_options(&parents);
        self.opaque = fixed.iter().map(Option::is_some).collect();
        let frontier = self.frontier_fixed(&fixed, &keys, &regions, &parents);
        self.fixed = (0..n).map(|c| fixed[c].or(frontier[c])).collect();
    }
}
