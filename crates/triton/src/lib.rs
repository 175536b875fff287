//! Candidate programs to kernel graphs and Triton (the paper's section 6.1).
//!
//! A candidate is a program over the `tensor`, `ew`, `par` and `tile`
//! dialects whose parallel states say how it is tiled. [`plan`] cuts it into
//! kernels: every value that must live in global memory (a parameter, a
//! result, a `par.collect` buffer, or a value without parallel state made by
//! a matmul, a reduction or a combine) is a buffer, and each buffer other than
//! a parameter is written by one kernel. Inside a kernel:
//!
//! - the `par.combine` chain above the kernel's result gives the launch grid
//!   (one program per output tile), and so does a `par.collect` (one program
//!   per collected slot);
//! - a `par.reduce` over an axis becomes a loop over that axis's tiles, with
//!   the reducer state as loop-carried variables;
//! - views (`par.partition`, `par.replicate`, combines of tiles) are not
//!   computed: a value is emitted directly in the tiling its consumer needs,
//!   pushing the tiling down through pointwise ops to the loads of buffers;
//! - pointwise values without parallel state are recomputed by each kernel
//!   that reads them (they are never a kernel of their own unless they are a
//!   result, or the operand of a slice or concatenation);
//! - `tensor.slice` and `tensor.concat` are masked loads of their operands
//!   at shifted offsets, so their operands are buffers.
//!
//! [`emit_python`] writes one Python module per program: `@triton.jit`
//! kernels over blocks (masked loads and stores, `tl.dot` with fp32
//! accumulation, `tl.sum`/`tl.max`), and a host function
//! `run(*inputs, config=None)` that allocates buffers and launches the
//! kernels in order. Block sizes are `BLOCK_<axis>` parameters; `num_warps`
//! and `num_stages` too; `CONFIG_SPACE` lists the legal values.

use efir_ir::{Attr, AxisState, DType, Dim, Func, Module, Type, ValueId};
use indexmap::{IndexMap, IndexSet};
use std::collections::BTreeMap;
use std::fmt::Write;

mod causal;
mod emit;
pub mod outline;

pub use emit::{emit_python, estimate, Estimate};

/// The extent of a dim: a number, or the tile count of an axis (the leading
/// dim that `par.collect` adds).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Extent {
    /// A static extent.
    N(u64),
    /// The number of tiles of an axis.
    Tiles(String),
}

impl Extent {
    fn of(d: &Dim) -> Extent {
        match d {
            Dim::Static(n) => Extent::N(*n),
            Dim::Axis(a) => Extent::Tiles(a.clone()),
        }
    }
    /// The extent inside a kernel (constexpr arithmetic).
    pub fn kernel(&self) -> String {
        match self {
            Extent::N(n) => n.to_string(),
            Extent::Tiles(a) => format!("NT_{}", py_ident(a)),
        }
    }
    /// The extent on the host.
    pub fn host(&self) -> String {
        match self {
            Extent::N(n) => n.to_string(),
            Extent::Tiles(a) => format!("nt_{}", py_ident(a)),
        }
    }
    /// The padded (power of two) block length of an untiled dim, in a kernel.
    pub fn padded(&self) -> String {
        match self {
            Extent::N(n) => n.next_power_of_two().max(1).to_string(),
            Extent::Tiles(a) => format!("NTP_{}", py_ident(a)),
        }
    }
}

/// Text from outside (a file name, a pipeline description) as it may sit in
/// a Python docstring: backslashes and quotes escaped, and every character
/// outside printable ASCII written as a `\x`/`\u`/`\U` escape, so that it
/// can neither end the docstring nor start a line of code.
pub fn doc_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            ' '..='~' => out.push(c),
            c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out
}

