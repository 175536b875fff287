//! The op table of the kernel emitter: how each op of a kernel body is
//! emitted, and the Triton expressions of pointwise ops.

use super::*;

/// The Triton expression of a pointwise op over operand expressions.
pub(super) fn pointwise(
    op: &str,
    attrs: &indexmap::IndexMap<String, Attr>,
    a: &[String],
    dt: DType,
) -> Result<String, String> {
    let x = |i: usize| a[i].clone();
    let f32 = |i: usize| format!("({}).to(tl.float32)", a[i]);
    let back = |e: String| format!("({e}).to({})", tl_dtype(dt));
    // bf16 arithmetic is computed in f32 and rounded once (the same result:
    // f32 holds the exact sum, difference or product of two bf16 values
    // closely enough to round correctly), as Inductor does; Triton's CPU
    // interpreter computes bf16 arithmetic wrongly.
    let wide = dt == DType::BF16;
    let arith = |e: String| if wide { back(e) } else { e };
    let y = |i: usize| if wide { f32(i) } else { x(i) };
    Ok(match op {
        "ew.add" => arith(format!("{} + {}", y(0), y(1))),
        "ew.sub" => arith(format!("{} - {}", y(0), y(1))),
        "ew.mul" => arith(format!("{} * {}", y(0), y(1))),
        "ew.div" => arith(format!("{} / {}", y(0), y(1))),
        "ew.pow" => back(format!("tl.exp({} * tl.log({}))", f32(1), f32(0))),
        "ew.max" => arith(format!("tl.maximum({}, {})", y(0), y(1))),
        "ew.min" => arith(format!("tl.minimum({}, {})", y(0), y(1))),
        "ew.neg" => arith(format!("-({})", y(0))),
        "ew.abs" => arith(format!("tl.abs({})", y(0))),
        "ew.exp" => back(format!("tl.exp({})", f32(0))),
        "ew.log" => back(format!("tl.log({})", f32(0))),
        "ew.sqrt" => back(format!("tl.sqrt({})", f32(0))),
        "ew.rsqrt" => back(format!("tl.rsqrt({})", f32(0))),
        "ew.sigmoid" => back(format!("tl.sigmoid({})", f32(0))),
        "ew.tanh" => back(format!("2.0 * tl.sigmoid(2.0 * {}) - 1.0", f32(0))),
        "ew.erf" => back(format!("tl.erf({})", f32(0))),
        "ew.select" => format!("tl.where({}, {}, {})", x(0), x(1), x(2)),
        "ew.cast" => back(x(0)),
        "ew.cmp" => {
            let p = match attrs.get("pred").and_then(Attr::as_word) {
                Some("lt") => "<",
                Some("le") => "<=",
                Some("gt") => ">",
                Some("ge") => ">=",
                Some("eq") => "==",
                Some("ne") => "!=",
                _ => return Err("ew.cmp without a predicate".into()),
            };
            format!("{} {p} {}", x(0), x(1))
        }
        other => match efir_dialect_ew::expand::expansion(other) {
            // An op without a Triton function of its own, through the ops
            // its dialect writes it with, in f32, rounded once.
            Some(steps) => back(expanded(steps, &(0..a.len()).map(f32).collect::<Vec<_>>())?),
            None => return Err(format!("no Triton lowering for `{other}`")),
        },
    })
}

/// The f32 expression of an expansion (`efir_dialect_ew::expand`) over the
/// f32 operand expressions `xs`.
fn expanded(steps: &[efir_dialect_ew::expand::Step], xs: &[String]) -> Result<String, String> {
    use efir_dialect_ew::expand::Arg;
    let mut v: Vec<String> = Vec::with_capacity(steps.len());
    for s in steps {
        let args: Vec<String> = s
            .args
            .iter()
            .map(|a| match a {
                Arg::Operand(i) => xs[*i].clone(),
                Arg::Step(i) => v[*i].clone(),
                Arg::Const(c) => format!("{c:?}"),
            })
            .collect();
        let mut attrs = indexmap::IndexMap::new();
        if let Some(p) = s.pred {
            attrs.insert("pred".to_string(), Attr::Word(p.to_string()));
        }
        v.push(format!("({})", pointwise(s.op, &attrs, &args, DType::F32)?));
    }
    v.pop().ok_or_else(|| "an empty expansion".to_string())
}

