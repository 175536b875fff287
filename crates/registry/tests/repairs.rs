//! The repair functions of reduction fusion, checked by the interpreter on
//! random data: `h(c, s, s) = c` (no change, no repair), repairing twice is
//! repairing once (`h(h(c, s, t), t, u) = h(c, s, u)`), and the input map's
//! guard gives 0 where the running max is still -inf.

use efir_interp::{Interp, Options, Precision};
use ndarray::{ArrayD, IxDyn};

fn arr(v: Vec<f64>) -> ArrayD<f64> {
    ArrayD::from_shape_vec(IxDyn(&[v.len()]), v).unwrap()
}

#[test]
fn repair_identities_hold_on_random_data() {
    let lib = efir_egraph::repairs::library_module();
    let sem = efir_registry::all_semantics();
    let it = Interp::new(
        &lib,
        &sem,
        Options {
            precision: Precision::F64,
            tiles: Default::default(),
        },
    );
    let mut seed = 1u64;
    let mut rnd = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((seed >> 11) as f64 / (1u64 << 53) as f64) * 8.0 - 4.0
    };
    let n = 64;
    let c: Vec<f64> = (0..n).map(|_| rnd()).collect();
    let s: Vec<f64> = (0..n).map(|_| rnd()).collect();
    let t: Vec<f64> = s.iter().map(|x| x + rnd().abs()).collect();
    let u: Vec<f64> = t.iter().map(|x| x + rnd().abs()).collect();
    let h = "efir.exp_h.f64";
    // h(c, s, s) = c
    let same = it
        .call(h, vec![arr(c.clone()), arr(s.clone()), arr(s.clone())])
        .unwrap();
    assert_eq!(same[0], arr(c.clone()));
    // h(h(c, s, t), t, u) = h(c, s, u)
    let ct = it
        .call(h, vec![arr(c.clone()), arr(s.clone()), arr(t.clone())])
        .unwrap()
        .remove(0);
    let ctu = it
        .call(h, vec![ct, arr(t.clone()), arr(u.clone())])
        .unwrap()
        .remove(0);
    let cu = it
        .call(h, vec![arr(c.clone()), arr(s.clone()), arr(u.clone())])
        .unwrap()
        .remove(0);
    for (a, b) in ctu.iter().zip(cu.iter()) {
        assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{a} vs {b}");
    }
    // The two-field repair applies the same factor to both fields.
    let h2 = it
        .call(
            "efir.exp_h2.f64",
            vec![
                arr(c.clone()),
                arr(c.clone()),
                arr(s.clone()),
                arr(t.clone()),
            ],
        )
        .unwrap();
    assert_eq!(h2[0], h2[1]);
    // f(x, s') = exp(x - s'), and 0 where s' = -inf.
    let x: Vec<f64> = (0..n).map(|_| rnd()).collect();
    let mut m = x.clone();
    m[0] = f64::NEG_INFINITY;
    let mut xs = x.clone();
    xs[0] = f64::NEG_INFINITY;
    let p = it
        .call("efir.exp_f.f64", vec![arr(xs), arr(m.clone())])
        .unwrap()
        .remove(0);
    assert_eq!(p[[0]], 0.0);
    assert!(p.iter().skip(1).all(|v| (*v - 1.0).abs() < 1e-15));
}
