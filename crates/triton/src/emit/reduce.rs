//! Reductions inside a kernel: `tensor.reduce` over a block. The loops of
//! `par.reduce` are in [`super::loops`], reducer states merged and repair
//! functions inlined in [`super::reducers`].

use super::bcast::Units;
use super::*;

impl KernelEmitter<'_, '_> {
    /// The layout of operand `a` of a reduction over `d`, from the request.
    pub(super) fn reduce_input_layout(&self, a: ValueId, lay: &Layout, d: usize) -> Layout {
        let f = self.p.func;
        let mut la = lay.clone();
        let own = f.ty(a).leaves().first().and_then(|l| {
            l.state.iter().find_map(|(ax, st)| match st {
                AxisState::Part(i) if *i == d => Some(ax.clone()),
                _ => None,
            })
        });
        la.insert(d, own);
        la
    }

    pub(super) fn reduce(&mut self, v: ValueId, lay: &Layout) -> Result<Val, String> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let r = op
            .attrs
            .get("reducer")
            .ok_or("reduce without reducer")?
            .clone();
        let d = op.attrs.get("dim").and_then(Attr::as_int).unwrap_or(0) as usize;
        let a = op.operands[0];
        // The tile state a loop's accumulator asked to be rebased (see
        // [`KernelEmitter::reduce_iteration`]).
        let rebase = match self.rebase.take() {
            Some((x, acc)) if x == v => Some(acc),
            other => {
                self.rebase = other;
                None
            }
        };
        let la = self.reduce_input_layout(a, lay, d);
        let xs = self.emit(a, &la)?.blocks();
        let depth = xs.iter().map(|b| b.depth).max().unwrap_or(0);
        let states = self.tile_reduce_at(&r, &xs, d, depth, rebase.as_deref())?;
        self.finish(v, lay, states, depth)
    }

    /// Cast reducer states (f32 expressions of the result's block shape) to
    /// the result's dtypes.
    pub(super) fn finish(
        &mut self,
        v: ValueId,
        lay: &Layout,
        states: Vec<String>,
        depth: usize,
    ) -> Result<Val, String> {
        let f = self.p.func;
        let rt = f.ty(v).clone();
        let leaves: Vec<_> = rt.leaves().into_iter().cloned().collect();
        if leaves.len() != states.len() {
            return Err("reducer state count differs from the result's fields".into());
        }
        let mut out = Vec::new();
        for (l, s) in leaves.iter().zip(states) {
            let exts: Vec<Extent> = l.shape.iter().map(Extent::of).collect();
            let (dims, dd) = self.dims(&exts, lay)?;
            let depth = depth.max(dd);
            let var = self.fresh("r");
            self.line(depth, format!("{var} = ({s}).to({})", tl_dtype(l.dtype)));
            self.note_copy(&var, &s, DType::F32, l.dtype);
            let u = self.units(&s, dims.len());
            self.set_units(&var, u);
            if l.dtype == DType::F32 {
                self.copy_of.insert(var.clone(), s.clone());
            }
            out.push(Val::T(Blk {
                var,
                dims,
                dtype: l.dtype,
                depth,
            }));
        }
        Ok(if matches!(rt, Type::Tuple(_)) {
            Val::Tup(out)
        } else {
            out.pop().ok_or("no state")?
        })
    }

    /// Reduce blocks along dim `d`: the reducer's states as f32 variables.
    pub(super) fn tile_reduce(
        &mut self,
        r: &Attr,
        xs: &[Blk],
        d: usize,
        depth: usize,
    ) -> Result<Vec<String>, String> {
        self.tile_reduce_at(r, xs, d, depth, None)
    }

    /// [`KernelEmitter::tile_reduce`]; with `rebase` (the variable of a
    /// loop accumulator's running maximum), a repair reducer over a maximum
    /// computes its tile state at the merged maximum `max(rebase, tile
    /// max)` instead of the tile's own: FlashAttention-2's order. The
    /// repair's law (a state repaired from one maximum to another equals
    /// the state computed at the other) makes that the state the merge
    /// would give, and the merge then leaves it as it is (see
    /// [`KernelEmitter::combine`]): no rescaling of the tile, so the P·V
    /// update is one `tl.dot` of the unscaled probabilities into the
    /// rescaled accumulator.
    pub(super) fn tile_reduce_at(
        &mut self,
        r: &Attr,
        xs: &[Blk],
        d: usize,
        depth: usize,
        rebase: Option<&str>,
    ) -> Result<Vec<String>, String> {
        let Attr::Term(name, args) = r else {
            return Err("malformed reducer".into());
        };
        let rank = xs
            .first()
            .map(|b| b.dims.len())
            .ok_or("reduction of nothing")?;
        let bd = xs[0].dims[d].clone();
        match name.as_str() {
            "red.sum" | "red.max" => {
                if name == "red.sum" {
                    if let Some(t) = self.dot_sum(&xs[0].var, &xs[0].dims, d, depth) {
                        return Ok(vec![t]);
                    }
                }
                // A block unit along the reduced dim is broadcast first.
                let x0 = if self.units(&xs[0].var, rank)[d] {
                    self.full(xs[0].clone())
                } else {
                    xs[0].clone()
                };
                let u = self.units(&x0.var, rank);
                // The reduced block lives in registers: it counts for the
                // estimate's largest block (a broadcast product reduced here
                // can be far larger than any load or matmul tile), not for
                // traffic.
                self.work.push(Work {
                    bytes: 0,
                    source: 0.0,
                    sizes: x0
                        .dims
                        .iter()
                        .zip(&u)
                        .map(|(b, u)| if *u { "1".into() } else { b.size.clone() })
                        .collect(),
                    loops: self.loops[..depth.min(self.loops.len())].to_vec(),
                    nest: self.nest[..depth.min(self.loops.len())].to_vec(),
                    flops: false,
                    run: None,
                    computed: false,
                });
                let (fun, ident) = if name == "red.sum" {
                    ("tl.sum", "0.0")
                } else {
                    ("tl.max", "float('-inf')")
                };
                let x = self.fresh("p");
                // The maximum of a block scaled by a positive constant is
                // its base's maximum, scaled (exactly: rounding is monotone).
                let scaled = match name.as_str() {
                    "red.max" => self.scaled.get(&x0.var).cloned(),
                    _ => None,
                };
                let src = match &scaled {
                    Some((b, _)) => format!("({b}).to(tl.float32)"),
                    None => format!("({}).to(tl.float32)", x0.var),
                };
                for l in Self::pad_lines(&x, &src, &bd, d, rank, ident) {
                    self.line(depth, l);
                }
                // Where nothing was padded, later readers of the scaled
                // block's base (the repair's exponent) read this variable
                // (defined at the block's own depth, so in scope wherever
                // the block is).
                if let (Some((_, c)), Even::Yes, true) = (&scaled, &bd.even, x0.depth == depth) {
                    self.scaled.insert(x0.var.clone(), (x.clone(), *c));
                }
                let var = self.fresh("s");
                let scale = scaled.map_or(String::new(), |(_, c)| format!(" * {c:?}"));
                self.line(depth, format!("{var} = {fun}({x}, axis={d}){scale}"));
                let mut us = u;
                us.remove(d);
                self.set_units(&var, us);
                Ok(vec![var])
            }
            "red.prod" => {
                let mut out = Vec::new();
                let mut rest = xs;
                for (_, c) in args {
                    let n = arity(c, &self.sigs).ok_or("malformed product")?.inputs;
                    let (h, t) = rest.split_at(n.min(rest.len()));
                    out.extend(self.tile_reduce(c, h, d, depth)?);
                    rest = t;
                }
                Ok(out)
            }
            "red.repair" => {
                let (p, c, fname, _) = repair_parts(args).ok_or("malformed repair")?;
                let (p, c, fname) = (p.clone(), c.clone(), fname.to_string());
                let ip = arity(&p, &self.sigs).ok_or("malformed repair")?.inputs;
                let mut s = self.tile_reduce(&p, &xs[..ip.min(xs.len())], d, depth)?;
                let over_max = matches!(&p, Attr::Term(n, _) if n == "red.max") && s.len() == 1;
                if let (Some(acc), true) = (rebase, over_max) {
                    let m = self.fresh("m");
                    self.line(depth, format!("{m} = tl.maximum({acc}, {})", s[0]));
                    // The accumulator takes the tile state's shape.
                    let u = self.units(&s[0], rank - 1);
                    self.set_units(&m, u);
                    self.rebased.insert(m.clone(), acc.to_string());
                    s = vec![m];
                }
                // f(x, s') with the tile's producer state broadcast along d.
                let mut fargs: Vec<(String, Units)> = Vec::new();
                for b in xs {
                    let x = self.fresh("q");
                    self.line(depth, format!("{x} = ({}).to(tl.float32)", b.var));
                    self.note_copy(&x, &b.var, b.dtype, DType::F32);
                    if let Some(sc) = self.scaled.get(&b.var).cloned() {
                        self.scaled.insert(x.clone(), sc);
                    }
                    let u = self.units(&b.var, rank);
                    self.set_units(&x, u.clone());
                    let n16 = match b.dtype {
                        DType::F16 | DType::BF16 => Some(b.dtype),
                        _ => self.narrow.get(&b.var).copied(),
                    };
                    if let Some(t) = n16 {
                        self.narrow.insert(x.clone(), t);
                    }
                    fargs.push((x, u));
                }
                for sv in &s {
                    let mut u = self.units(sv, rank - 1);
                    u.insert(d, true);
                    fargs.push((along_insert(sv, d, rank), u));
                }
                // A maximum producer's state bounds its input from above.
                let maxof = match &p {
                    Attr::Term(n, _) if n == "red.max" && ip == 1 => vec![(0, xs.len())],
                    _ => Vec::new(),
                };
                let ys = self.inline(&fname, &fargs, depth, &maxof)?;
                let yb: Vec<Blk> = ys
                    .into_iter()
                    .map(|var| Blk {
                        var,
                        dims: xs[0].dims.clone(),
                        dtype: DType::F32,
                        depth,
                    })
                    .collect();
                let cs = self.tile_reduce(&c, &yb, d, depth)?;
                Ok(s.into_iter().chain(cs).collect())
            }
            other => Err(format!("no Triton lowering for reducer #{other}")),
        }
    }
}