impl<'a> KernelEmitter<'_, 'a> {
    /// The op defining `v`, `v`'s type and its rank (for the op methods
    /// below).
    fn def_of(&self, v: ValueId) -> Result<(&'a efir_ir::Op, Type, usize), String> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let rt = f.ty(v).clone();
        let rank = extents(&rt).len();
        Ok((op, rt, rank))
    }
}

impl KernelEmitter<'_, '_> {
    pub(super) fn emit_op(&mut self, v: ValueId, lay: &Layout) -> Result<Val, String> {
        let f = self.p.func;
        let Some(i) = self.p.def[v.index()] else {
            return self.load(v, lay);
        };
        if let (Some((g, l)), Some(Fact::Mask { i: di, j: dj })) =
            (&self.unmasked, self.facts[v.index()])
        {
            if lay.get(di) == Some(&Some(g.clone())) && lay.get(dj) == Some(&Some(l.clone())) {
                // A causal mask on a tile wholly below the diagonal: all
                // true (a block of single elements, at the loop's depth).
                let t = f.ty(v).as_tensor().ok_or("expected a tensor")?.clone();
                let exts: Vec<Extent> = t.shape.iter().map(Extent::of).collect();
                let (dims, _) = self.dims(&exts, lay)?;
                let depth = self.top();
                let var = self.fresh("t");
                let ones = vec!["1"; dims.len()].join(", ");
                self.line(depth, format!("{var} = tl.full([{ones}], 1, tl.int1)"));
                self.set_units(&var, vec![true; dims.len()]);
                return Ok(Val::T(Blk {
                    var,
                    dims,
                    dtype: t.dtype,
                    depth,
                }));
            }
        }
        let op = &f.ops[i];
        let name = op.name.as_str();
        match name {
            "par.partition" | "par.replicate" | "par.combine" => self.emit(op.operands[0], lay),
            "tensor.tuple" => self.emit_tuple(v, lay),
            "tensor.get" => self.emit_get(v, lay),
            "tensor.full" => self.emit_full(v, lay),
            "tensor.iota" => self.emit_iota(v, lay),
            "tensor.broadcast" => self.emit_broadcast(v, lay),
            "tensor.transpose" => self.emit_transpose(v, lay),
            "tensor.reshape" => self.emit_reshape(v, lay),
            "tensor.reduce" => self.reduce(v, lay),
            "tensor.slice" => self.slice(v, lay),
            "tensor.concat" => self.concat(v, lay),
            "par.reduce" => self.par_reduce(v, lay),
            "tile.matmul" | "tensor.matmul" => self.matmul(v, lay),
            _ if name.starts_with("ew.") => self.emit_pointwise(v, lay),
            other => Err(format!("no Triton lowering for `{other}` inside a kernel")),
        }
    }

