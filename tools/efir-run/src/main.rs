//! `efir-run`: evaluate a function of a `.efir` file on seeded random or
//! `.npy` inputs (tiled programs with concrete tile sizes) and write its
//! outputs as `.npy`; or, with `--compare A B`, check that two programs
//! compute the same function.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use clap::Parser;
use efir_interp::compare::{compare, tile_choices, CompareOptions};
use efir_interp::inputs::{random_inputs_sized, read_npy, write_npy, Dist};
use efir_interp::{Interp, Options, Precision, Tensor};
use efir_ir::{Module, Type};
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Evaluate .efir functions, or check two programs for equivalence.
#[derive(Parser, Debug)]
#[command(name = "efir-run", version)]
struct Cli {
    /// The program (two programs with --compare).
    #[arg(required = true, num_args = 1..=2)]
    files: Vec<PathBuf>,
    /// Compare the two programs on the same random inputs.
    #[arg(long)]
    compare: bool,
    /// The function to run (default: the first function of the file).
    #[arg(long)]
    func: Option<String>,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Distribution of random float inputs.
    #[arg(long, default_value = "normal", value_parser = ["normal", "uniform"])]
    dist: String,
    /// Read a parameter from a .npy file: NAME=FILE.npy (repeatable). Its
    /// shape sizes the symbolic extents `|@n|` of its type.
    #[arg(long = "input", value_name = "NAME=FILE")]
    inputs: Vec<String>,
    /// Sizes of symbolic extents `|@n|` for random inputs: n=8,s=64
    /// (repeatable).
    #[arg(long = "dim", value_name = "NAME=N,...")]
    dims: Vec<String>,
    /// Write each output (and with --dump-inputs, each input) here as .npy.
    #[arg(long)]
    output_dir: Option<PathBuf>,
    /// Also write the inputs used to the output dir (in_<name>.npy).
    #[arg(long)]
    dump_inputs: bool,
    /// Tile sizes of parallel axes: m=64,p=128 (repeatable with --compare:
    /// one tile choice each).
    #[arg(long = "tile", value_name = "AXIS=N,...")]
    tiles: Vec<String>,
    /// native: round to each dtype, accumulate in f32; f64: no rounding.
    #[arg(long, default_value = "native", value_parser = ["native", "f64"])]
    precision: String,
    /// --compare: relative L2 tolerance per output (default: by the
    /// outputs' dtypes under native precision, 1e-3 for f16, 1e-2 for bf16,
    /// 1e-5 for f32 and 1e-12 for f64; 1e-9 under --precision f64).
    #[arg(long)]
    tol: Option<f64>,
    /// --compare: random input seeds per tile choice.
    #[arg(long, default_value_t = 3)]
    trials: usize,
    /// The most memory the program's values may take (bytes, or with a
    /// K, M, G or T suffix); a program that could need more is refused
    /// before it runs. Default: half of the memory available.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    max_memory: Option<u128>,
}

/// A size in bytes: `123`, `64K`, `512M`, `8G`, `1T` (powers of 1024).
fn parse_size(s: &str) -> Result<u128, String> {
    let t = s.trim();
    let (num, mul) = match t.chars().last() {
        Some(c) if c.is_ascii_alphabetic() => {
            let m: u128 = match c.to_ascii_uppercase() {
                'K' => 1 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return Err(format!("`{s}` is not a size (a number with K, M, G or T)")),
            };
            (&t[..t.len() - 1], m)
        }
        _ => (t, 1),
    };
    let n: u128 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a size (a number with K, M, G or T)"))?;
    n.checked_mul(mul)
        .filter(|b| *b > 0)
        .ok_or_else(|| format!("`{s}` is not a usable size"))
}

/// Half of the memory available (Linux `MemAvailable`), or 4 GiB where it
/// is not known.
fn default_memory() -> u128 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u128>().ok())
        })
        .map_or(4 << 30, |kb| kb * 1024 / 2)
}

