//! The loops of `par.reduce`: loop-carried reducer states, causal tile
//! skipping and the split at the diagonal.

use super::bcast::real_shape;
use super::*;

impl KernelEmitter<'_, '_> {
    /// Open a loop over the tiles of `axis` (bound inside it); its depth.
    /// With `stop`, the loop runs over the first `stop` tiles only (a
    /// variable of the enclosing scope; see [`causal`]).
    pub(super) fn open_loop(&mut self, axis: &str, stop: Option<String>) -> usize {
        let (hi, name) = match stop {
            Some(h) => (h, format!("{axis}/causal")),
            None => (format!("NT_{}", py_ident(axis)), axis.to_string()),
        };
        self.open_loop_range(axis, "0", hi, name)
    }

    /// Open a loop over tiles `lo..hi` of `axis`; `name` is the loop as the
    /// estimate counts it (`<axis>`, `<axis>/causal`, `<axis>/diag`).
    pub(super) fn open_loop_range(
        &mut self,
        axis: &str,
        lo: &str,
        hi: String,
        name: String,
    ) -> usize {
        self.open_loop_block(axis, lo, hi, name, None)
    }

    /// [`Self::open_loop_range`] on blocks of `block` (a loop's own) if
    /// given.
    pub(super) fn open_loop_block(
        &mut self,
        axis: &str,
        lo: &str,
        hi: String,
        name: String,
        block: Option<String>,
    ) -> usize {
        let id = py_ident(axis);
        let i = if self.live.get(axis).is_some_and(|n| *n > 0) {
            self.n += 1;
            format!("i{}_{id}", self.n)
        } else {
            format!("i_{id}")
        };
        self.scopes.push(Scope {
            header: format!("for {i} in range({lo}, {hi}):"),
            lines: Vec::new(),
        });
        let inner = self.top();
        self.loops.push(name);
        self.opened += 1;
        self.nest.push(self.opened);
        self.bind_block(axis, &i, inner, block);
        inner
    }

    /// Close the innermost loop (over `axis`): its lines go into the
    /// enclosing scope, and what was emitted inside it is forgotten.
    pub(super) fn close_loop(&mut self, axis: &str) -> Result<(), String> {
        let inner = self.top();
        let sc = self.scopes.pop().ok_or("no scope")?;
        let outer = &mut self.scopes[inner - 1].lines;
        outer.push(sc.header);
        outer.extend(
            fuse::optimize(sc.lines)
                .into_iter()
                .map(|l| format!("    {l}")),
        );
        if let Some(after) = self.after_loop.remove(&(inner - 1)) {
            self.scopes[inner - 1].lines.extend(after);
        }
        self.bound.remove(axis);
        self.idx.remove(axis);
        if let Some(n) = self.live.get_mut(axis) {
            *n -= 1;
        }
        self.loops.pop();
        self.nest.pop();
        self.offs.retain(|_, (_, d)| *d < inner);
        self.memo.retain(|_, x| x.depth() < inner);
        Ok(())
    }

    /// A parallel reduction is emitted as a loop at the shallowest depth where
    /// everything it depends on (the axes of its result's tiling) is bound:
    /// outside any enclosing loop it does not depend on, even one over the
    /// same axis.
    pub(super) fn par_reduce(&mut self, v: ValueId, lay: &Layout) -> Result<Val, String> {
        let outer = lay
            .iter()
            .flatten()
            .map(|a| self.bound.get(a).copied().unwrap_or(0))
            .max()
            .unwrap_or(0);
        if outer == self.top() {
            return self.par_reduce_here(v, lay);
        }
        let scopes = self.scopes.split_off(outer + 1);
        let bound = self.bound.clone();
        let idx = self.idx.clone();
        let offs = self.offs.clone();
        let memo = self.memo.clone();
        let loops = self.loops.clone();
        let nest = self.nest.clone();
        self.bound.retain(|_, d| *d <= outer);
        self.offs.retain(|_, (_, d)| *d <= outer);
        self.memo.retain(|_, x| x.depth() <= outer);
        self.loops.truncate(outer);
        self.nest.truncate(outer);
        let r = self.par_reduce_here(v, lay);
        let fresh: Vec<_> = self.memo.drain().collect();
        self.scopes.extend(scopes);
        self.bound = bound;
        self.idx = idx;
        self.offs = offs;
        self.memo = memo;
        self.loops = loops;
        self.nest = nest;
        for (k, x) in fresh {
            self.memo.entry(k).or_insert(x);
        }
        r
    }

