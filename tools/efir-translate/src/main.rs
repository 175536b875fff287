//! `efir-translate`: translate candidate programs (`.efir` over the
//! `tensor`, `ew`, `par` and `tile` dialects) to other forms. Today:
//! `--to-triton`, one Python module of Triton kernels per program.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use clap::Parser;
use efir_diagnostics::{codes, render, Diag, Severity};
use efir_ir::parse_and_verify;
use std::io::Write;
use std::process::ExitCode;

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
    /// Color diagnostics: auto, always or never.
    #[arg(long, default_value = "auto", value_parser = ["auto", "always", "never"])]
    color: String,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: &Cli) -> Result<ExitCode, String> {
    if !cli.to_triton {
        return Err("nothing to do: pass a target (--to-triton)".into());
    }
    let (name, src) = efir_driver::read_source(&cli.input)?;
    let color = efir_driver::stderr_color(&cli.color);
    let registry = efir_registry::registry();
    let (m, diags) = parse_and_verify(&src, &registry);
    if diags.iter().any(|d| d.severity == Severity::Error) {
        eprint!("{}", render(&name, &src, &diags, color));
        return Ok(ExitCode::from(1));
    }
    // A kernel graph (`--lower-to-kernels`) is translated through the
    // program it came from.
    let m = efir_triton::outline::flatten(&m)?;
    let mut progs = efir_triton::programs(&m);
    if let Some(f) = &cli.func {
        let f = f.trim_start_matches('@');
        progs.retain(|p| p.name == f);
        if progs.is_empty() {
            return Err(format!("no program `@{f}` in `{name}`"));
        }
    }
    let skip = cli.skip_unsupported || cli.top.is_some();
    let mut out: Vec<(String, String, f64)> = Vec::new();
    let mut problems = Vec::new();
    for f in &progs {
        let res = efir_triton::plan(&m, f).and_then(|p| {
            let est = efir_triton::estimate(&p)?;
            if cli.print_plan {
                eprint!(
                    "@{}: {} kernel(s), estimate {:.1} us ({:.3e} bytes, {:.3e} flops)\n{}",
                    f.name,
                    est.kernels,
                    est.time_us,
                    est.bytes,
                    est.flops,
                    efir_triton::describe(&p)
                );
            }
            let text = efir_triton::emit_python(&p, &name, "efir-translate --to-triton")?;
            Ok((text, est.time_us))
        });
        match res {
            Ok((text, t)) => out.push((f.name.clone(), text, t)),
            Err(e) => {
                let msg = format!("cannot lower `@{}` to Triton: {e}", f.name);
                let d = if skip {
                    Diag::warning(codes::E0801, msg, f.name_span)
                } else {
                    Diag::error(codes::E0801, msg, f.name_span)
                };
                problems.push(d.with_label("this program"));
            }
        }
    }
    if let Some(k) = cli.top {
        out.sort_by(|a, b| a.2.total_cmp(&b.2));
        out.truncate(k);
    }
    if !problems.is_empty() {
        eprint!("{}", render(&name, &src, &problems, color));
    }
    let failed = (!skip && !problems.is_empty()) || out.is_empty();
    if let Some(dir) = &cli.output_dir {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create `{dir}`: {e}"))?;
        for (n, text, _) in &out {
            let p = std::path::Path::new(dir).join(format!("{}.py", efir_triton::py_ident(n)));
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
                let text = out.first().map(|(_, t, _)| t.as_str()).unwrap_or("");
                std::fs::write(path, text).map_err(|e| format!("cannot write `{path}`: {e}"))?;
            }
            None => {
                let mut stdout = std::io::stdout().lock();
                for (n, text, _) in &out {
                    let _ = writeln!(stdout, "# ===== @{n} =====");
                    let _ = stdout.write_all(text.as_bytes());
                }
            }
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
