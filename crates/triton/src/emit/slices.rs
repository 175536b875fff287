//! `tensor.slice` and `tensor.concat` inside a kernel. Their operands are
//! buffers, or slices and parallel views of buffers ([`crate::plan()`] stores
//! every other computed operand), so each is a masked load at shifted
//! offsets: element `i` of a slice along a dim is element `start + i * step`
//! of its operand (slices of slices compose), and element `i` of a
//! concatenation is element `i - o` of the operand that starts at offset
//! `o`, chosen with `tl.where`.
//!
//! An operand may also be a transpose or a reshape (of static extents) of a
//! buffer, under the same views (the two halves of each head of a
//! projection split into heads, for a rotary embedding): then each dim of
//! the buffer is indexed by an expression of the result's offsets, composed
//! down the chain (a slice shifts and scales, a transpose permutes, a
//! reshape regroups through the row-major flat index, as in
//! [`super::views`]), and the reshaped value is never stored.

use super::views::regroup;
use super::{
    along, buf_param, buffer_bytes, dtype_bytes, extents, Blk, KernelEmitter, Layout, Val, Work, BD,
};
use crate::Extent;
use efir_ir::{Attr, Dim, ValueId};

/// The offset into the operand of a result offset `offs`.
fn shifted(offs: &str, start: u64, step: u64) -> String {
    match (start, step) {
        (0, 1) => offs.to_string(),
        (s, 1) => format!("({offs} + {s})"),
        (0, k) => format!("({offs} * {k})"),
        (s, k) => format!("({offs} * {k} + {s})"),
    }
}

/// Where the elements of a value are in a buffer: per dim, index `i` of the
/// value is index `start + i * step` of the buffer.
type Access = Vec<(u64, u64)>;

/// What a slice or concatenation reads through views: a buffer at index
/// expressions (one per dim), or the pointwise op defining a value (of
/// [`crate::plan::READ_ARITH`]) on such reads.
enum Read {
    Buf(ValueId, Vec<String>),
    Ew(ValueId, Vec<Read>),
    /// A concatenation: per operand, where it is taken (a condition on the
    /// index of the joined dim) and its read.
    Concat(Vec<(String, Read)>),
}

impl KernelEmitter<'_, '_> {
    /// The buffer that `v` (read by `op` with `access`) is read from: `v`
    /// itself, or the buffer under parallel views and slices of it (whose
    /// bounds compose into the access).
    fn source_buffer(
        &self,
        op: &str,
        mut v: ValueId,
        mut access: Access,
    ) -> Result<(ValueId, Access), String> {
        let f = self.p.func;
        loop {
            if self.p.buffer[v.index()] {
                return Ok((v, access));
            }
            let Some(i) = self.p.def[v.index()] else {
                return Ok((v, access));
            };
            let d = &f.ops[i];
            match d.name.as_str() {
                "par.partition" | "par.replicate" | "par.combine" => v = d.operands[0],
                "tensor.slice" => {
                    let bounds = efir_dialect_tensor::slices::slice_bounds(d)
                        .filter(|b| b.len() == access.len())
                        .ok_or("a slice with malformed bounds")?;
                    for ((s, t), b) in access.iter_mut().zip(&bounds) {
                        *s = b.start + *s * b.step;
                        *t *= b.step;
                    }
                    v = d.operands[0];
                }
                other => {
                    return Err(format!(
                        "`{op}` reads `%{}` (made by `{other}`) from memory, but it is not stored",
                        f.value(v).name
                    ))
                }
            }
        }
    }

    /// Whether `v` reaches its buffer through a transpose or a reshape
    /// (under parallel views and slices): then it is read through index
    /// expressions ([`Self::source_exprs`]) rather than shifted offsets.
    fn through_views(&self, mut v: ValueId) -> bool {
        let f = self.p.func;
        while !self.p.buffer[v.index()] {
            let Some(i) = self.p.def[v.index()] else {
                return false;
            };
            let d = &f.ops[i];
            match d.name.as_str() {
                "par.partition" | "par.replicate" | "par.combine" | "tensor.slice" => {}
                "tensor.reshape" | "tensor.transpose" | "tensor.concat" => return true,
                n => return crate::plan::READ_ARITH.contains(&n),
            }
            v = d.operands[0];
        }
        false
    }

