//! The default schedule of a plan, chosen by its static estimate.

use super::*;

/// Footprint (elements) a default schedule may give its largest block when
/// the plan's own defaults stay under it: what a program of 4 warps holds in
/// registers without spilling (128 per thread).
const DEFAULT_FOOTPRINT: f64 = 16384.0;

/// The pipeline depths the default schedule may take (`num_stages`; 5 and
/// more rarely fit shared memory with the blocks the defaults choose, and 1
/// never pipelines).
const DEFAULT_STAGES: [u32; 3] = [2, 3, 4];

/// A knob's block: a kernel's own block of an axis, or the axis's.
fn get(p: &Plan<'_>, knob: &(Option<usize>, String)) -> Option<u64> {
    match knob {
        (Some(ki), a) => p.kernel_blocks[*ki].get(a).copied(),
        (None, a) => Some(p.axes[a].default),
    }
}

/// Set a knob's block (see [`get`]).
fn put(p: &mut Plan<'_>, knob: &(Option<usize>, String), b: u64) {
    match knob {
        (Some(ki), a) => {
            p.kernel_blocks[*ki].insert(a.clone(), b);
        }
        (None, a) => p.axes[a].default = b,
    }
}

/// The GEMM tiles (rows, columns, K) the descent also starts from in a
/// kernel with a GEMM tile: the tiles of Triton's Hopper matmul configs.
/// One block or a pair at a time, the descent can stall on the way to
/// them (a 512-row projection by a 4096x14336 weight stopped at 128x64 by
/// 128 of K, estimated 152.7 us where 128x128 by 64 is estimated lower).
const GEMM_SEEDS: [(u64, u64, u64); 5] = [
    (128, 128, 64),
    (128, 256, 64),
    (256, 128, 64),
    (64, 128, 64),
    (128, 64, 64),
];

/// Shared memory a program's pipelined tiles may take for two programs to
/// share an SM beside their epilogue's scratch (228 KB an SM on the H100
/// and H200, 1 KB of it reserved a program; the gate projection's
/// 128x128x64 tiles at 4 stages: 96 KB, 115 KB in all).
const EPILOGUE_SHARED: f64 = 100_000.0;

/// Rounds of coordinate descent over the default blocks.
const DESCENT_ROUNDS: usize = 4;

