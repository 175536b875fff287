//! Programs cut into kernels: which values are buffers, each kernel's
//! grid, and the automatic grid axes and default blocks.

use crate::schedule::apply_schedule;
use crate::{choose_defaults, estimate, AxisInfo, Extent, Kernel, Plan, AUTO_K};
use efir_ir::{Attr, AxisState, Dim, Func, Module, Type, ValueId};
use indexmap::{IndexMap, IndexSet};
use std::collections::BTreeMap;

fn stateless(t: &Type) -> bool {
    t.leaves().iter().all(|l| l.state.is_empty())
}

/// Cut `f` into kernels.
pub fn plan<'a>(module: &'a Module, f: &'a Func) -> Result<Plan<'a>, String> {
    let mut base = match plan_with(module, f, false) {
        Ok(b) => b,
        // A schedule recorded from the fused variant names its axes (the
        // automatic grid axes of a kernel that computes its row statistics).
        Err(e) => {
            return match f.attrs.contains_key("schedule") {
                true => plan_with(module, f, true).map_err(|_| e),
                false => Err(e),
            }
        }
    };
    let eb = choose_defaults(&mut base).map_or_else(|| estimate(&base), Ok);
    // The variant that also computes row statistics inside the kernels that
    // read them (see [`epilogues`]), where it has fewer kernels, when its
    // static estimate (each at its chosen default blocks) is lower.
    if let Ok(mut v) = plan_with(module, f, true) {
        if v.kernels.len() < base.kernels.len() {
            let ev = choose_defaults(&mut v).map_or_else(|| estimate(&v), Ok);
            if let (Ok(eb), Ok(ev)) = (eb, ev) {
                if ev.time_us < eb.time_us {
                    return Ok(v);
                }
            }
        }
    }
    Ok(base)
}

/// The plan without the fused row statistics of [`plan`]: every reduction
/// read at another shape is a buffer of its own. Compaction's `kernels`
/// attribute counts this plan's kernels; [`plan`] has at most as many.
pub fn base_plan<'a>(module: &'a Module, f: &'a Func) -> Result<Plan<'a>, String> {
    plan_with(module, f, false)
}

