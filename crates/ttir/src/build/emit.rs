//! Values as blocks: loads of buffers, the op table of a kernel body
//! (views, tuples, constants, iota, reshapes, transposes), casts, and
//! operands broadcast to their op's block.

use super::*;

impl<'c, 'm> Em<'c, 'm, '_, '_> {
    pub(super) fn load(&mut self, v: ValueId, lay: &Layout) -> R<Val<'c, 'm>> {
        let leaves = leaf_shapes(self.p, self.p.func.ty(v))?;
        let mut out = Vec::new();
        for (leaf, (exts, dt)) in leaves.into_iter().enumerate() {
            out.push(Val::T(self.load_leaf((v, leaf), &exts, dt, lay)?));
        }
        if self.p.func.ty(v).as_tensor().is_some() {
            return out.pop().ok_or_else(|| "a value without a tensor".into());
        }
        Ok(Val::Tup(out))
    }

    pub(super) fn load_leaf(
        &mut self,
        buf: (ValueId, usize),
        exts: &[u64],
        dt: DType,
        lay: &Layout,
    ) -> R<Blk<'c, 'm>> {
        let dt = efir_triton::storage_dtype(self.p, buf.0, dt);
        let (dims, depth) = self.dims(exts, lay)?;
        let shape: Vec<u64> = dims.iter().map(|d| d.size).collect();
        let ptr = self.ptrs(buf, &dims, exts, dt, depth, None)?;
        let rt = ty_text(&shape, dtype_name(dt));
        let x = match self.mask(&dims, depth)? {
            None => {
                let x = self.val(
                    depth,
                    "tt.load",
                    &[ptr],
                    &rt,
                    &[("operandSegmentSizes", "array<i32: 1, 0, 0>".into())],
                )?;
                self.unmasked
                    .insert(raw(x), (buf, exts.to_vec(), dt, dims.clone(), depth));
                x
            }
            Some(m) => {
                let z = self.splat_const(depth, 0.0, &shape, dt)?;
                let x = self.val(
                    depth,
                    "tt.load",
                    &[ptr, m, z],
                    &rt,
                    &[("operandSegmentSizes", "array<i32: 1, 1, 1>".into())],
                )?;
                let bounds = dims.iter().map(|d| (raw(d.offs), d.ext, d.size)).collect();
                self.zero_padded.insert(raw(x), bounds);
                x
            }
        };
        Ok(Blk {
            v: x,
            dims,
            dt,
            depth,
        })
    }

    /// The block of tensor `v` in tiling `lay`.
    pub(super) fn emit(&mut self, v: ValueId, lay: &Layout) -> R<Blk<'c, 'm>> {
        self.emit_val(v, lay)?.tensor()
    }

    /// The blocks of `v` (a tensor or a tuple) in tiling `lay`.
    pub(super) fn emit_val(&mut self, v: ValueId, lay: &Layout) -> R<Val<'c, 'm>> {
        if self.diag_true == Some(v) {
            // Below the causal diagonal every query row sees every key of
            // the tile (see [`Em::causal_stop`]); not memoized.
            let (er, dt) = static_shape(self.p, self.p.func.ty(v))?;
            let (dims, depth) = self.dims(&er, lay)?;
            let shape: Vec<u64> = dims.iter().map(|d| d.size).collect();
            let t = self.splat_const(depth, 1.0, &shape, dt)?;
            return Ok(Val::T(Blk {
                v: t,
                dims,
                dt,
                depth,
            }));
        }
        if let Some(x) = self.memo.get(&(v, lay.clone())) {
            return Ok(x.clone());
        }
        let x = if self.p.buffer[v.index()] {
            self.load(v, lay)?
        } else {
            self.emit_op(v, lay)?
        };
        self.memo.insert((v, lay.clone()), x.clone());
        Ok(x)
    }

