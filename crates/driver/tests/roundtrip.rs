//! parse -> print -> parse -> print is a fixed point on every valid `.efir`
//! file of the repository, in the custom and in the generic form.

mod corpus;

use efir_ir::{parse_and_verify, print_module, PrintOptions};

#[test]
fn every_file_round_trips() {
    let reg = efir_registry::registry();
    let cases = corpus::valid_cases();
    assert!(!cases.is_empty(), "no .efir files found");
    let custom = PrintOptions::default();
    let generic = PrintOptions { generic: true };
    for (file, text) in cases {
        let (m, diags) = parse_and_verify(&text, &reg);
        assert!(diags.is_empty(), "{}: {diags:?}", file.display());
        let p1 = print_module(&m, &reg, custom);
        let (m2, d2) = parse_and_verify(&p1, &reg);
        assert!(
            d2.is_empty(),
            "{}: printed form does not verify: {d2:?}\n{p1}",
            file.display()
        );
        let p2 = print_module(&m2, &reg, custom);
        assert_eq!(
            p1,
            p2,
            "{}: custom printing is not a fixed point",
            file.display()
        );
        let g = print_module(&m, &reg, generic);
        let (m3, d3) = parse_and_verify(&g, &reg);
        assert!(
            d3.is_empty(),
            "{}: generic form does not verify: {d3:?}\n{g}",
            file.display()
        );
        assert_eq!(
            print_module(&m3, &reg, custom),
            p1,
            "{}: generic form does not round-trip",
            file.display()
        );
    }
}
