//! The `tensor` dialect: constants, matmul, reductions, views, slices,
//! concatenation and tuples at tensor level. Function arguments are the
//! function's parameters.

pub mod eval;
pub mod matmul;
pub mod slices;
mod views;

use efir_diagnostics::{codes, Diag};
use efir_ir::dialect::{Arity, AttrKind, AttrSpec, DialectDef, InferCtx, OpDef};
use efir_ir::{Attr, AxisState, DType, State, TensorType, Type};

/// The `tensor` dialect.
pub static DIALECT: DialectDef = DialectDef {
    name: "tensor",
    summary: "Tensor-level constants, matmul, reductions, views, slices, concatenation and tuples",
    ops: &[
        OpDef {
            name: "tensor.full",
            summary: "a tensor of the declared type filled with one value",
            operands: Arity::Exact(0),
            positional: &["value"],
            attrs: &[AttrSpec {
                name: "value",
                kind: AttrKind::Number,
            }],
            infer: infer_full,
            fold: None,
            result_from_declared: true,
            extra_attrs: false,
        },
        OpDef {
            name: "tensor.iota",
            summary: "each element is its index along `dim`",
            operands: Arity::Exact(0),
            positional: &["dim"],
            attrs: &[AttrSpec {
                name: "dim",
                kind: AttrKind::Int,
            }],
            infer: infer_iota,
            fold: None,
            result_from_declared: true,
            extra_attrs: false,
        },
        OpDef {
            name: "tensor.matmul",
            summary: "batched matrix product [..., M, K] x [..., K, N] with broadcast batch dims",
            operands: Arity::Exact(2),
            positional: &[],
            attrs: &[],
            infer: |cx| matmul::infer_matmul(cx, false),
            fold: None,
            result_from_declared: false,
            extra_attrs: false,
        },
        OpDef {
            name: "tensor.reduce",
            summary: "reduce dim `dim` with a reducer (the dim is removed)",
            operands: Arity::Exact(1),
            positional: &["reducer", "dim"],
            attrs: &[
                AttrSpec {
                    name: "reducer",
                    kind: AttrKind::Reducer,
                },
                AttrSpec {
                    name: "dim",
                    kind: AttrKind::Int,
                },
            ],
            infer: infer_reduce,
            fold: None,
            result_from_declared: false,
            extra_attrs: false,
        },
        OpDef {
            name: "tensor.reshape",
            summary: "the same elements in row-major order under the declared shape",
            operands: Arity::Exact(1),
            positional: &[],
            attrs: &[],
            infer: views::infer_reshape,
            fold: None,
            result_from_declared: true,
            extra_attrs: false,
        },
        OpDef {
            name: "tensor.transpose",
            summary: "permute dims: result dim k is operand dim perm[k]",
            operands: Arity::Exact(1),
            positional: &["perm"],
            attrs: &[AttrSpec {
                name: "perm",
                kind: AttrKind::IntArray,
            }],
            infer: views::infer_transpose,
            fold: None,
            result_from_declared: false,
            extra_attrs: false,
        },
        OpDef {
            name: "tensor.broadcast",
            summary: "numpy-broadcast to the declared shape",
            operands: Arity::Exact(1),
            positional: &[],
            attrs: &[],
            infer: views::infer_broadcast,
            fold: None,
            result_from_declared: true,
            extra_attrs: false,
        },
        OpDef {
            name: "tensor.slice",
            summary: "elements start[k], start[k] + step[k], ... below stop[k] of every dim k",
            operands: Arity::Exact(1),
            positional: &["start", "stop", "step"],
            attrs: &[
                AttrSpec {
                    name: "start",
                    kind: AttrKind::IntArray,
                },
                AttrSpec {
                    name: "stop",
                    kind: AttrKind::IntArray,
                },
                AttrSpec {
                    name: "step",
                    kind: AttrKind::IntArray,
                },
            ],
            infer: slices::infer_slice,
            fold: None,
            result_from_declared: false,
            extra_attrs: false,
        },
        OpDef {
            name: "tensor.concat",
            summary: "join the operands along dim `dim`, in order",
            operands: Arity::AtLeast(1),
            positional: &["dim"],
            attrs: &[AttrSpec {
                name: "dim",
                kind: AttrKind::Int,
            }],
            infer: slices::infer_concat,
            fold: None,
            result_from_declared: false,
            extra_attrs: false,
        },
        OpDef {
            name: "tensor.tuple",
            summary: "group values into a tuple",
            operands: Arity::AtLeast(1),
            positional: &[],
            attrs: &[],
            infer: |cx| {
                Ok(Type::Tuple(
                    cx.operands.iter().map(|t| (*t).clone()).collect(),
                ))
            },
            fold: None,
            result_from_declared: false,
            extra_attrs: false,
        },
        OpDef {
            name: "tensor.get",
            summary: "field `index` of a tuple",
            operands: Arity::Exact(1),
            positional: &["index"],
            attrs: &[AttrSpec {
                name: "index",
                kind: AttrKind::Int,
            }],
            infer: infer_get,
            fold: None,
            result_from_declared: false,
            extra_attrs: false,
        },
    ],
    terms: &[],
    verify_func: None,
};

fn constant_type(cx: &InferCtx<'_>) -> Result<TensorType, Diag> {
    let t = cx.declared_tensor()?;
    if let Some((axis, _)) = t
        .state
        .iter()
        .find(|(_, s)| matches!(s, AxisState::Partial(_)))
    {
        return Err(cx
            .err(
                codes::E0409,
                format!("a constant cannot be partial over `@{axis}`"),
            )
            .with_label("constants are partitioned or replicated, never partial"));
    }
    Ok(t.clone())
}

