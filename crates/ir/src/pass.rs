//! The pass manager: passes are registered once (see `efir-registry`),
//! instantiated from `--name[=key=value,...]` flags in order, run on a
//! module, verified after each pass, and report statistics as JSON.

use crate::dialect::Registry;
use crate::module::Module;
use crate::verify::verify;
use efir_diagnostics::Diag;
use indexmap::IndexMap;
use serde_json::{json, Map, Value};
use std::time::Instant;

/// A pass failed; its diagnostics are in the context.
#[derive(Debug)]
pub struct PassFailed;

/// What a pass can use and report while it runs.
pub struct PassContext<'a> {
    /// The dialect registry.
    pub registry: &'a Registry,
    /// Diagnostics the pass reports.
    pub diags: Vec<Diag>,
    /// Pass-specific statistics (merged into the `--stats=json` line).
    pub stats: Map<String, Value>,
}

/// A transformation of a module.
pub trait Pass {
    /// The flag name, e.g. `canonicalize`.
    fn name(&self) -> &'static str;
    /// Run on a module.
    fn run(&mut self, m: &mut Module, cx: &mut PassContext<'_>) -> Result<(), PassFailed>;
}

/// Options of one pass instance, from `--pass=key=value,key=value`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PassOptions {
    /// Key to value, in the order given.
    pub values: IndexMap<String, String>,
}

impl PassOptions {
    /// Parse `key=value,key=value` (an empty string gives no options).
    pub fn parse(s: &str) -> Result<PassOptions, String> {
        let mut values: IndexMap<String, String> = IndexMap::new();
        for (n, item) in s.split(',').filter(|i| !i.trim().is_empty()).enumerate() {
            // A bare first item is the pass's mode: `--extract=greedy`; a bare
            // later item continues the previous value's list:
            // `families=algebraic,refinement`.
            let (k, v) = match item.split_once('=') {
                Some(kv) => kv,
                None if n == 0 => ("mode", item),
                None => {
                    if let Some((_, last)) = values.last_mut() {
                        last.push(',');
                        last.push_str(item.trim());
                    }
                    continue;
                }
            };
            if values
                .insert(k.trim().to_string(), v.trim().to_string())
                .is_some()
            {
                return Err(format!("option `{}` is given twice", k.trim()));
            }
        }
        Ok(PassOptions { values })
    }

    /// Fail on keys other than `known`.
    pub fn check_known(&self, pass: &str, known: &[&str]) -> Result<(), String> {
        for k in self.values.keys() {
            if !known.contains(&k.as_str()) {
                return Err(format!(
                    "pass `{pass}` has no option `{k}` (options: {})",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ));
            }
        }
        Ok(())
    }

    /// A boolean option (`true`/`false`/`1`/`0`), with a default.
    pub fn get_bool(&self, key: &str, default: bool) -> Result<bool, String> {
        match self.values.get(key).map(String::as_str) {
            None => Ok(default),
            Some("true" | "1") => Ok(true),
            Some("false" | "0") => Ok(false),
            Some(v) => Err(format!("option `{key}` must be true or false, found `{v}`")),
        }
    }

    /// An unsigned integer option with a default.
    pub fn get_usize(&self, key: &str, default: usize) -> Result<usize, String> {
        match self.values.get(key) {
            None => Ok(default),
            Some(v) => v
                .parse()
                .map_err(|_| format!("option `{key}` must be a non-negative integer, found `{v}`")),
        }
    }

    /// A duration option in seconds: finite, at most [`MAX_SECONDS`], and
    /// positive (or, with `zero_ok`, zero too).
    pub fn get_seconds(&self, key: &str, default: f64, zero_ok: bool) -> Result<f64, String> {
        let Some(v) = self.values.get(key) else {
            return Ok(default);
        };
        let what = if zero_ok {
            "a number of seconds (0 or more)"
        } else {
            "a positive number of seconds"
        };
        match v.parse::<f64>() {
            Ok(t) if t.is_finite() && (t > 0.0 || (zero_ok && t == 0.0)) && t <= MAX_SECONDS => {
                Ok(t)
            }
            Ok(t) if t.is_finite() && t > MAX_SECONDS => Err(format!(
                "option `{key}` must be at most {MAX_SECONDS} seconds, found `{v}`"
            )),
            _ => Err(format!("option `{key}` must be {what}, found `{v}`")),
        }
    }

