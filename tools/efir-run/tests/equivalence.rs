//! The interpreter as an oracle: hand-tiled examples equal their tensor
//! forms for several tile choices (one not dividing its dim), wrong programs
//! are caught, `--canonicalize` preserves meaning on every example, and
//! small semantic cases give known answers.

use efir_interp::compare::{compare, tile_choices, CompareOptions};
use efir_interp::{Interp, Options, Precision, Tensor};
use efir_ir::{parse_and_verify, Module};
use ndarray::{ArrayD, IxDyn};
use std::path::Path;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn load_text(src: &str) -> Module {
    let (m, d) = parse_and_verify(src, &efir_registry::registry());
    assert!(d.is_empty(), "{d:?}");
    m
}

fn load(rel: &str) -> Module {
    load_text(&std::fs::read_to_string(root().join(rel)).unwrap())
}

fn opts(func: &str, precision: Precision, tol: f64) -> CompareOptions {
    CompareOptions {
        func: func.into(),
        tol,
        trials: 2,
        seed: 7,
        precision,
        tiles: Vec::new(),
        dims: Default::default(),
    }
}

fn non_dividing(m: &Module) -> bool {
    let dims = efir_interp::compare::axis_dims(m);
    tile_choices(m)
        .iter()
        .any(|c| c.iter().any(|(a, t)| !dims[a].is_multiple_of(*t as u64)))
}

#[test]
fn tiled_examples_equal_their_sources() {
    let sem = efir_registry::all_semantics();
    for (src, tiled, func) in [
        (
            "examples/small/attn_decode.efir",
            "examples/tiled/attn_decode.efir",
            "attn_decode",
        ),
        (
            "examples/small/lora.efir",
            "examples/tiled/lora_splitk.efir",
            "lora",
        ),
    ] {
        let (a, b) = (load(src), load(tiled));
        assert!(
            tile_choices(&b).len() >= 3,
            "{tiled}: fewer than three tile choices"
        );
        assert!(non_dividing(&b), "{tiled}: no non-dividing tile choice");
        // Exact math: equal up to f64 rounding.
        let rep = compare(&a, &b, &sem, &opts(func, Precision::F64, 1e-9)).unwrap();
        assert!(rep.ok, "{tiled}: {rep:?}");
        assert!(rep.trials.len() >= 6);
        // Native precision: within the paper's tolerance.
        let rep = compare(&a, &b, &sem, &opts(func, Precision::Native, 1e-2)).unwrap();
        assert!(rep.ok, "{tiled}: {rep:?}");
    }
}

#[test]
fn a_wrong_program_is_caught() {
    let sem = efir_registry::all_semantics();
    let good = std::fs::read_to_string(root().join("examples/tiled/attn_decode.efir")).unwrap();
    // Drop the repair: the normalizer and weighted sum are no longer rescaled.
    let bad = good.replace("%l1 = ew.mul %l, %e", "%l1 = ew.mul %l, %l");
    assert_ne!(good, bad);
    let a = load("examples/small/attn_decode.efir");
    let rep = compare(
        &a,
        &load_text(&bad),
        &sem,
        &opts("attn_decode", Precision::F64, 1e-5),
    )
    .unwrap();
    assert!(!rep.ok, "a broken repair went unnoticed: {rep:?}");
}

#[test]
fn canonicalize_preserves_every_example() {
    let sem = efir_registry::all_semantics();
    let reg = efir_registry::registry();
    let mut dirs = vec![
        root().join("examples"),
        root().join("examples/small"),
        root().join("examples/tiled"),
    ];
    dirs.retain(|d| d.is_dir());
    let mut n = 0;
    for d in dirs {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.extension().is_none_or(|x| x != "efir")
                || !p.to_string_lossy().contains("/small/")
                    && !p.to_string_lossy().contains("/tiled/")
            {
                continue;
            }
            let a = load_text(&std::fs::read_to_string(&p).unwrap());
            let mut b = a.clone();
            let mut pm = efir_ir::pass::PassManager::new();
            pm.add(Box::new(efir_transforms::canonicalize::Canonicalize::new()));
            assert!(pm.run(&mut b, &reg).1.is_ok());
            let func = a.funcs[0].name.clone();
            let rep = compare(&a, &b, &sem, &opts(&func, Precision::Native, 0.0)).unwrap();
            assert!(
                rep.ok,
                "{}: canonicalize changed the result: {rep:?}",
                p.display()
            );
            n += 1;
        }
    }
    assert!(n >= 10, "only {n} examples checked");
}

