//! What a kernel reads through instead of storing: the slices and
//! concatenations that read their operands from memory (and the arithmetic
//! they compute where they load), and the returned views that a kernel
//! stores through (the merge of attention's heads).

use super::stateless;
use efir_ir::{Dim, Func, ValueId};
use indexmap::IndexSet;

/// A returned value that is only a view of a value computed for it (the
/// merge of attention's heads, `[B, H, S, D] -> transpose -> [B, S, H*D]`)
/// is written by the kernel computing that value, through the view (see
/// [`store_view`]), instead of being stored in its own layout and copied by
/// a kernel that reads it back through the view.
///
/// That holds where the returned value is reached from a buffer `x` by
/// reshapes and transposes of static extents without parallel state, at
/// least one reshape splitting or merging dims (transposes alone are
/// computed in place), and `x` (not a parameter or returned) and every
/// value of the chain have no other use: `x` then is no buffer of its own.
/// Returns those values `x`.
pub(super) fn stores_through_views(
    f: &Func,
    def: &[Option<usize>],
    buffer: &mut [bool],
) -> IndexSet<ValueId> {
    let mut out = IndexSet::new();
    let mut uses = vec![0usize; f.values.len()];
    for op in &f.ops {
        for o in &op.operands {
            uses[o.index()] += 1;
        }
    }
    for r in &f.returns {
        uses[r.index()] += 1;
    }
    for &r in &f.returns {
        let Some((chain, x)) = view_chain(f, def, r) else {
            continue;
        };
        let single = chain[1..]
            .iter()
            .all(|v| uses[v.index()] == 1 && !buffer[v.index()]);
        let computed = def[x.index()]
            .is_some_and(|i| f.ops[i].name != "par.collect" && f.ty(x).as_tensor().is_some());
        if buffer[x.index()] && single && computed && uses[x.index()] == 1 {
            buffer[x.index()] = false;
            out.insert(x);
        }
    }
    out
}

/// The reshapes and transposes from `root` down to the first value that is
/// not one (`root` first, that value last), where every value on the way is
/// stateless with static extents and one reshape splits or merges dims.
fn view_chain(f: &Func, def: &[Option<usize>], root: ValueId) -> Option<(Vec<ValueId>, ValueId)> {
    let mut chain = Vec::new();
    let mut v = root;
    let mut regroups = false;
    let plain = |v: ValueId| stateless(f.ty(v)) && all_static(f, v);
    while let Some(i) = def[v.index()] {
        let op = &f.ops[i];
        if !matches!(op.name.as_str(), "tensor.reshape" | "tensor.transpose") {
            break;
        }
        if !plain(v) || !plain(op.operands[0]) {
            return None;
        }
        regroups |= op.name == "tensor.reshape" && splits_or_merges(f, op.operands[0], v);
        chain.push(v);
        v = op.operands[0];
    }
    (regroups && !chain.is_empty()).then_some((chain, v))
}

/// Where the kernel writing buffer `root` computes another value and stores
/// it through views into `root` (see [`stores_through_views`]): the chain of
/// views (`root` first) and the value computed.
pub fn store_view(
    f: &Func,
    def: &[Option<usize>],
    buffer: &[bool],
    root: ValueId,
) -> Option<(Vec<ValueId>, ValueId)> {
    let (chain, x) = view_chain(f, def, root)?;
    (!buffer[x.index()] && def[x.index()].is_some()).then_some((chain, x))
}

/// Whether every use of `v` is a slice or a concatenation, under parallel
/// views, transposes and reshapes (which they read through), and `v` is no
/// returned value.
pub(super) fn only_sliced(f: &Func, users: &[Vec<usize>], v: ValueId) -> bool {
    !f.returns.contains(&v)
        && users[v.index()].iter().all(|&u| {
            let op = &f.ops[u];
            match op.name.as_str() {
                "tensor.slice" | "tensor.concat" => true,
                "tensor.transpose" | "tensor.reshape" | "par.partition" | "par.replicate"
                | "par.combine" => only_sliced(f, users, op.result),
                _ => false,
            }
        })
}

/// The pointwise ops that a slice or concatenation computes on what it
/// reads (`emit/slices.rs`).
pub(crate) const READ_ARITH: [&str; 5] = ["ew.add", "ew.sub", "ew.mul", "ew.div", "ew.neg"];

/// Whether a slice or concatenation can read `v` without a store: a buffer
/// or parameter under parallel views, slices, transposes and reshapes of
/// static extents, and the arithmetic of [`READ_ARITH`] and concatenations
/// on such values, in at most [`READ_NODES`] values (what the reader
/// recomputes where it loads: a value shared by several operands counts
/// each time, as the reader emits it each time).
pub(super) fn readable(f: &Func, def: &[Option<usize>], buffer: &[bool], v: ValueId) -> bool {
    let mut budget = READ_NODES;
    readable_within(f, def, buffer, v, &mut budget)
}

/// The most values a slice or concatenation reads through (see
/// [`readable`]).
const READ_NODES: usize = 48;

fn readable_within(
    f: &Func,
    def: &[Option<usize>],
    buffer: &[bool],
    v: ValueId,
    budget: &mut usize,
) -> bool {
    if *budget == 0 {
        return false;
    }
    *budget -= 1;
    if buffer[v.index()] || f.ty(v).as_tensor().is_none() {
        return buffer[v.index()];
    }
    let Some(i) = def[v.index()] else {
        return true;
    };
    let d = &f.ops[i];
    let mut each = |a: ValueId| readable_within(f, def, buffer, a, budget);
    match d.name.as_str() {
        "par.partition" | "par.replicate" | "par.combine" | "tensor.slice" => each(d.operands[0]),
        "tensor.reshape" | "tensor.transpose" => {
            all_static(f, v) && all_static(f, d.operands[0]) && each(d.operands[0])
        }
        n if READ_ARITH.contains(&n) || n == "tensor.concat" => {
            all_static(f, v) && d.operands.iter().all(|a| each(*a))
        }
        _ => false,
    }
}

/// Whether every dim of `v` (a tensor) is static.
pub(super) fn all_static(f: &Func, v: ValueId) -> bool {
    f.ty(v)
        .as_tensor()
        .is_some_and(|t| t.shape.iter().all(|d| matches!(d, Dim::Static(_))))
}

/// Whether reshaping `a` to `r` splits or merges dims (beyond adding or
/// dropping dims of extent 1).
pub(super) fn splits_or_merges(f: &Func, a: ValueId, r: ValueId) -> bool {
    f.ty(a).non_unit_dims() != f.ty(r).non_unit_dims()
}
