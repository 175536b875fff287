//! A short last wave: the programs an SM holds at once and the part of the
//! last wave's quantization a streaming kernel takes.

/// Shared memory of an SM of the H200 (228 KB), shared by its resident
/// programs.
const SM_SHARED_BYTES: f64 = 233_472.0;

/// The part of a last wave's quantization that a bandwidth-bound kernel
/// takes (the programs of a short last wave run faster, alone on their
/// SMs, but not as fast as a full wave): one-query attention at B=16 on the
/// H200 (512 programs streaming 4096 keys of 128 dims, f16, in blocks of
/// 64 with 3 stages: 3 programs an SM by shared memory, 1.29 waves) ran
/// 281.1 us, against 235.9 at 2 stages (7 an SM, one wave) and 235.2 with
/// blocks of 128 at 3 stages (1 an SM, 3.88 waves); blocks of 128 at 2
/// stages (3 an SM) 271.5 (bench/results/2026-12-07-s39-h200-decode-probe-b16.json).
const TAIL_SHARE: f64 = 0.35;

/// Registers a thread takes beside its accumulators (addresses, offsets,
/// loop state), for the residency of [`TAIL_SHARE`].
const REG_BASE: f64 = 32.0;

/// Registers a thread takes per accumulator element it holds (the element,
/// its operand fragments and the softmax temporaries beside it): one-query
/// attention at 16 rows holds 24 (QK^T 16x64 and PV 16x128 over 128
/// threads) and compiled to 74 registers for sm_90; prefill attention at
/// 64x64 and 64x128 holds 96 and took all 255.
const REG_PER_ACC: f64 = 2.5;

/// The factor on a kernel's stream time for its last wave (1 where its
/// `programs` all fit at once). The programs an SM holds at once: by the
/// shared memory their pipelined tiles take (`num_stages - 1` stages of
/// `stage_bytes`; 1 KB reserved a program), by registers estimated from the
/// tensor-core accumulator elements the program holds (`acc_elems`;
/// [`REG_BASE`] + [`REG_PER_ACC`] an element a thread, at most 255), and by
/// the SM's 64 warps (the hardware's limit, not the latency model's
/// `resident_warps`). A last wave short of them leaves SMs idle: the stream
/// takes [`TAIL_SHARE`] of that wave's quantization, less the more waves
/// run before it (their programs finish at different times, so the last
/// wave's start is staggered).
pub(super) fn last_wave_tail(
    programs: f64,
    sms: f64,
    warps: f64,
    stage_bytes: f64,
    stages: f64,
    acc_elems: f64,
) -> f64 {
    let w = programs / (sms * per_sm(warps, stage_bytes, stages, acc_elems));
    if w > 1.0 {
        1.0 + TAIL_SHARE * (w.ceil() / w - 1.0) / w.floor()
    } else {
        1.0
    }
}

/// The programs an SM holds at once (see [`last_wave_tail`]): by shared
/// memory, registers and the SM's 64 warps.
pub(super) fn per_sm(warps: f64, stage_bytes: f64, stages: f64, acc_elems: f64) -> f64 {
    let by_shared = if stage_bytes > 0.0 {
        (SM_SHARED_BYTES / (stage_bytes * (stages - 1.0).max(1.0) + 1024.0))
            .floor()
            .max(1.0)
    } else {
        f64::INFINITY
    };
    let threads = 32.0 * warps.max(1.0);
    let regs = (REG_BASE + REG_PER_ACC * acc_elems / threads).min(255.0);
    let by_regs = (65536.0 / (threads * regs)).floor().max(1.0);
    (64.0 / warps.max(1.0)).max(1.0).min(by_shared).min(by_regs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_probe_schedules() {
        // Session 39's H200 decode probe (B=16, 512 programs, 4 warps, K
        // and V tiles of 64 or 128 keys by 128 dims, f16, 24 or 32
        // accumulator elements a thread): slow exactly at 1.29 waves.
        let t = |keys: f64, stages: f64, acc: f64| {
            last_wave_tail(
                512.0,
                132.0,
                4.0,
                2.0 * keys * 128.0 * 2.0,
                stages,
                acc * 128.0,
            )
        };
        assert!(t(64.0, 3.0, 24.0) > 1.15);
        assert!(t(128.0, 2.0, 32.0) > 1.15);
        for (k, s, a) in [
            (64.0, 2.0, 24.0),
            (64.0, 4.0, 24.0),
            (128.0, 3.0, 32.0),
            (128.0, 4.0, 32.0),
        ] {
            assert!(t(k, s, a) < 1.02, "{k} {s}");
        }
        // Everything at once: no tail.
        assert_eq!(last_wave_tail(100.0, 132.0, 4.0, 0.0, 3.0, 0.0), 1.0);
    }
}