    /// Block `x` (of a value with extents `ea`) viewed with extents `er`
    /// (the same non-unit extents, at `nu_r`), as a block of `shape`.
    fn reshape_value(
        &self,
        x: &Blk<'c, 'm>,
        ea: &[u64],
        er: &[u64],
        nu_r: &[usize],
        shape: &[u64],
        depth: usize,
    ) -> R<Value<'c, 'm>> {
        let shape = shape.to_vec();
        Ok(
            if x.shape().iter().product::<u64>() == 1 && shape.is_empty() || shape == x.shape() {
                x.v
            } else if x.shape().is_empty() {
                self.val(
                    depth,
                    "tt.splat",
                    &[x.v],
                    &ty_text(&shape, dtype_name(x.dt)),
                    &[],
                )?
            } else if let Some(axes) = inserted_units(ea, er, nu_r, &x.shape(), &shape) {
                // Only unit dims inserted, up to rank 2: tt.expand_dims,
                // as the Python build's `x[:, None]`. A tt.reshape gives
                // its result a linear layout that Triton (3.6) may spread
                // over every thread: ngpt's row scale (tensor<1xf32>
                // reshaped to 1x1) made its 1x512 blocks spill (ptxas:
                // 11 KB of spill stores, 27x slower on the H200). Above
                // rank 2 a tt.reshape, as the Python build's: attention's
                // scores expanded to [1, 1, q, k, 1] failed an assertion
                // of Triton 3.6 (LinearLayout::reshapeOuts) once K and V
                // were loaded as matrices (see `reload.rs`).
                let mut cur = x.shape();
                let mut v = x.v;
                for a in axes {
                    cur.insert(a, 1);
                    v = self.val(
                        depth,
                        "tt.expand_dims",
                        &[v],
                        &ty_text(&cur, dtype_name(x.dt)),
                        &[("axis", format!("{a} : i32"))],
                    )?;
                }
                v
            } else {
                self.val(
                    depth,
                    "tt.reshape",
                    &[x.v],
                    &ty_text(&shape, dtype_name(x.dt)),
                    &[],
                )?
            },
        )
    }

    /// Cast block `x` to `to`.
    pub(super) fn cast(&self, x: &Blk<'c, 'm>, to: DType) -> R<Blk<'c, 'm>> {
        let from = x.dt;
        if from == to {
            return Ok(x.clone());
        }
        // A 16-bit matmul result widened again (attention's scores) is read
        // before its rounding, as the Python build's `unrounded`.
        if to == DType::F32 {
            if let Some(w) = self
                .unrounded
                .get(&raw(x.v))
                .filter(|w| w.dims.len() == x.dims.len())
            {
                return Ok(w.clone());
            }
        }
        let shape = x.shape();
        let rt = ty_text(&shape, dtype_name(to));
        let d = x.depth;
        let v = match (is_float(from), is_float(to)) {
            (true, true) if bits(to) > bits(from) => self.val(d, "arith.extf", &[x.v], &rt, &[])?,
            (true, true) if bits(to) < bits(from) => {
                self.val(d, "arith.truncf", &[x.v], &rt, &[])?
            }
            // f16 <-> bf16: through f32.
            (true, true) => {
                let f = self.cast(x, DType::F32)?;
                return self.cast(&f, to);
            }
            (false, true) if from == DType::I1 => self.val(d, "arith.uitofp", &[x.v], &rt, &[])?,
            (false, true) => self.val(d, "arith.sitofp", &[x.v], &rt, &[])?,
            (true, false) if to == DType::I1 => {
                let z = self.splat_const(d, 0.0, &shape, from)?;
                self.val(
                    d,
                    "arith.cmpf",
                    &[x.v, z],
                    &rt,
                    &[("predicate", "13 : i64".into())],
                )?
            }
            (true, false) => self.val(d, "arith.fptosi", &[x.v], &rt, &[])?,
            (false, false) if from == DType::I1 => self.val(d, "arith.extui", &[x.v], &rt, &[])?,
            (false, false) if to == DType::I1 => {
                let z = self.splat_const(d, 0.0, &shape, from)?;
                self.val(
                    d,
                    "arith.cmpi",
                    &[x.v, z],
                    &rt,
                    &[("predicate", "1 : i64".into())],
                )?
            }
            (false, false) if bits(to) > bits(from) => {
                self.val(d, "arith.extsi", &[x.v], &rt, &[])?
            }
            (false, false) => self.val(d, "arith.trunci", &[x.v], &rt, &[])?,
        };
        Ok(Blk {
            v,
            dims: x.dims.clone(),
            dt: to,
            depth: d,
        })
    }

