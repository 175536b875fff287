//! Fixed points over the classes of an e-graph (which may have cycles):
//! readers, sweeps that re-evaluate only what changed, and agreement of
//! options.

/// Record what option `j` of a class gives in a bottom-up pass where every
/// realizable option must agree: the first is kept (and picked), a
/// different one marks the class `bad`. True when anything changed.
pub(super) fn agree<T: PartialEq>(
    slot: &mut Option<T>,
    pick: &mut Option<u16>,
    bad: &mut bool,
    v: T,
    j: usize,
) -> bool {
    match slot {
        None => {
            *slot = Some(v);
            *pick = Some(j as u16);
            true
        }
        Some(prev) if *prev != v => {
            *bad = true;
            true
        }
        Some(_) => false,
    }
}

/// The classes that read each class (see [`readers_of`]), as ranges of
/// one array.
pub(super) struct Readers {
    start: Vec<u32>,
    list: Vec<u32>,
}

impl Readers {
    /// The classes that read class `c`, in increasing order.
    pub(super) fn of(&self, c: usize) -> &[u32] {
        &self.list[self.start[c] as usize..self.start[c + 1] as usize]
    }
}

/// The classes that read each class, given each class's options' operands
/// (`kids[c][j]`), each reader once.
pub(super) fn readers_of(kids: &[Vec<Vec<u32>>]) -> Readers {
    let n = kids.len();
    // Each reader `c` of `k` once: `last[k]` is the last one seen.
    let mut last = vec![u32::MAX; n];
    let mut start = vec![0u32; n + 1];
    for (c, opts) in kids.iter().enumerate() {
        for &k in opts.iter().flatten() {
            if std::mem::replace(&mut last[k as usize], c as u32) != c as u32 {
                start[k as usize + 1] += 1;
            }
        }
    }
    for i in 0..n {
        start[i + 1] += start[i];
    }
    last.fill(u32::MAX);
    let mut fill: Vec<u32> = start[..n].to_vec();
    let mut list = vec![0u32; start[n] as usize];
    for (c, opts) in kids.iter().enumerate() {
        for &k in opts.iter().flatten() {
            if std::mem::replace(&mut last[k as usize], c as u32) != c as u32 {
                let f = &mut fill[k as usize];
                list[*f as usize] = c as u32;
                *f += 1;
            }
        }
    }
    Readers { start, list }
}

/// Run `eval` over classes `0..n` to a fixed point with the result of
/// repeated sweeps `for c in 0..n { changed |= eval(c) }` until a sweep
/// changes nothing, evaluating in the same order, but only the classes that
/// an operand's change can affect: all of them in the first sweep, then
/// those with an operand (`parents` gives the readers of each class) that
/// changed since their last evaluation. `eval(c)` must depend only on `c`'s
/// own state and its operands', and change nothing when none of those
/// changed since its last call. Plain sweeps were quadratic on long chains
/// whose readers come before their operands (one sweep per link).
pub(super) fn sweep_to_fixpoint(n: usize, parents: &Readers, mut eval: impl FnMut(usize) -> bool) {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut now: BinaryHeap<Reverse<u32>> = BinaryHeap::new();
    let mut in_now = vec![false; n];
    let mut next: Vec<u32> = Vec::new();
    let mut in_next = vec![false; n];
    // The first sweep, in order: a reader after `c` is evaluated later in
    // it anyway.
    for c in 0..n {
        if !eval(c) {
            continue;
        }
        for &p in parents.of(c) {
            let pu = p as usize;
            if pu <= c && !in_next[pu] {
                in_next[pu] = true;
                next.push(p);
            }
        }
    }
    if next.is_empty() {
        return;
    }
    for p in next.drain(..) {
        in_next[p as usize] = false;
        in_now[p as usize] = true;
        now.push(Reverse(p));
    }
    loop {
        while let Some(Reverse(c)) = now.pop() {
            let c = c as usize;
            in_now[c] = false;
            if !eval(c) {
                continue;
            }
            for &p in parents.of(c) {
                let pu = p as usize;
                if pu > c {
                    if !in_now[pu] {
                        in_now[pu] = true;
                        now.push(Reverse(p));
                    }
                } else if !in_next[pu] {
                    in_next[pu] = true;
                    next.push(p);
                }
            }
        }
        if next.is_empty() {
            return;
        }
        for p in next.drain(..) {
            in_next[p as usize] = false;
            in_now[p as usize] = true;
            now.push(Reverse(p));
        }
    }
}

/// Drop from `cand` the classes that are `bad` or got no value; true when
/// any was dropped (the pass runs again on the smaller set).
pub(super) fn shrink(cand: &mut [bool], bad: &[bool], defined: impl Fn(usize) -> bool) -> bool {
    let mut shrunk = false;
    for c in 0..cand.len() {
        if cand[c] && (bad[c] || !defined(c)) {
            cand[c] = false;
            shrunk = true;
        }
    }
    shrunk
}

/// What [`agree_bottom_up`] found: per class, the value every realizable
/// option gives it (`None` where none does), the option that gave it
/// first, and whether two options disagree (`bad`).
pub(super) struct Agreed<T> {
    pub(super) values: Vec<Option<T>>,
    pub(super) picks: Vec<Option<u16>>,
    pub(super) bad: Vec<bool>,
}

/// One bottom-up pass (a least fixed point) over the classes in `cand`,
/// in which every realizable option of a class must give it the same
/// value: `value(c, j, values)` is what option `j` of class `c` gives,
/// given the values found so far, or `None` where it is not realizable (yet:
/// say its operands have none); `options[c]` is how many options class `c`
/// has. A class's value is its first realizable option's ([`agree`]).
pub(super) fn agree_bottom_up<T: PartialEq>(
    parents: &Readers,
    cand: &[bool],
    options: &[usize],
    mut value: impl FnMut(usize, usize, &[Option<T>]) -> Option<T>,
) -> Agreed<T> {
    let n = cand.len();
    let mut values: Vec<Option<T>> = (0..n).map(|_| None).collect();
    let mut picks = vec![None; n];
    let mut bad = vec![false; n];
    sweep_to_fixpoint(n, parents, |c| {
        if !cand[c] || bad[c] {
            return false;
        }
        let mut changed = false;
        for j in 0..options[c] {
            if let Some(v) = value(c, j, &values) {
                changed |= agree(&mut values[c], &mut picks[c], &mut bad[c], v, j);
            }
        }
        changed
    });
    Agreed { values, picks, bad }
}

impl<T> Agreed<T> {
    /// Drop from `cand` the classes whose options disagree or that got no
    /// value; true when any was dropped (see [`shrink`]).
    pub(super) fn shrink(&self, cand: &mut [bool]) -> bool {
        shrink(cand, &self.bad, |c| self.values[c].is_some())
    }
}
