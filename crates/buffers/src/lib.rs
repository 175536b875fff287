//! Which values of a program live in global memory: the cut of a program
//! into kernels that both compaction (its `kernels` attribute and
//! materialized bytes, `efir_egraph::compact::candidates::summary`) and the
//! lowering (`efir_triton::plan`) make, written once so that the two agree.
//!
//! Every value that is a buffer, other than a parameter, is written by one
//! kernel; everything else is computed inside the kernels that read it.
//! The rules, in order ([`cut`]):
//! - parameters, results, `par.collect` buffers, and values without parallel
//!   state made by a matmul, a reduction or a combine are buffers;
//! - less the epilogues: a reduction or matmul whose uses, down to one
//!   buffer, are pointwise ops of its own shape ([`cut`]'s `broadcast` also
//!   lets row statistics reach several buffers through broadcasts);
//! - plus what a slice, a concatenation or a reshape that splits or merges
//!   dims cannot read through index arithmetic (views, broadcasts of
//!   key/value heads, and for slices and concatenations the arithmetic of
//!   [`READ_ARITH`] computed where they load);
//! - less the values a kernel stores through views into a returned value
//!   ([`store_view`]).

use efir_ir::{AxisState, Dim, Func, Type, ValueId};
use indexmap::IndexSet;

fn stateless(t: &Type) -> bool {
    t.leaves().iter().all(|l| l.state.is_empty())
}

/// The cut of a function into kernels (see the crate's documentation).
#[derive(Clone, Debug)]
pub struct Cut {
    /// The op defining each value (by index), `None` for parameters.
    pub def: Vec<Option<usize>>,
    /// Whether each value lives in global memory.
    pub buffer: Vec<bool>,
    /// Why the program cannot be lowered, where a read from memory meets
    /// partial results (the first such read); the cut is still complete,
    /// with that value a buffer.
    pub error: Option<String>,
}

impl Cut {
    /// The number of kernels: buffers that an op computes.
    pub fn kernels(&self) -> usize {
        self.def
            .iter()
            .zip(&self.buffer)
            .filter(|(d, b)| d.is_some() && **b)
            .count()
    }
}