    pub(super) fn with(&self, x: &Blk<'c, 'm>, v: Value<'c, 'm>, dt: DType) -> Blk<'c, 'm> {
        Blk {
            v,
            dims: x.dims.clone(),
            dt,
            depth: x.depth,
        }
    }

    /// Operand `o` of an op with result extents `er` in tiling `lay`,
    /// broadcast to the result's block (numpy rules: aligned right, unit
    /// dims stretched).
    pub(super) fn operand(&mut self, o: ValueId, er: &[u64], lay: &Layout) -> R<Blk<'c, 'm>> {
        let (ea, _) = static_shape(self.p, self.p.func.ty(o))?;
        let k = er.len() - ea.len();
        let la: Layout = (0..ea.len())
            .map(|j| {
                if ea[j] == 1 && er[j + k] != 1 {
                    None
                } else {
                    lay[j + k].clone()
                }
            })
            .collect();
        let x = self.emit(o, &la)?;
        let (dims, depth) = self.dims(er, lay)?;
        let depth = depth.max(x.depth);
        let elt = dtype_name(x.dt);
        let mut shape = x.shape();
        let mut v = x.v;
        if !shape.is_empty() {
            while shape.len() < er.len() {
                shape.insert(0, 1);
                v = self.val(
                    depth,
                    "tt.expand_dims",
                    &[v],
                    &ty_text(&shape, elt),
                    &[("axis", "0 : i32".into())],
                )?;
            }
        }
        let to: Vec<u64> = dims.iter().map(|d| d.size).collect();
        let v = self.bcast(depth, v, &shape, &to, elt)?;
        Ok(Blk {
            v,
            dims,
            dt: x.dt,
            depth,
        })
    }

    /// The fields of `a` (the input of a repaired reduction along `d`) where
    /// a field is a broadcast: its operand unit along the stretched dims
    /// (but `d`), so that the reducer's functions run at the operands'
    /// shapes (see [`Em::inline`]).
    pub(super) fn narrow_fields(
        &mut self,
        a: ValueId,
        la: &Layout,
        d: usize,
    ) -> R<Vec<Blk<'c, 'm>>> {
        let f = self.p.func;
        let fields = match self.p.def[a.index()].map(|i| &f.ops[i]) {
            Some(op) if op.name == "tensor.tuple" && !self.p.buffer[a.index()] => {
                op.operands.clone()
            }
            _ => return Ok(self.emit_val(a, la)?.blocks()),
        };
        let mut out = Vec::new();
        for o in fields {
            let def = self.p.def[o.index()].map(|i| &f.ops[i]);
            match def {
                Some(op) if op.name == "tensor.broadcast" && !self.p.buffer[o.index()] => {
                    let (er, _) = static_shape(self.p, f.ty(o))?;
                    let src = op.operands[0];
                    let (ea, _) = static_shape(self.p, f.ty(src))?;
                    if ea.len() != er.len() {
                        out.push(self.emit(o, la)?);
                        continue;
                    }
                    // Unit along the stretched dims but `d`.
                    let (mut dims, _) = self.dims(&er, la)?;
                    let mut narrow = false;
                    for j in 0..er.len() {
                        if ea[j] == 1 && er[j] != 1 && j != d {
                            dims[j] = self.unit_bd()?;
                            narrow = true;
                        }
                    }
                    if !narrow {
                        out.push(self.emit(o, la)?);
                        continue;
                    }
                    out.push(self.narrow_operand(src, &er, la, dims)?);
                }
                _ => out.push(self.emit(o, la)?),
            }
        }
        Ok(out)
    }

    /// Operand `o` of a broadcast to `er` in tiling `lay`, as a block of
    /// `dims` (unit where not stretched).
    fn narrow_operand(
        &mut self,
        o: ValueId,
        er: &[u64],
        lay: &Layout,
        dims: Vec<Bd<'c, 'm>>,
    ) -> R<Blk<'c, 'm>> {
        let (ea, _) = static_shape(self.p, self.p.func.ty(o))?;
        let la: Layout = (0..ea.len())
            .map(|j| {
                if ea[j] == 1 && er[j] != 1 {
                    None
                } else {
                    lay[j].clone()
                }
            })
            .collect();
        let x = self.emit(o, &la)?;
        let to: Vec<u64> = dims.iter().map(|b| b.size).collect();
        let v = self.bcast(x.depth, x.v, &x.shape(), &to, dtype_name(x.dt))?;
        Ok(Blk {
            v,
            dims,
            dt: x.dt,
            depth: x.depth,
        })
    }

