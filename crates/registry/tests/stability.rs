//! Rewrites that are equalities in real arithmetic but not in floating point
//! must not give programs that overflow where their source does not (issue
//! 30): `exp(a − b) == exp(a) / exp(b)` split a softmax's bounded
//! `exp(z − max z)` into `inf / inf` = NaN in 4 of the 8 candidates of
//! `lit-tests/Layers/head-split-rope.efir`. Every candidate, and the greedy
//! extraction, of the attention programs is run in the programs' own
//! precision (f32, f16; the rule tests run in f64, where nothing
//! overflows) and must agree with its source, NaN and inf included.

use efir_driver::PassFlag;
use efir_interp::compare::CompareOptions;
use efir_interp::value::Precision;
use efir_ir::{parse_and_verify, Module, PrintOptions};
use std::path::Path;

fn flag(name: &str, options: &str) -> PassFlag {
    PassFlag {
        name: name.into(),
        options: options.into(),
    }
}

fn root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The module the passes `flags` write for `src`.
fn run(src: &str, flags: &[PassFlag]) -> Module {
    let reg = efir_registry::registry();
    let out = efir_driver::run_case(src, &reg, flags, PrintOptions::default()).unwrap();
    assert!(
        out.diags
            .iter()
            .all(|d| d.severity != efir_diagnostics::Severity::Error),
        "{:?}",
        out.diags
    );
    let (m, d) = parse_and_verify(out.text.as_deref().unwrap(), &reg);
    assert!(d.is_empty(), "{d:?}");
    m
}

/// Each function `@<name>.cN` of `cands` as a module of its own (with the
/// reducer functions) named `@name`.
fn candidates(cands: &Module, name: &str) -> Vec<(String, Module)> {
    let prefix = format!("{name}.c");
    cands
        .funcs
        .iter()
        .filter(|f| f.name.starts_with(&prefix))
        .map(|c| {
            let mut m = cands.clone();
            m.funcs
                .retain(|f| !f.name.starts_with(&prefix) || f.name == c.name);
            for f in &mut m.funcs {
                if f.name == c.name {
                    f.name = name.to_string();
                }
            }
            (c.name.clone(), m)
        })
        .collect()
}

/// `b` computes `a`'s `@name` in native precision on two random inputs: no
/// NaN or inf where `a` has a finite value.
fn check_native(a: &Module, b: &Module, name: &str, what: &str, tol: f64) {
    let mut o = CompareOptions::new(name);
    o.precision = Precision::Native;
    o.trials = 2;
    o.tol = tol;
    // One tile choice: the candidates' tiles do not change the values.
    o.tiles = efir_interp::compare::tile_choices(b)
        .into_iter()
        .take(1)
        .collect();
    if let Err(e) = efir_registry::check_equivalent(a, b, &o) {
        panic!("{what}: {e}");
    }
}

#[test]
fn no_candidate_of_head_split_rope_overflows() {
    let src =
        std::fs::read_to_string(root().join("lit-tests/Layers/head-split-rope.efir")).unwrap();
    let (source, d) = parse_and_verify(&src, &efir_registry::registry());
    assert!(d.is_empty(), "{d:?}");
    let all = run(
        &src,
        &[flag("saturate", ""), flag("compact", "max-candidates=8")],
    );
    let cands = candidates(&all, "attn");
    assert_eq!(cands.len(), 8);
    for (name, m) in &cands {
        check_native(&source, m, "attn", name, 1e-4);
    }
}

#[test]
fn greedy_extractions_of_attention_do_not_overflow() {
    for (file, name, tol) in [
        ("lit-tests/Layers/head-split-rope.efir", "attn", 1e-4),
        ("examples/small/attn_prefill.efir", "attn_prefill", 1e-2),
        ("examples/small/attn_decode.efir", "attn_decode", 1e-2),
    ] {
        let src = std::fs::read_to_string(root().join(file)).unwrap();
        let (source, d) = parse_and_verify(&src, &efir_registry::registry());
        assert!(d.is_empty(), "{d:?}");
        let ex = run(&src, &[flag("saturate", ""), flag("extract", "")]);
        check_native(&source, &ex, name, file, tol);
    }
}
