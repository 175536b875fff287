//! The static estimate of a plan: memory traffic, matmul flops, launches
//! and the largest block, from the work each emitted kernel records.

use super::*;
use indexmap::IndexMap;

mod defaults;
mod groups;
mod model;
mod sizes;
mod tiles;
mod waves;

pub(crate) use defaults::choose_defaults;
use groups::group_time;
use model::{model, Model};
use sizes::{KernelSizes, Sizes};
use tiles::{tile_shape_factor, warp_factor, COMPUTED_OPERAND};

/// A static estimate of a program at the default configuration: global
/// memory traffic (every program's loads and stores, loops included), matmul
/// flops and kernel launches, and a time from the H200's copy bandwidth and
/// fp16 matmul rate (WORKLOADS.md), per kernel scaled by the share of the
/// 132 SMs its grid occupies, plus 2 µs per launch (independent kernels
/// launched together count once). It ranks candidates;
/// it is not a measurement.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Estimate {
    /// Kernel launches.
    pub kernels: usize,
    /// Bytes moved to and from global memory.
    pub bytes: f64,
    /// Matmul flops.
    pub flops: f64,
    /// The estimated time in microseconds.
    pub time_us: f64,
    /// Elements of the largest block a program holds (matmul operands and
    /// result together, or a block it reduces).
    pub largest_block: f64,
    /// Shared memory (bytes) the most demanding kernel stages for its
    /// pipelined (`tl.dot`) loops: num_stages of every tile such a loop
    /// loads a trip (an upper bound; the default schedule keeps it within
    /// the SM's 227 KB).
    pub shared_bytes: f64,
    /// Elements a thread holds of the largest block a kernel loads outside
    /// its loops, counted with the block's masked rows (Triton allocates
    /// them): a row loaded whole to compute its statistics.
    pub whole_block_regs: f64,
}

/// One kernel's share of a plan's [`Estimate`] (for `--print-plan`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct KernelEstimate {
    /// Programs of its grid.
    pub programs: f64,
    /// Waves of programs (beyond those the SMs keep resident).
    pub waves: f64,
    /// Its traffic and products at the rates the programs reach (us).
    pub stream_us: f64,
    /// Its programs' loop trips one after another, over the waves (us).
    pub serial_us: f64,
    /// The factor for registers that spill or blocks beyond them (1: none).
    pub scale: f64,
    /// `max(stream, serial) x scale` (us; launches not counted).
    pub time_us: f64,
    /// Whether it has a GEMM tile (see [`gemm_tile`]).
    pub gemm: bool,
    /// The bytes one stage of its pipelined (`tl.dot`) loops' tiles takes
    /// in shared memory (the largest loop's).
    pub stage_bytes: f64,
    /// Its programs over those the SMs hold at once by shared memory,
    /// registers and warps (`waves::per_sm`): at most 1, all run at once.
    pub fill: f64,
    /// Elements of the f32 accumulators of its tensor-core products.
    pub acc_elems: f64,
    /// The factor for a GEMM tile at fewer than 8 warps (1: none).
    pub few: f64,
}

/// The latency of one loop trip of a program (microseconds), a lower bound
/// on a kernel's time with its longest program's trips.
const LOOP_TRIP_US: f64 = 0.18;

/// The elements of a statistics loop's row that count as one serial trip
/// (see `serial_trips` in [`estimate_detail`]).
const STAT_ROW_TRIP: f64 = 1024.0;

/// The trips of a statistics loop that overlap as one (see
/// [`STAT_ROW_TRIP`]): 16 measured (16 trips of 64 over rows of 1,024).
const STAT_OVERLAP: f64 = 16.0;

/// Streaming multiprocessors of the H200.
const SMS: f64 = 132.0;

/// The latency (microseconds) a loop trip waits for one load it streams
/// from DRAM, where nothing overlaps it with other trips. Llama MLP
/// projections at batch 1 on the H200 (session 29), whose loops over K run
/// on the CUDA cores (blocks under 16 rows: no `tl.dot`, so Triton does not
/// pipeline them), took 1.3-1.5 us a trip whatever the tile (4-16 KB):
/// rmsnorm_mlp c5's gate loop at K blocks 32/64/128, 200.8/142.3/84.7 us.
/// 1.0 (with the loops a `tl.dot` pipelines dividing it by num_stages - 1)
/// ranks session 29's 503 timed schedules best
/// (`bench/gpu/estimate_points.py`: mean Spearman over the 23 cases 0.50
/// with this term alone, 0.49 at 1.3, 0.18 without it).
const DRAM_TRIP_US: f64 = 1.0;

