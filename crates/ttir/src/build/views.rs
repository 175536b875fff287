//! Ops that read their operand's memory at other indices: reshapes that
//! split or merge dims, `tensor.slice` and `tensor.concat`. [`plan`] stores
//! their computed operands, except the arithmetic and concatenations that a
//! slice or concatenation computes where it loads (`ixs::Read`), so each
//! is a load from the buffer under the parallel views (and, for slices,
//! slices: their bounds compose): element
//! `i` of a slice along a dim is element `start + i * step` of its operand;
//! element `i` of a concatenation is element `i - o` of the operand that
//! starts at offset `o`, chosen by `arith.select`; a reshape keeps the
//! row-major order, so it loads the buffer at the result's extents.

use super::*;

/// Per dim: index `i` of a value is index `start + i * step` of its buffer.
type Access = Vec<(u64, u64)>;

impl<'c, 'm> Em<'c, 'm, '_, '_> {
    /// The buffer that `v` (read by `op`) is read from, under parallel
    /// views and (with `access`) slices of it, whose bounds compose.
    fn source_buffer(
        &self,
        op: &str,
        mut v: ValueId,
        mut access: Option<&mut Access>,
    ) -> R<ValueId> {
        let f = self.p.func;
        loop {
            if self.p.buffer[v.index()] {
                return Ok(v);
            }
            let i = self.p.def[v.index()].ok_or("a parameter that is not a buffer")?;
            let d = &f.ops[i];
            match (d.name.as_str(), access.as_deref_mut()) {
                ("par.partition" | "par.replicate" | "par.combine", _) => v = d.operands[0],
                ("tensor.reshape", None) => v = d.operands[0],
                ("tensor.slice", Some(acc)) => {
                    let bounds = efir_dialect_tensor::slices::slice_bounds(d)
                        .filter(|b| b.len() == acc.len())
                        .ok_or("a slice with malformed bounds")?;
                    for ((s, t), b) in acc.iter_mut().zip(&bounds) {
                        *s = b.start + *s * b.step;
                        *t *= b.step;
                    }
                    v = d.operands[0];
                }
                (other, _) => {
                    return Err(format!(
                        "`{op}` reads `%{}` (made by `{other}`) from memory (not covered by the TTIR path)",
                        f.value(v).name
                    ))
                }
            }
        }
    }

    /// `dims` with their offsets moved to `(offs - shift) * step + start`.
    fn shifted(
        &self,
        dims: &[Bd<'c, 'm>],
        access: &[(u64, u64)],
        shift: Option<(usize, u64)>,
        depth: usize,
    ) -> R<Vec<Bd<'c, 'm>>> {
        let mut out = Vec::new();
        for (k, (d, (start, step))) in dims.iter().zip(access).enumerate() {
            let t = ty_text(&[d.size], "i32");
            let mut offs = d.offs;
            if let Some((_, o)) = shift.filter(|(sd, o)| *sd == k && *o > 0) {
                let c = self.splat_const(depth, o as f64, &[d.size], DType::I32)?;
                offs = self.val(depth, "arith.subi", &[offs, c], &t, &[])?;
            }
            if *step != 1 {
                let c = self.splat_const(depth, *step as f64, &[d.size], DType::I32)?;
                offs = self.val(depth, "arith.muli", &[offs, c], &t, &[])?;
            }
            if *start != 0 {
                let c = self.splat_const(depth, *start as f64, &[d.size], DType::I32)?;
                offs = self.val(depth, "arith.addi", &[offs, c], &t, &[])?;
            }
            out.push(Bd { offs, ..*d });
        }
        Ok(out)
    }

    /// Load tensor buffer `b` at the offsets of `at` under `mask`, as a
    /// block of `dims`.
    fn load_at(
        &self,
        b: ValueId,
        dims: &[Bd<'c, 'm>],
        at: &[Bd<'c, 'm>],
        mask: Option<Value<'c, 'm>>,
        depth: usize,
    ) -> R<Blk<'c, 'm>> {
        let (exts, dt) = static_shape(self.p, self.p.func.ty(b))?;
        let dt = efir_triton::storage_dtype(self.p, b, dt);
        let shape: Vec<u64> = dims.iter().map(|d| d.size).collect();
        let ptr = self.ptrs((b, 0), at, &exts, dt, depth, None)?;
        let rt = ty_text(&shape, dtype_name(dt));
        let v = match mask {
            None => self.val(
                depth,
                "tt.load",
                &[ptr],
                &rt,
                &[("operandSegmentSizes", "array<i32: 1, 0, 0>".into())],
            )?,
            Some(m) => {
                let z = self.splat_const(depth, 0.0, &shape, dt)?;
                self.val(
                    depth,
                    "tt.load",
                    &[ptr, m, z],
                    &rt,
                    &[("operandSegmentSizes", "array<i32: 1, 1, 1>".into())],
                )?
            }
        };
        Ok(Blk {
            v,
            dims: dims.to_vec(),
            dt,
            depth,
        })
    }

    /// A reshape that splits or merges dims: its operand's buffer (under
    /// parallel views and reshapes) loaded at the result's extents.
    pub(super) fn reshaped_load(&mut self, v: ValueId, a: ValueId, lay: &Layout) -> R<Blk<'c, 'm>> {
        if self.through_transpose(a) {
            return self.reshape_ixs_load(v, a, lay);
        }
        let b = self.source_buffer("tensor.reshape", a, None)?;
        let (er, _) = static_shape(self.p, self.p.func.ty(v))?;
        let (_, dt) = static_shape(self.p, self.p.func.ty(b))?;
        self.load_leaf((b, 0), &er, dt, lay)
    }

