//! Matmul operands loaded as matrices. A `tt.dot` operand that is an
//! unmasked load under unit dims, transposes and exact widenings (`[1, 1,
//! keys, d]` transposed for `Q K^T`, `[1, 1, 1, keys, d]` widened to f32
//! and rounded back for `P V`) is loaded again as the 2-D matrix the dot
//! takes, its transpose in the pointer offsets: the Python build's
//! `tl.load(k + offs_k[None, :] * d + ar_d[:, None])`. Reshaped and
//! transposed in registers instead, Triton 3.6 (sm_90) moved each K and V
//! tile through shared memory twice per iteration (attention prefill: 255
//! registers and 6,548 PTX lines against the Python build's 168 and 2,484).

use super::*;
use melior::ir::ValueLike;

/// The shape of a value's ranked tensor type (`tensor<1x64x128xf16>`).
fn shape_of(v: Value<'_, '_>) -> Option<Vec<u64>> {
    let t = v.r#type().to_string();
    let body = t.strip_prefix("tensor<")?.strip_suffix('>')?;
    let mut parts: Vec<&str> = body.split('x').collect();
    parts.pop()?;
    parts.iter().map(|p| p.parse().ok()).collect()
}

/// The element type's name of a value's tensor type (`f16`).
fn elem_of(v: Value<'_, '_>) -> Option<String> {
    let t = v.r#type().to_string();
    let body = t.strip_prefix("tensor<")?.strip_suffix('>')?;
    Some(body.rsplit('x').next()?.to_string())
}

/// The integers of an attribute's text (`array<i32: 0, 1, 3, 2>`, `2 : i32`).
fn ints(text: &str) -> Vec<usize> {
    let body = text
        .split_once(':')
        .map_or(text, |(a, b)| if a.starts_with("array") { b } else { a });
    body.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .filter_map(|s| s.parse().ok())
        .collect()
}

/// Bits of a float element type's name (`None`: not a float).
fn float_bits(t: &str) -> Option<u32> {
    match t {
        "f16" | "bf16" => Some(16),
        "f32" => Some(32),
        "f64" => Some(64),
        _ => None,
    }
}

/// For block value `v`, the load it reads under shape-only ops and exact
/// widenings, and for each dim of `v` the load's dim it is (`None`: a unit
/// dim the load does not have). Each rounding must go back to the load's
/// own type or wider, as must `v`'s type: `v`'s elements are then the
/// loaded ones.
fn trace(v: Value<'_, '_>) -> Option<(usize, Vec<Option<usize>>)> {
    let want = elem_of(v)?;
    let mut map: Vec<Option<usize>> = (0..shape_of(v)?.len()).map(Some).collect();
    let mut cur = v;
    let mut narrowest: Vec<String> = Vec::new();
    loop {
        let r = melior::ir::operation::OperationResult::try_from(cur).ok()?;
        let op = r.owner();
        let name = op.name().as_string_ref().as_str().ok()?.to_string();
        if name == "tt.load" {
            let t = elem_of(cur)?;
            let bits = float_bits(&t);
            let holds = |n: &String| *n == t || float_bits(n).zip(bits).is_some_and(|(a, b)| a > b);
            let exact = holds(&want) && narrowest.iter().all(holds);
            return exact.then(|| (super::emit::raw(cur), map));
        }
        let x = op.operand(0).ok()?;
        match name.as_str() {
            "arith.extf" => {}
            "arith.truncf" => narrowest.push(elem_of(cur)?),
            "tt.trans" => {
                let order = ints(&op.attribute("order").ok()?.to_string());
                for m in map.iter_mut().flatten() {
                    *m = *order.get(*m)?;
                }
            }
            "tt.expand_dims" => {
                let a = *ints(&op.attribute("axis").ok()?.to_string()).first()?;
                for m in map.iter_mut() {
                    *m = match *m {
                        Some(i) if i == a => None,
                        Some(i) if i > a => Some(i - 1),
                        other => other,
                    };
                }
            }
            "tt.reshape" => {
                // Only unit dims added or dropped: the non-unit dims of
                // both sides in order.
                let (rs, xs) = (shape_of(cur)?, shape_of(x)?);
                let nr: Vec<usize> = (0..rs.len()).filter(|j| rs[*j] != 1).collect();
                let nx: Vec<usize> = (0..xs.len()).filter(|j| xs[*j] != 1).collect();
                if nr.len() != nx.len() || nr.iter().zip(&nx).any(|(a, b)| rs[*a] != xs[*b]) {
                    return None;
                }
                for m in map.iter_mut() {
                    *m = m.and_then(|i| nr.iter().position(|j| *j == i).map(|p| nx[p]));
                }
            }
            _ => return None,
        }
        cur = x;
    }
}

