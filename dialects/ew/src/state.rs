//! Parallel states through pointwise ops.
//!
//! For every parallel axis `@p` of any operand, every operand must live
//! under `@p`:
//! - if some operand is `part(i)`, all partitioned operands must slice the
//!   same result dim `r` (dims aligned from the right) and every other
//!   operand must be `repl` and broadcast along `r`; the result is
//!   `part(r)`;
//! - else if some operand is `partial(ρ)`, the op must be linear in it:
//!   `add`/`sub` of partial sums, `mul` of one partial sum by replicated
//!   values, `div` of a partial sum by replicated values, `neg`, `cast`;
//!   the result is `partial(#red.sum)`;
//! - else every operand is `repl` and so is the result.

use efir_diagnostics::{codes, Diag};
use efir_ir::shape::{all_axes, is_broadcast_along};
use efir_ir::{AxisState, Dim, InferCtx, State, TensorType};

/// How an op treats partial sums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Linearity {
    /// Not linear: partial operands are rejected.
    None,
    /// `add`, `sub`: every operand a partial sum.
    Additive,
    /// `mul`: exactly one partial-sum operand, the others replicated.
    Scaling,
    /// `div`: the numerator a partial sum, the denominator replicated.
    Numerator,
    /// `neg`, `cast`: the single operand a partial sum.
    Unary,
}

/// The result state of a pointwise op over `ts` with result shape `shape`.
pub fn ew_state(
    cx: &InferCtx<'_>,
    ts: &[&TensorType],
    shape: &[Dim],
    lin: Linearity,
) -> Result<State, Diag> {
    let rank = shape.len();
    let mut out = State::new();
    for axis in all_axes(ts) {
        let mut states = Vec::new();
        for (k, t) in ts.iter().enumerate() {
            match t.state.get(&axis) {
                Some(s) => states.push(s),
                None => {
                    let other = ts
                        .iter()
                        .position(|t| t.state.contains_key(&axis))
                        .unwrap_or(0);
                    return Err(cx
                        .operand_err(
                            k,
                            codes::E0304,
                            format!(
                                "operands of `{}` must live under the same parallel axes; this one has no state for `@{axis}`",
                                cx.op.name
                            ),
                        )
                        .with_label("missing `@".to_string() + &axis + "`")
                        .with_secondary(cx.op.operand_span(other), format!("this operand lives under `@{axis}`"))
                        .with_note("use `par.replicate` for an operand shared by every coordinate"));
                }
            }
        }
        let parts: Vec<(usize, usize)> = states
            .iter()
            .enumerate()
            .filter_map(|(k, s)| match s {
                AxisState::Part(i) => Some((k, i + rank - ts[k].rank())),
                _ => None,
            })
            .collect();
        if let Some(&(k0, r)) = parts.first() {
            for (k, s) in states.iter().enumerate() {
                match s {
                    AxisState::Part(i) => {
                        let rk = parts.iter().find(|p| p.0 == k).map(|p| p.1).unwrap_or(r);
                        if ts[k].shape[*i] != shape[rk] {
                            return Err(cx
                                .operand_err(
                                    k,
                                    codes::E0304,
                                    format!(
                                        "operand is partitioned by `@{axis}` along a dim it is broadcast along (extent {} against {})",
                                        ts[k].shape[*i], shape[rk]
                                    ),
                                )
                                .with_label("partitioned broadcast dim")
                                .with_note("replicate the operand instead: `par.replicate`"));
                        }
                        if rk != r {
                            return Err(cx
                                .operand_err(
                                    k,
                                    codes::E0304,
                                    format!(
                                        "operands are partitioned along different dims by `@{axis}` (result dims {r} and {rk})"
                                    ),
                                )
                                .with_label(format!("`@{axis}` slices result dim {rk} here"))
                                .with_secondary(cx.op.operand_span(k0), format!("`@{axis}` slices result dim {r} here")));
                        }
                    }
                    AxisState::Repl => {
                        if !is_broadcast_along(&ts[k].shape, rank, r, shape) {
                            return Err(cx
                                .operand_err(
                                    k,
                                    codes::E0304,
                                    format!(
                                        "operand is replicated over `@{axis}` but not broadcast along dim {r}, which `@{axis}` partitions"
                                    ),
                                )
                                .with_label("replicated, not broadcast")
                                .with_secondary(cx.op.operand_span(k0), format!("partitioned along dim {r}"))
                                .with_note("partition this operand the same way"));
                        }
                    }
                    AxisState::Partial(_) => {
                        return Err(cx
                            .operand_err(
                                k,
                                codes::E0305,
                                format!("`{}` cannot mix partial and partitioned operands over `@{axis}`", cx.op.name),
                            )
                            .with_label("partial value"));
                    }
                }
            }
            out.insert(axis, AxisState::Part(r));
            continue;
        }
        let partials: Vec<usize> = states
            .iter()
            .enumerate()
            .filter(|(_, s)| matches!(s, AxisState::Partial(_)))
            .map(|(k, _)| k)
            .collect();
        if partials.is_empty() {
            out.insert(axis, AxisState::Repl);
            continue;
        }
        let all_sum = partials
            .iter()
            .all(|&k| matches!(states[k], AxisState::Partial(r) if efir_dialect_red::is_sum(r)));
        let legal = all_sum
            && match lin {
                Linearity::None => false,
                Linearity::Additive | Linearity::Unary => partials.len() == ts.len(),
                Linearity::Scaling => partials.len() == 1,
                Linearity::Numerator => partials == [0],
            };
        if !legal {
            let k = partials[0];
            return Err(cx
                .operand_err(
                    k,
                    codes::E0305,
                    format!(
                        "`{}` is not allowed on this partial value over `@{axis}`",
                        cx.op.name
                    ),
                )
                .with_label(format!("{}", states[k]))
                .with_note("pointwise ops apply to partial values only where they are linear: add/sub of partial sums, mul or div of a partial sum by replicated values, neg, cast; reduce with `par.reduce` first"));
        }
        out.insert(axis, AxisState::Partial(efir_ir::Attr::term("red.sum")));
    }
    Ok(out)
}