/// The latency (microseconds) a loop trip waits for a load that hits L2
/// (a buffer under [`DRAM_TRAFFIC`] bytes): 0.4 ranks session 29's timed
/// schedules best (mean Spearman 0.61 per case; 0.55 without the term, 0.60
/// at 0.2-0.5, 0.57 at 1.0).
const L2_TRIP_US: f64 = 0.4;

/// A load from a buffer of at least this many bytes, whose traffic over the
/// kernel reaches as many, streams from DRAM (a trip waits
/// [`DRAM_TRIP_US`] for it); a smaller buffer, however often its programs
/// re-read it (the rows a norm's statistics loops read again in every
/// program of a split-K matmul, a norm's weights), is taken to stay in L2.
const DRAM_TRAFFIC: f64 = 4.0e6;

/// A buffer of at most this many bytes, once read, stays in L2 (a third of
/// the H100's 50 MB, the H200's 60 MB: other buffers share it): programs
/// that read it again read L2 (see [`dram_traffic`]).
const L2_RESIDENT: f64 = 16.0e6;

/// The rate (bytes/s) of loads served by L2: about twice DRAM's.
const L2_RATE: f64 = 8.0e12;

/// The part of a load's `traffic` (bytes over all programs) that DRAM
/// serves, for a buffer of `source` bytes read by `programs` programs of
/// which `resident` run at once. A buffer read R = traffic / source times
/// is read by programs spread over the grid (at worst evenly); those of one
/// wave (R x resident / programs of them, at most R) share each tile
/// through L2, so DRAM serves traffic over that many, and a buffer under
/// [`L2_RESIDENT`] at most once. The rest comes from L2. A 512-row matmul
/// by a 4096x14336 weight in 128x128 tiles reads the weight 4 times and the
/// 4 MB rows 112 times; measured on the H100 at 103-120 us against cuBLAS's
/// 97-105 (bench/results/2026-12-06-s33-h100-gemm.json), where counting
/// every re-read from DRAM estimated 226-230 us.
fn dram_traffic(traffic: f64, source: f64, programs: f64, resident: f64) -> f64 {
    if source <= 0.0 || traffic <= source {
        return traffic;
    }
    let r = traffic / source;
    let together = (r * resident / programs.max(1.0)).clamp(1.0, r);
    let dram = traffic / together;
    if source <= L2_RESIDENT {
        dram.min(source)
    } else {
        dram
    }
}

/// Whether `w` is a GEMM tile: a `tl.dot` on the tensor cores of at least
/// 64 rows, 64 columns and 64 of K (lora's rank-16 outer product, 4096x16
/// by 16x4096, is not one: costed with L2 reuse it ranked first at B=1 and
/// measured 22.0 us against the former choice's 16.5). A kernel with one is
/// costed with L2 reuse ([`dram_traffic`]) and its tile's footprint is its
/// accumulator; under 64 rows or columns a matmul streams its weights, and
/// the estimate keeps counting every load from DRAM (measured better for
/// the suite's matmuls of 1-16 rows: with L2 reuse, the untuned choice of
/// lora B=1 and B=16 and rmsnorm_swiglu B=8 measured 19-48% slower on the
/// H100, bench/results/2026-12-06-s33-h100-ab.json).
fn gemm_tile(w: &Work, size: &dyn Fn(&str) -> f64, raw: &dyn Fn(&str) -> f64) -> bool {
    let n = w.sizes.len();
    on_tensor_cores(w, size, raw) && w.sizes[n - 3..].iter().all(|s| size(s) >= 64.0)
}

/// Whether `w` is a matrix product that Triton runs on the tensor cores:
/// every block of its last three dims (before masking, `raw`) at least 16,
/// as the emitted `tl.dot` branch requires.
fn on_tensor_cores(w: &Work, size: &dyn Fn(&str) -> f64, raw: &dyn Fn(&str) -> f64) -> bool {
    let n = w.sizes.len();
    w.flops
        && n >= 3
        && w.sizes[n - 3..]
            .iter()
            .all(|s| match s.strip_prefix("BLOCK_") {
                Some(a) => raw(a) >= 16.0,
                None => size(s) >= 16.0,
            })
}

