//! Typing of `tensor.matmul` and `tile.matmul`: shapes `[..., M, K] x [...,
//! K, N] -> [..., M, N]` with numpy-broadcast batch dims, and how parallel
//! states combine per axis.
//!
//! | a | b | result | |
//! |---|---|---|---|
//! | repl | repl | repl | |
//! | part(batch) | part(same batch) or repl where b is broadcast | part(batch) | both |
//! | part(M) | repl | part(M) | tile only |
//! | repl | part(N) | part(N) | tile only |
//! | part(K) | part(K) | partial(#red.sum) | tile only |
//! | partial(#red.sum) | repl (or the reverse) | partial(#red.sum) | both (linear) |

use efir_diagnostics::{codes, Diag};
use efir_ir::shape::{all_axes, broadcast_shapes, is_broadcast_along};
use efir_ir::{Attr, AxisState, InferCtx, State, TensorType, Type};

/// Infer the result type of a matmul (`tile` selects the tile-level rules).
pub fn infer_matmul(cx: &InferCtx<'_>, tile: bool) -> Result<Type, Diag> {
    let a = cx.tensor(0)?;
    let b = cx.tensor(1)?;
    for (k, t) in [(0, a), (1, b)] {
        if t.rank() < 2 {
            return Err(cx
                .operand_err(
                    k,
                    codes::E0401,
                    format!(
                        "`{}` needs operands of rank 2 or more, found rank {}",
                        cx.op.name,
                        t.rank()
                    ),
                )
                .with_label(format!("{t}")));
        }
    }
    if a.dtype != b.dtype {
        return Err(cx
            .operand_err(
                1,
                codes::E0302,
                format!(
                    "matmul operand element types differ: {} and {}",
                    a.dtype, b.dtype
                ),
            )
            .with_label(format!("this is {}", b.dtype)));
    }
    let (ra, rb) = (a.rank(), b.rank());
    if a.shape[ra - 1] != b.shape[rb - 2] {
        return Err(cx
            .operand_err(
                1,
                codes::E0401,
                format!(
                    "matmul contraction dims differ: a has K = {} but b has K = {}",
                    a.shape[ra - 1],
                    b.shape[rb - 2]
                ),
            )
            .with_label(format!("K = {}", b.shape[rb - 2]))
            .with_secondary(cx.op.operand_span(0), format!("K = {}", a.shape[ra - 1])));
    }
    let batch = broadcast_shapes(&[&a.shape[..ra - 2], &b.shape[..rb - 2]]).map_err(|_| {
        cx.err(
            codes::E0402,
            "matmul batch dims cannot be broadcast together",
        )
        .with_label(format!(
            "batch dims {} and {}",
            efir_ir::types::shape_str(&a.shape[..ra - 2]),
            efir_ir::types::shape_str(&b.shape[..rb - 2])
        ))
    })?;
    let mut shape = batch.clone();
    shape.push(a.shape[ra - 2].clone());
    shape.push(b.shape[rb - 1].clone());
    let state = matmul_state(cx, a, b, &batch, tile)?;
    Ok(Type::Tensor(TensorType {
        dtype: a.dtype,
        shape,
        state,
    }))
}

fn matmul_state(
    cx: &InferCtx<'_>,
    a: &TensorType,
    b: &TensorType,
    batch: &[efir_ir::Dim],
    tile: bool,
) -> Result<State, Diag> {
    let (ra, rb, nb) = (a.rank(), b.rank(), batch.len());
    let rr = nb + 2;
    let mut out = State::new();
    for axis in all_axes(&[a, b]) {
        let (Some(sa), Some(sb)) = (a.state.get(&axis), b.state.get(&axis)) else {
            let k = if a.state.contains_key(&axis) { 1 } else { 0 };
            return Err(cx
                .operand_err(
                    k,
                    codes::E0605,
                    format!("both matmul operands must live under `@{axis}`"),
                )
                .with_label(format!("no state for `@{axis}`"))
                .with_note("use `par.replicate` for the operand shared by every coordinate"));
        };
        // Batch dim of an operand aligned to the result's batch dims.
        let batch_of =
            |i: usize, r: usize| -> Option<usize> { (i + 2 < r).then(|| i + nb + 2 - r) };
        let tile_only = |what: &str| -> Result<AxisState, Diag> {
            Err(cx
                .err(codes::E0605, format!("`tensor.matmul` cannot take operands partitioned along {what} by `@{axis}`"))
                .with_label("partitioned along a matrix dim")
                .with_note("a matmul on tiles is `tile.matmul`"))
        };
        let bad = || -> Result<AxisState, Diag> {
            Err(cx
                .err(codes::E0605, format!("matmul operand states {sa} and {sb} over `@{axis}` cannot be combined"))
                .with_label("incompatible parallel states")
                .with_note("legal: repl x repl, part(M) x repl, repl x part(N), part(K) x part(K), matching batch partitions"))
        };
        let st = match (sa, sb) {
            (AxisState::Repl, AxisState::Repl) => AxisState::Repl,
            (AxisState::Part(i), AxisState::Repl) if *i == ra - 2 => {
                if tile {
                    AxisState::Part(rr - 2)
                } else {
                    tile_only("M")?
                }
            }
            (AxisState::Repl, AxisState::Part(j)) if *j == rb - 1 => {
                if tile {
                    AxisState::Part(rr - 1)
                } else {
                    tile_only("N")?
                }
            }
            (AxisState::Part(i), AxisState::Part(j)) if *i == ra - 1 && *j == rb - 2 => {
                if tile {
                    AxisState::Partial(Attr::term("red.sum"))
                } else {
                    tile_only("K")?
                }
            }
            (AxisState::Part(i), AxisState::Repl) => match batch_of(*i, ra) {
                Some(r)
                    if a.shape[*i] == batch[r]
                        && is_broadcast_along(&b.shape[..rb - 2], nb, r, batch) =>
                {
                    AxisState::Part(r)
                }
                _ => bad()?,
            },
            (AxisState::Repl, AxisState::Part(j)) => match batch_of(*j, rb) {
                Some(r)
                    if b.shape[*j] == batch[r]
                        && is_broadcast_along(&a.shape[..ra - 2], nb, r, batch) =>
                {
                    AxisState::Part(r)
                }
                _ => bad()?,
            },
            (AxisState::Part(i), AxisState::Part(j)) => {
                match (batch_of(*i, ra), batch_of(*j, rb)) {
                    (Some(r1), Some(r2)) if r1 == r2 && a.shape[*i] == b.shape[*j] => {
                        AxisState::Part(r1)
                    }
                    _ => bad()?,
                }
            }
            (AxisState::Partial(r), AxisState::Repl) | (AxisState::Repl, AxisState::Partial(r))
                if efir_dialect_red::is_sum(r) =>
            {
                AxisState::Partial(r.clone())
            }
            _ => bad()?,
        };
        out.insert(axis, st);
    }
    Ok(out)
}