fn run1(src: &str, inputs: Vec<Tensor>, tiles: &[(&str, usize)]) -> Vec<Tensor> {
    let m = load_text(src);
    let sem = efir_registry::all_semantics();
    let o = Options {
        precision: Precision::F64,
        tiles: tiles.iter().map(|(a, n)| (a.to_string(), *n)).collect(),
    };
    Interp::new(&m, &sem, o)
        .run(&m.funcs[0].name, &inputs)
        .unwrap()
}

fn t(shape: &[usize], v: Vec<f64>) -> Tensor {
    Tensor {
        dtype: efir_ir::DType::F32,
        data: ArrayD::from_shape_vec(IxDyn(shape), v).unwrap(),
    }
}

#[test]
fn known_answers() {
    // Row sums by split reduction with collect, for a non-dividing tile.
    let src = "func @f(%x: tensor<2x5xf32>) -> tensor<2xf32> {
  %p = par.partition<1, @k> %x : tensor<2x5xf32, @k: part(1)>
  %s = tensor.reduce<#red.sum, 1> %p : tensor<2xf32, @k: partial(#red.sum)>
  %c = par.collect<@k> %s : tensor<|@k|x2xf32>
  %r = tensor.reduce<#red.sum, 0> %c : tensor<2xf32>
  return %r : tensor<2xf32>
}
";
    let x = t(&[2, 5], (1..=10).map(f64::from).collect());
    for k in [1, 2, 3, 5] {
        let out = run1(src, vec![x.clone()], &[("k", k)]);
        assert_eq!(out[0].data.as_slice().unwrap(), &[15.0, 40.0], "tile {k}");
    }
    // A tiled matmul over M and N with a max over partial maxima.
    let src = "func @g(%a: tensor<3x2xf32>, %b: tensor<2x3xf32>) -> tensor<3xf32> {
  %am = par.partition<0, @m> %a : tensor<3x2xf32, @m: part(0)>
  %bm = par.replicate<@m> %b : tensor<2x3xf32, @m: repl>
  %bn = par.partition<1, @n> %bm : tensor<2x3xf32, @m: repl, @n: part(1)>
  %an = par.replicate<@n> %am : tensor<3x2xf32, @m: part(0), @n: repl>
  %c = tile.matmul %an, %bn : tensor<3x3xf32, @m: part(0), @n: part(1)>
  %mx = tensor.reduce<#red.max, 1> %c : tensor<3xf32, @m: part(0), @n: partial(#red.max)>
  %r = par.reduce<#red.max, @n> %mx : tensor<3xf32, @m: part(0)>
  %o = par.combine<0, @m> %r : tensor<3xf32>
  return %o : tensor<3xf32>
}
";
    let a = t(&[3, 2], vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    let b = t(&[2, 3], vec![1.0, 5.0, 2.0, 3.0, -1.0, 4.0]);
    let out = run1(src, vec![a, b], &[("m", 2), ("n", 2)]);
    // Rows of a@b: [1,5,2], [3,-1,4], [4,4,6].
    assert_eq!(out[0].data.as_slice().unwrap(), &[5.0, 4.0, 6.0]);
}

#[test]
fn native_precision_rounds_to_f16() {
    let src = "func @f(%x: tensor<2xf16>) -> tensor<2xf16> {
  %c = tensor.full<1e-4> : tensor<f16>
  %y = ew.add %x, %c : tensor<2xf16>
  return %y : tensor<2xf16>
}
";
    let m = load_text(src);
    let sem = efir_registry::all_semantics();
    let x = Tensor {
        dtype: efir_ir::DType::F16,
        data: ArrayD::from_shape_vec(IxDyn(&[2]), vec![1.0, 2.0]).unwrap(),
    };
    let native = Interp::new(&m, &sem, Options::default())
        .run("f", std::slice::from_ref(&x))
        .unwrap();
    // 1 + 1e-4 is not an f16: it rounds back to 1.
    assert_eq!(native[0].data.as_slice().unwrap(), &[1.0, 2.0]);
    let exact = Interp::new(
        &m,
        &sem,
        Options {
            precision: Precision::F64,
            ..Options::default()
        },
    )
    .run("f", &[x])
    .unwrap();
    assert!(exact[0].data[[0]] > 1.0);
}

#[test]
fn assert_equivalent_api() {
    let a = load("examples/small/lora.efir");
    let b = load("examples/tiled/lora_splitk.efir");
    let o = CompareOptions::new("lora");
    efir_registry::assert_equivalent(&a, &b, &o);
    let wrong = load_text(
        &std::fs::read_to_string(root().join("examples/small/lora.efir"))
            .unwrap()
            .replace("ew.add %xw, %xab", "ew.sub %xw, %xab"),
    );
    let err = efir_registry::check_equivalent(&a, &wrong, &o).unwrap_err();
    assert!(err.contains("`@lora` differs"), "{err}");
}