/// Whether a kernel loads, after its K loop, a block of its matmul's
/// output tile (an epilogue operand: the up projection's tile that the
/// gate projection's `silu(gate) * up` multiplies).
pub(crate) fn epilogue_tile_load(k: &EmittedKernel) -> bool {
    let tiles: Vec<(&String, &String)> = k
        .work
        .iter()
        .filter(|w| w.flops && w.sizes.len() >= 3)
        .map(|w| {
            let n = w.sizes.len();
            (&w.sizes[n - 3], &w.sizes[n - 1])
        })
        .collect();
    k.work.iter().any(|w| {
        !w.flops
            && w.source > 0.0
            && w.loops.is_empty()
            && tiles
                .iter()
                .any(|(r, c)| w.sizes.contains(r) && w.sizes.contains(c))
    })
}

/// Whether a kernel has a causally clipped loop (attention's).
fn causal_kernel(k: &EmittedKernel) -> bool {
    k.work.iter().flat_map(|w| &w.loops).any(|l| is_clipped(l))
}

/// The warps of kernel `ki` at the plan's schedule (its own, else the plan's).
fn kernel_warps(p: &Plan<'_>, ki: usize) -> f64 {
    f64::from(p.kernel_warps.get(ki).copied().flatten().unwrap_or(p.warps))
}

/// The stages of kernel `i`'s pipelined loops at the plan's schedule (its
/// own, else the plan's).
fn kernel_stages(p: &Plan<'_>, ki: usize) -> f64 {
    f64::from(
        p.kernel_stages
            .get(ki)
            .copied()
            .flatten()
            .unwrap_or(p.stages),
    )
}

/// Shared memory a block of the H200 may use (227 KB).
const SHARED_BYTES: f64 = 232_448.0;

/// Warps an SM keeps resident for the latency model (a quarter of its 64:
/// the registers of a matmul tile allow about that many).
const RESIDENT_WARPS: f64 = 16.0;

/// The spill factor of a GEMM tile whose operand is made in its K loop,
/// from its accumulator's and the made operand's elements a thread: such a
/// kernel needs about `acc + 1.9 x operand + 13` registers a thread of 255
/// (Llama's q projection with its RMS norm prologue, bf16, compiled for
/// sm_90 at 4 warps: 128x64 tiles by 64 of K 199 registers, 64x128 139,
/// 128x128 242, 64x256 215, 128x64 by 128 of K 255 with 108 bytes spilled;
/// `bench/gpu/ttir_static.py`'s compile), squared beyond it as the other
/// spill terms.
fn made_spill(acc: f64, operand: f64) -> f64 {
    ((acc + 1.9 * operand + 13.0) / 255.0).powi(2).max(1.0)
}

/// The spill factor of a product on the CUDA cores (multiply-and-sum: a
/// GEMV's K loop) from its product block's and loaded operand's 32-bit
/// words a thread, `x`: such a kernel takes about `1.1 x + 40` registers a
/// thread of 255 (Llama decode's gate/up GEMV, bf16, sm_90 at 4 warps:
/// [1, 256, 64] blocks 252 registers, [1, 256, 32] 144, [1, 128, 32] 80,
/// [1, 256, 16] 86; at 8 warps [1, 256, 64] 144; [1, 512, 64] 255 with
/// 632 bytes spilled, `bench/gpu/ttir_static.py`'s compile), squared
/// beyond it as the other spill terms. On the H100 that spilling kernel
/// took 145 us where [1, 256, 32] took 84 (`bench/gpu/module_probe.py`,
/// bench/results/2026-12-06-s37-h100-probe.json).
fn cuda_core_spill(x: f64) -> f64 {
    ((1.1 * x + 40.0) / 255.0).powi(2).max(1.0)
}

/// The H200's dense fp16 matmul rate (flop/s).
const MATMUL_RATE: f64 = 671e12;

/// The H200's copy bandwidth (bytes/s, WORKLOADS.md).
const DRAM_RATE: f64 = 4.27e12;

/// The time of a kernel launch (microseconds).
const LAUNCH_US: f64 = 2.0;

/// The share of the matmul rate a block product `[.., M, K, N]` reaches:
/// the tensor cores' instructions take 64 rows, 64 columns and 32 of K at a
/// time at full rate (a smaller block wastes the rest), at least 1/64.
fn dot_efficiency(sizes: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = sizes.collect();
    if v.len() < 3 {
        return 1.0;
    }
    let n = v.len();
    let (m, k, nn) = (v[n - 3], v[n - 2], v[n - 1]);
    let e = (m.min(64.0) / 64.0) * (nn.min(64.0) / 64.0) * (k.min(32.0) / 32.0);
    e.max(1.0 / 64.0)
}