/// Cut `f` into kernels. With `broadcast`, a row statistic (a reduction read
/// through broadcasts) is recomputed by each kernel that reads it instead of
/// being a buffer of its own (see [`epilogues`]).
pub fn cut(f: &Func, broadcast: bool) -> Cut {
    let n = f.values.len();
    let mut def = vec![None; n];
    for (i, op) in f.ops.iter().enumerate() {
        def[op.result.index()] = Some(i);
    }
    let mut buffer = vec![false; n];
    let mut error = None;
    for p in &f.params {
        buffer[p.index()] = true;
    }
    for r in &f.returns {
        buffer[r.index()] = true;
    }
    for op in &f.ops {
        let ty = f.ty(op.result);
        let name = op.name.as_str();
        if name == "par.collect"
            || (stateless(ty)
                && matches!(
                    name,
                    "par.combine"
                        | "par.reduce"
                        | "tensor.reduce"
                        | "tile.matmul"
                        | "tensor.matmul"
                ))
        {
            buffer[op.result.index()] = true;
        }
    }
    epilogues(f, &def, &mut buffer, broadcast, &IndexSet::new());
    // Slices and concatenations read their operands from memory at shifted
    // offsets, so an operand computed by an op (under parallel views,
    // slices, transposes and reshapes of static extents: their index
    // arithmetic composes, see `emit/slices.rs`) is stored.
    // Likewise a reshape that splits or merges dims: its block is loaded
    // through index arithmetic (see `emit/views.rs`), under reshapes,
    // transposes and broadcasts.
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, op) in f.ops.iter().enumerate() {
        for o in &op.operands {
            users[o.index()].push(i);
        }
    }
    for op in &f.ops {
        let reads_memory = match op.name.as_str() {
            "tensor.slice" | "tensor.concat" => true,
            // (A reshape that only slices and concatenations read, through
            // views, is read through by them: they read its operand.)
            "tensor.reshape" => {
                splits_or_merges(f, op.operands[0], op.result) && !only_sliced(f, &users, op.result)
            }
            _ => false,
        };
        if !reads_memory {
            continue;
        }
        let mut stack: Vec<ValueId> = op.operands.clone();
        while let Some(o) = stack.pop() {
            let mut v = o;
            while let Some(i) = def[v.index()] {
                let d = &f.ops[i];
                if buffer[v.index()] {
                    break;
                }
                let view = match d.name.as_str() {
                    "par.partition" | "par.replicate" | "par.combine" => true,
                    "tensor.slice" => op.name != "tensor.reshape",
                    "tensor.reshape" | "tensor.transpose" => {
                        op.name == "tensor.reshape"
                            || (all_static(f, v) && all_static(f, d.operands[0]))
                    }
                    // A splitting or merging reshape reads a broadcast
                    // (key/value heads repeated to their query group) at
                    // index 0 of its stretched dims (`emit/views.rs`; of
                    // the same rank).
                    "tensor.broadcast" => {
                        op.name == "tensor.reshape"
                            && all_static(f, v)
                            && f.ty(v).as_tensor().map(|t| t.shape.len())
                                == f.ty(d.operands[0]).as_tensor().map(|t| t.shape.len())
                    }
                    _ => false,
                };
                if view {
                    v = d.operands[0];
                    continue;
                }
                // Slices and concatenations compute arithmetic on what they
                // can read where they load it (a bias added to a stored
                // projection, a negated half of a head), instead of storing
                // it (`emit/slices.rs`).
                if op.name != "tensor.reshape"
                    && (READ_ARITH.contains(&d.name.as_str()) || d.name == "tensor.concat")
                    && all_static(f, v)
                    && d.operands.iter().all(|a| readable(f, &def, &buffer, *a))
                {
                    stack.extend(d.operands.iter().copied());
                    break;
                }
                let partial = f.ty(v).leaves().iter().find_map(|l| {
                    l.state
                        .iter()
                        .find(|(_, s)| matches!(s, AxisState::Partial(_)))
                        .map(|(a, _)| a.clone())
                });
                if let (Some(a), None) = (partial, &error) {
                    error = Some(format!(
                        "`{}` reads `%{}` from memory, but it holds partial results over @{a} (finish them with par.reduce first)",
                        op.name,
                        f.value(v).name
                    ));
                }
                buffer[v.index()] = true;
                break;
            }
        }
    }
    let through = stores_through_views(f, &def, &mut buffer);
    if !through.is_empty() {
        // A matmul or reduction whose uses end in such a value is that
        // kernel's too (a matmul, then exp, then a split of heads).
        epilogues(f, &def, &mut buffer, false, &through);
    }
    Cut { def, buffer, error }
}

