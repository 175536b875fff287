//! The `par` dialect: parallel views and their combination (the paper's
//! section 3.1 and 3.3).
//!
//! - `par.partition<i, @p>`: `@p` not in the state -> adds `@p: part(i)`.
//! - `par.replicate<@p>`: `@p` not in the state -> adds `@p: repl`.
//! - `par.combine<i, @p>`: needs `@p: part(i)` -> removes `@p`.
//! - `par.reduce<ρ, @p>`: needs `@p: partial(ρ)` on every field -> removes `@p`.
//! - `par.collect<@p>`: needs `@p: partial(ρ)` or `repl` on every field ->
//!   removes `@p` and prepends a dim of extent `|@p|`.

pub mod eval;

use efir_diagnostics::{codes, Diag};
use efir_ir::dialect::{Arity, AttrKind, AttrSpec, DialectDef, InferCtx, OpDef};
use efir_ir::shape::shift_parts;
use efir_ir::{AxisState, Dim, TensorType, Type};

const DIM: AttrSpec = AttrSpec {
    name: "dim",
    kind: AttrKind::Int,
};
const AXIS: AttrSpec = AttrSpec {
    name: "axis",
    kind: AttrKind::Symbol,
};

/// The `par` dialect.
pub static DIALECT: DialectDef = DialectDef {
    name: "par",
    summary: "Parallel views: partition, replicate, combine, parallel reduce, collect",
    ops: &[
        OpDef {
            name: "par.partition",
            summary: "slice dim `dim` among the coordinates of `axis`",
            operands: Arity::Exact(1),
            positional: &["dim", "axis"],
            attrs: &[DIM, AXIS],
            infer: infer_partition,
            fold: None,
            result_from_declared: false,
            extra_attrs: false,
        },
        OpDef {
            name: "par.replicate",
            summary: "give every coordinate of `axis` the whole value",
            operands: Arity::Exact(1),
            positional: &["axis"],
            attrs: &[AXIS],
            infer: infer_replicate,
            fold: None,
            result_from_declared: false,
            extra_attrs: false,
        },
        OpDef {
            name: "par.combine",
            summary: "join the slices of dim `dim` over `axis`",
            operands: Arity::Exact(1),
            positional: &["dim", "axis"],
            attrs: &[DIM, AXIS],
            infer: infer_combine,
            fold: None,
            result_from_declared: false,
            extra_attrs: false,
        },
        OpDef {
            name: "par.reduce",
            summary: "combine partial results over `axis` with `reducer`",
            operands: Arity::Exact(1),
            positional: &["reducer", "axis"],
            attrs: &[
                AttrSpec {
                    name: "reducer",
                    kind: AttrKind::Reducer,
                },
                AXIS,
            ],
            infer: infer_reduce,
            fold: None,
            result_from_declared: false,
            extra_attrs: false,
        },
        OpDef {
            name: "par.collect",
            summary: "store one slice per coordinate of `axis` as a new leading dim",
            operands: Arity::Exact(1),
            positional: &["axis"],
            attrs: &[AXIS],
            infer: infer_collect,
            fold: None,
            result_from_declared: false,
            extra_attrs: false,
        },
    ],
    terms: &[],
    verify_func: None,
};

/// Apply `f` to every tensor field of a value type.
fn map_fields(
    t: &Type,
    f: &mut dyn FnMut(&TensorType) -> Result<TensorType, Diag>,
) -> Result<Type, Diag> {
    Ok(match t {
        Type::Tensor(t) => Type::Tensor(f(t)?),
        Type::Tuple(ts) => Type::Tuple(
            ts.iter()
                .map(|t| map_fields(t, f))
                .collect::<Result<_, _>>()?,
        ),
    })
}

fn already(cx: &InferCtx<'_>, axis: &str, s: &AxisState) -> Diag {
    cx.attr_err(
        "axis",
        codes::E0601,
        format!("the operand already lives under `@{axis}` ({s})"),
    )
    .with_label("axis already present")
    .with_note("use a fresh axis name for a nested decomposition")
}

