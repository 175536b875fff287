//! The `ew` dialect: pointwise ops with numpy broadcasting, usable on whole
//! tensors and on tiles alike.
//!
//! Typing: operands share a dtype (except `ew.select`'s i1 condition), their
//! logical shapes broadcast, and they carry compatible parallel states (see
//! [`state::ew_state`]); the result has the broadcast shape and the common
//! state.

pub mod eval;
pub mod expand;
pub mod state;

use efir_diagnostics::{codes, Diag};
use efir_ir::dialect::{Arity, AttrKind, AttrSpec, DialectDef, FoldFn, InferCtx, OpDef};
use efir_ir::shape::broadcast_shapes;
use efir_ir::{DType, TensorType, Type};
use state::{ew_state, Linearity};

/// The `ew` dialect.
pub static DIALECT: DialectDef = DialectDef {
    name: "ew",
    summary: "Pointwise ops with numpy broadcasting, at tensor and tile level",
    ops: OPS,
    terms: &[],
    verify_func: None,
};

/// Comparison predicates of `ew.cmp`.
pub const PREDICATES: &[&str] = &["lt", "le", "gt", "ge", "eq", "ne"];

macro_rules! op {
    ($name:literal, $summary:literal, $n:expr, $infer:expr, $fold:expr) => {
        OpDef {
            name: $name,
            summary: $summary,
            operands: Arity::Exact($n),
            positional: &[],
            attrs: &[],
            infer: $infer,
            fold: Some($fold),
            result_from_declared: false,
            extra_attrs: false,
        }
    };
}

/// The pointwise ops of `n` operands that take no attributes and infer
/// their result type (not `ew.cast`, which declares it), in the table's
/// order: the ops that rules generic over pointwise ops (say propagation
/// through views) apply to. A new such op gets those rules from its entry
/// in the table.
pub fn pointwise_ops(n: usize) -> impl Iterator<Item = &'static str> {
    OPS.iter()
        .filter(move |o| {
            o.operands == Arity::Exact(n)
                && o.attrs.is_empty()
                && o.positional.is_empty()
                && !o.extra_attrs
                && !o.result_from_declared
        })
        .map(|o| o.name)
}

