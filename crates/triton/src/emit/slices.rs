//! `tensor.slice` and `tensor.concat` inside a kernel. Their operands are
//! buffers, or slices and parallel views of buffers ([`crate::plan()`] stores
//! every other computed operand), so each is a masked load at shifted
//! offsets: element `i` of a slice along a dim is element `start + i * step`
//! of its operand (slices of slices compose), and element `i` of a
//! concatenation is element `i - o` of the operand that starts at offset
//! `o`, chosen with `tl.where`.

use super::{buf_param, dtype_bytes, extents, Blk, KernelEmitter, Layout, Val, Work, BD};
use crate::Extent;
use efir_ir::{Attr, ValueId};

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
            bytes: dtype_bytes(t.dtype),
            sizes: dims.iter().map(|d| d.size.clone()).collect(),
            loops: self.loops[..depth].to_vec(),
            flops: false,
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
        let (src, access) = self.source_buffer(&op.name, op.operands[0], own)?;
        let dtype = f.ty(v).as_tensor().ok_or("expected a tensor")?.dtype;
        let (dims, depth) = self.dims(&extents(f.ty(v)), lay)?;
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
        let dtype = f.ty(v).as_tensor().ok_or("expected a tensor")?.dtype;
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
                _ => return Err("a concatenation along a symbolic extent".into()),
            };
            let (src, access) = self.source_buffer(&op.name, *a, vec![(0, 1); r])?;
            let idx: Vec<String> = dims
                .iter()
                .zip(&access)
                .enumerate()
                .map(|(k, (bd, (start, step)))| {
                    let offs = if k == d && o > 0 {
                        format!("({} - {o})", bd.offs)
                    } else {
                        bd.offs.clone()
                    };
                    shifted(&offs, *start, *step)
                })
                .collect();
            let inside = format!("(({pos} >= {o}) & ({pos} < {}))", o + n);
            let x = self.load_at(src, &dims, &idx, &format!("{base} & {inside}"), depth)?;
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
