//! Reductions inside a kernel: `tensor.reduce` over a block, the loops of
//! `par.reduce` (loop-carried reducer states, causal tile skipping and the
//! split at the diagonal), reducer states merged (`combine`), and the
//! repair functions inlined over blocks.

use super::bcast::{pointwise_units, real_shape, Units};
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
                    sizes: x0
                        .dims
                        .iter()
                        .zip(&u)
                        .map(|(b, u)| if *u { "1".into() } else { b.size.clone() })
                        .collect(),
                    loops: self.loops[..depth.min(self.loops.len())].to_vec(),
                    flops: false,
                });
                let (fun, ident) = if name == "red.sum" {
                    ("tl.sum", "0.0")
                } else {
                    ("tl.max", "float('-inf')")
                };
                let x = self.fresh("p");
                let src = format!("({}).to(tl.float32)", x0.var);
                for l in Self::pad_lines(&x, &src, &bd, d, rank, ident) {
                    self.line(depth, l);
                }
                let var = self.fresh("s");
                self.line(depth, format!("{var} = {fun}({x}, axis={d})"));
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

    /// Merge two reducer states (variables), at `depth`.
    pub(super) fn combine(
        &mut self,
        r: &Attr,
        a: &[String],
        b: &[String],
        depth: usize,
    ) -> Result<Vec<String>, String> {
        let Attr::Term(name, args) = r else {
            return Err("malformed reducer".into());
        };
        match name.as_str() {
            "red.sum" | "red.max" => {
                if name == "red.sum" {
                    let fused = self
                        .dot_update(&a[0], &b[0], depth)
                        .or_else(|| self.dot_update(&b[0], &a[0], depth));
                    if let Some(v) = fused {
                        return Ok(vec![v]);
                    }
                }
                let var = self.fresh("m");
                let e = if name == "red.sum" {
                    format!("{} + {}", a[0], b[0])
                } else {
                    format!("tl.maximum({}, {})", a[0], b[0])
                };
                self.line(depth, format!("{var} = {e}"));
                let u = self.units_both(&a[0], &b[0]);
                self.set_units(&var, u);
                Ok(vec![var])
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
                let (p, c, _, h) = repair_parts(args).ok_or("malformed repair")?;
                let (p, c, h) = (p.clone(), c.clone(), h.to_string());
                let np = arity(&p, &self.sigs).ok_or("malformed repair")?.states;
                let (s1, c1) = a.split_at(np.min(a.len()));
                let (s2, c2) = b.split_at(np.min(b.len()));
                // A tile state already at the merged maximum (rebased on
                // accumulator `s1`, see [`KernelEmitter::tile_reduce_at`])
                // is the merge's maximum, and its repair is the identity.
                let rebased = np == 1
                    && s2.len() == 1
                    && s1.len() == 1
                    && self.rebased.get(&self.resolve(&s2[0])) == Some(&s1[0]);
                if rebased {
                    let s = s2.to_vec();
                    let all1: Vec<String> = c1.iter().chain(s1).chain(&s).cloned().collect();
                    let args1: Vec<(String, Units)> = all1
                        .iter()
                        .map(|x| (x.clone(), self.unit.get(x).cloned().unwrap_or_default()))
                        .collect();
                    let maxof = vec![(c1.len(), c1.len() + 1)];
                    let c1 = self.inline(&h, &args1, depth, &maxof)?;
                    let cs = self.combine(&c, &c1, c2, depth)?;
                    return Ok(s.into_iter().chain(cs).collect());
                }
                let s = self.combine(&p, s1, s2, depth)?;
                let with_units = |e: &Self, xs: &[String]| -> Vec<(String, Units)> {
                    xs.iter()
                        .map(|x| (x.clone(), e.unit.get(x).cloned().unwrap_or_default()))
                        .collect()
                };
                let all1: Vec<String> = c1.iter().chain(s1).chain(&s).cloned().collect();
                let all2: Vec<String> = c2.iter().chain(s2).chain(&s).cloned().collect();
                let args1 = with_units(self, &all1);
                let args2 = with_units(self, &all2);
                // A merged maximum is at least each side's: old - new <= 0.
                let nc = c1.len();
                let maxof: Vec<(usize, usize)> = match &p {
                    Attr::Term(n, _) if n == "red.max" && np == 1 => vec![(nc, nc + 1)],
                    _ => Vec::new(),
                };
                let c1 = self.inline(&h, &args1, depth, &maxof)?;
                let c2 = self.inline(&h, &args2, depth, &maxof)?;
                let cs = self.combine(&c, &c1, &c2, depth)?;
                Ok(s.into_iter().chain(cs).collect())
            }
            other => Err(format!("no Triton lowering for reducer #{other}")),
        }
    }

    /// Inline a pointwise function of the module over block expressions.
    ///
    /// Arguments come with their unit dims (see [`bcast`]; an empty list for
    /// a whole block of unknown rank); the results' are recorded. Each
    /// `(i, j)` of `maxof` says that argument `j` is the maximum of argument
    /// `i` (so `i - j <= 0`): the bounds this gives the results are recorded
    /// too (see [`bcast`]'s dots).
    pub(super) fn inline(
        &mut self,
        fname: &str,
        args: &[(String, Units)],
        depth: usize,
        maxof: &[(usize, usize)],
    ) -> Result<Vec<String>, String> {
        let g = self
            .p
            .module
            .func(fname)
            .ok_or_else(|| format!("unknown function @{fname}"))?;
        if g.params.len() != args.len() {
            return Err(format!("@{fname} takes {} arguments", g.params.len()));
        }
        // Every argument has the same rank (or none is known).
        let r = args.iter().map(|(_, u)| u.len()).max().unwrap_or(0);
        let mut env: HashMap<ValueId, (String, Units)> = HashMap::new();
        for (p, (a, u)) in g.params.iter().zip(args) {
            let u = if u.len() == r {
                u.clone()
            } else {
                vec![false; r]
            };
            env.insert(*p, (a.clone(), u));
        }
        let mut iv: HashMap<ValueId, bcast::Bound> = HashMap::new();
        let param = |v: ValueId| g.params.iter().position(|p| *p == v);
        for op in &g.ops {
            let dt = g
                .ty(op.result)
                .as_tensor()
                .map(|t| t.dtype)
                .unwrap_or(DType::F32);
            let (e, u) = if op.name == "tensor.full" {
                (
                    literal(op.attrs.get("value").unwrap_or(&Attr::Int(0))),
                    vec![true; r],
                )
            } else {
                let xs: Vec<String> = op.operands.iter().map(|o| env[o].0.clone()).collect();
                let us: Vec<(usize, Units)> =
                    op.operands.iter().map(|o| (r, env[o].1.clone())).collect();
                (
                    pointwise(&op.name, &op.attrs, &xs, dt)?,
                    pointwise_units(r, &us),
                )
            };
            let var = self.fresh("g");
            self.line(depth, format!("{var} = {e}"));
            let below_max = op.name == "ew.sub"
                && op.operands.len() == 2
                && matches!((param(op.operands[0]), param(op.operands[1])),
                    (Some(i), Some(j)) if maxof.contains(&(i, j)));
            let ins: Vec<Option<bcast::Bound>> =
                op.operands.iter().map(|o| iv.get(o).copied()).collect();
            let value = op.attrs.get("value").and_then(Attr::as_f64);
            if let Some(b) = bcast::bound_of(&op.name, &ins, value, below_max) {
                iv.insert(op.result, b);
                self.bounds.insert(var.clone(), b);
            }
            if op.name == "ew.mul" && op.operands.len() == 2 {
                let (a, b) = (
                    env[&op.operands[0]].0.clone(),
                    env[&op.operands[1]].0.clone(),
                );
                self.note_product(&var, &a, &b);
            }
            self.set_units(&var, u.clone());
            env.insert(op.result, (var, u));
        }
        Ok(g.returns.iter().map(|x| env[x].0.clone()).collect())
    }

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
        self.bind(axis, &i, inner);
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
        self.bound.remove(axis);
        self.idx.remove(axis);
        if let Some(n) = self.live.get_mut(axis) {
            *n -= 1;
        }
        self.loops.pop();
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
        self.bound.retain(|_, d| *d <= outer);
        self.offs.retain(|_, (_, d)| *d <= outer);
        self.memo.retain(|_, x| x.depth() <= outer);
        self.loops.truncate(outer);
        let r = self.par_reduce_here(v, lay);
        let fresh: Vec<_> = self.memo.drain().collect();
        self.scopes.extend(scopes);
        self.bound = bound;
        self.idx = idx;
        self.offs = offs;
        self.memo = memo;
        self.loops = loops;
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
        let rt = f.ty(v).clone();
        let leaves: Vec<_> = rt.leaves().into_iter().cloned().collect();
        let idents = efir_dialect_red::identity(&r).ok_or("reducer without identity")?;
        let mut accs = Vec::new();
        // Where each accumulator's initial value is (its shape is patched
        // once the tile states' unit dims are known).
        let mut inits: Vec<(usize, Vec<BD>, String)> = Vec::new();
        for (l, id) in leaves.iter().zip(&idents) {
            let exts: Vec<Extent> = l.shape.iter().map(Extent::of).collect();
            let (dims, _) = self.dims(&exts, lay)?;
            let var = self.fresh("acc");
            let idv = if id.is_infinite() {
                if *id < 0.0 {
                    "float('-inf')".to_string()
                } else {
                    "float('inf')".to_string()
                }
            } else {
                format!("{id:?}")
            };
            inits.push((self.scopes[outer].lines.len(), dims.clone(), idv.clone()));
            self.line(
                outer,
                format!("{var} = tl.full({}, {idv}, tl.float32)", shape_list(&dims)),
            );
            accs.push(var);
        }
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
            stop => {
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
