//! Index expressions: where a block's elements are in a buffer seen through
//! transposes, reshapes and broadcasts. Each dim of the buffer is indexed
//! by an i32 block broadcastable to the result block (unit along the dims
//! it does not depend on) or by a constant; a slice shifts and scales an
//! index, a transpose permutes the indices, a reshape regroups them through
//! the row-major flat index of each group of dims (divided and taken
//! modulo), a broadcast indexes its stretched dims at 0, as the Python
//! build's planner composes them (`crates/triton`'s `emit/slices.rs` and
//! `emit/views.rs`). What a slice or concatenation reads may also be
//! arithmetic and concatenations of such reads, computed where they are
//! loaded ([`Read`]). Run upwards, the same arithmetic gives where a kernel
//! storing through views writes each element ([`Em::store_ixs`]).

use super::blocks::index_type;
use super::*;
use efir_ir::Dim;

/// An index expression over a block of rank `r`: a constant, or an i32
/// block of `shape` (rank `r`; each dim 1 or the block's size).
#[derive(Clone)]
pub(super) enum Ix<'c, 'm> {
    C(i64),
    T(Value<'c, 'm>, Vec<u64>),
}

/// What an op reads through views: a buffer at index expressions (one
/// per dim of the buffer), a pointwise op (`ew.*`, which the plan leaves
/// to its reader: `efir_triton`'s `READ_ARITH`) on such reads, or a
/// concatenation: per operand, the index of the joined dim, the operand's
/// range along it (`o..o + n`) and its read (as the Python build's
/// `emit/slices.rs`).
pub(super) enum Read<'c, 'm> {
    Buf(ValueId, Vec<Ix<'c, 'm>>),
    Ew(ValueId, Vec<Read<'c, 'm>>),
    Concat(Vec<(Ix<'c, 'm>, u64, u64, Read<'c, 'm>)>),
}

/// The groups of a reshape from extents `from` to extents `to`: dims are
/// matched in row-major groups of equal element count (each side at least
/// one dim; unit dims after a group on one side only join it). Each group
/// is `(to range, from range)`.
pub(super) type Groups = Vec<(std::ops::Range<usize>, std::ops::Range<usize>)>;

pub(super) fn groups(to: &[u64], from: &[u64]) -> Result<Groups, String> {
    let mut out = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < to.len() || j < from.len() {
        let (si, sj) = (i, j);
        let (mut pi, mut pj) = (1u128, 1u128);
        while !(pi == pj && i > si && j > sj) {
            if (pi <= pj && i < to.len()) || j >= from.len() {
                if i >= to.len() {
                    return Err("a reshape between different element counts".into());
                }
                pi *= to[i] as u128;
                i += 1;
            } else {
                pj *= from[j] as u128;
                j += 1;
            }
        }
        while i < to.len() && to[i] == 1 && (j >= from.len() || from[j] != 1) {
            i += 1;
        }
        while j < from.len() && from[j] == 1 && (i >= to.len() || to[i] != 1) {
            j += 1;
        }
        out.push((si..i, sj..j));
    }
    Ok(out)
}

impl<'c, 'm> Em<'c, 'm, '_, '_> {
    /// The offsets of dim `k` of the rank-`dims.len()` block `dims`.
    pub(super) fn ix_dim(&self, depth: usize, dims: &[Bd<'c, 'm>], k: usize) -> R<Ix<'c, 'm>> {
        let r = dims.len();
        let v = self.along(depth, dims[k].offs, dims[k].size, k, r, "i32")?;
        let mut shape = vec![1; r];
        shape[k] = dims[k].size;
        Ok(Ix::T(v, shape))
    }

