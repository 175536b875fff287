//! `efir._efir`: efir's Rust pipeline in-process for Python, built by maturin
//! (see `docs/python.md`). It exposes what `efir-opt` and `efir-translate`
//! do, through the same code in `efir_driver`:
//!
//! - `parse(text, filename="<string>", generic=False) -> str`
//! - `run_passes(text, passes, filename="<string>", generic=False) -> str`
//! - `to_triton(text, filename="<string>", top=None, func=None,
//!   skip_unsupported=False, dims=None) -> list[tuple[str, str]]`
//! - `passes() -> list[tuple[str, str]]`
//!
//! Diagnostics become `efir._efir.EfirError` (the rendered text, without
//! color, plus `code`, `codes`, `filename`, `line`, `column` and
//! `diagnostics`); warnings become `efir._efir.EfirWarning`. The Rust work
//! runs with the GIL released, and a panic (a bug in efir) becomes an
//! `EfirError` whose `internal` attribute is true instead of crossing into
//! Python as a `PanicException`.
//!
//! The functions here without Python types ([`parse_module`],
//! [`run_passes_text`], [`translate`]) are the extension's logic; the
//! `#[pymodule]` below only converts arguments, results and [`Failure`]s.

use efir_diagnostics::{render, Diag, Severity};
use efir_driver::translate::TritonOptions;
use efir_ir::PrintOptions;
use pyo3::prelude::*;
use std::panic::{catch_unwind, AssertUnwindSafe};

pyo3::create_exception!(
    efir._efir,
    EfirError,
    pyo3::exceptions::PyException,
    "An efir diagnostic: the message is the rendered diagnostic text; `code` is the first error's code (such as \"E0101\") or None, `codes` all codes, `filename`, `line` and `column` locate the first error, `diagnostics` lists (severity, code, message, line, column) tuples, and `internal` is true for a bug in efir (a Rust panic)."
);

pyo3::create_exception!(
    efir._efir,
    EfirWarning,
    pyo3::exceptions::PyUserWarning,
    "An efir warning diagnostic (such as E0706, candidate enumeration stopped by a limit); the message is the rendered diagnostic."
);

/// One diagnostic as the Python side sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct DiagInfo {
    /// `error`, `warning` or `note`.
    pub severity: &'static str,
    /// Its code, such as `E0101`.
    pub code: &'static str,
    /// Its headline.
    pub message: String,
    /// 1-based line of its primary span.
    pub line: usize,
    /// 1-based column (in characters) of its primary span.
    pub column: usize,
}

impl DiagInfo {
    fn new(src: &str, d: &Diag) -> DiagInfo {
        let (line, column) = line_column(src, d.span.start as usize);
        DiagInfo {
            severity: match d.severity {
                Severity::Error => "error",
                Severity::Warning => "warning",
                Severity::Note => "note",
            },
            code: d.code,
            message: d.message.clone(),
            line,
            column,
        }
    }
}

/// 1-based line and column (in characters) of a byte offset, clamped to the
/// text.
fn line_column(src: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(src.len());
    while !src.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &src[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (
        efir_diagnostics::line_of(src, offset),
        before[line_start..].chars().count() + 1,
    )
}

/// Why a call failed, before it becomes an `EfirError`.
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    /// The exception's message: rendered diagnostics (no color) or one
    /// sentence.
    pub message: String,
    /// The file name the diagnostics were rendered against.
    pub filename: String,
    /// The diagnostics, first error first; empty for a failure without a
    /// source location (an unknown pass, say).
    pub diags: Vec<DiagInfo>,
    /// Whether this is a bug in efir (a panic) rather than bad input.
    pub internal: bool,
}