    /// An integer option within `lo..=hi`.
    pub fn get_usize_in(
        &self,
        key: &str,
        default: usize,
        lo: usize,
        hi: usize,
    ) -> Result<usize, String> {
        let n = self.get_usize(key, default)?;
        if n < lo || n > hi {
            return Err(format!(
                "option `{key}` must be between {lo} and {hi}, found `{n}`"
            ));
        }
        Ok(n)
    }
}

/// The longest time limit a pass takes (a week), so that it converts to a
/// `Duration` and to deadlines without overflow.
pub const MAX_SECONDS: f64 = 604_800.0;

/// A registered pass: its flag, docs and constructor.
#[derive(Clone, Copy)]
pub struct PassInfo {
    /// The flag name.
    pub name: &'static str,
    /// One line for `--help`.
    pub summary: &'static str,
    /// Option names and their meaning.
    pub options: &'static [(&'static str, &'static str)],
    /// Build an instance from options (or explain what is wrong).
    pub create: fn(&PassOptions) -> Result<Box<dyn Pass>, String>,
}

impl PassInfo {
    /// Reject options this pass does not list (so that `--help` and what
    /// the pass accepts cannot disagree).
    pub fn check_options(&self, o: &PassOptions) -> Result<(), String> {
        let known: Vec<&str> = self.options.iter().map(|(k, _)| *k).collect();
        o.check_known(self.name, &known)
    }
}

/// A pipeline of pass instances.
#[derive(Default)]
pub struct PassManager {
    passes: Vec<Box<dyn Pass>>,
    /// Warnings the passes reported (they do not fail the pipeline).
    pub warnings: Vec<Diag>,
}

impl PassManager {
    /// An empty pipeline.
    pub fn new() -> PassManager {
        PassManager::default()
    }

    /// Append a pass.
    pub fn add(&mut self, p: Box<dyn Pass>) {
        self.passes.push(p);
    }

    /// Number of passes.
    pub fn len(&self) -> usize {
        self.passes.len()
    }

    /// Whether the pipeline is empty.
    pub fn is_empty(&self) -> bool {
        self.passes.is_empty()
    }

    /// Run every pass in order, verifying after each. Returns one stats
    /// object per pass that ran; stops at the first failure.
    pub fn run(
        &mut self,
        m: &mut Module,
        registry: &Registry,
    ) -> (Vec<Value>, Result<(), Vec<Diag>>) {
        let mut all_stats = Vec::new();
        for p in &mut self.passes {
            let ops_before = m.num_ops();
            let start = Instant::now();
            let mut cx = PassContext {
                registry,
                diags: Vec::new(),
                stats: Map::new(),
            };
            let res = p.run(m, &mut cx);
            let time_s = start.elapsed().as_secs_f64();
            let mut stats = json!({
                "pass": p.name(),
                "time_s": time_s,
                "ops_before": ops_before,
                "ops_after": m.num_ops(),
            });
            if let Value::Object(o) = &mut stats {
                o.extend(cx.stats);
            }
            all_stats.push(stats);
            let failed = cx
                .diags
                .iter()
                .any(|d| d.severity == efir_diagnostics::Severity::Error);
            if res.is_err() || failed {
                return (all_stats, Err(cx.diags));
            }
            self.warnings.extend(cx.diags);
            let errs = verify(m, registry);
            if !errs.is_empty() {
                return (all_stats, Err(errs));
            }
        }
        (all_stats, Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options() {
        let o = PassOptions::parse("a=1, b=true").unwrap();
        assert_eq!(o.get_usize("a", 0), Ok(1));
        assert_eq!(o.get_bool("b", false), Ok(true));
        assert!(o.check_known("p", &["a"]).is_err());
        assert_eq!(
            PassOptions::parse("greedy").unwrap().values["mode"],
            "greedy"
        );
        let l = PassOptions::parse("families=a,b,n=3").unwrap();
        assert_eq!(l.values["families"], "a,b");
        assert_eq!(l.get_usize("n", 0), Ok(3));
        assert!(PassOptions::parse("a=1,a=2").is_err());
        assert!(o.get_usize("b", 0).is_err());
    }

    #[test]
    fn a_pass_accepts_the_options_it_lists() {
        const INFO: PassInfo = PassInfo {
            name: "p",
            summary: "",
            options: &[("a", ""), ("b", "")],
            create: |_| Err(String::new()),
        };
        let ok = PassOptions::parse("a=1, b=true").unwrap();
        assert_eq!(INFO.check_options(&ok), Ok(()));
        let bad = PassOptions::parse("a=1, c=2").unwrap();
        assert_eq!(
            INFO.check_options(&bad),
            Err("pass `p` has no option `c` (options: a, b)".to_string())
        );
    }
}