const OPS: &[OpDef] = &[
    op!(
        "ew.add",
        "a + b",
        2,
        |cx| infer(cx, Kind::Any, Linearity::Additive),
        |x, _| Some(x[0] + x[1])
    ),
    op!(
        "ew.sub",
        "a - b",
        2,
        |cx| infer(cx, Kind::Any, Linearity::Additive),
        |x, _| Some(x[0] - x[1])
    ),
    op!(
        "ew.mul",
        "a * b",
        2,
        |cx| infer(cx, Kind::Any, Linearity::Scaling),
        |x, _| Some(x[0] * x[1])
    ),
    op!(
        "ew.div",
        "a / b",
        2,
        |cx| infer(cx, Kind::Float, Linearity::Numerator),
        |x, _| Some(x[0] / x[1])
    ),
    op!(
        "ew.max",
        "max(a, b)",
        2,
        |cx| infer(cx, Kind::Any, Linearity::None),
        |x, _| Some(efir_interp::kernels::nan_max(x[0], x[1]))
    ),
    op!(
        "ew.min",
        "min(a, b)",
        2,
        |cx| infer(cx, Kind::Any, Linearity::None),
        |x, _| Some(efir_interp::kernels::nan_min(x[0], x[1]))
    ),
    op!(
        "ew.pow",
        "a ** b",
        2,
        |cx| infer(cx, Kind::Float, Linearity::None),
        |x, _| Some(x[0].powf(x[1]))
    ),
    op!(
        "ew.neg",
        "-a",
        1,
        |cx| infer(cx, Kind::Any, Linearity::Unary),
        |x, _| Some(-x[0])
    ),
    op!(
        "ew.abs",
        "|a|",
        1,
        |cx| infer(cx, Kind::Any, Linearity::None),
        |x, _| Some(x[0].abs())
    ),
    op!(
        "ew.exp",
        "e ** a",
        1,
        |cx| infer(cx, Kind::Float, Linearity::None),
        |x, _| Some(x[0].exp())
    ),
    op!(
        "ew.log",
        "natural logarithm",
        1,
        |cx| infer(cx, Kind::Float, Linearity::None),
        |x, _| Some(x[0].ln())
    ),
    op!(
        "ew.log1p",
        "log(1 + a), accurate for small a",
        1,
        |cx| infer(cx, Kind::Float, Linearity::None),
        |x, _| Some(x[0].ln_1p())
    ),
    op!(
        "ew.sqrt",
        "square root",
        1,
        |cx| infer(cx, Kind::Float, Linearity::None),
        |x, _| Some(x[0].sqrt())
    ),
    op!(
        "ew.rsqrt",
        "1 / sqrt(a)",
        1,
        |cx| infer(cx, Kind::Float, Linearity::None),
        |x, _| Some(1.0 / x[0].sqrt())
    ),
    op!(
        "ew.tanh",
        "hyperbolic tangent",
        1,
        |cx| infer(cx, Kind::Float, Linearity::None),
        |x, _| Some(x[0].tanh())
    ),
    op!(
        "ew.sigmoid",
        "1 / (1 + e ** -a)",
        1,
        |cx| infer(cx, Kind::Float, Linearity::None),
        |x, _| Some(1.0 / (1.0 + (-x[0]).exp()))
    ),
    op!(
        "ew.erf",
        "the error function",
        1,
        |cx| infer(cx, Kind::Float, Linearity::None),
        |x, _| Some(libm::erf(x[0]))
    ),
    op!(
        "ew.select",
        "c ? a : b (c is i1)",
        3,
        infer_select,
        |x, _| Some(if x[0] != 0.0 { x[1] } else { x[2] })
    ),
    OpDef {
        name: "ew.cmp",
        summary: "a <pred> b as i1 (pred: lt, le, gt, ge, eq, ne)",
        operands: Arity::Exact(2),
        positional: &["pred"],
        attrs: &[AttrSpec {
            name: "pred",
            kind: AttrKind::Word(PREDICATES),
        }],
        infer: |cx| infer(cx, Kind::Compare, Linearity::None),
        fold: Some(fold_cmp as FoldFn),
        result_from_declared: false,
        extra_attrs: false,
    },
    OpDef {
        name: "ew.cast",
        summary: "convert to the declared element type",
        operands: Arity::Exact(1),
        positional: &[],
        attrs: &[],
        infer: infer_cast,
        fold: Some(|x, _| Some(x[0])),
        result_from_declared: true,
        extra_attrs: false,
    },
];

fn fold_cmp(x: &[f64], attrs: &indexmap::IndexMap<String, efir_ir::Attr>) -> Option<f64> {
    let (a, b) = (x[0], x[1]);
    let r = match attrs.get("pred")?.as_word()? {
        "lt" => a < b,
        "le" => a <= b,
        "gt" => a > b,
        "ge" => a >= b,
        "eq" => a == b,
        "ne" => a != b,
        _ => return None,
    };
    Some(if r { 1.0 } else { 0.0 })
}

/// Which dtypes an op accepts and what it returns.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Any dtype; result has the operands' dtype.
    Any,
    /// Floating point only.
    Float,
    /// Any dtype; result is i1.
    Compare,
}

fn common_dtype(cx: &InferCtx<'_>, ts: &[&TensorType], first: usize) -> Result<DType, Diag> {
    let dt = ts[first].dtype;
    for (k, t) in ts.iter().enumerate().skip(first + 1) {
        if t.dtype != dt {
            return Err(cx
                .operand_err(
                    k,
                    codes::E0302,
                    format!(
                        "operand element types of `{}` differ: {} and {}",
                        cx.op.name, dt, t.dtype
                    ),
                )
                .with_label(format!("this is {}", t.dtype))
                .with_secondary(cx.op.operand_span(first), format!("this is {dt}"))
                .with_note("insert `ew.cast` to convert one of them"));
        }
    }
    Ok(dt)
}