/// Choose the plan's default blocks (and `num_stages`) by its static
/// estimate: coordinate descent over each axis's legal blocks (the kernels' text does not depend
/// on them, so they are emitted once), keeping a change only when it lowers
/// the estimate by at least 2% and keeps the largest block within
/// [`DEFAULT_FOOTPRINT`] (or the plan's own largest block, if that is more)
/// and the staged tiles within [`SHARED_BYTES`] (or the plan's own).
/// A loop over a whole row then takes few long trips, a matmul at a few rows
/// fills the SMs, and candidates are ranked at their best static schedule.
/// A program with a `schedule` attribute (a tuner's choice) keeps it.
/// Returns the estimate at the chosen blocks (`None` where the plan keeps
/// its schedule or a kernel cannot be emitted).
pub(crate) fn choose_defaults(p: &mut Plan<'_>) -> Option<Estimate> {
    if p.func.attrs.contains_key("schedule") {
        return None;
    }
    let ks = p
        .kernels
        .iter()
        .map(|k| emit_kernel_in_context(p, k))
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    let mut best = estimate_of(p, &ks);
    let limit = best.largest_block.max(DEFAULT_FOOTPRINT);
    let shared = best.shared_bytes.max(SHARED_BYTES);
    let fits = |e: &Estimate| e.largest_block <= limit && e.shared_bytes <= shared;
    // The estimate's causal clipping (half the tiles, one diagonal tile) is
    // too coarse to choose blocks by: the axes of a kernel with a causal
    // loop keep their defaults.
    let mut frozen: IndexSet<String> = IndexSet::new();
    for k in &ks {
        let causal = causal_kernel(k);
        if causal {
            frozen.extend(k.grid.iter().cloned());
            for w in &k.work {
                for l in w.loops.iter().filter(|l| is_clipped(l)) {
                    frozen.insert(l.split('/').next().unwrap_or(l).to_string());
                }
            }
        }
    }
    // The knobs: each axis's block, and each kernel's own block of an axis
    // it only loops over (absent: the axis's), where there are several
    // kernels (see `Plan::kernel_blocks`).
    // And each kernel's block of its statistics loops (`Plan::stat_blocks`).
    let mut knobs: Vec<(Option<usize>, String, bool)> = p
        .axes
        .keys()
        .filter(|a| !frozen.contains(*a))
        .map(|a| (None, a.clone(), false))
        .collect();
    if p.kernels.len() > 1 {
        for (ki, k) in ks.iter().enumerate() {
            for a in k
                .loop_only
                .iter()
                .chain(&k.sub_loop)
                .filter(|a| !frozen.contains(*a))
            {
                knobs.push((Some(ki), a.clone(), false));
                // Start from the axis's block, held apart from it.
                let b = p.kernel_blocks[ki].get(a).copied();
                p.kernel_blocks[ki].insert(a.clone(), b.unwrap_or(p.axes[a].default));
            }
        }
    }
    for (ki, k) in ks.iter().enumerate() {
        for a in k.stat_axes.iter().filter(|a| !frozen.contains(*a)) {
            knobs.push((Some(ki), a.clone(), true));
            let b = p.stat_blocks[ki].get(a).copied();
            let base = p.kernel_blocks[ki].get(a).copied();
            p.stat_blocks[ki].insert(a.clone(), b.or(base).unwrap_or(p.axes[a].default));
        }
    }
    // (Blocks are tried at every pipeline depth only in plans with a GEMM
    // tile; the smaller matmuls keep the moves their measurements chose.)
    let gemm_plan = estimate_detail(p, &ks).1.iter().any(|k| k.gemm);
    // Each GEMM kernel (no causal loop) from the seed tiles first, at every
    // pipeline depth, where one estimates lower (see [`GEMM_SEEDS`]).
    if gemm_plan {
        let gemms: Vec<bool> = estimate_detail(p, &ks).1.iter().map(|k| k.gemm).collect();
        for (ki, k) in ks.iter().enumerate() {
            let causal = causal_kernel(k);
            if !gemms.get(ki).copied().unwrap_or(false) || causal {
                continue;
            }
            let Some(w) = k.work.iter().find(|w| w.flops && w.sizes.len() >= 3) else {
                continue;
            };
            let n = w.sizes.len();
            let axis_of = |s: &str| -> Option<String> {
                let id = s.strip_prefix("BLOCK_")?;
                p.axes.keys().find(|a| py_ident(a) == id).cloned()
            };
            let (Some(am), Some(ak), Some(an)) = (
                axis_of(&w.sizes[n - 3]),
                axis_of(&w.sizes[n - 2]),
                axis_of(&w.sizes[n - 1]),
            ) else {
                continue;
            };
            if [&am, &ak, &an].iter().any(|a| frozen.contains(*a)) || am == an {
                continue;
            }
            let knob = |a: &String| -> (Option<usize>, String) {
                let own = knobs
                    .iter()
                    .any(|(kk, x, stat)| *kk == Some(ki) && x == a && !stat);
                (own.then_some(ki), a.clone())
            };
            let (km, kk, kn) = (knob(&am), knob(&ak), knob(&an));
            let (Some(m0), Some(k0), Some(n0)) = (get(p, &km), get(p, &kk), get(p, &kn)) else {
                continue;
            };
            let stages0 = p.stages;
            let mut pick = (m0, n0, k0, stages0);
            for (bm, bn, bk) in GEMM_SEEDS {
                if !p.axes[&am].domain.contains(&bm)
                    || !p.axes[&an].domain.contains(&bn)
                    || !p.axes[&ak].domain.contains(&bk)
                {
                    continue;
                }
                put(p, &km, bm);
                put(p, &kn, bn);
                put(p, &kk, bk);
                for st in DEFAULT_STAGES {
                    p.stages = st;
                    let e = estimate_of(p, &ks);
                    if fits(&e) && e.time_us < best.time_us * 0.98 {
                        best = e;
                        pick = (bm, bn, bk, st);
                    }
                }
            }
            put(p, &km, pick.0);
            put(p, &kn, pick.1);
            put(p, &kk, pick.2);
            p.stages = pick.3;
        }
    }
    for _ in 0..DESCENT_ROUNDS {
        let mut moved = false;
        for (kernel, a, stat) in &knobs {
            let shared = p.axes[a].default;
            let current = match (kernel, stat) {
                (Some(ki), false) => p.kernel_blocks[*ki].get(a).copied(),
                (Some(ki), true) => p.stat_blocks[*ki].get(a).copied(),
                (None, _) => Some(shared),
            };
            let set = |p: &mut Plan<'_>, b: Option<u64>| match (kernel, b) {
                (Some(ki), b) => {
                    let m = if *stat {
                        &mut p.stat_blocks[*ki]
                    } else {
                        &mut p.kernel_blocks[*ki]
                    };
                    match b {
                        Some(b) => {
                            m.insert(a.clone(), b);
                        }
                        None => {
                            m.shift_remove(a);
                        }
                    }
                }
                (None, b) => p.axes[a].default = b.unwrap_or(shared),
            };
            // Over a long dim, never below 16 (the smallest block
            // `fill_sms` leaves), unless the plan's default already is.
            let long = p.axes[a].extent.size().is_some_and(|e| e > 128);
            let floor = if long {
                current.unwrap_or(shared).min(16)
            } else {
                1
            };
            let options: Vec<u64> = p.axes[a].domain.clone();
            let mut pick = current;
            // Each block at the pipeline depth that suits it best (in a plan
            // with a GEMM tile): at 2
            // stages a GEMM's loop trips wait on DRAM whatever its tile, at
            // 3 a 64x64 tile is bound by its traffic, so neither move alone
            // improves Qwen2's 512-row down projection, which 128x128 at 3
            // stages does (292.2 -> 184.0 us estimated).
            let stages0 = p.stages;
            let mut pick_stages = stages0;
            for b in options
                .into_iter()
                .filter(|&b| Some(b) != current && b >= floor)
            {
                set(p, Some(b));
                let others = DEFAULT_STAGES
                    .into_iter()
                    .filter(|&s| s != stages0 && gemm_plan);
                let depths = std::iter::once(stages0).chain(others);
                for st in depths {
                    p.stages = st;
                    let e = estimate_of(p, &ks);
                    if fits(&e) && e.time_us < best.time_us * 0.98 {
                        best = e;
                        pick = Some(b);
                        pick_stages = st;
                    }
                }
                p.stages = stages0;
            }
            set(p, pick);
            p.stages = pick_stages;
            moved |= pick != current;
        }
        // And a tile's shape at its size: two blocks of one kernel (grid
        // axes, or its own block of an axis it loops over), one halved and
        // the other doubled (one block at a time cannot turn a 256x64
        // matmul tile into 128x128 where both steps on the way estimate
        // slower: an MLP's up projection at 512 rows, 192.5 against 134.6
        // us; nor a 64x64 tile by 128 of K into 128x64 by 64 where the
        // larger K block spills).
        let gemms: Vec<bool> = estimate_detail(p, &ks).1.iter().map(|k| k.gemm).collect();
        for (ki, k) in ks.iter().enumerate() {
            if !gemms.get(ki).copied().unwrap_or(false) {
                continue;
            }
            let mut own: Vec<(Option<usize>, String)> = k
                .grid
                .iter()
                .filter(|a| !frozen.contains(*a))
                .map(|a| (None, a.clone()))
                .collect();
            own.extend(
                knobs
                    .iter()
                    .filter(|(kk, _, stat)| *kk == Some(ki) && !stat)
                    .map(|(kk, a, _)| (*kk, a.clone())),
            );
            for (i, a) in own.iter().enumerate() {
                for b in &own[i + 1..] {
                    let (Some(ba), Some(bb)) = (get(p, a), get(p, b)) else {
                        continue;
                    };
                    for (na, nb) in [(ba * 2, bb / 2), (ba / 2, bb * 2)] {
                        // (Kernels with a GEMM tile, blocks of at least 64
                        // before and after; the smaller matmuls of 1-16 rows
                        // keep the one-block moves their measurements chose.)
                        if [ba, bb, na, nb].iter().any(|&x| x < 64)
                            || !p.axes[&a.1].domain.contains(&na)
                            || !p.axes[&b.1].domain.contains(&nb)
                        {
                            continue;
                        }
                        put(p, a, na);
                        put(p, b, nb);
                        let e = estimate_of(p, &ks);
                        if fits(&e) && e.time_us < best.time_us * 0.98 {
                            best = e;
                            moved = true;
                            break;
                        }
                        put(p, a, ba);
                        put(p, b, bb);
                    }
                }
            }
        }
        // And the pipeline depth of the loops with a `tl.dot`: the stages
        // that hide their loads' DRAM latency within shared memory.
        let current = p.stages;
        let mut pick = current;
        for s in DEFAULT_STAGES.into_iter().filter(|&s| s != current) {
            p.stages = s;
            let e = estimate_of(p, &ks);
            if fits(&e) && e.time_us < best.time_us * 0.98 {
                best = e;
                pick = s;
            }
        }
        p.stages = pick;
        moved |= pick != current;
        if !moved {
            break;
        }
    }
    if let Some(e) = split_k_seed(p, &ks, &best, &fits) {
        best = e;
    }
    // And a GEMM tile's kernel at 8 warps (two warpgroups sharing the
    // tile; see `tiles::FEW_WARPS`), with the kernels launched together with it
    // (a launch group shares warps), where the estimate prefers it. (Not a
    // kernel with a causal loop: the chunk of Llama's prefill attention,
    // 64 queries by 64 keys a trip, ran 25.8 us at 4 warps and 34.6-36.9
    // at 8, by stages 3-5.)
    if gemm_plan {
        let groups = super::host::launch_groups(p, &ks);
        let gemms: Vec<bool> = estimate_detail(p, &ks).1.iter().map(|k| k.gemm).collect();
        for (ki, k) in ks.iter().enumerate() {
            let causal = causal_kernel(k);
            if !gemms.get(ki).copied().unwrap_or(false) || causal {
                continue;
            }
            let members = groups
                .iter()
                .find(|g| g.contains(&ki))
                .cloned()
                .unwrap_or_else(|| vec![ki]);
            let (warps0, own0) = (p.warps, p.kernel_warps.clone());
            if p.kernels.len() == 1 {
                p.warps = 8;
            } else {
                for &i in &members {
                    p.kernel_warps[i] = Some(8);
                }
            }
            // (Any gain: a measured factor, not the noise of the blocks'
            // descent, which a small kernel of a large plan would not pass:
            // Qwen2's o projection beside its MLP, 7.8 us of 883.)
            let e = estimate_of(p, &ks);
            if fits(&e) && e.time_us < best.time_us {
                best = e;
            } else {
                p.warps = warps0;
                p.kernel_warps = own0;
            }
        }
    }
    // A plan with a GEMM tile (and no causal loop) pipelines its K loops 4
    // deep where the tiles fit and the estimate is no worse: Llama's
    // prefill projections on the H100 at 8 warps ran 3 -> 4 stages 114.8 ->
    // 93.8 us (down, K 14336), 117.7 -> 109.2 (chunk of the q projection),
    // 338.5 -> 328.1 (chunk of gate and up), where the estimate, bound by
    // their streaming, could not tell (`bench/gpu/chunk_times.py
    // --neighbours`, bench/results/2026-12-06-s36-h100-notes.md).
    let causal = ks.iter().any(causal_kernel);
    if gemm_plan && !causal && p.stages < 4 {
        let stages0 = p.stages;
        p.stages = 4;
        let e = estimate_of(p, &ks);
        if e.shared_bytes <= shared && e.time_us <= best.time_us {
            best = e;
        } else {
            p.stages = stages0;
        }
    }
    // Where the estimate cannot tell 2 stages from 3 for a plan's pipelined
    // (`tl.dot`) loops (a loop bound by its matmuls, where the estimate's
    // DRAM waits are hidden anyway), take 3 if its tiles fit: measured
    // faster on the H100 for the causal attention kernel (451 us against
    // 479 at B=16, 34.2 against 39.0 at B=1,
    // bench/results/2026-12-06-s33-h100-attn-tma.json), and the tuner's
    // choices for the MLPs' streaming loops were 3 and 4 stages.
    if p.stages == 2 && best.shared_bytes > 0.0 {
        p.stages = 3;
        let e = estimate_of(p, &ks);
        if e.shared_bytes <= SHARED_BYTES && e.time_us <= best.time_us {
            best = e;
        } else {
            p.stages = 2;
        }
    }
    // A GEMM tile's kernel at 8 warps whose epilogue loads another tile
    // takes past 128 registers a thread (Llama's prefill gate projection,
    // `silu(gate) * up` after its K loop: 173, one program an SM; 122
    // without the sigmoid, sm_90 compile); capped at 128 (8 bytes spilled)
    // two programs share an SM where their stages fit: on the H100 156.7 ->
    // 140.5 us, where the same cap on the up projection (no epilogue load)
    // measured 130.4 -> 132.2 (`bench/gpu/module_probe.py`,
    // bench/results/2026-12-06-s37-h100-probe.json). Not a kernel of a
    // launch group (its members share their launch options).
    if gemm_plan {
        let groups = super::host::launch_groups(p, &ks);
        let detail = estimate_detail(p, &ks).1;
        for (ki, k) in ks.iter().enumerate() {
            let d = &detail[ki];
            let alone = groups.iter().any(|g| g == &[ki]);
            // (Triton keeps num_stages - 1 of the loop's tiles in flight.)
            let fits_two = d.stage_bytes * (kernel_stages(p, ki) - 1.0).max(1.0) <= EPILOGUE_SHARED;
            if d.gemm
                && kernel_warps(p, ki) == 8.0
                && alone
                && fits_two
                && !causal_kernel(k)
                && epilogue_tile_load(k)
            {
                if p.kernels.len() == 1 {
                    p.maxnreg = Some(128);
                } else {
                    p.kernel_maxnreg[ki] = Some(128);
                }
            }
        }
    }
    // Statistics loops by the tile a trip loads (see [`stat_tile_block`]).
    let mut restat = false;
    for (ki, k) in ks.iter().enumerate() {
        for a in &k.stat_axes {
            if let Some(b) = stat_tile_block(p, ki, k, a) {
                restat |= p.stat_blocks[ki].insert(a.clone(), b) != Some(b);
            }
        }
    }
    if restat {
        best = estimate_of(p, &ks);
    }
    // Programmatic dependent launch (`Plan::pdl`) where the program takes
    // two launches and the first one's programs all run at once: measured
    // on the H100 (session 41), lora, gated_mlp and one-query attention at
    // B=1 0.4-0.7 us faster with it; lora at B=8 at its old default (the
    // first launch 272 programs, 264 resident by shared memory) 28.8 us
    // with it against 18.8 without, and chains of 4-5 launches 3 us slower.
    if p.pdl.is_none() {
        let groups = super::host::launch_groups(p, &ks);
        if groups.len() > 1 {
            let detail = estimate_detail(p, &ks).1;
            let g = &groups[0];
            // A launch group's program holds every member's shared memory
            // (Triton allocates each inlined member its own).
            let fill = if g.len() > 1 {
                let programs: f64 = g.iter().map(|&i| detail[i].programs).sum();
                let stage: f64 = g.iter().map(|&i| detail[i].stage_bytes).sum();
                let acc = g.iter().map(|&i| detail[i].acc_elems).fold(0.0, f64::max);
                let (w, st) = (kernel_warps(p, g[0]), kernel_stages(p, g[0]));
                programs / (model().sms * waves::per_sm(w, stage, st, acc))
            } else {
                detail[g[0]].fill
            };
            p.pdl = Some(groups.len() == 2 && fill <= 1.0);
        }
    }
    // A kernel's block equal to its axis's is no block of its own.
    for blocks in p.kernel_blocks.iter_mut() {
        blocks.retain(|a, b| p.axes.get(a).map(|i| i.default) != Some(*b));
    }
    // A statistics block equal to the kernel's block is none of its own.
    for (ki, blocks) in p.stat_blocks.iter_mut().enumerate() {
        let own = &p.kernel_blocks[ki];
        blocks.retain(|a, b| own.get(a).copied().or(p.axes.get(a).map(|i| i.default)) != Some(*b));
    }
    Some(best)
}