/// [`dot_efficiency`] of a product whose blocks (before masking) are
/// `padded`: under 16 in any dim, the kernel multiplies on the CUDA cores
/// (about a tenth of the tensor cores' rate, in registers).
fn dot_rate_share(padded: &[f64], real: impl Iterator<Item = f64>) -> f64 {
    let n = padded.len();
    if n >= 3 && padded[n - 3..].iter().any(|&b| b < 16.0) {
        return 1.0 / 10.0 * dot_efficiency(real).max(1.0 / 6.4);
    }
    dot_efficiency(real)
}

/// The DRAM and L2 move whole sectors of this many bytes.
const SECTOR: f64 = 32.0;

/// How many times its bytes a load or store moves: a block whose rows run
/// fewer than [`SECTOR`] contiguous bytes along the buffer's last dim moves
/// a whole sector per row (the flash-decoding combine of attention decode
/// at B=1, one head dim's element per program: 4 bytes of each 32).
fn sector_waste(w: &Work, size: &dyn Fn(&str) -> f64) -> f64 {
    match &w.run {
        Some(s) if w.bytes > 0 => {
            let run = size(s).max(1.0) * w.bytes as f64;
            (SECTOR / run).max(1.0)
        }
        _ => 1.0,
    }
}

/// A kernel's own blocks (see `Plan::kernel_blocks`) as the estimate reads
/// them: those that replace an axis's block, and the sub-block of the loop
/// over its tile of a collected axis (at most that tile, and the extent).
fn own_blocks(
    p: &Plan<'_>,
    k: &EmittedKernel,
    ov: &IndexMap<String, u64>,
) -> (IndexMap<String, u64>, Option<f64>) {
    let mut blocks = ov.clone();
    let sub = k.sub_loop.as_ref().and_then(|a| {
        let i = p.axes.get(a)?;
        let b = blocks.shift_remove(a).unwrap_or(i.default).min(i.default);
        Some(match i.extent.size() {
            Some(e) => b.min(e.max(1)),
            None => b,
        } as f64)
    });
    (blocks, sub)
}

/// A loop nest of a kernel as the estimate's latency term reads it.
#[derive(Default)]
struct Nest {
    loops: Vec<usize>,
    trips: f64,
    dram_loads: f64,
    l2_loads: f64,
    /// Bytes a trip loads (every load of the nest, per program).
    tile_bytes: f64,
    dot: bool,
}

pub(super) fn estimate_of(p: &Plan<'_>, ks: &[EmittedKernel]) -> Estimate {
    estimate_detail(p, ks).0
}

/// [`estimate_of`] with each kernel's share.
fn estimate_detail(p: &Plan<'_>, ks: &[EmittedKernel]) -> (Estimate, Vec<KernelEstimate>) {
    let gpu = model();
    let sizes = Sizes::new(p);
    let mut est = Estimate {
        kernels: ks.len(),
        ..Estimate::default()
    };
    let mut times: Vec<f64> = Vec::with_capacity(ks.len());
    let mut detail: Vec<KernelEstimate> = Vec::with_capacity(ks.len());
    for (ki, k) in ks.iter().enumerate() {
        let t = kernel_time(p, gpu, ki, k, &sizes.kernel(ki, k));
        est.bytes += t.bytes;
        est.flops += t.flops;
        est.shared_bytes = est
            .shared_bytes
            .max(t.detail.stage_bytes * kernel_stages(p, ki));
        times.push(t.time_us);
        detail.push(t.detail);
    }
    // Blocks far beyond what fits in registers spill (or do not compile):
    // scale a kernel's time by how far its largest block overshoots 32K
    // elements (that kernel's, not the program's: a 4096-wide block in a
    // small kernel beside the projections measured fine, rmsnorm_swiglu B=1
    // c89 in session 29, 160 us where scaling the whole program put it at
    // 3.8 ms).
    let mut largest: f64 = 0.0;
    let mut whole_regs: f64 = 0.0;
    for (ki, k) in ks.iter().enumerate() {
        let (scale, own, whole) = register_scale(p, ki, k, &sizes.kernel(ki, k));
        largest = largest.max(own);
        whole_regs = whole_regs.max(whole);
        detail[ki].scale = scale;
        detail[ki].time_us = times[ki] * scale;
    }
    est.largest_block = largest;
    est.whole_block_regs = whole_regs;
    // 2 us per launch: a launch group of independent kernels is one
    // (`host::launch_groups`; at the default schedule its kernels share
    // warps and stages, so they are launched together), and its members'
    // programs run side by side (`group_time`).
    let mut time = 0.0;
    let mut launches = 0usize;
    // Launched together only where its kernels share warps and stages at
    // this schedule (`run()`'s test).
    let ws = |i: usize| {
        (
            p.kernel_warps[i].unwrap_or(p.warps),
            p.kernel_stages[i].unwrap_or(p.stages),
        )
    };
    for g in super::host::launch_groups(p, ks) {
        if g.len() > 1 && g.iter().all(|&i| ws(i) == ws(g[0])) {
            let members: Vec<&KernelEstimate> = g.iter().map(|&i| &detail[i]).collect();
            time += group_time(gpu, &members, kernel_warps(p, g[0]));
            launches += 1;
        } else {
            time += g.iter().map(|&i| detail[i].time_us).sum::<f64>();
            launches += g.len();
        }
    }
    est.time_us = time + gpu.launch_us * launches as f64;
    (est, detail)
}

