//! Broadcasts kept lazy inside a kernel, and sums of products as `tl.dot`.
//!
//! A block variable may hold size 1 along some of its dims where the value
//! it stands for is the same along them (a `tensor.broadcast`, a reduced
//! state, an iota): those are its *unit* dims. Pointwise ops combine such
//! blocks by Triton's own broadcasting, so a value broadcast along the head
//! dim (an attention row's running maximum and sum) is computed once per row,
//! not once per element. Where a consumer needs every element (a store, a
//! matmul operand) the block is broadcast then ([`KernelEmitter::full`]).
//!
//! A sum along dim `d` of a product `a * b` where `a` is unit along one dim
//! `n` and `b` along another dim `m` (and every other dim is a single
//! element) is a matrix product over `d`: it is emitted as `tl.dot` (on
//! blocks of at least 16) instead of the broadcast product and its sum. That
//! is attention's P·V inside the online-softmax reduction.

use super::{shape_list, Blk, Even, KernelEmitter, Work, BD};
use efir_ir::DType;

/// Per dim of a block: whether the variable holds a single element there.
pub(super) type Units = Vec<bool>;

/// The shape of a block variable: its dims' sizes, 1 at unit dims.
pub(super) fn real_shape(dims: &[BD], unit: &[bool]) -> String {
    let s: Vec<&str> = dims
        .iter()
        .enumerate()
        .map(|(i, d)| {
            if unit.get(i).copied().unwrap_or(false) {
                "1"
            } else {
                d.size.as_str()
            }
        })
        .collect();
    format!("[{}]", s.join(", "))
}

/// The unit dims of a pointwise result of rank `r` over operands given as
/// (rank, unit dims): a dim is unit where every operand is (a missing
/// leading dim is).
pub(super) fn pointwise_units(r: usize, ops: &[(usize, Units)]) -> Units {
    (0..r)
        .map(|j| {
            ops.iter().all(|(ra, u)| {
                let k = r - ra.min(&r);
                j < k || u.get(j - k).copied().unwrap_or(false)
            })
        })
        .collect()
}

impl KernelEmitter<'_, '_> {
    /// The unit dims of variable (or expression) `var` of rank `r`.
    pub(super) fn units(&self, var: &str, r: usize) -> Units {
        match self.unit.get(var) {
            Some(u) if u.len() == r => u.clone(),
            _ => vec![false; r],
        }
    }

    /// Record the unit dims of `var` (nothing where it has none).
    pub(super) fn set_units(&mut self, var: &str, u: Units) {
        if u.iter().any(|x| *x) {
            self.unit.insert(var.to_string(), u);
        }
    }

    /// Block `b` with every element present: broadcast along its unit dims.
    pub(super) fn full(&mut self, b: Blk) -> Blk {
        let u = self.units(&b.var, b.dims.len());
        if !u.iter().any(|x| *x) {
            return b;
        }
        let var = self.fresh("f");
        self.line(
            b.depth,
            format!(
                "{var} = tl.broadcast_to({}, {})",
                b.var,
                shape_list(&b.dims)
            ),
        );
        Blk { var, ..b }
    }

    /// Record that `var` is the product of `a` and `b` (variables of the
    /// same rank), for [`KernelEmitter::dot_sum`].
    pub(super) fn note_product(&mut self, var: &str, a: &str, b: &str) {
        self.prods
            .insert(var.to_string(), (a.to_string(), b.to_string()));
    }

