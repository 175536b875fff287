//! Typing of the view ops: reshape, transpose, broadcast.

use efir_diagnostics::{codes, Diag};
use efir_ir::types::shape_str;
use efir_ir::{AxisState, InferCtx, State, TensorType, Type};

/// E0410 on operand `i` of a view-like op (views, slices, concatenations):
/// its parallel state over `axis` does not allow the op.
pub(crate) fn state_err(cx: &InferCtx<'_>, i: usize, axis: &str, s: &AxisState, why: &str) -> Diag {
    cx.operand_err(
        i,
        codes::E0410,
        format!(
            "`{}` is not legal on a value that is {s} over `@{axis}`: {why}",
            cx.op.name
        ),
    )
    .with_label(format!("{s} over `@{axis}`"))
    .with_note("combine the axis first, or partition after the op")
}

/// `tensor.reshape`: same element count; `part(i)` survives only if dims
/// `0..=i` are unchanged.
pub fn infer_reshape(cx: &InferCtx<'_>) -> Result<Type, Diag> {
    let t = cx.tensor(0)?;
    let target = cx.declared_tensor()?;
    match (t.num_elements(), target.num_elements()) {
        (Some(a), Some(b)) if a == b => {}
        _ => {
            return Err(cx
                .err(
                    codes::E0404,
                    format!(
                        "reshape from {} to {} changes the number of elements",
                        shape_str(&t.shape),
                        shape_str(&target.shape)
                    ),
                )
                .with_label("element counts differ (or are symbolic)"))
        }
    }
    let mut state = State::new();
    for (axis, s) in &t.state {
        let ns = match s {
            AxisState::Part(i) => {
                if *i < target.rank() && t.shape[..=*i] == target.shape[..=*i] {
                    AxisState::Part(*i)
                } else {
                    return Err(state_err(
                        cx,
                        0,
                        axis,
                        s,
                        "the reshape moves the partitioned dim",
                    ));
                }
            }
            s => s.clone(),
        };
        state.insert(axis.clone(), ns);
    }
    Ok(Type::Tensor(TensorType {
        dtype: t.dtype,
        shape: target.shape.clone(),
        state,
    }))
}

/// `tensor.transpose<perm>`: result dim k is operand dim perm[k].
pub fn infer_transpose(cx: &InferCtx<'_>) -> Result<Type, Diag> {
    let t = cx.tensor(0)?;
    let perm = cx.attr("perm").as_int_array().unwrap_or_default();
    let mut seen = vec![false; t.rank()];
    let valid = perm.len() == t.rank()
        && perm.iter().all(|&p| {
            p >= 0 && (p as usize) < t.rank() && !std::mem::replace(&mut seen[p as usize], true)
        });
    if !valid {
        return Err(cx
            .attr_err(
                "perm",
                codes::E0405,
                format!("{:?} is not a permutation of the {} dims", perm, t.rank()),
            )
            .with_label("invalid permutation"));
    }
    let shape = perm.iter().map(|&p| t.shape[p as usize].clone()).collect();
    let state = t
        .state
        .iter()
        .map(|(a, s)| {
            let ns = match s {
                AxisState::Part(i) => {
                    AxisState::Part(perm.iter().position(|&p| p as usize == *i).unwrap_or(0))
                }
                s => s.clone(),
            };
            (a.clone(), ns)
        })
        .collect();
    Ok(Type::Tensor(TensorType {
        dtype: t.dtype,
        shape,
        state,
    }))
}

/// `tensor.broadcast`: numpy broadcast to the declared shape; a
/// partitioned dim must not be stretched.
pub fn infer_broadcast(cx: &InferCtx<'_>) -> Result<Type, Diag> {
    let t = cx.tensor(0)?;
    let target = cx.declared_tensor()?;
    let off = target.rank().checked_sub(t.rank());
    let fits = off.is_some_and(|off| {
        t.shape
            .iter()
            .enumerate()
            .all(|(j, d)| d.is_one() || *d == target.shape[off + j])
    });
    let Some(off) = off.filter(|_| fits) else {
        return Err(cx
            .err(
                codes::E0406,
                format!(
                    "shape {} cannot be broadcast to {}",
                    shape_str(&t.shape),
                    shape_str(&target.shape)
                ),
            )
            .with_label("not broadcastable"));
    };
    let mut state = State::new();
    for (axis, s) in &t.state {
        let ns = match s {
            AxisState::Part(i) => {
                if t.shape[*i] != target.shape[off + i] {
                    return Err(state_err(
                        cx,
                        0,
                        axis,
                        s,
                        "the partitioned dim is stretched",
                    ));
                }
                AxisState::Part(off + i)
            }
            s => s.clone(),
        };
        state.insert(axis.clone(), ns);
    }
    Ok(Type::Tensor(TensorType {
        dtype: t.dtype,
        shape: target.shape.clone(),
        state,
    }))
}