/// What [`kernel_time`] finds of one kernel.
struct KernelTime {
    /// Its time before the register scale ([`register_scale`]).
    time_us: f64,
    /// Bytes it moves from DRAM.
    bytes: f64,
    /// Its flops.
    flops: f64,
    /// Its share of the estimate, but for `scale` and `time_us`.
    detail: KernelEstimate,
}

/// One kernel's time at the plan's schedule: its DRAM and L2 stream and
/// its products against the GPU's rates, over the programs' waves, or its
/// programs' loop trips one after another, whichever is longer.
fn kernel_time(
    p: &Plan<'_>,
    gpu: &Model,
    ki: usize,
    k: &EmittedKernel,
    kz: &KernelSizes<'_, '_, '_>,
) -> KernelTime {
    let tiles = |a: &str| kz.tiles(a);
    let size = |s: &str| kz.size(s);
    let sub = kz.sub;
    let programs: f64 = k.grid.iter().map(|a| tiles(a)).product();
    let warps = kernel_warps(p, ki);
    let resident = gpu.sms * (gpu.resident_warps / warps.max(1.0)).max(1.0);
    let (mut bytes, mut l2_bytes, mut flops, mut dot_s) = (0.0, 0.0, 0.0, 0.0);
    // Elements of the f32 accumulators of its tensor-core products.
    let mut acc_elems = 0.0;
    // The fewest rows of a tensor-core product's tile.
    let mut dot_rows = f64::INFINITY;
    // Per loop nest a program runs (loops one after another are separate
    // nests, even over one axis): its trips, the loads of a trip that
    // stream from DRAM, and whether a `tl.dot` in it (every block at
    // least 16) lets Triton pipeline its loads.
    let mut nests: Vec<Nest> = Vec::new();
    let gemm = k
        .work
        .iter()
        .any(|w| gemm_tile(w, &size, &|a| kz.raw_block(a)));
    for w in &k.work {
        // A causally clipped loop runs about half its tiles on average.
        let trips: f64 = w
            .loops
            .iter()
            .map(|a| {
                if let Some(b) = a.strip_suffix("/causal") {
                    (tiles(b) + 1.0) / 2.0
                } else if a.ends_with("/diag") {
                    // The diagonal tiles of a split causal loop (about
                    // one; the other loop counts half of all).
                    1.0
                } else if let Some(b) = a.strip_suffix("/stat") {
                    // A statistics loop on blocks of its own.
                    let e = match p.axes.get(b).and_then(|i| i.extent.size()) {
                        Some(n) => n as f64,
                        _ => 1.0,
                    };
                    (e / size(&format!("RB_{}", py_ident(b)))).ceil()
                } else if let Some(b) = a.strip_suffix("/sub") {
                    // Sub-blocks of a program's tile of a collected axis.
                    (size(&format!("BLOCK_{}", py_ident(b))) / sub.unwrap_or(1.0)).ceil()
                } else {
                    tiles(a)
                }
            })
            .product();
        // The trips a program waits for one after another: a statistics
        // loop's trips overlap (a running sum of small tiles from L2;
        // layernorm_gemm at B=16 measured 7.2 us at 16 trips of 64 a
        // row of 1,024 and 8.9 at one; see `defaults::stat_tile_block`),
        // so it counts one trip per 1,024 of its row, and at least one
        // per STAT_OVERLAP of its trips (unmeasured beyond 16: a block
        // of 16 over a row of 4,096 counts 16).
        let serial_trips: f64 = w
            .loops
            .iter()
            .filter_map(|a| a.strip_suffix("/stat"))
            .map(|b| {
                let e = p.axes.get(b).and_then(|i| i.extent.size()).unwrap_or(1) as f64;
                let rb = size(&format!("RB_{}", py_ident(b)));
                let trips = (e / rb).ceil().max(1.0);
                (e / STAT_ROW_TRIP)
                    .ceil()
                    .max(trips / STAT_OVERLAP)
                    .max(1.0)
                    / trips
            })
            .product::<f64>()
            * trips;
        let elems: f64 = w.sizes.iter().map(|s| size(s)).product();
        // A load's traffic and the part of it DRAM serves.
        let traffic = elems * w.bytes as f64 * trips * programs * sector_waste(w, &size);
        let dram = if w.flops {
            0.0
        } else if gemm {
            // (The programs sharing tiles through L2 are those of a wave
            // at 4 warps, as fitted: the grid's order puts the programs
            // that share the larger operand's tiles side by side
            // whatever a program's warps; see `l2_fastest`.)
            let wave = gpu.sms * (gpu.resident_warps / 4.0).max(1.0);
            dram_traffic(traffic, w.source, programs, wave.max(resident))
        } else {
            traffic
        };
        if !w.nest.is_empty() {
            let i = match nests.iter().position(|n| n.loops == w.nest) {
                Some(i) => i,
                None => {
                    nests.push(Nest {
                        loops: w.nest.clone(),
                        ..Nest::default()
                    });
                    nests.len() - 1
                }
            };
            let n = &mut nests[i];
            n.trips = n.trips.max(serial_trips);
            // (mostly from DRAM: less than half served by L2)
            if !w.flops
                && w.source >= DRAM_TRAFFIC
                && elems * w.bytes as f64 * trips * programs >= DRAM_TRAFFIC
                && dram * 2.0 >= traffic
            {
                n.dram_loads += 1.0;
            } else if !w.flops && w.bytes > 0 && w.source > 0.0 {
                n.l2_loads += 1.0;
            }
            if !w.flops {
                n.tile_bytes += elems * w.bytes as f64;
            }
            n.dot |= on_tensor_cores(w, &size, &|a| kz.raw_block(a));
        }
        if w.flops {
            let f = 2.0 * elems * trips * programs;
            flops += f;
            let padded: Vec<f64> = w.sizes.iter().map(|s| kz.padded(s)).collect();
            let share = dot_rate_share(&padded, w.sizes.iter().map(|s| size(s)));
            let n = padded.len();
            if n >= 3 && on_tensor_cores(w, &size, &|a| kz.raw_block(a)) {
                acc_elems +=
                    padded[..n - 3].iter().product::<f64>() * padded[n - 3] * padded[n - 1];
                dot_rows = dot_rows.min(padded[n - 3]);
            }
            let tile = gemm_tile(w, &size, &|a| kz.raw_block(a));
            let made = if w.computed && tile {
                COMPUTED_OPERAND
            } else {
                1.0
            };
            let n = w.sizes.len();
            let shape = if tile {
                tile_shape_factor(size(&w.sizes[n - 3]), size(&w.sizes[n - 1]))
            } else {
                1.0
            };
            dot_s += f * made * shape / (gpu.matmul_rate * share);
        } else {
            bytes += dram;
            l2_bytes += traffic - dram;
        }
    }
    // A grid of fewer programs than the GPU has SMs uses that fraction
    // of its bandwidth and matmul rate (attention decode at B=1 with one
    // program per head: 32 of 132 SMs, measured 2.7x slower than the
    // split-K candidate that the whole-GPU estimate ranked below it).
    let share = (programs / gpu.sms).min(1.0);
    // A GEMM tile's L2 re-reads overlap its DRAM stream (the larger of
    // the two counts; elsewhere they add up): Llama's prefill down
    // projection (512 x 14336 x 4096, 128x128 by 64, 8 warps, 4 stages)
    // ran 93.8 us on the H100 where their sum estimated 138.0 (the
    // larger, 106.1), its up projection with the norm in its K loop
    // 128.8 at 3 stages (sum 134.6, larger 121.0).
    let causal = causal_kernel(k);
    let (dram_s, l2_s) = (bytes / gpu.dram_rate, l2_bytes / gpu.l2_rate);
    let moved = if gemm && !causal {
        dram_s.max(l2_s)
    } else {
        dram_s + l2_s
    };
    let stages = kernel_stages(p, ki);
    // Triton stages the tiles a pipelined (`tl.dot`) loop loads in shared
    // memory, num_stages of each: beyond the SM's 227 KB the kernel may
    // not compile (bench/gpu/run.py counts such schedules infeasible).
    // (Loops one after another reuse it: the largest counts.)
    let stage_bytes: f64 = nests
        .iter()
        .filter(|n| n.dot)
        .map(|n| n.tile_bytes)
        .fold(0.0, f64::max);
    let tail = waves::last_wave_tail(programs, gpu.sms, warps, stage_bytes, stages, acc_elems);
    let stream = moved.max(dot_s) / share * tail * 1e6;
    // A program's loop trips follow one another: a kernel takes at least
    // LOOP_TRIP_US per trip of its loops (ngpt's one-kernel plan with two
    // loops of 64 trips over rows of 4096 measured 23.2 us on the H200),
    // and a trip waits DRAM_TRIP_US for each load it streams from DRAM,
    // divided by the loads in flight (num_stages - 1) where Triton
    // pipelines the loop (a `tl.dot` in it); programs beyond those an SM
    // keeps resident run in further waves. (By warps only: where shared
    // memory binds, registers mostly bind too: prefill attention's
    // 64x128 tiles at 3 stages measured best, 3 programs an SM by shared
    // memory; see `waves::last_wave_tail` for the stream's share.)
    let waves = (programs / resident).ceil().max(1.0);
    let serial: f64 = nests
        .iter()
        .map(|n| {
            let depth = if n.dot { (stages - 1.0).max(1.0) } else { 1.0 };
            n.trips
                * (gpu.loop_trip_us
                    + (n.dram_loads * gpu.dram_trip_us + n.l2_loads * gpu.l2_trip_us) / depth)
        })
        .sum::<f64>()
        * waves;
    let few = warp_factor(gemm, causal, warps, dot_rows);
    let d = KernelEstimate {
        programs,
        waves,
        stream_us: stream,
        serial_us: serial,
        gemm,
        stage_bytes,
        fill: programs / (gpu.sms * waves::per_sm(warps, stage_bytes, stages, acc_elems)),
        acc_elems,
        few,
        ..KernelEstimate::default()
    };
    KernelTime {
        time_us: stream.max(serial) * few,
        bytes,
        flops,
        detail: d,
    }
}

