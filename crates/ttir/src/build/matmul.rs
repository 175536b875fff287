//! Matmuls: `tt.dot` (or a multiply and sum under 16), a K loop where K
//! is long and unsplit.

use super::*;

impl<'c, 'm> Em<'c, 'm, '_, '_> {
    pub(super) fn matmul(&mut self, v: ValueId, lay: &Layout) -> R<Blk<'c, 'm>> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let (a, b) = (op.operands[0], op.operands[1]);
        let (ea, _) = static_shape(self.p, f.ty(a))?;
        let (eb, _) = static_shape(self.p, f.ty(b))?;
        let (er, rdt) = static_shape(self.p, f.ty(v))?;
        let (ra, rb, r) = (ea.len(), eb.len(), er.len());
        if ra < 2 || rb < 2 || r < 2 {
            return Err("a matmul of vectors (not covered by the TTIR path)".into());
        }
        // Leading (batch) dims as the result's, stretched unit dims whole;
        // rows and columns from the request, K as the operand is split.
        let side = |e: &[u64]| -> Layout {
            let k = r - e.len();
            (0..e.len() - 2)
                .map(|j| {
                    if e[j] == 1 && er[j + k] != 1 {
                        None
                    } else {
                        lay[j + k].clone()
                    }
                })
                .collect()
        };
        let kax = layout_of(f.ty(a))[ra - 1].clone();
        let mut la = side(&ea);
        la.extend([lay[r - 2].clone(), kax.clone()]);
        let mut lb = side(&eb);
        lb.extend([kax.clone(), lay[r - 1].clone()]);
        let (dims, depth0) = self.dims(&er, lay)?;
        let shape: Vec<u64> = dims.iter().map(|d| d.size).collect();
        // Batch blocks over 1: the product keeps the batch dims (a
        // broadcast multiply and sum over K, as the Python build does).
        let batched = shape[..r - 2].iter().any(|n| *n != 1);
        let shape2 = if batched {
            shape.clone()
        } else {
            shape[r - 2..].to_vec()
        };
        let auto = format!("r{}", ea[ra - 1]);
        let sub = self.sub.take_if(|s| s.0 == v);
        let (x, depth) = if let Some((_, a, sb)) = sub {
            self.collect_sub_loop(v, &a, sb, (&la, &lb), &shape2, depth0)?
        } else if kax.is_none()
            && ea[ra - 1] > AUTO_K
            && self.p.axes.contains_key(&auto)
            && !self.bound.contains_key(&auto)
        {
            // A K loop: scf.for over K tiles with an f32 accumulator.
            let bk = self.block_of(&auto)?;
            let nt = ea[ra - 1].div_ceil(bk);
            la[ra - 1] = Some(auto.clone());
            lb[rb - 2] = Some(auto.clone());
            let res = self.acc_loop(nt, &shape2, depth0, |em, iv, acc, inner| {
                em.bind(&auto, iv, inner)?;
                Ok(em.product(v, &la, &lb, Some(acc), inner)?.0)
            });
            self.bound.remove(&auto);
            self.idx.remove(&auto);
            res?
        } else {
            let (x, d) = self.product(v, &la, &lb, None, 0)?;
            (x, d.max(depth0))
        };
        let x = if r > 2 && !batched {
            self.val(depth, "tt.reshape", &[x], &ty_text(&shape, "f32"), &[])?
        } else {
            x
        };
        let blk = Blk {
            v: x,
            dims,
            dt: DType::F32,
            depth,
        };
        let y = self.cast(&blk, rdt)?;
        if y.dt != blk.dt {
            self.unrounded.insert(super::emit::raw(y.v), blk);
        }
        Ok(y)
    }

    /// The f32 product of blocks `xa` (`[.., m, k]`) and `xb` (`[.., k,
    /// n]`) whose batch dims are not all single elements, as a block of
    /// the result's rank `r` (`[.., m, n]`, batch dims broadcast; plus
    /// `acc`): the operands multiplied as `[.., m, k, 1]` by `[.., 1, k, n]`
    /// and summed over `k` in registers, as the Python build's batched
    /// product.
    fn batched_product(
        &self,
        xa: &Blk<'c, 'm>,
        xb: &Blk<'c, 'm>,
        r: usize,
        acc: Option<Value<'c, 'm>>,
        depth: usize,
    ) -> R<(Value<'c, 'm>, usize)> {
        let (ra, rb) = (xa.dims.len(), xb.dims.len());
        if ra > r || rb > r {
            return Err("a matmul operand of a higher rank than its result".into());
        }
        // Zero the K padding of both operands, in f32.
        let xa = self.cast(&self.pad(xa, ra - 1, 0.0)?, DType::F32)?;
        let xb = self.cast(&self.pad(xb, rb - 2, 0.0)?, DType::F32)?;
        // Both at rank r + 1: leading unit dims, then a unit dim for n
        // (a) or for m (b).
        let lift = |x: &Blk<'c, 'm>, unit_at: usize| -> R<(Value<'c, 'm>, Vec<u64>)> {
            let mut shape = x.shape();
            let mut v = x.v;
            while shape.len() < r {
                shape.insert(0, 1);
                v = self.val(
                    depth,
                    "tt.expand_dims",
                    &[v],
                    &ty_text(&shape, "f32"),
                    &[("axis", "0 : i32".into())],
                )?;
            }
            shape.insert(unit_at, 1);
            v = self.val(
                depth,
                "tt.expand_dims",
                &[v],
                &ty_text(&shape, "f32"),
                &[("axis", format!("{unit_at} : i32"))],
            )?;
            Ok((v, shape))
        };
        let (a, sa) = lift(&xa, r)?;
        let (b, sb) = lift(&xb, r - 2)?;
        let s: Vec<u64> = sa.iter().zip(&sb).map(|(x, y)| *x.max(y)).collect();
        if sa
            .iter()
            .zip(&sb)
            .any(|(x, y)| x != y && *x != 1 && *y != 1)
        {
            return Err("matmul operands whose batch blocks do not broadcast".into());
        }
        let a = self.bcast(depth, a, &sa, &s, "f32")?;
        let b = self.bcast(depth, b, &sb, &s, "f32")?;
        let p = self.val(depth, "arith.mulf", &[a, b], &ty_text(&s, "f32"), &[])?;
        // The product's dims (only their sizes matter to the reduction).
        let dims = s
            .iter()
            .map(|n| Bd {
                size: *n,
                ..xa.dims[ra - 1]
            })
            .collect();
        let pb = Blk {
            v: p,
            dims,
            dt: DType::F32,
            depth,
        };
        let y = self.tt_reduce(&pb, r - 1, "arith.addf")?;
        let mut rs = s;
        rs.remove(r - 1);
        let y = match acc {
            Some(c) => self.val(depth, "arith.addf", &[c, y], &ty_text(&rs, "f32"), &[])?,
            None => y,
        };
        Ok((y, depth))
    }

    /// `x` (a block whose dims but the last two are single elements) as a
    /// matrix.
    pub(super) fn matrix(&mut self, x: &Blk<'c, 'm>) -> R<Blk<'c, 'm>> {
        let r = x.dims.len();
        if r == 2 {
            return Ok(x.clone());
        }
        if x.dims[..r - 2].iter().any(|d| d.size != 1) {
            return Err(
                "a batched matmul with batch blocks over 1 (not covered by the TTIR path)".into(),
            );
        }
        let dims = x.dims[r - 2..].to_vec();
        let s: Vec<u64> = dims.iter().map(|d| d.size).collect();
        // An unmasked load: loaded again as a matrix (as the Python build's
        // 2-D load of attention's Q, which Triton feeds to the tensor cores
        // from shared memory; reshaped, it reached `wgmma` from registers).
        if let Some(m) = self.reload_matrix(x, r - 2, r - 1)? {
            return Ok(m);
        }
        let v = self.val(
            x.depth,
            "tt.reshape",
            &[x.v],
            &ty_text(&s, dtype_name(x.dt)),
            &[],
        )?;
        Ok(Blk {
            v,
            dims,
            dt: x.dt,
            depth: x.depth,
        })
    }

    /// The f32 product (a matrix) of the operands of matmul `v` in tilings
    /// `la`, `lb` (plus `acc`, at loop depth `at`), and its depth.
    pub(super) fn product(
        &mut self,
        v: ValueId,
        la: &Layout,
        lb: &Layout,
        acc: Option<Value<'c, 'm>>,
        at: usize,
    ) -> R<(Value<'c, 'm>, usize)> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let xa = self.emit(op.operands[0], la)?;
        let xb = self.emit(op.operands[1], lb)?;
        let depth = xa.depth.max(xb.depth).max(at);
        let batch = |x: &Blk<'c, 'm>| x.dims[..x.dims.len() - 2].iter().any(|d| d.size != 1);
        if batch(&xa) || batch(&xb) {
            let (mut xa, mut xb) = (xa, xb);
            xa.depth = depth;
            xb.depth = depth;
            let r = f.ty(v).as_tensor().map_or(0, |t| t.shape.len());
            return self.batched_product(&xa, &xb, r, acc, depth);
        }
        // Each operand as a matrix where it is computed (attention's Q,
        // loaded once before the key loop, stays a loop invariant that
        // Triton keeps in shared memory, as the Python build's 2-D load).
        let xa = self.matrix(&xa)?;
        let xb = self.matrix(&xb)?;
        // Zero the K padding of both operands.
        let xa = self.pad(&xa, 1, 0.0)?;
        let xb = self.pad(&xb, 0, 0.0)?;
        let (bm, bk, bn) = (xa.dims[0].size, xa.dims[1].size, xb.dims[1].size);
        let shape = vec![bm, bn];
        let ft = ty_text(&shape, "f32");
        let acc = match acc {
            Some(x) => x,
            None => self.splat_const(depth, 0.0, &shape, DType::F32)?,
        };
        if bm >= 16 && bn >= 16 && bk >= 16 {
            // Same 16-bit type: a 16-bit dot; otherwise f32 (tf32, as tl.dot).
            let dt = if xa.dt == xb.dt && matches!(xa.dt, DType::F16 | DType::BF16) {
                xa.dt
            } else {
                DType::F32
            };
            let xa = self.cast(&xa, dt)?;
            let xb = self.cast(&xb, dt)?;
            let d = self.val(
                depth,
                "tt.dot",
                &[xa.v, xb.v, acc],
                &ft,
                &[
                    ("inputPrecision", "0 : i32".into()),
                    ("maxNumImpreciseAcc", "0 : i32".into()),
                ],
            )?;
            return Ok((d, depth));
        }
        // A block under 16: multiply and sum in registers.
        let xa = self.cast(&xa, DType::F32)?;
        let xb = self.cast(&xb, DType::F32)?;
        let s3 = [bm, bk, bn];
        let t3 = ty_text(&s3, "f32");
        let a3 = self.val(
            depth,
            "tt.expand_dims",
            &[xa.v],
            &ty_text(&[bm, bk, 1], "f32"),
            &[("axis", "2 : i32".into())],
        )?;
        let a3 = self.bcast(depth, a3, &[bm, bk, 1], &s3, "f32")?;
        let b3 = self.val(
            depth,
            "tt.expand_dims",
            &[xb.v],
            &ty_text(&[1, bk, bn], "f32"),
            &[("axis", "0 : i32".into())],
        )?;
        let b3 = self.bcast(depth, b3, &[1, bk, bn], &s3, "f32")?;
        let p = self.val(depth, "arith.mulf", &[a3, b3], &t3, &[])?;
        let pb = Blk {
            v: p,
            dims: vec![xa.dims[0], xa.dims[1], xb.dims[1]],
            dt: DType::F32,
            depth,
        };
        let s = self.tt_reduce(&pb, 1, "arith.addf")?;
        let d = self.val(depth, "arith.addf", &[acc, s], &ft, &[])?;
        Ok((d, depth))
    }

    /// An `scf.for` of `trips` iterations at the current scope carrying an
    /// f32 accumulator of `shape` (started at zero, at depth `depth0` or
    /// the scope's): `body` computes an iteration's new accumulator from
    /// the induction variable and the accumulator, inside the loop (at the
    /// depth it is given). The loop's result and its depth.
    fn acc_loop(
        &mut self,
        trips: u64,
        shape: &[u64],
        depth0: usize,
        body: impl FnOnce(&mut Self, Value<'c, 'm>, Value<'c, 'm>, usize) -> R<Value<'c, 'm>>,
    ) -> R<(Value<'c, 'm>, usize)> {
        let outer = self.scopes.len() - 1;
        let lb0 = self.const_i32(0, 0)?;
        let ub = self.const_i32(0, trips as i64)?;
        let st = self.const_i32(0, 1)?;
        let acc0 = self.splat_const(outer.max(depth0), 0.0, shape, DType::F32)?;
        let at = self.ty(&ty_text(shape, "f32"))?;
        let i32t = self.ty("i32")?;
        let region = Region::new();
        region.append_block(Block::new(&[(i32t, self.loc), (at, self.loc)]));
        let forop = OperationBuilder::new("scf.for", self.loc)
            .add_operands(&[lb0, ub, st, acc0])
            .add_results(&[at])
            .add_regions([region])
            .build()
            .map_err(|e| format!("scf.for: {e}"))?;
        let fref = self.place(outer, forop);
        let blk = fref
            .region(0)
            .map_err(|e| e.to_string())?
            .first_block()
            .ok_or("scf.for without a block")?;
        self.scopes.push(Scope {
            block: blk,
            anchor: Some(fref),
        });
        let inner = self.scopes.len() - 1;
        let iv: Value = blk.argument(0).map_err(|e| e.to_string())?.into();
        let acc: Value = blk.argument(1).map_err(|e| e.to_string())?.into();
        // Close the loop whatever happened, then report.
        let yielded = body(self, iv, acc, inner)
            .and_then(|x| self.op(inner, "scf.yield", &[x], &[], &[]).map(|_| ()));
        self.memo.retain(|_, b| b.depth() < inner);
        self.scopes.pop();
        yielded?;
        let out: Value = fref.result(0).map_err(|e| e.to_string())?.into();
        Ok((out, outer.max(depth0)))
    }

    /// The collected axis of a split-K kernel whose matmul streams its
    /// tile in sub-blocks, and the sub-block, as the Python build's
    /// (crates/triton `collect_sub_loop`): a `par.collect` kernel over a
    /// grid axis with no dim in its buffer whose body is a matmul (its
    /// partial sums over the axis) or a reduction partial over the axis
    /// (see [`efir_triton::partial_reducer`]). The sub-block is the kernel's own block
    /// of the axis (`BLOCK_<axis>__k<i>`, a schedule's or the estimate's),
    /// at most the axis's block (as the Python host's `SUB_<axis>`).
    pub(super) fn sub_loop_of(&self, k: &Kernel) -> R<Option<(String, u64)>> {
        let f = self.p.func;
        let Some((a, _)) = k
            .grid
            .iter()
            .find(|(_, d)| d.is_none())
            .filter(|_| k.collect)
        else {
            return Ok(None);
        };
        let x = k.body;
        let matmul = !self.p.buffer[x.index()]
            && self.p.def[x.index()]
                .is_some_and(|i| matches!(f.ops[i].name.as_str(), "tile.matmul" | "tensor.matmul"))
            && f.ty(x).as_tensor().is_some();
        if !matmul && efir_triton::partial_reducer(f, &self.p.def, &self.p.buffer, x, a).is_none() {
            return Ok(None);
        }
        let bk = self.block_of(a)?;
        let own = self
            .p
            .kernel_blocks
            .get(k.index)
            .and_then(|b| b.get(a))
            .copied()
            .unwrap_or(bk);
        Ok(Some((a.clone(), own.min(bk))))
    }

    /// The f32 product of split-K matmul `v` (tiled `la`, `lb`; its
    /// result's block `shape`) as a loop over sub-blocks of `sb` elements
    /// of the program's tile of the collected axis `a`, accumulated in f32
    /// (the Python build's `for i_sub in range(0, BLOCK // SUB)`): inside,
    /// `a` is bound to offsets `idx * BLOCK + i * SUB + range(SUB)`, masked
    /// where the tile passes the extent, and what was computed from the
    /// grid's binding of `a` is hidden. A long tile is then streamed in
    /// register-sized blocks; with `sb` the whole tile the loop makes one
    /// trip.
    fn collect_sub_loop(
        &mut self,
        v: ValueId,
        a: &str,
        sb: u64,
        (la, lb): (&Layout, &Layout),
        shape: &[u64],
        depth0: usize,
    ) -> R<(Value<'c, 'm>, usize)> {
        self.in_sub_blocks(a, sb, |em, trips, first| {
            em.acc_loop(trips, shape, depth0, |em, iv, acc, inner| {
                let j = em.val(inner, "arith.addi", &[first, iv], "i32", &[])?;
                em.bind(a, j, inner)?;
                Ok(em.product(v, la, lb, Some(acc), inner)?.0)
            })
        })
    }

    /// `body` built with the collected axis `a` of a collect program
    /// streamed in sub-blocks of `sb` elements of its tile: given the
    /// sub-blocks a tile holds and the first one's index (a tile index at
    /// blocks of `sb`), it binds `a` in its loop; meanwhile `a`'s own block
    /// is `sb`, and what was computed from the grid's binding of `a` is
    /// hidden. The grid's binding is restored after, whatever happened.
    pub(super) fn in_sub_blocks<T>(
        &mut self,
        a: &str,
        sb: u64,
        body: impl FnOnce(&mut Self, u64, Value<'c, 'm>) -> R<T>,
    ) -> R<T> {
        let bk = self.block_of(a)?;
        if sb == 0 || bk % sb != 0 {
            return Err(format!(
                "sub-blocks of {sb} elements do not divide the tiles of @{a} ({bk})"
            ));
        }
        let trips = bk / sb;
        let grid = *self.bound.get(a).ok_or("the collected axis is not bound")?;
        let gidx = *self
            .idx
            .get(a)
            .ok_or("the collected axis has no tile index")?;
        // The first sub-block of the program's tile, at blocks of `sb`.
        let outer = self.scopes.len() - 1;
        let c = self.const_i32(0, trips as i64)?;
        let first = self.val(grid.0.max(outer), "arith.muli", &[gidx, c], "i32", &[])?;
        let memo = self.memo.clone();
        self.memo.retain(|_, x| x.depth() < grid.0);
        let prev = self.own.insert(a.to_string(), sb);
        self.streamed.insert(a.to_string(), bk);
        let res = body(self, trips, first);
        match prev {
            Some(b) => self.own.insert(a.to_string(), b),
            None => self.own.remove(a),
        };
        self.streamed.remove(a);
        self.bound.insert(a.to_string(), grid);
        self.idx.insert(a.to_string(), gidx);
        let fresh = std::mem::replace(&mut self.memo, memo);
        for (k, x) in fresh {
            self.memo.entry(k).or_insert(x);
        }
        res
    }
}