    pub(super) fn emit_op(&mut self, v: ValueId, lay: &Layout) -> R<Val<'c, 'm>> {
        let f = self.p.func;
        let i = self.p.def[v.index()].ok_or("a parameter that is not a buffer")?;
        let op = &f.ops[i];
        match op.name.as_str() {
            "par.partition" | "par.replicate" | "par.combine" => self.emit_val(op.operands[0], lay),
            "tensor.tuple" => {
                let mut out = Vec::new();
                for o in &op.operands {
                    if layout_of(f.ty(*o)).len() != lay.len() {
                        return Err(
                            "a tuple of values of different ranks inside a kernel (not covered by the TTIR path)"
                                .into(),
                        );
                    }
                    out.push(self.emit_val(*o, lay)?);
                }
                Ok(Val::Tup(out))
            }
            "tensor.get" => {
                let idx = op.attrs.get("index").and_then(Attr::as_int).unwrap_or(0) as usize;
                match self.emit_val(op.operands[0], lay)? {
                    Val::Tup(fs) => fs
                        .get(idx)
                        .cloned()
                        .ok_or_else(|| "tensor.get out of range".into()),
                    x => Ok(x),
                }
            }
            "tensor.reduce" => self.reduce(v, lay),
            "par.reduce" => self.par_reduce(v, lay),
            _ => self.emit_tensor_op(v, lay).map(Val::T),
        }
    }

