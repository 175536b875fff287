//! The emitted TTIR parses back through melior and prints identically
//! (feature `mlir`; `cargo test -p efir-ttir --features mlir`).
#![cfg(feature = "mlir")]

use efir_ir::parse_and_verify;

fn translate_all(src: &str) -> Vec<efir_ttir::TtirProgram> {
    let reg = efir_registry::registry();
    let (m, diags) = parse_and_verify(src, &reg);
    assert!(diags.is_empty(), "{diags:?}");
    efir_triton::programs(&m)
        .into_iter()
        .map(|f| efir_ttir::translate(&m, f).unwrap_or_else(|e| panic!("@{}: {e}", f.name)))
        .collect()
}

fn example(path: &str) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn examples_round_trip() {
    // Pointwise ops, reductions, matmuls with and without a K loop,
    // parallel reductions and collects.
    for path in [
        "examples/small/rmsnorm_mlp.efir",
        "examples/small/layernorm_gemm.efir",
        "examples/small/gated_mlp.efir",
        "examples/rmsnorm_mlp.efir",
        // Loops of parallel reductions (online softmax, causal mask) and
        // split-K collects.
        "examples/derivations/attn_prefill.efir",
        "examples/tiled/layernorm_gemm_splitk_stats.efir",
        "examples/tiled/rowsum_shared_axis.efir",
    ] {
        let progs = translate_all(&example(path));
        assert!(!progs.is_empty(), "{path}");
        for p in progs {
            for k in &p.kernels {
                let back = efir_ttir::round_trip(&k.text)
                    .unwrap_or_else(|e| panic!("{path} {}: {e}", k.name));
                assert_eq!(back, k.text, "{path} {}", k.name);
                assert!(k.text.contains("\"tt.func\""), "{}", k.text);
            }
        }
    }
}

#[test]
fn k_loop_and_manifest() {
    let progs = translate_all(&example("examples/rmsnorm_mlp.efir"));
    let p = &progs[0];
    let text: String = p.kernels.iter().map(|k| k.text.as_str()).collect();
    assert!(text.contains("scf.for"), "no K loop:\n{text}");
    assert!(text.contains("\"tt.dot\""), "no dot:\n{text}");
    assert!(text.contains("\"tt.reduce\""), "no reduction:\n{text}");
    // Every kernel writes its last argument; inputs and the result are named.
    let files: Vec<String> = (0..p.kernels.len()).map(|i| format!("k{i}.ttir")).collect();
    let m = p.manifest(&files);
    let bufs = m["buffers"].as_array().expect("buffers");
    assert_eq!(bufs.iter().filter(|b| !b["input"].is_null()).count(), 4);
    assert_eq!(bufs.iter().filter(|b| !b["output"].is_null()).count(), 1);
    for k in &p.kernels {
        assert!(k.grid >= 1);
        assert!(k.text.contains(&format!("efir.grid = {} : i32", k.grid)));
    }
}

#[test]
fn round_trip_rejects_bad_text() {
    let e =
        efir_ttir::round_trip("module { \"tt.func\"() ({ ^bb0: %0 = arith.addf }) : () -> () }")
            .unwrap_err();
    assert!(e.contains("cannot parse"), "{e}");
}
