//! `tensor.slice` and `tensor.concat` through the pipeline: the interpreter
//! computes what numpy's `x[a:b:c]` and `concatenate` do (whole and under
//! parallel states), saturation and compaction keep them (opaque, one type
//! per e-class) and every candidate computes the same as its source, the
//! kernel graphs too, every candidate translates to Triton, and a slice the
//! Triton lowering cannot read is E0801's error, not a panic.

use efir_driver::PassFlag;
use efir_interp::compare::CompareOptions;
use efir_interp::{Interp, Options, Precision, Tensor};
use efir_ir::{parse_and_verify, DType, Module, PrintOptions};
use ndarray::{ArrayD, IxDyn};
use std::collections::BTreeMap;
use std::path::Path;

fn flag(name: &str, options: &str) -> PassFlag {
    PassFlag {
        name: name.into(),
        options: options.into(),
    }
}

fn parse(text: &str) -> Module {
    let (m, d) = parse_and_verify(text, &efir_registry::registry());
    assert!(d.is_empty(), "{d:?}\n{text}");
    m
}

/// `0, 1, 2, ...` in the given shape.
fn counting(shape: &[usize]) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor {
        dtype: DType::F32,
        data: ArrayD::from_shape_vec(IxDyn(shape), (0..n).map(|i| i as f64).collect()).unwrap(),
    }
}

fn run(m: &Module, f: &str, inputs: &[Tensor], tiles: &[(&str, usize)]) -> Vec<Vec<f64>> {
    let sem = efir_registry::all_semantics();
    let opts = Options {
        precision: Precision::F64,
        tiles: tiles
            .iter()
            .map(|(a, t)| (a.to_string(), *t))
            .collect::<BTreeMap<_, _>>(),
    };
    Interp::new(m, &sem, opts)
        .run(f, inputs)
        .unwrap()
        .into_iter()
        .map(|t| t.data.iter().copied().collect())
        .collect()
}

#[test]
fn slices_and_concatenations_compute_what_numpy_does() {
    let m = parse(
        "func @f(%x: tensor<3x10xf32>, %y: tensor<3x2xf32>) -> (tensor<2x3xf32>, tensor<3x6xf32>, tensor<1x2xf32>) {
           %s = tensor.slice<[1, 2], [3, 10], [1, 3]> %x : tensor<2x3xf32>
           %s2 = tensor.slice<[0, 8], [3, 10], [1, 1]> %x : tensor<3x2xf32>
           %c = tensor.concat<1> %y, %s2, %y : tensor<3x6xf32>
           %t = tensor.slice<[1, 1], [2, 3], [1, 1]> %s : tensor<1x2xf32>
           return %s, %c, %t : tensor<2x3xf32>, tensor<3x6xf32>, tensor<1x2xf32>
         }",
    );
    let x = counting(&[3, 10]);
    let mut y = counting(&[3, 2]);
    y.data.mapv_inplace(|v| -v - 1.0);
    let out = run(&m, "f", &[x, y], &[]);
    // x[1:3, 2:10:3]: rows 1, 2; columns 2, 5, 8.
    assert_eq!(out[0], vec![12.0, 15.0, 18.0, 22.0, 25.0, 28.0]);
    // concatenate((y, x[:, 8:10], y), axis=1).
    assert_eq!(
        out[1],
        vec![
            -1.0, -2.0, 8.0, 9.0, -1.0, -2.0, //
            -3.0, -4.0, 18.0, 19.0, -3.0, -4.0, //
            -5.0, -6.0, 28.0, 29.0, -5.0, -6.0
        ]
    );
    // A slice of a slice: s[1:2, 1:3] = x[2, 5], x[2, 8].
    assert_eq!(out[2], vec![25.0, 28.0]);
}

#[test]
fn slices_and_concatenations_act_per_tile_under_parallel_states() {
    // A slice keeps a partitioned dim whole and cuts another; partial sums
    // are sliced and joined before their parallel reduction; the tiles do
    // not divide the dims.
    let tiled = parse(
        "func @f(%x: tensor<5x12xf32>) -> (tensor<5x3xf32>, tensor<4xf32>) {
           %xm = par.partition<0, @m> %x : tensor<5x12xf32, @m: part(0)>
           %s = tensor.slice<[0, 1], [5, 12], [1, 4]> %xm : tensor<5x3xf32, @m: part(0)>
           %sc = par.combine<0, @m> %s : tensor<5x3xf32>
           %xk = par.partition<1, @k> %x : tensor<5x12xf32, @k: part(1)>
           %r = tensor.reduce<#red.sum, 1> %xk : tensor<5xf32, @k: partial(#red.sum)>
           %h = tensor.slice<[3], [5], [1]> %r : tensor<2xf32, @k: partial(#red.sum)>
           %j = tensor.concat<0> %h, %h : tensor<4xf32, @k: partial(#red.sum)>
           %v = par.reduce<#red.sum, @k> %j : tensor<4xf32>
           return %sc, %v : tensor<5x3xf32>, tensor<4xf32>
         }",
    );
    let whole = parse(
        "func @f(%x: tensor<5x12xf32>) -> (tensor<5x3xf32>, tensor<4xf32>) {
           %s = tensor.slice<[0, 1], [5, 12], [1, 4]> %x : tensor<5x3xf32>
           %r = tensor.reduce<#red.sum, 1> %x : tensor<5xf32>
           %h = tensor.slice<[3], [5], [1]> %r : tensor<2xf32>
           %v = tensor.concat<0> %h, %h : tensor<4xf32>
           return %s, %v : tensor<5x3xf32>, tensor<4xf32>
         }",
    );
    let x = counting(&[5, 12]);
    let want = run(&whole, "f", std::slice::from_ref(&x), &[]);
    let rows = |r: f64| (0..12).map(|j| 12.0 * r + j as f64).sum::<f64>();
    assert_eq!(want[1], vec![rows(3.0), rows(4.0), rows(3.0), rows(4.0)]);
    assert_eq!(want[0][..3], [1.0, 5.0, 9.0]);
    for (tm, tk) in [(2, 5), (1, 12), (5, 1), (3, 7)] {
        let got = run(
            &tiled,
            "f",
            std::slice::from_ref(&x),
            &[("m", tm), ("k", tk)],
        );
        assert_eq!(got, want, "tiles m={tm} k={tk}");
    }
}

