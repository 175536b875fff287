//! The paper's Figure 10 comparison: for each workload, saturate, then
//! enumerate candidates with `mode=none`, `after` and `early` under the same
//! limits, and print expanded states, complete programs, candidates, classes,
//! whether the enumeration finished, and time; with `--json FILE` also
//! write them. `--small` uses `examples/small/` instead of the B=16 files;
//! `--threads N` runs each enumeration on N threads sharing one record;
//! `--only W` runs one workload; `--modes early,after` picks the modes
//! (`--modes ''` none); `--count-after` also counts the whole search tree of
//! `after` without running it (`Enumerator::after_tree`: what
//! `expanded_states` of a run of `after` to the end would be), keeping at
//! most `--max-subtrees N` subtrees (default 50,000,000) and stopping after
//! `--count-limit S` seconds (default 600) with lower bounds. `--sketch S`
//! adds the mode `sketch`: `early` after a sketch of at most S seconds
//! (`--compact=sketch=S`), whose own classes and time are printed too.
//! `--replicas view|compute` and `--partitions view|compute` pick the space
//! as `--compact=replicas=...,partitions=...` do (default `view` for both,
//! like the pass; the count of `after` is in it too).
//! Run: `cargo run --release -p efir-bench --bin compaction [-- --time-limit S --json out.json]`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use efir_driver::PassFlag;
use efir_egraph::compact::{Enumerator, Limits, Mode, Partitions, Replicas, Space};
use efir_ir::PrintOptions;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

const WORKLOADS: &[&str] = &[
    "rmsnorm_swiglu",
    "ngpt",
    "rmsnorm_mlp",
    "attn_decode",
    "attn_prefill",
    // Not in the paper's figure: the other non-attention workloads.
    "gated_mlp",
    "lora",
    "layernorm_gemm",
];