impl Failure {
    /// A failure without a source location.
    pub fn plain(filename: &str, message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            filename: filename.to_string(),
            diags: Vec::new(),
            internal: false,
        }
    }

    /// A failure from diagnostics against `src`, rendered without color.
    /// Errors come first so that `code` names the first error.
    pub fn from_diags(filename: &str, src: &str, diags: &[Diag]) -> Failure {
        let mut sorted: Vec<&Diag> = diags.iter().collect();
        sorted.sort_by_key(|d| d.severity != Severity::Error);
        let owned: Vec<Diag> = sorted.iter().map(|d| (*d).clone()).collect();
        Failure {
            message: render(filename, src, &owned, false).trim_end().to_string(),
            filename: filename.to_string(),
            diags: owned.iter().map(|d| DiagInfo::new(src, d)).collect(),
            internal: false,
        }
    }

    /// The code of the first error, if there is one.
    pub fn code(&self) -> Option<&'static str> {
        self.diags.first().map(|d| d.code)
    }
}

/// A successful result and the warnings to issue with it, each rendered.
#[derive(Clone, Debug, PartialEq)]
pub struct Done<T> {
    /// The result.
    pub value: T,
    /// Rendered warning diagnostics, one per warning.
    pub warnings: Vec<String>,
}

fn rendered_warnings(filename: &str, src: &str, diags: &[Diag]) -> Vec<String> {
    diags
        .iter()
        .filter(|d| d.severity != Severity::Error)
        .map(|d| {
            render(filename, src, std::slice::from_ref(d), false)
                .trim_end()
                .to_string()
        })
        .collect()
}

/// Parse and verify `text` and print the module back (`generic`: every op
/// in the generic form).
pub fn parse_module(text: &str, filename: &str, generic: bool) -> Result<Done<String>, Failure> {
    run_passes_text(text, &[] as &[&str], filename, generic)
}

/// Parse and verify `text`, run the passes given as `efir-opt` flags (such
/// as `--saturate`, `--compact=max-candidates=8`) in order, and print the
/// result.
pub fn run_passes_text<S: AsRef<str>>(
    text: &str,
    passes: &[S],
    filename: &str,
    generic: bool,
) -> Result<Done<String>, Failure> {
    let flags = efir_driver::parse_pass_flags(passes).map_err(|e| Failure::plain(filename, e))?;
    let registry = efir_registry::registry();
    let out = efir_driver::run_case(text, &registry, &flags, PrintOptions { generic })
        .map_err(|e| Failure::plain(filename, e))?;
    let failed = out.diags.iter().any(|d| d.severity == Severity::Error);
    match out.text {
        Some(t) if !failed => Ok(Done {
            value: t,
            warnings: rendered_warnings(filename, text, &out.diags),
        }),
        _ => Err(Failure::from_diags(filename, text, &out.diags)),
    }
}

/// Translate the programs of `text` to Triton modules: `(name, source)`
/// pairs, as `efir-translate --to-triton` would write them.
pub fn translate(
    text: &str,
    filename: &str,
    opts: &TritonOptions,
) -> Result<Done<Vec<(String, String)>>, Failure> {
    let registry = efir_registry::registry();
    let res = efir_driver::translate::to_triton(text, filename, &registry, opts)
        .map_err(|e| Failure::plain(filename, e))?;
    if res.failed {
        if res.diags.is_empty() {
            return Err(Failure::plain(
                filename,
                format!("no program to translate in `{filename}`"),
            ));
        }
        // Where every program was skipped, the translator made the skips
        // errors: the first line gives the first reason (callers that show
        // one line, like the torch.compile fallback warning, keep it).
        return Err(Failure::from_diags(filename, text, &res.diags));
    }
    Ok(Done {
        value: res
            .programs
            .into_iter()
            .map(|p| (p.name, p.source))
            .collect(),
        warnings: rendered_warnings(filename, text, &res.diags),
    })
}

/// Run `f`, turning a panic into an internal [`Failure`].
fn guarded<T>(filename: &str, f: impl FnOnce() -> Result<T, Failure>) -> Result<T, Failure> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".to_string());
        Err(Failure {
            internal: true,
            ..Failure::plain(
                filename,
                format!("internal error (a bug in efir, please report it): {what}"),
            )
        })
    })
}