    /// The buffer that `v` (read by `op`) is read from, under parallel
    /// views, slices, transposes and reshapes, and the index expression of
    /// each of its dims from `idx`, those of `v`'s dims (broadcastable
    /// expressions over the result block's offsets).
    fn source_exprs(&self, op: &str, mut v: ValueId, mut idx: Vec<String>) -> Result<Read, String> {
        let f = self.p.func;
        let statics = |y: ValueId| -> Result<Vec<u64>, String> {
            let t = f
                .ty(y)
                .as_tensor()
                .ok_or("a tuple where a tensor was expected")?;
            t.shape
                .iter()
                .map(|d| match d {
                    Dim::Static(n) => Ok(*n),
                    Dim::Axis(a) => Err(format!(
                        "`{op}` reads `%{}` through a view, but its extents are not static (|@{a}|)",
                        f.value(y).name
                    )),
                })
                .collect()
        };
        loop {
            if self.p.buffer[v.index()] {
                return Ok(Read::Buf(v, idx));
            }
            let Some(i) = self.p.def[v.index()] else {
                return Ok(Read::Buf(v, idx));
            };
            let d = &f.ops[i];
            match d.name.as_str() {
                "par.partition" | "par.replicate" | "par.combine" => {}
                n if crate::plan::READ_ARITH.contains(&n) => {
                    // Each operand at the result's indices (an operand of
                    // lower rank or of extent 1 where the result is wider is
                    // broadcast: its leading dims drop, those dims index 0).
                    let er = extents(f.ty(v));
                    let mut reads = Vec::with_capacity(d.operands.len());
                    for a in &d.operands {
                        let ea = extents(f.ty(*a));
                        let k = er
                            .len()
                            .checked_sub(ea.len())
                            .filter(|_| er.len() == idx.len())
                            .ok_or("a pointwise operand of a higher rank")?;
                        let ia: Vec<String> = (0..ea.len())
                            .map(|j| {
                                if ea[j] == Extent::N(1) && er[j + k] != Extent::N(1) {
                                    "0".to_string()
                                } else {
                                    idx[j + k].clone()
                                }
                            })
                            .collect();
                        reads.push(self.source_exprs(op, *a, ia)?);
                    }
                    return Ok(Read::Ew(v, reads));
                }
                "tensor.concat" => {
                    // Each operand at the joined dim's index minus its start,
                    // where that index is in its range.
                    let k = d.attrs.get("dim").and_then(Attr::as_int).unwrap_or(0) as usize;
                    let at = idx
                        .get(k)
                        .cloned()
                        .ok_or("a concatenation along a missing dim")?;
                    let mut parts = Vec::with_capacity(d.operands.len());
                    let mut o = 0u64;
                    for a in &d.operands {
                        let n = statics(*a)?
                            .get(k)
                            .copied()
                            .ok_or("a concatenated operand without the joined dim")?;
                        let mut ia = idx.clone();
                        if o > 0 {
                            ia[k] = format!("(({at}) - {o})");
                        }
                        let inside = format!("((({at}) >= {o}) & (({at}) < {}))", o + n);
                        parts.push((inside, self.source_exprs(op, *a, ia)?));
                        o += n;
                    }
                    return Ok(Read::Concat(parts));
                }
                "tensor.slice" => {
                    let bounds = efir_dialect_tensor::slices::slice_bounds(d)
                        .filter(|b| b.len() == idx.len())
                        .ok_or("a slice with malformed bounds")?;
                    for (x, b) in idx.iter_mut().zip(&bounds) {
                        *x = shifted(x, b.start, b.step);
                    }
                }
                "tensor.transpose" => {
                    let perm = d
                        .attrs
                        .get("perm")
                        .and_then(Attr::as_int_array)
                        .filter(|p| p.len() == idx.len())
                        .ok_or("a transpose without a matching perm")?;
                    let mut out = vec![String::new(); perm.len()];
                    for (k, p) in perm.iter().enumerate() {
                        *out.get_mut(*p as usize)
                            .ok_or("a transpose with a bad perm")? = idx[k].clone();
                    }
                    idx = out;
                }
                "tensor.reshape" => {
                    let to = statics(v)?;
                    if to.len() != idx.len() {
                        return Err("a reshape whose rank does not match its reader's".into());
                    }
                    idx = regroup(&idx, &to, &statics(d.operands[0])?)?;
                }
                other => {
                    return Err(format!(
                        "`{op}` reads `%{}` (made by `{other}`) from memory, but it is not stored",
                        f.value(v).name
                    ))
                }
            }
            v = d.operands[0];
        }
    }

