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
    /// Representative sizes of symbolic extents (by name, without `@`):
    /// what the static estimate and the default blocks assume (`--dim`;
    /// `efir_triton::DEFAULT_DIM_SIZE` for a symbol not named). The kernels
    /// take the actual size at run time whatever this is.
    pub dims: std::collections::BTreeMap<String, u64>,
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
    /// Its kernel launches, bytes moved and matmul flops, as estimated.
    pub kernels: usize,
    /// Bytes moved to and from global memory (estimated).
    pub bytes: f64,
    /// Matmul flops (estimated).
    pub flops: f64,
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
    /// Kernel summaries, when [`TritonOptions::plans`] asked for them: one
    /// block per program (the chosen one's headline ends in `[chosen]`),
    /// then the ranking that says why ([`ranking`]).
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
            .spawn_scoped(s, || {
                let _sizes = efir_triton::DimSizes::enter(&opts.dims);
                to_triton_here(src, file_name, registry, opts)
            })
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
    if progs.is_empty() {
        return Err(format!("`{file_name}` has no function to translate"));
    }
    if opts.top == Some(0) {
        return Err("--top 0 keeps no program; give 1 or more".into());
    }
    let skip = opts.skip_unsupported || opts.top.is_some();
    let mut out = TritonOutput {
        verified: true,
        ..TritonOutput::default()
    };
    // Per program: its headline and kernel summary (for --print-plan).
    let mut blocks: Vec<(String, String, String)> = Vec::new();
    for f in &progs {
        let res = efir_triton::plan(&m, f).and_then(|p| {
            let (est, per_kernel) = efir_triton::estimate_kernels(&p)?;
            if opts.plans {
                // Where the plan recomputes row statistics in the kernels
                // that read them, the kernel count without (compaction's
                // `kernels` attribute counts that plan).
                let fused = match efir_triton::base_plan(&m, f) {
                    Ok(b) if b.kernels.len() != est.kernels => format!(
                        " (row statistics recomputed in their readers; {} kernel(s) without)",
                        b.kernels.len()
                    ),
                    _ => String::new(),
                };
                blocks.push((
                    f.name.clone(),
                    format!(
                        "@{}: {} kernel(s), estimate {:.1} us ({:.3e} bytes, {:.3e} flops){fused}",
                        f.name, est.kernels, est.time_us, est.bytes, est.flops
                    ),
                    efir_triton::describe_estimated(&p, &per_kernel),
                ));
            }
            let text = efir_triton::emit_python(&p, file_name, "efir-translate --to-triton")?;
            Ok((text, est))
        });
        match res {
            Ok((source, est)) => out.programs.push(TritonProgram {
                name: f.name.clone(),
                source,
                estimate_us: est.time_us,
                kernels: est.kernels,
                bytes: est.bytes,
                flops: est.flops,
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
    // Best estimate first; a stable sort keeps module order among equals.
    let mut ranked: Vec<&TritonProgram> = out.programs.iter().collect();
    ranked.sort_by(|a, b| a.estimate_us.total_cmp(&b.estimate_us));
    if opts.plans {
        let chosen = ranked.first().map(|p| p.name.as_str());
        for (name, head, kernels) in &blocks {
            let mark = if Some(name.as_str()) == chosen {
                "  [chosen]"
            } else {
                ""
            };
            out.plans.push_str(&format!("{head}{mark}\n{kernels}"));
        }
        out.plans.push_str(&ranking(&ranked, opts.top));
    }
    if let Some(k) = opts.top {
        out.programs
            .sort_by(|a, b| a.estimate_us.total_cmp(&b.estimate_us));
        out.programs = diverse_top(std::mem::take(&mut out.programs), k);
    }
    if out.programs.is_empty() {
        // Nothing was translated: what was skipped is an error after all
        // (exit 1 with the reasons, never a warning alone).
        for d in &mut out.diags {
            d.severity = Severity::Error;
        }
    }
    out.failed = out.programs.is_empty() || out.diags.iter().any(|d| d.severity == Severity::Error);
    Ok(out)
}

/// The first `k` of programs ranked best estimate first, where programs the
/// estimate cannot tell apart (the same time, kernels, bytes and flops: for
/// example rmsnorm_mlp at B=1, whose best four candidates are one kernel
/// each, loop differently and measured 84 us against 55 us for a two-kernel
/// one ranked fifth) give way to the next distinct ones, which then get
/// measured too (by a tuner or the benchmark); they fill the remaining
/// places in rank order. The best program stays first.
fn diverse_top(ranked: Vec<TritonProgram>, k: usize) -> Vec<TritonProgram> {
    let same = |a: &TritonProgram, b: &TritonProgram| {
        a.kernels == b.kernels
            && (a.estimate_us - b.estimate_us).abs() <= 1e-3 * a.estimate_us.abs().max(1e-9)
            && a.bytes == b.bytes
            && a.flops == b.flops
    };
    let mut picked: Vec<usize> = Vec::new();
    for (i, p) in ranked.iter().enumerate() {
        if picked.len() < k && !picked.iter().any(|j| same(&ranked[*j], p)) {
            picked.push(i);
        }
    }
    for i in 0..ranked.len() {
        if picked.len() >= k {
            break;
        }
        if !picked.contains(&i) {
            picked.push(i);
        }
    }
    picked.sort_by(|a, b| {
        ranked[*a]
            .estimate_us
            .total_cmp(&ranked[*b].estimate_us)
            .then(a.cmp(b))
    });
    let mut slots: Vec<Option<TritonProgram>> = ranked.into_iter().map(Some).collect();
    picked.into_iter().filter_map(|i| slots[i].take()).collect()
}

/// Runner-ups shown by [`ranking`]; the others are counted.
const RUNNER_UPS: usize = 5;

/// Why the chosen program was chosen: the translated programs best static
/// estimate first (`ranked`), the first of them chosen (what `--top 1`
/// emits and `efir.compile` runs), with its estimate next to the
/// runner-ups' and their differences. Empty when nothing was translated.
pub fn ranking(ranked: &[&TritonProgram], top: Option<usize>) -> String {
    let Some(best) = ranked.first() else {
        return String::new();
    };
    let mut s = format!("\nchosen: @{}", best.name);
    match ranked.get(1) {
        None => s.push_str(", the only program translated\n"),
        Some(next) if next.estimate_us == best.estimate_us => s.push_str(&format!(
            ", the lowest static estimate of {} programs translated (tied with @{}; the first in module order wins)\n",
            ranked.len(),
            next.name
        )),
        Some(next) => s.push_str(&format!(
            ", the lowest static estimate of {} programs translated: {:.3} us, {:.3} us less than the runner-up @{}\n",
            ranked.len(),
            best.estimate_us,
            next.estimate_us - best.estimate_us,
            next.name
        )),
    }
    let width = ranked
        .iter()
        .take(RUNNER_UPS + 1)
        .map(|p| p.name.len() + 1)
        .max()
        .unwrap_or(0)
        .max("program".len());
    s.push_str(&format!(
        "  {:>4}  {:<width$}  {:>10}  {:>7}  {:>10}  {:>10}  vs chosen\n",
        "rank", "program", "time_us", "kernels", "bytes", "flops"
    ));
    for (i, p) in ranked.iter().take(RUNNER_UPS + 1).enumerate() {
        let why = if i == 0 {
            "chosen".to_string()
        } else {
            format!(
                "{:+.3} us, {:+} kernel(s), {:+.3e} bytes, {:+.3e} flops",
                p.estimate_us - best.estimate_us,
                p.kernels as i64 - best.kernels as i64,
                p.bytes - best.bytes,
                p.flops - best.flops
            )
        };
        let emitted = match top {
            Some(k) if i < k => " (emitted)",
            _ => "",
        };
        s.push_str(&format!(
            "  {:>4}  {:<width$}  {:>10.3}  {:>7}  {:>10.3e}  {:>10.3e}  {why}{emitted}\n",
            i + 1,
            format!("@{}", p.name),
            p.estimate_us,
            p.kernels,
            p.bytes,
            p.flops
        ));
    }
    if ranked.len() > RUNNER_UPS + 1 {
        s.push_str(&format!(
            "  ... and {} more (estimates up to {:.3} us)\n",
            ranked.len() - RUNNER_UPS - 1,
            ranked.last().map_or(0.0, |p| p.estimate_us)
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prog(name: &str, us: f64, kernels: usize) -> TritonProgram {
        TritonProgram {
            name: name.into(),
            source: String::new(),
            estimate_us: us,
            kernels,
            bytes: 1024.0,
            flops: 0.0,
        }
    }

    #[test]
    fn top_prefers_programs_the_estimate_tells_apart() {
        let p = |name: &str, us: f64, kernels: usize| TritonProgram {
            name: name.into(),
            source: String::new(),
            estimate_us: us,
            kernels,
            bytes: 100.0,
            flops: 10.0,
        };
        let ranked = vec![
            p("a", 45.0, 1),
            p("b", 45.0, 1),
            p("c", 45.0, 1),
            p("d", 48.0, 2),
            p("e", 50.0, 3),
        ];
        let names = |v: Vec<TritonProgram>| v.into_iter().map(|x| x.name).collect::<Vec<_>>();
        assert_eq!(names(diverse_top(ranked.clone(), 1)), ["a"]);
        assert_eq!(names(diverse_top(ranked.clone(), 3)), ["a", "d", "e"]);
        assert_eq!(names(diverse_top(ranked.clone(), 4)), ["a", "b", "d", "e"]);
        assert_eq!(names(diverse_top(ranked, 9)), ["a", "b", "c", "d", "e"]);
    }

    #[test]
    fn ranking_says_why_and_counts_the_rest() {
        let ps: Vec<TritonProgram> = (0..8)
            .map(|i| prog(&format!("f.c{i}"), 1.0 + i as f64, 1 + i))
            .collect();
        let ranked: Vec<&TritonProgram> = ps.iter().collect();
        let r = ranking(&ranked, Some(2));
        assert!(r.starts_with("\nchosen: @f.c0, the lowest static estimate of 8 programs translated: 1.000 us, 1.000 us less than the runner-up @f.c1\n"), "{r}");
        assert!(r.contains("chosen (emitted)\n"), "{r}");
        assert!(
            r.contains("+1.000 us, +1 kernel(s), +0.000e0 bytes, +0.000e0 flops (emitted)\n"),
            "{r}"
        );
        assert!(r.contains("+5.000 us, +5 kernel(s)"), "{r}");
        assert!(!r.contains("@f.c6 "), "{r}");
        assert!(
            r.ends_with("  ... and 2 more (estimates up to 8.000 us)\n"),
            "{r}"
        );
        assert_eq!(ranking(&[], None), "");
    }

    #[test]
    fn ranking_names_a_tie() {
        let ps = [prog("a", 2.0, 1), prog("b", 2.0, 2)];
        let r = ranking(&ps.iter().collect::<Vec<_>>(), None);
        assert!(r.contains("chosen: @a, the lowest static estimate of 2 programs translated (tied with @b; the first in module order wins)"), "{r}");
        assert!(!r.contains("emitted"), "{r}");
        let one = ranking(&[&ps[1]], None);
        assert!(
            one.starts_with("\nchosen: @b, the only program translated\n"),
            "{one}"
        );
    }
}