/// The `EfirError` for a failure, with its attributes set.
fn to_pyerr(py: Python<'_>, f: Failure) -> PyErr {
    let err = EfirError::new_err(f.message.clone());
    let value = err.value(py);
    let diags: Vec<(&str, &str, String, usize, usize)> = f
        .diags
        .iter()
        .map(|d| (d.severity, d.code, d.message.clone(), d.line, d.column))
        .collect();
    let first = f.diags.first();
    let set = || -> PyResult<()> {
        value.setattr("code", f.code())?;
        value.setattr("codes", f.diags.iter().map(|d| d.code).collect::<Vec<_>>())?;
        value.setattr("filename", &f.filename)?;
        value.setattr("line", first.map(|d| d.line))?;
        value.setattr("column", first.map(|d| d.column))?;
        value.setattr("diagnostics", diags)?;
        value.setattr("internal", f.internal)?;
        Ok(())
    };
    match set() {
        Ok(()) => err,
        Err(e) => e,
    }
}

/// The result for Python: the value after issuing the warnings, or the
/// `EfirError`.
fn finish<T>(py: Python<'_>, r: Result<Done<T>, Failure>) -> PyResult<T> {
    let done = r.map_err(|f| to_pyerr(py, f))?;
    let category = py.get_type::<EfirWarning>();
    for w in done.warnings {
        // A NUL byte (from the source text) cannot cross into a C string.
        let msg = std::ffi::CString::new(w.replace('\0', "\\0")).expect("NUL bytes were replaced");
        PyErr::warn(py, category.as_any(), &msg, 1)?;
    }
    Ok(done.value)
}

/// efir's Rust pipeline: parse and verify, run passes, translate to Triton.
/// Errors are `EfirError` with the rendered diagnostic; warnings are
/// `EfirWarning`.
#[pymodule]
mod _efir {
    use super::*;

