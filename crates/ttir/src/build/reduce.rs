//! Reductions inside a kernel: `tensor.reduce` over a block (sum, max,
//! min, their products, repaired reducers with `f` inlined over the
//! tile), reducer states merged (`combine`, repairs by `h`), and reducer
//! functions inlined over blocks.

use super::emit::raw;
use super::*;

impl<'c, 'm> Em<'c, 'm, '_, '_> {
    /// `x` with the elements past the extent of dim `d` replaced by `fill`.
    pub(super) fn pad(&self, x: &Blk<'c, 'm>, d: usize, fill: f64) -> R<Blk<'c, 'm>> {
        let bd = x.dims[d];
        if bd.even() {
            return Ok(x.clone());
        }
        // A load masked by the same bound, zeros where masked off, is
        // padded already: no arith.select after it (one on a dot operand
        // kept Triton from loading it straight into shared memory:
        // rmsnorm_swiglu's down projection took 91 registers and 38 KB,
        // the Python build's 64 and 22 KB).
        if fill == 0.0 && fill.is_sign_positive() {
            let b = (emit::raw(bd.offs), bd.ext, bd.size);
            if self
                .zero_padded
                .get(&emit::raw(x.v))
                .and_then(|ds| ds.get(d))
                == Some(&b)
            {
                return Ok(x.clone());
            }
        }
        let Some(m) = self.mask(&[bd], x.depth)? else {
            return Ok(x.clone());
        };
        let r = x.dims.len();
        let shape = x.shape();
        let m = if r > 1 {
            let mut unit = vec![1; r];
            unit[d] = bd.size;
            // `mask` gave a rank-1 block; place it along dim `d`.
            let m = self.along(x.depth, m, bd.size, d, r, "i1")?;
            self.bcast(x.depth, m, &unit, &shape, "i1")?
        } else {
            m
        };
        let c = self.splat_const(x.depth, fill, &shape, x.dt)?;
        let v = self.val(
            x.depth,
            "arith.select",
            &[m, x.v, c],
            &ty_text(&shape, dtype_name(x.dt)),
            &[],
        )?;
        Ok(self.with(x, v, x.dt))
    }

    /// `tt.reduce` of `x` (f32) along `d` with `combine` (`arith.addf`, ...).
    pub(super) fn tt_reduce(&self, x: &Blk<'c, 'm>, d: usize, combine: &str) -> R<Value<'c, 'm>> {
        let mut rs = x.shape();
        rs.remove(d);
        let elt = dtype_name(x.dt);
        let rt = self.ty(&ty_text(&rs, elt))?;
        let et = self.ty(elt)?;
        let region = Region::new();
        let blk = Block::new(&[(et, self.loc), (et, self.loc)]);
        let (a, b) = (
            blk.argument(0).map_err(|e| e.to_string())?,
            blk.argument(1).map_err(|e| e.to_string())?,
        );
        let s = blk.append_operation(
            OperationBuilder::new(combine, self.loc)
                .add_operands(&[a.into(), b.into()])
                .add_results(&[et])
                .build()
                .map_err(|e| e.to_string())?,
        );
        let sv: Value = s.result(0).map_err(|e| e.to_string())?.into();
        blk.append_operation(
            OperationBuilder::new("tt.reduce.return", self.loc)
                .add_operands(&[sv])
                .build()
                .map_err(|e| e.to_string())?,
        );
        region.append_block(blk);
        let op = OperationBuilder::new("tt.reduce", self.loc)
            .add_operands(&[x.v])
            .add_results(&[rt])
            .add_attributes(&[(
                Identifier::new(self.ctx, "axis"),
                Attribute::parse(self.ctx, &format!("{d} : i32")).ok_or("axis")?,
            )])
            .add_regions([region])
            .build()
            .map_err(|e| e.to_string())?;
        let r = self.place(x.depth, op);
        Ok(r.result(0).map_err(|e| e.to_string())?.into())
    }

    /// The tiling of operand `a` of a reduction over dim `d`: the result's,
    /// with the reduced dim tiled as `a` is (by the axis of a parallel
    /// reduction, whose loop binds it) or whole.
    pub(super) fn reduce_input_layout(&self, a: ValueId, lay: &Layout, d: usize) -> Layout {
        let mut la = lay.clone();
        la.insert(d, layout_of(self.p.func.ty(a)).get(d).cloned().flatten());
        la
    }

