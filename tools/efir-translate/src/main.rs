//! `efir-translate`: translate candidate programs (`.efir` over the
//! `tensor`, `ew`, `par` and `tile` dialects) to other forms. Today:
//! `--to-triton`, one Python module of Triton kernels per program.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use clap::Parser;
use efir_diagnostics::render;
use efir_driver::translate::TritonOptions;
use std::process::ExitCode;

mod ttir;

/// Translate .efir programs to Triton.
#[derive(Parser, Debug)]
#[command(name = "efir-translate", version)]
struct Cli {
    /// Input file, or `-` for stdin.
    #[arg(default_value = "-")]
    input: String,
    /// Emit one Python module of Triton kernels per program.
    #[arg(long)]
    to_triton: bool,
    /// Emit Triton-dialect MLIR (one module per kernel) through melior;
    /// needs a build with the `mlir` feature. With --output-dir, writes
    /// `<name>.k<i>.ttir` per kernel and `<name>.ttir.json` (the host side,
    /// for `python -m efir run-ttir`).
    #[arg(long, conflicts_with = "to_triton")]
    to_ttir: bool,
    /// Print the optional features of this build (one per line) and exit.
    #[arg(long)]
    print_features: bool,
    /// Translate only this function (`@name` or `name`).
    #[arg(long, value_name = "NAME")]
    func: Option<String>,
    /// Write the module here (one program only; see --output-dir).
    #[arg(short = 'o', value_name = "FILE")]
    output: Option<String>,
    /// Write one `<name>.py` per program into this directory.
    #[arg(long, value_name = "DIR", conflicts_with = "output")]
    output_dir: Option<String>,
    /// Report programs that cannot be lowered as warnings and translate the
    /// others (exit 0 when at least one was translated).
    #[arg(long)]
    skip_unsupported: bool,
    /// Keep the K programs with the best static estimate (see the module's
    /// ESTIMATE); programs that cannot be lowered are skipped with a warning.
    #[arg(long, value_name = "K")]
    top: Option<usize>,
    /// Print a kernel summary per program on stderr.
    #[arg(long)]
    print_plan: bool,
    /// The representative size of a symbolic extent (`--dim dyn0=16`,
    /// repeatable, or `--dim a=8,b=64`): the static estimate ranks
    /// candidates and chooses default blocks at it (default 64). The
    /// kernels read the actual size from the inputs at run time.
    #[arg(long = "dim", value_name = "NAME=N,...")]
    dims: Vec<String>,
    /// Color diagnostics: auto, always or never.
    #[arg(long, default_value = "auto", value_parser = ["auto", "always", "never"])]
    color: String,
}

fn main() -> ExitCode {
    efir_driver::logging::init();
    // Usage errors exit 2, with the nearest flag for a mistyped one.
    let cli: Cli = match efir_driver::usage::parse(std::env::args(), &[]) {
        Ok(c) => c,
        Err(code) => return code,
    };
    // A command line that asks for nothing, or for no program, is a usage
    // error too (exit 2); errors in the input exit 1.
    let usage = if !(cli.to_triton || cli.to_ttir || cli.print_features) {
        Some("nothing to do: pass a target (--to-triton)".to_string())
    } else if cli.top == Some(0) {
        Some("--top 0 keeps no program; give 1 or more".to_string())
    } else {
        efir_driver::dims::parse_dims(&cli.dims).err()
    };
    if let Some(msg) = usage {
        eprintln!("error: {msg}");
        return ExitCode::from(2);
    }
    match run(&cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: &Cli) -> Result<ExitCode, String> {
    if cli.print_features {
        if efir_ttir::AVAILABLE {
            println!("mlir");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if cli.to_ttir {
        return ttir::run(cli);
    }
    if !cli.to_triton {
        return Err("nothing to do: pass a target (--to-triton)".into());
    }
    let (name, src) = efir_driver::read_source(&cli.input)?;
    let color = efir_driver::stderr_color(&cli.color);
    let registry = efir_registry::registry();
    let opts = TritonOptions {
        func: cli.func.clone(),
        top: cli.top,
        skip_unsupported: cli.skip_unsupported,
        plans: cli.print_plan,
        dims: efir_driver::dims::parse_dims(&cli.dims)?,
    };
    let res = efir_driver::translate::to_triton(&src, &name, &registry, &opts)?;
    eprint!("{}", res.plans);
    if !res.diags.is_empty() {
        eprint!("{}", render(&name, &src, &res.diags, color));
    }
    if !res.verified {
        return Ok(ExitCode::from(1));
    }
    let out: Vec<(String, String)> = res
        .programs
        .into_iter()
        .map(|p| (p.name, p.source))
        .collect();
    let failed = res.failed;
    if let Some(dir) = &cli.output_dir {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create `{dir}`: {e}"))?;
        let mut stems: std::collections::HashMap<String, &str> = Default::default();
        for (n, _) in &out {
            let stem = efir_triton::file_stem(n);
            if let Some(m) = stems.insert(stem.clone(), n) {
                return Err(format!(
                    "programs `@{m}` and `@{n}` would both be written to `{stem}.py`; rename one"
                ));
            }
        }
        for (n, text) in &out {
            let p = std::path::Path::new(dir).join(format!("{}.py", efir_triton::file_stem(n)));
            std::fs::write(&p, text).map_err(|e| format!("cannot write `{}`: {e}", p.display()))?;
        }
    } else {
        match cli.output.as_deref().filter(|p| *p != "-") {
            Some(path) => {
                if out.len() > 1 {
                    return Err(format!(
                        "{} programs translated; -o takes one (use --func or --output-dir)",
                        out.len()
                    ));
                }
                let text = out.first().map(|(_, t)| t.as_str()).unwrap_or("");
                std::fs::write(path, text).map_err(|e| format!("cannot write `{path}`: {e}"))?;
            }
            None => {
                let mut all = String::new();
                for (n, text) in &out {
                    all.push_str(&format!("# ===== @{n} =====\n"));
                    all.push_str(text);
                }
                efir_driver::write_stdout(&all)?;
            }
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
