//! Reshapes that split or merge dims, as index arithmetic on a load.
//!
//! A block of `reshape(x)` is not a reshape of a block of `x` where the
//! reshape splits or merges dims (a block of 4096 -> 32x128 heads need not
//! be whole heads). Where `x` is a buffer, seen through a chain of
//! reshapes and transposes (the head split after a projection, the merge of
//! heads before the output projection), the block is loaded directly: each
//! dim of the buffer is indexed by an expression of the requested block's
//! offsets (for a reshape, the row-major flat index of the dims it groups,
//! divided and taken modulo; for a transpose, the permuted offsets; for a
//! broadcast, index 0 of the stretched dims: key/value heads repeated to
//! their query group). No copy of the buffer is made in any layout.

use super::*;
use efir_ir::Dim;

impl KernelEmitter<'_, '_> {
    /// The block of `v` (a reshape) in tiling `lay`, loaded through the
    /// chain of reshapes and transposes down to a buffer; `None` where the
    /// chain meets another op first or a dim is not static.
    pub(super) fn view_load(&mut self, v: ValueId, lay: &Layout) -> Option<Result<Val, String>> {
        let f = self.p.func;
        let t = f.ty(v).as_tensor()?.clone();
        let exts: Vec<Extent> = t.shape.iter().map(Extent::of).collect();
        // The chain down to a buffer, checked before anything is emitted.
        // (`v` itself may be a buffer: the kernel's own result.)
        let mut chain = Vec::new();
        let mut x = v;
        while x == v || !self.p.buffer[x.index()] {
            let op = &f.ops[self.p.def[x.index()]?];
            if !matches!(
                op.name.as_str(),
                "tensor.reshape"
                    | "tensor.transpose"
                    | "tensor.broadcast"
                    | "par.partition"
                    | "par.replicate"
                    | "par.combine"
            ) {
                return None;
            }
            let static_dims = |y: ValueId| {
                f.ty(y)
                    .as_tensor()
                    .is_some_and(|t| t.shape.iter().all(|d| matches!(d, Dim::Static(_))))
            };
            if !static_dims(x) || !static_dims(op.operands[0]) {
                return None;
            }
            chain.push(x);
            x = op.operands[0];
        }
        let buf = x;
        let bt = f.ty(buf).as_tensor()?.clone();
        if !matches!(f.ty(buf), Type::Tensor(_)) {
            return None;
        }
        Some(self.view_load_chain(v, &exts, lay, &chain, buf, bt.dtype))
    }