    pub(super) fn par_reduce_here(&mut self, v: ValueId, lay: &Layout) -> Result<Val, String> {
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
        let outer = self.top();
        // A reduction over an axis that is already bound (a grid axis, or an
        // enclosing loop the reduction cannot be hoisted out of) runs its own
        // loop over that axis: inside it the axis has fresh offsets, and what
        // was computed from the outer binding is hidden until it closes.
        let shadow = self.binding(&axis).map(|b| {
            let memo = self.memo.clone();
            self.memo.retain(|_, x| x.depth() < b.0);
            (b, memo)
        });
        // A result tiled by the axis it reduces over (a partition over `@k`
        // of a reduction over `@k`, two dims sharing the axis name) needs
        // both bindings of the axis in one block: the loop's for the reduced
        // dim, the outer one for the result's tiles. The latter are asked
        // for under an alias bound like the outer binding.
        let mut aliased = None;
        let inner_lay: Layout = if lay.iter().flatten().any(|a| *a == axis) {
            let Some((b, _)) = &shadow else {
                return Err(format!(
                    "a value tiled by @{axis} where @{axis} is not bound"
                ));
            };
            self.n += 1;
            let al = format!("{axis}@{}", self.n);
            self.set_binding(&al, b.clone());
            self.alias.insert(al.clone(), axis.clone());
            let l = lay
                .iter()
                .map(|a| match a {
                    Some(x) if *x == axis => Some(al.clone()),
                    _ => a.clone(),
                })
                .collect();
            aliased = Some(al);
            l
        } else {
            lay.clone()
        };
        let idents = efir_dialect_red::identity(&r).ok_or("reducer without identity")?;
        let (accs, inits) = self.reduce_accs(v, &idents, lay, outer)?;
        // Causal tile skipping: the iterations whose tile state is the
        // reducer's identity form a suffix; stop before it.
        let stop = match self.tile_states(op.operands[0], &inner_lay, &axis) {
            Some((g, s)) if s == idents.iter().map(|x| Some(*x)).collect::<Vec<_>>() => {
                let hi = self.fresh("hi");
                let (bg, bl) = (self.block_of(&g), self.block_of(&axis));
                let ig = self.idx.get(&g).cloned().ok_or("unbound axis")?;
                self.line(
                    outer,
                    format!(
                        "{hi} = tl.minimum((({ig} + 1) * {bg} + {bl} - 1) // {bl}, NT_{})",
                        py_ident(&axis)
                    ),
                );
                // Programs of later tiles of `g` loop longer: they start first
                // (see `emit_kernel`).
                self.heavy.get_or_insert_with(|| g.clone());
                Some((hi, g, ig, bg, bl))
            }
            _ => None,
        };
        let x = op.operands[0];
        match stop {
            Some((hi, g, ig, bg, bl)) if !self.dot_accumulates(&r, x) => {
                // The tiles wholly below the diagonal (every key before
                // every query of the tile) first, where the causal mask is
                // all true and is not computed; then the diagonal tiles,
                // masked.
                let lo = self.fresh("lo");
                self.line(
                    outer,
                    format!("{lo} = tl.minimum(({ig} * {bg} + 1) // {bl}, {hi})"),
                );
                let name = format!("{axis}/causal");
                let inner = self.open_loop_range(&axis, "0", lo.clone(), name);
                self.unmasked = Some((g.clone(), axis.clone()));
                let res = self.reduce_iteration(&r, x, &inner_lay, &accs, &inits, outer, inner);
                self.unmasked = None;
                res?;
                self.close_loop(&axis)?;
                let inner = self.open_loop_range(&axis, &lo, hi, format!("{axis}/diag"));
                self.reduce_iteration(&r, x, &inner_lay, &accs, &inits, outer, inner)?;
            }
            None if !self.dot_accumulates(&r, x) && self.stat_axes.contains(&axis) => {
                // A statistics loop over an axis that the kernel's matmul
                // also loops over: on blocks of its own.
                self.loop_kinds.push((axis.clone(), false));
                let id = py_ident(&axis);
                let inner = self.open_loop_block(
                    &axis,
                    "0",
                    format!("RNT_{id}"),
                    format!("{axis}/stat"),
                    Some(format!("RB_{id}")),
                );
                self.reduce_iteration(&r, x, &inner_lay, &accs, &inits, outer, inner)?;
            }
            stop => {
                if stop.is_none() {
                    self.loop_kinds
                        .push((axis.clone(), self.dot_accumulates(&r, x)));
                }
                let inner = self.open_loop(&axis, stop.map(|s| s.0));
                self.reduce_iteration(&r, x, &inner_lay, &accs, &inits, outer, inner)?;
            }
        }
        self.close_loop(&axis)?;
        if let Some((b, memo)) = shadow {
            self.set_binding(&axis, b);
            // What was computed outside the inner loop does not depend on
            // its binding of the axis (that lives at the loop's depth).
            let fresh = std::mem::replace(&mut self.memo, memo);
            for (k, x) in fresh {
                self.memo.entry(k).or_insert(x);
            }
        }
        if let Some(al) = aliased {
            // (Blocks memoized under the alias keep it in their key; it is
            // never asked for again.)
            self.bound.remove(&al);
            self.idx.remove(&al);
            self.offs.remove(&format!("axis:{al}"));
        }
        self.finish(v, lay, accs, outer)
    }

