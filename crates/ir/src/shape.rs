//! Shape and parallel-state helpers shared by the dialects: numpy
//! broadcasting of logical shapes, and how a parallel state carries over
//! when dims are aligned from the right.

use crate::types::{AxisState, Dim, State, TensorType};

/// Broadcast shapes numpy style (aligned from the right; a dim of 1
/// stretches). Returns the pair of operand indices that conflict.
pub fn broadcast_shapes(shapes: &[&[Dim]]) -> Result<Vec<Dim>, (usize, usize)> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![Dim::Static(1); rank];
    let mut from: Vec<Option<usize>> = vec![None; rank];
    for (k, s) in shapes.iter().enumerate() {
        let off = rank - s.len();
        for (j, d) in s.iter().enumerate() {
            let r = off + j;
            if d.is_one() {
                continue;
            }
            if out[r].is_one() {
                out[r] = d.clone();
                from[r] = Some(k);
            } else if out[r] != *d {
                return Err((from[r].unwrap_or(0), k));
            }
        }
    }
    Ok(out)
}

/// Whether an operand of shape `op_shape`, aligned from the right to a
/// result of rank `rank`, is broadcast along result dim `r` (absent there,
/// or of extent 1 where the result's extent is not 1).
pub fn is_broadcast_along(op_shape: &[Dim], rank: usize, r: usize, result: &[Dim]) -> bool {
    let off = rank - op_shape.len();
    if r < off {
        return true;
    }
    op_shape[r - off].is_one() && !result[r].is_one()
}

/// The state of `t` with every `part(i)` index shifted by `delta` (for
/// dims added or removed in front).
pub fn shift_parts(state: &State, delta: isize) -> State {
    state
        .iter()
        .map(|(a, s)| {
            let s = match s {
                AxisState::Part(i) => AxisState::Part((*i as isize + delta) as usize),
                s => s.clone(),
            };
            (a.clone(), s)
        })
        .collect()
}

/// The axes that appear in any of the tensors, in name order.
pub fn all_axes(ts: &[&TensorType]) -> Vec<String> {
    let mut axes: Vec<String> = ts.iter().flat_map(|t| t.state.keys().cloned()).collect();
    axes.sort();
    axes.dedup();
    axes
}