    /// Load what `read` reads over the result block `dims` (under `mask`,
    /// as [`Self::load_exprs`]): its buffers, and the arithmetic on them.
    fn load_read(
        &mut self,
        read: Read,
        dims: &[BD],
        mask: Option<&str>,
        depth: usize,
    ) -> Result<String, String> {
        let f = self.p.func;
        let (v, reads) = match read {
            Read::Buf(b, idx) => return self.load_exprs(b, dims, &idx, mask, depth),
            Read::Ew(v, reads) => (v, reads),
            Read::Concat(parts) => {
                // Each operand loaded where it is taken (masked there, so
                // that no load leaves its buffer), chosen with tl.where.
                let base = mask.map_or_else(|| Self::mask(dims), str::to_string);
                let mut acc: Option<String> = None;
                for (inside, r) in parts {
                    let m = format!("{base} & {inside}");
                    let x = self.load_read(r, dims, Some(&m), depth)?;
                    acc = Some(match acc {
                        None => x,
                        Some(prev) => {
                            let w = self.fresh("v");
                            self.line(depth, format!("{w} = tl.where({inside}, {x}, {prev})"));
                            w
                        }
                    });
                }
                return acc.ok_or_else(|| "a concatenation without operands".to_string());
            }
        };
        let mut args = Vec::with_capacity(reads.len());
        for r in reads {
            args.push(self.load_read(r, dims, mask, depth)?);
        }
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let dt = f.ty(v).as_tensor().ok_or("expected a tensor")?.dtype;
        let e = super::ops::pointwise(&op.name, &op.attrs, &args, dt)?;
        let var = self.fresh("v");
        self.line(depth, format!("{var} = {e}"));
        // Operands indexed by some dims only (a bias along the last) load
        // blocks of extent 1 along the others.
        self.line(
            depth,
            format!(
                "{var} = tl.broadcast_to({var}, {})",
                super::shape_list(dims)
            ),
        );
        Ok(var)
    }

    /// Load the tensor buffer `b` at the index expressions `idx` (one per
    /// dim of `b`, over the result block `dims`), under `mask` or, without
    /// one, where the result's blocks overhang their extents.
    fn load_exprs(
        &mut self,
        b: ValueId,
        dims: &[BD],
        idx: &[String],
        mask: Option<&str>,
        depth: usize,
    ) -> Result<String, String> {
        let f = self.p.func;
        let t = f
            .ty(b)
            .as_tensor()
            .ok_or("a tuple where a tensor was expected")?;
        let exts: Vec<Extent> = t.shape.iter().map(Extent::of).collect();
        self.loads.insert((b, 0));
        let name = buf_param(f, b, 0);
        let ptr = self.ptr_at(&name, idx, &exts, None);
        let var = self.fresh("x");
        let lines = match mask {
            Some(m) => vec![format!("{var} = tl.load({ptr}, mask={m}, other=0)")],
            None => Self::masked(dims, |m| match m {
                None => format!("{var} = tl.load({ptr})"),
                Some(m) => format!("{var} = tl.load({ptr}, mask={m}, other=0)"),
            }),
        };
        for l in lines {
            self.line(depth, l);
        }
        self.work.push(Work {
            bytes: dtype_bytes(super::storage_dtype(self.p, b, t.dtype)),
            source: buffer_bytes(&t.shape, super::storage_dtype(self.p, b, t.dtype)),
            sizes: dims.iter().map(|d| d.size.clone()).collect(),
            loops: self.loops[..depth].to_vec(),
            nest: self.nest[..depth].to_vec(),
            flops: false,
            run: None,
            computed: false,
        });
        Ok(var)
    }

    /// Load the tensor buffer `b` at per-dim offsets `idx` (expressions over
    /// the result block's offsets) under `mask`, as a block of the result's
    /// `dims`.
    fn load_at(
        &mut self,
        b: ValueId,
        dims: &[BD],
        idx: &[String],
        mask: &str,
        depth: usize,
    ) -> Result<String, String> {
        let f = self.p.func;
        let t = f
            .ty(b)
            .as_tensor()
            .ok_or("a tuple where a tensor was expected")?;
        let exts: Vec<Extent> = t.shape.iter().map(Extent::of).collect();
        let at: Vec<BD> = dims
            .iter()
            .zip(idx)
            .map(|(d, i)| BD {
                size: d.size.clone(),
                offs: i.clone(),
                ext: d.ext.clone(),
                even: d.even.clone(),
            })
            .collect();
        self.loads.insert((b, 0));
        let name = buf_param(f, b, 0);
        let var = self.fresh("x");
        let line = if at.is_empty() {
            format!("{var} = tl.load({name})")
        } else {
            format!(
                "{var} = tl.load({}, mask={mask}, other=0)",
                self.ptr(&name, &at, &exts, None)
            )
        };
        self.line(depth, line);
        self.work.push(Work {
            bytes: dtype_bytes(super::storage_dtype(self.p, b, t.dtype)),
            source: buffer_bytes(&t.shape, super::storage_dtype(self.p, b, t.dtype)),
            sizes: dims.iter().map(|d| d.size.clone()).collect(),
            loops: self.loops[..depth].to_vec(),
            nest: self.nest[..depth].to_vec(),
            flops: false,
            run: super::contiguous_run(dims, &exts),
            computed: false,
        });
        Ok(var)
    }

