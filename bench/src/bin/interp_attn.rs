//! Times the reference interpreter on causal attention prefill at
//! 1x2x256x64 (the target: under 2 s in release). Run:
//! `cargo run --release -p efir-bench --bin interp_attn [-- B H S D]`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use efir_interp::inputs::{random_inputs, Dist};
use efir_interp::{Interp, Options, Precision};
use std::time::Instant;

fn main() {
    let a: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let (b, h, s, d) = match a.as_slice() {
        [b, h, s, d] => (*b, *h, *s, *d),
        _ => (1, 2, 256, 64),
    };
    let src = efir_bench::attn_prefill(b, h, s, d);
    let reg = efir_registry::registry();
    let (m, diags) = efir_ir::parse_and_verify(&src, &reg);
    assert!(diags.is_empty(), "{diags:?}");
    let sem = efir_registry::all_semantics();
    let inputs = random_inputs(&m.funcs[0], 0, Dist::Normal).expect("inputs");
    for (name, precision) in [("native", Precision::Native), ("f64", Precision::F64)] {
        let interp = Interp::new(
            &m,
            &sem,
            Options {
                precision,
                tiles: Default::default(),
            },
        );
        let t = Instant::now();
        let out = interp.run("attn_prefill", &inputs).expect("runs");
        let dt = t.elapsed().as_secs_f64();
        let finite = out[0].data.iter().all(|v| v.is_finite());
        println!(
            "attn_prefill {b}x{h}x{s}x{d} precision={name}: {:.3} s (outputs finite: {finite})",
            dt
        );
    }
}
