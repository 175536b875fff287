//! `ew.log1p` in the interpreter: it evaluates with the op table's scalar
//! function, the one `--canonicalize` folds with, so values too small for
//! `log(1 + x)` come out right in f64 and in f32.

use efir_interp::{Interp, Options, SemanticsTable, Tensor, Tile};
use efir_ir::{DType, Registry};

fn run(dtype: DType, xs: &[f64]) -> Vec<f64> {
    let mut reg = Registry::new();
    reg.register(&efir_dialect_ew::DIALECT);
    let t = format!("tensor<{}x{dtype}>", xs.len());
    let src =
        format!("func @f(%x: {t}) -> {t} {{\n  %y = ew.log1p %x : {t}\n  return %y : {t}\n}}\n");
    let (m, diags) = efir_ir::parse_and_verify(&src, &reg);
    assert!(diags.is_empty(), "{diags:?}");
    let sem: SemanticsTable = efir_dialect_ew::eval::SEMANTICS.iter().copied().collect();
    let interp = Interp::new(&m, &sem, Options::default());
    let x = Tensor {
        dtype,
        data: Tile::from_shape_vec(vec![xs.len()], xs.to_vec()).unwrap(),
    };
    let out = interp.run("f", &[x]).unwrap();
    out[0].data.iter().copied().collect()
}

#[test]
fn log1p_evaluates_with_the_folded_scalar_function() {
    let xs = [1e-12, -1e-9, 0.0, 0.5, -0.75, 3.0];
    let got = run(DType::F64, &xs);
    for (x, y) in xs.iter().zip(&got) {
        assert_eq!(*y, x.ln_1p(), "log1p({x})");
    }
    // log(1 + 1e-12) computed as written is 1.000089e-12.
    assert!((got[0] - 1e-12).abs() < 1e-24);
    assert!(((1.0f64 + 1e-12).ln() - 1e-12).abs() > 1e-17);
    // In f32 the result is rounded once: 1e-7 stays 1e-7 (to f32), where
    // 1 + 1e-7 rounds to 1 + 1.19e-7 in f32.
    let got = run(DType::F32, &[1e-7]);
    let want = ((1e-7f32 as f64).ln_1p()) as f32;
    assert_eq!(got[0] as f32, want);
    assert!((got[0] - 1e-7).abs() < 1e-13);
}