    /// `tensor.slice`: one load at `start + offs * step` per dim.
    pub(super) fn slice(&mut self, v: ValueId, lay: &Layout) -> Result<Val, String> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let bounds =
            efir_dialect_tensor::slices::slice_bounds(op).ok_or("a slice with malformed bounds")?;
        let own: Access = bounds.iter().map(|b| (b.start, b.step)).collect();
        let dtype = super::storage_dtype(
            self.p,
            v,
            f.ty(v).as_tensor().ok_or("expected a tensor")?.dtype,
        );
        let (dims, depth) = self.dims(&extents(f.ty(v)), lay)?;
        if self.through_views(op.operands[0]) {
            if own.len() != dims.len() {
                return Err("a slice whose bounds do not match its rank".into());
            }
            let r = dims.len();
            let idx: Vec<String> = dims
                .iter()
                .zip(&own)
                .enumerate()
                .map(|(k, (d, (start, step)))| shifted(&along(&d.offs, k, r), *start, *step))
                .collect();
            let read = self.source_exprs(&op.name, op.operands[0], idx)?;
            let var = self.load_read(read, &dims, None, depth)?;
            return Ok(Val::T(Blk {
                var,
                dims,
                dtype,
                depth,
            }));
        }
        let (src, access) = self.source_buffer(&op.name, op.operands[0], own)?;
        if access.len() != dims.len() {
            return Err("a slice whose bounds do not match its rank".into());
        }
        let idx: Vec<String> = dims
            .iter()
            .zip(&access)
            .map(|(d, (start, step))| shifted(&d.offs, *start, *step))
            .collect();
        let var = self.load_at(src, &dims, &idx, &Self::mask(&dims), depth)?;
        Ok(Val::T(Blk {
            var,
            dims,
            dtype,
            depth,
        }))
    }

    /// `tensor.concat`: one masked load per operand, each at the result's
    /// offsets minus the operand's start along the joined dim.
    pub(super) fn concat(&mut self, v: ValueId, lay: &Layout) -> Result<Val, String> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let d = op.attrs.get("dim").and_then(Attr::as_int).unwrap_or(0) as usize;
        let dtype = super::storage_dtype(
            self.p,
            v,
            f.ty(v).as_tensor().ok_or("expected a tensor")?.dtype,
        );
        let (dims, depth) = self.dims(&extents(f.ty(v)), lay)?;
        let r = dims.len();
        if d >= r {
            return Err("a concatenation along a dim it does not have".into());
        }
        let pos = super::along(&dims[d].offs, d, r);
        let base = Self::mask(&dims);
        let mut acc: Option<String> = None;
        let mut o = 0u64;
        for a in &op.operands {
            let n = match extents(f.ty(*a)).get(d) {
                Some(Extent::N(n)) => *n,
                Some(Extent::Sym(s)) => {
                    return Err(format!(
                        "`%{}` concatenates along dim {d}, the symbolic extent |@{s}| of `%{}` (a concatenation's offsets must be static)",
                        f.value(v).name,
                        f.value(*a).name
                    ))
                }
                _ => return Err("a concatenation along a symbolic extent".into()),
            };
            let inside = format!("(({pos} >= {o}) & ({pos} < {}))", o + n);
            let here = |k: usize, bd: &BD| {
                if k == d && o > 0 {
                    format!("({} - {o})", bd.offs)
                } else {
                    bd.offs.clone()
                }
            };
            let x = if self.through_views(*a) {
                let idx: Vec<String> = dims
                    .iter()
                    .enumerate()
                    .map(|(k, bd)| along(&here(k, bd), k, r))
                    .collect();
                let read = self.source_exprs(&op.name, *a, idx)?;
                let m = format!("{base} & {inside}");
                self.load_read(read, &dims, Some(&m), depth)?
            } else {
                let (src, access) = self.source_buffer(&op.name, *a, vec![(0, 1); r])?;
                let idx: Vec<String> = dims
                    .iter()
                    .zip(&access)
                    .enumerate()
                    .map(|(k, (bd, (start, step)))| shifted(&here(k, bd), *start, *step))
                    .collect();
                self.load_at(src, &dims, &idx, &format!("{base} & {inside}"), depth)?
            };
            acc = Some(match acc {
                None => x,
                Some(prev) => {
                    let w = self.fresh("v");
                    self.line(depth, format!("{w} = tl.where({inside}, {x}, {prev})"));
                    w
                }
            });
            o += n;
        }
        Ok(Val::T(Blk {
            var: acc.ok_or("a concatenation without operands")?,
            dims,
            dtype,
            depth,
        }))
    }
}