    /// `x` combined with the constant `c` by `op` (`arith.muli`, ...).
    fn ix_const_op(&self, depth: usize, x: Ix<'c, 'm>, op: &str, c: i64) -> R<Ix<'c, 'm>> {
        Ok(match x {
            Ix::C(a) => Ix::C(match op {
                "arith.muli" => a * c,
                "arith.addi" => a + c,
                "arith.subi" => a - c,
                "arith.divsi" => a / c,
                _ => a % c,
            }),
            Ix::T(v, shape) => {
                let k = self.splat_const(depth, c as f64, &shape, DType::I32)?;
                let y = self.val(depth, op, &[v, k], &ty_text(&shape, "i32"), &[])?;
                Ix::T(y, shape)
            }
        })
    }

    /// `x * step + start` (`x - shift` first, where `shift` is nonzero).
    pub(super) fn ix_affine(
        &self,
        depth: usize,
        mut x: Ix<'c, 'm>,
        shift: u64,
        start: u64,
        step: u64,
    ) -> R<Ix<'c, 'm>> {
        if shift != 0 {
            x = self.ix_const_op(depth, x, "arith.subi", shift as i64)?;
        }
        if step != 1 {
            x = self.ix_const_op(depth, x, "arith.muli", step as i64)?;
        }
        if start != 0 {
            x = self.ix_const_op(depth, x, "arith.addi", start as i64)?;
        }
        Ok(x)
    }

    /// `x + y`, broadcast to the larger of their shapes.
    fn ix_add(&self, depth: usize, x: Ix<'c, 'm>, y: Ix<'c, 'm>) -> R<Ix<'c, 'm>> {
        match (x, y) {
            (Ix::C(a), Ix::C(b)) => Ok(Ix::C(a + b)),
            (Ix::C(0), t) | (t, Ix::C(0)) => Ok(t),
            (Ix::C(a), t) | (t, Ix::C(a)) => self.ix_const_op(depth, t, "arith.addi", a),
            (Ix::T(a, sa), Ix::T(b, sb)) => {
                let to: Vec<u64> = sa.iter().zip(&sb).map(|(p, q)| *p.max(q)).collect();
                let a = self.bcast(depth, a, &sa, &to, "i32")?;
                let b = self.bcast(depth, b, &sb, &to, "i32")?;
                let v = self.val(depth, "arith.addi", &[a, b], &ty_text(&to, "i32"), &[])?;
                Ok(Ix::T(v, to))
            }
        }
    }

    /// The indices of a reshape's operand (extents `from`) from those of
    /// its result (extents `to`): a group of one dim (besides units) on
    /// each side keeps its index; otherwise the group's row-major flat
    /// index is divided and taken modulo (the outermost dim needs no
    /// modulo: where the flat index passes the group, the result's mask
    /// is off); unit dims index 0.
    fn ix_regroup(
        &self,
        depth: usize,
        idx: &[Ix<'c, 'm>],
        to: &[u64],
        from: &[u64],
    ) -> R<Vec<Ix<'c, 'm>>> {
        let mut out = Vec::with_capacity(from.len());
        for (gt, gf) in groups(to, from)? {
            let group_to: Vec<usize> = gt.filter(|k| to[*k] != 1).collect();
            let nu_from: Vec<usize> = gf.clone().filter(|k| from[*k] != 1).collect();
            if group_to.len() == 1 && nu_from.len() == 1 {
                for k in gf {
                    out.push(if from[k] == 1 {
                        Ix::C(0)
                    } else {
                        idx[group_to[0]].clone()
                    });
                }
                continue;
            }
            let mut flat = Ix::C(0);
            let mut stride = 1u64;
            for k in group_to.iter().rev() {
                let term = if stride == 1 {
                    idx[*k].clone()
                } else {
                    self.ix_const_op(depth, idx[*k].clone(), "arith.muli", stride as i64)?
                };
                flat = self.ix_add(depth, term, flat)?;
                stride *= to[*k];
            }
            let outer = nu_from.first().copied();
            let mut s = 1u64;
            let mut rev = Vec::new();
            for k in gf.rev() {
                rev.push(if from[k] == 1 {
                    Ix::C(0)
                } else {
                    let mut x = flat.clone();
                    if s != 1 {
                        x = self.ix_const_op(depth, x, "arith.divsi", s as i64)?;
                    }
                    if Some(k) != outer {
                        x = self.ix_const_op(depth, x, "arith.remsi", from[k] as i64)?;
                    }
                    x
                });
                s *= from[k];
            }
            rev.reverse();
            out.extend(rev);
        }
        if out.len() != from.len() {
            return Err("a reshape whose dims could not be matched".into());
        }
        Ok(out)
    }