fn plan_with<'a>(module: &'a Module, f: &'a Func, broadcast: bool) -> Result<Plan<'a>, String> {
    let n = f.values.len();
    let mut def = vec![None; n];
    for (i, op) in f.ops.iter().enumerate() {
        def[op.result.index()] = Some(i);
    }
    let mut buffer = vec![false; n];
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
                if let Some(a) = partial {
                    return Err(format!(
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
    // Axes and their extents.
    let mut axes: IndexMap<String, AxisInfo> = IndexMap::new();
    let mut roles: BTreeMap<String, bool> = BTreeMap::new();
    let mut batch: BTreeMap<String, bool> = BTreeMap::new();
    for v in &f.values {
        for l in v.ty.leaves() {
            for (a, st) in &l.state {
                if let AxisState::Part(i) = st {
                    let e = Extent::of(&l.shape[*i]);
                    axes.entry(a.clone()).or_insert_with(|| AxisInfo {
                        name: a.clone(),
                        extent: e,
                        domain: Vec::new(),
                        default: 0,
                    });
                    // A dim of a matmul operand (the last two dims) needs
                    // blocks of at least 16 for tl.dot.
                    let r = l.shape.len();
                    roles.entry(a.clone()).or_insert(false);
                    if r >= 2 && *i + 2 >= r {
                        roles.insert(a.clone(), true);
                    }
                    if r >= 3 && *i + 2 < r {
                        batch.insert(a.clone(), true);
                    }
                }
            }
        }
    }
    for op in &f.ops {
        if op.name == "par.reduce" || op.name == "par.collect" {
            let a = op.attrs.get("axis").and_then(Attr::as_symbol).unwrap_or("");
            if !axes.contains_key(a) {
                return Err(format!(
                    "axis @{a} of `{}` never splits a dim, so its extent is unknown",
                    op.name
                ));
            }
        }
    }
    // A dim counting the tiles of an axis needs that axis's extent.
    for v in &f.values {
        for l in v.ty.leaves() {
            for d in &l.shape {
                if let Dim::Axis(a) = d {
                    if !axes.contains_key(a) {
                        return Err(format!(
                            "`%{}` has a dim of |@{a}| tiles, but @{a} never splits a dim, so its tile count is unknown",
                            v.name
                        ));
                    }
                }
            }
        }
    }
    // Axes that tile a matmul's operands or result.
    let dot_axes: std::collections::HashSet<String> = f
        .ops
        .iter()
        .filter(|op| matches!(op.name.as_str(), "tile.matmul" | "tensor.matmul"))
        .flat_map(|op| op.operands.iter().copied().chain([op.result]))
        .flat_map(|v| f.ty(v).leaves().into_iter().cloned().collect::<Vec<_>>())
        .flat_map(|l| l.state.keys().cloned().collect::<Vec<_>>())
        .collect();
    // Axes in name order, so that a program's emitted module does not depend
    // on the order of its values.
    axes.sort_keys();
    for (a, info) in axes.iter_mut() {
        let ext = match &info.extent {
            Extent::N(n) => *n,
            Extent::Tiles(_) => 64,
        };
        let top = ext.next_power_of_two().max(1);
        let lo = if roles[a] { 16 } else { 1 };
        let mut d = Vec::new();
        // Blocks of a matmul's dims stop at 1024; other axes (a loop over a
        // row a statistic reduces) may take a whole row of up to
        // [`WHOLE_ROW`] in one block (ngpt at B=1: one trip over 4096
        // measured 1.85 us, four trips of 1024 4.2 us).
        let cap = if dot_axes.contains(a) {
            1024
        } else {
            WHOLE_ROW
        };
        let mut b = lo;
        while b <= top.max(lo) && b <= cap {
            d.push(b);
            b *= 2;
        }
        info.default = if roles[a] {
            if top <= 128 {
                top.max(16)
            } else {
                64
            }
        } else if batch.contains_key(a) {
            1
        } else {
            top.min(256)
        };
        if !d.contains(&info.default) {
            info.default = d[0];
        }
        if batch.contains_key(a) {
            // Axes over leading (batch) dims take one index per program, so
            // that matmuls inside are 2-D.
            d = vec![1];
            info.default = 1;
        }
        info.domain = d;
    }
    // A matmul whose K the program leaves unsplit and long gets a K loop of
    // its own when lowered (axis `r<K>`, shared by the matmuls of one K):
    // one block of the whole K would not fit in registers or shared memory.
    for op in &f.ops {
        if !matches!(op.name.as_str(), "tile.matmul" | "tensor.matmul") {
            continue;
        }
        let Some(a) = f.ty(op.operands[0]).as_tensor() else {
            continue;
        };
        let kd = a.shape.len().saturating_sub(1);
        let split = a
            .state
            .values()
            .any(|s| matches!(s, AxisState::Part(d) if *d == kd));
        if let Some(Dim::Static(k)) = a.shape.last() {
            if !split && *k > AUTO_K {
                let top = k.next_power_of_two().min(256);
                let mut domain = Vec::new();
                let mut b = 16;
                while b <= top {
                    domain.push(b);
                    b *= 2;
                }
                let name = format!("r{k}");
                axes.insert(
                    name.clone(),
                    AxisInfo {
                        name,
                        extent: Extent::N(*k),
                        default: 64.min(top),
                        domain,
                    },
                );
            }
        }
    }
    let mut kernels = Vec::new();
    for op in &f.ops {
        let v = op.result;
        if !buffer[v.index()] {
            continue;
        }
        let mut k = kernel_of(f, &def, &buffer, v, kernels.len())?;
        let small = small_dot_extents(f, &def, &buffer, k.body);
        let whole = broadcast && inlines_reduction(f, &def, &buffer, k.body);
        auto_grid(f, &mut k, &mut axes, &small, whole);
        if !whole {
            fill_sms(&k, &mut axes);
        }
        kernels.push(k);
    }
    for r in &f.returns {
        if def[r.index()].is_none() {
            return Err("a parameter returned as a result is not supported".into());
        }
    }
    let mut p = Plan {
        module,
        func: f,
        def,
        buffer,
        kernels,
        axes,
        warps: 4,
        stages: 2,
        kernel_warps: Vec::new(),
        kernel_stages: Vec::new(),
        kernel_blocks: Vec::new(),
        stat_blocks: Vec::new(),
    };
    p.kernel_warps = vec![None; p.kernels.len()];
    p.kernel_stages = vec![None; p.kernels.len()];
    p.kernel_blocks = vec![IndexMap::new(); p.kernels.len()];
    p.stat_blocks = vec![IndexMap::new(); p.kernels.len()];
    apply_schedule(&mut p)?;
    Ok(p)
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
/// the pointwise work) instead of reading it from a kernel of its own.
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
                // split or merge dims) or a matmul computes from it in place.
                let spread = reduction
                    && match uop.name.as_str() {
                        "tensor.slice" | "tensor.concat" | "tile.matmul" | "tensor.matmul" => false,
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

fn kernel_of(
    f: &Func,
    def: &[Option<usize>],
    buffer: &[bool],
    root: ValueId,
    index: usize,
) -> Result<Kernel, String> {
    let mut grid = Vec::new();
    // A kernel storing through views computes the value under them.
    let top = store_view(f, def, buffer, root).map_or(root, |(_, x)| x);
    let mut cur = top;
    let mut collect = false;
    while let Some(i) = def[cur.index()] {
        let op = &f.ops[i];
        if cur != top && buffer[cur.index()] {
            break;
        }
        match op.name.as_str() {
            "par.combine" => {
                let a = op.attrs.get("axis").and_then(Attr::as_symbol).unwrap_or("");
                let d = op.attrs.get("dim").and_then(Attr::as_int).unwrap_or(0) as usize;
                grid.push((a.to_string(), Some(d)));
                cur = op.operands[0];
            }
            "par.collect" if cur == root && top == root => {
                let a = op.attrs.get("axis").and_then(Attr::as_symbol).unwrap_or("");
                grid.push((a.to_string(), None));
                collect = true;
                cur = op.operands[0];
            }
            _ => break,
        }
    }
    // The root's own tiled dims are grid axes too (a collect buffer may stay
    // partitioned for its readers).
    if let Some(t) = f.ty(root).as_tensor() {
        for (a, st) in &t.state {
            match st {
                AxisState::Part(d) => {
                    let d = if collect { *d - 1 } else { *d };
                    if !grid.iter().any(|(g, _)| g == a) {
                        grid.push((a.clone(), Some(d)));
                    }
                }
                AxisState::Repl => {}
                AxisState::Partial(_) => {
                    return Err(format!(
                        "`{}` keeps partial results over @{a} in memory without par.collect",
                        f.value(root).name
                    ))
                }
            }
        }
    }
    // Every axis the body lives under must be a grid axis.
    for l in f.ty(cur).leaves() {
        for (a, st) in &l.state {
            if !grid.iter().any(|(g, _)| g == a) && !matches!(st, AxisState::Repl) {
                return Err(format!(
                    "the kernel writing `%{}` computes `%{}` under @{a}, which is neither a grid axis nor reduced inside",
                    f.value(root).name,
                    f.value(cur).name
                ));
            }
        }
    }
    Ok(Kernel {
        index,
        root,
        grid,
        body: cur,
        collect,
    })
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
pub(crate) const READ_ARITH: [&str; 5] = ["ew.add", "ew.sub", "ew.mul", "ew.div", "ew.neg"];

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
pub(crate) fn splits_or_merges(f: &Func, a: ValueId, r: ValueId) -> bool {
    f.ty(a).non_unit_dims() != f.ty(r).non_unit_dims()
}

/// The extents (1 to 15) of the M, N and K dims of the matmuls computed in
/// the kernel of `body` (reached from it without crossing a buffer).
/// `tl.dot` takes blocks of at least 16; a smaller dim (the rows of a batch
/// of 8 tokens) would otherwise multiply and sum in registers, five times
/// slower than the padded dot on the H200 (gated_mlp: 96 us at B=8 against
/// 19 us at B=16 with the same plan). Such a dim gets a block of 16 (masked,
/// like any block beyond its extent): as its default where an automatic
/// grid axis tiles it, always where the program keeps it whole. A dim of
/// extent 1 (a GEMV's single row) keeps its multiply-and-sum by default,
/// with 16 a legal block for tuning to try (KERNELS.md: measure both).
pub fn small_dot_extents(
    f: &Func,
    def: &[Option<usize>],
    buffer: &[bool],
    body: ValueId,
) -> std::collections::HashSet<u64> {
    let mut out = std::collections::HashSet::new();
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![body];
    while let Some(v) = stack.pop() {
        if !seen.insert(v) {
            continue;
        }
        let Some(i) = def[v.index()] else {
            continue;
        };
        let op = &f.ops[i];
        if matches!(op.name.as_str(), "tile.matmul" | "tensor.matmul") {
            let ext = |x: ValueId, j: usize| -> Option<u64> {
                let t = f.ty(x).as_tensor()?;
                match t.shape.get(t.shape.len().checked_sub(j)?)? {
                    Dim::Static(n) => Some(*n),
                    _ => None,
                }
            };
            let (a, b) = (op.operands[0], op.operands[1]);
            for n in [ext(a, 2), ext(a, 1), ext(b, 1)].into_iter().flatten() {
                if n < 16 {
                    out.insert(n);
                }
            }
        }
        for o in &op.operands {
            if !buffer[o.index()] {
                stack.push(*o);
            }
        }
    }
    out
}

/// Whether a kernel computes a reduction without parallel state inside (not
/// its own body): a row statistic fused by [`epilogues`] with `broadcast`.
fn inlines_reduction(f: &Func, def: &[Option<usize>], buffer: &[bool], body: ValueId) -> bool {
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![body];
    while let Some(v) = stack.pop() {
        if !seen.insert(v) {
            continue;
        }
        let Some(i) = def[v.index()] else { continue };
        let op = &f.ops[i];
        if v != body
            && matches!(op.name.as_str(), "par.reduce" | "tensor.reduce")
            && stateless(f.ty(v))
        {
            return true;
        }
        for o in &op.operands {
            if !buffer[o.index()] {
                stack.push(*o);
            }
        }
    }
    false
}

/// The largest block of a dim that a kernel with a fused row statistic keeps
/// whole (so that each program computes the statistic once).
const WHOLE_ROW: u64 = 4096;

/// Give every untiled dim of a kernel's result a grid axis of its own.
///
/// Output elements of a kernel only depend on the same coordinates of the
/// dims they share with their operands (pointwise ops, views, matmul rows
/// and columns, the dims a reduction keeps), so any dim of the result can be
/// split across programs; the emitter pushes the split down to the loads. A
/// block as large as the dim is the untiled form. The last two dims (rows
/// and columns) get a block-size parameter; leading dims get one program per
/// index (block 1), so that matmuls inside are plain 2-D `tl.dot`s.
fn auto_grid(
    f: &Func,
    k: &mut Kernel,
    axes: &mut IndexMap<String, AxisInfo>,
    small: &std::collections::HashSet<u64>,
    whole: bool,
) {
    let leaves = f.ty(k.body).leaves();
    let Some(t) = leaves.first() else {
        return;
    };
    if leaves.iter().any(|l| l.shape != t.shape) {
        return;
    }
    let r = t.shape.len();
    let tiled: Vec<usize> = t
        .state
        .values()
        .filter_map(|s| match s {
            AxisState::Part(d) => Some(*d),
            _ => None,
        })
        .collect();
    for (d, dim) in t.shape.iter().enumerate() {
        let Dim::Static(e) = dim else { continue };
        // (Only for a matrix: a tiled unit dim of a higher-rank value
        // would stop its reshapes, which drop unit dims.)
        let gemv_row = *e == 1 && small.contains(e) && r == 2;
        if (*e <= 1 && !gemv_row) || tiled.contains(&d) {
            continue;
        }
        let name = format!("g{}_{d}", k.index);
        let top = e.next_power_of_two();
        let (domain, default) = if d + 2 >= r {
            let mut dm = Vec::new();
            let mut b = 1;
            while b <= top && b <= 1024 {
                dm.push(b);
                b *= 2;
            }
            // A dim of at most 128 (an attention head) is one block by
            // default: splitting it would recompute what it is reduced from.
            // A matmul's dim under 16 is one block of 16 (see
            // [`small_dot_extents`]).
            if small.contains(e) {
                dm.push(16);
                (dm, if *e == 1 { 1 } else { 16 })
            } else if whole && d + 1 == r && top > 128 && top <= WHOLE_ROW {
                // A row whose statistic the kernel computes: one block.
                while b <= top {
                    dm.push(b);
                    b *= 2;
                }
                (dm, top)
            } else if whole && d + 1 < r {
                // One row per program, as many programs as rows.
                (dm, 1)
            } else {
                (dm, if top <= 128 { top } else { 64 })
            }
        } else {
            (vec![1], 1)
        };
        axes.insert(
            name.clone(),
            AxisInfo {
                name: name.clone(),
                extent: Extent::N(*e),
                domain,
                default,
            },
        );
        k.grid.push((name, Some(d)));
    }
}

/// Programs a kernel's default schedule should launch at least: one per SM
/// of the H200, so that a grid over a few rows (a matmul at B=1..16 over a
/// large N) streams its weights from every SM.
const FILL_PROGRAMS: u64 = 132;

/// Halve the default blocks of a kernel's own automatic grid axes over large
/// dims (extent over 128: splitting an attention head would recompute what it
/// is reduced from), largest first and not below 16, until its grid has
/// [`FILL_PROGRAMS`] programs or no block can shrink.
fn fill_sms(k: &Kernel, axes: &mut IndexMap<String, AxisInfo>) {
    let tiles = |axes: &IndexMap<String, AxisInfo>, a: &str| -> u64 {
        let Some(i) = axes.get(a) else { return 1 };
        let ext = match &i.extent {
            Extent::N(n) => *n,
            Extent::Tiles(b) => match axes.get(b) {
                Some(bi) => match bi.extent {
                    Extent::N(n) => n.div_ceil(bi.default.max(1)),
                    Extent::Tiles(_) => 1,
                },
                None => 1,
            },
        };
        ext.div_ceil(i.default.max(1))
    };
    let own = format!("g{}_", k.index);
    loop {
        let programs: u64 = k.grid.iter().map(|(a, _)| tiles(axes, a)).product();
        if programs >= FILL_PROGRAMS {
            return;
        }
        let best = k
            .grid
            .iter()
            .filter(|(a, _)| a.starts_with(&own))
            .filter_map(|(a, _)| {
                let i = axes.get(a)?;
                let big = matches!(i.extent, Extent::N(e) if e > 128);
                (big && i.default > 16 && i.domain.contains(&(i.default / 2)))
                    .then_some((i.default, a.clone()))
            })
            .max();
        let Some((_, a)) = best else { return };
        if let Some(i) = axes.get_mut(&a) {
            i.default /= 2;
        }
    }
}