    /// The sum along `d` of `x` (a block of `dims`, emitted at `depth`) as a
    /// matrix product, where `x` is a recorded product of two blocks that are
    /// unit along complementary dims: the result variable (rank one less,
    /// f32), or `None` where `x` is not such a product.
    pub(super) fn dot_sum(
        &mut self,
        x: &str,
        dims: &[BD],
        d: usize,
        depth: usize,
    ) -> Option<String> {
        let (a, b) = self.prods.get(x)?.clone();
        let r = dims.len();
        let (ua, ub) = (self.units(&a, r), self.units(&b, r));
        if ua[d] || ub[d] {
            return None;
        }
        // Rows: where b is unit and a is not; columns: the other way round
        // (dims of a single element aside: grouped-query attention's V is
        // unit along the group dim too, a block of one query head).
        let m = (0..r).find(|j| ub[*j] && !ua[*j] && dims[*j].size != "1")?;
        let n = (0..r).find(|j| ua[*j] && !ub[*j] && dims[*j].size != "1")?;
        let single = |j: usize| dims[j].size == "1" || (ua[j] && ub[j]);
        if (0..r).any(|j| j != m && j != n && j != d && !single(j)) {
            return None;
        }
        let (sm, sk, sn) = (
            dims[m].size.clone(),
            dims[d].size.clone(),
            dims[n].size.clone(),
        );
        // Zero the padding of the summed dim in both operands.
        let bd = &dims[d];
        let (pa, pb) = if bd.even == Even::Yes {
            (a.clone(), b.clone())
        } else {
            let (pa, pb) = (self.fresh("a"), self.fresh("b"));
            for (p, s) in [(&pa, &a), (&pb, &b)] {
                for l in Self::pad_lines(p, &format!("({s}).to(tl.float32)"), bd, d, r, "0.0") {
                    self.line(depth, l);
                }
            }
            (pa, pb)
        };
        let (a2, b2) = (self.fresh("a"), self.fresh("b"));
        // a holds [.. m .. d ..] (or [.. d .. m ..]) with single elements
        // elsewhere: a matrix of rows m and columns d, transposed where d
        // comes first; b likewise [d, n].
        let a_mat = if m < d {
            format!("tl.reshape({pa}, [{sm}, {sk}])")
        } else {
            format!("tl.trans(tl.reshape({pa}, [{sk}, {sm}]))")
        };
        let b_mat = if d < n {
            format!("tl.reshape({pb}, [{sk}, {sn}])")
        } else {
            format!("tl.trans(tl.reshape({pb}, [{sn}, {sk}]))")
        };
        // The result's dims: x's without d; m and n keep their order.
        let out: Vec<BD> = dims
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != d)
            .map(|(_, b)| b.clone())
            .collect();
        let ou: Vec<bool> = (0..r)
            .filter(|j| *j != d)
            .map(|j| j != m && j != n)
            .collect();
        let shape = real_shape(&out, &ou);
        let mat = if m < n {
            "tl.dot({a2}, {b2})".to_string()
        } else {
            "tl.trans(tl.dot({a2}, {b2}))".to_string()
        };
        let mat = mat.replace("{a2}", &a2).replace("{b2}", &b2);
        let t = self.fresh("dot");
        // Operands that are views of loads are loaded again as matrices
        // (see [`direct`](super::direct)).
        let a_direct = self.direct_matrix(&a, m, d, &sm, &sk);
        let b_direct = self.direct_matrix(&b, d, n, &sk, &sn);
        let bf16 = |x: &str, direct: &Option<(String, DType)>| {
            self.narrow.get(x) == Some(&DType::BF16)
                || direct.as_ref().is_some_and(|(_, t)| *t == DType::BF16)
        };
        let (a_bf, b_bf) = (bf16(&a, &a_direct), bf16(&b, &b_direct));
        // f16 operands where that loses nothing against TF32 (the default
        // precision of an f32 tl.dot), bf16 where one holds bf16 values (see
        // [`Self::fits_bf16_dot`]), f32 otherwise.
        let ty = if self.fits_f16(&a) && self.fits_f16(&b) {
            "tl.float16"
        } else if self.fits_bf16_dot(&a, a_bf, &b, b_bf) {
            "tl.bfloat16"
        } else {
            "tl.float32"
        };
        let a_mat = a_direct.map_or(a_mat, |(x, _)| x);
        let b_mat = b_direct.map_or(b_mat, |(x, _)| x);
        self.line(depth, format!("{a2} = ({a_mat}).to({ty})"));
        self.line(depth, format!("{b2} = ({b_mat}).to({ty})"));
        self.line(
            depth,
            format!("if ({sm} >= 16) and ({sk} >= 16) and ({sn} >= 16):"),
        );
        self.line(depth, format!("    {t} = tl.reshape({mat}, {shape})"));
        self.line(depth, "else:".into());
        self.line(
            depth,
            format!("    {t} = tl.sum(({pa}).to(tl.float32) * ({pb}).to(tl.float32), axis={d})"),
        );
        self.set_units(&t, ou);
        if m < n && m < d {
            self.dots.insert(
                t.clone(),
                DotInfo {
                    a: pa.clone(),
                    a2: a2.clone(),
                    b2: b2.clone(),
                    prod: format!("({pa}).to(tl.float32) * ({pb}).to(tl.float32)"),
                    d,
                    r,
                    m,
                    n,
                    sizes: (sm.clone(), sk.clone(), sn.clone()),
                    ty: ty.to_string(),
                    shape: shape.clone(),
                },
            );
        }
        let mut sizes: Vec<String> = vec![sm, sk, sn];
        sizes.retain(|s| !s.is_empty());
        self.work.push(Work {
            bytes: 2,
            source: 0.0,
            sizes,
            loops: self.loops[..depth.min(self.loops.len())].to_vec(),
            nest: self.nest[..depth.min(self.loops.len())].to_vec(),
            flops: true,
            run: None,
            computed: false,
        });
        Some(t)
    }
}