fn infer_partition(cx: &InferCtx<'_>) -> Result<Type, Diag> {
    let t = cx.tensor(0)?;
    let axis = cx.symbol("axis");
    if let Some(s) = t.state.get(axis) {
        return Err(already(cx, axis, s));
    }
    let dim = cx.dim("dim", t.rank())?;
    if let Some((other, _)) = t.state.iter().find(|(_, s)| **s == AxisState::Part(dim)) {
        return Err(cx
            .attr_err(
                "dim",
                codes::E0603,
                format!("dim {dim} is already partitioned by `@{other}`"),
            )
            .with_label("dimension already partitioned"));
    }
    let mut out = t.clone();
    out.state.insert(axis.to_string(), AxisState::Part(dim));
    Ok(Type::Tensor(out))
}

fn infer_replicate(cx: &InferCtx<'_>) -> Result<Type, Diag> {
    let axis = cx.symbol("axis");
    map_fields(cx.operands[0], &mut |t| {
        if let Some(s) = t.state.get(axis) {
            return Err(already(cx, axis, s));
        }
        let mut out = t.clone();
        out.state.insert(axis.to_string(), AxisState::Repl);
        Ok(out)
    })
}

fn mismatch(cx: &InferCtx<'_>, axis: &str, want: &str, found: Option<&AxisState>) -> Diag {
    let (found, label) = match found {
        Some(s) => (format!("it is {s}"), format!("{s} over `@{axis}`")),
        None => (
            format!("it does not live under `@{axis}`"),
            format!("not under `@{axis}`"),
        ),
    };
    cx.operand_err(
        0,
        codes::E0602,
        format!(
            "`{}` needs the operand to be {want} over `@{axis}`, but {found}",
            cx.op.name
        ),
    )
    .with_label(label)
}

fn infer_combine(cx: &InferCtx<'_>) -> Result<Type, Diag> {
    let t = cx.tensor(0)?;
    let axis = cx.symbol("axis");
    let dim = cx.dim("dim", t.rank())?;
    match t.state.get(axis) {
        Some(AxisState::Part(i)) if *i == dim => {
            let mut out = t.clone();
            out.state.remove(axis);
            Ok(Type::Tensor(out))
        }
        s => Err(mismatch(cx, axis, &format!("part({dim})"), s)),
    }
}

fn infer_reduce(cx: &InferCtx<'_>) -> Result<Type, Diag> {
    let axis = cx.symbol("axis");
    let reducer = cx.attr("reducer");
    let fields = cx.operands[0].leaves().len();
    if let Some(ar) = efir_dialect_red::arity(reducer, cx.sigs) {
        if ar.states != fields {
            return Err(cx
                .operand_err(
                    0,
                    codes::E0408,
                    format!(
                        "reducer {reducer} has {} state field(s), but the operand has {fields}",
                        ar.states
                    ),
                )
                .with_label("does not fit the reducer"));
        }
    }
    map_fields(cx.operands[0], &mut |t| match t.state.get(axis) {
        Some(AxisState::Partial(r)) if r == reducer => {
            let mut out = t.clone();
            out.state.remove(axis);
            Ok(out)
        }
        s => Err(mismatch(cx, axis, &format!("partial({reducer})"), s)),
    })
}

fn infer_collect(cx: &InferCtx<'_>) -> Result<Type, Diag> {
    let axis = cx.symbol("axis");
    map_fields(cx.operands[0], &mut |t| match t.state.get(axis) {
        Some(AxisState::Partial(_) | AxisState::Repl) => {
            let mut state = shift_parts(&t.state, 1);
            state.remove(axis);
            let mut shape = vec![Dim::Axis(axis.to_string())];
            shape.extend(t.shape.iter().cloned());
            Ok(TensorType {
                dtype: t.dtype,
                shape,
                state,
            })
        }
        Some(s) => Err(cx
            .operand_err(
                0,
                codes::E0604,
                format!(
                    "`par.collect` needs a partial or replicated value over `@{axis}`, found {s}"
                ),
            )
            .with_label(format!("{s} over `@{axis}`"))
            .with_note("a partitioned value is joined with `par.combine`")),
        None => Err(mismatch(cx, axis, "partial or repl", None)),
    })
}
