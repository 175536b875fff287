//! Functions that refer to each other in a cycle: the verifier rejects them
//! (E0211) and the interpreter, given such a module anyway, stops at its
//! call depth limit with an error instead of overflowing the stack.

use efir_interp::eval::MAX_CALL_DEPTH;
use efir_interp::{Interp, Options, Tensor};
use efir_ir::DType;
use ndarray::ArrayD;

const LAUNCH_CYCLE: &str = "
func @a(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = kernel.launch<@b> %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
func @b(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = ew.neg %x : tensor<4xf32>
  %z = kernel.launch<@a> %y : tensor<4xf32>
  return %z : tensor<4xf32>
}
";

const REPAIR_SELF: &str = "
func @h(%c: tensor<f32>, %s: tensor<f32>, %s1: tensor<f32>) -> tensor<f32> {
  %i = tensor.iota<0> : tensor<2xf32>
  %r = tensor.reduce<#red.repair<#red.max, #red.sum, f = @f, h = @h>, 0> %i : tuple<tensor<f32>, tensor<f32>>
  %y = tensor.get<1> %r : tensor<f32>
  return %y : tensor<f32>
}
func @f(%x: tensor<f32>, %s1: tensor<f32>) -> tensor<f32> {
  return %x : tensor<f32>
}
func @main(%a: tensor<4x8xf32>) -> tuple<tensor<4xf32>, tensor<4xf32>> {
  %0 = tensor.reduce<#red.repair<#red.max, #red.sum, f = @f, h = @h>, 1> %a : tuple<tensor<4xf32>, tensor<4xf32>>
  return %0 : tuple<tensor<4xf32>, tensor<4xf32>>
}
";

fn codes(src: &str) -> Vec<String> {
    let reg = efir_registry::registry();
    let (_, diags) = efir_ir::parse_and_verify(src, &reg);
    diags
        .iter()
        .map(|d| format!("{}: {}", d.code, d.message))
        .collect()
}

#[test]
fn cycles_are_rejected_by_the_verifier() {
    assert_eq!(
        codes(LAUNCH_CYCLE),
        vec!["E0211: `@a` refers to itself through @a -> @b -> @a"]
    );
    assert_eq!(codes(REPAIR_SELF), vec!["E0211: `@h` refers to itself"]);
    // A long chain without a cycle is fine (and checked without recursion).
    let n = 5_000;
    let mut chain = String::new();
    for i in 0..n {
        let body = if i + 1 < n {
            format!("kernel.launch<@f{}> %x", i + 1)
        } else {
            "ew.neg %x".to_string()
        };
        chain.push_str(&format!(
            "func @f{i}(%x: tensor<4xf32>) -> tensor<4xf32> {{\n  %y = {body} : tensor<4xf32>\n  return %y : tensor<4xf32>\n}}\n"
        ));
    }
    assert!(codes(&chain).is_empty());
    // Closing that chain into a loop gives one error, at the closing launch.
    let closed = chain.replacen("ew.neg %x", "kernel.launch<@f0> %x", 1);
    let found = codes(&closed);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("E0211: `@f0` refers to itself through @f0 -> @f1 -> @f2 -> @f3 -> (4993 more) -> @f4997 -> @f4998 -> @f4999 -> @f0"),
        "{found:?}"
    );
}

#[test]
fn the_interpreter_stops_at_its_call_depth() {
    let reg = efir_registry::registry();
    let sem = efir_registry::all_semantics();
    let (m, _) = efir_ir::parse_and_verify(LAUNCH_CYCLE, &reg);
    assert_eq!(m.funcs.len(), 2);
    let it = Interp::new(&m, &sem, Options::default());
    let x = Tensor {
        dtype: DType::F32,
        data: ArrayD::zeros(vec![4]),
    };
    let err = it.run("a", &[x]).unwrap_err();
    assert!(
        err.contains(&format!("calls nested more than {MAX_CALL_DEPTH} deep")),
        "{err}"
    );
    // Through a reducer's repair function as well.
    let (m, _) = efir_ir::parse_and_verify(REPAIR_SELF, &reg);
    let it = Interp::new(&m, &sem, Options::default());
    let a = Tensor {
        dtype: DType::F32,
        data: ArrayD::zeros(vec![4, 8]),
    };
    let err = it.run("main", &[a]).unwrap_err();
    assert!(
        err.contains(&format!("calls nested more than {MAX_CALL_DEPTH} deep")),
        "{err}"
    );
}