    /// One iteration of a parallel reduction's loop (at depth `inner`):
    /// the tile state of `x`, merged into the accumulators.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn reduce_iteration(
        &mut self,
        r: &Attr,
        x: ValueId,
        inner_lay: &Layout,
        accs: &[String],
        inits: &[(usize, Vec<BD>, String)],
        outer: usize,
        inner: usize,
    ) -> Result<(), String> {
        if self.dot_accumulates(r, x) {
            // A sum of matmul tiles: each tile's product goes into the fp32
            // accumulator as it is made, never rounded to the tile's dtype.
            let (la, lb) = self.matmul_layouts(x, inner_lay)?;
            self.matmul_product(x, &la, &lb, inner_lay, Some((&accs[0], inner)))?;
        } else {
            // A repair over a maximum computes its tile state at the merged
            // maximum (see [`KernelEmitter::tile_reduce_at`]).
            self.rebase = Some((x, accs[0].clone()));
            let xs = self.emit(x, inner_lay);
            self.rebase = None;
            let xs = xs?.blocks();
            // An accumulator holds single elements where its tile states do
            // (see [`bcast`]): its initial value takes their shape.
            let mut xv = Vec::new();
            for ((b, (at, dims, idv)), acc) in xs.iter().zip(inits).zip(accs) {
                let u = self.units(&b.var, b.dims.len());
                let var = self.fresh("t");
                self.line(inner, format!("{var} = ({}).to(tl.float32)", b.var));
                self.note_copy(&var, &b.var, b.dtype, DType::F32);
                if b.dtype == DType::F32 {
                    self.copy_of.insert(var.clone(), b.var.clone());
                }
                if u.iter().any(|x| *x) && u.len() == dims.len() {
                    self.scopes[outer].lines[*at] = format!(
                        "{acc} = tl.full({}, {idv}, tl.float32)",
                        real_shape(dims, &u)
                    );
                    self.set_units(acc, u.clone());
                }
                self.set_units(&var, u);
                xv.push(var);
            }
            let merged = self.combine(r, accs, &xv, inner)?;
            // A merged state whole where its accumulator was unit makes the
            // accumulator whole (a loop-carried variable keeps its shape).
            for ((acc, m), (at, dims, idv)) in accs.iter().zip(&merged).zip(inits) {
                let (ua, um) = (self.units(acc, dims.len()), self.units(m, dims.len()));
                if ua != um {
                    self.scopes[outer].lines[*at] = format!(
                        "{acc} = tl.full({}, {idv}, tl.float32)",
                        real_shape(dims, &um)
                    );
                    self.unit.remove(acc);
                    self.set_units(acc, um);
                }
            }
            for (a, m) in accs.iter().zip(&merged) {
                self.line(inner, format!("{a} = {m}"));
            }
        }
        Ok(())
    }
}

impl KernelEmitter<'_, '_> {
    /// The product of a split-K `par.collect` program (a matmul's partial
    /// sum over the collected grid axis `a`, one tile of `a` per program) as
    /// a loop over sub-blocks of its tile (`SUB_<a>` elements, the kernel's
    /// own block of `a`; the host keeps it within `BLOCK_<a>`), accumulated
    /// in f32. A long tile is then streamed in register-sized blocks: a few
    /// programs per SM cover the reduction, each with a loop the compiler
    /// pipelines (measured on the H200: a GEMV over K 11008 took 23 us split
    /// 8 ways with loops of 64, 85 us with one tile of K per program). With
    /// `SUB_<a>` equal to `BLOCK_<a>` the loop makes one trip.
    pub(super) fn collect_sub_loop(
        &mut self,
        x: ValueId,
        a: &str,
        lay: &Layout,
    ) -> Result<Val, String> {
        let outer = self.top();
        let exts = extents(self.p.func.ty(x));
        let (dims, _) = self.dims(&exts, lay)?;
        let acc = self.fresh("acc");
        self.declare_acc(outer, &acc, &dims, "0.0");
        let (grid, memo, inner) = self.open_sub_loop(a)?;
        let res = self
            .matmul_layouts(x, lay)
            .and_then(|(la, lb)| self.matmul_product(x, &la, &lb, lay, Some((&acc, inner))));
        self.close_sub_loop(a, grid, memo)?;
        res?;
        let y = self.finish(x, lay, vec![acc.clone()], outer)?;
        // The f32 sum is kept beside its rounding: a buffer of collected
        // partial sums stores it (`efir_ir::accum`).
        if let Val::T(b) = &y {
            if matches!(b.dtype, DType::F16 | DType::BF16) {
                self.unrounded.insert(b.var.clone(), acc);
            }
        }
        Ok(y)
    }