/// The default --compare tolerance for `f`'s outputs: the loosest of their
/// dtypes' (a legitimate reordering of f16 sums moves results by about the
/// dtype's rounding, not by f32's).
fn default_tol(f: &efir_ir::Func, precision: Precision) -> f64 {
    if precision == Precision::F64 {
        return 1e-9;
    }
    f.returns
        .iter()
        .flat_map(|r| {
            f.ty(*r)
                .leaves()
                .into_iter()
                .map(|l| l.dtype)
                .collect::<Vec<_>>()
        })
        .map(|d| match d {
            efir_ir::DType::F16 => 1e-3,
            efir_ir::DType::BF16 => 1e-2,
            efir_ir::DType::F64 => 1e-12,
            _ => 1e-5,
        })
        .fold(0.0, f64::max)
}

fn main() -> ExitCode {
    efir_driver::logging::init();
    // Usage errors exit 2, with the nearest flag for a mistyped one.
    let cli: Cli = match efir_driver::usage::parse(std::env::args(), &[]) {
        Ok(c) => c,
        Err(code) => return code,
    };
    // Bad option values are usage errors too (exit 2), found before any
    // file is read; errors in the input exit 1.
    if let Err(msg) = check_usage(&cli) {
        eprintln!("error: {msg}");
        return ExitCode::from(2);
    }
    match run(&cli) {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("error: {msg}");
            ExitCode::from(1)
        }
    }
}

/// The option values clap does not check: the number of files, `--tol`,
/// `--trials`, `--tile` and `--dim`.
fn check_usage(cli: &Cli) -> Result<(), String> {
    match (cli.compare, cli.files.len()) {
        (true, 2) | (false, 1) => {}
        (true, _) => return Err("--compare needs two files".into()),
        (false, _) => return Err("give one file (or two with --compare)".into()),
    }
    if let Some(t) = cli.tol {
        if !(t.is_finite() && t >= 0.0) {
            return Err(format!("--tol must be a non-negative number, found {t}"));
        }
    }
    if cli.compare && cli.trials == 0 {
        return Err("--trials must be at least 1 (no trial compares nothing)".into());
    }
    for t in &cli.tiles {
        parse_tiles(t)?;
    }
    efir_driver::dims::parse_dims(&cli.dims)?;
    Ok(())
}

fn load(path: &Path) -> Result<Module, String> {
    let f =
        std::fs::File::open(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    let src = efir_driver::read_limited(f, &format!("`{}`", path.display()))?;
    let reg = efir_registry::registry();
    let (m, diags) = efir_ir::parse_and_verify(&src, &reg);
    if !diags.is_empty() {
        let color = std::io::stderr().is_terminal();
        eprint!(
            "{}",
            efir_diagnostics::render(&path.display().to_string(), &src, &diags, color)
        );
        return Err(format!("`{}` is not a valid program", path.display()));
    }
    Ok(m)
}

/// One line on stdout (see [`efir_driver::write_stdout`]).
fn out(line: &str) -> Result<(), String> {
    efir_driver::write_stdout(&format!("{line}\n"))
}

fn parse_tiles(s: &str) -> Result<BTreeMap<String, usize>, String> {
    s.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let (k, v) = p
                .split_once('=')
                .ok_or_else(|| format!("--tile `{p}` is not AXIS=N"))?;
            let n: usize = v
                .trim()
                .parse()
                .map_err(|_| format!("--tile `{p}`: `{v}` is not a positive integer"))?;
            if n == 0 {
                return Err(format!("--tile `{p}`: tile sizes must be positive"));
            }
            Ok((k.trim().trim_start_matches('@').to_string(), n))
        })
        .collect()
}

