//! The machinery shared by efir's tools: splitting a file into cases
//! ([`split`]), checking `// expected-error` comments
//! ([`expected`]), reading pass flags ([`pass_flag`], [`parse_pass_flags`]),
//! running a parse -> verify -> passes -> print job on one case
//! ([`run_case`]), translating candidate programs to Triton
//! ([`translate`]), and usage errors with "did you mean" ([`usage`]). The command-line tools and the Python extension
//! (`crates/python`) are thin layers over these.

pub mod dims;
pub mod expected;
pub mod logging;
pub mod split;
pub mod translate;
pub mod usage;

use efir_diagnostics::Diag;
use efir_ir::pass::{PassManager, PassOptions};
use efir_ir::{parse_and_verify, print_module, PrintOptions, Registry};
use serde_json::Value;

/// One pass flag from the command line: `--name[=options]`.
#[derive(Clone, Debug, PartialEq)]
pub struct PassFlag {
    /// The pass name.
    pub name: String,
    /// Its options text (after `=`).
    pub options: String,
}

/// The pass flag that a command-line argument `--name[=options]` spells, or
/// `None` when `name` is not a registered pass (then the argument is some
/// other option).
pub fn pass_flag(arg: &str) -> Option<PassFlag> {
    let body = arg.strip_prefix("--")?;
    let (name, opts) = body.split_once('=').unwrap_or((body, ""));
    efir_registry::pass(name)?;
    Some(PassFlag {
        name: name.to_string(),
        options: opts.to_string(),
    })
}

/// Pass flags from arguments such as `--saturate` and
/// `--compact=max-candidates=8`, in order; every argument must name a
/// registered pass. The options are checked by [`build_pipeline`].
pub fn parse_pass_flags<S: AsRef<str>>(args: &[S]) -> Result<Vec<PassFlag>, String> {
    args.iter()
        .map(|a| {
            let a = a.as_ref();
            pass_flag(a).ok_or_else(|| match a.strip_prefix("--") {
                Some(body) => format!(
                    "unknown pass `--{}`",
                    body.split_once('=').map_or(body, |(n, _)| n)
                ),
                None => format!("expected a pass flag such as `--canonicalize`, found `{a}`"),
            })
        })
        .collect()
}

/// Build a pass manager from flags, or explain which flag is wrong.
pub fn build_pipeline(flags: &[PassFlag]) -> Result<PassManager, String> {
    let mut pm = PassManager::new();
    for f in flags {
        let info =
            efir_registry::pass(&f.name).ok_or_else(|| format!("unknown pass `--{}`", f.name))?;
        let opts = PassOptions::parse(&f.options).map_err(|e| format!("--{}: {e}", f.name))?;
        pm.add((info.create)(&opts).map_err(|e| format!("--{}: {e}", f.name))?);
    }
    Ok(pm)
}

/// The result of running one case.
pub struct CaseOutput {
    /// The printed module, if the case got that far.
    pub text: Option<String>,
    /// Diagnostics, with spans relative to the case's text.
    pub diags: Vec<Diag>,
    /// One stats object per pass run.
    pub stats: Vec<Value>,
}

/// Parse, verify, run the pipeline and print one case.
pub fn run_case(
    src: &str,
    registry: &Registry,
    flags: &[PassFlag],
    print: PrintOptions,
) -> Result<CaseOutput, String> {
    let mut pm = build_pipeline(flags)?;
    let (mut m, diags) = parse_and_verify(src, registry);
    if !diags.is_empty() {
        return Ok(CaseOutput {
            text: None,
            diags,
            stats: Vec::new(),
        });
    }
    let (stats, res) = pm.run(&mut m, registry);
    match res {
        Err(diags) => Ok(CaseOutput {
            text: None,
            diags,
            stats,
        }),
        Ok(()) => Ok(CaseOutput {
            text: Some(print_module(&m, registry, print)),
            diags: std::mem::take(&mut pm.warnings),
            stats,
        }),
    }
}

pub use efir_ir::input::{read_limited, MAX_INPUT_BYTES};

/// The name and text of a tool's input: a file, or stdin for `-`; at most
/// [`MAX_INPUT_BYTES`], and UTF-8.
pub fn read_source(input: &str) -> Result<(String, String), String> {
    if input == "-" {
        let s = read_limited(std::io::stdin().lock(), "stdin")?;
        return Ok(("<stdin>".to_string(), s));
    }
    let f = std::fs::File::open(input).map_err(|e| format!("cannot read `{input}`: {e}"))?;
    let s = read_limited(f, &format!("`{input}`"))?;
    Ok((input.to_string(), s))
}

/// Write `text` to stdout and flush it. A closed pipe (`efir-opt f | head`)
/// is not an error (the reader has what it wanted); any other failure (a
/// full disk) is.
pub fn write_stdout(text: &str) -> Result<(), String> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(format!("cannot write to stdout: {e}"))
        }
        _ => Ok(()),
    }
}

/// Whether to color diagnostics on stderr for a `--color` choice
/// (`always`, `never`, `auto`).
pub fn stderr_color(choice: &str) -> bool {
    use std::io::IsTerminal;
    match choice {
        "always" => true,
        "never" => false,
        _ => std::io::stderr().is_terminal(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_flags_from_arguments() {
        assert_eq!(
            pass_flag("--compact=max-candidates=8"),
            Some(PassFlag {
                name: "compact".into(),
                options: "max-candidates=8".into()
            })
        );
        assert_eq!(
            pass_flag("--saturate").map(|f| f.options),
            Some(String::new())
        );
        assert_eq!(pass_flag("--print-generic"), None);
        assert_eq!(pass_flag("saturate"), None);
        let flags = parse_pass_flags(&["--saturate", "--compact=max-candidates=2"]).unwrap();
        assert_eq!(
            flags.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(),
            ["saturate", "compact"]
        );
        assert_eq!(
            parse_pass_flags(&["--saturate", "--bogus=1"]).unwrap_err(),
            "unknown pass `--bogus`"
        );
        assert!(parse_pass_flags(&["canonicalize"])
            .unwrap_err()
            .contains("expected a pass flag"));
        // Options are checked when the pipeline is built.
        let bad = parse_pass_flags(&["--compact=nope=1"]).unwrap();
        let err = build_pipeline(&bad).err().expect("a bad option");
        assert!(err.starts_with("--compact:"), "{err}");
    }
}
