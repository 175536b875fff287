//! Saturates every workload of WORKLOADS.md at B=16 (`examples/<name>.efir`)
//! and prints e-nodes, e-classes, iterations, stop reason and time; with
//! `--json FILE` also writes them as JSON. Run in release:
//! `cargo run --release -p efir-bench --bin saturate_workloads [-- --json out.json]`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use efir_driver::PassFlag;
use efir_ir::PrintOptions;
use serde_json::{json, Value};
use std::path::Path;

const WORKLOADS: &[&str] = &[
    "rmsnorm_mlp",
    "rmsnorm_swiglu",
    "gated_mlp",
    "layernorm_gemm",
    "lora",
    "ngpt",
    "attn_decode",
    "attn_prefill",
];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let json_out = args
        .iter()
        .position(|a| a == "--json")
        .and_then(|i| args.get(i + 1));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let reg = efir_registry::registry();
    let flags = [PassFlag {
        name: "saturate".into(),
        options: String::new(),
    }];
    let mut rows = Vec::new();
    println!(
        "{:<16} {:>8} {:>9} {:>6} {:>11} {:>9}",
        "workload", "e-nodes", "e-classes", "iters", "stop", "time (s)"
    );
    for w in WORKLOADS {
        let src = std::fs::read_to_string(root.join(format!("examples/{w}.efir")))
            .expect("workload file");
        let out =
            efir_driver::run_case(&src, &reg, &flags, PrintOptions::default()).expect("pipeline");
        assert!(out.diags.is_empty(), "{w}: {:?}", out.diags);
        let s = &out.stats[0];
        println!(
            "{:<16} {:>8} {:>9} {:>6} {:>11} {:>9.3}",
            w,
            s["enodes"].as_u64().unwrap_or(0),
            s["eclasses"].as_u64().unwrap_or(0),
            s["iterations"].as_u64().unwrap_or(0),
            s["stop_reason"].as_str().unwrap_or(""),
            s["time_s"].as_f64().unwrap_or(0.0)
        );
        rows.push(json!({
            "workload": w,
            "enodes": s["enodes"],
            "eclasses": s["eclasses"],
            "iterations": s["iterations"],
            "stop_reason": s["stop_reason"],
            "time_s": s["time_s"],
            "rules_applied": s["rules_applied"],
        }));
    }
    if let Some(path) = json_out {
        std::fs::write(
            path,
            serde_json::to_string_pretty(&Value::Array(rows)).expect("json"),
        )
        .expect("write json");
        println!("wrote {path}");
    }
}
