//! A reshape of a symbolic extent (`|@dyn0|`, a family of sizes, issue 33):
//! the interpreter takes the extent's size from the inputs, computes a
//! keepdim reshape of it as the static program at that size does, and the
//! candidates of saturation and compaction compute the same at two sizes.

use efir_driver::PassFlag;
use efir_interp::{Interp, Options, Precision, Tensor};
use efir_ir::{parse_and_verify, Attr, DType, Module, PrintOptions};
use ndarray::{ArrayD, IxDyn};

const KEEPDIM: &str =
    "func @f(%x: tensor<|@dyn0|x16xf32>, %w: tensor<16xf32>) -> tensor<|@dyn0|x16xf32> {
  %sq = ew.mul %x, %x : tensor<|@dyn0|x16xf32>
  %s = tensor.reduce<#red.sum, 1> %sq : tensor<|@dyn0|xf32>
  %k = tensor.reshape %s : tensor<|@dyn0|x1xf32>
  %t = tensor.reshape %k : tensor<1x|@dyn0|x1x1xf32>
  %u = tensor.reshape %t : tensor<|@dyn0|x1xf32>
  %b = tensor.broadcast %u : tensor<|@dyn0|x16xf32>
  %wb = tensor.broadcast %w : tensor<|@dyn0|x16xf32>
  %y = ew.div %x, %b : tensor<|@dyn0|x16xf32>
  %z = ew.mul %y, %wb : tensor<|@dyn0|x16xf32>
  return %z : tensor<|@dyn0|x16xf32>
}
";

fn parse(text: &str) -> Module {
    let (m, d) = parse_and_verify(text, &efir_registry::registry());
    assert!(d.is_empty(), "{d:?}\n{text}");
    m
}

fn tensor(shape: &[usize], seed: usize) -> Tensor {
    let n: usize = shape.iter().product();
    let data = (0..n)
        .map(|i| ((i * 7 + seed * 13) % 11) as f64 - 4.5)
        .collect();
    Tensor {
        dtype: DType::F32,
        data: ArrayD::from_shape_vec(IxDyn(shape), data).unwrap(),
    }
}

/// Run `f`; every parallel axis of the module is tiled by 4.
fn run(m: &Module, f: &str, inputs: &[Tensor]) -> Result<Vec<Vec<f64>>, String> {
    let sem = efir_registry::all_semantics();
    let tiles = m
        .funcs
        .iter()
        .flat_map(|f| &f.ops)
        .filter_map(|op| op.attrs.get("axis").and_then(Attr::as_symbol))
        .map(|a| (a.to_string(), 4))
        .collect();
    let opts = Options {
        precision: Precision::F64,
        tiles,
    };
    Ok(Interp::new(m, &sem, opts)
        .run(f, inputs)?
        .into_iter()
        .map(|t| t.data.iter().copied().collect())
        .collect())
}

#[test]
fn keepdim_reshapes_of_a_symbolic_extent_run_at_every_size() {
    let sym = parse(KEEPDIM);
    let w = tensor(&[16], 1);
    for n in [1usize, 3, 5] {
        let x = tensor(&[n, 16], n);
        let fixed = parse(&KEEPDIM.replace("|@dyn0|", &n.to_string()));
        let want = run(&fixed, "f", &[x.clone(), w.clone()]).unwrap();
        assert_eq!(run(&sym, "f", &[x, w.clone()]).unwrap(), want, "n = {n}");
    }
    // the extent is one size per run: inputs that disagree are an error
    let two = parse(
        "func @g(%x: tensor<|@dyn0|xf32>, %y: tensor<|@dyn0|x1xf32>) -> tensor<|@dyn0|xf32> {
           %r = tensor.reshape %y : tensor<|@dyn0|xf32>
           %s = ew.add %x, %r : tensor<|@dyn0|xf32>
           return %s : tensor<|@dyn0|xf32>
         }",
    );
    let err = run(&two, "g", &[tensor(&[3], 0), tensor(&[4, 1], 0)]).unwrap_err();
    assert!(err.contains("[3, 1]") && err.contains("[4, 1]"), "{err}");
    // x = [-4.5, 2.5], y = [[-2.5], [4.5]]
    assert_eq!(
        run(&two, "g", &[tensor(&[2], 0), tensor(&[2, 1], 1)]).unwrap()[0],
        vec![-7.0, 7.0]
    );
}

#[test]
fn candidates_of_a_symbolic_keepdim_program_compute_the_same() {
    let reg = efir_registry::registry();
    let flag = |name: &str, options: &str| PassFlag {
        name: name.into(),
        options: options.into(),
    };
    let out = efir_driver::run_case(
        KEEPDIM,
        &reg,
        &[flag("saturate", ""), flag("compact", "max-candidates=4")],
        PrintOptions::default(),
    )
    .unwrap();
    let (cands, d) = parse_and_verify(out.text.as_deref().unwrap(), &reg);
    assert!(d.is_empty(), "{d:?}");
    assert!(cands.funcs.len() >= 2, "{} candidates", cands.funcs.len());
    let src = parse(KEEPDIM);
    let w = tensor(&[16], 2);
    for n in [2usize, 7] {
        let x = tensor(&[n, 16], n);
        let want = run(&src, "f", &[x.clone(), w.clone()]).unwrap();
        for f in &cands.funcs {
            let got = run(&cands, &f.name, &[x.clone(), w.clone()]).unwrap();
            for (a, b) in got[0].iter().zip(&want[0]) {
                assert!(
                    (a - b).abs() <= 1e-9 * b.abs().max(1.0),
                    "@{} n = {n}: {a} vs {b}",
                    f.name
                );
            }
        }
    }
}
