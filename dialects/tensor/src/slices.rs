//! Typing of `tensor.slice` and `tensor.concat`.
//!
//! `tensor.slice<start, stop, step> x` keeps, along every dim `k`, the
//! elements `start[k], start[k] + step[k], ...` below `stop[k]` (numpy's
//! `x[start:stop:step]` per dim, with the bounds already resolved: no
//! negative or clamped indices). `tensor.concat<dim> a, b, ...` joins its
//! operands along `dim`.

use crate::views::state_err;
use efir_diagnostics::{codes, Diag};
use efir_ir::types::shape_str;
use efir_ir::{AxisState, Dim, InferCtx, State, TensorType, Type};

/// The bounds of one dim of a slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// The first index kept.
    pub start: u64,
    /// One past the last index that may be kept.
    pub stop: u64,
    /// The distance between kept indices (at least 1).
    pub step: u64,
}

impl Bounds {
    /// The number of indices kept.
    pub fn len(&self) -> u64 {
        (self.stop - self.start).div_ceil(self.step)
    }

    /// Whether no index is kept (never for a verified slice).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the whole dim of this extent is kept, in order.
    pub fn is_whole(&self, extent: u64) -> bool {
        self.start == 0 && self.stop == extent && self.step == 1
    }
}

/// The bounds of every dim of a verified `tensor.slice` op (from its
/// attributes); `None` if they are missing, negative or empty.
pub fn slice_bounds(op: &efir_ir::Op) -> Option<Vec<Bounds>> {
    let get = |n: &str| op.attrs.get(n).and_then(efir_ir::Attr::as_int_array);
    let (a, b, c) = (get("start")?, get("stop")?, get("step")?);
    if a.len() != b.len() || a.len() != c.len() {
        return None;
    }
    a.iter()
        .zip(&b)
        .zip(&c)
        .map(|((&start, &stop), &step)| {
            let b = Bounds {
                start: u64::try_from(start).ok()?,
                stop: u64::try_from(stop).ok()?,
                step: u64::try_from(step).ok().filter(|s| *s >= 1)?,
            };
            (b.start < b.stop).then_some(b)
        })
        .collect()
}

/// `tensor.slice<start, stop, step> x`.
pub fn infer_slice(cx: &InferCtx<'_>) -> Result<Type, Diag> {
    let t = cx.tensor(0)?;
    let rank = t.rank();
    let mut arrays = Vec::new();
    for name in ["start", "stop", "step"] {
        let v = cx.attr(name).as_int_array().unwrap_or_default();
        if v.len() != rank {
            return Err(cx
                .attr_err(
                    name,
                    codes::E0411,
                    format!(
                        "`{name}` has {} entries, but the operand has rank {rank}",
                        v.len()
                    ),
                )
                .with_label(format!("needs one entry per dim of {}", cx.operands[0]))
                .with_note(
                    "write every dim: a dim kept whole is start 0, stop its extent, step 1",
                ));
        }
        arrays.push(v);
    }
    let mut shape = Vec::with_capacity(rank);
    let mut whole = vec![false; rank];
    for k in 0..rank {
        let (start, stop, step) = (arrays[0][k], arrays[1][k], arrays[2][k]);
        let Dim::Static(n) = t.shape[k] else {
            return Err(cx
                .operand_err(
                    0,
                    codes::E0411,
                    format!("dim {k} of the operand has the symbolic extent {}, which a slice cannot bound", t.shape[k]),
                )
                .with_label(format!("this is {}", cx.operands[0]))
                .with_note("only tensors with static extents can be sliced"));
        };
        if step < 1 {
            return Err(cx
                .attr_err(
                    "step",
                    codes::E0411,
                    format!("the step of dim {k} is {step}; steps must be at least 1"),
                )
                .with_label("not a positive step")
                .with_note("reversed or repeated elements are not a slice"));
        }
        if start < 0 || stop as i128 > n as i128 || start >= stop {
            let why = if start < 0 || stop < 0 {
                "bounds are indices from 0, never negative"
            } else if stop as i128 > n as i128 {
                "the stop is past the extent"
            } else {
                "the slice would be empty (start must be below stop)"
            };
            let attr = if start >= 0 && (stop < 0 || stop as i128 > n as i128) {
                "stop"
            } else {
                "start"
            };
            return Err(cx
                .attr_err(
                    attr,
                    codes::E0411,
                    format!(
                        "dim {k}: the slice [{start}, {stop}) does not fit the extent {n}: {why}"
                    ),
                )
                .with_label(format!("dim {k} has extent {n}"))
                .with_note("0 <= start < stop <= extent, per dim"));
        }
        let b = Bounds {
            start: start as u64,
            stop: stop as u64,
            step: step as u64,
        };
        whole[k] = b.is_whole(n);
        shape.push(Dim::Static(b.len()));
    }
    for (axis, s) in &t.state {
        if let AxisState::Part(i) = s {
            if !whole[*i] {
                return Err(state_err(
                    cx,
                    0,
                    axis,
                    s,
                    &format!("the slice cuts the partitioned dim {i}"),
                ));
            }
        }
    }
    Ok(Type::Tensor(TensorType {
        dtype: t.dtype,
        shape,
        state: t.state.clone(),
    }))
}

/// `tensor.concat<dim> x1, ..., xn`.
pub fn infer_concat(cx: &InferCtx<'_>) -> Result<Type, Diag> {
    let ts = cx.tensors()?;
    let first: &TensorType = ts[0];
    let rank = first.rank();
    let dim = cx.dim("dim", rank)?;
    let mut total = 0u64;
    for (i, t) in ts.iter().enumerate() {
        if t.dtype != first.dtype {
            return Err(cx
                .operand_err(
                    i,
                    codes::E0302,
                    format!(
                        "concatenated operands have different element types: {} and {}",
                        first.dtype, t.dtype
                    ),
                )
                .with_label(format!("this is {}", t.dtype)));
        }
        let fits = t.rank() == rank && (0..rank).all(|k| k == dim || t.shape[k] == first.shape[k]);
        if !fits {
            return Err(cx
                .operand_err(
                    i,
                    codes::E0412,
                    format!(
                        "operand {i} of shape {} does not fit operand 0 of shape {} outside dim {dim}",
                        shape_str(&t.shape),
                        shape_str(&first.shape)
                    ),
                )
                .with_label("shapes differ")
                .with_note("the operands must have one rank and agree on every dim but the concatenated one"));
        }
        let Dim::Static(n) = t.shape[dim] else {
            return Err(cx
                .operand_err(
                    i,
                    codes::E0412,
                    format!(
                        "dim {dim} of operand {i} has the symbolic extent {}, which cannot be concatenated",
                        t.shape[dim]
                    ),
                )
                .with_label("symbolic extent"));
        };
        total += n;
        if t.state != first.state {
            return Err(cx
                .operand_err(
                    i,
                    codes::E0304,
                    format!(
                        "concatenated operands must share one parallel state: {} and {}",
                        first, t
                    ),
                )
                .with_label("state differs from operand 0's"));
        }
    }
    for (axis, s) in &first.state {
        if matches!(s, AxisState::Part(i) if *i == dim) {
            return Err(state_err(
                cx,
                0,
                axis,
                s,
                &format!("dim {dim} is partitioned, and the operands are joined along it"),
            ));
        }
    }
    let mut shape = first.shape.clone();
    shape[dim] = Dim::Static(total);
    let state: State = first.state.clone();
    Ok(Type::Tensor(TensorType {
        dtype: first.dtype,
        shape,
        state,
    }))
}
