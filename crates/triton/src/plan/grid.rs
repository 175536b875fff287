//! The automatic grid: every untiled dim of a kernel's result gets a grid
//! axis of its own, with default blocks that fill the SMs, keep a fused row
//! statistic's row whole and give small matmul dims blocks of 16.

use super::stateless;
use crate::{AxisInfo, Extent, Kernel};
use efir_ir::{AxisState, Dim, Func, ValueId};
use indexmap::IndexMap;

/// The extents (1 to 15) of the M, N and K dims of the matmuls computed in
/// the kernel of `body` (reached from it without crossing a buffer).
/// `tl.dot` takes blocks of at least 16; a smaller dim (the rows of a batch
/// of 8 tokens) would otherwise multiply and sum in registers, five times
/// slower than the padded dot on the H200 (gated_mlp: 96 us at B=8 against
/// 19 us at B=16 with the same plan). Such a dim gets a block of 16 (masked,
/// like any block beyond its extent): as its default where an automatic
/// grid axis tiles it, always where the program keeps it whole. A dim of
/// extent 1 (a GEMV's single row) keeps its multiply-and-sum by default,
/// with 16 a legal block for tuning to try (KERNELS.md: measure both).
pub fn small_dot_extents(
    f: &Func,
    def: &[Option<usize>],
    buffer: &[bool],
    body: ValueId,
) -> std::collections::HashSet<u64> {
    let mut out = std::collections::HashSet::new();
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![body];
    while let Some(v) = stack.pop() {
        if !seen.insert(v) {
            continue;
        }
        let Some(i) = def[v.index()] else {
            continue;
        };
        let op = &f.ops[i];
        if matches!(op.name.as_str(), "tile.matmul" | "tensor.matmul") {
            let ext = |x: ValueId, j: usize| -> Option<u64> {
                let t = f.ty(x).as_tensor()?;
                match t.shape.get(t.shape.len().checked_sub(j)?)? {
                    Dim::Static(n) => Some(*n),
                    _ => None,
                }
            };
            let (a, b) = (op.operands[0], op.operands[1]);
            for n in [ext(a, 2), ext(a, 1), ext(b, 1)].into_iter().flatten() {
                if n < 16 {
                    out.insert(n);
                }
            }
        }
        for o in &op.operands {
            if !buffer[o.index()] {
                stack.push(*o);
            }
        }
    }
    out
}

/// Whether a kernel computes a reduction without parallel state inside (not
/// its own body): a row statistic fused by
/// [`epilogues`](super::epilogues) with `broadcast`.
pub(super) fn inlines_reduction(
    f: &Func,
    def: &[Option<usize>],
    buffer: &[bool],
    body: ValueId,
) -> bool {
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![body];
    while let Some(v) = stack.pop() {
        if !seen.insert(v) {
            continue;
        }
        let Some(i) = def[v.index()] else { continue };
        let op = &f.ops[i];
        if v != body
            && matches!(op.name.as_str(), "par.reduce" | "tensor.reduce")
            && stateless(f.ty(v))
        {
            return true;
        }
        for o in &op.operands {
            if !buffer[o.index()] {
                stack.push(*o);
            }
        }
    }
    false
}

/// The largest block of a dim that a kernel with a fused row statistic keeps
/// whole (so that each program computes the statistic once).
pub(super) const WHOLE_ROW: u64 = 4096;