/// The Python identifier part for an efir name (injective: distinct names
/// never share one). A name of ASCII letters, digits and single
/// underscores is itself; any other (`l.weight`, `x$1`, `a__b`, `é`) is its
/// characters with every other one replaced by `_`, then `__` and the hex
/// of its UTF-8 bytes, which no name of the first kind contains.
pub fn py_ident(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.contains("__");
    if plain {
        return s.to_string();
    }
    let mut out: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    out.push_str("__");
    for b in s.bytes() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// A readable file stem for a program name: every character other than an
/// ASCII letter or digit becomes `_` (not injective: a caller writing
/// several files checks that their stems differ).
pub fn file_stem(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// Matmuls with an unsplit K longer than this get a K loop when lowered.
pub const AUTO_K: u64 = 128;

/// A parallel axis of a program.
#[derive(Clone, Debug)]
pub struct AxisInfo {
    /// The axis name (without `@`).
    pub name: String,
    /// The extent of the dims it splits.
    pub extent: Extent,
    /// Legal block sizes.
    pub domain: Vec<u64>,
    /// The default block size.
    pub default: u64,
}

/// How a kernel's programs are laid out.
#[derive(Clone, Debug)]
pub struct Kernel {
    /// The kernel's index in launch order.
    pub index: usize,
    /// The value the kernel writes.
    pub root: ValueId,
    /// The grid axes, outermost first, with the dim of the root each indexes
    /// (`None` for a collected axis: the buffer's leading dim).
    pub grid: Vec<(String, Option<usize>)>,
    /// The value computed under the grid (the root with its combines peeled).
    pub body: ValueId,
    /// Whether the root is a `par.collect`.
    pub collect: bool,
}

/// A program cut into kernels.
#[derive(Debug)]
pub struct Plan<'a> {
    /// The module (for reducer functions).
    pub module: &'a Module,
    /// The program.
    pub func: &'a Func,
    /// The op defining each value (`None` for parameters).
    pub def: Vec<Option<usize>>,
    /// Whether each value is a buffer in global memory.
    pub buffer: Vec<bool>,
    /// The kernels in launch order.
    pub kernels: Vec<Kernel>,
    /// The axes.
    pub axes: IndexMap<String, AxisInfo>,
    /// `num_warps` and `num_stages` of the default configuration.
    pub warps: u32,
    /// See `warps`.
    pub stages: u32,
    /// Per kernel (launch order), `num_warps` and `num_stages` that override
    /// the program's (`num_warps_k<i>`, `num_stages_k<i>` of a configuration,
    /// offered where a program has more than one kernel).
    pub kernel_warps: Vec<Option<u32>>,
    /// See `kernel_warps`.
    pub kernel_stages: Vec<Option<u32>>,
}

/// The legal `num_warps` values of a configuration.
pub const WARPS: [u32; 4] = [1, 2, 4, 8];
/// The legal `num_stages` values of a configuration.
pub const STAGES: [u32; 5] = [1, 2, 3, 4, 5];

/// Apply a function's `schedule` attribute (the string a tuner records,
/// `"BLOCK_k4096=64,num_warps=8,num_stages=3"`) to the plan's default
/// configuration: every key must name a configuration parameter of the
/// program and every value must be legal for it.
fn apply_schedule(p: &mut Plan<'_>) -> Result<(), String> {
    let Some(a) = p.func.attrs.get("schedule") else {
        return Ok(());
    };
    let Attr::Str(text) = a else {
        return Err(
            "the `schedule` attribute must be a string such as \"BLOCK_m=64,num_warps=4\"".into(),
        );
    };
    for part in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| format!("schedule entry `{part}` is not KEY=VALUE"))?;
        let (k, v) = (k.trim(), v.trim());
        let n: u64 = v
            .parse()
            .map_err(|_| format!("schedule entry `{part}`: `{v}` is not a positive integer"))?;
        // `num_warps_k<i>` / `num_stages_k<i>`: one kernel's, where there
        // are several.
        let per_kernel = k
            .strip_prefix("num_warps_k")
            .map(|i| (true, i))
            .or_else(|| k.strip_prefix("num_stages_k").map(|i| (false, i)))
            .and_then(|(w, i)| Some((w, i.parse::<usize>().ok()?)))
            .filter(|(_, i)| *i < p.kernels.len() && p.kernels.len() > 1);
        if let Some((w, i)) = per_kernel {
            let legal: &[u32] = if w { &WARPS } else { &STAGES };
            let n = u32::try_from(n)
                .ok()
                .filter(|n| legal.contains(n))
                .ok_or_else(|| format!("schedule entry `{part}`: {k} must be one of {legal:?}"))?;
            if w {
                p.kernel_warps[i] = Some(n);
            } else {
                p.kernel_stages[i] = Some(n);
            }
            continue;
        }
        match k {
            "num_warps" | "num_stages" => {
                let (legal, slot): (&[u32], &mut u32) = if k == "num_warps" {
                    (&WARPS, &mut p.warps)
                } else {
                    (&STAGES, &mut p.stages)
                };
                let n = u32::try_from(n)
                    .ok()
                    .filter(|n| legal.contains(n))
                    .ok_or_else(|| {
                        format!("schedule entry `{part}`: {k} must be one of {legal:?}")
                    })?;
                *slot = n;
            }
            _ => {
                let id = k.strip_prefix("BLOCK_").ok_or_else(|| {
                    format!("schedule entry `{part}`: unknown parameter `{k}` (BLOCK_<axis>, num_warps, num_stages, num_warps_k<i>, num_stages_k<i> of a program with several kernels)")
                })?;
                let info = p
                    .axes
                    .values_mut()
                    .find(|i| py_ident(&i.name) == id)
                    .ok_or_else(|| {
                        format!("schedule entry `{part}`: the program has no axis for `{k}`")
                    })?;
                if !info.domain.contains(&n) {
                    return Err(format!(
                        "schedule entry `{part}`: {k} must be one of {:?}",
                        info.domain
                    ));
                }
                info.default = n;
            }
        }
    }
    Ok(())
}

