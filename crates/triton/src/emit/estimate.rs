//! The static estimate of a plan: memory traffic, matmul flops, launches
//! and the largest block, from the work each emitted kernel records.

use super::*;

/// A static estimate of a program at the default configuration: global
/// memory traffic (every program's loads and stores, loops included), matmul
/// flops and kernel launches, and a time from the H200's copy bandwidth and
/// fp16 matmul rate (WORKLOADS.md), per kernel scaled by the share of the
/// 132 SMs its grid occupies, plus 2 µs per launch. It ranks candidates;
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
}

/// The latency of one loop trip of a program (microseconds), a lower bound
/// on a kernel's time with its longest program's trips.
const LOOP_TRIP_US: f64 = 0.18;

/// Streaming multiprocessors of the H200.
const SMS: f64 = 132.0;

pub(super) fn estimate_of(p: &Plan<'_>, ks: &[EmittedKernel]) -> Estimate {
    let block = |a: &str| -> f64 {
        p.axes
            .iter()
            .find(|(n, _)| py_ident(n) == a)
            .map(|(_, i)| i.default as f64)
            .unwrap_or(1.0)
    };
    let tiles = |a: &str| -> f64 {
        let Some(i) = p.axes.get(a) else { return 1.0 };
        let ext = match &i.extent {
            Extent::N(n) => *n as f64,
            Extent::Tiles(b) => {
                let bi = &p.axes[b];
                let e = match bi.extent {
                    Extent::N(n) => n as f64,
                    Extent::Tiles(_) => 1.0,
                };
                (e / bi.default as f64).ceil()
            }
        };
        (ext / i.default as f64).ceil()
    };
    let size = |s: &str| -> f64 {
        if let Ok(n) = s.parse::<f64>() {
            n
        } else if let Some(a) = s.strip_prefix("BLOCK_") {
            block(a)
        } else if let Some(a) = s.strip_prefix("NTP_") {
            let t = p
                .axes
                .keys()
                .find(|n| py_ident(n) == a)
                .map(|n| tiles(n))
                .unwrap_or(1.0);
            (t as u64).next_power_of_two() as f64
        } else {
            1.0
        }
    };
    let mut est = Estimate {
        kernels: ks.len(),
        ..Estimate::default()
    };
    let mut time = 0.0;
    for k in ks {
        let programs: f64 = k.grid.iter().map(|a| tiles(a)).product();
        let (mut bytes, mut flops) = (0.0, 0.0);
        // Trips of each loop nest a program runs (one entry per nest).
        let mut nests: Vec<(Vec<String>, f64)> = Vec::new();
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
                    } else {
                        tiles(a)
                    }
                })
                .product();
            if !w.loops.is_empty() {
                match nests.iter_mut().find(|(l, _)| *l == w.loops) {
                    Some((_, t)) => *t = t.max(trips),
                    None => nests.push((w.loops.clone(), trips)),
                }
            }
            let elems: f64 = w.sizes.iter().map(|s| size(s)).product();
            if w.flops {
                flops += 2.0 * elems * trips * programs;
            } else {
                bytes += elems * w.bytes as f64 * trips * programs;
            }
        }
        est.bytes += bytes;
        est.flops += flops;
        // A grid of fewer programs than the GPU has SMs uses that fraction
        // of its bandwidth and matmul rate (attention decode at B=1 with one
        // program per head: 32 of 132 SMs, measured 2.7x slower than the
        // split-K candidate that the whole-GPU estimate ranked below it).
        let share = (programs / SMS).min(1.0);
        let stream = (bytes / 4.27e12).max(flops / 671e12) / share * 1e6;
        // A program's loop trips follow one another: a kernel takes at least
        // LOOP_TRIP_US per trip of its loops (ngpt's one-kernel plan with two
        // loops of 64 trips over rows of 4096 measured 23.2 us on the H200).
        let serial: f64 = nests.iter().map(|(_, t)| t).sum::<f64>() * LOOP_TRIP_US;
        time += stream.max(serial);
    }
    est.time_us = time + 2.0 * est.kernels as f64;
    // Blocks far beyond what fits in registers spill (or do not compile):
    // scale the time by how far the largest one overshoots 32K elements.
    let mut largest: f64 = 0.0;
    for k in ks {
        for w in &k.work {
            let v: Vec<f64> = w.sizes.iter().map(|s| size(s)).collect();
            let fp = if w.flops && v.len() >= 3 {
                let n = v.len();
                let batch: f64 = v[..n - 3].iter().product();
                batch * (v[n - 3] * v[n - 2] + v[n - 2] * v[n - 1] + v[n - 3] * v[n - 1])
            } else {
                v.iter().product()
            };
            largest = largest.max(fp);
        }
    }
    est.largest_block = largest;
    if largest > 32768.0 {
        est.time_us *= largest / 32768.0;
    }
    est
}

/// The static estimate of a plan (see [`Estimate`]).
pub fn estimate(p: &Plan<'_>) -> Result<Estimate, String> {
    let ks = p
        .kernels
        .iter()
        .map(|k| emit_kernel_in_context(p, k))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(estimate_of(p, &ks))
}
