//! Matmuls inside a kernel: operand tilings, `tl.dot` with fp32
//! accumulation (or multiply-and-sum for blocks under 16), the K loop the
//! emitter adds to a long unsplit K, and the element facts that let a causal
//! loop stop early.

use super::*;

impl KernelEmitter<'_, '_> {
    /// Whether a reduction with reducer `r` of value `x` adds matmul tiles
    /// into its accumulator directly: a sum of a `tile.matmul` (or
    /// `tensor.matmul`) computed in the kernel.
    pub(super) fn dot_accumulates(&self, r: &Attr, x: ValueId) -> bool {
        let is_sum = matches!(r, Attr::Term(n, _) if n == "red.sum");
        let f = self.p.func;
        is_sum
            && !self.p.buffer[x.index()]
            && self.p.def[x.index()]
                .is_some_and(|i| matches!(f.ops[i].name.as_str(), "tile.matmul" | "tensor.matmul"))
            && f.ty(x).as_tensor().is_some()
    }

    /// The tilings of a matmul's operands for its result in `lay`: rows and
    /// columns from the request, the reduced dim K as the operands are split.
    pub(super) fn matmul_layouts(
        &self,
        v: ValueId,
        lay: &Layout,
    ) -> Result<(Layout, Layout), String> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let (a, b) = (op.operands[0], op.operands[1]);
        let (ea, eb, er) = (extents(f.ty(a)), extents(f.ty(b)), extents(f.ty(v)));
        let (ra, rb, r) = (ea.len(), eb.len(), er.len());
        let side = |e: &[Extent], own: Layout, keep: usize, out: usize| -> Layout {
            let k = r - e.len();
            let mut l: Layout = (0..e.len())
                .map(|j| {
                    if j + 2 >= e.len() || (e[j] == Extent::N(1) && er[j + k] != Extent::N(1)) {
                        None
                    } else {
                        lay[j + k].clone()
                    }
                })
                .collect();
            l[keep] = own[keep].clone();
            l[out] = lay[if out + 2 == e.len() { r - 2 } else { r - 1 }].clone();
            l
        };
        Ok((
            side(&ea, layout_of(f.ty(a)), ra - 1, ra - 2),
            side(&eb, layout_of(f.ty(b)), rb - 2, rb - 1),
        ))
    }

    /// Where value `y` in tiling `lay` is, in a loop over axis `l`, a block
    /// whose reducer states are constants once the `l` tile starts after the
    /// tile of a bound axis `G` ends (see [`causal`]): `G` and the states.
    /// Unknown states are `None`.
    pub(super) fn tile_states(
        &self,
        y: ValueId,
        lay: &Layout,
        l: &str,
    ) -> Option<(String, Vec<Option<f64>>)> {
        if let Some(Fact::Const { c, i, j }) = self.facts[y.index()] {
            let g = lay.get(i)?.clone();
            if lay.get(j)?.as_deref() == Some(l) {
                if let Some(g) = g.filter(|g| g != l && self.bound.contains_key(g)) {
                    return Some((g, vec![Some(c)]));
                }
            }
        }
        let f = self.p.func;
        let op = &f.ops[self.p.def[y.index()]?];
        let name = op.name.as_str();
        match name {
            "par.partition" | "par.replicate" | "par.combine" => {
                self.tile_states(op.operands[0], lay, l)
            }
            "tensor.reduce" => {
                let r = op.attrs.get("reducer")?;
                let d = op.attrs.get("dim").and_then(Attr::as_int)? as usize;
                let x = op.operands[0];
                let la = self.reduce_input_layout(x, lay, d);
                let (g, cs) = self.tile_states(x, &la, l)?;
                Some((g, causal::reduce_const(r, &cs, self.p.module, &self.sigs)?))
            }
            "tile.matmul" | "tensor.matmul" => {
                let (la, lb) = self.matmul_layouts(y, lay).ok()?;
                [(op.operands[0], la), (op.operands[1], lb)]
                    .into_iter()
                    .find_map(|(x, lx)| {
                        self.tile_states(x, &lx, l)
                            .filter(|(_, cs)| cs.as_slice() == [Some(0.0)])
                    })
            }
            "tensor.tuple" => {
                // Fields without a mask are unknown (finite) values.
                let mut g0: Option<String> = None;
                let mut out = Vec::new();
                for o in &op.operands {
                    match self.tile_states(*o, lay, l) {
                        Some((g, cs)) => {
                            if g0.as_ref().is_some_and(|h| *h != g) {
                                return None;
                            }
                            g0 = Some(g);
                            out.extend(cs);
                        }
                        None => out.extend(vec![None; f.ty(*o).leaves().len()]),
                    }
                }
                Some((g0?, out))
            }
            _ if name.starts_with("ew.") && op.operands.len() == 1 => {
                let x = op.operands[0];
                if extents(f.ty(x)).len() != lay.len() {
                    return None;
                }
                let (g, cs) = self.tile_states(x, lay, l)?;
                let c = *cs.first()?;
                let c = if name == "ew.cast" {
                    c.and_then(causal::cast_exact)
                } else {
                    causal::abstract_op(name, &op.attrs, &[c]).filter(|c| !c.is_nan())
                };
                Some((g, vec![c]))
            }
            _ => None,
        }
    }

    pub(super) fn matmul(&mut self, v: ValueId, lay: &Layout) -> Result<Val, String> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        // Output tiles of a matmul are independent: the result is computed
        // in the tiling asked for (rows and columns from the request, the
        // reduced dim K as the operands are split).
        let (a, b) = (op.operands[0], op.operands[1]);
        let (ea, eb, er) = (extents(f.ty(a)), extents(f.ty(b)), extents(f.ty(v)));
        let (ra, rb) = (ea.len(), eb.len());
        let (mut la, mut lb) = self.matmul_layouts(v, lay)?;
        let dt = f.ty(v).as_tensor().ok_or("expected a tensor")?.dtype;
        // A long K that the program does not split is split here: a loop
        // over K tiles accumulating in fp32 (the plan registered its axis).
        let auto = match ea.last() {
            Some(Extent::N(k)) => format!("r{k}"),
            Some(Extent::Sym(s)) => format!("r_{s}"),
            _ => String::new(),
        };
        if la[ra - 1].is_none()
            && lb[rb - 2].is_none()
            && self.p.axes.contains_key(&auto)
            && !self.bound.contains_key(&auto)
        {
            let outer = self.top();
            let (dims, _) = self.dims(&er, lay)?;
            let acc = self.fresh("acc");
            self.declare_acc(outer, &acc, &dims, "0.0");
            let inner = self.open_loop(&auto, None);
            la[ra - 1] = Some(auto.clone());
            lb[rb - 2] = Some(auto.clone());
            self.matmul_product(v, &la, &lb, lay, Some((&acc, inner)))?;
            self.close_loop(&auto)?;
            return self.result(v, lay, format!("({acc}).to({})", tl_dtype(dt)), outer);
        }
        let (e, depth) = self.matmul_product(v, &la, &lb, lay, None)?;
        if !matches!(dt, DType::F16 | DType::BF16) {
            return self.result(v, lay, format!("({e}).to({})", tl_dtype(dt)), depth);
        }
        // The f32 product is kept beside its rounding, for a widening cast
        // that reads the result (see [`KernelEmitter::emit_pointwise`]).
        let w = self.fresh("w");
        self.line(depth, format!("{w} = {e}"));
        let y = self.result(v, lay, format!("({w}).to({})", tl_dtype(dt)), depth)?;
        if let Val::T(b) = &y {
            self.unrounded.insert(b.var.clone(), w);
        }
        Ok(y)
    }

    /// Declare the f32 accumulator `var` of a matmul (block `dims`,
    /// initial value `init`) at `depth`.
    pub(super) fn declare_acc(&mut self, depth: usize, var: &str, dims: &[BD], init: &str) {
        self.acc_decls.insert(
            var.to_string(),
            AccDecl {
                depth,
                line: self.scopes[depth].lines.len(),
                dims: dims.iter().map(|d| d.size.clone()).collect(),
                init: init.to_string(),
                flat: None,
            },
        );
        self.line(
            depth,
            format!("{var} = tl.full({}, {init}, tl.float32)", shape_list(dims)),
        );
    }

    /// Accumulator `acc` (updated at depth `d`) as a matrix: where its
    /// block is `[1, .., 1, M, N]` and declared by [`Self::declare_acc`]
    /// outside the loop, its declaration becomes the matrix variable's
    /// (returned), and `acc` is that matrix reshaped after the loop.
    fn flat_acc(&mut self, acc: &str, d: usize) -> Option<String> {
        let decl = self.acc_decls.get(acc)?.clone();
        let n = decl.dims.len();
        if n < 3 || decl.depth >= d || decl.dims[..n - 2].iter().any(|s| s != "1") {
            return None;
        }
        let flat = match &decl.flat {
            Some(f) => f.clone(),
            None => {
                let f = self.fresh("accm");
                let line = self.scopes[decl.depth].lines.get_mut(decl.line)?;
                *line = format!(
                    "{f} = tl.full([{}, {}], {}, tl.float32)",
                    decl.dims[n - 2],
                    decl.dims[n - 1],
                    decl.init
                );
                if let Some(x) = self.acc_decls.get_mut(acc) {
                    x.flat = Some(f.clone());
                }
                f
            }
        };
        // After every loop that updates it (a causal loop is two).
        let after = format!("{acc} = tl.reshape({flat}, [{}])", decl.dims.join(", "));
        let pending = self.after_loop.entry(decl.depth).or_default();
        if !pending.contains(&after) {
            pending.push(after);
        }
        Some(flat)
    }

    /// The fp32 product of the operands of matmul `v` in the given tilings
    /// (an expression of the result's block shape), and its depth. With
    /// `acc` (an fp32 accumulator of the result's block shape, and the depth
    /// of the loop that updates it), the product is added to the
    /// accumulator instead (`acc = tl.dot(a, b, acc)`: no partial product is
    /// rounded) and the expression is the accumulator.
    pub(super) fn matmul_product(
        &mut self,
        v: ValueId,
        la: &Layout,
        lb: &Layout,
        lay: &Layout,
        acc: Option<(&str, usize)>,
    ) -> Result<(String, usize), String> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let (a, b) = (op.operands[0], op.operands[1]);
        let er = extents(f.ty(v));
        let (ra, rb, r) = (la.len(), lb.len(), er.len());
        let xa = self.block(a, la)?;
        let va = xa.var.clone();
        let xa = self.full(xa);
        let xb = self.block(b, lb)?;
        let vb = xb.var.clone();
        let xb = self.full(xb);
        let depth = xa.depth.max(xb.depth);
        // Zero the K padding of both operands.
        let ka = &xa.dims[ra - 1];
        let kb = &xb.dims[rb - 2];
        let (am, bm) = if ka.even == Even::Yes && kb.even == Even::Yes {
            (xa.var.clone(), xb.var.clone())
        } else {
            let am = self.fresh("a");
            let bm = self.fresh("b");
            for l in Self::pad_lines(&am, &xa.var, ka, ra - 1, ra, "0.0") {
                self.line(depth, l);
            }
            for l in Self::pad_lines(&bm, &xb.var, kb, rb - 2, rb, "0.0") {
                self.line(depth, l);
            }
            (am, bm)
        };
        let unit_batch = |x: &Blk| x.dims[..x.dims.len() - 2].iter().all(|d| d.size == "1");
        let (m, k, n) = (
            xa.dims[ra - 2].size.clone(),
            ka.size.clone(),
            xb.dims[rb - 1].size.clone(),
        );
        let same =
            xa.dtype == xb.dtype && matches!(xa.dtype, DType::F16 | DType::BF16 | DType::F32);
        let mut sizes: Vec<String> = xa.dims[..ra - 1].iter().map(|d| d.size.clone()).collect();
        sizes.push(k.clone());
        sizes.push(n.clone());
        // An operand made in the loop from what it loads (not a view of a
        // load, nor computed before the loop).
        let made = |me: &Self, var: &str, d: usize| d == depth && !me.views.contains_key(var);
        let computed = depth > 0 && (made(self, &va, xa.depth) || made(self, &vb, xb.depth));
        self.work.push(Work {
            bytes: 2,
            source: 0.0,
            sizes,
            loops: self.loops[..depth].to_vec(),
            nest: self.nest[..depth].to_vec(),
            flops: true,
            run: None,
            computed,
        });
        let e = if unit_batch(&xa) && unit_batch(&xb) {
            // One matrix per program: drop the unit batch dims.
            // Operands that are views of loads are loaded again as matrices
            // (see [`direct`](super::direct)).
            let direct = |me: &mut Self, var: &str, r: usize, s: (&str, &str), dt: DType| {
                let (x, t) = me.direct_matrix(var, r - 2, r - 1, s.0, s.1)?;
                if t == dt {
                    return Some(x);
                }
                let c = me.fresh("c");
                me.line(depth, format!("{c} = ({x}).to({})", tl_dtype(dt)));
                Some(c)
            };
            let da = direct(self, &va, ra, (&m, &k), xa.dtype);
            let db = direct(self, &vb, rb, (&k, &n), xb.dtype);
            let a2 = match da {
                Some(x) => x,
                None if ra == 2 => am.clone(),
                None => {
                    let a2 = self.fresh("a");
                    self.line(depth, format!("{a2} = tl.reshape({am}, [{m}, {k}])"));
                    a2
                }
            };
            let b2 = match db {
                Some(x) => x,
                None if rb == 2 => bm.clone(),
                None => {
                    let b2 = self.fresh("b");
                    self.line(depth, format!("{b2} = tl.reshape({bm}, [{k}, {n}])"));
                    b2
                }
            };
            // tl.dot needs blocks of at least 16; smaller ones (a GEMV row)
            // multiply and sum. Block sizes are constexprs, so the choice is
            // made when the kernel is compiled.
            // An accumulator of unit batch dims is a matrix through the
            // loop (`acc = tl.dot(a, b, acc)`), reshaped once after it: a
            // loop-carried `[1, M, N]` block took the product out of the
            // tensor cores' layout every trip (Llama's q projection, 512 x
            // 4096 x 4096, 131.8 us on the H100 against 44.2 for the same
            // tiles with a matrix accumulator).
            let fused = match acc {
                Some((c, d)) if r == 2 => Some((c.to_string(), d)),
                Some((c, d)) => self.flat_acc(c, d).map(|f| (f, d)),
                None => None,
            };
            let fused = fused.as_ref().map(|(c, d)| (c.as_str(), *d));
            let dot = match fused {
                Some((c, _)) => format!("tl.dot({a2}, {b2}, {c})"),
                None => format!("tl.dot({a2}, {b2}, out_dtype=tl.float32)"),
            };
            let mut small = format!(
                "tl.sum(({a2}).to(tl.float32)[:, :, None] * ({b2}).to(tl.float32)[None, :, :], axis=1)"
            );
            if let Some((c, _)) = fused {
                small = format!("{c} + {small}");
            }
            let lit = |s: &str| s.parse::<u64>().ok();
            let known_small = [&m, &k, &n].iter().any(|s| lit(s).is_some_and(|x| x < 16));
            // The fused update runs every iteration of the accumulator's loop,
            // even where the operands do not depend on it.
            let at = fused.map_or(depth, |(_, d)| d);
            let prod = if !same || known_small {
                small
            } else if [&m, &k, &n].iter().all(|s| lit(s).is_some()) {
                dot
            } else {
                let t = match fused {
                    Some((c, _)) => c.to_string(),
                    None => self.fresh("mm"),
                };
                self.line(
                    at,
                    format!("if ({m} >= 16) and ({k} >= 16) and ({n} >= 16):"),
                );
                self.line(at, format!("    {t} = {dot}"));
                self.line(at, "else:".into());
                self.line(at, format!("    {t} = {small}"));
                t
            };
            if let Some((c, d)) = fused {
                if prod != c {
                    self.line(d, format!("{c} = {prod}"));
                }
                let (c, d) = acc.unwrap_or((c, d));
                return Ok((c.to_string(), d));
            }
            if r == 2 {
                prod
            } else {
                let (dims, _) = self.dims(&er, lay)?;
                format!("tl.reshape({prod}, {})", shape_list(&dims))
            }
        } else {
            let ea = expand(&format!("({am}).to(tl.float32)"), ra, r);
            let eb = expand(&format!("({bm}).to(tl.float32)"), rb, r);
            let mut ia: Vec<&str> = vec![":"; r];
            ia.push("None");
            let mut ib: Vec<&str> = vec![":"; r - 2];
            ib.extend(["None", ":", ":"]);
            format!(
                "tl.sum(({ea})[{}] * ({eb})[{}], axis={})",
                ia.join(", "),
                ib.join(", "),
                r - 1
            )
        };
        if let Some((c, d)) = acc {
            self.line(d, format!("{c} = {c} + ({e})"));
            return Ok((c.to_string(), d));
        }
        Ok((format!("({e})"), depth))
    }
}
