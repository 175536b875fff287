//! `--lower-to-kernels`: for the candidates of every small workload, the
//! kernel graph computes the same as the candidate (interpreter, two tile
//! choices), prints and parses back, and flattens back to a program that
//! translates to the same Triton module.

use efir_driver::PassFlag;
use efir_interp::compare::CompareOptions;
use efir_ir::{parse_and_verify, print_module, PrintOptions};
use std::path::Path;

fn flag(name: &str, options: &str) -> PassFlag {
    PassFlag {
        name: name.into(),
        options: options.into(),
    }
}

#[test]
fn kernel_graphs_compute_the_same_and_translate_the_same() {
    let reg = efir_registry::registry();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut graphs = 0;
    for e in std::fs::read_dir(root.join("examples/small"))
        .unwrap()
        .flatten()
    {
        let src = std::fs::read_to_string(e.path()).unwrap();
        let cands = efir_driver::run_case(
            &src,
            &reg,
            &[flag("saturate", ""), flag("compact", "max-candidates=4")],
            PrintOptions::default(),
        )
        .unwrap();
        let ctext = cands.text.unwrap();
        let (c, d) = parse_and_verify(&ctext, &reg);
        assert!(d.is_empty(), "{d:?}");
        let lowered = efir_driver::run_case(
            &ctext,
            &reg,
            &[flag("lower-to-kernels", "")],
            PrintOptions::default(),
        )
        .unwrap();
        assert!(lowered.diags.is_empty(), "{:?}", lowered.diags);
        let ltext = lowered.text.unwrap();
        let (k, d) = parse_and_verify(&ltext, &reg);
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(print_module(&k, &reg, PrintOptions::default()), ltext);
        for f in efir_triton::programs(&c) {
            assert!(
                k.func(&f.name)
                    .unwrap()
                    .ops
                    .iter()
                    .all(|o| o.name == "kernel.launch"),
                "{}",
                f.name
            );
            let mut o = CompareOptions::new(&f.name);
            o.trials = 1;
            efir_registry::assert_equivalent(&c, &k, &o);
            graphs += 1;
        }
        // Flattened back, the kernel graph translates exactly as the
        // candidates do.
        let flat = efir_triton::outline::flatten(&k).unwrap();
        for f in efir_triton::programs(&c) {
            let a = efir_triton::emit_python(&efir_triton::plan(&c, f).unwrap(), "x", "y").unwrap();
            let g = flat.func(&f.name).unwrap();
            let b =
                efir_triton::emit_python(&efir_triton::plan(&flat, g).unwrap(), "x", "y").unwrap();
            assert_eq!(a, b, "{}", f.name);
        }
    }
    // 4 candidates of each of the 9 small workloads.
    assert_eq!(graphs, 36);
}