    #[pymodule_init]
    fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
        // `EFIR_LOG=debug` shows the passes' debug events (compaction's
        // phases) on stderr, as with the tools.
        efir_driver::logging::init_embedded();
        let py = m.py();
        m.add("EfirError", py.get_type::<EfirError>())?;
        m.add("EfirWarning", py.get_type::<EfirWarning>())?;
        m.add("__version__", env!("CARGO_PKG_VERSION"))?;
        Ok(())
    }

    /// Parse and verify a module and print it back; raises EfirError with
    /// the rendered diagnostics when the text is invalid. `generic`: print
    /// every op in the generic form.
    #[pyfunction]
    #[pyo3(signature = (text, filename = "<string>", generic = false))]
    fn parse(py: Python<'_>, text: &str, filename: &str, generic: bool) -> PyResult<String> {
        let r = py.detach(|| guarded(filename, || parse_module(text, filename, generic)));
        finish(py, r)
    }

    /// Parse and verify a module, run the passes given as efir-opt flags in
    /// order (for example ["--saturate", "--compact=max-candidates=8"]) and
    /// print the result; raises EfirError on a diagnostic or a bad flag.
    #[pyfunction]
    #[pyo3(signature = (text, passes, filename = "<string>", generic = false))]
    fn run_passes(
        py: Python<'_>,
        text: &str,
        passes: Vec<String>,
        filename: &str,
        generic: bool,
    ) -> PyResult<String> {
        let r = py.detach(|| {
            guarded(filename, || {
                run_passes_text(text, &passes, filename, generic)
            })
        });
        finish(py, r)
    }

    /// Translate the programs of a module to Triton: a list of (program
    /// name, Python source) as efir-translate --to-triton writes them.
    /// `func`: only this program; `top`: the K programs with the best static
    /// estimate, best first (programs that cannot be lowered are skipped with
    /// an EfirWarning, as with `skip_unsupported`); `dims`: representative
    /// sizes of symbolic extents, `{"dyn0": 8}` (efir-translate's `--dim`).
    #[pyfunction]
    #[pyo3(signature = (text, filename = "<string>", top = None, func = None, skip_unsupported = false, dims = None))]
    fn to_triton(
        py: Python<'_>,
        text: &str,
        filename: &str,
        top: Option<usize>,
        func: Option<String>,
        skip_unsupported: bool,
        dims: Option<std::collections::BTreeMap<String, u64>>,
    ) -> PyResult<Vec<(String, String)>> {
        let opts = TritonOptions {
            func,
            top,
            skip_unsupported,
            plans: false,
            dims: dims.unwrap_or_default(),
        };
        let r = py.detach(|| guarded(filename, || translate(text, filename, &opts)));
        finish(py, r)
    }

    /// The registered passes: (name, one-line summary) pairs; each is the
    /// flag `--name[=key=value,...]` of run_passes and efir-opt.
    #[pyfunction]
    fn passes() -> Vec<(String, String)> {
        efir_registry::all_passes()
            .iter()
            .map(|p| (p.name.to_string(), p.summary.to_string()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  return %x\n}\n";

    #[test]
    fn parse_prints_the_module() {
        let done = parse_module(OK, "ok.efir", false).unwrap();
        assert!(done.value.contains("func @f"), "{}", done.value);
        assert!(done.warnings.is_empty());
    }

    #[test]
    fn syntax_error_is_rendered_without_color_and_located() {
        let src = "func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  return %x %x\n}\n";
        let f = parse_module(src, "bad.efir", false).unwrap_err();
        assert!(!f.internal);
        assert!(f.code().is_some_and(|c| c.starts_with("E01")), "{f:?}");
        assert!(f.message.contains("bad.efir:2:"), "{}", f.message);
        assert!(f.message.contains("  return %x %x"), "{}", f.message);
        assert!(
            !f.message.contains('\u{1b}'),
            "ANSI escape in {}",
            f.message
        );
        assert_eq!(f.diags[0].line, 2);
    }

    #[test]
    fn unknown_pass_is_a_plain_failure() {
        let f = run_passes_text(OK, &["--no-such-pass"], "ok.efir", false).unwrap_err();
        assert_eq!(f.message, "unknown pass `--no-such-pass`");
        assert_eq!(f.code(), None);
        let f = run_passes_text(OK, &["saturate"], "ok.efir", false).unwrap_err();
        assert!(f.message.contains("expected a pass flag"), "{}", f.message);
    }

    #[test]
    fn translation_failures_name_the_program() {
        // A reshape of partial results reads them from memory: E0801.
        let src = "func @merge(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>) -> tensor<8xf32> {
  %xp = par.partition<1, @k> %x : tensor<2x8xf32, @k: part(1)>
  %wp = par.partition<0, @k> %w : tensor<8x4xf32, @k: part(0)>
  %m = tile.matmul %xp, %wp : tensor<2x4xf32, @k: partial(#red.sum)>
  %r = tensor.reshape %m : tensor<8xf32, @k: partial(#red.sum)>
  %s = par.reduce<#red.sum, @k> %r : tensor<8xf32>
  return %s : tensor<8xf32>
}
";
        let f = translate(src, "m.efir", &TritonOptions::default()).unwrap_err();
        assert_eq!(f.code(), Some("E0801"));
        assert!(
            f.message.starts_with("error[E0801]: cannot lower `@merge`"),
            "{}",
            f.message
        );
        let opts = TritonOptions {
            top: Some(1),
            ..TritonOptions::default()
        };
        // Skipped under --top, but nothing else translated: still an error.
        let f = translate(src, "m.efir", &opts).unwrap_err();
        assert_eq!(f.code(), Some("E0801"));
        assert!(
            f.message.starts_with("error[E0801]: cannot lower `@merge`"),
            "{}",
            f.message
        );
        let ok = "func @merge(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %y = ew.exp %x : tensor<2x8xf32>
  %r = ew.neg %y : tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}
";
        let done = translate(ok, "m.efir", &TritonOptions::default()).unwrap();
        assert_eq!(done.value.len(), 1);
        assert_eq!(done.value[0].0, "merge");
        assert!(
            done.value[0].1.contains("@triton.jit"),
            "{}",
            done.value[0].1
        );
    }

    #[test]
    fn panics_become_internal_failures() {
        let f = guarded::<()>("x.efir", || panic!("boom")).unwrap_err();
        assert!(f.internal);
        assert!(f.message.contains("a bug in efir") && f.message.contains("boom"));
    }

    #[test]
    fn columns_count_characters() {
        assert_eq!(line_column("ab\ncé x", 7), (2, 4));
        assert_eq!(line_column("ab", 99), (1, 3));
    }
}
