//! Matmul operands loaded straight from memory.
//!
//! A block that reaches a `tl.dot` as a view of a load (unit dims added or
//! dropped, dims permuted, values widened exactly, copied) would otherwise
//! reach it through `tl.permute`, `tl.reshape` and casts of the loaded
//! block. Triton then keeps the loaded tile in registers and writes it back
//! to shared memory for the dot, each iteration (measured on the H200: the
//! prefill attention kernel at 682 us against 520 us for the same algorithm
//! with 2-D loads). Such an operand is instead loaded again, directly as the
//! matrix the dot takes: its rows and columns are two dims of the buffer,
//! every other dim a single element. The first load is left to Triton's
//! dead-code elimination where nothing else reads it.

use super::{along, DType, Extent, KernelEmitter, BD};

/// A block variable that is a view of a load: the load's variable, the buffer, its extents, the
/// loaded block's dims (in buffer order) and element type, the depth of the
/// load, and per dim of the view, the buffer dim it is (`None`: a dim of
/// extent 1 the view added).
#[derive(Clone, Debug)]
pub(super) struct LoadView {
    /// The variable of the load itself.
    origin: String,
    name: String,
    exts: Vec<Extent>,
    dims: Vec<BD>,
    dtype: DType,
    depth: usize,
    map: Vec<Option<usize>>,
}

impl KernelEmitter<'_, '_> {
    /// Record that `var` is the whole load of buffer `name`.
    pub(super) fn note_load(
        &mut self,
        var: &str,
        name: &str,
        exts: &[Extent],
        dims: &[BD],
        dtype: DType,
        depth: usize,
    ) {
        self.views.insert(
            var.to_string(),
            LoadView {
                origin: var.to_string(),
                name: name.to_string(),
                exts: exts.to_vec(),
                dims: dims.to_vec(),
                dtype,
                depth,
                map: (0..dims.len()).map(Some).collect(),
            },
        );
    }

    /// Record that `var` is a view of `src` (if `src` is a view of a load):
    /// `map(src's map)` gives the buffer dim of each of `var`'s dims.
    pub(super) fn note_view(
        &mut self,
        var: &str,
        src: &str,
        map: impl FnOnce(&[Option<usize>]) -> Vec<Option<usize>>,
    ) {
        if let Some(v) = self.views.get(src) {
            let v = LoadView {
                map: map(&v.map),
                ..v.clone()
            };
            self.views.insert(var.to_string(), v);
        }
    }

    /// Record that `var` holds the values of `src` exactly (a copy, or a
    /// widening from type `from` to `to`).
    pub(super) fn note_copy(&mut self, var: &str, src: &str, from: DType, to: DType) {
        let exact = from == to
            || matches!(
                (from, to),
                (DType::F16 | DType::BF16, DType::F32 | DType::F64) | (DType::F32, DType::F64)
            );
        if exact {
            self.note_view(var, src, <[Option<usize>]>::to_vec);
        }
    }

    /// `var`'s dims `rows` and `cols` (of sizes `sr` and `sc`) as a matrix
    /// loaded directly from memory, of the buffer's element type: the new
    /// variable and that type, or `None` where `var` is not such a view
    /// (every other dim must be a single element, and the two dims whole
    /// blocks of the buffer). Elements beyond the extents are zero.
    pub(super) fn direct_matrix(
        &mut self,
        var: &str,
        rows: usize,
        cols: usize,
        sr: &str,
        sc: &str,
    ) -> Option<(String, DType)> {
        let v = self.views.get(var)?.clone();
        let (br, bc) = (*v.map.get(rows)?.as_ref()?, *v.map.get(cols)?.as_ref()?);
        if br == bc || v.dims[br].size != sr || v.dims[bc].size != sc {
            return None;
        }
        if (0..v.dims.len()).any(|i| i != br && i != bc && v.dims[i].size != "1") {
            return None;
        }
        let key = format!("{}:{br}:{bc}", v.origin);
        if let Some(x) = self.direct.get(&key) {
            return Some((x.clone(), v.dtype));
        }
        let offs: Vec<String> = v
            .dims
            .iter()
            .enumerate()
            .map(|(i, d)| match i {
                _ if i == br => along(&d.offs, 0, 2),
                _ if i == bc => along(&d.offs, 1, 2),
                _ => format!("{}[:, None]", d.offs),
            })
            .collect();
        let ptr = self.ptr_at(&v.name, &offs, &v.exts, None);
        let x = self.fresh("ld");
        let two = [v.dims[br].clone(), v.dims[bc].clone()];
        for l in Self::masked(&two, |m| match m {
            None => format!("{x} = tl.load({ptr})"),
            Some(m) => format!("{x} = tl.load({ptr}, mask={m}, other=0)"),
        }) {
            self.line(v.depth, l);
        }
        self.direct.insert(key, x.clone());
        Some((x, v.dtype))
    }
}