/// The splits of K a split-K product's kernels may start from
/// ([`split_k_seed`]), and the sub-block they stream each split in: only
/// the shape measured best. (Chosen by the estimate among splits of 256,
/// 512 and 1,024 at 2-4 stages, rmsnorm_swiglu at B=1 took 512 at 2
/// stages: 205 us on the H100, 117 at 1,024 and 3 stages, where the
/// estimate put them 5% apart; bench/results/2026-12-07-s43-h100-notes.md.)
const SPLIT_K_SEEDS: [u64; 1] = [1024];
const SPLIT_K_SUB: u64 = 64;
/// The pipeline depths a split-K seed is tried at.
const SPLIT_K_STAGES: [u32; 1] = [3];
/// The estimate a split-K seed must reach against the descent's (a factor).
const SPLIT_K_GAIN: f64 = 0.95;

/// Split-K products of a few rows (GEMVs at B <= 16) on the tensor cores:
/// every kernel that streams its split of K in sub-blocks
/// ([`EmittedKernel::sub_loop`]) at sub-blocks of 64, its product's rows
/// padded to a block of 16 (masked past the real rows) where the row axis
/// allows it, each split of K in [`SPLIT_K_SEEDS`] at each depth of
/// [`SPLIT_K_STAGES`]: the best of these where it estimates at least 5% lower than `best`
/// ([`SPLIT_K_GAIN`])
/// (returned, the plan left at it; else the plan is unchanged). One block
/// at a time, the descent cannot reach it: a split of 1,024 with its
/// sub-blocks at the split's own size, or at 2 stages, estimates slower
/// than 64 splits on the CUDA cores (rmsnorm_mlp at B=1: 184.4 and 69.8 us
/// against 53.0; 49.4 at the seed). Measured on the H100 (sessions 40-41,
/// `bench/gpu/run.py`), the best schedules of rmsnorm_mlp B=1 (62.9 us
/// against 74.0 at the old default), lora B=1/8/16 and gated_mlp B=1/16
/// were all of this shape: 4 splits of 1,024 by 64, 16 rows, 128 columns,
/// 3 stages.
fn split_k_seed(
    p: &mut Plan<'_>,
    ks: &[EmittedKernel],
    best: &Estimate,
    fits: &dyn Fn(&Estimate) -> bool,
) -> Option<Estimate> {
    let splits: IndexSet<String> = ks.iter().filter_map(|k| k.sub_loop.clone()).collect();
    if splits.is_empty() {
        return None;
    }
    // The row axes of the products in those kernels: a dim of at most 16
    // that a block of 16 may cover.
    let mut rows: IndexSet<String> = IndexSet::new();
    for k in ks.iter().filter(|k| k.sub_loop.is_some()) {
        for w in k.work.iter().filter(|w| w.flops && w.sizes.len() >= 3) {
            let m = &w.sizes[w.sizes.len() - 3];
            let Some(id) = m.strip_prefix("BLOCK_") else {
                continue;
            };
            if let Some((a, i)) = p.axes.iter().find(|(a, _)| py_ident(a) == id) {
                if i.domain.contains(&16) && i.extent.size().is_some_and(|e| e <= 16) {
                    rows.insert(a.clone());
                }
            }
        }
    }
    // The seed at `split` (the other blocks as they are).
    let seed = |p: &mut Plan<'_>, split: u64| {
        for a in &rows {
            p.axes[a].default = 16;
        }
        for a in &splits {
            p.axes[a].default = split;
        }
        for (ki, k) in ks.iter().enumerate() {
            if let Some(a) = &k.sub_loop {
                p.kernel_blocks[ki].insert(a.clone(), SPLIT_K_SUB);
            }
        }
    };
    let saved = (p.axes.clone(), p.kernel_blocks.clone(), p.stages);
    let mut pick: Option<(Estimate, u64, u32)> = None;
    for &split in &SPLIT_K_SEEDS {
        if split <= SPLIT_K_SUB || splits.iter().any(|a| !p.axes[a].domain.contains(&split)) {
            continue;
        }
        p.axes = saved.0.clone();
        p.kernel_blocks = saved.1.clone();
        seed(p, split);
        for st in SPLIT_K_STAGES {
            p.stages = st;
            let e = estimate_of(p, ks);
            let bar = pick
                .as_ref()
                .map_or(best.time_us * SPLIT_K_GAIN, |x| x.0.time_us);
            if fits(&e) && e.time_us < bar {
                pick = Some((e, split, st));
            }
        }
    }
    p.axes = saved.0;
    p.kernel_blocks = saved.1;
    p.stages = saved.2;
    let (e, split, st) = pick?;
    seed(p, split);
    p.stages = st;
    Some(e)
}

