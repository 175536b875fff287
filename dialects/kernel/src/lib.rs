//! The `kernel` dialect: kernel graphs.
//!
//! `--lower-to-kernels` outlines each kernel of a candidate program into a
//! function of its own (`@<program>.k<i>`, whose body is the part of the
//! program that the kernel computes, with its tiling in the parallel states
//! and function attributes naming its grid axes, loops and the buffer it
//! writes) and rewrites the program into the launches of those kernels in
//! order:
//!
//! ```efir
//! %k0 = kernel.launch<@lora.k0> %x, %a : tensor<|@k|x2x4xf16>
//! ```
//!
//! Every operand and result of a launch is a buffer in global memory; the
//! launch order is the op order.

use efir_diagnostics::codes;
use efir_interp::{GlobalCtx, PValue, Semantics};
use efir_ir::dialect::{Arity, AttrKind, AttrSpec, DialectDef, InferCtx, OpDef};
use efir_ir::Type;

/// The `kernel` dialect.
pub static DIALECT: DialectDef = DialectDef {
    name: "kernel",
    summary: "Kernel graphs: launches of outlined kernels, in order",
    ops: &[OpDef {
        name: "kernel.launch",
        summary: "run the kernel `callee` on buffers; its result is a buffer",
        operands: Arity::AtLeast(0),
        positional: &["callee"],
        attrs: &[AttrSpec {
            name: "callee",
            kind: AttrKind::Func,
        }],
        infer: infer_launch,
        fold: None,
        result_from_declared: false,
        extra_attrs: false,
    }],
    terms: &[],
    verify_func: None,
};

fn infer_launch(cx: &InferCtx<'_>) -> Result<Type, efir_diagnostics::Diag> {
    let callee = cx
        .op
        .attrs
        .get("callee")
        .and_then(|a| a.as_symbol())
        .unwrap_or("");
    let Some((params, results)) = cx.sigs.get(callee) else {
        return Err(cx.attr_err(
            "callee",
            codes::E0209,
            format!("`kernel.launch` of unknown function `@{callee}`"),
        ));
    };
    if params.len() != cx.operands.len() {
        return Err(cx.err(
            codes::E0802,
            format!(
                "`@{callee}` takes {} buffers, but {} are given",
                params.len(),
                cx.operands.len()
            ),
        ));
    }
    for (i, (p, o)) in params.iter().zip(&cx.operands).enumerate() {
        if p != *o {
            return Err(cx.operand_err(
                i,
                codes::E0802,
                format!("buffer {i} of `@{callee}` must be {p}, but {o} is given"),
            ));
        }
    }
    if results.len() != 1 {
        return Err(cx.err(
            codes::E0802,
            format!(
                "a kernel writes one buffer, but `@{callee}` returns {}",
                results.len()
            ),
        ));
    }
    Ok(results[0].clone())
}

fn launch(cx: &GlobalCtx<'_>, args: &[&PValue]) -> Result<PValue, String> {
    let callee = cx
        .op
        .attrs
        .get("callee")
        .and_then(|a| a.as_symbol())
        .ok_or("kernel.launch without callee")?;
    let out = cx
        .interp
        .call_values(callee, args.iter().map(|a| (*a).clone()).collect())?;
    out.into_iter()
        .next()
        .ok_or_else(|| format!("`@{callee}` returned nothing"))
}

/// Interpreter semantics: a launch runs the kernel's function.
pub static SEMANTICS: &[(&str, Semantics)] = &[("kernel.launch", Semantics::Global(launch))];