    /// The static extents of `y`, which `op` reads through a view.
    fn view_extents(&self, op: &str, y: ValueId) -> R<Vec<u64>> {
        let f = self.p.func;
        let t = f
            .ty(y)
            .as_tensor()
            .ok_or("a tuple where a tensor was expected")?;
        t.shape
            .iter()
            .map(|d| match d {
                Dim::Static(n) => Ok(*n),
                Dim::Axis(_) => Err(format!(
                    "`{op}` reads `%{}` through a view, but its extents are not static",
                    f.value(y).name
                )),
            })
            .collect()
    }

    /// Whether `v` reaches its buffer through a transpose or a reshape
    /// (under parallel views and slices), or is computed where it is read
    /// (a concatenation or pointwise arithmetic of such reads): then it is
    /// read through index expressions ([`Self::source_ixs`]).
    pub(super) fn through_views(&self, mut v: ValueId) -> bool {
        let f = self.p.func;
        while !self.p.buffer[v.index()] {
            let Some(i) = self.p.def[v.index()] else {
                return false;
            };
            let d = &f.ops[i];
            match d.name.as_str() {
                "par.partition" | "par.replicate" | "par.combine" | "tensor.slice" => {}
                "tensor.reshape" | "tensor.transpose" | "tensor.concat" => return true,
                // Arithmetic the plan leaves to the reader (it stores
                // what a reader cannot compute where it loads).
                n => return n.starts_with("ew."),
            }
            v = d.operands[0];
        }
        false
    }

    /// Whether `v` reaches its buffer through a transpose or a broadcast
    /// under parallel views and reshapes (a reshape of it is read through
    /// index expressions; without one, at the reshape's extents).
    pub(super) fn through_transpose(&self, mut v: ValueId) -> bool {
        let f = self.p.func;
        while !self.p.buffer[v.index()] {
            let Some(i) = self.p.def[v.index()] else {
                return false;
            };
            let d = &f.ops[i];
            match d.name.as_str() {
                "par.partition" | "par.replicate" | "par.combine" | "tensor.reshape" => {}
                "tensor.transpose" | "tensor.broadcast" => return true,
                _ => return false,
            }
            v = d.operands[0];
        }
        false
    }