    /// `tensor.slice`: one load at `start + offs * step` per dim.
    pub(super) fn slice(&mut self, v: ValueId, lay: &Layout) -> R<Blk<'c, 'm>> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let bounds =
            efir_dialect_tensor::slices::slice_bounds(op).ok_or("a slice with malformed bounds")?;
        let mut access: Access = bounds.iter().map(|b| (b.start, b.step)).collect();
        let (er, _) = static_shape(self.p, f.ty(v))?;
        let (dims, depth) = self.dims(&er, lay)?;
        if self.through_views(op.operands[0]) {
            if access.len() != dims.len() {
                return Err("a slice whose bounds do not match its rank".into());
            }
            let mut idx = Vec::with_capacity(dims.len());
            for (k, (start, step)) in access.iter().enumerate() {
                let x = self.ix_dim(depth, &dims, k)?;
                idx.push(self.ix_affine(depth, x, 0, *start, *step)?);
            }
            let read = self.source_ixs(&op.name, op.operands[0], idx, depth)?;
            let mask = self.mask(&dims, depth)?;
            return self.load_read(read, &dims, mask, depth);
        }
        let src = self.source_buffer(&op.name, op.operands[0], Some(&mut access))?;
        if access.len() != dims.len() {
            return Err("a slice whose bounds do not match its rank".into());
        }
        let at = self.shifted(&dims, &access, None, depth)?;
        let mask = self.mask(&dims, depth)?;
        self.load_at(src, &dims, &at, mask, depth)
    }

    /// `tensor.concat`: one masked load per operand, each at the result's
    /// offsets minus the operand's start along the joined dim.
    pub(super) fn concat(&mut self, v: ValueId, lay: &Layout) -> R<Blk<'c, 'm>> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let d = op.attrs.get("dim").and_then(Attr::as_int).unwrap_or(0) as usize;
        let (er, _) = static_shape(self.p, f.ty(v))?;
        let (dims, depth) = self.dims(&er, lay)?;
        let r = dims.len();
        if d >= r {
            return Err("a concatenation along a dim it does not have".into());
        }
        let shape: Vec<u64> = dims.iter().map(|b| b.size).collect();
        let bd = dims[d];
        let mut unit = vec![1; r];
        unit[d] = bd.size;
        let base = self.mask(&dims, depth)?;
        let mut acc: Option<Blk<'c, 'm>> = None;
        let mut o = 0u64;
        for a in &op.operands {
            let (ea, _) = static_shape(self.p, f.ty(*a))?;
            let n = *ea
                .get(d)
                .ok_or("a concatenated operand without the joined dim")?;
            // What the operand reads through views (buffers at indices,
            // and the arithmetic and concatenations on them), or its
            // buffer and offsets (direct).
            let (src, through, at) = if self.through_views(*a) {
                let mut idx = Vec::with_capacity(r);
                for k in 0..r {
                    let x = self.ix_dim(depth, &dims, k)?;
                    let shift = if k == d { o } else { 0 };
                    idx.push(self.ix_affine(depth, x, shift, 0, 1)?);
                }
                let read = self.source_ixs(&op.name, *a, idx, depth)?;
                (None, Some(read), Vec::new())
            } else {
                let mut access: Access = vec![(0, 1); r];
                let src = self.source_buffer(&op.name, *a, Some(&mut access))?;
                let at = self.shifted(&dims, &access, Some((d, o)), depth)?;
                (Some(src), None, at)
            };
            // o <= offs < o + n along the joined dim.
            let lo = self.splat_const(depth, o as f64, &[bd.size], DType::I32)?;
            let hi = self.splat_const(depth, (o + n) as f64, &[bd.size], DType::I32)?;
            let i1 = ty_text(&[bd.size], "i1");
            let ge = self.val(
                depth,
                "arith.cmpi",
                &[bd.offs, lo],
                &i1,
                &[("predicate", "5 : i64".into())],
            )?;
            let lt = self.val(
                depth,
                "arith.cmpi",
                &[bd.offs, hi],
                &i1,
                &[("predicate", "2 : i64".into())],
            )?;
            let inside = self.val(depth, "arith.andi", &[ge, lt], &i1, &[])?;
            let inside = self.along(depth, inside, bd.size, d, r, "i1")?;
            let inside = self.bcast(depth, inside, &unit, &shape, "i1")?;
            let mask = match base {
                None => inside,
                Some(m) => self.val(
                    depth,
                    "arith.andi",
                    &[m, inside],
                    &ty_text(&shape, "i1"),
                    &[],
                )?,
            };
            let x = match (through, src) {
                (Some(read), _) => self.load_read(read, &dims, Some(mask), depth)?,
                (None, Some(src)) => self.load_at(src, &dims, &at, Some(mask), depth)?,
                (None, None) => return Err("a concatenated operand read from nowhere".into()),
            };
            acc = Some(match acc {
                None => x,
                Some(prev) => {
                    let w = self.val(
                        depth,
                        "arith.select",
                        &[inside, x.v, prev.v],
                        &ty_text(&shape, dtype_name(x.dt)),
                        &[],
                    )?;
                    self.with(&x, w, x.dt)
                }
            });
            o += n;
        }
        acc.ok_or_else(|| "a concatenation without operands".into())
    }
}