/// Give every untiled dim of a kernel's result a grid axis of its own.
///
/// Output elements of a kernel only depend on the same coordinates of the
/// dims they share with their operands (pointwise ops, views, matmul rows
/// and columns, the dims a reduction keeps), so any dim of the result can be
/// split across programs; the emitter pushes the split down to the loads. A
/// block as large as the dim is the untiled form. The last two dims (rows
/// and columns) get a block-size parameter; leading dims get one program per
/// index (block 1), so that matmuls inside are plain 2-D `tl.dot`s.
pub(super) fn auto_grid(
    f: &Func,
    k: &mut Kernel,
    axes: &mut IndexMap<String, AxisInfo>,
    small: &std::collections::HashSet<u64>,
    whole: bool,
) {
    let leaves = f.ty(k.body).leaves();
    let Some(t) = leaves.first() else {
        return;
    };
    if leaves.iter().any(|l| l.shape != t.shape) {
        return;
    }
    let r = t.shape.len();
    let tiled: Vec<usize> = t
        .state
        .values()
        .filter_map(|s| match s {
            AxisState::Part(d) => Some(*d),
            _ => None,
        })
        .collect();
    for (d, dim) in t.shape.iter().enumerate() {
        // A free symbolic extent is tiled like a static one at its
        // representative size (the blocks are constexprs, the extent a
        // runtime integer), except a row that a fused statistic needs
        // whole: that stays untiled, one block of its next power of two.
        let (e, extent) = match dim {
            Dim::Static(e) => (e, Extent::N(*e)),
            Dim::Axis(a) => match Extent::of(dim) {
                Extent::Sym(_) if whole && d + 1 == r => continue,
                Extent::Sym(_) => (&crate::dim_size(a), Extent::Sym(a.clone())),
                _ => continue,
            },
        };
        // (The small dims of matmuls are static ones.)
        let small_e = matches!(extent, Extent::N(_)) && small.contains(e);
        // (For a matrix, and for the row dim of a higher-rank value: one
        // query of attention decode, [B, H, 1, D]; reshapes that only add
        // or drop unit dims elsewhere keep it, see `emit_reshape`.)
        let gemv_row = *e == 1 && small_e && (r == 2 || d + 2 == r);
        if (*e <= 1 && !gemv_row) || tiled.contains(&d) {
            continue;
        }
        let name = format!("g{}_{d}", k.index);
        let top = e.next_power_of_two();
        let (domain, default) = if d + 2 >= r {
            let mut dm = Vec::new();
            let mut b = 1;
            while b <= top && b <= 1024 {
                dm.push(b);
                b *= 2;
            }
            // A dim of at most 128 (an attention head) is one block by
            // default: splitting it would recompute what it is reduced from.
            // A matmul's dim under 16 is one block of 16 (see
            // [`small_dot_extents`]).
            let sym = matches!(extent, Extent::Sym(_));
            if sym && top <= 16 {
                // A symbolic extent (a batch) represented at 16 rows or
                // fewer: blocks of 16 by default, up to 64, whatever the
                // representative size, so that at most 16 rows read the
                // weights once and take `tl.dot` (a block of 4 rows read a
                // 4096x11008 projection four times at 16 rows, and took
                // the multiply-and-sum path; bench/results/2026-12-06-s32-h100-family.json).
                while b <= 64 {
                    dm.push(b);
                    b *= 2;
                }
                (dm, 16)
            } else if small_e {
                // A GEMV's single row keeps its multiply-and-sum by default
                // (measured close to the padded dot); attention decode's
                // query row is padded: both products become `tl.dot`s, whose
                // K and V loads Triton pipelines (cp.async), where the
                // multiply-and-sum reads them with plain loads (sm_90, B=16:
                // 74 registers against 159). Grouped-query attention's
                // [B, KV, G, 1, D] too: its query reshaped from [B, H, 1, D]
                // is read through a view (`view_load`), loaded once and
                // broadcast to the block; its result stored through one
                // with the row's offsets shaping the pointers.
                dm.push(16);
                (dm, if *e == 1 && r == 2 { 1 } else { 16 })
            } else if whole && d + 1 == r && top > 128 && top <= WHOLE_ROW {
                // A row whose statistic the kernel computes: one block.
                while b <= top {
                    dm.push(b);
                    b *= 2;
                }
                (dm, top)
            } else if whole && d + 1 < r {
                // One row per program, as many programs as rows.
                (dm, 1)
            } else {
                (dm, if top <= 128 { top } else { 64 })
            }
        } else {
            (vec![1], 1)
        };
        axes.insert(
            name.clone(),
            AxisInfo {
                name: name.clone(),
                extent,
                domain,
                default,
            },
        );
        k.grid.push((name, Some(d)));
    }
}

/// Programs a kernel's default schedule should launch at least: one per SM
/// of the H200, so that a grid over a few rows (a matmul at B=1..16 over a
/// large N) streams its weights from every SM.
const FILL_PROGRAMS: u64 = 132;

/// Halve the default blocks of a kernel's own automatic grid axes over large
/// dims (extent over 128: splitting an attention head would recompute what it
/// is reduced from), largest first and not below 16, until its grid has
/// [`FILL_PROGRAMS`] programs or no block can shrink.
pub(super) fn fill_sms(k: &Kernel, axes: &mut IndexMap<String, AxisInfo>) {
    let tiles = |axes: &IndexMap<String, AxisInfo>, a: &str| -> u64 {
        let Some(i) = axes.get(a) else { return 1 };
        let ext = match &i.extent {
            Extent::N(_) | Extent::Sym(_) => i.extent.size().unwrap_or(1),
            Extent::Tiles(b) => match axes.get(b) {
                Some(bi) => match bi.extent.size() {
                    Some(n) => n.div_ceil(bi.default.max(1)),
                    None => 1,
                },
                None => 1,
            },
        };
        ext.div_ceil(i.default.max(1))
    };
    let own = format!("g{}_", k.index);
    loop {
        // Saturating: a grid of 2^40 x 2^40 tiles overflowed (a panic in
        // debug builds, a wrapped count in release; issue 30).
        let programs: u64 = k
            .grid
            .iter()
            .map(|(a, _)| tiles(axes, a))
            .fold(1, u64::saturating_mul);
        if programs >= FILL_PROGRAMS {
            return;
        }
        let best = k
            .grid
            .iter()
            .filter(|(a, _)| a.starts_with(&own))
            .filter_map(|(a, _)| {
                let i = axes.get(a)?;
                let big = i.extent.size().is_some_and(|e| e > 128);
                (big && i.default > 16 && i.domain.contains(&(i.default / 2)))
                    .then_some((i.default, a.clone()))
            })
            .max();
        let Some((_, a)) = best else { return };
        if let Some(i) = axes.get_mut(&a) {
            i.default /= 2;
        }
    }
}
