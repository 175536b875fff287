//! `--to-ttir` (the `mlir` feature): one Triton-dialect module per kernel.

use crate::Cli;
use std::process::ExitCode;

#[cfg(not(feature = "mlir"))]
pub(crate) fn run(_cli: &Cli) -> Result<ExitCode, String> {
    Err("--to-ttir needs a build with the `mlir` feature (README: \"TTIR through MLIR\")".into())
}

#[cfg(feature = "mlir")]
pub(crate) fn run(cli: &Cli) -> Result<ExitCode, String> {
    // Emission recurses along chains of values: give it a large stack.
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("efir-translate-ttir".into())
            .stack_size(1 << 28)
            .spawn_scoped(s, || run_here(cli))
            .map_err(|e| format!("cannot start the translation thread: {e}"))?
            .join()
            .map_err(|_| "the translation thread panicked".to_string())?
    })
}

#[cfg(feature = "mlir")]
fn run_here(cli: &Cli) -> Result<ExitCode, String> {
    use efir_diagnostics::{render, Severity};
    let (name, src) = efir_driver::read_source(&cli.input)?;
    let color = efir_driver::stderr_color(&cli.color);
    let registry = efir_registry::registry();
    let (m, diags) = efir_ir::parse_and_verify(&src, &registry);
    if !diags.is_empty() {
        eprint!("{}", render(&name, &src, &diags, color));
    }
    if diags.iter().any(|d| d.severity == Severity::Error) {
        return Ok(ExitCode::from(1));
    }
    let m = efir_triton::outline::flatten(&m)?;
    let mut progs = efir_triton::programs(&m);
    if let Some(f) = &cli.func {
        let f = f.trim_start_matches('@');
        progs.retain(|p| p.name == f);
        if progs.is_empty() {
            return Err(format!("no program `@{f}` in `{name}`"));
        }
    }
    let mut out = Vec::new();
    let mut failed = false;
    for f in progs {
        match efir_ttir::translate(&m, f) {
            Ok(p) => out.push(p),
            Err(e) if cli.skip_unsupported => {
                eprintln!("warning: `@{}` skipped: {e}", f.name);
                failed = true;
            }
            Err(e) => return Err(format!("cannot lower `@{}` to TTIR: {e}", f.name)),
        }
    }
    if out.is_empty() && failed {
        return Ok(ExitCode::from(1));
    }
    if let Some(dir) = &cli.output_dir {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create `{dir}`: {e}"))?;
        let mut stems = std::collections::HashMap::new();
        for p in &out {
            let stem = efir_triton::file_stem(&p.name);
            if let Some(other) = stems.insert(stem.clone(), p.name.clone()) {
                return Err(format!(
                    "programs `@{other}` and `@{}` would both be written to `{stem}.*.ttir`; rename one",
                    p.name
                ));
            }
            let mut files = Vec::new();
            for (i, k) in p.kernels.iter().enumerate() {
                let file = format!("{stem}.k{i}.ttir");
                let path = std::path::Path::new(dir).join(&file);
                std::fs::write(&path, &k.text)
                    .map_err(|e| format!("cannot write `{}`: {e}", path.display()))?;
                files.push(file);
            }
            for g in &p.groups {
                let file = format!("{stem}.{}.ttir", &g.name[1..]);
                let path = std::path::Path::new(dir).join(&file);
                std::fs::write(&path, &g.text)
                    .map_err(|e| format!("cannot write `{}`: {e}", path.display()))?;
                files.push(file);
            }
            let path = std::path::Path::new(dir).join(format!("{stem}.ttir.json"));
            let text =
                serde_json::to_string_pretty(&p.manifest(&files)).map_err(|e| e.to_string())?;
            std::fs::write(&path, text + "\n")
                .map_err(|e| format!("cannot write `{}`: {e}", path.display()))?;
        }
    } else {
        let mut all = String::new();
        for p in &out {
            for k in &p.kernels {
                all.push_str(&format!(
                    "// ===== @{} kernel {} (grid {}, num_warps {}, num_stages {}) =====\n",
                    p.name, k.name, k.grid, k.num_warps, k.num_stages
                ));
                all.push_str(&k.text);
                if !k.text.ends_with('\n') {
                    all.push('\n');
                }
            }
            for g in &p.groups {
                let members: Vec<&str> = g
                    .members
                    .iter()
                    .map(|i| p.kernels[*i].name.as_str())
                    .collect();
                all.push_str(&format!(
                    "// ===== @{} launch group {} of {} (grid {}, num_warps {}, num_stages {}) =====\n",
                    p.name,
                    g.name,
                    members.join(", "),
                    g.grid,
                    g.num_warps,
                    g.num_stages
                ));
                all.push_str(&g.text);
                if !g.text.ends_with('\n') {
                    all.push('\n');
                }
            }
        }
        match cli.output.as_deref().filter(|p| *p != "-") {
            Some(path) => {
                std::fs::write(path, all).map_err(|e| format!("cannot write `{path}`: {e}"))?
            }
            None => efir_driver::write_stdout(&all)?,
        }
    }
    // As --to-triton: with --skip-unsupported, success when at least one
    // program was translated.
    Ok(ExitCode::SUCCESS)
}
