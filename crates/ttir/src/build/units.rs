//! Which dims of a `par.reduce` loop's accumulators can be single
//! elements: a repaired reduction runs at its operands' shapes (see
//! [`Em::narrow_fields`]), so online softmax's running maximum and
//! normalizer are constant along the head dim; their accumulators are
//! `[.., q, 1]` blocks, not `[.., q, d]` ones (fewer registers). The shapes
//! follow the emission's broadcasting: an op's result is unit where all its
//! operands are, a reduction removes its dim, and an accumulator is unit
//! where its tile states and merged states all are.

use super::*;

/// Per dim: unit (a single element standing for the whole dim).
type Mask = Vec<bool>;

fn and(a: &Mask, b: &Mask) -> Option<Mask> {
    (a.len() == b.len()).then(|| a.iter().zip(b).map(|(x, y)| *x && *y).collect())
}

impl Em<'_, '_, '_, '_> {
    /// The masks of the results of reducer function `fname` over
    /// arguments of masks `args` (an op's result is unit where all its
    /// operands are; constants everywhere).
    fn fn_masks(&self, fname: &str, args: &[Mask]) -> Option<Vec<Mask>> {
        let g = self.p.module.func(fname)?;
        let r = args.first()?.len();
        let mut env: HashMap<ValueId, Mask> =
            g.params.iter().copied().zip(args.iter().cloned()).collect();
        for op in &g.ops {
            let m = match op.name.as_str() {
                "tensor.full" => vec![true; r],
                n if n.starts_with("ew.") => {
                    let mut m = vec![true; r];
                    for o in &op.operands {
                        m = and(&m, env.get(o)?)?;
                    }
                    m
                }
                _ => return None,
            };
            env.insert(op.result, m);
        }
        g.returns.iter().map(|x| env.get(x).cloned()).collect()
    }

    /// The masks (of the input's rank, unit along `d`) of the tile states
    /// of reducer `r` over fields of masks `xs` along `d`.
    fn tile_masks(&self, r: &Attr, xs: &[Mask], d: usize) -> Option<Vec<Mask>> {
        let Attr::Term(name, args) = r else {
            return None;
        };
        let reduced = |m: &Mask| {
            let mut m = m.clone();
            m[d] = true;
            m
        };
        match name.as_str() {
            "red.sum" | "red.max" | "red.min" => Some(vec![reduced(xs.first()?)]),
            "red.prod" => {
                let mut out = Vec::new();
                let mut rest = xs;
                for (_, c) in args {
                    let n = arity(c, &self.sigs)?.inputs;
                    let (h, t) = rest.split_at(n.min(rest.len()));
                    out.extend(self.tile_masks(c, h, d)?);
                    rest = t;
                }
                Some(out)
            }
            "red.repair" => {
                let (p, c, fname, _) = repair_parts(args)?;
                let ip = arity(p, &self.sigs)?.inputs;
                let s = self.tile_masks(p, xs.get(..ip)?, d)?;
                let fargs: Vec<Mask> = xs.iter().chain(&s).cloned().collect();
                // f's results whole along `d` (see `whole_along`).
                let ys: Vec<Mask> = self
                    .fn_masks(fname, &fargs)?
                    .into_iter()
                    .map(|mut m| {
                        m[d] = false;
                        m
                    })
                    .collect();
                let cs = self.tile_masks(c, &ys, d)?;
                Some(s.into_iter().chain(cs).collect())
            }
            _ => None,
        }
    }

    /// The masks of states `a` and `b` merged (as [`Em::combine`]).
    fn combine_masks(&self, r: &Attr, a: &[Mask], b: &[Mask]) -> Option<Vec<Mask>> {
        let Attr::Term(name, args) = r else {
            return None;
        };
        match name.as_str() {
            "red.sum" | "red.max" | "red.min" => Some(vec![and(a.first()?, b.first()?)?]),
            "red.prod" => {
                let mut out = Vec::new();
                let (mut ra, mut rb) = (a, b);
                for (_, c) in args {
                    let n = arity(c, &self.sigs)?.states;
                    let (ha, ta) = ra.split_at(n.min(ra.len()));
                    let (hb, tb) = rb.split_at(n.min(rb.len()));
                    out.extend(self.combine_masks(c, ha, hb)?);
                    (ra, rb) = (ta, tb);
                }
                Some(out)
            }
            "red.repair" => {
                let (p, c, _, h) = repair_parts(args)?;
                let np = arity(p, &self.sigs)?.states;
                let (s1, c1) = a.split_at(np.min(a.len()));
                let (s2, c2) = b.split_at(np.min(b.len()));
                let s = self.combine_masks(p, s1, s2)?;
                let a1: Vec<Mask> = c1.iter().chain(s1).chain(&s).cloned().collect();
                let a2: Vec<Mask> = c2.iter().chain(s2).chain(&s).cloned().collect();
                let c1 = self.fn_masks(h, &a1)?;
                let c2 = self.fn_masks(h, &a2)?;
                let cs = self.combine_masks(c, &c1, &c2)?;
                Some(s.into_iter().chain(cs).collect())
            }
            _ => None,
        }
    }

    /// Per state of the `par.reduce` of `x` (reducer `r`), the dims of its
    /// result where the accumulator is a single element; `None` where the
    /// tile states are not a repaired reduction run at its operands'
    /// shapes (every accumulator whole).
    pub(super) fn acc_units(&self, r: &Attr, x: ValueId) -> Option<Vec<Mask>> {
        let f = self.p.func;
        let red = &f.ops[self.p.def[x.index()]?];
        if red.name != "tensor.reduce" || self.p.buffer[x.index()] {
            return None;
        }
        let rr = red.attrs.get("reducer")?;
        if !matches!(rr, Attr::Term(n, _) if n == "red.repair") || rr != r {
            return None;
        }
        let d = red.attrs.get("dim").and_then(Attr::as_int)? as usize;
        let a = red.operands[0];
        let tup = &f.ops[self.p.def[a.index()]?];
        if tup.name != "tensor.tuple" || self.p.buffer[a.index()] {
            return None;
        }
        // The fields' masks, as `narrow_fields` emits them.
        let mut xs = Vec::new();
        for o in &tup.operands {
            let (er, _) = static_shape(self.p, f.ty(*o)).ok()?;
            let mut m = vec![false; er.len()];
            if let Some(op) = self.p.def[o.index()].map(|i| &f.ops[i]) {
                if op.name == "tensor.broadcast" && !self.p.buffer[o.index()] {
                    let (ea, _) = static_shape(self.p, f.ty(op.operands[0])).ok()?;
                    if ea.len() == er.len() {
                        for j in 0..er.len() {
                            m[j] = ea[j] == 1 && er[j] != 1 && j != d;
                        }
                    }
                }
            }
            xs.push(m);
        }
        let t = self.tile_masks(r, &xs, d)?;
        // Accumulators unit where their tile states and merged states are.
        let mut acc = t.clone();
        for _ in 0..8 {
            let merged = self.combine_masks(r, &acc, &t)?;
            let next: Vec<Mask> = acc
                .iter()
                .zip(&merged)
                .map(|(a, m)| and(a, m))
                .collect::<Option<_>>()?;
            if next == acc {
                return Some(
                    acc.into_iter()
                        .map(|mut m| {
                            m.remove(d);
                            m
                        })
                        .collect(),
                );
            }
            acc = next;
        }
        None
    }
}
