//! The time limits of `--saturate` and `--compact` are one deadline for the
//! whole module, not a limit per function (issue 30): three functions whose
//! enumeration alone would each take the whole limit take about one limit
//! together, where a limit per function took three.

use efir_driver::PassFlag;
use efir_ir::PrintOptions;
use std::time::Instant;

fn flag(name: &str, options: &str) -> PassFlag {
    PassFlag {
        name: name.into(),
        options: options.into(),
    }
}

#[test]
fn compact_time_limit_is_one_deadline_for_the_module() {
    let reg = efir_registry::registry();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let src = std::fs::read_to_string(root.join("examples/small/rmsnorm_swiglu.efir"))
        .expect("examples/small/rmsnorm_swiglu.efir");
    let out = efir_driver::run_case(&src, &reg, &[flag("saturate", "")], PrintOptions::default())
        .expect("pipeline");
    let saturated = out.text.expect("saturated");
    // Three copies of the saturated function. `mode=after` does not finish
    // any of them within the limit (it expands millions of partial
    // programs), so a limit per function would take three limits.
    let module: String = (0..3)
        .map(|i| saturated.replace("@rmsnorm_swiglu(", &format!("@f{i}(")))
        .collect();
    // A limit long beside the fixed costs and the noise of a loaded
    // machine (a debug build; CI shares 2 cores): one limit is 1 s, a limit
    // per function would be 3 s.
    let limit = 1.0;
    // (Parsing, verifying and printing alone, to subtract: the fastest of
    // two runs.)
    let io = (0..2)
        .map(|_| {
            let t = Instant::now();
            efir_driver::run_case(&module, &reg, &[], PrintOptions::default()).expect("pipeline");
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min);
    let t = Instant::now();
    let out = efir_driver::run_case(
        &module,
        &reg,
        &[flag("compact", &format!("mode=after,time-limit={limit}"))],
        PrintOptions::default(),
    )
    .expect("pipeline");
    let secs = t.elapsed().as_secs_f64() - io;
    let stopped = out
        .diags
        .iter()
        .filter(|d| d.message.contains("stopped by time-limit"))
        .count();
    // Every function was stopped by the deadline (the first by the time
    // running out, the others at once or nearly so)...
    assert_eq!(stopped, 3, "{:?}", out.diags);
    // ...and the pass took about one limit, not three.
    assert!(
        secs < 2.0 * limit,
        "three functions took {secs:.2} s (and {io:.2} s to parse and print) under a {limit} s limit"
    );
    let text = out.text.expect("candidates");
    for i in 0..3 {
        assert!(
            text.contains(&format!("@f{i}.c0(")),
            "@f{i} has a candidate"
        );
    }
}
