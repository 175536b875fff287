//! Causal tile skipping: a `par.reduce` over key tiles whose scores are
//! masked to -inf above the diagonal (`select(row >= col, z, -inf)` with
//! `row` the iota of the query rows and `col` the iota of the keys,
//! partitioned by the loop's axis) stops after the last key tile that
//! meets the program's query tile, where the skipped tiles' states are the
//! reducer's identities: a repaired maximum whose function `f` gives 0 at
//! an input and a maximum of -inf (FlashAttention's causal loop bound).

use super::*;

/// `f` of the module evaluated at scalars (the pointwise ops a reducer
/// function uses); `None` where it uses another op.
fn eval_scalar(g: &Func, args: &[f64]) -> Option<Vec<f64>> {
    let mut env: HashMap<ValueId, f64> =
        g.params.iter().copied().zip(args.iter().copied()).collect();
    for op in &g.ops {
        let x = |i: usize| op.operands.get(i).and_then(|o| env.get(o)).copied();
        let y = match op.name.as_str() {
            "tensor.full" => op.attrs.get("value").and_then(Attr::as_f64)?,
            "ew.add" => x(0)? + x(1)?,
            "ew.sub" => x(0)? - x(1)?,
            "ew.mul" => x(0)? * x(1)?,
            "ew.div" => x(0)? / x(1)?,
            "ew.max" => x(0)?.max(x(1)?),
            "ew.min" => x(0)?.min(x(1)?),
            "ew.neg" => -x(0)?,
            "ew.exp" => x(0)?.exp(),
            "ew.select" => {
                if x(0)? != 0.0 {
                    x(1)?
                } else {
                    x(2)?
                }
            }
            "ew.cmp" => {
                let (a, b) = (x(0)?, x(1)?);
                let t = match op.attrs.get("pred").and_then(Attr::as_word)? {
                    "eq" => a == b,
                    "ne" => a != b,
                    "lt" => a < b,
                    "le" => a <= b,
                    "gt" => a > b,
                    "ge" => a >= b,
                    _ => return None,
                };
                f64::from(u8::from(t))
            }
            _ => return None,
        };
        env.insert(op.result, y);
    }
    g.returns.iter().map(|r| env.get(r).copied()).collect()
}