    /// A pointwise op (`ew.*`) in a kernel: its operands' blocks (a
    /// stretched unit dim read as a unit), the op's Triton expression.
    fn emit_pointwise(&mut self, v: ValueId, lay: &Layout) -> Result<Val, String> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let name = op.name.as_str();
        let rt = f.ty(v).clone();
        let rank = extents(&rt).len();
        let mut args = Vec::new();
        let mut vars = Vec::new();
        let mut raw = Vec::new();
        let mut us = Vec::new();
        let mut depth = 0;
        let er = extents(&rt);
        for o in &op.operands {
            let ea = extents(f.ty(*o));
            let k = er.len() - ea.len();
            let la: Layout = (0..ea.len())
                .map(|j| {
                    if ea[j] == Extent::N(1) && er[j + k] != Extent::N(1) {
                        None
                    } else {
                        lay[j + k].clone()
                    }
                })
                .collect();
            let x = self.block(*o, &la)?;
            depth = depth.max(x.depth);
            // An operand's stretched unit-extent dims are unit too.
            let mut u = self.units(&x.var, ea.len());
            for (j, uj) in u.iter_mut().enumerate() {
                *uj |= ea[j] == Extent::N(1) && er[j + k] != Extent::N(1);
            }
            us.push((ea.len(), u));
            raw.push(x.var.clone());
            args.push(expand(&x.var, x.dims.len(), rank));
            vars.push(args.last().cloned().unwrap_or_default());
        }
        let dt = rt.as_tensor().ok_or("expected a tensor")?.dtype;
        // A 16-bit value that the kernel rounded from f32 (a matmul's
        // result) and widens again is read before its rounding: the
        // intermediate stays f32 inside the kernel, as Inductor keeps it
        // (more accurate, not less; a matrix product that takes the widened
        // value rounds it to 16 bits again, as before). Attention's scores
        // (Q·K^T in f16, then f32 for the softmax) skip two conversions per
        // element.
        if name == "ew.cast" && matches!(dt, DType::F32 | DType::F64) && us[0].0 == rank {
            if let Some(w) = self.unrounded.get(&vars[0]).cloned() {
                args[0] = w.clone();
                vars[0] = w;
            }
        }
        let e = pointwise(name, &op.attrs, &args, dt)?;
        let y = self.result(v, lay, e, depth)?;
        if let Val::T(b) = &y {
            self.set_units(&b.var, pointwise_units(rank, &us));
            if name == "ew.cast" && us[0].0 == rank {
                let from = f.ty(op.operands[0]).as_tensor().map(|t| t.dtype);
                if let Some(from) = from {
                    self.note_copy(&b.var, &vars[0], from, dt);
                }
            }
            if name == "ew.mul" && us.iter().all(|(ra, _)| *ra == rank) {
                self.note_product(&b.var, &vars[0], &vars[1]);
            }
            if dt == DType::F32 {
                let full = us.iter().map(|(ra, _)| *ra == rank).collect::<Vec<_>>();
                if let Some(sc) = self.scaled_result(name, &raw, &args, &full) {
                    self.scaled.insert(b.var.clone(), sc);
                }
            }
        }
        Ok(y)
    }

    /// Where the f32 pointwise op `name` over blocks `raw` (their
    /// expressions `args` at the result's rank; `full[i]` where operand `i`
    /// has the result's rank) is a block times a positive constant: its base
    /// expression and the constant (see [`KernelEmitter::scaled`]). A
    /// product by a scalar constant, a cast of such a block to f32, and the
    /// causal mask's `select(keep, x, -inf)` of one (`-inf` stays `-inf`
    /// scaled by a positive constant).
    fn scaled_result(
        &self,
        name: &str,
        raw: &[String],
        args: &[String],
        full: &[bool],
    ) -> Option<(String, f64)> {
        let pos = |v: &String| {
            self.consts
                .get(v)
                .copied()
                .filter(|c| c.is_finite() && *c > 0.0)
        };
        let ninf = |v: &String| self.consts.get(v).copied() == Some(f64::NEG_INFINITY);
        match (name, raw.len()) {
            ("ew.mul", 2) => [(0, 1), (1, 0)].into_iter().find_map(|(i, j)| {
                let c = pos(&raw[j])?;
                full[i].then(|| (args[i].clone(), c))
            }),
            ("ew.cast", 1) if full[0] => self.scaled.get(&raw[0]).cloned(),
            ("ew.select", 3) => {
                let (keep, x, y) = (&args[0], &raw[1], &raw[2]);
                if full[1] && ninf(y) {
                    let (b, c) = self.scaled.get(x)?.clone();
                    Some((format!("tl.where({keep}, {b}, {})", args[2]), c))
                } else if full[2] && ninf(x) {
                    let (b, c) = self.scaled.get(y)?.clone();
                    Some((format!("tl.where({keep}, {}, {b})", args[1]), c))
                } else {
                    None
                }
            }
            _ => None,
        }
    }

    /// `tensor.tuple` in a kernel (see [`KernelEmitter::emit_op`]).
    fn emit_tuple(&mut self, v: ValueId, lay: &Layout) -> Result<Val, String> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let mut out = Vec::new();
        for o in &op.operands {
            if extents(f.ty(*o)).len() != lay.len() {
                return Err("a tuple of values of different ranks inside a kernel".into());
            }
            out.push(self.emit(*o, lay)?);
        }
        Ok(Val::Tup(out))
    }

    /// `tensor.get` in a kernel (see [`KernelEmitter::emit_op`]).
    fn emit_get(&mut self, v: ValueId, lay: &Layout) -> Result<Val, String> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let idx = op.attrs.get("index").and_then(Attr::as_int).unwrap_or(0) as usize;
        match self.emit(op.operands[0], lay)? {
            Val::Tup(fs) => fs
                .get(idx)
                .cloned()
                .ok_or_else(|| "tensor.get out of range".into()),
            Val::T(b) => Ok(Val::T(b)),
        }
    }

    /// `tensor.full` in a kernel (see [`KernelEmitter::emit_op`]).
    fn emit_full(&mut self, v: ValueId, lay: &Layout) -> Result<Val, String> {
        let (op, rt, _) = self.def_of(v)?;
        let t = rt.as_tensor().ok_or("expected a tensor")?;
        let value = typed_literal(op.attrs.get("value").unwrap_or(&Attr::Int(0)), t.dtype);
        let exts: Vec<Extent> = t.shape.iter().map(Extent::of).collect();
        let (dims, depth) = self.dims(&exts, lay)?;
        let var = self.fresh("c");
        if dims.is_empty() && matches!(t.dtype, DType::F32 | DType::F64) {
            if let Some(c) = op.attrs.get("value").and_then(Attr::as_f64) {
                self.consts.insert(var.clone(), c);
            }
        }
        self.line(
            depth,
            format!(
                "{var} = tl.full({}, {value}, {})",
                shape_list(&dims),
                tl_dtype(t.dtype)
            ),
        );
        Ok(Val::T(Blk {
            var,
            dims,
            dtype: t.dtype,
            depth,
        }))
    }

    /// `tensor.iota` in a kernel (see [`KernelEmitter::emit_op`]).
    fn emit_iota(&mut self, v: ValueId, lay: &Layout) -> Result<Val, String> {
        let (op, rt, _) = self.def_of(v)?;
        let d = op.attrs.get("dim").and_then(Attr::as_int).unwrap_or(0) as usize;
        let t = rt.as_tensor().ok_or("expected a tensor")?;
        let exts: Vec<Extent> = t.shape.iter().map(Extent::of).collect();
        let (dims, depth) = self.dims(&exts, lay)?;
        // Unit along every dim but its own (see [`bcast`]).
        let e = format!(
            "({}).to({})",
            along(&dims[d].offs, d, dims.len()),
            tl_dtype(t.dtype)
        );
        let r = dims.len();
        let x = self.result(v, lay, e, depth)?;
        if let Val::T(b) = &x {
            self.set_units(&b.var, (0..r).map(|j| j != d).collect());
        }
        Ok(x)
    }

    /// `tensor.broadcast` in a kernel (see [`KernelEmitter::emit_op`]).
    fn emit_broadcast(&mut self, v: ValueId, lay: &Layout) -> Result<Val, String> {
        let f = self.p.func;
        let (op, rt, rank) = self.def_of(v)?;
        let a = op.operands[0];
        let ea = extents(f.ty(a));
        let er = extents(&rt);
        let k = er.len() - ea.len();
        let la: Layout = (0..ea.len())
            .map(|j| {
                if ea[j] == Extent::N(1) && er[j + k] != Extent::N(1) {
                    None
                } else {
                    lay[j + k].clone()
                }
            })
            .collect();
        let x = self.block(a, &la)?;
        let (_, depth) = self.dims(&er, lay)?;
        // Lazy (see [`bcast`]): unit along the new and the stretched
        // dims.
        let ux = self.units(&x.var, ea.len());
        let u: Units = (0..rank)
            .map(|j| j < k || ux[j - k] || (ea[j - k] == Extent::N(1) && er[j] != Extent::N(1)))
            .collect();
        let e = expand(&x.var, x.dims.len(), rank);
        let y = self.result(v, lay, e, depth.max(x.depth))?;
        if let Val::T(b) = &y {
            self.set_units(&b.var, u);
            if x.dims.len() == ea.len() {
                let new = rank - ea.len();
                self.note_view(&b.var, &x.var, |m| {
                    std::iter::repeat_n(None, new)
                        .chain(m.iter().copied())
                        .collect()
                });
            }
        }
        Ok(y)
    }

    /// `tensor.transpose` in a kernel (see [`KernelEmitter::emit_op`]).
    fn emit_transpose(&mut self, v: ValueId, lay: &Layout) -> Result<Val, String> {
        let (op, _, rank) = self.def_of(v)?;
        let perm = op
            .attrs
            .get("perm")
            .and_then(Attr::as_int_array)
            .ok_or("transpose without perm")?;
        let mut la: Layout = vec![None; rank];
        for (k, p) in perm.iter().enumerate() {
            la[*p as usize] = lay[k].clone();
        }
        let x = self.block(op.operands[0], &la)?;
        let ux = self.units(&x.var, rank);
        let u: Units = perm.iter().map(|p| ux[*p as usize]).collect();
        let ps: Vec<String> = perm.iter().map(|p| p.to_string()).collect();
        let e = if rank == 2 && perm == [1, 0] {
            format!("tl.trans({})", x.var)
        } else {
            format!("tl.permute({}, ({},))", x.var, ps.join(", "))
        };
        let y = self.result(v, lay, e, x.depth)?;
        if let Val::T(b) = &y {
            self.set_units(&b.var, u);
            self.note_view(&b.var, &x.var, |m| {
                perm.iter()
                    .map(|p| m.get(*p as usize).copied().flatten())
                    .collect()
            });
        }
        Ok(y)
    }

    /// `tensor.reshape` in a kernel (see [`KernelEmitter::emit_op`]).
    fn emit_reshape(&mut self, v: ValueId, lay: &Layout) -> Result<Val, String> {
        let f = self.p.func;
        let (op, rt, _) = self.def_of(v)?;
        let a = op.operands[0];
        let ea = extents(f.ty(a));
        let er = extents(&rt);
        let nu_a: Vec<usize> = (0..ea.len()).filter(|j| ea[*j] != Extent::N(1)).collect();
        let nu_r: Vec<usize> = (0..er.len()).filter(|j| er[*j] != Extent::N(1)).collect();
        if nu_a.len() != nu_r.len() || nu_a.iter().zip(&nu_r).any(|(x, y)| ea[*x] != er[*y]) {
            // A view of a buffer is loaded through index arithmetic.
            if let Some(r) = self.view_load(v, lay) {
                return r;
            }
            // (A view is read through only over static extents.)
            if let Some(Extent::Sym(s)) = ea.iter().chain(&er).find(|e| matches!(e, Extent::Sym(_)))
            {
                return Err(format!(
                    "`%{}` is a reshape that merges or splits dims inside a kernel, of a value with the symbolic extent |@{s}| (a view is read through only over static extents)",
                    f.value(v).name
                ));
            }
            return Err("a reshape that merges or splits dims inside a kernel".into());
        }
        // Unit dims kept by the reshape (see [`crate::kept_units`]).
        let units_kept = crate::kept_units(
            &ea.iter().map(|e| *e == Extent::N(1)).collect::<Vec<_>>(),
            &er.iter().map(|e| *e == Extent::N(1)).collect::<Vec<_>>(),
        );
        let mut la: Layout = vec![None; ea.len()];
        for (x, y) in nu_a
            .iter()
            .copied()
            .zip(nu_r.iter().copied())
            .chain(units_kept.iter().copied())
        {
            la[x] = lay[y].clone();
        }
        let x = self.block(a, &la)?;
        let (dims, depth) = self.dims(&er, lay)?;
        let ux = self.units(&x.var, ea.len());
        // A unit dim of the result that is tiled (a row padded to a
        // 16-row dot block) holds one element: it is a lazy broadcast.
        let mut u: Units = (0..er.len())
            .map(|j| er[j] == Extent::N(1) && lay[j].is_some())
            .collect();
        for (x, y) in nu_a
            .iter()
            .copied()
            .zip(nu_r.iter().copied())
            .chain(units_kept.iter().copied())
        {
            if lay[y].is_some() || er[y] != Extent::N(1) {
                u[y] = ux[x];
            }
        }
        // Only unit dims inserted: `x[:, None]` broadcasts in the
        // value's own layout, where `tl.reshape` can cost a layout
        // conversion wherever the result is used (measured on the
        // H200: a row scale reshaped before a K loop and used in it
        // made the loop 2.7x slower). Only up to two dims: Triton 3.6
        // failed an assertion (LinearLayout::reshapeOuts) compiling an
        // attention kernel that indexed a 4-D block so and reshaped
        // it for a product.
        let view = |x: &str| {
            if !ea.is_empty() && nu_a.len() == ea.len() && er.len() > ea.len() && er.len() <= 2 {
                let idx: Vec<&str> = (0..er.len())
                    .map(|j| if nu_r.contains(&j) { ":" } else { "None" })
                    .collect();
                if x.chars().all(|ch| ch.is_alphanumeric() || ch == '_') {
                    format!("{x}[{}]", idx.join(", "))
                } else {
                    format!("({x})[{}]", idx.join(", "))
                }
            } else {
                format!("tl.reshape({x}, {})", real_shape(&dims, &u))
            }
        };
        let e = view(&x.var);
        let scaled = self.scaled.get(&x.var).map(|(b, c)| (view(b), *c));
        let y = self.result(v, lay, e, depth.max(x.depth))?;
        if let Val::T(b) = &y {
            if let Some(sc) = scaled {
                self.scaled.insert(b.var.clone(), sc);
            }
            self.set_units(&b.var, u);
            let n = er.len();
            self.note_view(&b.var, &x.var, |m| {
                let mut out = vec![None; n];
                for (a, r) in nu_a.iter().zip(&nu_r) {
                    out[*r] = m.get(*a).copied().flatten();
                }
                out
            });
        }
        Ok(y)
    }
}
