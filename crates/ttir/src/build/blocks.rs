//! Building ops in the open scopes, and blocks: offsets of bound axes
//! (`tt.make_range`), dims, broadcasts, masks and pointers.

use super::*;

impl<'c, 'm> Em<'c, 'm, '_, '_> {
    pub(super) fn ty(&self, s: &str) -> R<Type<'c>> {
        Type::parse(self.ctx, s).ok_or_else(|| format!("bad type `{s}`"))
    }

    /// Build op `name` and place it at `depth` (before the op holding the
    /// next scope, where that scope is open).
    pub(super) fn op(
        &self,
        depth: usize,
        name: &str,
        operands: &[Value<'c, 'm>],
        results: &[&str],
        attrs: &[(&str, String)],
    ) -> R<OperationRef<'c, 'm>> {
        let mut rt = Vec::new();
        for r in results {
            rt.push(self.ty(r)?);
        }
        let mut at = Vec::new();
        for (k, v) in attrs {
            let x = Attribute::parse(self.ctx, v)
                .ok_or_else(|| format!("bad attribute `{v}` of {name}"))?;
            at.push((Identifier::new(self.ctx, k), x));
        }
        let op = OperationBuilder::new(name, self.loc)
            .add_operands(operands)
            .add_results(&rt)
            .add_attributes(&at)
            .build()
            .map_err(|e| format!("{name}: {e}"))?;
        Ok(self.place(depth, op))
    }

    pub(super) fn place(
        &self,
        depth: usize,
        op: melior::ir::Operation<'c>,
    ) -> OperationRef<'c, 'm> {
        let s = &self.scopes[depth];
        match self.scopes.get(depth + 1).and_then(|n| n.anchor) {
            Some(anchor) => s.block.insert_operation_before(anchor, op),
            None => s.block.append_operation(op),
        }
    }

    pub(super) fn val(
        &self,
        depth: usize,
        name: &str,
        operands: &[Value<'c, 'm>],
        result: &str,
        attrs: &[(&str, String)],
    ) -> R<Value<'c, 'm>> {
        let o = self.op(depth, name, operands, &[result], attrs)?;
        Ok(o.result(0).map_err(|e| e.to_string())?.into())
    }

    pub(super) fn const_i32(&self, depth: usize, x: i64) -> R<Value<'c, 'm>> {
        self.val(
            depth,
            "arith.constant",
            &[],
            "i32",
            &[("value", format!("{x} : i32"))],
        )
    }

    /// A constant block of `shape` (a scalar where the shape is empty).
    pub(super) fn splat_const(
        &self,
        depth: usize,
        x: f64,
        shape: &[u64],
        dt: DType,
    ) -> R<Value<'c, 'm>> {
        let ty = ty_text(shape, dtype_name(dt));
        let v = if shape.is_empty() {
            format!("{} : {ty}", lit(x, dt))
        } else {
            format!("dense<{}> : {ty}", lit(x, dt))
        };
        self.val(depth, "arith.constant", &[], &ty, &[("value", v)])
    }

    pub(super) fn range(&mut self, n: u64) -> R<Value<'c, 'm>> {
        if let Some(v) = self.ranges.get(&n) {
            return Ok(*v);
        }
        let v = self.val(
            0,
            "tt.make_range",
            &[],
            &ty_text(&[n], "i32"),
            &[("start", "0 : i32".into()), ("end", format!("{n} : i32"))],
        )?;
        self.ranges.insert(n, v);
        Ok(v)
    }

    /// Bind axis `a` to the tile whose index is `idx` (an i32) at `depth`.
    pub(super) fn bind(&mut self, a: &str, idx: Value<'c, 'm>, depth: usize) -> R<()> {
        let b = self.block_of(a)?;
        let r = self.range(b)?;
        let cb = self.const_i32(depth, b as i64)?;
        let start = self.val(depth, "arith.muli", &[idx, cb], "i32", &[])?;
        let t = ty_text(&[b], "i32");
        let s = self.val(depth, "tt.splat", &[start], &t, &[])?;
        let offs = self.val(depth, "arith.addi", &[s, r], &t, &[])?;
        self.bound.insert(a.to_string(), (depth, offs));
        self.idx.insert(a.to_string(), idx);
        Ok(())
    }

    /// A dim of one element standing for a whole one (a block broadcast
    /// along it later).
    pub(super) fn unit_bd(&mut self) -> R<Bd<'c, 'm>> {
        Ok(Bd {
            size: 1,
            offs: self.range(1)?,
            ext: 1,
            tile: 1,
        })
    }

    pub(super) fn block_of(&self, a: &str) -> R<u64> {
        let a = self.alias.get(a).map(String::as_str).unwrap_or(a);
        if let Some(b) = self.own.get(a) {
            return Ok(*b);
        }
        Ok(self
            .p
            .axes
            .get(a)
            .ok_or_else(|| format!("unknown axis @{a}"))?
            .default)
    }

    /// The number of tiles of axis `a` in this kernel (at its own block,
    /// where it has one).
    pub(super) fn tiles_here(&self, a: &str) -> R<u64> {
        let Some(b) = self.own.get(a) else {
            return tiles(self.p, a);
        };
        let info = self
            .p
            .axes
            .get(a)
            .ok_or_else(|| format!("unknown axis @{a}"))?;
        let ext = match &info.extent {
            efir_triton::Extent::N(e) => *e,
            efir_triton::Extent::Tiles(x) => tiles(self.p, x)?,
            efir_triton::Extent::Sym(s) => return Err(symbolic(s)),
        };
        Ok(ext.div_ceil((*b).max(1)))
    }

    pub(super) fn dim(&mut self, ext: u64, axis: Option<&str>) -> R<(Bd<'c, 'm>, usize)> {
        match axis {
            Some(a) => {
                let (d, offs) = *self.bound.get(a).ok_or_else(|| {
                    format!("a value tiled by @{a} is needed where @{a} is neither a grid axis nor a loop")
                })?;
                let size = self.block_of(a)?;
                let a = self.alias.get(a).map(String::as_str).unwrap_or(a);
                Ok((
                    Bd {
                        size,
                        offs,
                        ext,
                        tile: self.streamed.get(a).copied().unwrap_or(size),
                    },
                    d,
                ))
            }
            None => {
                let size = if ext > 1 && self.pad16.contains(&ext) {
                    16
                } else {
                    ext.next_power_of_two().max(1)
                };
                let offs = self.range(size)?;
                Ok((
                    Bd {
                        size,
                        offs,
                        ext,
                        tile: size,
                    },
                    0,
                ))
            }
        }
    }

    pub(super) fn dims(&mut self, exts: &[u64], lay: &Layout) -> R<(Vec<Bd<'c, 'm>>, usize)> {
        let mut out = Vec::new();
        let mut depth = 0;
        for (i, e) in exts.iter().enumerate() {
            let (d, dp) = self.dim(*e, lay.get(i).cloned().flatten().as_deref())?;
            depth = depth.max(dp);
            out.push(d);
        }
        Ok((out, depth))
    }

    /// `offs` (a block of one dim) as dim `i` of a rank-`r` block, unit
    /// along the others.
    pub(super) fn along(
        &self,
        depth: usize,
        offs: Value<'c, 'm>,
        n: u64,
        i: usize,
        r: usize,
        elt: &str,
    ) -> R<Value<'c, 'm>> {
        let mut shape = vec![n];
        let mut v = offs;
        // Unit dims before `i`, then after it.
        for _ in 0..i {
            shape.insert(0, 1);
            v = self.val(
                depth,
                "tt.expand_dims",
                &[v],
                &ty_text(&shape, elt),
                &[("axis", "0 : i32".into())],
            )?;
        }
        while shape.len() < r {
            shape.push(1);
            let ax = shape.len() - 1;
            v = self.val(
                depth,
                "tt.expand_dims",
                &[v],
                &ty_text(&shape, elt),
                &[("axis", format!("{ax} : i32"))],
            )?;
        }
        Ok(v)
    }

    /// `v` of `from` broadcast to `to` (same rank).
    pub(super) fn bcast(
        &self,
        depth: usize,
        v: Value<'c, 'm>,
        from: &[u64],
        to: &[u64],
        elt: &str,
    ) -> R<Value<'c, 'm>> {
        if from == to {
            return Ok(v);
        }
        if from.is_empty() {
            return self.val(depth, "tt.splat", &[v], &ty_text(to, elt), &[]);
        }
        self.val(depth, "tt.broadcast", &[v], &ty_text(to, elt), &[])
    }

    /// The mask of the dims whose blocks pass their extent (`None`: none do).
    pub(super) fn mask(&self, dims: &[Bd<'c, 'm>], depth: usize) -> R<Option<Value<'c, 'm>>> {
        let r = dims.len();
        let shape: Vec<u64> = dims.iter().map(|d| d.size).collect();
        let mut m = None;
        for (i, d) in dims.iter().enumerate() {
            if d.even() {
                continue;
            }
            let x = self.along(depth, d.offs, d.size, i, r, "i32")?;
            let mut unit = vec![1; r];
            unit[i] = d.size;
            let e = self.splat_const(depth, d.ext as f64, &unit, DType::I32)?;
            let c = self.val(
                depth,
                "arith.cmpi",
                &[x, e],
                &ty_text(&unit, "i1"),
                &[("predicate", "2 : i64".into())],
            )?;
            let c = self.bcast(depth, c, &unit, &shape, "i1")?;
            m = Some(match m {
                None => c,
                Some(p) => self.val(depth, "arith.andi", &[p, c], &ty_text(&shape, "i1"), &[])?,
            });
        }
        Ok(m)
    }

    /// Pointers into leaf `buf.1` of buffer `buf.0` (row-major over
    /// `exts`) at the block `dims`; with `lead` (a collect buffer's tile
    /// index), into slice `lead` of the buffer, whose leading dim `exts`
    /// leaves out (`lead.1` slices).
    pub(super) fn ptrs(
        &self,
        buf: (ValueId, usize),
        dims: &[Bd<'c, 'm>],
        exts: &[u64],
        dt: DType,
        depth: usize,
        lead: Option<(Value<'c, 'm>, u64)>,
    ) -> R<Value<'c, 'm>> {
        self.ptrs_kept(buf, dims, exts, dt, depth, lead, None)
    }

    /// [`Em::ptrs`]; with `keep`, the pointer block has only those dims of
    /// `dims` (the others single elements, their offsets broadcast), as
    /// the Python build's 2-D loads of 4-D blocks (`offs[:, None]`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn ptrs_kept(
        &self,
        buf: (ValueId, usize),
        dims: &[Bd<'c, 'm>],
        exts: &[u64],
        dt: DType,
        depth: usize,
        lead: Option<(Value<'c, 'm>, u64)>,
        keep: Option<&[usize]>,
    ) -> R<Value<'c, 'm>> {
        let mut base = *self
            .args
            .get(&buf)
            .ok_or("a buffer that is not an argument")?;
        let mut elems: u128 = exts.iter().map(|e| *e as u128).product();
        if let Some((_, slices)) = lead {
            elems *= slices as u128;
        }
        // Offsets into a buffer of 2^31 elements or more are 64-bit (each
        // dim's offsets widened before they are scaled by its stride), as
        // the Python build's.
        let (it, idt) = index_type(elems);
        let pt = format!("!tt.ptr<{}>", dtype_name(dt));
        if let Some((i, _)) = lead {
            let n: u64 = exts.iter().product();
            let i = self.widen(depth, i, &[], idt)?;
            let c = self.splat_const(depth, n as f64, &[], idt)?;
            let off = self.val(depth, "arith.muli", &[i, c], it, &[])?;
            base = self.val(depth, "tt.addptr", &[base, off], &pt, &[])?;
        }
        let all: Vec<usize> = (0..dims.len()).collect();
        let keep = keep.unwrap_or(&all);
        let r = keep.len();
        let shape: Vec<u64> = keep.iter().map(|k| dims[*k].size).collect();
        if r == 0 {
            return Ok(base);
        }
        let mut acc: Option<Value<'c, 'm>> = None;
        for (i, d) in dims.iter().enumerate() {
            let stride: u64 = exts[i + 1..].iter().product();
            // its position in the pointer block (a dropped dim is one
            // element: any position)
            let at = keep.iter().position(|k| *k == i).unwrap_or(0);
            let mut unit = vec![1; r];
            unit[at] = d.size;
            let x = self.along(depth, d.offs, d.size, at, r, "i32")?;
            let mut x = self.widen(depth, x, &unit, idt)?;
            if stride != 1 {
                let s = self.splat_const(depth, stride as f64, &unit, idt)?;
                x = self.val(depth, "arith.muli", &[x, s], &ty_text(&unit, it), &[])?;
            }
            let x = self.bcast(depth, x, &unit, &shape, it)?;
            acc = Some(match acc {
                None => x,
                Some(a) => self.val(depth, "arith.addi", &[a, x], &ty_text(&shape, it), &[])?,
            });
        }
        let acc = acc.ok_or("no dims")?;
        let tp = ty_text(&shape, &pt);
        let b = self.val(depth, "tt.splat", &[base], &tp, &[])?;
        self.val(depth, "tt.addptr", &[b, acc], &tp, &[])
    }

    /// `x` (i32, of `shape`) as `to` (i32: itself; i64: sign-extended).
    pub(super) fn widen(
        &self,
        depth: usize,
        x: Value<'c, 'm>,
        shape: &[u64],
        to: DType,
    ) -> R<Value<'c, 'm>> {
        if to == DType::I32 {
            return Ok(x);
        }
        self.val(
            depth,
            "arith.extsi",
            &[x],
            &ty_text(shape, dtype_name(to)),
            &[],
        )
    }
}

/// The type of offsets into a buffer of `elems` elements: i32, or i64 from
/// 2^31 elements on.
pub(super) fn index_type(elems: u128) -> (&'static str, DType) {
    if elems >= 1 << 31 {
        ("i64", DType::I64)
    } else {
        ("i32", DType::I32)
    }
}
