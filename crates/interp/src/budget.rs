//! The interpreter's memory budget: a program whose values could exceed it
//! is refused before anything is allocated, naming the largest value.

use efir_ir::{Attr, AxisState, Func, Module};
use std::collections::{HashMap, HashSet};

/// `f` and every function of `m` it refers to, transitively: symbols in op
/// attributes and in `partial(...)` states that name functions (an axis
/// with a function's name only makes the estimate larger).
pub fn reachable<'m>(m: &'m Module, f: &'m Func) -> Vec<&'m Func> {
    let index: HashMap<&str, &Func> = m.funcs.iter().map(|h| (h.name.as_str(), h)).collect();
    let mut seen: HashSet<&str> = HashSet::from([f.name.as_str()]);
    let mut out = vec![f];
    let mut i = 0;
    while i < out.len() {
        let g = out[i];
        i += 1;
        let mut names: Vec<&str> = Vec::new();
        let mut stack: Vec<&Attr> = g.ops.iter().flat_map(|op| op.attrs.values()).collect();
        for v in &g.values {
            for l in v.ty.leaves() {
                for s in l.state.values() {
                    if let AxisState::Partial(r) = s {
                        stack.push(r);
                    }
                }
            }
        }
        while let Some(a) = stack.pop() {
            match a {
                Attr::Symbol(s) => names.push(s),
                Attr::Term(_, args) => stack.extend(args.iter().map(|(_, x)| x)),
                Attr::Array(xs) => stack.extend(xs.iter()),
                _ => {}
            }
        }
        for n in names {
            if seen.contains(n) {
                continue;
            }
            if let Some(&h) = index.get(n) {
                seen.insert(&h.name);
                out.push(h);
            }
        }
    }
    out
}

/// `b` bytes for a reader: `512 B`, `3.2 KiB`, ..., `7450.6 GiB`.
pub fn human(b: u128) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut x = b as f64;
    let mut u = 0;
    while x >= 1024.0 && u + 1 < units.len() {
        x /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{x:.1} {}", units[u])
    }
}

/// Refuse `f` where its values, and those of the functions it calls
/// (`kernel.launch`, a reducer's `@f` and `@h`, transitively), could take
/// more than `budget` bytes: the interpreter keeps every value (8 bytes an
/// element; a dim of tiles counts as many as the largest extent).
pub fn check_memory(m: &Module, f: &Func, budget: u128) -> Result<(), String> {
    check_memory_sized(m, f, budget, &std::collections::BTreeMap::new())
}

/// [`check_memory`] with symbolic extents sized by `dims` (an extent not
/// in `dims` counts as the widest static dim, as there).
pub fn check_memory_sized(
    m: &Module,
    f: &Func,
    budget: u128,
    dims: &std::collections::BTreeMap<String, u64>,
) -> Result<(), String> {
    let funcs = reachable(m, f);
    let values = || funcs.iter().flat_map(|g| g.values.iter());
    let mut widest: u128 = 1;
    for v in values() {
        for l in v.ty.leaves() {
            for d in &l.shape {
                if let efir_ir::Dim::Static(n) = d {
                    widest = widest.max(*n as u128);
                }
            }
        }
    }
    let mut total: u128 = 0;
    let mut big: (u128, String) = (0, String::new());
    for v in values() {
        let mut bytes: u128 = 0;
        for l in v.ty.leaves() {
            let n = l.shape.iter().fold(8u128, |acc, d| {
                acc.saturating_mul(match d {
                    efir_ir::Dim::Static(n) => *n as u128,
                    efir_ir::Dim::Axis(a) => dims.get(a).map_or(widest, |n| *n as u128),
                })
            });
            bytes = bytes.saturating_add(n);
        }
        if bytes > big.0 {
            big = (bytes, format!("%{} ({})", v.name, v.ty));
        }
        total = total.saturating_add(bytes);
    }
    if total > budget {
        return Err(format!(
            "`@{}` could need {} for its values, more than the {} allowed (--max-memory); the largest is {}, {}",
            f.name,
            human(total),
            human(budget),
            big.1,
            human(big.0)
        ));
    }
    Ok(())
}