fn infer_full(cx: &InferCtx<'_>) -> Result<Type, Diag> {
    let t = constant_type(cx)?;
    let v = cx.attr("value");
    let x = v.as_f64().unwrap_or(0.0);
    let ok = match (t.dtype, v) {
        (DType::I1, Attr::Int(i)) => *i == 0 || *i == 1,
        (DType::I1, _) => false,
        (DType::I32, _) => x.fract() == 0.0 && x.abs() <= i32::MAX as f64,
        (DType::I64, Attr::Int(_)) => true,
        (DType::I64, _) => x.fract() == 0.0 && x.abs() < 9.2e18,
        // Finite values must not overflow to infinity (write `inf` for that).
        (DType::F16, _) => !x.is_finite() || x.abs() <= 65504.0,
        (DType::BF16, _) => !x.is_finite() || x.abs() <= 3.3895e38,
        (DType::F32, _) => !x.is_finite() || x.abs() <= f32::MAX as f64,
        (DType::F64, _) => true,
    };
    if !ok {
        return Err(cx
            .attr_err(
                "value",
                codes::E0409,
                format!("`{v}` is not a value of type {}", t.dtype),
            )
            .with_label("does not fit the element type"));
    }
    Ok(Type::Tensor(t))
}

fn infer_iota(cx: &InferCtx<'_>) -> Result<Type, Diag> {
    let t = constant_type(cx)?;
    cx.dim("dim", t.rank())?;
    if t.dtype == DType::I1 {
        return Err(cx.err(codes::E0409, "`tensor.iota` cannot produce i1"));
    }
    Ok(Type::Tensor(t))
}

fn infer_get(cx: &InferCtx<'_>) -> Result<Type, Diag> {
    let i = cx.int("index");
    match cx.operands[0] {
        Type::Tuple(fields) if i >= 0 && (i as usize) < fields.len() => {
            Ok(fields[i as usize].clone())
        }
        Type::Tuple(fields) => Err(cx
            .attr_err(
                "index",
                codes::E0407,
                format!(
                    "index {i} is out of range for a tuple of {} fields",
                    fields.len()
                ),
            )
            .with_label("out of range")),
        t => Err(cx
            .operand_err(
                0,
                codes::E0407,
                format!("`tensor.get` needs a tuple, found {t}"),
            )
            .with_label("not a tuple")),
    }
}

/// The state of one field after reducing dim `dim` with `reducer`.
fn reduced_state(
    cx: &InferCtx<'_>,
    state: &State,
    dim: usize,
    reducer: &Attr,
) -> Result<State, Diag> {
    let mut out = State::new();
    for (axis, s) in state {
        let ns = match s {
            AxisState::Part(i) if *i == dim => AxisState::Partial(reducer.clone()),
            AxisState::Part(i) if *i > dim => AxisState::Part(i - 1),
            AxisState::Part(i) => AxisState::Part(*i),
            AxisState::Repl => AxisState::Repl,
            AxisState::Partial(r) if r == reducer && efir_dialect_red::is_simple(r) => {
                AxisState::Partial(r.clone())
            }
            AxisState::Partial(r) => {
                return Err(cx
                    .operand_err(
                        0,
                        codes::E0602,
                        format!(
                        "cannot reduce a value that is partial({r}) over `@{axis}` with {reducer}"
                    ),
                    )
                    .with_label("partial value")
                    .with_note("finish the parallel reduction with `par.reduce` first"))
            }
        };
        out.insert(axis.clone(), ns);
    }
    Ok(out)
}

fn infer_reduce(cx: &InferCtx<'_>) -> Result<Type, Diag> {
    let reducer = cx.attr("reducer");
    let Some(ar) = efir_dialect_red::arity(reducer, cx.sigs) else {
        return Err(cx.attr_err("reducer", codes::E0502, "malformed reducer"));
    };
    let inputs: Vec<&TensorType> = match cx.operands[0] {
        Type::Tensor(t) => vec![t],
        Type::Tuple(fs) => fs.iter().filter_map(Type::as_tensor).collect(),
    };
    let arity_ok = match cx.operands[0] {
        Type::Tensor(_) => ar.inputs == 1,
        Type::Tuple(fs) => fs.len() == ar.inputs && inputs.len() == fs.len(),
    };
    if !arity_ok {
        return Err(cx
            .operand_err(
                0,
                codes::E0408,
                format!(
                    "reducer {reducer} takes {} input field(s), found {}",
                    ar.inputs, cx.operands[0]
                ),
            )
            .with_label("does not fit the reducer"));
    }
    let first = inputs[0];
    if let Some(bad) = inputs
        .iter()
        .find(|t| t.shape != first.shape || t.state != first.state)
    {
        return Err(cx
            .operand_err(
                0,
                codes::E0408,
                format!(
                    "the input fields of a reduction must share shape and state: {first} and {bad}"
                ),
            )
            .with_label("fields differ"));
    }
    let dim = cx.dim("dim", first.rank())?;
    let dts: Vec<DType> = inputs.iter().map(|t| t.dtype).collect();
    let Some(state_dts) = efir_dialect_red::state_dtypes(reducer, &dts, cx.sigs) else {
        return Err(cx.attr_err("reducer", codes::E0502, "cannot type the reducer's state"));
    };
    let state = reduced_state(cx, &first.state, dim, reducer)?;
    let mut shape = first.shape.clone();
    shape.remove(dim);
    let fields: Vec<Type> = state_dts
        .into_iter()
        .map(|dtype| {
            Type::Tensor(TensorType {
                dtype,
                shape: shape.clone(),
                state: state.clone(),
            })
        })
        .collect();
    Ok(if fields.len() == 1 {
        fields.into_iter().next().unwrap_or(Type::Tuple(Vec::new()))
    } else {
        Type::Tuple(fields)
    })
}