    pub(super) fn emit_tensor_op(&mut self, v: ValueId, lay: &Layout) -> R<Blk<'c, 'm>> {
        let f = self.p.func;
        let i = self.p.def[v.index()].ok_or("a parameter that is not a buffer")?;
        let op = &f.ops[i];
        let name = op.name.as_str();
        let (er, rdt) = static_shape(self.p, f.ty(v))?;
        match name {
            "tensor.full" => {
                let x = op.attrs.get("value").and_then(Attr::as_f64).unwrap_or(0.0);
                let (dims, _) = self.dims(&er, lay)?;
                let shape: Vec<u64> = dims.iter().map(|d| d.size).collect();
                let c = self.splat_const(0, x, &shape, rdt)?;
                Ok(Blk {
                    v: c,
                    dims,
                    dt: rdt,
                    depth: 0,
                })
            }
            "tensor.iota" => {
                let d = op.attrs.get("dim").and_then(Attr::as_int).unwrap_or(0) as usize;
                let (dims, depth) = self.dims(&er, lay)?;
                let shape: Vec<u64> = dims.iter().map(|d| d.size).collect();
                let bd = dims.get(d).copied().ok_or("iota dim out of range")?;
                let x = self.along(depth, bd.offs, bd.size, d, er.len(), "i32")?;
                let mut unit = vec![1; er.len()];
                unit[d] = bd.size;
                let x = self.bcast(depth, x, &unit, &shape, "i32")?;
                let b = Blk {
                    v: x,
                    dims,
                    dt: DType::I32,
                    depth,
                };
                self.cast(&b, rdt)
            }
            "tensor.broadcast" => self.operand(op.operands[0], &er, lay),
            "tensor.reshape" => {
                let a = op.operands[0];
                let (ea, _) = static_shape(self.p, f.ty(a))?;
                let nu_a: Vec<usize> = (0..ea.len()).filter(|j| ea[*j] != 1).collect();
                let nu_r: Vec<usize> = (0..er.len()).filter(|j| er[*j] != 1).collect();
                if nu_a.len() != nu_r.len() || nu_a.iter().zip(&nu_r).any(|(x, y)| ea[*x] != er[*y])
                {
                    return self.reshaped_load(v, a, lay);
                }
                let mut la: Layout = vec![None; ea.len()];
                for (x, y) in nu_a.iter().zip(&nu_r) {
                    la[*x] = lay[*y].clone();
                }
                // A tiled unit row stays tiled through the view (the
                // Python build's pairing, [`efir_triton::kept_units`]).
                let units_kept = efir_triton::kept_units(
                    &ea.iter().map(|e| *e == 1).collect::<Vec<_>>(),
                    &er.iter().map(|e| *e == 1).collect::<Vec<_>>(),
                );
                let kept: Vec<usize> = units_kept.iter().map(|(_, y)| *y).collect();
                for (x, y) in units_kept {
                    la[x] = lay[y].clone();
                }
                let x = self.emit(a, &la)?;
                let (mut dims, depth) = self.dims(&er, lay)?;
                // A unit dim the reshape inserts, tiled in the result (V's
                // view under a padded query row), holds one element: the
                // block is unit there (a lazy broadcast, as the Python
                // build's).
                for (j, d) in dims.iter_mut().enumerate() {
                    if er[j] == 1 && d.size != 1 && !kept.contains(&j) {
                        *d = self.unit_bd()?;
                    }
                }
                let depth = depth.max(x.depth);
                let shape: Vec<u64> = dims.iter().map(|d| d.size).collect();
                let v = self.reshape_value(&x, &ea, &er, &nu_r, &shape, depth)?;
                // A scaled block's base takes the same view.
                if let Some((b, c)) = self.scaled.get(&raw(x.v)).cloned() {
                    let bv = self.reshape_value(&b, &ea, &er, &nu_r, &shape, depth)?;
                    let base = Blk {
                        v: bv,
                        dims: dims.clone(),
                        dt: b.dt,
                        depth,
                    };
                    self.scaled.insert(raw(v), (base, c));
                }
                Ok(Blk {
                    v,
                    dims,
                    dt: x.dt,
                    depth,
                })
            }
            "tensor.transpose" => {
                let perm = op
                    .attrs
                    .get("perm")
                    .and_then(Attr::as_int_array)
                    .ok_or("transpose without perm")?;
                let mut la: Layout = vec![None; er.len()];
                for (k, p) in perm.iter().enumerate() {
                    la[*p as usize] = lay[k].clone();
                }
                let x = self.emit(op.operands[0], &la)?;
                let (dims, depth) = self.dims(&er, lay)?;
                let depth = depth.max(x.depth);
                let shape: Vec<u64> = dims.iter().map(|d| d.size).collect();
                let ps: Vec<String> = perm.iter().map(|p| p.to_string()).collect();
                let v = self.val(
                    depth,
                    "tt.trans",
                    &[x.v],
                    &ty_text(&shape, dtype_name(x.dt)),
                    &[("order", format!("array<i32: {}>", ps.join(", ")))],
                )?;
                Ok(Blk {
                    v,
                    dims,
                    dt: x.dt,
                    depth,
                })
            }
            "tensor.matmul" | "tile.matmul" => self.matmul(v, lay),
            "tensor.slice" => self.slice(v, lay),
            "tensor.concat" => self.concat(v, lay),
            _ if name.starts_with("ew.") => self.pointwise(v, lay),
            other => Err(format!(
                "`{other}` inside a kernel (not covered by the TTIR path)"
            )),
        }
    }
}

/// The axes (ascending) at which a reshape of a block of shape `xs` to one
/// of shape `rs` inserts unit dims, where the reshape's operand (extents
/// `ea`) has no unit dims and the result (extents `er`, non-unit dims at
/// `nu_r`) only adds unit dims, to at most two dims; `None` otherwise (a
/// tt.reshape then).
fn inserted_units(
    ea: &[u64],
    er: &[u64],
    nu_r: &[usize],
    xs: &[u64],
    rs: &[u64],
) -> Option<Vec<usize>> {
    if ea.is_empty()
        || ea.contains(&1)
        || er.len() > 2
        || er.len() <= ea.len()
        || xs.len() != ea.len()
        || rs.len() != er.len()
    {
        return None;
    }
    let axes: Vec<usize> = (0..er.len()).filter(|j| !nu_r.contains(j)).collect();
    let kept: Vec<u64> = nu_r.iter().map(|j| rs[*j]).collect();
    (axes.iter().all(|a| rs[*a] == 1) && kept == xs).then_some(axes)
}

/// A value's identity (its MLIR handle).
pub(super) fn raw(v: Value<'_, '_>) -> usize {
    use melior::ir::ValueLike;
    v.to_raw().ptr as usize
}