fn main() {
    efir_driver::logging::init();
    let args: Vec<String> = std::env::args().collect();
    let get = |k: &str| {
        args.iter()
            .position(|a| a == k)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let limit = get("--time-limit").unwrap_or_else(|| "10".into());
    let dir = if args.iter().any(|a| a == "--small") {
        "examples/small"
    } else {
        "examples"
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let reg = efir_registry::registry();
    let mut rows = Vec::new();
    println!(
        "{:<16} {:<6} {:>10} {:>10} {:>10} {:>8} {:>6} {:>8}",
        "workload", "mode", "expanded", "programs", "candidates", "classes", "done", "time (s)"
    );
    let limit: f64 = limit.parse().expect("--time-limit takes seconds");
    let only = get("--only");
    let threads: usize = get("--threads")
        .map(|t| t.parse().expect("--threads takes a number"))
        .unwrap_or(1);
    let sketch: f64 = get("--sketch")
        .map(|t| t.parse().expect("--sketch takes seconds"))
        .unwrap_or(0.0);
    let modes = get("--modes").unwrap_or_else(|| {
        if sketch > 0.0 {
            "none,after,early,sketch".into()
        } else {
            "none,after,early".into()
        }
    });
    let view = |flag: &str| match get(flag).as_deref() {
        None | Some("view") => true,
        Some("compute") => false,
        Some(r) => panic!("{flag} takes view or compute, not {r}"),
    };
    let space = Space {
        replicas: if view("--replicas") {
            Replicas::View
        } else {
            Replicas::Compute
        },
        partitions: if view("--partitions") {
            Partitions::View
        } else {
            Partitions::Compute
        },
    };
    let count_after = args.iter().any(|a| a == "--count-after");
    let max_subtrees: usize = get("--max-subtrees")
        .map(|t| t.parse().expect("--max-subtrees takes a number"))
        .unwrap_or(50_000_000);
    let count_limit: f64 = get("--count-limit")
        .map(|t| t.parse().expect("--count-limit takes seconds"))
        .unwrap_or(600.0);
    for w in WORKLOADS
        .iter()
        .filter(|w| only.as_deref().is_none_or(|o| o == **w))
    {
        let src = std::fs::read_to_string(root.join(format!("{dir}/{w}.efir"))).expect("workload");
        let flags = [PassFlag {
            name: "saturate".into(),
            options: String::new(),
        }];
        let out =
            efir_driver::run_case(&src, &reg, &flags, PrintOptions::default()).expect("pipeline");
        let (m, d) = efir_ir::parse_and_verify(out.text.as_deref().expect("saturated"), &reg);
        assert!(d.is_empty(), "{d:?}");
        let f = m.funcs.iter().find(|f| f.name == *w).expect("function");
        let g = efir_egraph::saturate::graph_of(f, &m).expect("e-graph");
        // `early`'s expansions where it finished.
        let mut early_done: Option<usize> = None;
        for (name, mode) in [
            ("none", Mode::None),
            ("after", Mode::After),
            ("early", Mode::Early),
            ("sketch", Mode::Early),
        ]
        .into_iter()
        .filter(|(n, _)| modes.split(',').any(|m| m == *n))
        {
            let t = std::time::Instant::now();
            let s = if name == "sketch" { sketch } else { 0.0 };
            let res = Enumerator::new_in(&g, space).expect("space").run_sketched(
                mode,
                &Limits::time(limit),
                threads,
                Duration::from_secs_f64(s),
            );
            let secs = t.elapsed().as_secs_f64();
            if name == "early" && res.complete {
                early_done = Some(res.expanded_states);
            }
            println!(
                "{:<16} {:<6} {:>10} {:>10} {:>10} {:>8} {:>6} {:>8.2}",
                w,
                name,
                res.expanded_states,
                res.complete_programs,
                res.candidates.len(),
                res.classes,
                res.complete,
                secs
            );
            if name == "sketch" {
                println!(
                    "{:<16} {:<6} {:>10} {:>10} {:>10} {:>8} {:>6} {:>8.2}   (the sketch alone, of the above)",
                    w, "", res.sketch_expanded, "-", "-", res.sketch_classes, "-", res.sketch_time_s
                );
            }
            rows.push(json!({
                "workload": w, "mode": name, "expanded_states": res.expanded_states,
                "pruned_states": res.pruned, "complete_programs": res.complete_programs,
                "candidates": res.candidates.len(), "classes": res.classes,
                "complete": res.complete, "time_s": secs, "threads": threads,
                "sketch_s": s, "sketch_expanded": res.sketch_expanded,
                "sketch_classes": res.sketch_classes, "sketch_time_s": res.sketch_time_s,
                "replicas": format!("{:?}", space.replicas).to_lowercase(),
                "partitions": format!("{:?}", space.partitions).to_lowercase(),
            }));
        }
        if count_after {
            // The whole tree of `after` (and `none`), counted: what
            // `expanded_states` would be if it ran to the end.
            let t = std::time::Instant::now();
            let mut en = Enumerator::new_in(&g, space).expect("space");
            let c = en.after_tree(max_subtrees, count_limit);
            let secs = t.elapsed().as_secs_f64();
            let what = if c.whole {
                "whole tree"
            } else {
                "stopped: at least"
            };
            println!(
                "{:<16} {:<6} {:>10} {:>10} {:>10} {:>8} {:>6} {:>8.2}   (counted: {what}, {} subtrees)",
                w, "after*", c.expanded, c.complete, "-", "-", "-", secs, c.subtrees
            );
            let ratio = early_done.map(|e| c.expanded as f64 / e.max(1) as f64);
            if let Some(r) = ratio {
                let at_least = if c.whole { "" } else { "at least " };
                println!("{w:<16} after ({what}) / early (finished): {at_least}{r:.0}x");
            }
            rows.push(json!({
                "workload": w, "mode": "after-counted",
                "expanded_states": c.expanded.to_string(),
                "complete_programs_in_or_out_of_space": c.complete.to_string(),
                "subtrees": c.subtrees, "time_s": secs, "whole_tree": c.whole,
                "after_over_early": ratio,
            }));
        }
    }
    if let Some(path) = get("--json") {
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&Value::Array(rows)).expect("json"),
        )
        .expect("write");
        println!("wrote {path}");
    }
}
