//! Programs cut into kernels: which values are buffers (the rules of
//! `efir_buffers::cut`, which compaction counts kernels with too), each
//! kernel's grid, and the axes' domains and default blocks ([`axes`]). The
//! automatic grid axes of each kernel are in [`grid`].

mod axes;
mod grid;

use crate::schedule::apply_schedule;
use crate::{choose_defaults, estimate, AxisInfo, Kernel, Plan};
use efir_ir::{Attr, AxisState, Func, Module, Type, ValueId};
use grid::{auto_grid, fill_sms, inlines_reduction};
use indexmap::IndexMap;

pub use efir_buffers::store_view;
pub(crate) use efir_buffers::READ_ARITH;
pub use grid::small_dot_extents;

fn stateless(t: &Type) -> bool {
    t.leaves().iter().all(|l| l.state.is_empty())
}

/// The most elements a thread may hold of a block loaded whole (outside
/// the loops, masked rows included) in the variant of [`plan`] that
/// computes row statistics in their readers. Beyond a thread's registers
/// the block spills: the Llama decode layer's gate/up kernel reading its
/// norm's statistics from a [16, 4096] block of one real row (16 rows for
/// `tl.dot`), 512 a thread at 4 warps, compiled for sm_90 to 34,342 bytes
/// of spills a thread, and the layer ran 20.9 ms on an H100 against an
/// estimate of 128 us (bench/results/2026-12-07-s45-h100-notes.md). (Not
/// a term of the estimate: other blocks that large, a split-K combine's
/// partial sums, compile without spills.)
const WHOLE_ROW_REGS: f64 = 256.0;

/// Cut `f` into kernels.
pub fn plan<'a>(module: &'a Module, f: &'a Func) -> Result<Plan<'a>, String> {
    let _syms = crate::SymScope::enter(f);
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
    // read them (see `efir_buffers::cut`), where it has fewer kernels, when its
    // static estimate (each at its chosen default blocks) is lower.
    if let Ok(mut v) = plan_with(module, f, true) {
        if v.kernels.len() < base.kernels.len() {
            let ev = choose_defaults(&mut v).map_or_else(|| estimate(&v), Ok);
            if let (Ok(eb), Ok(ev)) = (eb, ev) {
                if ev.time_us < eb.time_us && ev.whole_block_regs <= WHOLE_ROW_REGS {
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
    let _syms = crate::SymScope::enter(f);
    plan_with(module, f, false)
}

fn plan_with<'a>(module: &'a Module, f: &'a Func, broadcast: bool) -> Result<Plan<'a>, String> {
    // Which values live in memory: the rules compaction counts with too.
    let efir_buffers::Cut { def, buffer, error } = efir_buffers::cut(f, broadcast);
    if let Some(e) = error {
        return Err(e);
    }
    let mut axes = axes::program_axes(f)?;
    let kernels = kernels(f, &def, &buffer, &mut axes, broadcast)?;
    for r in &f.returns {
        if def[r.index()].is_none() {
            return Err("a parameter returned as a result is not supported".into());
        }
    }
    let n = kernels.len();
    let mut p = Plan {
        module,
        accumulators: efir_ir::accum::accumulators(f),
        func: f,
        def,
        buffer,
        kernels,
        axes,
        warps: 4,
        stages: 2,
        kernel_warps: vec![None; n],
        kernel_stages: vec![None; n],
        maxnreg: None,
        kernel_maxnreg: vec![None; n],
        pdl: None,
        kernel_blocks: vec![IndexMap::new(); n],
        stat_blocks: vec![IndexMap::new(); n],
    };
    apply_schedule(&mut p)?;
    Ok(p)
}

/// One kernel for each buffer, in program order, each with its grid; its
/// automatic grid axes join `axes` ([`grid`]). With `broadcast`, a kernel
/// that computes the row statistics it reads keeps whole rows.
fn kernels(
    f: &Func,
    def: &[Option<usize>],
    buffer: &[bool],
    axes: &mut IndexMap<String, AxisInfo>,
    broadcast: bool,
) -> Result<Vec<Kernel>, String> {
    let mut kernels = Vec::new();
    for op in &f.ops {
        let v = op.result;
        if !buffer[v.index()] {
            continue;
        }
        let mut k = kernel_of(f, def, buffer, v, kernels.len())?;
        let small = small_dot_extents(f, def, buffer, k.body);
        let whole = broadcast && inlines_reduction(f, def, buffer, k.body);
        auto_grid(f, &mut k, axes, &small, whole);
        if !whole {
            fill_sms(&k, axes);
        }
        kernels.push(k);
    }
    Ok(kernels)
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
