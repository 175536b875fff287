//! Inputs at the limits of the tools: deep chains of values translate or
//! fail with a clear error, never overflow the stack.

use efir_driver::translate::{to_triton, TritonOptions};

fn chain(n: usize) -> String {
    let mut s = String::from("func @deep(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {\n");
    let mut prev = "%x".to_string();
    for i in 0..n {
        s.push_str(&format!("  %v{i} = ew.neg {prev} : tensor<4x8xf32>\n"));
        prev = format!("%v{i}");
    }
    s.push_str(&format!("  return {prev} : tensor<4x8xf32>\n}}\n"));
    s
}

#[test]
fn a_chain_of_5000_ops_is_one_kernel() {
    let reg = efir_registry::registry();
    let out = to_triton(&chain(5000), "deep.efir", &reg, &TritonOptions::default()).unwrap();
    assert!(!out.failed, "{:?}", out.diags);
    assert_eq!(out.programs.len(), 1);
    assert_eq!(out.programs[0].source.matches("tl.store(").count(), 1);
}

#[test]
fn a_chain_deeper_than_a_kernel_holds_is_an_error() {
    let reg = efir_registry::registry();
    let out = to_triton(&chain(30_000), "deep.efir", &reg, &TritonOptions::default()).unwrap();
    assert!(out.failed);
    assert!(
        out.diags.iter().any(|d| d
            .message
            .contains("a chain of more than 20000 ops inside one kernel")),
        "{:?}",
        out.diags.iter().map(|d| &d.message).collect::<Vec<_>>()
    );
}
