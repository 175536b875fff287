//! Reducer states merged (`combine`) and the repair functions of a
//! reducer inlined over blocks (`inline`).

use super::bcast::{pointwise_units, Units};
use super::*;

impl KernelEmitter<'_, '_> {
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
        // f32 differences by their result: `exp(a - b)` is emitted as
        // `exp2(a * log2(e) - b * log2(e))`, one fused multiply-add and the
        // ex2 instruction per element (tl.exp multiplies by log2(e) after
        // the subtraction: two), as FlashAttention's kernels do; the
        // scaled row maximum `b` is a row's value, computed once per row.
        let mut diffs: HashMap<ValueId, (String, String)> = HashMap::new();
        let stands = stand_ins(g);
        let param = |v: ValueId| stands.get(&v).copied();
        for op in &g.ops {
            let dt = g
                .ty(op.result)
                .as_tensor()
                .map(|t| t.dtype)
                .unwrap_or(DType::F32);
            let (e, u) = if op.name == "tensor.full" {
                (
                    typed_literal(op.attrs.get("value").unwrap_or(&Attr::Int(0)), dt),
                    vec![true; r],
                )
            } else {
                let xs: Vec<String> = op.operands.iter().map(|o| env[o].0.clone()).collect();
                let us: Vec<(usize, Units)> =
                    op.operands.iter().map(|o| (r, env[o].1.clone())).collect();
                let e = match (op.name.as_str(), op.operands.as_slice()) {
                    ("ew.exp", [x]) if dt == DType::F32 && diffs.contains_key(x) => {
                        let (a, b) = &diffs[x];
                        let l = std::f64::consts::LOG2_E;
                        // A scaled block's scale folds into log2(e).
                        match self.scaled.get(a) {
                            Some((base, c)) => format!(
                                "tl.exp2(({base}).to(tl.float32) * {:?} - ({b}).to(tl.float32) * {l})",
                                c * l
                            ),
                            None => format!(
                                "tl.exp2(({a}).to(tl.float32) * {l} - ({b}).to(tl.float32) * {l})"
                            ),
                        }
                    }
                    _ => pointwise(&op.name, &op.attrs, &xs, dt)?,
                };
                if op.name == "ew.sub" && dt == DType::F32 && xs.len() == 2 {
                    diffs.insert(op.result, (xs[0].clone(), xs[1].clone()));
                }
                (e, pointwise_units(r, &us))
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
}

/// The values of a pointwise function `g` that stand for one of its
/// arguments (by index), as a maximum producer's state: the argument itself,
/// or its empty-row guard `select(m == -inf, c, m)` with `c` a constant
/// (where `m` is -inf, so is every element it is the maximum of, and `x - c`
/// is -inf too). The bound analyses of the inlined repair functions (this
/// emitter's and the TTIR builder's) take `x - s` for such an `s` as `<= 0`.
pub fn stand_ins(g: &efir_ir::Func) -> HashMap<ValueId, usize> {
    let full = |v: ValueId| {
        g.ops
            .iter()
            .find(|o| o.result == v && o.name == "tensor.full")
    };
    let ninf = |v: ValueId| {
        full(v)
            .is_some_and(|o| o.attrs.get("value").and_then(Attr::as_f64) == Some(f64::NEG_INFINITY))
    };
    let mut stands: HashMap<ValueId, usize> =
        g.params.iter().enumerate().map(|(i, p)| (*p, i)).collect();
    // The guards' conditions `m == -inf`, by the index of `m`.
    let mut is_ninf: HashMap<ValueId, usize> = HashMap::new();
    for op in &g.ops {
        match (op.name.as_str(), op.operands.as_slice()) {
            ("ew.cmp", [a, b]) if op.attrs.get("pred").and_then(Attr::as_word) == Some("eq") => {
                let m = if ninf(*b) { *a } else { *b };
                if ninf(*a) || ninf(*b) {
                    if let Some(i) = g.params.iter().position(|p| *p == m) {
                        is_ninf.insert(op.result, i);
                    }
                }
            }
            ("ew.select", [c, t, f]) => {
                if let (Some(j), Some(k)) = (is_ninf.get(c), stands.get(f)) {
                    if j == k && full(*t).is_some() {
                        stands.insert(op.result, *j);
                    }
                }
            }
            _ => {}
        }
    }
    stands
}
