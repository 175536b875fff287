//! How a kernel's tensor-core tiles change its time: operands made in the
//! K loop, the tile's shape, and its warps against its rows.

/// How much longer a GEMM tile's products take where an operand is made
/// in the K loop (an RMS norm applied to the row tile) rather than loaded:
/// Llama's q projection (512 x 4096 x 4096, bf16) on the H100 ran 44.2 us
/// against 31.9 with the normed rows loaded, both at 128x128x64 tiles, 4
/// warps and 4 stages, and 41.7 against 31.9 at the best tiles of each
/// (`bench/gpu/prologue_probe.py`; torch.matmul 26.7).
pub(super) const COMPUTED_OPERAND: f64 = 1.35;

/// How much longer a kernel with a GEMM tile takes in programs of fewer
/// than 8 warps (one warpgroup holding the whole tile): on the H100
/// (`bench/gpu/chunk_times.py --neighbours`), 8 warps for Llama's prefill
/// up projection alone (128x128, 213 us at 4 warps) took 42 us off its
/// chunk, for its q projection (128x128, in a launch group of about 59 us)
/// 16 us, for its k projection (64x64) 12.
const FEW_WARPS: f64 = 1.3;

/// How much longer a causal attention loop takes where its query tile gives
/// each warp fewer than 16 rows: 64 query rows at 8 warps ran 34.6 us
/// against 25.8 at 4 (Llama's prefill attention chunk, H100, session 33)
/// and attn_prefill B=1 54.2 against 34.0 (H100, session 44); the estimate
/// had ranked the 8-warp schedule 0.7% faster.
const CAUSAL_THIN_ROWS: f64 = 1.45;

/// How much longer a GEMM tile of `m` rows by `n` columns takes its
/// products than a 128x128 one: each K step loads `m + n` rows of operands
/// for `2mn` flops, and a smaller tile does fewer flops a byte it stages.
/// Fitted to one H100 GEMM (512 x 4096 x 4096, bf16, operands loaded, best
/// of warps and stages, `bench/gpu/prologue_probe.py`): 64x64 46.6 us,
/// 128x64 36.2, 64x128 38.7, 64x256 35.1, 128x128 31.9, which
/// `17.2 + 1882 / I` us follows within 3% at the tile's flops an element,
/// `I = 2mn / (m + n)`. At least 1 (larger tiles are bound by registers,
/// which the spill terms count).
pub(super) fn tile_shape_factor(m: f64, n: f64) -> f64 {
    if m <= 0.0 || n <= 0.0 {
        return 1.0;
    }
    let i = 2.0 * m * n / (m + n);
    ((17.2 + 1882.0 / i) / (17.2 + 1882.0 / 128.0)).max(1.0)
}

/// The factor a kernel's time takes for its warps: a GEMM tile at fewer
/// than 8 warps (all of it longer, measured; not a kernel with a causal
/// loop: the chunk of Llama's prefill attention ran 25.8 us at 4 warps and
/// 34.6 at 8 on the H100), or a causal loop whose tensor-core products
/// (the fewest rows `dot_rows`) give each warp fewer than 16 rows
/// (Hopper's wgmma takes 64 rows a warpgroup, so 8 warps on 64 query rows
/// split the tile's columns instead).
pub(super) fn warp_factor(gemm: bool, causal: bool, warps: f64, dot_rows: f64) -> f64 {
    if gemm && warps < 8.0 && !causal {
        FEW_WARPS
    } else if causal && dot_rows < 16.0 * warps {
        CAUSAL_THIN_ROWS
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warps_against_rows() {
        assert_eq!(warp_factor(true, false, 4.0, 128.0), FEW_WARPS);
        assert_eq!(warp_factor(true, false, 8.0, 128.0), 1.0);
        // Causal: 64 query rows take 4 warps, 128 take 8.
        assert_eq!(warp_factor(true, true, 4.0, 64.0), 1.0);
        assert_eq!(warp_factor(true, true, 8.0, 64.0), CAUSAL_THIN_ROWS);
        assert_eq!(warp_factor(true, true, 8.0, 128.0), 1.0);
        assert_eq!(tile_shape_factor(128.0, 128.0), 1.0);
        assert!(tile_shape_factor(64.0, 64.0) > 1.4);
    }
}
