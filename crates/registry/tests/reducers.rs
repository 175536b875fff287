//! The updates of the built-in reducers, written in IR by the `red`
//! dialect, parse and verify with every dialect registered, and their
//! identities are neutral for them.

use efir_ir::{parse_and_verify, Attr, DType};

fn prod(a: Attr, b: Attr) -> Attr {
    Attr::Term("red.prod".into(), vec![(None, a), (None, b)])
}

#[test]
fn update_functions_verify() {
    let reg = efir_registry::registry();
    let sum = Attr::term("red.sum");
    let max = Attr::term("red.max");
    for r in [
        sum.clone(),
        max.clone(),
        prod(max.clone(), prod(sum.clone(), sum.clone())),
    ] {
        for dt in [DType::F32, DType::F16] {
            let src = efir_dialect_red::update_source(&r, dt).expect("has an IR update");
            let (m, d) = parse_and_verify(&src, &reg);
            assert!(d.is_empty(), "{src}\n{d:?}");
            let f = &m.funcs[0];
            let n = efir_dialect_red::identity(&r).unwrap().len();
            assert_eq!(f.results.len(), n);
            assert_eq!(f.params.len(), 2 * n);
        }
    }
    assert_eq!(
        efir_dialect_red::identity(&prod(max, sum)),
        Some(vec![f64::NEG_INFINITY, 0.0])
    );
}