/// Fuse epilogues: a reduction or matmul without parallel state (a buffer
/// by the rule above) whose every use is a pointwise op or a tuple field of
/// its own shape, down to exactly one buffer, is computed by that buffer's
/// kernel instead of being stored and read back (the division and cast after
/// an online-softmax reduction, a cast after a matmul).
///
/// With `broadcast`, a reduction's value may also reach its buffers through
/// broadcasting pointwise ops and reshapes that add or drop unit dims (the
/// mean or inverse RMS of a row applied to the row), in any number of
/// buffers: each of their kernels recomputes it (a loop over the row before
/// the pointwise work) instead of reading it from a kernel of its own;
/// also where the broadcast row is a matmul's left operand (a normalized
/// row and its projection: the statistics loops run before the K loop).
///
/// With values in `through` (computed values that kernels store through
/// views, see [`stores_through_views`]), only the reductions and matmuls
/// whose one target is among them are fused (the rest was decided before).
fn epilogues(
    f: &Func,
    def: &[Option<usize>],
    buffer: &mut [bool],
    broadcast: bool,
    through: &IndexSet<ValueId>,
) {
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); f.values.len()];
    for (i, op) in f.ops.iter().enumerate() {
        for o in &op.operands {
            users[o.index()].push(i);
        }
    }
    let shape_of = |v: ValueId| -> Option<Vec<Dim>> {
        let ls = f.ty(v).leaves();
        let s = ls.first()?.shape.clone();
        ls.iter()
            .all(|l| l.shape == s && l.state.is_empty())
            .then_some(s)
    };
    for op in &f.ops {
        let v = op.result;
        if !buffer[v.index()]
            || f.returns.contains(&v)
            || !matches!(
                op.name.as_str(),
                "par.reduce" | "tensor.reduce" | "tile.matmul" | "tensor.matmul"
            )
        {
            continue;
        }
        let Some(shape) = shape_of(v) else { continue };
        let reduction = broadcast && op.name != "tile.matmul" && op.name != "tensor.matmul";
        let mut targets: IndexSet<ValueId> = IndexSet::new();
        let mut stack = vec![v];
        let mut seen: IndexSet<ValueId> = IndexSet::new();
        let mut ok = true;
        while let Some(x) = stack.pop() {
            if !seen.insert(x) {
                continue;
            }
            if users[x.index()].is_empty() && x != v && !f.returns.contains(&x) {
                continue;
            }
            for &u in &users[x.index()] {
                let uop = &f.ops[u];
                let y = uop.result;
                let pointwise = uop.name.starts_with("ew.") || uop.name == "tensor.get";
                let same = shape_of(y).as_ref() == Some(&shape);
                // In broadcast mode any consumer but one that reads its
                // operand from memory (slices, concatenations, reshapes that
                // split or merge dims) computes from it in place; a matmul
                // only from the rows of its left operand.
                let spread = reduction
                    && match uop.name.as_str() {
                        "tensor.slice" | "tensor.concat" => false,
                        // A row statistic broadcast back against its rows
                        // (a normalized row) that is a matmul's left
                        // operand: each program of the matmul's kernel
                        // recomputes its rows' statistics before its K loop
                        // (cheap beside the weights it streams where the
                        // rows are few; the estimate chooses this variant
                        // only where it is faster, `efir_triton::plan`).
                        // Not the reduction itself (a split-K sum of
                        // partials keeps its kernel).
                        "tile.matmul" | "tensor.matmul" => {
                            uop.operands[0] == x
                                && uop.operands[1] != x
                                && f.ty(x).leaves().first().is_some_and(|l| l.shape != shape)
                        }
                        "tensor.reshape" => !splits_or_merges(f, x, y),
                        _ => true,
                    };
                if !(spread || (pointwise && same)) {
                    ok = false;
                    break;
                }
                if buffer[y.index()] || through.contains(&y) {
                    targets.insert(y);
                } else {
                    stack.push(y);
                }
            }
            if !ok {
                break;
            }
        }
        if ok
            && (through.is_empty() || targets.iter().all(|t| through.contains(t)))
            && (targets.len() == 1 || (reduction && !targets.is_empty()))
            && def[v.index()].is_some()
        {
            buffer[v.index()] = false;
        }
    }
}

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
fn stores_through_views(f: &Func, def: &[Option<usize>], buffer: &mut [bool]) -> IndexSet<ValueId> {
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
fn only_sliced(f: &Func, users: &[Vec<usize>], v: ValueId) -> bool {
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
pub const READ_ARITH: [&str; 5] = ["ew.add", "ew.sub", "ew.mul", "ew.div", "ew.neg"];

/// Whether a slice or concatenation can read `v` without a store: a buffer
/// or parameter under parallel views, slices, transposes and reshapes of
/// static extents, and the arithmetic of [`READ_ARITH`] and concatenations
/// on such values, in at most [`READ_NODES`] values (what the reader
/// recomputes where it loads: a value shared by several operands counts
/// each time, as the reader emits it each time).
fn readable(f: &Func, def: &[Option<usize>], buffer: &[bool], v: ValueId) -> bool {
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
fn all_static(f: &Func, v: ValueId) -> bool {
    f.ty(v)
        .as_tensor()
        .is_some_and(|t| t.shape.iter().all(|d| matches!(d, Dim::Static(_))))
}

/// Whether reshaping `a` to `r` splits or merges dims (beyond adding or
/// dropping dims of extent 1).
pub fn splits_or_merges(f: &Func, a: ValueId, r: ValueId) -> bool {
    f.ty(a).non_unit_dims() != f.ty(r).non_unit_dims()
}