fn stateless(t: &Type) -> bool {
    t.leaves().iter().all(|l| l.state.is_empty())
}

/// Cut `f` into kernels.
pub fn plan<'a>(module: &'a Module, f: &'a Func) -> Result<Plan<'a>, String> {
    let base = plan_with(module, f, false);
    // The variant that also computes row statistics inside the kernels that
    // read them (see [`epilogues`]), where it has fewer kernels, when its
    // static estimate is lower.
    let Ok(b) = &base else { return base };
    let fused = plan_with(module, f, true);
    if let Ok(v) = &fused {
        if v.kernels.len() < b.kernels.len() {
            if let (Ok(eb), Ok(ev)) = (estimate(b), estimate(v)) {
                if ev.time_us < eb.time_us {
                    return fused;
                }
            }
        }
    }
    base
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
    epilogues(f, &def, &mut buffer, broadcast);
    // Slices and concatenations read their operands from memory at shifted
    // offsets, so an operand computed by an op (under parallel views and
    // slices of it, whose offsets compose) is stored.
    // Likewise a reshape that splits or merges dims: its block is loaded
    // through index arithmetic (see `emit/views.rs`).
    for op in &f.ops {
        let reads_memory = match op.name.as_str() {
            "tensor.slice" | "tensor.concat" => true,
            "tensor.reshape" => splits_or_merges(f, op.operands[0], op.result),
            _ => false,
        };
        if !reads_memory {
            continue;
        }
        for o in &op.operands {
            let mut v = *o;
            while let Some(i) = def[v.index()] {
                let d = &f.ops[i];
                if buffer[v.index()] {
                    break;
                }
                let view = match d.name.as_str() {
                    "par.partition" | "par.replicate" | "par.combine" => true,
                    "tensor.slice" => op.name != "tensor.reshape",
                    "tensor.reshape" | "tensor.transpose" => op.name == "tensor.reshape",
                    _ => false,
                };
                if view {
                    v = d.operands[0];
                    continue;
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
        let mut b = lo;
        while b <= top.max(lo) && b <= 1024 {
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
    };
    p.kernel_warps = vec![None; p.kernels.len()];
    p.kernel_stages = vec![None; p.kernels.len()];
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
fn epilogues(f: &Func, def: &[Option<usize>], buffer: &mut [bool], broadcast: bool) {
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
                if buffer[y.index()] {
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
            && (targets.len() == 1 || (reduction && !targets.is_empty()))
            && def[v.index()].is_some()
        {
            buffer[v.index()] = false;
        }
    }
}

fn kernel_of(
    f: &Func,
    def: &[Option<usize>],
    buffer: &[bool],
    root: ValueId,
    index: usize,
) -> Result<Kernel, String> {
    let mut grid = Vec::new();
    let mut cur = root;
    let mut collect = false;
    while let Some(i) = def[cur.index()] {
        let op = &f.ops[i];
        if cur != root && buffer[cur.index()] {
            break;
        }
        match op.name.as_str() {
            "par.combine" => {
                let a = op.attrs.get("axis").and_then(Attr::as_symbol).unwrap_or("");
                let d = op.attrs.get("dim").and_then(Attr::as_int).unwrap_or(0) as usize;
                grid.push((a.to_string(), Some(d)));
                cur = op.operands[0];
            }
            "par.collect" if cur == root => {
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

/// Give every untiled dim of a kernel's result a grid axis of its own.
///
/// Output elements of a kernel only depend on the same coordinates of the
/// dims they share with their operands (pointwise ops, views, matmul rows
/// and columns, the dims a reduction keeps), so any dim of the result can be
/// split across programs; the emitter pushes the split down to the loads. A
/// block as large as the dim is the untiled form. The last two dims (rows
/// and columns) get a block-size parameter; leading dims get one program per
/// index (block 1), so that matmuls inside are plain 2-D `tl.dot`s.
/// Whether reshaping `a` to `r` splits or merges dims (beyond adding or
/// dropping dims of extent 1).
pub(crate) fn splits_or_merges(f: &Func, a: ValueId, r: ValueId) -> bool {
    let non_unit = |v: ValueId| -> Vec<Dim> {
        f.ty(v)
            .as_tensor()
            .map(|t| {
                t.shape
                    .iter()
                    .filter(|d| **d != Dim::Static(1))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    };
    non_unit(a) != non_unit(r)
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
pub(crate) fn small_dot_extents(
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

/// Python names of dtypes.
pub fn tl_dtype(d: DType) -> &'static str {
    match d {
        DType::F16 => "tl.float16",
        DType::BF16 => "tl.bfloat16",
        DType::F32 => "tl.float32",
        DType::F64 => "tl.float64",
        DType::I1 => "tl.int1",
        DType::I32 => "tl.int32",
        DType::I64 => "tl.int64",
    }
}

/// Torch names of dtypes.
pub fn torch_dtype(d: DType) -> &'static str {
    match d {
        DType::F16 => "torch.float16",
        DType::BF16 => "torch.bfloat16",
        DType::F32 => "torch.float32",
        DType::F64 => "torch.float64",
        DType::I1 => "torch.bool",
        DType::I32 => "torch.int32",
        DType::I64 => "torch.int64",
    }
}

/// A short text description of the plan (for `--stats` and comments).
pub fn describe(p: &Plan<'_>) -> String {
    let mut s = String::new();
    for k in &p.kernels {
        let grid: Vec<String> = k.grid.iter().map(|(a, _)| format!("@{a}")).collect();
        let _ = writeln!(
            s,
            "kernel {}: writes %{} over grid [{}]",
            k.index,
            p.func.value(k.root).name,
            grid.join(", ")
        );
    }
    s
}

/// Add the functions that reducer term `a` calls (its `f` and `h`
/// arguments, at any depth) to `out`.
fn reducer_calls(a: &Attr, out: &mut IndexSet<String>) {
    match a {
        Attr::Term(_, args) => {
            for (k, v) in args {
                if let (Some(k), Some(s)) = (k, v.as_symbol()) {
                    if k == "f" || k == "h" {
                        out.insert(s.to_string());
                    }
                }
                reducer_calls(v, out);
            }
        }
        Attr::Array(xs) => xs.iter().for_each(|x| reducer_calls(x, out)),
        _ => {}
    }
}

/// The functions the reducers of `f` (in attributes and partial states)
/// call.
fn calls_of(f: &Func, out: &mut IndexSet<String>) {
    for op in &f.ops {
        for a in op.attrs.values() {
            reducer_calls(a, out);
        }
    }
    for v in &f.values {
        for l in v.ty.leaves() {
            for st in l.state.values() {
                if let AxisState::Partial(r) = st {
                    reducer_calls(r, out);
                }
            }
        }
    }
}

/// The functions a module's reducers call (not programs of their own).
pub fn reducer_functions(m: &Module) -> IndexSet<String> {
    let mut out = IndexSet::new();
    for f in &m.funcs {
        calls_of(f, &mut out);
    }
    // Library functions call each other.
    let mut changed = true;
    while changed {
        changed = false;
        for f in &m.funcs {
            if f.name.starts_with("efir.") && !out.contains(&f.name) {
                out.insert(f.name.clone());
                changed = true;
            }
        }
    }
    out
}

/// The programs of a module: its functions that are not reducer functions
/// or launched kernels.
pub fn programs(m: &Module) -> Vec<&Func> {
    let r = reducer_functions(m);
    let k = outline::launched(m);
    m.funcs
        .iter()
        .filter(|f| !r.contains(&f.name) && !k.contains(&f.name))
        .collect()
}

/// Signatures of the functions that the reducers of `f` call, as the `red`
/// dialect wants them. (Only those: a module of thousands of candidates
/// would otherwise have every signature copied for every kernel.)
pub fn signatures(m: &Module, f: &Func) -> efir_ir::dialect::Signatures {
    let mut names = IndexSet::new();
    calls_of(f, &mut names);
    names
        .iter()
        .filter_map(|n| m.func(n))
        .map(|g| (g.name.clone(), efir_ir::verify::signature(g)))
        .collect()
}
