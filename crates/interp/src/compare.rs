//! Equivalence checking: two programs run on the same fresh random inputs
//! (several seeds, several tile choices) must agree output by output within
//! a relative L2 tolerance.

use crate::eval::{Interp, Options, SemanticsTable};
use crate::inputs::{random_inputs_sized, Dist};
use crate::value::{Precision, Tensor};
use efir_ir::{AxisState, Dim, Module, Type};
use std::collections::BTreeMap;

/// `‖a − b‖ / ‖b‖` (0 when both are zero; infinite when only `b` is).
pub fn rel_l2(a: &Tensor, b: &Tensor) -> f64 {
    let mut num = 0.0;
    let mut den = 0.0;
    for (x, y) in a.data.iter().zip(b.data.iter()) {
        // Equal infinities (masked scores) agree exactly.
        let d = if x == y { 0.0 } else { x - y };
        num += d * d;
        if y.is_finite() {
            den += y * y;
        }
    }
    if a.data.shape() != b.data.shape() {
        return f64::INFINITY;
    }
    if num == 0.0 {
        0.0
    } else if den == 0.0 {
        f64::INFINITY
    } else {
        (num / den).sqrt()
    }
}

/// How to compare.
#[derive(Clone, Debug)]
pub struct CompareOptions {
    /// The function to run in both modules.
    pub func: String,
    /// Relative L2 tolerance per output.
    pub tol: f64,
    /// Number of random input seeds.
    pub trials: usize,
    /// First seed.
    pub seed: u64,
    /// Precision of both runs.
    pub precision: Precision,
    /// Tile choices; empty means derived from the programs (see
    /// [`tile_choices`]).
    pub tiles: Vec<BTreeMap<String, usize>>,
    /// Sizes of the symbolic extents of the function's parameters.
    pub dims: BTreeMap<String, u64>,
}

impl CompareOptions {
    /// Defaults for comparing function `func`: tolerance 1e-5 at f64
    /// precision (exact math), 3 seeds per tile choice, tile choices derived
    /// from the programs.
    pub fn new(func: &str) -> CompareOptions {
        CompareOptions {
            func: func.to_string(),
            tol: 1e-5,
            trials: 3,
            seed: 0,
            precision: Precision::F64,
            tiles: Vec::new(),
            dims: BTreeMap::new(),
        }
    }
}

/// One trial's errors.
#[derive(Clone, Debug)]
pub struct Trial {
    /// Input seed.
    pub seed: u64,
    /// Tile sizes used.
    pub tiles: BTreeMap<String, usize>,
    /// Relative L2 error of each output.
    pub errors: Vec<f64>,
}

/// The outcome of a comparison.
#[derive(Clone, Debug)]
pub struct Report {
    /// Every trial.
    pub trials: Vec<Trial>,
    /// The largest error seen.
    pub max_error: f64,
    /// Whether every output of every trial is within tolerance.
    pub ok: bool,
}

/// For every parallel axis partitioning some dim of a module, the extents
/// of the dims it partitions.
pub fn axis_dims(m: &Module) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for f in &m.funcs {
        for v in &f.values {
            if let Type::Tensor(t) = &v.ty {
                for (a, s) in &t.state {
                    if let AxisState::Part(i) = s {
                        if let Some(Dim::Static(n)) = t.shape.get(*i) {
                            out.entry(a.clone()).or_insert(*n);
                        }
                    }
                }
            }
        }
    }
    out
}

/// Three tile choices for the axes of `m`: one tile per dim, a size that
/// divides (about a quarter), and one that does not divide.
pub fn tile_choices(m: &Module) -> Vec<BTreeMap<String, usize>> {
    let dims = axis_dims(m);
    let pick = |f: &dyn Fn(u64) -> u64| -> BTreeMap<String, usize> {
        dims.iter()
            .map(|(a, &n)| (a.clone(), f(n).max(1) as usize))
            .collect()
    };
    let divisor = |n: u64| {
        (1..=n.div_ceil(4).max(1))
            .rev()
            .find(|d| n.is_multiple_of(*d))
            .unwrap_or(1)
    };
    let non_divisor = |n: u64| {
        (2..n)
            .find(|d| !n.is_multiple_of(*d) && d * 2 >= n.min(8))
            .unwrap_or(n)
    };
    let mut out = vec![pick(&|n| n), pick(&divisor), pick(&non_divisor)];
    out.dedup();
    out
}

/// Run `opts.func` of both modules on the same inputs and compare.
pub fn compare(
    a: &Module,
    b: &Module,
    sem: &SemanticsTable,
    opts: &CompareOptions,
) -> Result<Report, String> {
    let fa = a
        .func(&opts.func)
        .ok_or_else(|| format!("no function `@{}` in the first module", opts.func))?;
    b.func(&opts.func)
        .ok_or_else(|| format!("no function `@{}` in the second module", opts.func))?;
    let tiles = if opts.tiles.is_empty() {
        // Combine choices of both modules' axes pairwise by position.
        let (ta, tb) = (tile_choices(a), tile_choices(b));
        let n = ta.len().max(tb.len());
        (0..n)
            .map(|i| {
                let mut m = ta.get(i).or(ta.last()).cloned().unwrap_or_default();
                m.extend(tb.get(i).or(tb.last()).cloned().unwrap_or_default());
                m
            })
            .collect()
    } else {
        opts.tiles.clone()
    };
    if opts.trials == 0 {
        // No trial compares nothing: never report that as equivalent.
        return Err("--trials must be at least 1 (no trial compares nothing)".into());
    }
    let mut trials = Vec::new();
    let mut max_error = 0f64;
    for (k, t) in tiles.iter().enumerate() {
        for s in 0..opts.trials {
            let seed = opts
                .seed
                .wrapping_add((k as u64).wrapping_mul(opts.trials as u64))
                .wrapping_add(s as u64);
            let inputs = random_inputs_sized(fa, seed, Dist::Normal, &opts.dims, &[])?;
            let o = Options {
                precision: opts.precision,
                tiles: t.clone(),
            };
            let ra = Interp::new(a, sem, o.clone()).run(&opts.func, &inputs)?;
            let rb = Interp::new(b, sem, o).run(&opts.func, &inputs)?;
            if ra.len() != rb.len() {
                return Err(format!(
                    "the programs return {} and {} values",
                    ra.len(),
                    rb.len()
                ));
            }
            let errors: Vec<f64> = ra.iter().zip(&rb).map(|(x, y)| rel_l2(x, y)).collect();
            for e in &errors {
                max_error = if e.is_nan() {
                    f64::INFINITY
                } else {
                    max_error.max(*e)
                };
            }
            trials.push(Trial {
                seed,
                tiles: t.clone(),
                errors,
            });
        }
    }
    Ok(Report {
        ok: max_error <= opts.tol,
        trials,
        max_error,
    })
}