impl<'c, 'm> Em<'c, 'm, '_, '_> {
    /// The op defining `v` under parallel views, reshapes and broadcasts.
    fn under_views(&self, mut v: ValueId) -> Option<&'_ efir_ir::Op> {
        let f = self.p.func;
        loop {
            if self.p.buffer[v.index()] {
                return None;
            }
            let op = &f.ops[self.p.def[v.index()]?];
            match op.name.as_str() {
                "par.partition" | "par.replicate" | "par.combine" | "tensor.reshape"
                | "tensor.broadcast" => v = op.operands[0],
                _ => return Some(op),
            }
        }
    }

    /// `tensor.iota` of `v` (under views) along `dim`, with its extent.
    fn iota_of(&self, v: ValueId, dim: i64) -> Option<u64> {
        let op = self.under_views(v)?;
        let d = op.attrs.get("dim").and_then(Attr::as_int)?;
        let t = self.p.func.ty(op.result).as_tensor()?;
        match (op.name.as_str(), t.shape.get(dim as usize)) {
            ("tensor.iota", Some(Dim::Static(n))) if d == dim && t.shape.len() == 2 => Some(*n),
            _ => None,
        }
    }

    /// The number of key tiles (an i32 at depth 0) that the program's query
    /// tile meets, the number of those wholly below the diagonal (no key of
    /// them after a query row of the tile), and the mask's comparison,
    /// where the `par.reduce` of `x` (reducer `r`) over `axis`, of result
    /// tiling `lay`, is causal as the module doc says.
    #[allow(clippy::type_complexity)]
    pub(super) fn causal_stop(
        &mut self,
        r: &Attr,
        x: ValueId,
        axis: &str,
        lay: &Layout,
        nt: u64,
    ) -> R<Option<(Value<'c, 'm>, Value<'c, 'm>, ValueId)>> {
        let f = self.p.func;
        // A repaired maximum over one input, and f = 0 at x = m = -inf.
        let Attr::Term(name, args) = r else {
            return Ok(None);
        };
        if name != "red.repair" {
            return Ok(None);
        }
        let Some((p, _, fname, _)) = repair_parts(args) else {
            return Ok(None);
        };
        let Some(ar) = arity(p, &self.sigs) else {
            return Ok(None);
        };
        if !matches!(p, Attr::Term(n, _) if n == "red.max") || ar.inputs != 1 {
            return Ok(None);
        }
        let Some(g) = self.p.module.func(fname) else {
            return Ok(None);
        };
        let n_in = g.params.len().saturating_sub(1);
        for v in [1.0, -3.5] {
            let mut a = vec![v; g.params.len()];
            a[0] = f64::NEG_INFINITY;
            a[n_in] = f64::NEG_INFINITY;
            match eval_scalar(g, &a) {
                Some(ys) if ys.iter().all(|y| *y == 0.0) => {}
                _ => return Ok(None),
            }
        }
        // The reduction's first field: select(row >= col, z, -inf).
        let Some(red) = self.under_views(x) else {
            return Ok(None);
        };
        if red.name != "tensor.reduce" {
            return Ok(None);
        }
        let Some(tup) = self.under_views(red.operands[0]) else {
            return Ok(None);
        };
        if tup.name != "tensor.tuple" {
            return Ok(None);
        }
        let Some(sel) = self.under_views(tup.operands[0]) else {
            return Ok(None);
        };
        if sel.name != "ew.select" || sel.operands.len() != 3 {
            return Ok(None);
        }
        let ninf = self.under_views(sel.operands[2]).is_some_and(|o| {
            o.name == "tensor.full"
                && o.attrs.get("value").and_then(Attr::as_f64) == Some(f64::NEG_INFINITY)
        });
        let Some(cmp) = self.under_views(sel.operands[0]) else {
            return Ok(None);
        };
        let ge =
            cmp.name == "ew.cmp" && cmp.attrs.get("pred").and_then(Attr::as_word) == Some("ge");
        if !ninf || !ge {
            return Ok(None);
        }
        let mask = cmp.result;
        let (Some(rows), Some(cols)) = (
            self.iota_of(cmp.operands[0], 0),
            self.iota_of(cmp.operands[1], 1),
        ) else {
            return Ok(None);
        };
        // The key iota partitioned by the loop's axis.
        let col_axis = layout_of(f.ty(cmp.operands[1])).get(1).cloned().flatten();
        if col_axis.as_deref() != Some(axis) {
            return Ok(None);
        }
        // The query rows: the grid axis tiling the result's rows (its
        // second-to-last dim, of the iota's extent).
        let rank = lay.len();
        let Some((er, _)) = leaf_shapes(self.p, f.ty(x))?.first().cloned() else {
            return Ok(None);
        };
        if rank < 2 || er.get(rank - 2) != Some(&rows) {
            return Ok(None);
        }
        let Some(gax) = lay[rank - 2].clone() else {
            return Ok(None);
        };
        let (Some(&(0, _)), Some(&ig)) = (self.bound.get(&gax), self.idx.get(&gax)) else {
            return Ok(None);
        };
        let (bg, bl) = (self.block_of(&gax)?, self.block_of(axis)?);
        if cols.div_ceil(bl) != nt {
            return Ok(None);
        }
        // Programs of later tiles of `gax` loop longer (see [`Em::run`]).
        self.heavy.get_or_insert_with(|| gax.clone());
        // min(((ig + 1) * bg + bl - 1) / bl, nt)
        let one = self.const_i32(0, 1)?;
        let cbg = self.const_i32(0, bg as i64)?;
        let cbl1 = self.const_i32(0, bl as i64 - 1)?;
        let cbl = self.const_i32(0, bl as i64)?;
        let cnt = self.const_i32(0, nt as i64)?;
        let a = self.val(0, "arith.addi", &[ig, one], "i32", &[])?;
        let a = self.val(0, "arith.muli", &[a, cbg], "i32", &[])?;
        let a = self.val(0, "arith.addi", &[a, cbl1], "i32", &[])?;
        let a = self.val(0, "arith.divsi", &[a, cbl], "i32", &[])?;
        let hi = self.val(0, "arith.minsi", &[a, cnt], "i32", &[])?;
        // min((ig * bg + 1) / bl, hi): tiles whose last key is at most the
        // tile's first query row
        let b = self.val(0, "arith.muli", &[ig, cbg], "i32", &[])?;
        let b = self.val(0, "arith.addi", &[b, one], "i32", &[])?;
        let b = self.val(0, "arith.divsi", &[b, cbl], "i32", &[])?;
        let lo = self.val(0, "arith.minsi", &[b, hi], "i32", &[])?;
        Ok(Some((hi, lo, mask)))
    }
}