    /// What `v` (read by `op`) reads, from `idx`, the indices of `v`'s
    /// dims: the buffer under parallel views, slices, transposes, reshapes
    /// and broadcasts (a stretched dim indexes 0: key/value heads repeated
    /// to their query group), with the index of each of its dims; or the
    /// pointwise ops and concatenations on such reads that the plan leaves
    /// to the reader (an operand of lower rank or of extent 1 where the
    /// result is wider is broadcast: its leading dims drop, its unit dims
    /// index 0; a concatenation's operand is read at the joined dim's
    /// index minus its start).
    pub(super) fn source_ixs(
        &self,
        op: &str,
        mut v: ValueId,
        mut idx: Vec<Ix<'c, 'm>>,
        depth: usize,
    ) -> R<Read<'c, 'm>> {
        let f = self.p.func;
        loop {
            if self.p.buffer[v.index()] {
                return Ok(Read::Buf(v, idx));
            }
            let i = self.p.def[v.index()].ok_or("a parameter that is not a buffer")?;
            let d = &f.ops[i];
            match d.name.as_str() {
                "par.partition" | "par.replicate" | "par.combine" => {}
                n if n.starts_with("ew.") => {
                    let er = self.view_extents(op, v)?;
                    if er.len() != idx.len() {
                        return Err("a pointwise op whose rank does not match its reader's".into());
                    }
                    let mut reads = Vec::with_capacity(d.operands.len());
                    for a in &d.operands {
                        let ea = self.view_extents(op, *a)?;
                        let k = er
                            .len()
                            .checked_sub(ea.len())
                            .ok_or("a pointwise operand of a higher rank")?;
                        let ia: Vec<Ix<'c, 'm>> = (0..ea.len())
                            .map(|j| {
                                if ea[j] == 1 && er[j + k] != 1 {
                                    Ix::C(0)
                                } else {
                                    idx[j + k].clone()
                                }
                            })
                            .collect();
                        reads.push(self.source_ixs(op, *a, ia, depth)?);
                    }
                    return Ok(Read::Ew(v, reads));
                }
                "tensor.concat" => {
                    let k = d.attrs.get("dim").and_then(Attr::as_int).unwrap_or(0) as usize;
                    let at = idx
                        .get(k)
                        .cloned()
                        .ok_or("a concatenation along a missing dim")?;
                    let mut parts = Vec::with_capacity(d.operands.len());
                    let mut o = 0u64;
                    for a in &d.operands {
                        let n = *self
                            .view_extents(op, *a)?
                            .get(k)
                            .ok_or("a concatenated operand without the joined dim")?;
                        let mut ia = idx.clone();
                        ia[k] = self.ix_affine(depth, at.clone(), o, 0, 1)?;
                        parts.push((at.clone(), o, n, self.source_ixs(op, *a, ia, depth)?));
                        o += n;
                    }
                    return Ok(Read::Concat(parts));
                }
                "tensor.slice" => {
                    let bounds = efir_dialect_tensor::slices::slice_bounds(d)
                        .filter(|b| b.len() == idx.len())
                        .ok_or("a slice with malformed bounds")?;
                    let mut out = Vec::with_capacity(idx.len());
                    for (x, b) in idx.into_iter().zip(&bounds) {
                        out.push(self.ix_affine(depth, x, 0, b.start, b.step)?);
                    }
                    idx = out;
                }
                "tensor.transpose" => {
                    let perm = d
                        .attrs
                        .get("perm")
                        .and_then(Attr::as_int_array)
                        .filter(|p| p.len() == idx.len())
                        .ok_or("a transpose without a matching perm")?;
                    let mut out = vec![Ix::C(0); perm.len()];
                    for (k, p) in perm.iter().enumerate() {
                        *out.get_mut(*p as usize)
                            .ok_or("a transpose with a bad perm")? = idx[k].clone();
                    }
                    idx = out;
                }
                "tensor.broadcast" => {
                    let (to, from) = (self.view_extents(op, v)?, self.view_extents(op, d.operands[0])?);
                    if to.len() != idx.len() || from.len() != to.len() {
                        return Err(format!(
                            "`{op}` reads `%{}`, a broadcast that adds dims, through a view (not covered by the TTIR path)",
                            f.value(v).name
                        ));
                    }
                    for (j, x) in idx.iter_mut().enumerate() {
                        if from[j] == 1 && to[j] != 1 {
                            *x = Ix::C(0);
                        }
                    }
                }
                "tensor.reshape" => {
                    let to = self.view_extents(op, v)?;
                    if to.len() != idx.len() {
                        return Err("a reshape whose rank does not match its reader's".into());
                    }
                    let from = self.view_extents(op, d.operands[0])?;
                    idx = self.ix_regroup(depth, &idx, &to, &from)?;
                }
                other => {
                    return Err(format!(
                        "`{op}` reads `%{}` (made by `{other}`) from memory (not covered by the TTIR path)",
                        f.value(v).name
                    ))
                }
            }
            v = d.operands[0];
        }
    }