impl KernelEmitter<'_, '_> {
    /// The unit dims of a pointwise combination of variables `a` and `b` of
    /// one rank: those where both are unit (none where either is whole).
    pub(super) fn units_both(&self, a: &str, b: &str) -> Units {
        match (self.unit.get(a), self.unit.get(b)) {
            (Some(x), Some(y)) if x.len() == y.len() => {
                x.iter().zip(y).map(|(p, q)| *p && *q).collect()
            }
            _ => Vec::new(),
        }
    }
}

/// A matrix product made by [`KernelEmitter::dot_sum`] (rows before
/// columns, rows before the summed dim), kept so that a later update
/// `acc + dot * scale` can be one `tl.dot` into the accumulator.
#[derive(Clone, Debug)]
pub(super) struct DotInfo {
    /// The left operand before it became a matrix (rank `r`, padded).
    a: String,
    /// The left operand as a matrix (`[M, K]`).
    a2: String,
    /// The right operand as a matrix (`[K, N]`).
    b2: String,
    /// The broadcast product (the fallback for blocks under 16).
    prod: String,
    /// The summed dim, the rank of the product, the row and column dims.
    d: usize,
    r: usize,
    m: usize,
    n: usize,
    /// The block sizes of rows, summed dim and columns.
    sizes: (String, String, String),
    /// The operands' element type.
    ty: String,
    /// The real shape of the result (rank `r - 1`).
    shape: String,
}

impl KernelEmitter<'_, '_> {
    /// The variable `x` stands for, through f32 copies.
    pub(super) fn resolve(&self, x: &str) -> String {
        let mut x = x.to_string();
        while let Some(y) = self.copy_of.get(&x) {
            x = y.clone();
        }
        x
    }

    /// `acc + p` as one `tl.dot` into the accumulator, where `p` is a
    /// product `dot * scale` of a matrix product and a per-row scale (unit
    /// along the product's columns): `acc + (A @ B) * s = dot(A * s, B,
    /// acc)`, FlashAttention's update of its weighted sum (no product
    /// block besides the accumulator). The result variable, or `None`.
    pub(super) fn dot_update(&mut self, acc: &str, p: &str, depth: usize) -> Option<String> {
        if let Some(info) = self.dots.get(&self.resolve(p)).cloned() {
            return self.dot_into(acc, &info, depth);
        }
        let (x, y) = self.prods.get(p)?.clone();
        let (info, scale) = [(&x, &y), (&y, &x)].into_iter().find_map(|(dv, sv)| {
            let info = self.dots.get(&self.resolve(dv))?.clone();
            Some((info, sv.clone()))
        })?;
        let (ro, no) = info.out_dims();
        let us = self.units(&scale, ro);
        if us.len() != ro || !us[no] || !self.whole_for(acc, &info) {
            return None;
        }
        // f16 operands stay within f16's range only under a scale of at
        // most 1 in magnitude.
        if info.ty == "tl.float16"
            && !self
                .bounds
                .get(&scale)
                .is_some_and(|(lo, hi)| *lo >= -1.0 && *hi <= 1.0)
        {
            return None;
        }
        let (sm, sk, _) = info.sizes.clone();
        // The scale as a block of the product's rank (a unit summed dim).
        let idx: Vec<&str> = (0..info.r)
            .map(|j| if j == info.d { "None" } else { ":" })
            .collect();
        let sc = format!("({scale})[{}]", idx.join(", "));
        let ap = self.fresh("a");
        self.line(
            depth,
            format!(
                "{ap} = (tl.reshape(({}).to(tl.float32) * {sc}, [{sm}, {sk}])).to({})",
                info.a, info.ty
            ),
        );
        let small = format!("tl.sum({}, axis={}) * ({scale})", info.prod, info.d);
        Some(self.dot_into_lines(acc, &info, &ap, &small, depth))
    }

    /// `acc + A @ B` as one `tl.dot` into the accumulator, for a matrix
    /// product `info` (the unscaled update of a rebased online softmax).
    fn dot_into(&mut self, acc: &str, info: &DotInfo, depth: usize) -> Option<String> {
        if !self.whole_for(acc, info) {
            return None;
        }
        let small = format!("tl.sum({}, axis={})", info.prod, info.d);
        Some(self.dot_into_lines(acc, info, &info.a2, &small, depth))
    }

