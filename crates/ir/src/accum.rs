//! Values that hold an accumulator: the stored partial sums of a 16-bit
//! float value (`par.collect` of a `partial(#red.sum)` value, split-K's
//! per-program products) and the views and partitions of them that lead to
//! the reduce that finishes them. They are held, and stored between
//! kernels, at f32 (what a kernel's `acc = tl.dot(a, b, acc)` computed),
//! however their type is written; the reduce over them rounds once to the
//! type. So a K-split matmul equals the unsplit one to f32 rounding in the
//! interpreter and in the kernels alike, and no partial product is rounded
//! to 16 bits.

use crate::{Attr, AxisState, DType, Func, Type, ValueId};
use std::collections::HashSet;

/// Ops through which a collected accumulator stays one (layout only).
const THROUGH: &[&str] = &[
    "par.partition",
    "par.replicate",
    "tensor.reshape",
    "tensor.transpose",
    "tensor.slice",
];

fn wide_dtype(t: &Type) -> bool {
    t.as_tensor()
        .is_some_and(|t| matches!(t.dtype, DType::F16 | DType::BF16))
}

/// `#red.sum`, or a product of reducers each of which is (a gated MLP's
/// gate and up projections, split over K, reduced by one
/// `#red.prod<#red.sum, #red.sum>`).
fn sums(r: Option<&Attr>) -> bool {
    match r {
        Some(Attr::Term(n, a)) if n == "red.sum" => a.is_empty(),
        Some(Attr::Term(n, a)) if n == "red.prod" => {
            !a.is_empty() && a.iter().all(|(k, x)| k.is_none() && sums(Some(x)))
        }
        _ => false,
    }
}

/// The values of `f` held at f32 as accumulators (see the module's doc).
pub fn accumulators(f: &Func) -> HashSet<ValueId> {
    let mut out = HashSet::new();
    for op in &f.ops {
        let Some(&x) = op.operands.first() else {
            continue;
        };
        // A tuple of accumulators (the operand of a product of sums).
        if op.name == "tensor.tuple" {
            if op.operands.iter().all(|o| out.contains(o)) {
                out.insert(op.result);
            }
            continue;
        }
        if !wide_dtype(f.ty(op.result)) {
            continue;
        }
        let acc = match op.name.as_str() {
            "par.collect" => {
                let axis = op.attrs.get("axis").and_then(Attr::as_symbol);
                f.ty(x).as_tensor().is_some_and(|t| {
                    axis.and_then(|a| t.state.get(a)).is_some_and(|s| {
                        matches!(s, AxisState::Partial(Attr::Term(n, args)) if n == "red.sum" && args.is_empty())
                    })
                })
            }
            name => THROUGH.contains(&name) && out.contains(&x),
        };
        if acc {
            out.insert(op.result);
        }
    }
    // A result of the function has its type (the caller gets what the
    // signature says).
    for r in &f.returns {
        out.remove(r);
    }
    // Only chains that end in sums: every use of an accumulator is a
    // layout op (or a tuple) whose result is one too, or a `tensor.reduce`
    // by `#red.sum` or a product of sums (which computes in f32 and rounds
    // once). A chain with any
    // other use keeps its type throughout (so no kernel reads f32 where
    // its type says 16 bits, e.g. as a `tl.dot` operand).
    loop {
        let bad: Vec<ValueId> = out
            .iter()
            .copied()
            .filter(|v| {
                f.ops.iter().filter(|u| u.operands.contains(v)).any(|u| {
                    let sum = u.name == "tensor.reduce" && sums(u.attrs.get("reducer"));
                    let through = (THROUGH.contains(&u.name.as_str()) || u.name == "tensor.tuple")
                        && out.contains(&u.result);
                    !(sum || through)
                })
            })
            .collect();
        if bad.is_empty() {
            break;
        }
        for v in bad {
            out.remove(&v);
        }
    }
    out
}
