//! The derivations the saturated e-graph must contain: each target in
//! `examples/derivations/` is a hand-written program that must (1) compute
//! the same as its source under the interpreter and (2) already be in the
//! e-graph of its saturated source: every op of the target is an e-node and
//! its returns are the source's roots.

use efir_egraph::convert::{from_func, lookup_func, Graph};
use efir_egraph::rules::FAMILIES;
use efir_egraph::saturate::run_rules;
use efir_interp::compare::CompareOptions;
use efir_ir::{parse_and_verify, Module};
use std::path::Path;

fn load(rel: &str) -> Module {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    let (m, d) = parse_and_verify(
        &std::fs::read_to_string(&p).unwrap(),
        &efir_registry::registry(),
    );
    assert!(d.is_empty(), "{rel}: {d:?}");
    m
}

fn saturated(m: &Module) -> Graph {
    let g = from_func(&m.funcs[0], m).unwrap();
    let (g, _, _) = run_rules(g, FAMILIES, 30, 50_000, 60.0);
    assert!(
        g.egraph.analysis.errors.is_empty(),
        "{:?}",
        g.egraph.analysis.errors
    );
    g
}

fn check(source: &str, target: &str) {
    let (a, b) = (load(source), load(target));
    efir_registry::assert_equivalent(&a, &b, &CompareOptions::new(&a.funcs[0].name));
    let mut g = saturated(&a);
    match lookup_func(&mut g, &b.funcs[0]) {
        Ok(found) => assert_eq!(
            found, g.roots,
            "{target} computes another e-class than the source's root"
        ),
        Err(e) => panic!("{target} is not in the saturated e-graph of {source}: {e}"),
    }
}

#[test]
fn rmsnorm_mlp_normalizes_after_both_projections_on_one_tiling() {
    check(
        "examples/small/rmsnorm_mlp.efir",
        "examples/derivations/rmsnorm_mlp.efir",
    );
}

#[test]
fn lora_stores_partial_low_rank_products() {
    check(
        "examples/small/lora.efir",
        "examples/derivations/lora_collect.efir",
    );
}

#[test]
fn lora_recomputes_low_rank_products_per_tile() {
    check(
        "examples/small/lora.efir",
        "examples/derivations/lora_recompute.efir",
    );
}

#[test]
fn online_softmax_falls_out_of_max_normalizer_weighted_sum() {
    check(
        "examples/derivations/online_softmax.source.efir",
        "examples/derivations/online_softmax.efir",
    );
}

#[test]
fn attn_decode_online_softmax_m2() {
    check(
        "examples/small/attn_decode.efir",
        "examples/derivations/attn_decode.efir",
    );
}

#[test]
fn attn_prefill_online_softmax_m2() {
    check(
        "examples/small/attn_prefill.efir",
        "examples/derivations/attn_prefill.efir",
    );
}

#[test]
fn split_k_with_collect() {
    check(
        "examples/derivations/splitk_matmul.source.efir",
        "examples/derivations/splitk_matmul.efir",
    );
}

#[test]
fn a_program_outside_the_egraph_is_not_found() {
    // Equivalent to the source, but with an axis name no rule mints.
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/derivations/lora_recompute.efir"),
    )
    .unwrap()
    .replace("@n64", "@cols");
    let (b, d) = parse_and_verify(&text, &efir_registry::registry());
    assert!(d.is_empty());
    let a = load("examples/small/lora.efir");
    efir_registry::assert_equivalent(&a, &b, &CompareOptions::new("lora"));
    let mut g = saturated(&a);
    assert!(lookup_func(&mut g, &b.funcs[0]).is_err());
}
