//! Products summed as `tt.dot`: blocks broadcast to a common shape, the
//! sum over `k` of a `[m, k, 1]` by `[1, k, n]` product (a reducer
//! function's `p * v`, see [`Em::inline`]) as a matrix product, in f16
//! where both operands hold f16 values.

use super::*;

impl<'c, 'm> Em<'c, 'm, '_, '_> {
    /// Blocks of one rank broadcast to their common shape (per dim, the
    /// whole block where one of them has it).
    pub(super) fn broadcast_all(&self, xs: Vec<Blk<'c, 'm>>, depth: usize) -> R<Vec<Blk<'c, 'm>>> {
        let Some(first) = xs.first() else {
            return Ok(xs);
        };
        let mut dims = first.dims.clone();
        for x in &xs {
            if x.dims.len() != dims.len() {
                return Err("a reducer function over blocks of different ranks".into());
            }
            for (t, b) in dims.iter_mut().zip(&x.dims) {
                if b.size > t.size {
                    *t = *b;
                }
            }
        }
        let to: Vec<u64> = dims.iter().map(|b| b.size).collect();
        let mut out = Vec::new();
        for x in xs {
            if x.shape() == to {
                out.push(x);
                continue;
            }
            if x.dims
                .iter()
                .zip(&to)
                .any(|(b, t)| b.size != 1 && b.size != *t)
            {
                return Err("a reducer function over blocks that do not broadcast".into());
            }
            let v = self.bcast(depth, x.v, &x.shape(), &to, dtype_name(x.dt))?;
            out.push(Blk {
                v,
                dims: dims.clone(),
                dt: x.dt,
                depth: depth.max(x.depth),
            });
        }
        Ok(out)
    }

    /// The sum along `d` of `x` as a `tt.dot`, where `x` is a recorded
    /// product of an `a` unit along one dim `n` and a `b` unit along one dim
    /// `m`, both whole along `d`, every other dim a single element, and
    /// the matrices at least 16 each way: `sum_k a[m, k] b[k, n]`.
    pub(super) fn dot_sum(&mut self, x: &Blk<'c, 'm>, d: usize) -> R<Option<Blk<'c, 'm>>> {
        let Some((_, (a, ua), (b, ub))) = self.prods.iter().find(|(v, _, _)| *v == x.v).cloned()
        else {
            return Ok(None);
        };
        // 16-bit operands (as FlashAttention's P.V) where both hold values
        // f16 keeps: in [0, 1], or widened from f16; else f32 (tf32).
        let narrow = (ua || widened_f16(a.v)) && (ub || widened_f16(b.v));
        let (a, b) = (self.unbroadcast(&a)?, self.unbroadcast(&b)?);
        let r = x.dims.len();
        let (sa, sb) = (a.shape(), b.shape());
        let full = |s: &[u64], j: usize| s[j] == x.dims[j].size && s[j] > 1;
        let mdim = (0..r).find(|&j| j != d && full(&sa, j) && sb[j] == 1);
        let ndim = (0..r).find(|&j| j != d && full(&sb, j) && sa[j] == 1);
        let (Some(mi), Some(ni)) = (mdim, ndim) else {
            return Ok(None);
        };
        let single = |s: &[u64]| (0..r).all(|j| j == d || j == mi || j == ni || s[j] == 1);
        let (bm, bk, bn) = (x.dims[mi].size, x.dims[d].size, x.dims[ni].size);
        if !single(&sa)
            || !single(&sb)
            || !full(&sa, d)
            || !full(&sb, d)
            || bm < 16
            || bk < 16
            || bn < 16
        {
            return Ok(None);
        }
        let depth = x.depth.max(a.depth).max(b.depth);
        // The K padding of both zeroed; each side as a matrix in dim order,
        // transposed where its dims come the other way.
        let mut a = self.cast(&a, DType::F32)?;
        let mut b = self.cast(&b, DType::F32)?;
        a.depth = depth;
        b.depth = depth;
        let a = self.pad(&a, d, 0.0)?;
        let b = self.pad(&b, d, 0.0)?;
        let dt = if narrow { DType::F16 } else { DType::F32 };
        let am = self.operand_matrix(&a, mi, d, dt)?;
        let bm_ = self.operand_matrix(&b, d, ni, dt)?;
        let zero = self.splat_const(depth, 0.0, &[bm, bn], DType::F32)?;
        let y = self.val(
            depth,
            "tt.dot",
            &[am, bm_, zero],
            &ty_text(&[bm, bn], "f32"),
            &[
                ("inputPrecision", "0 : i32".into()),
                ("maxNumImpreciseAcc", "0 : i32".into()),
            ],
        )?;
        // Back to the state's shape (x without dim d).
        let mut dims = x.dims.clone();
        dims.remove(d);
        let shape: Vec<u64> = dims.iter().map(|b| b.size).collect();
        let (mi2, ni2) = (mi - usize::from(mi > d), ni - usize::from(ni > d));
        let y = if mi2 > ni2 {
            self.val(
                depth,
                "tt.trans",
                &[y],
                &ty_text(&[bn, bm], "f32"),
                &[("order", "array<i32: 1, 0>".into())],
            )?
        } else {
            y
        };
        let y = self.val(depth, "tt.reshape", &[y], &ty_text(&shape, "f32"), &[])?;
        Ok(Some(Blk {
            v: y,
            dims,
            dt: DType::F32,
            depth,
        }))
    }