    /// Load what `read` reads as a block of `dims` under `mask` (`None`:
    /// no lane is off): its buffers, and the arithmetic and
    /// concatenations on them (each concatenated operand loaded where it
    /// is taken, masked there so that no load leaves its buffer, and
    /// chosen with `arith.select`).
    pub(super) fn load_read(
        &mut self,
        read: Read<'c, 'm>,
        dims: &[Bd<'c, 'm>],
        mask: Option<Value<'c, 'm>>,
        depth: usize,
    ) -> R<Blk<'c, 'm>> {
        let f = self.p.func;
        match read {
            Read::Buf(b, idx) => self.load_ixs(b, dims, idx, mask, depth),
            Read::Ew(v, reads) => {
                let mut xs = Vec::with_capacity(reads.len());
                for r in reads {
                    xs.push(self.load_read(r, dims, mask, depth)?);
                }
                let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
                let (_, rdt) = static_shape(self.p, f.ty(v))?;
                self.pointwise_blocks(&op.name, &op.attrs, xs, rdt)
            }
            Read::Concat(parts) => {
                let shape: Vec<u64> = dims.iter().map(|d| d.size).collect();
                let i1 = ty_text(&shape, "i1");
                let mut acc: Option<Blk<'c, 'm>> = None;
                for (at, o, n, r) in parts {
                    // o <= at < o + n (known where `at` is a constant).
                    let inside = match at {
                        Ix::C(c) => {
                            if c >= o as i64 && c < (o + n) as i64 {
                                acc = Some(self.load_read(r, dims, mask, depth)?);
                            }
                            continue;
                        }
                        Ix::T(x, s) => {
                            let it = ty_text(&s, "i1");
                            let lo = self.splat_const(depth, o as f64, &s, DType::I32)?;
                            let hi = self.splat_const(depth, (o + n) as f64, &s, DType::I32)?;
                            let pred = |p: &str| -> (&str, String) { ("predicate", p.into()) };
                            let ge =
                                self.val(depth, "arith.cmpi", &[x, lo], &it, &[pred("5 : i64")])?;
                            let lt =
                                self.val(depth, "arith.cmpi", &[x, hi], &it, &[pred("2 : i64")])?;
                            let c = self.val(depth, "arith.andi", &[ge, lt], &it, &[])?;
                            self.bcast(depth, c, &s, &shape, "i1")?
                        }
                    };
                    let m = match mask {
                        None => inside,
                        Some(m) => self.val(depth, "arith.andi", &[m, inside], &i1, &[])?,
                    };
                    let x = self.load_read(r, dims, Some(m), depth)?;
                    acc = Some(match acc {
                        None => x,
                        Some(prev) => {
                            let prev = self.cast(&prev, x.dt)?;
                            let w = self.val(
                                depth,
                                "arith.select",
                                &[inside, x.v, prev.v],
                                &ty_text(&shape, dtype_name(x.dt)),
                                &[],
                            )?;
                            self.with(&x, w, x.dt)
                        }
                    });
                }
                acc.ok_or_else(|| "a concatenation none of whose operands is read".into())
            }
        }
    }

