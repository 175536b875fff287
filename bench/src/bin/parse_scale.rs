//! Parses, verifies and prints a synthetic module of N ops (default
//! 100,000) and prints the time of each phase. Run in release:
//! `cargo run --release -p efir-bench --bin parse_scale [-- N]`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::time::Instant;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    let reg = efir_registry::registry();
    let src = efir_bench::synthetic_module(n);
    let t0 = Instant::now();
    let (ast, d) = efir_syntax::parse(&src);
    let t_parse = t0.elapsed();
    assert!(d.is_empty(), "synthetic module has syntax errors: {d:?}");
    let t1 = Instant::now();
    let (m, d) = efir_ir::lower::build_module(&ast, &reg);
    let t_build = t1.elapsed();
    assert!(d.is_empty(), "synthetic module does not build: {d:?}");
    let t2 = Instant::now();
    let d = efir_ir::verify::verify(&m, &reg);
    let t_verify = t2.elapsed();
    assert!(
        d.is_empty(),
        "synthetic module does not verify: {:?}",
        &d[..d.len().min(3)]
    );
    let t3 = Instant::now();
    let out = efir_ir::print_module(&m, &reg, efir_ir::PrintOptions::default());
    let t_print = t3.elapsed();
    let total = t_parse + t_build + t_verify + t_print;
    println!("ops:        {}", m.num_ops());
    println!("bytes:      {}", src.len());
    println!("parse:      {:8.1} ms", t_parse.as_secs_f64() * 1e3);
    println!("build:      {:8.1} ms", t_build.as_secs_f64() * 1e3);
    println!("verify:     {:8.1} ms", t_verify.as_secs_f64() * 1e3);
    println!("print:      {:8.1} ms", t_print.as_secs_f64() * 1e3);
    println!(
        "total:      {:8.1} ms ({:.0} ops/s)",
        total.as_secs_f64() * 1e3,
        m.num_ops() as f64 / total.as_secs_f64()
    );
    println!("printed bytes: {}", out.len());
}