impl<'c, 'm> Em<'c, 'm, '_, '_> {
    /// Block `x` without the broadcast it is (under a widening): unit
    /// where the broadcast's operand is. A one-query attention's V, cast
    /// to f32 at the padded query row's block, is broadcast over that row;
    /// unit there, its product with the probabilities is a `tt.dot` (see
    /// [`Em::dot_sum`]), not a 16x64x128 multiply and sum (Triton 3.6,
    /// sm_90: 255 registers and 13,972 B of spills where the Python
    /// build's kernel takes 80 and none).
    pub(super) fn unbroadcast(&mut self, x: &Blk<'c, 'm>) -> R<Blk<'c, 'm>> {
        let def = |v: Value<'c, 'm>| {
            let op = melior::ir::operation::OperationResult::try_from(v)
                .ok()?
                .owner();
            let name = op.name().as_string_ref().as_str().ok()?.to_string();
            Some((name, op.operand(0).ok()?))
        };
        let Some((name, y)) = def(x.v) else {
            return Ok(x.clone());
        };
        let (wide, b) = match name.as_str() {
            "tt.broadcast" => (false, y),
            "arith.extf" => match def(y) {
                Some((n, b)) if n == "tt.broadcast" => (true, b),
                _ => return Ok(x.clone()),
            },
            _ => return Ok(x.clone()),
        };
        let Some(bs) = shape_of(b) else {
            return Ok(x.clone());
        };
        if bs.len() != x.dims.len() {
            return Ok(x.clone());
        }
        let mut dims = x.dims.clone();
        for (d, n) in dims.iter_mut().zip(&bs) {
            if *n == 1 && d.size != 1 {
                *d = self.unit_bd()?;
            }
        }
        let v = if wide {
            let t = ty_text(&bs, dtype_name(x.dt));
            self.val(x.depth, "arith.extf", &[b], &t, &[])?
        } else {
            b
        };
        Ok(Blk { v, dims, ..*x })
    }

    /// Block `x` (all dims but `rows` and `cols` single elements) as the
    /// matrix `[rows, cols]` loaded again from memory, where `x` is an
    /// unmasked load under unit dims, transposes and exact widenings (in
    /// the load's type; the caller casts it); the load at most once per
    /// load and orientation, where the first load is.
    pub(super) fn reload_matrix(
        &mut self,
        x: &Blk<'c, 'm>,
        rows: usize,
        cols: usize,
    ) -> R<Option<Blk<'c, 'm>>> {
        let Some((key, map)) = trace(x.v) else {
            return Ok(None);
        };
        let (Some(lr), Some(lc)) = (map[rows], map[cols]) else {
            return Ok(None);
        };
        let Some((buf, exts, dt, ld, depth)) = self.unmasked.get(&key).cloned() else {
            return Ok(None);
        };
        if lr == lc
            || (0..ld.len()).any(|j| j != lr && j != lc && ld[j].size != 1)
            || ld[lr].size != x.dims[rows].size
            || ld[lc].size != x.dims[cols].size
        {
            return Ok(None);
        }
        let blk = |v| Blk {
            v,
            dims: vec![x.dims[rows], x.dims[cols]],
            dt,
            depth: x.depth,
        };
        if let Some(&v) = self.reloaded.get(&(key, lr, lc)) {
            return Ok(Some(blk(v)));
        }
        let ptr = self.ptrs_kept(buf, &ld, &exts, dt, depth, None, Some(&[lr, lc]))?;
        let v = self.val(
            depth,
            "tt.load",
            &[ptr],
            &ty_text(&[ld[lr].size, ld[lc].size], dtype_name(dt)),
            &[("operandSegmentSizes", "array<i32: 1, 0, 0>".into())],
        )?;
        self.reloaded.insert((key, lr, lc), v);
        Ok(Some(blk(v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_integers() {
        assert_eq!(ints("array<i32: 0, 1, 3, 2>"), vec![0, 1, 3, 2]);
        assert_eq!(ints("2 : i32"), vec![2]);
        assert_eq!(float_bits("bf16"), Some(16));
        assert_eq!(float_bits("i32"), None);
    }
}