    /// The i64 offsets (a block of `shape`) into a buffer of extents
    /// `exts` (2^31 elements or more) at the indices `idx`: each index
    /// (i32: a dim's) widened, then scaled by its stride and summed in i64.
    fn wide_offsets(
        &self,
        depth: usize,
        idx: Vec<Ix<'c, 'm>>,
        exts: &[u64],
        shape: &[u64],
    ) -> R<Value<'c, 'm>> {
        let mut c: i64 = 0;
        let mut acc: Option<(Value<'c, 'm>, Vec<u64>)> = None;
        for (i, x) in idx.into_iter().enumerate() {
            let stride: u64 = exts[i + 1..].iter().product();
            let (v, s) = match x {
                Ix::C(k) => {
                    c += k * stride as i64;
                    continue;
                }
                Ix::T(v, s) => (v, s),
            };
            let mut w = self.widen(depth, v, &s, DType::I64)?;
            if stride != 1 {
                let k = self.splat_const(depth, stride as f64, &s, DType::I64)?;
                w = self.val(depth, "arith.muli", &[w, k], &ty_text(&s, "i64"), &[])?;
            }
            acc = Some(match acc {
                None => (w, s),
                Some((a, sa)) => {
                    let to: Vec<u64> = sa.iter().zip(&s).map(|(p, q)| *p.max(q)).collect();
                    let a = self.bcast(depth, a, &sa, &to, "i64")?;
                    let w = self.bcast(depth, w, &s, &to, "i64")?;
                    let y = self.val(depth, "arith.addi", &[a, w], &ty_text(&to, "i64"), &[])?;
                    (y, to)
                }
            });
        }
        let Some((a, s)) = acc else {
            return self.splat_const(depth, c as f64, shape, DType::I64);
        };
        let a = self.bcast(depth, a, &s, shape, "i64")?;
        if c == 0 {
            return Ok(a);
        }
        let k = self.splat_const(depth, c as f64, shape, DType::I64)?;
        self.val(depth, "arith.addi", &[a, k], &ty_text(shape, "i64"), &[])
    }

    /// A reshape `v` of `a` that splits or merges dims, where `a` reaches
    /// its buffer through a transpose or a broadcast: each dim of the buffer indexed by
    /// the result block's offsets regrouped and permuted down the chain.
    pub(super) fn reshape_ixs_load(
        &mut self,
        v: ValueId,
        a: ValueId,
        lay: &Layout,
    ) -> R<Blk<'c, 'm>> {
        let er = self.view_extents("tensor.reshape", v)?;
        let ea = self.view_extents("tensor.reshape", a)?;
        let (dims, depth) = self.dims(&er, lay)?;
        let mut idx = Vec::with_capacity(dims.len());
        for k in 0..dims.len() {
            idx.push(self.ix_dim(depth, &dims, k)?);
        }
        let idx = self.ix_regroup(depth, &idx, &er, &ea)?;
        let read = self.source_ixs("tensor.reshape", a, idx, depth)?;
        let mask = self.mask(&dims, depth)?;
        self.load_read(read, &dims, mask, depth)
    }

    /// The indices of the dims of buffer `chain[0]` at the elements of a
    /// block of the value under its chain of reshapes and transposes
    /// (`idx`, those of the block's dims): the load's index arithmetic run
    /// upwards, as the Python build's `store_indices` (a transpose
    /// permutes, a reshape regroups through the row-major flat index: a
    /// merge of heads is `h * D + d`, a split divides and takes the
    /// modulo).
    pub(super) fn store_ixs(
        &self,
        chain: &[ValueId],
        mut idx: Vec<Ix<'c, 'm>>,
        depth: usize,
    ) -> R<Vec<Ix<'c, 'm>>> {
        let f = self.p.func;
        for &y in chain.iter().rev() {
            let op = &f.ops[self.p.def[y.index()].ok_or("a view without its op")?];
            let a = op.operands[0];
            if op.name == "tensor.transpose" {
                // Dim `k` of the result is dim `perm[k]` of the operand.
                let perm = op
                    .attrs
                    .get("perm")
                    .and_then(Attr::as_int_array)
                    .filter(|p| p.len() == idx.len())
                    .ok_or("a transpose without a matching perm")?;
                idx = perm
                    .iter()
                    .map(|p| {
                        idx.get(*p as usize)
                            .cloned()
                            .ok_or_else(|| "a transpose with a bad perm".to_string())
                    })
                    .collect::<R<_>>()?;
            } else {
                let (from, to) = (
                    self.view_extents("tt.store", a)?,
                    self.view_extents("tt.store", y)?,
                );
                if from.len() != idx.len() {
                    return Err("a reshape whose rank does not match its block's".into());
                }
                idx = self.ix_regroup(depth, &idx, &from, &to)?;
            }
        }
        Ok(idx)
    }