/// Elements a thread loads in one trip of a statistics loop
/// ([`stat_tile_block`]).
const STAT_ELEMS_PER_THREAD: u64 = 8;

/// The most trips over a row [`stat_tile_block`] chooses (the most
/// measured).
const STAT_MAX_TRIPS: u64 = 16;

/// The block of kernel `ki`'s statistics loops over axis `a` (`RB_<a>`,
/// [`Plan::stat_blocks`]) whose trip loads about 8 elements a thread (1,024
/// at 4 warps) of the rows the kernel's tile really has (a block past its
/// dim's extent is masked): the largest block of the axis's domain within
/// that, at most the axis's extent. Measured on the H100 (session 41,
/// `bench/gpu/s41/cfg_probe.py`, bench/results/2026-12-07-s41-h100-lg.json),
/// layernorm_gemm's one kernel (two statistics loops over rows of 1,024,
/// then the K loop): 16 rows a program ran 7.2 us at 64 a trip, 7.7 at 128,
/// 9.2 at 256, 8.9 at the whole row; 8 real rows (a block of 16) 7.3 at
/// 128, 8.9 at 64, 7.9 at the whole row; one row 7.2 at 512, 11.2 at 128,
/// 15.0 at 64. The estimate alone prefers the whole row (fewest trips).
/// None where the kernel has no statistics loop over the axis, or where
/// that block would take more than [`STAT_MAX_TRIPS`] trips over a row.
fn stat_tile_block(p: &Plan<'_>, ki: usize, k: &EmittedKernel, a: &str) -> Option<u64> {
    let rb = format!("RB_{}", py_ident(a));
    // The real extent of a block of the axis named `id` in this kernel.
    let real = |id: &str| -> u64 {
        p.axes
            .iter()
            .find(|(n, _)| py_ident(n) == id)
            .map(|(n, i)| {
                let b = p.kernel_blocks[ki].get(n).copied().unwrap_or(i.default);
                i.extent.size().map_or(b, |e| b.min(e.max(1)))
            })
            .unwrap_or(1)
    };
    let rows = k
        .work
        .iter()
        .filter(|w| w.sizes.contains(&rb))
        .map(|w| {
            w.sizes
                .iter()
                .filter(|s| **s != rb)
                .map(|s| match (s.parse::<u64>(), s.strip_prefix("BLOCK_")) {
                    (Ok(n), _) => n,
                    (_, Some(id)) => real(id),
                    _ => 1,
                })
                .product::<u64>()
        })
        .max()?;
    let threads = 32 * kernel_warps(p, ki) as u64;
    let want = (STAT_ELEMS_PER_THREAD * threads / rows.max(1)).max(1);
    let info = &p.axes[a];
    let ext = info.extent.size().unwrap_or(u64::MAX);
    // Measured up to 16 trips a row: beyond, the estimate's choice stays.
    if want.saturating_mul(STAT_MAX_TRIPS) < ext {
        return None;
    }
    // Not one trip over the row where the kernel's own loop over the axis
    // takes one trip too: Triton 3.6 compiles layernorm_gemm's kernel with
    // both at 1,024 to 32 registers and about 10 KB of spills a thread
    // (`bench/gpu/static_profile.py` with Triton 3.6 on the CPU, whatever
    // the columns or warps; with the statistics block at 512 or 256, 152
    // registers and none), which ran 317 us on the H100 against 7.2 at 512
    // (bench/results/2026-12-07-s42-h100-notes.md).
    let own = p.kernel_blocks[ki].get(a).copied().unwrap_or(info.default);
    let most = if own >= ext {
        ext.saturating_sub(1)
    } else {
        ext.next_power_of_two()
    };
    info.domain
        .iter()
        .copied()
        .filter(|&b| b <= want && b <= most)
        .max()
        .or_else(|| info.domain.iter().copied().min())
}