fn run(cli: &Cli) -> Result<ExitCode, String> {
    let precision = if cli.precision == "f64" {
        Precision::F64
    } else {
        Precision::Native
    };
    let tiles: Vec<BTreeMap<String, usize>> = cli
        .tiles
        .iter()
        .map(|t| parse_tiles(t))
        .collect::<Result<_, _>>()?;
    let sem = efir_registry::all_semantics();
    if cli.compare {
        let [a, b] = cli.files.as_slice() else {
            return Err("--compare needs two files".into());
        };
        let (ma, mb) = (load(a)?, load(b)?);
        let func = match &cli.func {
            Some(f) => f.clone(),
            None => ma
                .funcs
                .first()
                .ok_or("the first file has no function")?
                .name
                .clone(),
        };
        let budget = cli.max_memory.unwrap_or_else(default_memory);
        let dims = efir_driver::dims::parse_dims(&cli.dims)?;
        for (m, file) in [(&ma, a), (&mb, b)] {
            let g = m
                .func(&func)
                .ok_or_else(|| format!("no function `@{func}` in `{}`", file.display()))?;
            efir_interp::budget::check_memory_sized(m, g, budget, &dims)?;
        }
        let tol = match cli.tol {
            Some(t) if t.is_finite() && t >= 0.0 => t,
            Some(t) => return Err(format!("--tol must be a non-negative number, found {t}")),
            None => default_tol(ma.func(&func).ok_or("no such function")?, precision),
        };
        let opts = CompareOptions {
            func,
            tol,
            trials: cli.trials,
            seed: cli.seed,
            precision,
            tiles,
            dims: efir_driver::dims::parse_dims(&cli.dims)?,
        };
        let rep = compare(&ma, &mb, &sem, &opts)?;
        for t in &rep.trials {
            let tiles: Vec<String> = t.tiles.iter().map(|(a, n)| format!("{a}={n}")).collect();
            let errs: Vec<String> = t.errors.iter().map(|e| format!("{e:.3e}")).collect();
            out(&format!(
                "seed {:>3}  tiles [{}]  rel_l2 [{}]",
                t.seed,
                tiles.join(","),
                errs.join(", ")
            ))?;
        }
        out(&format!(
            "max rel_l2 {:.3e} (tolerance {:.1e}): {}",
            rep.max_error,
            tol,
            if rep.ok {
                "equivalent"
            } else {
                "NOT equivalent"
            }
        ))?;
        return Ok(if rep.ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    let [file] = cli.files.as_slice() else {
        return Err("give one file (or two with --compare)".into());
    };
    let m = load(file)?;
    let fname = match &cli.func {
        Some(f) => f.clone(),
        None => m
            .funcs
            .first()
            .ok_or("the file has no function")?
            .name
            .clone(),
    };
    let f = m.func(&fname).ok_or_else(|| {
        let names: Vec<String> = m.funcs.iter().map(|f| format!("@{}", f.name)).collect();
        format!(
            "no function `@{fname}` in `{}` (it has {})",
            file.display(),
            names.join(", ")
        )
    })?;
    let dist = if cli.dist == "uniform" {
        Dist::Uniform
    } else {
        Dist::Normal
    };
    let mut dims = efir_driver::dims::parse_dims(&cli.dims)?;
    // The given inputs first: their shapes size the symbolic extents of
    // their types (agreeing with --dim and with each other).
    let mut read: BTreeMap<usize, Tensor> = BTreeMap::new();
    let mut given = BTreeMap::new();
    for spec in &cli.inputs {
        let (name, path) = spec
            .split_once('=')
            .ok_or_else(|| format!("--input `{spec}` is not NAME=FILE.npy"))?;
        let name = name.trim_start_matches('%');
        let idx = f
            .params
            .iter()
            .position(|p| f.value(*p).name == name)
            .ok_or_else(|| format!("`@{fname}` has no parameter `%{name}`"))?;
        let Type::Tensor(t) = f.ty(f.params[idx]) else {
            return Err(format!("parameter `%{name}` is a tuple"));
        };
        if let Some(first) = given.get(&idx) {
            return Err(format!(
                "--input {name} is given twice (`{first}` and `{path}`)"
            ));
        }
        let x = read_npy(Path::new(path), t.dtype).map_err(|e| format!("--input {name}: {e}"))?;
        let shape = x.data.shape();
        let symbolic = t.shape.iter().any(|d| matches!(d, efir_ir::Dim::Axis(_)));
        // (A static shape is checked where the program runs.)
        if symbolic && shape.len() != t.shape.len() {
            return Err(format!(
                "--input {name}: `{path}` has {} dims, `%{name}` has {} ({})",
                shape.len(),
                t.shape.len(),
                f.ty(f.params[idx])
            ));
        }
        for (j, d) in t.shape.iter().enumerate().filter(|_| symbolic) {
            let n = shape[j] as u64;
            let efir_ir::Dim::Axis(a) = d else { continue };
            match dims.get(a) {
                Some(m) if *m != n => {
                    return Err(format!(
                        "--input {name}: dim {j} of `{path}` is {n}, but |@{a}| is {m} (from --dim or another input)"
                    ))
                }
                Some(_) => {}
                None => {
                    dims.insert(a.clone(), n);
                }
            }
        }
        read.insert(idx, x);
        given.insert(idx, path.to_string());
    }
    efir_interp::budget::check_memory_sized(
        &m,
        f,
        cli.max_memory.unwrap_or_else(default_memory),
        &dims,
    )?;
    let mask: Vec<bool> = (0..f.params.len()).map(|i| read.contains_key(&i)).collect();
    let mut inputs = random_inputs_sized(f, cli.seed, dist, &dims, &mask)?;
    for (i, x) in read {
        inputs[i] = x;
    }
    let tiles = match tiles.as_slice() {
        [] => {
            let choice = tile_choices(&m).into_iter().nth(1).unwrap_or_default();
            if !choice.is_empty() {
                let t: Vec<String> = choice.iter().map(|(a, n)| format!("{a}={n}")).collect();
                eprintln!("note: no --tile given; using {}", t.join(","));
            }
            choice
        }
        [t] => t.clone(),
        _ => return Err("--tile may be given once without --compare".into()),
    };
    let interp = Interp::new(&m, &sem, Options { precision, tiles });
    let outs = interp.run(&fname, &inputs)?;
    if let Some(dir) = &cli.output_dir {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
        for (i, o) in outs.iter().enumerate() {
            // Under --precision f64 float outputs are not values of their
            // dtype any more: write them as f64.
            let wide;
            let o = if precision == Precision::F64 && o.dtype.is_float() {
                wide = Tensor {
                    dtype: efir_ir::DType::F64,
                    data: o.data.clone(),
                };
                &wide
            } else {
                o
            };
            write_npy(&dir.join(format!("out{i}.npy")), o)?;
        }
        if cli.dump_inputs {
            for (p, t) in f.params.iter().zip(&inputs) {
                write_npy(&dir.join(format!("in_{}.npy", f.value(*p).name)), t)?;
            }
        }
    }
    let mut bad = false;
    for (i, (o, v)) in outs.iter().zip(&f.returns).enumerate() {
        report(i, &f.value(*v).name, o, &mut bad)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn report(i: usize, name: &str, t: &Tensor, bad: &mut bool) -> Result<(), String> {
    let nan = t.data.iter().filter(|v| v.is_nan()).count();
    let inf = t.data.iter().filter(|v| v.is_infinite()).count();
    let finite: Vec<f64> = t.data.iter().copied().filter(|v| v.is_finite()).collect();
    let mean = finite.iter().sum::<f64>() / finite.len().max(1) as f64;
    let min = finite.iter().copied().fold(f64::INFINITY, f64::min);
    let max = finite.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let shape: Vec<String> = t.data.shape().iter().map(|d| d.to_string()).collect();
    let stats = if finite.is_empty() {
        "no finite values".to_string()
    } else {
        format!("mean {mean:.6e}  min {min:.6e}  max {max:.6e}")
    };
    out(&format!(
        "out{i} %{name}: {}x{}  {stats}",
        shape.join("x"),
        t.dtype
    ))?;
    if nan + inf > 0 {
        *bad = true;
        eprintln!("warning: output out{i} (%{name}) has {nan} NaN and {inf} infinite values");
    }
    Ok(())
}