    fn view_load_chain(
        &mut self,
        v: ValueId,
        exts: &[Extent],
        lay: &Layout,
        chain: &[ValueId],
        buf: ValueId,
        dtype: DType,
    ) -> Result<Val, String> {
        let f = self.p.func;
        let (dims, depth) = self.dims(exts, lay)?;
        let r = dims.len();
        // Index expressions of the current value's dims (broadcastable to
        // the block's rank), from `v` down to the buffer.
        // A tiled unit dim (a query row padded to a 16-row dot block)
        // indexes 0 and is loaded once, unmasked, then broadcast to its
        // block: the rows beyond the one are copies of it (a lazy
        // broadcast, as in `emit_reshape`), never read past the buffer.
        let padded: Vec<usize> = (0..r).filter(|j| dims[*j].padded_unit()).collect();
        let mut idx: Vec<String> = dims
            .iter()
            .enumerate()
            .map(|(j, d)| {
                if padded.contains(&j) {
                    "0".to_string()
                } else {
                    along(&d.offs, j, r)
                }
            })
            .collect();
        let statics = |y: ValueId| -> Vec<u64> {
            f.ty(y)
                .as_tensor()
                .map(|t| {
                    t.shape
                        .iter()
                        .map(|d| match d {
                            Dim::Static(n) => *n,
                            Dim::Axis(_) => 1,
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut stretched = !padded.is_empty();
        for &y in chain {
            let op = &f.ops[self.p.def[y.index()].ok_or("no def")?];
            let a = op.operands[0];
            if op.name.starts_with("par.") {
                // Parallel views: the same elements.
                continue;
            }
            if op.name == "tensor.transpose" {
                let perm = op
                    .attrs
                    .get("perm")
                    .and_then(Attr::as_int_array)
                    .ok_or("transpose without perm")?;
                let mut out = vec![String::new(); perm.len()];
                for (k, p) in perm.iter().enumerate() {
                    out[*p as usize] = idx[k].clone();
                }
                idx = out;
            } else if op.name == "tensor.broadcast" {
                // A stretched dim (extent 1 in the operand) is index 0 (the
                // loaded block is broadcast to its extents below).
                let (ea, er) = (statics(a), statics(y));
                if ea.len() != er.len() || idx.len() != er.len() {
                    return Err("a broadcast that adds dims, read through a view".into());
                }
                for (j, x) in idx.iter_mut().enumerate() {
                    if ea[j] == 1 && er[j] != 1 {
                        *x = "0".into();
                    }
                }
                stretched = true;
            } else {
                idx = regroup(&idx, &statics(y), &statics(a))?;
            }
        }
        let bexts: Vec<Extent> = f
            .ty(buf)
            .as_tensor()
            .ok_or("expected a tensor")?
            .shape
            .iter()
            .map(Extent::of)
            .collect();
        self.loads.insert((buf, 0));
        let name = buf_param(f, buf, 0);
        let ptr = self.ptr_at(&name, &idx, &bexts, None);
        let var = self.fresh("x");
        let mut loaded = dims.clone();
        for j in &padded {
            loaded[*j].even = Even::Yes;
        }
        for l in Self::masked(&loaded, |m| match m {
            None => format!("{var} = tl.load({ptr})"),
            Some(m) => format!("{var} = tl.load({ptr}, mask={m}, other=0)"),
        }) {
            self.line(depth, l);
        }
        if stretched {
            // Offsets of a stretched dim may appear in no index: the
            // pointers (so the load) then have extent 1 along it.
            self.line(
                depth,
                format!(
                    "{var} = tl.broadcast_to({var}, {})",
                    super::shape_list(&dims)
                ),
            );
        }
        self.work.push(Work {
            bytes: dtype_bytes(super::storage_dtype(self.p, buf, dtype)),
            source: f.ty(buf).as_tensor().map_or(0.0, |t| {
                buffer_bytes(&t.shape, super::storage_dtype(self.p, buf, t.dtype))
            }),
            sizes: dims.iter().map(|d| d.size.clone()).collect(),
            loops: self.loops[..depth].to_vec(),
            nest: self.nest[..depth].to_vec(),
            flops: false,
            run: None,
            computed: false,
        });
        let _ = v;
        Ok(Val::T(Blk {
            var,
            dims,
            dtype: super::storage_dtype(self.p, buf, dtype),
            depth,
        }))
    }
}

/// The index expressions of a reshape's operand (extents `from`) from
/// those of its result (extents `to`): dims are matched in groups of equal
/// element count (row-major); a group of one dim (besides units) on each
/// side keeps its index, others go through the group's flat index, divided
/// and taken modulo; unit dims index 0.
pub(super) fn regroup(idx: &[String], to: &[u64], from: &[u64]) -> Result<Vec<String>, String> {
    let mut out = Vec::with_capacity(from.len());
    let (mut i, mut j) = (0, 0);
    while i < to.len() || j < from.len() {
        // The next group: the shortest prefixes of equal product, each side
        // at least one dim.
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
        // Unit dims after it on one side only join it.
        while i < to.len() && to[i] == 1 && (j >= from.len() || from[j] != 1) {
            i += 1;
        }
        while j < from.len() && from[j] == 1 && (i >= to.len() || to[i] != 1) {
            j += 1;
        }
        let group_to: Vec<usize> = (si..i).filter(|k| to[*k] != 1).collect();
        let single = group_to.len() == 1 && (sj..j).filter(|k| from[*k] != 1).count() == 1;
        // Row-major flat index of the group's result dims.
        let mut flat = String::new();
        let mut stride = 1u64;
        for k in group_to.iter().rev() {
            let term = if stride == 1 {
                format!("({})", idx[*k])
            } else {
                format!("({}) * {stride}", idx[*k])
            };
            flat = if flat.is_empty() {
                term
            } else {
                format!("{term} + {flat}")
            };
            stride *= to[*k];
        }
        let mut s = 1u64;
        let mut rev = Vec::new();
        for k in (sj..j).rev() {
            rev.push(if from[k] == 1 {
                "0".to_string()
            } else if single {
                idx[group_to[0]].clone()
            } else if s == 1 {
                format!("(({flat}) % {})", from[k])
            } else {
                format!("((({flat}) // {s}) % {})", from[k])
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

#[cfg(test)]
mod tests {
    use super::regroup;

    fn ix(n: usize) -> Vec<String> {
        (0..n).map(|k| format!("i{k}")).collect()
    }

    #[test]
    fn a_split_divides_and_a_merge_flattens() {
        // [4, 64] viewed as [4, 2, 32]: the operand's column is 32 * h + d.
        assert_eq!(
            regroup(&ix(3), &[4, 2, 32], &[4, 64]).unwrap(),
            ["i0", "(((i1) * 32 + (i2)) % 64)"]
        );
        // [4, 64] viewed from [4, 2, 32]: h = m // 32, d = m % 32.
        assert_eq!(
            regroup(&ix(2), &[4, 64], &[4, 2, 32]).unwrap(),
            ["i0", "((((i1)) // 32) % 2)", "(((i1)) % 32)"]
        );
        // Unit dims index 0; lone dims keep their index.
        assert_eq!(
            regroup(&ix(2), &[4, 8], &[1, 4, 8, 1]).unwrap(),
            ["0", "i0", "i1", "0"]
        );
        assert_eq!(
            regroup(&ix(4), &[1, 4, 1, 8], &[4, 8]).unwrap(),
            ["i1", "i3"]
        );
        assert!(regroup(&ix(2), &[4, 8], &[4, 9]).is_err());
    }
}
