//! Typing of the view ops: reshape, transpose, broadcast.

use efir_diagnostics::{codes, Diag};
use efir_ir::types::shape_str;
use efir_ir::{AxisState, Dim, InferCtx, State, TensorType, Type};

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

/// The dims of `shape` cut at its symbolic extents: the names of those
/// extents in order, and the products of the static dims before, between
/// and after them (`2x|@n|x4x8` -> `[n]`, `[2, 32]`); None on overflow.
fn segments(shape: &[Dim]) -> Option<(Vec<&str>, Vec<u64>)> {
    let (mut names, mut products) = (Vec::new(), vec![1u64]);
    for d in shape {
        match d {
            Dim::Static(n) => {
                let last = products.last_mut()?;
                *last = last.checked_mul(*n)?;
            }
            Dim::Axis(a) => {
                names.push(a.as_str());
                products.push(1);
            }
        }
    }
    Some((names, products))
}

/// `tensor.reshape`: same element count; `part(i)` survives only if dims
/// `0..=i` are unchanged. With symbolic extents, each must stay a dim of
/// its own, in the same order, and only the static dims around it may be
/// split or merged (the static products before, between and after the
/// symbolic extents equal): unit dims inserted or removed next to `|@n|`,
/// `|@n|x4x8` to `|@n|x32`; not `|@n|x8` to `8x|@n|` or `2x|@n|` to
/// `|@n|x2`, whose element counts are equal but which move data across the
/// symbolic extent.
pub fn infer_reshape(cx: &InferCtx<'_>) -> Result<Type, Diag> {
    let t = cx.tensor(0)?;
    let target = cx.declared_tensor()?;
    let (a, b) = (segments(&t.shape), segments(&target.shape));
    if a.is_none() || a != b {
        let (from, to) = (shape_str(&t.shape), shape_str(&target.shape));
        // an overflowing static product is reported as a count that differs
        let same_symbols = !matches!((&a, &b), (Some(a), Some(b)) if a.0 != b.0);
        let same_count = matches!((&a, &b), (Some(a), Some(b))
            if a.1.iter().try_fold(1u64, |x, y| x.checked_mul(*y))
                == b.1.iter().try_fold(1u64, |x, y| x.checked_mul(*y)));
        let note = "only static dims next to a symbolic extent may be split, merged, inserted or removed (unit dims)";
        return Err(if !same_symbols {
            cx.err(
                codes::E0404,
                format!("reshape from {from} to {to} does not keep each symbolic extent whole"),
            )
            .with_label("a symbolic extent is split, merged, added or dropped")
            .with_note(note)
        } else if !same_count {
            cx.err(
                codes::E0404,
                format!("reshape from {from} to {to} changes the number of elements"),
            )
            .with_label("element counts differ")
        } else {
            cx.err(
                codes::E0404,
                format!("reshape from {from} to {to} moves static dims across a symbolic extent"),
            )
            .with_label("static products around the symbolic extents differ")
            .with_note(note)
        });
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
