//! `par.reduce`: a loop over the tiles of its axis carrying the reducer's
//! states.

use super::*;

impl<'c, 'm> Em<'c, 'm, '_, '_> {
    /// `par.reduce`: an `scf.for` over the tiles of its axis, carrying one
    /// accumulator per state field (f32, or an integer reduction's type;
    /// started at the reducer's identity); each iteration computes the
    /// tile's states with the axis bound to the loop's tile and merges them
    /// into the accumulators.
    pub(super) fn par_reduce(&mut self, v: ValueId, lay: &Layout) -> R<Val<'c, 'm>> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let r = op
            .attrs
            .get("reducer")
            .ok_or("par.reduce without reducer")?
            .clone();
        let axis = op
            .attrs
            .get("axis")
            .and_then(Attr::as_symbol)
            .ok_or("par.reduce without axis")?
            .to_string();
        let x = op.operands[0];
        let mut outer = self.scopes.len() - 1;
        // A reduction over an axis already bound (a grid axis, an enclosing
        // loop) runs its own loop over it: inside, the axis has fresh
        // offsets, and what was computed from the outer binding is hidden.
        let shadow = self.bound.get(&axis).copied().map(|b| {
            let memo = self.memo.clone();
            self.memo.retain(|_, x| x.depth() < b.0);
            (b, self.idx.get(&axis).copied(), memo)
        });
        // Such a loop does not depend on the enclosing loop over its axis
        // (unless its result is tiled by that axis): it is built outside
        // it, after the bindings of the other axes, as the Python build
        // hoists it (layernorm_gemm's row statistics asked for in the
        // matmul's K loop were recomputed in every iteration, the mean
        // again in every iteration of the variance's loop: 7-10x slower).
        if let Some(((bd, _), _, _)) = &shadow {
            if !lay.iter().flatten().any(|a| *a == axis) {
                let others = self
                    .bound
                    .iter()
                    .filter(|(a, _)| **a != axis)
                    .map(|(_, (d, _))| *d)
                    .max()
                    .unwrap_or(0);
                outer = outer.min(others.max(bd.saturating_sub(1)));
            }
        }
        // A result tiled by the axis it reduces over needs both bindings in
        // one block: its tiles are asked for under an alias bound like the
        // outer binding.
        let mut alias = None;
        let inner_lay: Layout = if lay.iter().flatten().any(|a| *a == axis) {
            let Some((b, _, _)) = &shadow else {
                return Err(format!(
                    "a value tiled by @{axis} where @{axis} is not bound"
                ));
            };
            let al = format!("{axis}@{}", self.alias.len());
            self.bound.insert(al.clone(), *b);
            self.alias.insert(al.clone(), axis.clone());
            let l = lay
                .iter()
                .map(|a| match a {
                    Some(x) if *x == axis => Some(al.clone()),
                    _ => a.clone(),
                })
                .collect();
            alias = Some(al);
            l
        } else {
            lay.clone()
        };
        let (inits, acc_tys, acc_dims, acc_dts) = self.reduce_accs(&r, x, v, lay, outer)?;
        // A statistics loop (not a matmul's K loop) over an axis with a
        // statistics block runs on that block, as the Python build's
        // `RB_<axis>` loops (layernorm_gemm's mean and variance: 128 where
        // the K loop takes 512).
        let stat_block = self
            .stat
            .get(&axis)
            .copied()
            .filter(|_| alias.is_none() && !self.dot_accumulates(&r, x));
        let own_before = match stat_block {
            Some(b) => Some(self.own.insert(axis.clone(), b)),
            None => None,
        };
        let nt = self.tiles_here(&axis)?;
        // Causal tile skipping (see [`causal`]): not for a loop over an
        // axis bound outside it.
        let stop = match shadow {
            None => self.causal_stop(&r, x, &axis, lay, nt)?,
            Some(_) => None,
        };
        // Causal loops in two, as the Python build: the key tiles wholly
        // below the diagonal without the mask (its comparison a constant
        // true), then the tiles on it.
        let ranges = match stop {
            Some((hi, lo, cmp)) => vec![(None, Some(lo), Some(cmp)), (Some(lo), Some(hi), None)],
            None => vec![(None, None, None)],
        };
        let mut accs_now = inits;
        let mut fref_last = None;
        let mut failed = None;
        for (lo, hi, diag) in ranges {
            let lb = match lo {
                Some(v) => v,
                None => self.const_i32(0, 0)?,
            };
            let ub = match hi {
                Some(v) => v,
                None => self.const_i32(0, nt as i64)?,
            };
            self.diag_true = diag;
            let built = self.reduce_loop(
                outer,
                (lb, ub),
                &accs_now,
                (&acc_tys, &acc_dims, &acc_dts),
                (&r, x, &axis, &inner_lay),
            );
            self.diag_true = None;
            match built {
                Ok(fref) => {
                    accs_now = (0..acc_tys.len())
                        .map(|i| fref.result(i).map(Into::into).map_err(|e| e.to_string()))
                        .collect::<R<Vec<_>>>()?;
                    fref_last = Some(fref);
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        match own_before {
            Some(Some(b)) => {
                self.own.insert(axis.clone(), b);
            }
            Some(None) => {
                self.own.remove(&axis);
            }
            None => {}
        }
        if let Some((b, idx, memo)) = shadow {
            self.bound.insert(axis.clone(), b);
            if let Some(i) = idx {
                self.idx.insert(axis.clone(), i);
            }
            // What was computed outside the loop does not depend on its
            // binding of the axis (that lives at the loop's depth).
            let fresh = std::mem::replace(&mut self.memo, memo);
            for (k, x) in fresh {
                self.memo.entry(k).or_insert(x);
            }
        }
        if let Some(al) = alias {
            self.bound.remove(&al);
        }
        if let Some(e) = failed {
            return Err(e);
        }
        let _ = fref_last.ok_or("a reduction loop without a loop")?;
        let mut states = Vec::new();
        for (i, dims) in acc_dims.into_iter().enumerate() {
            states.push(Blk {
                v: accs_now[i],
                dims,
                dt: acc_dts[i],
                depth: outer,
            });
        }
        self.finish(v, lay, states)
    }

    /// The accumulators of a reduction by `r` of `x` into `v` (tiled
    /// `lay`), initialized at depth `outer`: their initial values, types,
    /// dims and dtypes (f32, or an integer leaf reduction's own; single
    /// elements along the dims where their states are, see [`units`]).
    #[allow(clippy::type_complexity)]
    fn reduce_accs(
        &mut self,
        r: &Attr,
        x: ValueId,
        v: ValueId,
        lay: &Layout,
        outer: usize,
    ) -> R<(
        Vec<Value<'c, 'm>>,
        Vec<Type<'c>>,
        Vec<Vec<Bd<'c, 'm>>>,
        Vec<DType>,
    )> {
        let leaves = leaf_shapes(self.p, self.p.func.ty(v))?;
        let idents = efir_dialect_red::identity(r)
            .ok_or_else(|| format!("reducer `{r}` without an identity"))?;
        if idents.len() != leaves.len() {
            return Err("the reducer's state count differs from the result's fields".into());
        }
        let mut inits = Vec::new();
        let mut acc_dims = Vec::new();
        let mut acc_tys = Vec::new();
        // Accumulators single elements along the dims where their states
        // are (see [`units`]).
        let units = self.acc_units(r, x).filter(|u| u.len() == leaves.len());
        // The accumulators' types: f32, or an integer leaf reduction's own.
        let mut acc_dts = Vec::new();
        for (_, dt) in &leaves {
            let st = state_dtype(*dt)
                .ok_or("a reduction of i1 values (not covered by the TTIR path)")?;
            if st != DType::F32 && !matches!(r, Attr::Term(_, a) if a.is_empty()) {
                return Err(format!(
                    "an integer reduction by `{r}` (not covered by the TTIR path; sum, max and min are)"
                ));
            }
            acc_dts.push(st);
        }
        for (i, ((er, _), id)) in leaves.iter().zip(&idents).enumerate() {
            let (mut dims, _) = self.dims(er, lay)?;
            if let Some(u) = units
                .as_ref()
                .map(|u| &u[i])
                .filter(|u| u.len() == dims.len())
            {
                for (j, unit) in u.iter().enumerate() {
                    if *unit {
                        dims[j] = self.unit_bd()?;
                    }
                }
            }
            let shape: Vec<u64> = dims.iter().map(|d| d.size).collect();
            let st = acc_dts[i];
            let id = match r {
                Attr::Term(n, _) if st != DType::F32 => {
                    leaf_reducer_on(n, st).ok_or("malformed reducer")?.1
                }
                _ => *id,
            };
            inits.push(self.splat_const(outer, id, &shape, st)?);
            acc_tys.push(self.ty(&ty_text(&shape, dtype_name(st)))?);
            acc_dims.push(dims);
        }
        Ok((inits, acc_tys, acc_dims, acc_dts))
    }

    /// One `scf.for` of a `par.reduce` over `axis` from `lb` to `ub`
    /// carrying accumulators from `inits`, built at depth `outer`: its body
    /// binds the axis and merges the tile's states of `x`.
    #[allow(clippy::type_complexity)]
    fn reduce_loop(
        &mut self,
        outer: usize,
        (lb, ub): (Value<'c, 'm>, Value<'c, 'm>),
        inits: &[Value<'c, 'm>],
        (acc_tys, acc_dims, acc_dts): (&[Type<'c>], &[Vec<Bd<'c, 'm>>], &[DType]),
        (r, x, axis, inner_lay): (&Attr, ValueId, &str, &Layout),
    ) -> R<OperationRef<'c, 'm>> {
        let st = self.const_i32(0, 1)?;
        let i32t = self.ty("i32")?;
        let mut block_args = vec![(i32t, self.loc)];
        block_args.extend(acc_tys.iter().map(|t| (*t, self.loc)));
        let region = Region::new();
        region.append_block(Block::new(&block_args));
        let mut operands = vec![lb, ub, st];
        operands.extend(inits);
        let forop = OperationBuilder::new("scf.for", self.loc)
            .add_operands(&operands)
            .add_results(acc_tys)
            .add_regions([region])
            .build()
            .map_err(|e| format!("scf.for: {e}"))?;
        let fref = self.place(outer, forop);
        let body = fref
            .region(0)
            .map_err(|e| e.to_string())?
            .first_block()
            .ok_or("scf.for without a block")?;
        // The scopes inside the one the loop is built in, set aside while
        // it is built.
        let hidden = self.scopes.split_off(outer + 1);
        self.scopes.push(Scope {
            block: body,
            anchor: Some(fref),
        });
        let inner = self.scopes.len() - 1;
        let iv: Value = body.argument(0).map_err(|e| e.to_string())?.into();
        let mut accs = Vec::new();
        for (i, dims) in acc_dims.iter().enumerate() {
            accs.push(Blk {
                v: body.argument(i + 1).map_err(|e| e.to_string())?.into(),
                dims: dims.clone(),
                dt: acc_dts[i],
                depth: inner,
            });
        }
        let res = self
            .bind(axis, iv, inner)
            .and_then(|_| self.reduce_iteration(r, x, inner_lay, &accs, inner));
        // Close the loop whatever happened, then report.
        let yielded = match res {
            Ok(ms) => self.op(inner, "scf.yield", &ms, &[], &[]).map(|_| ()),
            Err(e) => Err(e),
        };
        self.bound.remove(axis);
        self.idx.remove(axis);
        self.memo.retain(|_, b| b.depth() < inner);
        self.scopes.pop();
        self.scopes.extend(hidden);
        yielded?;
        Ok(fref)
    }

    /// One iteration of a `par.reduce` loop (at depth `inner`): the tile's
    /// states of `x`, merged into the accumulators `accs`.
    pub(super) fn reduce_iteration(
        &mut self,
        r: &Attr,
        x: ValueId,
        inner_lay: &Layout,
        accs: &[Blk<'c, 'm>],
        inner: usize,
    ) -> R<Vec<Value<'c, 'm>>> {
        // (Restored after: a loop emitted inside this one, for one of the
        // tile's operands, must not clear it before the tile's states are
        // finished.)
        let outer = self.narrow_states.replace(x);
        // A repair over a maximum computes its tile states at the merged
        // maximum (FA2's order, as the Python build; see [`Em::reduce`]).
        self.rebase = accs.first().map(|a| (x, a.clone()));
        let xs = self.emit_val(x, inner_lay);
        self.rebase = None;
        self.narrow_states = outer;
        let xs = xs?.blocks();
        if xs.len() != accs.len() {
            return Err("the tile states and the accumulators differ in count".into());
        }
        let mut ts = Vec::new();
        for (b, a) in xs.iter().zip(accs) {
            // Broadcast only where the tile state is unit (a state wider
            // than its accumulator is an error, never a tt.broadcast that
            // Triton rejects).
            if b.dims.len() != a.dims.len()
                || b.dims
                    .iter()
                    .zip(&a.dims)
                    .any(|(x, y)| x.size != 1 && x.size != y.size)
            {
                return Err(format!(
                    "a tile state block {:?} where its accumulator is {:?}",
                    b.shape(),
                    a.shape()
                ));
            }
            let v = self.bcast(b.depth, b.v, &b.shape(), &a.shape(), dtype_name(b.dt))?;
            let b = &Blk {
                v,
                dims: a.dims.clone(),
                ..b.clone()
            };
            let mut t = self.cast(b, a.dt)?;
            t.depth = inner;
            ts.push(t);
        }
        let merged = self.combine(r, accs, &ts, inner)?;
        // A merged state unit where its accumulator is whole is broadcast
        // (the loop carries the accumulator's type).
        let mut out = Vec::new();
        for (m, a) in merged.iter().zip(accs) {
            if m.dims.len() != a.dims.len()
                || m.dims
                    .iter()
                    .zip(&a.dims)
                    .any(|(x, y)| x.size != 1 && x.size != y.size)
            {
                return Err(format!(
                    "a merged state block {:?} where its accumulator is {:?}",
                    m.shape(),
                    a.shape()
                ));
            }
            out.push(self.bcast(inner, m.v, &m.shape(), &a.shape(), dtype_name(a.dt))?);
        }
        Ok(out)
    }

    /// Whether a `par.reduce` by `r` of `x` is a matmul's K loop (a sum of
    /// a matmul's products, accumulated by tt.dot), as the Python build's
    /// `dot_accumulates`.
    fn dot_accumulates(&self, r: &Attr, x: ValueId) -> bool {
        let f = self.p.func;
        matches!(r, Attr::Term(n, _) if n == "red.sum")
            && !self.p.buffer[x.index()]
            && self.p.def[x.index()]
                .is_some_and(|i| matches!(f.ops[i].name.as_str(), "tile.matmul" | "tensor.matmul"))
            && f.ty(x).as_tensor().is_some()
    }

    /// The state of a flash-decoding `par.collect` program (a reduction `x`
    /// by `r`, partial over the collected grid axis `a`) as a loop over
    /// sub-blocks of `sb` elements of the program's tile, each sub-block's
    /// state merged into the running one (the Python build's
    /// `collect_sub_reduce`; for a matmul's partial sums see
    /// [`Em::collect_sub_loop`]): inside, `a` is bound to offsets
    /// `idx * BLOCK + i * SUB + range(SUB)` and what was computed from the
    /// grid's binding of `a` is hidden.
    pub(super) fn collect_sub_reduce(
        &mut self,
        x: ValueId,
        a: &str,
        sb: u64,
        r: &Attr,
        lay: &Layout,
    ) -> R<Val<'c, 'm>> {
        let outer = self.scopes.len() - 1;
        let (inits, acc_tys, acc_dims, acc_dts) = self.reduce_accs(r, x, x, lay, outer)?;
        let fref = self.in_sub_blocks(a, sb, |em, trips, first| {
            let c = em.const_i32(0, trips as i64)?;
            let last = em.val(outer, "arith.addi", &[first, c], "i32", &[])?;
            em.reduce_loop(
                outer,
                (first, last),
                &inits,
                (&acc_tys, &acc_dims, &acc_dts),
                (r, x, a, lay),
            )
        })?;
        let mut states = Vec::new();
        for (i, dims) in acc_dims.into_iter().enumerate() {
            states.push(Blk {
                v: fref.result(i).map_err(|e| e.to_string())?.into(),
                dims,
                dt: acc_dts[i],
                depth: outer,
            });
        }
        self.finish(x, lay, states)
    }
}