    /// The state of a flash-decoding `par.collect` program (a reduction
    /// `x` partial over the collected grid axis `a`, one tile of `a` per
    /// program) as a loop over sub-blocks of its tile (`SUB_<a>` elements),
    /// each sub-block's state merged into the running one by the reducer
    /// (the online softmax's rescaling), as [`Self::collect_sub_loop`] does
    /// for a matmul's partial sum: a split of 512 keys streams in blocks of
    /// 64 through one pipelined loop instead of holding 512 keys of K and V
    /// in registers, so that splits can be long enough for few programs
    /// and short enough for registers.
    pub(super) fn collect_sub_reduce(
        &mut self,
        x: ValueId,
        a: &str,
        r: &Attr,
        lay: &Layout,
    ) -> Result<Val, String> {
        let outer = self.top();
        let idents = efir_dialect_red::identity(r).ok_or("reducer without identity")?;
        let (accs, inits) = self.reduce_accs(x, &idents, lay, outer)?;
        let (grid, memo, inner) = self.open_sub_loop(a)?;
        let res = self.reduce_iteration(r, x, lay, &accs, &inits, outer, inner);
        self.close_sub_loop(a, grid, memo)?;
        res?;
        self.finish(x, lay, accs, outer)
    }

    /// The accumulators of a reduction into `v` (tiled `lay`), declared at
    /// depth `outer` with the reducer's identities `idents`, and where each
    /// one's initial value is (its shape is patched once the tile states'
    /// unit dims are known).
    #[allow(clippy::type_complexity)]
    fn reduce_accs(
        &mut self,
        v: ValueId,
        idents: &[f64],
        lay: &Layout,
        outer: usize,
    ) -> Result<(Vec<String>, Vec<(usize, Vec<BD>, String)>), String> {
        let leaves: Vec<_> = self.p.func.ty(v).leaves().into_iter().cloned().collect();
        let mut accs = Vec::new();
        let mut inits = Vec::new();
        for (l, id) in leaves.iter().zip(idents) {
            let exts: Vec<Extent> = l.shape.iter().map(Extent::of).collect();
            let (dims, _) = self.dims(&exts, lay)?;
            let var = self.fresh("acc");
            let idv = match (id.is_infinite(), *id < 0.0) {
                (true, true) => "float('-inf')".to_string(),
                (true, false) => "float('inf')".to_string(),
                _ => format!("{id:?}"),
            };
            inits.push((self.scopes[outer].lines.len(), dims.clone(), idv.clone()));
            self.declare_acc(outer, &var, &dims, &idv);
            accs.push(var);
        }
        Ok((accs, inits))
    }

    /// Open the loop of a collect program over sub-blocks of its tile of
    /// the collected axis `a` (`SUB_<a>` elements), binding `a` to the
    /// sub-block's offsets; what was computed from the grid's binding is
    /// hidden inside. Returns the grid's binding, the hidden memo and the
    /// loop's depth, for [`Self::close_sub_loop`].
    fn open_sub_loop(&mut self, a: &str) -> Result<(Binding, Memo, usize), String> {
        let grid = self.binding(a).ok_or("the collected axis is not bound")?;
        let gidx = grid
            .1
            .clone()
            .ok_or("the collected axis has no tile index")?;
        let id = py_ident(a);
        let memo = self.memo.clone();
        self.memo.retain(|_, v| v.depth() < grid.0);
        let i = format!("i_sub_{id}");
        self.scopes.push(Scope {
            header: format!("for {i} in range(0, BLOCK_{id} // SUB_{id}):"),
            lines: Vec::new(),
        });
        let inner = self.top();
        self.loops.push(format!("{a}/sub"));
        self.opened += 1;
        self.nest.push(self.opened);
        *self.live.entry(a.to_string()).or_default() += 1;
        self.n += 1;
        let offs = format!("offs{}_{id}", self.n);
        self.line(
            inner,
            format!("{offs} = {gidx} * BLOCK_{id} + {i} * SUB_{id} + tl.arange(0, SUB_{id})"),
        );
        self.sub_block.insert(offs.clone(), format!("SUB_{id}"));
        self.set_binding(a, (inner, Some(gidx), Some((offs, inner))));
        Ok((grid, memo, inner))
    }

    /// Close [`Self::open_sub_loop`]'s loop: the grid's binding of `a`
    /// again, and what the loop computed kept only where nothing outside
    /// computed it.
    fn close_sub_loop(&mut self, a: &str, grid: Binding, memo: Memo) -> Result<(), String> {
        self.close_loop(a)?;
        self.set_binding(a, grid);
        let fresh = std::mem::replace(&mut self.memo, memo);
        for (k, v) in fresh {
            self.memo.entry(k).or_insert(v);
        }
        Ok(())
    }
}
