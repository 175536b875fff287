//! A launch group's time: kernels launched in one grid, side by side.

use super::{KernelEstimate, Model};

/// The time of a launch group's kernels launched together (one grid, each
/// member's programs after the earlier members'): their streams share the
/// GPU's rates at the share of the SMs that all their programs together
/// fill (none faster than its own programs stream alone), and their loop
/// trips run side by side, the longest member's per wave over the waves
/// of all their programs. (Summing the members' times put lora's split-K
/// shape at B=1, a 128-program GEMV beside a 4-program one, at 27.4 us
/// where it measured 14.7 on the H100.)
pub(super) fn group_time(gpu: &Model, members: &[&KernelEstimate], warps: f64) -> f64 {
    let total: f64 = members.iter().map(|d| d.programs).sum();
    let share = |n: f64| (n / gpu.sms).min(1.0);
    let alone = |d: &KernelEstimate| d.stream_us * d.few * d.scale;
    let stream = (members
        .iter()
        .map(|d| alone(d) * share(d.programs))
        .sum::<f64>()
        / share(total))
    .max(members.iter().map(|d| alone(d)).fold(0.0, f64::max));
    let resident = gpu.sms * (gpu.resident_warps / warps.max(1.0)).max(1.0);
    let waves = (total / resident).ceil().max(1.0);
    let serial = members
        .iter()
        .map(|d| d.serial_us / d.waves.max(1.0) * d.few * d.scale)
        .fold(0.0, f64::max)
        * waves;
    stream.max(serial)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(programs: f64, stream_us: f64, serial_us: f64) -> KernelEstimate {
        KernelEstimate {
            programs,
            waves: 1.0,
            stream_us,
            serial_us,
            scale: 1.0,
            few: 1.0,
            ..KernelEstimate::default()
        }
    }

    #[test]
    fn launch_group_members_run_side_by_side() {
        let gpu = Model::default();
        // lora at B=1 (the H100's split-K shape): a 128-program GEMV beside
        // a 4-program one; the group takes the longer, not the sum.
        let big = member(128.0, 8.2, 14.1);
        let small = member(4.0, 1.1, 9.3);
        let t = group_time(&gpu, &[&big, &small], 4.0);
        assert!((t - 14.1).abs() < 1e-9, "{t}");
        // Two members that each fill the GPU share its bandwidth: their
        // streams add up.
        let a = member(264.0, 10.0, 2.0);
        let b = member(264.0, 6.0, 2.0);
        let t = group_time(&gpu, &[&a, &b], 4.0);
        assert!((t - 16.0).abs() < 1e-9, "{t}");
        // A one-program member streams no faster beside others.
        let one = member(1.0, 8.0, 1.0);
        let wide = member(512.0, 0.1, 0.0);
        assert!(group_time(&gpu, &[&one, &wide], 4.0) >= 8.0);
        // Trips over the waves of all the members' programs: 4 warps, 4
        // programs an SM, 528 at once; 600 programs take two waves.
        let x = member(300.0, 0.0, 1.0);
        let y = member(300.0, 0.0, 1.5);
        assert!((group_time(&gpu, &[&x, &y], 4.0) - 3.0).abs() < 1e-9);
    }
}
