//! `efir-opt`: parse and verify a `.efir` file, run a pass pipeline given by
//! the flags in order (`--canonicalize`, `--pass=key=value,...`), and print
//! the result.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use clap::Parser;
use efir_diagnostics::{render, Diag};
use efir_driver::{expected, run_case, split, PassFlag};
use efir_ir::PrintOptions;
use std::process::ExitCode;

/// Parse, verify, transform and print .efir files.
#[derive(Parser, Debug)]
#[command(name = "efir-opt", version, after_help = passes_help())]
struct Cli {
    /// Input file, or `-` for stdin.
    #[arg(default_value = "-")]
    input: String,
    /// Write the output here instead of stdout.
    #[arg(short = 'o', value_name = "FILE")]
    output: Option<String>,
    /// Print every op in the generic form.
    #[arg(long)]
    print_generic: bool,
    /// Treat `// -----` lines as separators between independent cases.
    #[arg(long)]
    split_input_file: bool,
    /// Check diagnostics against `// expected-error @+N {{...}}` comments.
    #[arg(long)]
    verify_diagnostics: bool,
    /// Print one JSON object of statistics per pass on stderr.
    #[arg(long, value_name = "FORMAT", value_parser = ["json"])]
    stats: Option<String>,
    /// Color diagnostics: auto, always or never.
    #[arg(long, default_value = "auto", value_parser = ["auto", "always", "never"])]
    color: String,
}

fn passes_help() -> String {
    let mut s = String::from("Passes (run in the order given):\n");
    for p in efir_registry::all_passes() {
        s.push_str(&format!("  --{:<24} {}\n", p.name, p.summary));
        for (k, doc) in p.options {
            s.push_str(&format!("      {k}=...  {doc}\n"));
        }
    }
    s
}

/// Split argv into pass flags (in order) and everything else.
fn split_args() -> (Vec<String>, Vec<PassFlag>) {
    let mut rest = Vec::new();
    let mut flags = Vec::new();
    for a in std::env::args() {
        match efir_driver::pass_flag(&a) {
            Some(f) => flags.push(f),
            None => rest.push(a),
        }
    }
    (rest, flags)
}

fn main() -> ExitCode {
    efir_driver::logging::init();
    let (args, flags) = split_args();
    // Usage errors exit 2 (as clap's own), with the nearest flag or pass
    // for a mistyped one; help and version 0.
    let passes: Vec<&str> = efir_registry::all_passes().iter().map(|p| p.name).collect();
    let cli: Cli = match efir_driver::usage::parse(args, &passes) {
        Ok(c) => c,
        Err(code) => return code,
    };
    // A bad pipeline (unknown pass, bad option) is a usage error too.
    if let Err(msg) = efir_driver::build_pipeline(&flags) {
        eprintln!("error: {msg}");
        return ExitCode::from(2);
    }
    match run(&cli, &flags) {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("error: {msg}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: &Cli, flags: &[PassFlag]) -> Result<ExitCode, String> {
    // Fail early on a bad pipeline, before reading any input.
    efir_driver::build_pipeline(flags)?;
    let (name, src) = efir_driver::read_source(&cli.input)?;
    let color = efir_driver::stderr_color(&cli.color);
    let registry = efir_registry::registry();
    let print = PrintOptions {
        generic: cli.print_generic,
    };
    let cases = if cli.split_input_file {
        split::split(&src)
    } else {
        vec![split::Case {
            text: &src,
            offset: 0,
        }]
    };
    let mut outputs = Vec::new();
    let mut all_diags: Vec<Diag> = Vec::new();
    let mut failed = false;
    for case in &cases {
        let out = run_case(case.text, &registry, flags, print)?;
        if let Some(kind) = &cli.stats {
            debug_assert_eq!(kind, "json");
            for s in &out.stats {
                eprintln!("{s}");
            }
        }
        let diags = if cli.verify_diagnostics {
            let line_offset = efir_diagnostics::line_of(&src, case.offset) - 1;
            match expected::parse_expected(case.text) {
                Ok(ex) => expected::check(case.text, line_offset, &ex, &out.diags),
                Err(d) => vec![d],
            }
        } else {
            out.diags
        };
        failed |= diags
            .iter()
            .any(|d| d.severity == efir_diagnostics::Severity::Error);
        all_diags.extend(diags.into_iter().map(|d| d.shifted(case.offset)));
        if let Some(t) = out.text {
            outputs.push(t);
        }
    }
    if !all_diags.is_empty() {
        eprint!("{}", render(&name, &src, &all_diags, color));
        let n = all_diags.len();
        if failed {
            eprintln!(
                "error: {n} diagnostic{} in `{name}`",
                if n == 1 { "" } else { "s" }
            );
        }
    }
    let text = outputs.join(&format!("{}\n", split::SEPARATOR));
    match cli.output.as_deref().filter(|p| *p != "-") {
        Some(path) => {
            std::fs::write(path, &text).map_err(|e| format!("cannot write `{path}`: {e}"))?
        }
        None => efir_driver::write_stdout(&text)?,
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
