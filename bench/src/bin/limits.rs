//! How far the time limits of `--saturate`, `--compact` and `--extract`
//! overshoot on large inputs (issue 30): each pass runs with `time-limit=L` (and other
//! limits out of the way) on generated inputs (a chain of 20,000 ops, 4,000
//! trivial functions, 3,000 partition/combine axes, eight copies of a
//! workload that neither pass finishes within the limit) and the largest
//! example, and the bench prints the pass's wall time (parse and print
//! subtracted), the limit and the overshoot. Each limit is one deadline
//! for the whole module, shared by its functions.
//! Run: `cargo run --release -p efir-bench --bin limits [-- --limit S]`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use efir_driver::PassFlag;
use efir_ir::PrintOptions;
use std::time::Instant;

fn chain(n: usize) -> String {
    let mut s = String::from("func @chain(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {\n");
    let mut prev = "%x".to_string();
    for i in 0..n {
        let op = if i % 2 == 0 { "ew.neg" } else { "ew.exp" };
        s.push_str(&format!("  %v{i} = {op} {prev} : tensor<4x8xf32>\n"));
        prev = format!("%v{i}");
    }
    s.push_str(&format!("  return {prev} : tensor<4x8xf32>\n}}\n"));
    s
}

fn functions(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "func @f{i}(%x: tensor<4xf32>) -> tensor<4xf32> {{\n  %y = ew.neg %x : tensor<4xf32>\n  return %y : tensor<4xf32>\n}}\n"
            )
        })
        .collect()
}

fn axes(n: usize) -> String {
    let mut s = String::from("func @axes(%x: tensor<4xf32>) -> tensor<4xf32> {\n");
    let mut prev = "%x".to_string();
    for i in 0..n {
        s.push_str(&format!(
            "  %p{i} = par.partition<0, @a{i}> {prev} : tensor<4xf32, @a{i}: part(0)>\n  %e{i} = ew.neg %p{i} : tensor<4xf32, @a{i}: part(0)>\n  %c{i} = par.combine<0, @a{i}> %e{i} : tensor<4xf32>\n"
        ));
        prev = format!("%c{i}");
    }
    s.push_str(&format!("  return {prev} : tensor<4xf32>\n}}\n"));
    s
}

fn flag(name: &str, options: &str) -> PassFlag {
    PassFlag {
        name: name.into(),
        options: options.into(),
    }
}

/// Seconds to run `flags` on `src`, less the time of an empty pipeline
/// (parse, verify, print); the output text.
fn timed(src: &str, flags: &[PassFlag]) -> (f64, Option<String>, usize) {
    let reg = efir_registry::registry();
    let t0 = Instant::now();
    let base = efir_driver::run_case(src, &reg, &[], PrintOptions::default()).expect("pipeline");
    let empty = t0.elapsed().as_secs_f64();
    assert!(base.diags.is_empty(), "{:?}", base.diags);
    let t1 = Instant::now();
    let out = efir_driver::run_case(src, &reg, flags, PrintOptions::default()).expect("pipeline");
    let total = t1.elapsed().as_secs_f64();
    let errors = out
        .diags
        .iter()
        .filter(|d| d.severity == efir_diagnostics::Severity::Error)
        .count();
    ((total - empty).max(0.0), out.text, errors)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let limit: f64 = args
        .iter()
        .position(|a| a == "--limit")
        .and_then(|i| args.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let example = std::fs::read_to_string(root.join("examples/attn_prefill.efir"))
        .expect("examples/attn_prefill.efir");
    let small = std::fs::read_to_string(root.join("examples/small/rmsnorm_swiglu.efir"))
        .expect("examples/small/rmsnorm_swiglu.efir");
    let copies: String = (0..8)
        .map(|i| small.replace("@rmsnorm_swiglu(", &format!("@rmsnorm_swiglu_{i}(")))
        .collect();
    let inputs: Vec<(&str, String)> = vec![
        ("rmsnorm_swiglu x8", copies),
        ("chain 20000 ops", chain(20_000)),
        ("4000 functions", functions(4000)),
        ("3000 axes", axes(3000)),
        ("attn_prefill.efir", example),
    ];
    println!("time limit {limit} s (one deadline per module); wall time of the pass, overshoot = wall - limit");
    println!(
        "{:<20} {:<9} {:>9} {:>10} {:>7}",
        "input", "pass", "wall (s)", "overshoot", "errors"
    );
    for (name, src) in &inputs {
        let sat = format!("time-limit={limit},node-limit=100000000,iter-limit=1000000");
        let (t, text, errors) = timed(src, &[flag("saturate", &sat)]);
        println!(
            "{name:<20} {:<9} {t:>9.3} {:>+10.3} {errors:>7}",
            "saturate",
            t - limit
        );
        // Compaction of a bounded saturation (its own limit is the one measured).
        let Some(saturated) = text.or_else(|| timed(src, &[flag("saturate", "time-limit=5")]).1)
        else {
            continue;
        };
        let cmp = format!("time-limit={limit},max-candidates=1000000");
        let (t, _, errors) = timed(&saturated, &[flag("compact", &cmp)]);
        println!(
            "{name:<20} {:<9} {t:>9.3} {:>+10.3} {errors:>7}",
            "compact",
            t - limit
        );
        // Greedy extraction of the same e-graph (it finishes far within the
        // limit: each e-node is costed once).
        let (t, _, errors) = timed(
            &saturated,
            &[flag("extract", &format!("time-limit={limit}"))],
        );
        println!(
            "{name:<20} {:<9} {t:>9.3} {:>+10.3} {errors:>7}",
            "extract",
            t - limit
        );
    }
}