    /// Pointers into leaf `buf.1` of buffer `buf.0` (extents `exts`, of
    /// `dt`) at the indices `idx` (one per dim of the buffer), as a block
    /// of `shape`.
    pub(super) fn ixs_ptrs(
        &self,
        buf: (ValueId, usize),
        exts: &[u64],
        dt: DType,
        shape: &[u64],
        idx: Vec<Ix<'c, 'm>>,
        depth: usize,
    ) -> R<Value<'c, 'm>> {
        if idx.len() != exts.len() {
            return Err("a view whose indices do not match its buffer's rank".into());
        }
        let elems: u128 = exts.iter().map(|e| *e as u128).product();
        let off = if index_type(elems).1 == DType::I64 {
            self.wide_offsets(depth, idx, exts, shape)?
        } else {
            let mut off = Ix::C(0);
            for (i, x) in idx.into_iter().enumerate() {
                let stride: u64 = exts[i + 1..].iter().product();
                let term = if stride == 1 {
                    x
                } else {
                    self.ix_const_op(depth, x, "arith.muli", stride as i64)?
                };
                off = self.ix_add(depth, off, term)?;
            }
            match off {
                Ix::C(c) => self.splat_const(depth, c as f64, shape, DType::I32)?,
                Ix::T(v, s) => self.bcast(depth, v, &s, shape, "i32")?,
            }
        };
        let base = *self
            .args
            .get(&buf)
            .ok_or("a buffer that is not an argument")?;
        let pt = format!("!tt.ptr<{}>", dtype_name(dt));
        let tp = ty_text(shape, &pt);
        if shape.is_empty() {
            self.val(depth, "tt.addptr", &[base, off], &pt, &[])
        } else {
            let sb = self.val(depth, "tt.splat", &[base], &tp, &[])?;
            self.val(depth, "tt.addptr", &[sb, off], &tp, &[])
        }
    }

    /// Load tensor buffer `b` at the indices `idx` (one per dim of `b`), as
    /// a block of `dims` under `mask` (`None`: no lane is off).
    pub(super) fn load_ixs(
        &self,
        b: ValueId,
        dims: &[Bd<'c, 'm>],
        idx: Vec<Ix<'c, 'm>>,
        mask: Option<Value<'c, 'm>>,
        depth: usize,
    ) -> R<Blk<'c, 'm>> {
        let (exts, dt) = static_shape(self.p, self.p.func.ty(b))?;
        let dt = efir_triton::storage_dtype(self.p, b, dt);
        let shape: Vec<u64> = dims.iter().map(|d| d.size).collect();
        let ptr = self.ixs_ptrs((b, 0), &exts, dt, &shape, idx, depth)?;
        let rt = ty_text(&shape, dtype_name(dt));
        let v = match mask {
            None => self.val(
                depth,
                "tt.load",
                &[ptr],
                &rt,
                &[("operandSegmentSizes", "array<i32: 1, 0, 0>".into())],
            )?,
            Some(m) => {
                let z = self.splat_const(depth, 0.0, &shape, dt)?;
                self.val(
                    depth,
                    "tt.load",
                    &[ptr, m, z],
                    &rt,
                    &[("operandSegmentSizes", "array<i32: 1, 1, 1>".into())],
                )?
            }
        };
        Ok(Blk {
            v,
            dims: dims.to_vec(),
            dt,
            depth,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::groups;

    #[test]
    fn groups_match_equal_products_and_absorb_units() {
        // [4, 2, 32] from [4, 64]: 4 | 2 x 32 = 64.
        assert_eq!(
            groups(&[4, 2, 32], &[4, 64]).unwrap(),
            [(0..1, 0..1), (1..3, 1..2)]
        );
        // Units after a group on one side only join it.
        assert_eq!(
            groups(&[4, 8], &[1, 4, 8, 1]).unwrap(),
            [(0..1, 0..2), (1..2, 2..4)]
        );
        assert!(groups(&[4, 8], &[4, 9]).is_err());
    }
}