/// How much a kernel's blocks overshoot its registers: the factor its
/// time is scaled by, and its largest block's elements.
fn register_scale(
    p: &Plan<'_>,
    ki: usize,
    k: &EmittedKernel,
    kz: &KernelSizes<'_, '_, '_>,
) -> (f64, f64, f64) {
    let size = |s: &str| kz.size(s);
    let mut own: f64 = 0.0;
    let warps = kernel_warps(p, ki);
    // Registers a thread holds for its products: sibling products (the
    // same output block in loops at the same place: a gated MLP's gate
    // and up projections, emitted as one loop though the work records
    // two nests, or as two loops one after the other, the first's
    // result held through the second) hold their accumulators together.
    // (Keyed by the enclosing loops and the output block's rows and
    // columns; the tile footprint below by the product's own loops and
    // sizes.)
    let mut acc_regs: IndexMap<(Vec<String>, String, String), f64> = IndexMap::new();
    let mut tile_regs: IndexMap<(Vec<String>, Vec<String>), f64> = IndexMap::new();
    let mut made_regs: f64 = 1.0;
    let mut cuda_regs: f64 = 1.0;
    let mut whole: f64 = 0.0;
    for w in &k.work {
        let v: Vec<f64> = w.sizes.iter().map(|s| size(s)).collect();
        let fp = if w.flops && v.len() >= 3 {
            let n = v.len();
            let batch: f64 = v[..n - 3].iter().product();
            let acc = batch * v[n - 3] * v[n - 1];
            if on_tensor_cores(w, &size, &|a| kz.raw_block(a)) {
                let outer = w.loops[..w.loops.len().saturating_sub(1)].to_vec();
                let (rows, cols) = (w.sizes[n - 3].clone(), w.sizes[n - 1].clone());
                *acc_regs.entry((outer, rows, cols)).or_default() += acc / (32.0 * warps.max(1.0));
            }
            if gemm_tile(w, &size, &|a| kz.raw_block(a)) {
                // A GEMM tile on the tensor cores: its operands are
                // staged in shared memory, its f32 accumulator is held
                // in registers by every thread: the footprint the
                // default schedule bounds is the accumulator. (Under 64
                // rows or columns, a matmul streams its weights: larger
                // K tiles measured slower, and Triton's shared memory
                // beyond `shared_bytes`: gated_mlp B=8 at K 512 by 32
                // columns, 245,760 bytes, did not compile.) Its operand
                // fragments still take registers on their way to the
                // tensor cores: half of each operand tile a thread.
                let operands = batch * (v[n - 3] * v[n - 2] + v[n - 2] * v[n - 1]);
                let threads = 32.0 * warps.max(1.0);
                *tile_regs
                    .entry((w.loops.clone(), w.sizes.clone()))
                    .or_default() += (acc + operands / 2.0) / threads;
                if w.computed {
                    // An operand made in the loop is whole in registers,
                    // in f32 while it is made (see [`made_spill`]).
                    let made = batch * (v[n - 3] * v[n - 2]).max(v[n - 2] * v[n - 1]);
                    made_regs = made_regs.max(made_spill(acc / threads, made / threads));
                }
                acc
            } else {
                if !on_tensor_cores(w, &size, &|a| kz.raw_block(a)) {
                    // Multiply-and-sum: the product block is whole in
                    // registers (f32) beside its loaded operand.
                    let threads = 32.0 * warps.max(1.0);
                    let prod = batch * v[n - 3] * v[n - 2] * v[n - 1];
                    let operand = batch * v[n - 2] * v[n - 1].max(v[n - 3]);
                    cuda_regs = cuda_regs.max(cuda_core_spill((prod + operand / 2.0) / threads));
                }
                batch * (v[n - 3] * v[n - 2] + v[n - 2] * v[n - 1] + v[n - 3] * v[n - 1])
            }
        } else {
            if w.loops.is_empty() && w.source > 0.0 {
                // A load outside the loops, as Triton allocates it.
                let padded: f64 = w.sizes.iter().map(|s| kz.padded(s)).product();
                whole = whole.max(padded / (32.0 * warps.max(1.0)));
            }
            v.iter().product()
        };
        own = own.max(fp);
    }
    // An accumulator of more than 128 registers a thread spills (with
    // the operands' fragments and addresses beside it): a 256x128 tile
    // at 4 warps, 256 a thread, measured 7x slower than 128x128 on the
    // H100 (725.7 against 103.1 us, bench/results/2026-12-06-s33-h100-gemm.json).
    // A GEMM tile's accumulator and half its operands over 192 registers
    // a thread spill likewise (128x128 by 64 of K at 4 warps is 192; the
    // first pass of a prefill attention's scores, 64x512 by 128 of K,
    // 544, measured 7.3 ms against PyTorch's 0.19 for its chunk of the
    // Llama layer, bench/results/2026-12-06-s33-h100-chunk-times.json).
    let acc_regs = acc_regs.values().copied().fold(0.0, f64::max);
    let tile_regs = tile_regs.values().copied().fold(0.0, f64::max);
    let spill = (acc_regs / 128.0)
        .powi(2)
        .max((tile_regs / 192.0).powi(2))
        .max(made_regs)
        .max(cuda_regs)
        .max(1.0);
    ((own / 32768.0).max(spill), own, whole)
}

/// The static estimate of a plan (see [`Estimate`]).
pub fn estimate(p: &Plan<'_>) -> Result<Estimate, String> {
    estimate_kernels(p).map(|(e, _)| e)
}

/// The static estimate of a plan and each kernel's share of it.
pub fn estimate_kernels(p: &Plan<'_>) -> Result<(Estimate, Vec<KernelEstimate>), String> {
    let _syms = crate::SymScope::enter(p.func);
    let ks = p
        .kernels
        .iter()
        .map(|k| emit_kernel_in_context(p, k))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(estimate_detail(p, &ks))
}
