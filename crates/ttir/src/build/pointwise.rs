//! Pointwise ops (`ew.*`) over blocks of one shape.

use super::emit::raw;
use super::*;

impl<'c, 'm> Em<'c, 'm, '_, '_> {
    pub(super) fn pointwise(&mut self, v: ValueId, lay: &Layout) -> R<Blk<'c, 'm>> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let (er, rdt) = static_shape(self.p, f.ty(v))?;
        let mut xs = Vec::new();
        for o in &op.operands {
            xs.push(self.operand(*o, &er, lay)?);
        }
        let y = self.pointwise_blocks(&op.name, &op.attrs, xs.clone(), rdt)?;
        if rdt == DType::F32 {
            // Constants among the operands (by their op's value).
            let konst: Vec<Option<f64>> = op
                .operands
                .iter()
                .map(|o| {
                    let d = &f.ops[self.p.def[o.index()]?];
                    (d.name == "tensor.full")
                        .then(|| d.attrs.get("value").and_then(Attr::as_f64))
                        .flatten()
                })
                .collect();
            if let Some(sc) = self.scaled_result(&op.name, &op.attrs, &xs, &konst, &y)? {
                self.scaled.insert(raw(y.v), sc);
            }
        }
        Ok(y)
    }

    /// Where the f32 pointwise op `name` over blocks `xs` (result `y`;
    /// `konst[i]` the value of operand `i` where it is a constant) is a
    /// block times a positive constant: that block and the constant (see
    /// the Python build's `scaled_result`). A product by a constant, and
    /// the causal mask's `select(keep, x, -inf)` of such a block (built
    /// again over the base; the select of the scaled block is left dead).
    fn scaled_result(
        &mut self,
        name: &str,
        attrs: &indexmap::IndexMap<String, Attr>,
        xs: &[Blk<'c, 'm>],
        konst: &[Option<f64>],
        y: &Blk<'c, 'm>,
    ) -> R<Option<(Blk<'c, 'm>, f64)>> {
        let pos = |k: Option<f64>| k.filter(|c| c.is_finite() && *c > 0.0);
        let ninf = |k: Option<f64>| k == Some(f64::NEG_INFINITY);
        match (name, xs.len()) {
            ("ew.mul", 2) => Ok([(0, 1), (1, 0)].into_iter().find_map(|(i, j)| {
                let c = pos(konst[j])?;
                (xs[i].shape() == y.shape() && xs[i].dt == DType::F32).then(|| (xs[i].clone(), c))
            })),
            ("ew.select", 3) => {
                for (x, other) in [(1, 2), (2, 1)] {
                    if !ninf(konst[other]) || xs[x].shape() != y.shape() {
                        continue;
                    }
                    let Some((b, c)) = self.scaled.get(&raw(xs[x].v)).cloned() else {
                        continue;
                    };
                    let mut args = xs.to_vec();
                    args[x] = b;
                    let base = self.pointwise_blocks(name, attrs, args, DType::F32)?;
                    return Ok(Some((base, c)));
                }
                Ok(None)
            }
            _ => Ok(None),
        }
    }

    /// `-x` as `0 - x` (`arith.subf`), as Triton's frontend writes `-x`:
    /// Triton's ConvertTritonToTritonGPU has no pattern for `arith.negf`
    /// on tensors before Triton 3.9 (3.6 fails the whole pass on one).
    fn negf(&self, depth: usize, x: Value<'c, 'm>, shape: &[u64], dt: DType) -> R<Value<'c, 'm>> {
        let zero = self.splat_const(depth, 0.0, shape, dt)?;
        self.val(
            depth,
            "arith.subf",
            &[zero, x],
            &ty_text(shape, dtype_name(dt)),
            &[],
        )
    }

    /// An expansion (`efir_dialect_ew::expand`) over the f32 blocks `xs`
    /// (of `x0`'s shape, at `depth`): its last step's block, in f32.
    fn expanded(
        &self,
        steps: &[efir_dialect_ew::expand::Step],
        xs: &[Blk<'c, 'm>],
        x0: &Blk<'c, 'm>,
        depth: usize,
        shape: &[u64],
    ) -> R<Blk<'c, 'm>> {
        use efir_dialect_ew::expand::Arg;
        let mut v: Vec<Blk<'c, 'm>> = Vec::with_capacity(steps.len());
        for s in steps {
            let mut args = Vec::with_capacity(s.args.len());
            for a in s.args {
                args.push(match a {
                    Arg::Operand(i) => xs[*i].clone(),
                    Arg::Step(i) => v[*i].clone(),
                    Arg::Const(c) => self.with(
                        x0,
                        self.splat_const(depth, *c, shape, DType::F32)?,
                        DType::F32,
                    ),
                });
            }
            let mut attrs = indexmap::IndexMap::new();
            if let Some(p) = s.pred {
                attrs.insert("pred".to_string(), Attr::Word(p.to_string()));
            }
            let rdt = if s.op == "ew.cmp" {
                DType::I1
            } else {
                DType::F32
            };
            v.push(self.pointwise_blocks(s.op, &attrs, args, rdt)?);
        }
        v.pop().ok_or_else(|| "an empty expansion".to_string())
    }

    /// Pointwise op `name` over blocks of one shape, giving `rdt`.
    pub(super) fn pointwise_blocks(
        &self,
        name: &str,
        attrs: &indexmap::IndexMap<String, Attr>,
        mut xs: Vec<Blk<'c, 'm>>,
        rdt: DType,
    ) -> R<Blk<'c, 'm>> {
        let depth = xs.iter().map(|x| x.depth).max().unwrap_or(0);
        for x in xs.iter_mut() {
            x.depth = depth;
        }
        let x0 = xs.first().cloned().ok_or("an ew op without operands")?;
        let shape = x0.shape();
        let dt = x0.dt;
        let fl = is_float(dt);
        let t = |d: DType| ty_text(&shape, dtype_name(d));
        let bin = |s: &Self, fop: &str, iop: &str| -> R<Blk<'c, 'm>> {
            let v = s.val(
                depth,
                if fl { fop } else { iop },
                &[xs[0].v, xs[1].v],
                &t(dt),
                &[],
            )?;
            Ok(s.with(&x0, v, dt))
        };
        // Transcendental functions in f32, then back (as the Python build).
        let f32u = |s: &Self, ops: &[&str]| -> R<Blk<'c, 'm>> {
            let x = s.cast(&x0, DType::F32)?;
            let mut v = x.v;
            for o in ops {
                v = s.val(depth, o, &[v], &t(DType::F32), &[])?;
            }
            s.cast(&s.with(&x0, v, DType::F32), rdt)
        };
        let out = match name {
            "ew.add" => bin(self, "arith.addf", "arith.addi")?,
            "ew.sub" => bin(self, "arith.subf", "arith.subi")?,
            "ew.mul" => bin(self, "arith.mulf", "arith.muli")?,
            "ew.div" => bin(self, "arith.divf", "arith.divsi")?,
            "ew.max" => bin(self, "arith.maxnumf", "arith.maxsi")?,
            "ew.min" => bin(self, "arith.minnumf", "arith.minsi")?,
            "ew.neg" if fl => self.with(&x0, self.negf(depth, x0.v, &shape, dt)?, dt),
            "ew.abs" if fl => {
                self.with(&x0, self.val(depth, "math.absf", &[x0.v], &t(dt), &[])?, dt)
            }
            "ew.exp" => f32u(self, &["math.exp"])?,
            "ew.log" => f32u(self, &["math.log"])?,
            "ew.sqrt" => f32u(self, &["math.sqrt"])?,
            "ew.rsqrt" => f32u(self, &["math.rsqrt"])?,
            "ew.erf" => f32u(self, &["math.erf"])?,
            "ew.sigmoid" | "ew.tanh" => {
                // sigmoid(x) = 1 / (1 + exp(-x)); tanh(x) = 2 sigmoid(2x) - 1.
                let x = self.cast(&x0, DType::F32)?;
                let tf = t(DType::F32);
                let one = self.splat_const(depth, 1.0, &shape, DType::F32)?;
                let two = self.splat_const(depth, 2.0, &shape, DType::F32)?;
                let mut a = x.v;
                if name == "ew.tanh" {
                    a = self.val(depth, "arith.mulf", &[a, two], &tf, &[])?;
                }
                let n = self.negf(depth, a, &shape, DType::F32)?;
                let e = self.val(depth, "math.exp", &[n], &tf, &[])?;
                let d = self.val(depth, "arith.addf", &[one, e], &tf, &[])?;
                let mut s = self.val(depth, "arith.divf", &[one, d], &tf, &[])?;
                if name == "ew.tanh" {
                    let m = self.val(depth, "arith.mulf", &[s, two], &tf, &[])?;
                    s = self.val(depth, "arith.subf", &[m, one], &tf, &[])?;
                }
                self.cast(&self.with(&x0, s, DType::F32), rdt)?
            }
            "ew.pow" => {
                let b = self.cast(&x0, DType::F32)?;
                let e = self.cast(&xs[1], DType::F32)?;
                let tf = t(DType::F32);
                let l = self.val(depth, "math.log", &[b.v], &tf, &[])?;
                let m = self.val(depth, "arith.mulf", &[e.v, l], &tf, &[])?;
                let x = self.val(depth, "math.exp", &[m], &tf, &[])?;
                self.cast(&self.with(&x0, x, DType::F32), rdt)?
            }
            "ew.select" => {
                let (c, a, b) = (&xs[0], &xs[1], &xs[2]);
                let v = self.val(depth, "arith.select", &[c.v, a.v, b.v], &t(a.dt), &[])?;
                self.with(a, v, a.dt)
            }
            "ew.cmp" => {
                let pred = attrs
                    .get("pred")
                    .and_then(Attr::as_word)
                    .ok_or("ew.cmp without a predicate")?;
                let (fp, ip) = match pred {
                    "eq" => (1, 0),
                    "ne" => (13, 1),
                    "lt" => (4, 2),
                    "le" => (5, 3),
                    "gt" => (2, 4),
                    "ge" => (3, 5),
                    other => return Err(format!("ew.cmp predicate `{other}`")),
                };
                let (o, p) = if fl {
                    ("arith.cmpf", fp)
                } else {
                    ("arith.cmpi", ip)
                };
                let v = self.val(
                    depth,
                    o,
                    &[xs[0].v, xs[1].v],
                    &t(DType::I1),
                    &[("predicate", format!("{p} : i64"))],
                )?;
                self.with(&x0, v, DType::I1)
            }
            "ew.cast" => self.cast(&x0, rdt)?,
            other => match efir_dialect_ew::expand::expansion(other) {
                // An op without a function of its own, through the ops its
                // dialect writes it with, in f32, rounded once (as the
                // Python build).
                Some(steps) => {
                    let xs32 = xs
                        .iter()
                        .map(|x| self.cast(x, DType::F32))
                        .collect::<R<Vec<_>>>()?;
                    let r = self.expanded(steps, &xs32, &x0, depth, &shape)?;
                    self.cast(&r, rdt)?
                }
                None => {
                    return Err(format!(
                        "`{other}` on {} (not covered by the TTIR path)",
                        dtype_name(dt)
                    ))
                }
            },
        };
        if out.dt != rdt {
            return self.cast(&out, rdt);
        }
        Ok(out)
    }
}
