//! Candidate programs to Triton: what `efir-translate --to-triton` and the
//! Python extension's `to_triton` share. Parse and verify a module, flatten
//! a kernel graph back to its program, plan, estimate and emit one Python
//! module of Triton kernels per program.

use efir_diagnostics::{codes, Diag, Severity};
use efir_ir::{parse_and_verify, Registry};

/// Which programs to translate and how to treat those that cannot be.
#[derive(Clone, Debug, Default)]
pub struct TritonOptions {
    /// Only this program (`@name` or `name`).
    pub func: Option<String>,
    /// Keep the K programs with the best static estimate; implies
    /// `skip_unsupported`.
    pub top: Option<usize>,
    /// Report programs that cannot be lowered as warnings (E0801) and
    /// translate the others, instead of failing.
    pub skip_unsupported: bool,
    /// Collect a kernel summary per program in [`TritonOutput::plans`].
    pub plans: bool,
}

/// One translated program.
#[derive(Clone, Debug)]
pub struct TritonProgram {
    /// The program's name (without `@`).
    pub name: String,
    /// The generated Python module.
    pub source: String,
    /// Its static time estimate in microseconds.
    pub estimate_us: f64,
}

/// The result of [`to_triton`].
#[derive(Clone, Debug, Default)]
pub struct TritonOutput {
    /// The translated programs: in module order, or best estimate first
    /// with [`TritonOptions::top`].
    pub programs: Vec<TritonProgram>,
    /// Parse and verify errors, and the programs that could not be lowered
    /// (errors, or warnings when skipped).
    pub diags: Vec<Diag>,
    /// Kernel summaries, when [`TritonOptions::plans`] asked for them.
    pub plans: String,
    /// Whether the input parsed and verified; when not, `diags` says why and
    /// nothing was translated.
    pub verified: bool,
    /// Whether the translation failed: an error diagnostic, or no program
    /// translated.
    pub failed: bool,
}

/// Parse and verify `src` and translate its programs to Triton modules.
/// `file_name` names the input in the generated modules. `Err` is for
/// failures without a source location (no such program, a kernel graph that
/// cannot be flattened); everything else is in [`TritonOutput::diags`].
pub fn to_triton(
    src: &str,
    file_name: &str,
    registry: &Registry,
    opts: &TritonOptions,
) -> Result<TritonOutput, String> {
    // Emission recurses along chains of values: it runs on a thread with a
    // stack for long chains (reserved, not committed, until used), and the
    // emitter refuses chains deeper than that stack holds.
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("efir-translate".into())
            .stack_size(TRANSLATE_STACK)
            .spawn_scoped(s, || to_triton_here(src, file_name, registry, opts))
            .map_err(|e| format!("cannot start the translation thread: {e}"))?
            .join()
            .map_err(|_| "the translation thread panicked".to_string())?
    })
}

/// The stack of the translation thread (see [`to_triton`]).
const TRANSLATE_STACK: usize = 1 << 30;

fn to_triton_here(
    src: &str,
    file_name: &str,
    registry: &Registry,
    opts: &TritonOptions,
) -> Result<TritonOutput, String> {
    let (m, diags) = parse_and_verify(src, registry);
    if diags.iter().any(|d| d.severity == Severity::Error) {
        return Ok(TritonOutput {
            diags,
            failed: true,
            ..TritonOutput::default()
        });
    }
    // A kernel graph (`--lower-to-kernels`) is translated through the
    // program it came from.
    let m = efir_triton::outline::flatten(&m)?;
    let mut progs = efir_triton::programs(&m);
    if let Some(f) = &opts.func {
        let f = f.trim_start_matches('@');
        progs.retain(|p| p.name == f);
        if progs.is_empty() {
            return Err(format!("no program `@{f}` in `{file_name}`"));
        }
    }
    let skip = opts.skip_unsupported || opts.top.is_some();
    let mut out = TritonOutput {
        verified: true,
        ..TritonOutput::default()
    };
    for f in &progs {
        let res = efir_triton::plan(&m, f).and_then(|p| {
            let est = efir_triton::estimate(&p)?;
            if opts.plans {
                out.plans.push_str(&format!(
                    "@{}: {} kernel(s), estimate {:.1} us ({:.3e} bytes, {:.3e} flops)\n{}",
                    f.name,
                    est.kernels,
                    est.time_us,
                    est.bytes,
                    est.flops,
                    efir_triton::describe(&p)
                ));
            }
            let text = efir_triton::emit_python(&p, file_name, "efir-translate --to-triton")?;
            Ok((text, est.time_us))
        });
        match res {
            Ok((source, estimate_us)) => out.programs.push(TritonProgram {
                name: f.name.clone(),
                source,
                estimate_us,
            }),
            Err(e) => {
                let msg = format!("cannot lower `@{}` to Triton: {e}", f.name);
                let d = if skip {
                    Diag::warning(codes::E0801, msg, f.name_span)
                } else {
                    Diag::error(codes::E0801, msg, f.name_span)
                };
                out.diags.push(d.with_label("this program"));
            }
        }
    }
    if let Some(k) = opts.top {
        out.programs
            .sort_by(|a, b| a.estimate_us.total_cmp(&b.estimate_us));
        out.programs.truncate(k);
    }
    out.failed = out.programs.is_empty() || out.diags.iter().any(|d| d.severity == Severity::Error);
    Ok(out)
}
