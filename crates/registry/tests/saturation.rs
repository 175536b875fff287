//! Saturating every small example and extracting greedily gives a program
//! that computes the same as the source; limits stop saturation with the
//! right reason and still give a valid e-graph.

use efir_driver::PassFlag;
use efir_interp::compare::CompareOptions;
use efir_ir::{parse_and_verify, PrintOptions};
use std::path::Path;

fn flag(name: &str, options: &str) -> PassFlag {
    PassFlag {
        name: name.into(),
        options: options.into(),
    }
}

#[test]
fn saturate_then_extract_preserves_every_small_example() {
    let reg = efir_registry::registry();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/small");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let src = std::fs::read_to_string(e.path()).unwrap();
        let (a, d) = parse_and_verify(&src, &reg);
        assert!(d.is_empty());
        let out = efir_driver::run_case(
            &src,
            &reg,
            &[flag("saturate", ""), flag("extract", "greedy")],
            PrintOptions::default(),
        )
        .unwrap();
        assert!(
            out.diags.is_empty(),
            "{}: {:?}",
            e.path().display(),
            out.diags
        );
        let (b, d) = parse_and_verify(out.text.as_deref().unwrap(), &reg);
        assert!(d.is_empty());
        let func = a.funcs[0].name.clone();
        efir_registry::assert_equivalent(&a, &b, &CompareOptions::new(&func));
        // The extracted program is tiled: no tensor-level matmul is left.
        assert!(
            !out.text.unwrap().contains("tensor.matmul %"),
            "{func}: a tensor-level matmul was extracted"
        );
        n += 1;
    }
    assert_eq!(n, 9);
}

#[test]
fn limits_stop_saturation_with_a_valid_egraph() {
    let reg = efir_registry::registry();
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/small/attn_prefill.efir"),
    )
    .unwrap();
    for (opts, reason) in [
        ("node-limit=100", "node-limit"),
        ("iter-limit=1", "iter-limit"),
        ("time-limit=0.000001", "time-limit"),
    ] {
        let out = efir_driver::run_case(
            &src,
            &reg,
            &[flag("saturate", opts)],
            PrintOptions::default(),
        )
        .unwrap();
        assert!(out.diags.is_empty(), "{opts}: {:?}", out.diags);
        assert_eq!(out.stats[0]["stop_reason"], reason, "{opts}");
        // The result is an e-graph that verifies and can be saturated further.
        let text = out.text.unwrap();
        let again = efir_driver::run_case(
            &text,
            &reg,
            &[flag("saturate", "node-limit=400")],
            PrintOptions::default(),
        )
        .unwrap();
        assert!(again.diags.is_empty(), "{opts}: {:?}", again.diags);
    }
}
