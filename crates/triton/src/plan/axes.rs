//! The axes of a program: every parallel axis that splits a dim, with its
//! extent, the blocks it may take (its domain) and its default block, and
//! the K loops of the matmuls whose K the program leaves unsplit. (Each
//! kernel's automatic grid axes come later, from [`super::grid`].)

use super::grid::WHOLE_ROW;
use crate::{AxisInfo, Extent, AUTO_K};
use efir_ir::{Attr, AxisState, Dim, Func};
use indexmap::IndexMap;
use std::collections::{BTreeMap, HashSet};

/// The axes of `f`: those that split a dim, in name order (so that a
/// program's emitted module does not depend on the order of its values),
/// each with its domain and default block, then the K loops
/// ([`k_loop_axes`]). Fails where an axis's extent or a symbolic extent
/// cannot be known ([`check_extents`]).
pub(super) fn program_axes(f: &Func) -> Result<IndexMap<String, AxisInfo>, String> {
    let (mut axes, roles) = split_axes(f);
    let syms = crate::current_symbols();
    check_extents(f, &axes, &syms)?;
    let dot = dot_axes(f);
    axes.sort_keys();
    for (a, info) in axes.iter_mut() {
        set_blocks(info, roles[a], dot.contains(a));
    }
    k_loop_axes(f, &syms, &mut axes);
    Ok(axes)
}

/// Which dims an axis splits, over all the values it splits.
#[derive(Clone, Copy, Default)]
struct Role {
    /// A dim of a matmul operand (one of the last two dims of a value of
    /// rank 2 or more): blocks of at least 16 for `tl.dot`.
    matmul: bool,
    /// A leading (batch) dim of a value of rank 3 or more.
    batch: bool,
}

/// The axes that split a dim of a value of `f`, in the order the values
/// first split them, with their extents (no blocks yet), and their roles.
fn split_axes(f: &Func) -> (IndexMap<String, AxisInfo>, BTreeMap<String, Role>) {
    let mut axes: IndexMap<String, AxisInfo> = IndexMap::new();
    let mut roles: BTreeMap<String, Role> = BTreeMap::new();
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
                    let r = l.shape.len();
                    let role = roles.entry(a.clone()).or_default();
                    role.matmul |= r >= 2 && *i + 2 >= r;
                    role.batch |= r >= 3 && *i + 2 < r;
                }
            }
        }
    }
    (axes, roles)
}

/// Every extent the kernels need is known: the axis of each reduction and
/// collection splits a dim; a free symbolic extent (`syms`) is the size of
/// a parameter's dim, since it is read from the inputs' shapes at run time;
/// and the axis of a dim counting tiles splits a dim (or is symbolic).
fn check_extents(
    f: &Func,
    axes: &IndexMap<String, AxisInfo>,
    syms: &[String],
) -> Result<(), String> {
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
    let has_dim = |l: &efir_ir::TensorType, a: &str| {
        l.shape.iter().any(|d| matches!(d, Dim::Axis(x) if x == a))
    };
    for a in syms {
        let in_param = f
            .params
            .iter()
            .any(|v| f.ty(*v).leaves().iter().any(|l| has_dim(l, a)));
        if !in_param {
            let v = f
                .values
                .iter()
                .find(|v| v.ty.leaves().iter().any(|l| has_dim(l, a)))
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
    Ok(())
}

/// The axes that tile a matmul's operands or result.
fn dot_axes(f: &Func) -> HashSet<String> {
    f.ops
        .iter()
        .filter(|op| matches!(op.name.as_str(), "tile.matmul" | "tensor.matmul"))
        .flat_map(|op| op.operands.iter().copied().chain([op.result]))
        .flat_map(|v| f.ty(v).leaves().into_iter().cloned().collect::<Vec<_>>())
        .flat_map(|l| l.state.keys().cloned().collect::<Vec<_>>())
        .collect()
}

/// The blocks an axis may take (its domain) and its default block, by its
/// role and whether it tiles a matmul (`dot`).
fn set_blocks(info: &mut AxisInfo, role: Role, dot: bool) {
    // (A symbolic extent: its representative size.)
    let ext = info.extent.size().unwrap_or(64);
    let top = ext.next_power_of_two().max(1);
    let lo = if role.matmul { 16 } else { 1 };
    let mut d = Vec::new();
    // Blocks of a matmul's dims stop at 1024; other axes (a loop over a
    // row a statistic reduces) may take a whole row of up to
    // [`WHOLE_ROW`] in one block (ngpt at B=1: one trip over 4096
    // measured 1.85 us, four trips of 1024 4.2 us).
    let cap = if dot { 1024 } else { WHOLE_ROW };
    let mut b = lo;
    while b <= top.max(lo) && b <= cap {
        d.push(b);
        b *= 2;
    }
    info.default = if role.matmul {
        if top <= 128 {
            top.max(16)
        } else {
            64
        }
    } else if role.batch {
        1
    } else {
        top.min(256)
    };
    if !d.contains(&info.default) {
        info.default = d[0];
    }
    if role.batch {
        // Axes over leading (batch) dims take one index per program, so
        // that matmuls inside are 2-D.
        d = vec![1];
        info.default = 1;
    }
    info.domain = d;
}

/// A matmul whose K the program leaves unsplit and long gets a K loop of
/// its own when lowered (axis `r<K>`, shared by the matmuls of one K): one
/// block of the whole K would not fit in registers or shared memory. A
/// symbolic K (one of `syms`), whatever its representative size, loops too
/// (axis `r_<name>`): its size at run time may be long.
fn k_loop_axes(f: &Func, syms: &[String], axes: &mut IndexMap<String, AxisInfo>) {
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
}