    /// The matrix `[rows, cols]` of block `x` (whose dims but `rows` and
    /// `cols` are single elements) in type `dt`: loaded again as a matrix
    /// where it is a load (see `reload.rs`), else reshaped and then cast,
    /// as the Python build's `tl.reshape(p, [m, k]).to(tl.float16)`.
    fn operand_matrix(
        &mut self,
        x: &Blk<'c, 'm>,
        rows: usize,
        cols: usize,
        dt: DType,
    ) -> R<Value<'c, 'm>> {
        let m = match self.reload_matrix(x, rows, cols)? {
            Some(m) => m,
            None => Blk {
                v: self.as_matrix(x, rows, cols, x.depth)?,
                dims: vec![x.dims[rows], x.dims[cols]],
                dt: x.dt,
                depth: x.depth,
            },
        };
        Ok(self.cast(&m, dt)?.v)
    }

    /// The matrix `[rows, cols]` of block `x`, whose dims but `rows` and
    /// `cols` are single elements.
    pub(super) fn as_matrix(
        &self,
        x: &Blk<'c, 'm>,
        rows: usize,
        cols: usize,
        depth: usize,
    ) -> R<Value<'c, 'm>> {
        let (lo, hi) = (rows.min(cols), rows.max(cols));
        let (sl, sh) = (x.dims[lo].size, x.dims[hi].size);
        let elt = dtype_name(x.dt);
        let m = self.val(depth, "tt.reshape", &[x.v], &ty_text(&[sl, sh], elt), &[])?;
        if rows < cols {
            return Ok(m);
        }
        self.val(
            depth,
            "tt.trans",
            &[m],
            &ty_text(&[sh, sl], elt),
            &[("order", "array<i32: 1, 0>".into())],
        )
    }
}

impl<'c, 'm> Em<'c, 'm, '_, '_> {
    /// `acc + t` (f32 blocks of shape `shape`) as one tt.dot accumulating
    /// into `acc`, where `t` is a tt.dot of a zero accumulator (or a
    /// reshape of one): the Python build's `tl.dot(a, b, acc)`. A dot into
    /// zero and an add cost attention's loop a second 64x128 f32 block
    /// (Triton 3.6, sm_90: 243-255 registers and spills where the Python
    /// build's kernel takes 165). The zero-accumulator dot is left unused.
    pub(super) fn dot_into(
        &self,
        depth: usize,
        acc: Value<'c, 'm>,
        t: Value<'c, 'm>,
        shape: &[u64],
    ) -> R<Option<Value<'c, 'm>>> {
        use melior::ir::ValueLike;
        let Some(dot) = zero_dot(t) else {
            return Ok(None);
        };
        let (Ok(a), Ok(b), Ok(r)) = (dot.operand(0), dot.operand(1), dot.result(0)) else {
            return Ok(None);
        };
        let dty = r.r#type().to_string();
        let ty = ty_text(shape, "f32");
        let attrs = [
            ("inputPrecision", "0 : i32".to_string()),
            ("maxNumImpreciseAcc", "0 : i32".to_string()),
        ];
        if dty == ty {
            return Ok(Some(self.val(
                depth,
                "tt.dot",
                &[a, b, acc],
                &ty,
                &attrs,
            )?));
        }
        let c = self.val(depth, "tt.reshape", &[acc], &dty, &[])?;
        let d = self.val(depth, "tt.dot", &[a, b, c], &dty, &attrs)?;
        Ok(Some(self.val(depth, "tt.reshape", &[d], &ty, &[])?))
    }
}

/// The tt.dot of a zero accumulator that block value `v` is (or a
/// tt.reshape of).
fn zero_dot<'c, 'm>(v: Value<'c, 'm>) -> Option<melior::ir::OperationRef<'c, 'm>> {
    let name = |op: &melior::ir::OperationRef<'c, 'm>| {
        op.name().as_string_ref().as_str().ok().map(str::to_string)
    };
    let def = |v: Value<'c, 'm>| {
        melior::ir::operation::OperationResult::try_from(v)
            .ok()
            .map(|r| r.owner())
    };
    let mut op = def(v)?;
    // A product rounded to a narrower type and widened back (a matmul's
    // f16 tile summed in f32): the Python build's K loop accumulates the
    // dot in f32 without rounding each tile.
    if name(&op)?.as_str() == "arith.extf" {
        let r = def(op.operand(0).ok()?)?;
        if name(&r)?.as_str() != "arith.truncf" {
            return None;
        }
        op = def(r.operand(0).ok()?)?;
    }
    if name(&op)?.as_str() == "tt.reshape" {
        op = def(op.operand(0).ok()?)?;
    }
    if name(&op)?.as_str() != "tt.dot" {
        return None;
    }
    let c = def(op.operand(2).ok()?)?;
    let value = c.attribute("value").ok()?.to_string();
    (name(&c)?.as_str() == "arith.constant" && value.starts_with("dense<0.000000e+00>"))
        .then_some(op)
}

/// Whether block value `v` is an `arith.extf` of an f16 block (under
/// broadcasts, unit dims and reshapes): its values are f16 values.
fn widened_f16(v: Value<'_, '_>) -> bool {
    use melior::ir::ValueLike;
    let mut v = v;
    loop {
        let Ok(r) = melior::ir::operation::OperationResult::try_from(v) else {
            return false;
        };
        let op = r.owner();
        let Ok(name) = op.name().as_string_ref().as_str().map(str::to_string) else {
            return false;
        };
        let Ok(x) = op.operand(0) else {
            return false;
        };
        match name.as_str() {
            "tt.broadcast" | "tt.expand_dims" | "tt.reshape" => v = x,
            "arith.extf" => {
                let t = x.r#type().to_string();
                return t == "f16" || t.ends_with("xf16>");
            }
            _ => return false,
        }
    }
}