fn broadcast(cx: &InferCtx<'_>, ts: &[&TensorType]) -> Result<Vec<efir_ir::Dim>, Diag> {
    let shapes: Vec<&[efir_ir::Dim]> = ts.iter().map(|t| t.shape.as_slice()).collect();
    broadcast_shapes(&shapes).map_err(|(a, b)| {
        cx.operand_err(
            b,
            codes::E0301,
            format!(
                "operand shapes of `{}` cannot be broadcast together: {} and {}",
                cx.op.name,
                efir_ir::types::shape_str(&ts[a].shape),
                efir_ir::types::shape_str(&ts[b].shape)
            ),
        )
        .with_label(format!("shape {}", efir_ir::types::shape_str(&ts[b].shape)))
        .with_secondary(
            cx.op.operand_span(a),
            format!("shape {}", efir_ir::types::shape_str(&ts[a].shape)),
        )
    })
}

fn infer(cx: &InferCtx<'_>, kind: Kind, lin: Linearity) -> Result<Type, Diag> {
    let ts = cx.tensors()?;
    let dt = common_dtype(cx, &ts, 0)?;
    if kind == Kind::Any && dt == DType::I1 {
        return Err(cx
            .operand_err(
                0,
                codes::E0303,
                format!("`{}` is not defined on i1 values", cx.op.name),
            )
            .with_label("this is i1")
            .with_note("use `ew.select` or `ew.cmp` on booleans, or cast them first"));
    }
    if kind == Kind::Float && !dt.is_float() {
        return Err(cx
            .operand_err(
                0,
                codes::E0303,
                format!("`{}` needs floating-point operands, found {dt}", cx.op.name),
            )
            .with_label(format!("this is {dt}")));
    }
    let shape = broadcast(cx, &ts)?;
    let state = ew_state(cx, &ts, &shape, lin)?;
    let dtype = if kind == Kind::Compare { DType::I1 } else { dt };
    Ok(Type::Tensor(TensorType {
        dtype,
        shape,
        state,
    }))
}

fn infer_select(cx: &InferCtx<'_>) -> Result<Type, Diag> {
    let ts = cx.tensors()?;
    if ts[0].dtype != DType::I1 {
        return Err(cx
            .operand_err(
                0,
                codes::E0303,
                format!(
                    "the condition of `ew.select` must be i1, found {}",
                    ts[0].dtype
                ),
            )
            .with_label("not i1"));
    }
    let dt = common_dtype(cx, &ts, 1)?;
    let shape = broadcast(cx, &ts)?;
    let state = ew_state(cx, &ts, &shape, Linearity::None)?;
    Ok(Type::Tensor(TensorType {
        dtype: dt,
        shape,
        state,
    }))
}

fn infer_cast(cx: &InferCtx<'_>) -> Result<Type, Diag> {
    let t = cx.tensor(0)?;
    let target = cx.declared_tensor()?;
    let state = ew_state(cx, &[t], &t.shape, Linearity::Unary)?;
    Ok(Type::Tensor(TensorType {
        dtype: target.dtype,
        shape: t.shape.clone(),
        state,
    }))
}

#[cfg(test)]
mod pointwise_tests {
    use super::pointwise_ops;

    #[test]
    fn pointwise_ops_are_the_attribute_free_ops_of_their_arity() {
        let unary: Vec<_> = pointwise_ops(1).collect();
        let binary: Vec<_> = pointwise_ops(2).collect();
        assert_eq!(
            unary,
            [
                "ew.neg",
                "ew.abs",
                "ew.exp",
                "ew.log",
                "ew.log1p",
                "ew.sqrt",
                "ew.rsqrt",
                "ew.tanh",
                "ew.sigmoid",
                "ew.erf"
            ]
        );
        assert_eq!(
            binary,
            ["ew.add", "ew.sub", "ew.mul", "ew.div", "ew.max", "ew.min", "ew.pow"]
        );
        // (`ew.cast` declares its result, `ew.cmp` takes a predicate.)
    }
}