    pub(super) fn reduce(&mut self, v: ValueId, lay: &Layout) -> R<Val<'c, 'm>> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let d = op.attrs.get("dim").and_then(Attr::as_int).unwrap_or(0) as usize;
        let r = op.attrs.get("reducer").ok_or("reduce without reducer")?;
        let a = op.operands[0];
        let la = self.reduce_input_layout(a, lay, d);
        let repair = matches!(r, Attr::Term(n, _) if n == "red.repair");
        // The accumulator the tile states of `v` are to be rebased on.
        let rebase = match self.rebase.take() {
            Some((x, acc)) if x == v => Some(acc),
            other => {
                self.rebase = other;
                None
            }
        };
        let xs = if repair {
            self.narrow_fields(a, &la, d)?
        } else {
            self.emit_val(a, &la)?.blocks()
        };
        let states = self.tile_reduce_at(r, &xs, d, rebase)?;
        self.finish(v, lay, states)
    }

    /// Reducer states (f32 blocks) as the blocks of `v`, in its dtypes.
    pub(super) fn finish(
        &mut self,
        v: ValueId,
        lay: &Layout,
        states: Vec<Blk<'c, 'm>>,
    ) -> R<Val<'c, 'm>> {
        let t = self.p.func.ty(v);
        let leaves = leaf_shapes(self.p, t)?;
        if leaves.len() != states.len() {
            return Err("the reducer's state count differs from the result's fields".into());
        }
        let mut out = Vec::new();
        for ((er, rdt), s) in leaves.into_iter().zip(states) {
            let (mut dims, dd) = self.dims(&er, lay)?;
            let depth = dd.max(s.depth);
            if self.narrow_states == Some(v) && s.dims.len() == dims.len() {
                for (d, u) in dims.iter_mut().zip(&s.dims) {
                    if u.size == 1 {
                        *d = *u;
                    }
                }
            }
            let to: Vec<u64> = dims.iter().map(|d| d.size).collect();
            let v = self.bcast(depth, s.v, &s.shape(), &to, dtype_name(s.dt))?;
            let b = Blk {
                v,
                dims,
                dt: s.dt,
                depth,
            };
            out.push(Val::T(self.cast(&b, rdt)?));
        }
        if t.as_tensor().is_some() {
            return out.pop().ok_or_else(|| "no state".into());
        }
        Ok(Val::Tup(out))
    }

    /// [`Em::tile_reduce`]; with `rebase` (a loop's maximum accumulator),
    /// a repair over a maximum computes the tile's states at the merged
    /// maximum `max(rebase, tile max)` instead of the tile's own (FA2's
    /// order: the merge then repairs the accumulator only).
    pub(super) fn tile_reduce_at(
        &mut self,
        r: &Attr,
        xs: &[Blk<'c, 'm>],
        d: usize,
        rebase: Option<Blk<'c, 'm>>,
    ) -> R<Vec<Blk<'c, 'm>>> {
        let prev = std::mem::replace(&mut self.rebase_acc, rebase);
        let out = self.tile_reduce(r, xs, d);
        self.rebase_acc = prev;
        out
    }

    /// Reduce blocks `xs` (the fields of one input) along dim `d` with
    /// reducer `r`: its states, f32 blocks without dim `d`.
    pub(super) fn tile_reduce(
        &mut self,
        r: &Attr,
        xs: &[Blk<'c, 'm>],
        d: usize,
    ) -> R<Vec<Blk<'c, 'm>>> {
        let Attr::Term(name, args) = r else {
            return Err(format!("malformed reducer `{r}`"));
        };
        match name.as_str() {
            "red.sum" | "red.max" | "red.min" if args.is_empty() => {
                let x = xs.first().ok_or("a reduction of nothing")?;
                let st = state_dtype(x.dt)
                    .ok_or("a reduction of i1 values (not covered by the TTIR path)")?;
                let (combine, ident) = leaf_reducer_on(name, st).ok_or("malformed reducer")?;
                let x = self.cast(x, st)?;
                if name == "red.sum" && st == DType::F32 {
                    if let Some(s) = self.dot_sum(&x, d)? {
                        return Ok(vec![s]);
                    }
                }
                // The maximum of a block scaled by a positive constant: its
                // base's maximum, scaled once per row (exactly: rounding is
                // monotone), as the Python build folds the scale.
                let scaled = match name.as_str() {
                    "red.max" => self.scaled.get(&raw(x.v)).cloned(),
                    _ => None,
                };
                let (x, scale) = match scaled {
                    Some((b, c)) if b.dt == st => (Blk { depth: x.depth, ..b }, Some(c)),
                    _ => (x, None),
                };
                let x = self.pad(&x, d, ident)?;
                let mut s = self.tt_reduce(&x, d, combine)?;
                let mut dims = x.dims.clone();
                dims.remove(d);
                if let Some(c) = scale {
                    let shape: Vec<u64> = dims.iter().map(|b| b.size).collect();
                    let k = self.splat_const(x.depth, c, &shape, st)?;
                    let tf = ty_text(&shape, dtype_name(st));
                    s = self.val(x.depth, "arith.mulf", &[s, k], &tf, &[])?;
                }
                Ok(vec![Blk {
                    v: s,
                    dims,
                    dt: st,
                    depth: x.depth,
                }])
            }
            "red.prod" => {
                let mut out = Vec::new();
                let mut rest = xs;
                for (_, c) in args {
                    let n = arity(c, &self.sigs).ok_or("malformed product")?.inputs;
                    let (h, t) = rest.split_at(n.min(rest.len()));
                    out.extend(self.tile_reduce(c, h, d)?);
                    rest = t;
                }
                Ok(out)
            }
            "red.repair" => {
                let (p, c, fname, _) = repair_parts(args).ok_or("malformed repair")?;
                let ip = arity(p, &self.sigs).ok_or("malformed repair")?.inputs;
                let rebase = self.rebase_acc.take();
                let mut s = self.tile_reduce(p, &xs[..ip.min(xs.len())], d)?;
                let over_max = matches!(p, Attr::Term(n, _) if n == "red.max") && s.len() == 1;
                if let (Some(acc), true) = (rebase, over_max) {
                    // The merged maximum, in the tile state's shape.
                    let t = s[0].clone();
                    let depth = t.depth.max(acc.depth);
                    let both = self.broadcast_all(vec![t.clone(), acc.clone()], depth)?;
                    let (t, a) = (&both[0], &both[1]);
                    let (op, _) = leaf_reducer_on("red.max", t.dt).ok_or("malformed reducer")?;
                    let elt = dtype_name(t.dt);
                    let m = self.val(depth, op, &[a.v, t.v], &ty_text(&t.shape(), elt), &[])?;
                    self.rebased.push((m, acc.v));
                    s = vec![self.with(t, m, t.dt)];
                }
                // f(x..., s...) over the tile, the producer's states
                // broadcast along `d`; then the consumer over its results.
                let x0 = xs.first().ok_or("a reduction of nothing")?;
                let depth = xs
                    .iter()
                    .chain(&s)
                    .map(|b| b.depth)
                    .max()
                    .unwrap_or(0);
                if xs.iter().chain(&s).any(|b| !is_float(b.dt)) {
                    return Err(
                        "a repaired reduction of integers (not covered by the TTIR path)".into(),
                    );
                }
                let mut fargs = Vec::new();
                for b in xs {
                    if b.dims.len() != x0.dims.len() || b.dims[d].size != x0.dims[d].size {
                        return Err(
                            "a repaired reduction of fields with different blocks (not covered by the TTIR path)"
                                .into(),
                        );
                    }
                    let mut x = self.cast(b, DType::F32)?;
                    x.depth = depth;
                    fargs.push(x);
                }
                for sv in &s {
                    fargs.push(self.unreduce(sv, d, depth)?);
                }
                // f's results whole along `d` (a result made of states
                // only is unit there).
                let mut ys = Vec::new();
                // A maximum producer's state bounds its input from above.
                let maxof = match p {
                    Attr::Term(n, _) if n == "red.max" && ip == 1 && s.len() == 1 => {
                        Some((0, xs.len()))
                    }
                    _ => None,
                };
                for y in self.inline(fname, fargs, depth, maxof)? {
                    ys.push(self.whole_along(y, d, &x0.dims[d])?);
                }
                let cs = self.tile_reduce(c, &ys, d)?;
                Ok(s.into_iter().chain(cs).collect())
            }
            _ => Err(format!(
                "reducer `{r}` (not covered by the TTIR path; sum, max, min, their products and repairs are)"
            )),
        }
    }

    /// State block `s` (without dim `d`) with a unit dim `d` (broadcast
    /// along it where it meets a tile, see [`Em::inline`]).
    pub(super) fn unreduce(&mut self, s: &Blk<'c, 'm>, d: usize, depth: usize) -> R<Blk<'c, 'm>> {
        let elt = dtype_name(s.dt);
        let mut unit = s.shape();
        unit.insert(d, 1);
        let v = if s.dims.is_empty() {
            self.val(depth, "tt.splat", &[s.v], &ty_text(&unit, elt), &[])?
        } else {
            self.val(
                depth,
                "tt.expand_dims",
                &[s.v],
                &ty_text(&unit, elt),
                &[("axis", format!("{d} : i32"))],
            )?
        };
        let mut dims = s.dims.clone();
        dims.insert(d, self.unit_bd()?);
        Ok(Blk {
            v,
            dims,
            dt: s.dt,
            depth,
        })
    }

    /// `y` broadcast along dim `d` to `bd`, where it is unit there.
    fn whole_along(&self, y: Blk<'c, 'm>, d: usize, bd: &Bd<'c, 'm>) -> R<Blk<'c, 'm>> {
        if y.dims[d].size == bd.size {
            return Ok(y);
        }
        let mut dims = y.dims.clone();
        dims[d] = *bd;
        let to: Vec<u64> = dims.iter().map(|b| b.size).collect();
        let v = self.bcast(y.depth, y.v, &y.shape(), &to, dtype_name(y.dt))?;
        Ok(Blk { v, dims, ..y })
    }

    /// Function `fname` of the module (pointwise, over scalars) applied to
    /// blocks of one rank, at `depth`: its results, in f32. Blocks unit
    /// along a dim are broadcast where an op meets a whole one, so each op
    /// runs at its operands' shape (a product of a `[m, k, 1]` and a
    /// `[1, k, n]` block is recorded for [`Em::dot_sum`]).
    pub(super) fn inline(
        &mut self,
        fname: &str,
        args: Vec<Blk<'c, 'm>>,
        depth: usize,
        maxof: Option<(usize, usize)>,
    ) -> R<Vec<Blk<'c, 'm>>> {
        let g = self
            .p
            .module
            .func(fname)
            .ok_or_else(|| format!("no function @{fname}"))?;
        if g.params.len() != args.len() {
            return Err(format!(
                "@{fname} takes {} arguments, the reducer gives {}",
                g.params.len(),
                args.len()
            ));
        }
        let proto = args.first().cloned().ok_or("a function of no arguments")?;
        let mut env: HashMap<ValueId, Blk<'c, 'm>> = g.params.iter().copied().zip(args).collect();
        // Values known to be <= 0 (x - m with m the maximum of x, see
        // `maxof`), and in [0, 1] (exp of those, selections and products
        // of them, constants): 16-bit dot operands (see [`Em::dot_sum`]).
        let mut nonpos: HashSet<ValueId> = HashSet::new();
        let mut unit: HashSet<ValueId> = HashSet::new();
        // Values that stand for an argument in `maxof` (its index), as the
        // Python build's bound analysis takes them.
        let stands = efir_triton::stand_ins(g);
        let param = |v: ValueId| stands.get(&v).copied();
        // f32 differences by their result, their operands before
        // broadcasting: `exp(a - b)` is built as `exp2(a * log2(e) - b *
        // log2(e))`, as the Python build emits it (`b`, a row's maximum,
        // scaled once per row).
        let mut diffs: HashMap<ValueId, (Blk<'c, 'm>, Blk<'c, 'm>)> = HashMap::new();
        for op in &g.ops {
            let o = &op.operands;
            let bounded = match op.name.as_str() {
                "ew.sub" => {
                    if o.len() == 2
                        && maxof.is_some()
                        && (param(o[0]), param(o[1])) == (maxof.map(|m| m.0), maxof.map(|m| m.1))
                    {
                        nonpos.insert(op.result);
                    }
                    false
                }
                "ew.exp" => o.first().is_some_and(|x| nonpos.contains(x)),
                "ew.select" => o.len() == 3 && unit.contains(&o[1]) && unit.contains(&o[2]),
                "ew.mul" => o.len() == 2 && unit.contains(&o[0]) && unit.contains(&o[1]),
                "tensor.full" => op
                    .attrs
                    .get("value")
                    .and_then(Attr::as_f64)
                    .is_some_and(|x| (0.0..=1.0).contains(&x)),
                _ => false,
            };
            if bounded {
                unit.insert(op.result);
            }
            let (rs, dt) = static_shape(self.p, g.ty(op.result))?;
            if !rs.is_empty() {
                return Err(format!("@{fname} is not over scalars"));
            }
            let b = match op.name.as_str() {
                "tensor.full" => {
                    let x = op.attrs.get("value").and_then(Attr::as_f64).unwrap_or(0.0);
                    let u = self.unit_bd()?;
                    let dims = vec![u; proto.dims.len()];
                    let v = self.splat_const(depth, x, &vec![1; dims.len()], dt)?;
                    Blk { v, dims, dt, depth }
                }
                n if n.starts_with("ew.") => {
                    let mut xs = Vec::new();
                    for o in &op.operands {
                        xs.push(env.get(o).cloned().ok_or("an operand defined later")?);
                    }
                    let mut pre: Vec<(Blk<'c, 'm>, bool)> = xs
                        .iter()
                        .cloned()
                        .zip(op.operands.iter().map(|o| unit.contains(o)))
                        .collect();
                    if n == "ew.mul" && dt == DType::F32 {
                        // A product's operands without their broadcasts
                        // (see [`Em::unbroadcast`]).
                        for (x, _) in pre.iter_mut() {
                            *x = self.unbroadcast(x)?;
                        }
                    }
                    if n == "ew.exp" && dt == DType::F32 {
                        if let Some((a, b)) = op.operands.first().and_then(|x| diffs.get(x)) {
                            let (a, b) = (a.clone(), b.clone());
                            // A scaled block's scale folds into log2(e).
                            let (a, c) = match self.scaled.get(&raw(a.v)).cloned() {
                                Some((base, c)) => (
                                    Blk {
                                        depth: a.depth,
                                        ..base
                                    },
                                    c,
                                ),
                                None => (a, 1.0),
                            };
                            let y = self.exp2_of_difference(a, c, b, depth)?;
                            env.insert(op.result, y);
                            continue;
                        }
                    }
                    if n == "ew.sub" && dt == DType::F32 && xs.len() == 2 {
                        diffs.insert(op.result, (xs[0].clone(), xs[1].clone()));
                    }
                    let xs = self.broadcast_all(xs, depth)?;
                    let outer = n == "ew.mul"
                        && pre.len() == 2
                        && pre.iter().all(|(x, _)| x.shape() != xs[0].shape());
                    let y = self.pointwise_blocks(n, &op.attrs, xs, dt)?;
                    if outer && y.dt == DType::F32 {
                        self.prods.push((y.v, pre[0].clone(), pre[1].clone()));
                    }
                    y
                }
                other => {
                    return Err(format!(
                        "`{other}` in @{fname} (not covered by the TTIR path)"
                    ))
                }
            };
            env.insert(op.result, b);
        }
        let mut out = Vec::new();
        for x in &g.returns {
            let b = env.get(x).ok_or("a result defined nowhere")?;
            out.push(self.cast(b, DType::F32)?);
        }
        Ok(out)
    }

    /// `exp(a * c - b)` in f32 as `exp2(a * (c * log2(e)) - b * log2(e))`,
    /// each product at its operand's own shape (a row's maximum once per
    /// row).
    fn exp2_of_difference(
        &mut self,
        a: Blk<'c, 'm>,
        c: f64,
        b: Blk<'c, 'm>,
        depth: usize,
    ) -> R<Blk<'c, 'm>> {
        let mut scaled = Vec::new();
        for (x, k) in [(a, c), (b, 1.0)] {
            let x = self.cast(&x, DType::F32)?;
            let shape = x.shape();
            let l = self.splat_const(depth, k * std::f64::consts::LOG2_E, &shape, DType::F32)?;
            let tf = ty_text(&shape, dtype_name(DType::F32));
            let v = self.val(depth, "arith.mulf", &[x.v, l], &tf, &[])?;
            scaled.push(self.with(&x, v, DType::F32));
        }
        let xs = self.broadcast_all(scaled, depth)?;
        let d = self.pointwise_blocks("ew.sub", &indexmap::IndexMap::new(), xs, DType::F32)?;
        let tf = ty_text(&d.shape(), dtype_name(DType::F32));
        let v = self.val(depth, "math.exp2", &[d.v], &tf, &[])?;
        Ok(self.with(&d, v, DType::F32))
    }

    /// Merge reducer states `a` and `b` (blocks of one shape, f32 or an
    /// integer reduction's type) at `depth`.
    pub(super) fn combine(
        &mut self,
        r: &Attr,
        a: &[Blk<'c, 'm>],
        b: &[Blk<'c, 'm>],
        depth: usize,
    ) -> R<Vec<Blk<'c, 'm>>> {
        let Attr::Term(name, args) = r else {
            return Err(format!("malformed reducer `{r}`"));
        };
        match name.as_str() {
            "red.sum" | "red.max" | "red.min" if args.is_empty() => {
                let (x, y) = (
                    a.first().ok_or("no state")?,
                    b.first().ok_or("no state")?,
                );
                let (op, _) = leaf_reducer_on(name, x.dt).ok_or("malformed reducer")?;
                // States of one shape, or one unit where the other is whole.
                let xy = self.broadcast_all(vec![x.clone(), y.clone()], depth)?;
                let (x, y) = (&xy[0], &xy[1]);
                let elt = dtype_name(x.dt);
                let fused = match name.as_str() {
                    "red.sum" if x.dt == DType::F32 => match self.dot_into(depth, x.v, y.v, &x.shape())? {
                        Some(v) => Some(v),
                        None => self.dot_into(depth, y.v, x.v, &x.shape())?,
                    },
                    _ => None,
                };
                let v = match fused {
                    Some(v) => v,
                    None => self.val(depth, op, &[x.v, y.v], &ty_text(&x.shape(), elt), &[])?,
                };
                Ok(vec![Blk {
                    v,
                    dims: x.dims.clone(),
                    dt: x.dt,
                    depth,
                }])
            }
            "red.prod" => {
                let mut out = Vec::new();
                let (mut ra, mut rb) = (a, b);
                for (_, c) in args {
                    let n = arity(c, &self.sigs).ok_or("malformed product")?.states;
                    let (ha, ta) = ra.split_at(n.min(ra.len()));
                    let (hb, tb) = rb.split_at(n.min(rb.len()));
                    out.extend(self.combine(c, ha, hb, depth)?);
                    (ra, rb) = (ta, tb);
                }
                Ok(out)
            }
            "red.repair" => {
                // s = p(s1, s2); each consumer state repaired to s by h,
                // then merged.
                let (p, c, _, h) = repair_parts(args).ok_or("malformed repair")?;
                let np = arity(p, &self.sigs).ok_or("malformed repair")?.states;
                let (s1, c1) = a.split_at(np.min(a.len()));
                let (s2, c2) = b.split_at(np.min(b.len()));
                // Tile states already at the merged maximum (rebased on the
                // accumulator `s1`, see [`Em::tile_reduce_at`]): the merge's
                // maximum is theirs, and their repair is the identity.
                if let ([x1], [x2]) = (s1, s2) {
                    if self
                        .rebased
                        .iter()
                        .any(|(r, acc)| made_from(x2.v, *r) && *acc == x1.v)
                    {
                        let s = s2.to_vec();
                        let args1: Vec<_> = c1.iter().chain(s1).chain(&s).cloned().collect();
                        let c1 = self.inline(h, args1, depth, None)?;
                        let cs = self.combine(c, &c1, c2, depth)?;
                        return Ok(s.into_iter().chain(cs).collect());
                    }
                }
                let s = self.combine(p, s1, s2, depth)?;
                let args1: Vec<_> = c1.iter().chain(s1).chain(&s).cloned().collect();
                let args2: Vec<_> = c2.iter().chain(s2).chain(&s).cloned().collect();
                let c1 = self.inline(h, args1, depth, None)?;
                let c2 = self.inline(h, args2, depth, None)?;
                let cs = self.combine(c, &c1, &c2, depth)?;
                Ok(s.into_iter().chain(cs).collect())
            }
            _ => Err(format!(
                "reducer `{r}` (not covered by the TTIR path; sum, max, min, their products and repairs are)"
            )),
        }
    }
}

/// Whether block value `v` is `m` under broadcasts, unit dims and
/// reshapes.
fn made_from(v: Value<'_, '_>, m: Value<'_, '_>) -> bool {
    use melior::ir::ValueLike;
    let target = m.to_raw().ptr;
    let mut v = v;
    loop {
        if v.to_raw().ptr == target {
            return true;
        }
        let Ok(r) = melior::ir::operation::OperationResult::try_from(v) else {
            return false;
        };
        let op = r.owner();
        let Ok(name) = op.name().as_string_ref().as_str().map(str::to_string) else {
            return false;
        };
        match (name.as_str(), op.operand(0)) {
            ("tt.broadcast" | "tt.expand_dims" | "tt.reshape", Ok(x)) => v = x,
            _ => return false,
        }
    }
}