fn seed() -> (String, Module) {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/seeds/slices.efir");
    let src = std::fs::read_to_string(p).unwrap();
    let m = parse(&src);
    (src, m)
}

#[test]
fn candidates_with_slices_compute_the_same_and_translate() {
    let reg = efir_registry::registry();
    let (src, a) = seed();
    let out = efir_driver::run_case(
        &src,
        &reg,
        &[flag("saturate", ""), flag("compact", "max-candidates=6")],
        PrintOptions::default(),
    )
    .unwrap();
    assert!(
        out.diags
            .iter()
            .all(|d| d.severity != efir_diagnostics::Severity::Error),
        "{:?}",
        out.diags
    );
    let ctext = out.text.unwrap();
    let c = parse(&ctext);
    let cands: Vec<_> = efir_triton::programs(&c);
    assert_eq!(cands.len(), 6);
    // The saturated e-graph holds tiled forms around the slices: some
    // candidate partitions a value computed from one.
    assert!(ctext.contains("tile.matmul") && ctext.contains("par.partition"));
    for f in &cands {
        assert!(
            f.ops.iter().any(|o| o.name == "tensor.slice")
                && f.ops.iter().any(|o| o.name == "tensor.concat"),
            "{}",
            f.name
        );
        let mut b = c.clone();
        b.funcs
            .iter_mut()
            .filter(|g| g.name == f.name)
            .for_each(|g| g.name = "slices".into());
        let mut o = CompareOptions::new("slices");
        o.trials = 1;
        efir_registry::assert_equivalent(&a, &b, &o);
        // Every candidate has a Triton lowering.
        let p = efir_triton::plan(&c, f).unwrap_or_else(|e| panic!("{}: {e}", f.name));
        let py =
            efir_triton::emit_python(&p, "x", "y").unwrap_or_else(|e| panic!("{}: {e}", f.name));
        assert!(py.contains("tl.where("), "{}", f.name);
    }
    // The kernel graphs compute the same as the candidates.
    let lowered = efir_driver::run_case(
        &ctext,
        &reg,
        &[flag("lower-to-kernels", "")],
        PrintOptions::default(),
    )
    .unwrap();
    assert!(lowered.diags.is_empty(), "{:?}", lowered.diags);
    let k = parse(&lowered.text.unwrap());
    for f in &cands {
        let mut o = CompareOptions::new(&f.name);
        o.trials = 1;
        efir_registry::assert_equivalent(&c, &k, &o);
    }
}

#[test]
fn a_slice_of_partial_results_is_e0801_not_a_panic() {
    let reg = efir_registry::registry();
    let src = "func @p(%x: tensor<4x64xf32>) -> tensor<2xf32> {
      %xp = par.partition<1, @k> %x : tensor<4x64xf32, @k: part(1)>
      %s = tensor.reduce<#red.sum, 1> %xp : tensor<4xf32, @k: partial(#red.sum)>
      %t = tensor.slice<[1], [3], [1]> %s : tensor<2xf32, @k: partial(#red.sum)>
      %r = par.reduce<#red.sum, @k> %t : tensor<2xf32>
      return %r : tensor<2xf32>
    }";
    let m = parse(src);
    let e = efir_triton::plan(&m, &m.funcs[0]).unwrap_err();
    assert!(
        e.contains("`tensor.slice` reads `%s` from memory")
            && e.contains("partial results over @k"),
        "{e}"
    );
    let out = efir_driver::run_case(
        src,
        &reg,
        &[flag("lower-to-kernels", "")],
        PrintOptions::default(),
    )
    .unwrap();
    assert_eq!(out.diags.len(), 1);
    assert_eq!(out.diags[0].code, "E0801");
    // The diagnostic points at the program's name.
    let at = out.diags[0].span.start as usize;
    assert_eq!(&src[at..at + 2], "@p", "{:?}", out.diags[0].span);
}
