//! Programs cut into kernels: which values are buffers (the rules of
//! `efir_buffers::cut`, which compaction counts kernels with too), each
//! kernel's grid, and the axes' domains and default blocks. The automatic
//! grid axes of each kernel are in [`grid`].

mod grid;

use crate::schedule::apply_schedule;
use crate::{choose_defaults, estimate, AxisInfo, Extent, Kernel, Plan, AUTO_K};
use efir_ir::{Attr, AxisState, Dim, Func, Module, Type, ValueId};
use grid::{auto_grid, fill_sms, inlines_reduction, WHOLE_ROW};
use indexmap::IndexMap;
use std::collections::BTreeMap;

pub use efir_buffers::store_view;
pub(crate) use efir_buffers::READ_ARITH;
pub use grid::small_dot_extents;

fn stateless(t: &Type) -> bool {
    t.leaves().iter().all(|l| l.state.is_empty())
}

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
    let _syms = crate::SymScope::enter(f);
    plan_with(module, f, false)
}

fn plan_with<'a>(module: &'a Module, f: &'a Func, broadcast: bool) -> Result<Plan<'a>, String> {
    // Which values live in memory: the rules compaction counts with too.
    let efir_buffers::Cut { def, buffer, error } = efir_buffers::cut(f, broadcast);
    if let Some(e) = error {
        return Err(e);
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
    // A dim counting the tiles of an axis needs that axis's extent; a free
    // symbolic extent is read from the inputs' shapes at run time, so a
    // parameter must have it.
    let syms = crate::current_symbols();
    for a in &syms {
        let in_param = f.params.iter().any(|v| {
            f.ty(*v)
                .leaves()
                .iter()
                .any(|l| l.shape.iter().any(|d| matches!(d, Dim::Axis(x) if x == a)))
        });
        if !in_param {
            let v = f
                .values
                .iter()
                .find(|v| {
                    v.ty.leaves()
                        .iter()
                        .any(|l| l.shape.iter().any(|d| matches!(d, Dim::Axis(x) if x == a)))
                })
                .map_or(String::new(), |v| {
                    format!("`%{}` has the symbolic extent |@{a}|, but ", v.name)
                });
            return Err(format!(
                "{v}no parameter has a dim |@{a}|, so its size cannot be read from the inputs at run time"
            ));
        }
    }
    for v in &f.values {
        for l in v.ty.leaves() {
            for d in &l.shape {
                if let Dim::Axis(a) = d {
                    if !axes.contains_key(a) && !syms.contains(a) {
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
        // (A symbolic extent: its representative size.)
        let ext = info.extent.size().unwrap_or(64);
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
        // A symbolic K, whatever its representative size, loops too (axis
        // `r_<name>`): its size at run time may be long.
        if let Some(Dim::Axis(s)) = a.shape.last() {
            let name = format!("r_{s}");
            if !split && syms.contains(s) && !axes.contains_key(&name) {
                axes.insert(
                    name.clone(),
                    AxisInfo {
                        name,
                        extent: Extent::Sym(s.clone()),
                        default: 64,
                        domain: vec![16, 32, 64, 128, 256],
                    },
                );
            }
        }
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