    /// Whether accumulator `acc` holds every element of the product's rows
    /// and columns (a `tl.dot` can add into it).
    fn whole_for(&self, acc: &str, info: &DotInfo) -> bool {
        let (ro, no) = info.out_dims();
        let ua = self.units(acc, ro);
        ua.len() == ro && !ua[info.m] && !ua[no]
    }

    /// `m = acc + a @ B` (B the product's right matrix) as one `tl.dot` into
    /// `acc` on blocks of at least 16, else `acc + small`; the variable.
    fn dot_into_lines(
        &mut self,
        acc: &str,
        info: &DotInfo,
        a: &str,
        small: &str,
        depth: usize,
    ) -> String {
        let (sm, sk, sn) = info.sizes.clone();
        let v = self.fresh("m");
        self.line(
            depth,
            format!("if ({sm} >= 16) and ({sk} >= 16) and ({sn} >= 16):"),
        );
        self.line(
            depth,
            format!(
                "    {v} = tl.reshape(tl.dot({a}, {}, tl.reshape({acc}, [{sm}, {sn}])), {})",
                info.b2, info.shape
            ),
        );
        self.line(depth, "else:".into());
        self.line(depth, format!("    {v} = {acc} + {small}"));
        v
    }
}

impl DotInfo {
    /// The rank of the product's result and its column dim there (the
    /// summed dim gone; rows keep their index, being before it).
    fn out_dims(&self) -> (usize, usize) {
        (
            self.r - 1,
            if self.n > self.d { self.n - 1 } else { self.n },
        )
    }
}

/// Closed bounds `(lo, hi)` of a value (infinite ends allowed).
pub(super) type Bound = (f64, f64);

/// The bounds of a pointwise op's result from its operands' (`None`:
/// unknown). `below_max`: the op is `x - max(x)`, at most 0.
pub(super) fn bound_of(
    op: &str,
    ins: &[Option<Bound>],
    value: Option<f64>,
    below_max: bool,
) -> Option<Bound> {
    let hull = |a: Bound, b: Bound| (a.0.min(b.0), a.1.max(b.1));
    match op {
        "tensor.full" => value.filter(|v| !v.is_nan()).map(|v| (v, v)),
        "ew.sub" if below_max => Some((f64::NEG_INFINITY, 0.0)),
        "ew.exp" => ins
            .first()
            .copied()
            .flatten()
            .map(|(lo, hi)| (lo.exp(), hi.exp())),
        "ew.select" => Some(hull(ins.get(1).copied()??, ins.get(2).copied()??)),
        "ew.cast" => ins.first().copied().flatten(),
        "ew.mul" => {
            let (a, b) = (ins.first().copied()??, ins.get(1).copied()??);
            let ps = [a.0 * b.0, a.0 * b.1, a.1 * b.0, a.1 * b.1];
            if ps.iter().any(|p| p.is_nan()) {
                return None;
            }
            Some((
                ps.iter().copied().fold(f64::INFINITY, f64::min),
                ps.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            ))
        }
        _ => None,
    }
}

/// The largest finite f16.
const F16_MAX: f64 = 65504.0;

impl KernelEmitter<'_, '_> {
    /// Whether a product of f32 variables `a` and `b` may run on bf16
    /// operands: one holds bf16 values exactly and the other too, or is
    /// bounded within [-1, 1] (attention's probabilities against bf16 V:
    /// rounded to bf16, a relative error of at most 2^-9 each, the rounding
    /// of FlashAttention and of the source program's own cast of P to V's
    /// type before the product; in f32 the product ran on TF32 at half the
    /// rate, with operands twice the size in registers).
    /// (`a_bf`, `b_bf`: whether each holds bf16 values exactly.)
    fn fits_bf16_dot(&self, a: &str, a_bf: bool, b: &str, b_bf: bool) -> bool {
        let prob = |x: &str| {
            self.bounds
                .get(x)
                .is_some_and(|(lo, hi)| *lo >= -1.0 && *hi <= 1.0)
        };
        (a_bf && (b_bf || prob(b))) || (b_bf && prob(a))
    }

    /// Whether f32 variable `x` may enter a matrix product rounded to f16
    /// with no more error than the default TF32 product (10 mantissa bits,
    /// as f16's): its values are f16 values exactly, or bounded within f16's
    /// range (TF32 rounds them to the same precision; only f16's subnormals,
    /// below 6.1e-5, keep less, an absolute error under 3e-8).
    pub(super) fn fits_f16(&self, x: &str) -> bool {
        self.narrow.get(x) == Some(&efir_ir::DType::F16)
            || self
                .bounds
                .get(x)
                .is_some_and(|(lo, hi)| *lo >= -F16_MAX && *hi <= F16_MAX)
    }
}
