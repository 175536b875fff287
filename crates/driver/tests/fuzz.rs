//! Bounded fuzzing of the parser, verifier, printer and canonicalizer:
//! random text and mutations of the repository's real files must never
//! panic, and whatever verifies must print, re-parse and canonicalize.
//! The number of cases is `PROPTEST_CASES` (default 256 per property).

mod corpus;

use efir_driver::PassFlag;
use efir_ir::{parse_and_verify, print_module, PrintOptions};
use proptest::prelude::*;
use std::sync::OnceLock;

fn seeds() -> &'static Vec<String> {
    static SEEDS: OnceLock<Vec<String>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let mut v: Vec<String> = corpus::all_files()
            .iter()
            .filter_map(|f| std::fs::read_to_string(f).ok())
            .collect();
        v.push(include_str!("seed.efir").to_string());
        v
    })
}

const FRAGMENTS: &[&str] = &[
    "%0",
    "%a",
    "@m",
    "@p",
    "#red.sum",
    "#red.max",
    "#red.prod<#red.sum, #red.max>",
    "tensor<",
    ">",
    "<",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "=",
    "->",
    "func",
    "return",
    "tuple<",
    "part(0)",
    "part(7)",
    "repl",
    "partial(#red.sum)",
    "8x",
    "|@p|x",
    "f16",
    "i1",
    "xf32",
    "ew.add",
    "ew.exp",
    "tensor.matmul",
    "tensor.reduce<#red.sum, 1>",
    "par.partition<0, @m>",
    "tensor.slice<[0, 1], [2, 8], [1, 2]>",
    "tensor.slice<[0], [4], [1]>",
    "tensor.concat<1>",
    "tensor.concat<0> %a, %a",
    "par.collect<@p>",
    "tile.matmul",
    "\"ew.mul\"",
    "-inf",
    "1e-6",
    "99999999999999999999",
    "//",
    "\n",
    " ",
    "// -----\n",
    "%",
    "@",
    "#",
    "\"",
    "\\",
    "é",
    "\0",
];

#[derive(Clone, Debug)]
enum Mutation {
    Delete(usize, usize),
    Insert(usize, usize),
    Duplicate(usize, usize, usize),
    Byte(usize, u8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0usize..40).prop_map(|(a, n)| Mutation::Delete(a, n)),
        (any::<usize>(), 0..FRAGMENTS.len()).prop_map(|(a, f)| Mutation::Insert(a, f)),
        (any::<usize>(), 0usize..80, any::<usize>())
            .prop_map(|(a, n, b)| Mutation::Duplicate(a, n, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(a, b)| Mutation::Byte(a, b)),
    ]
}

fn floor(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn apply(text: &str, muts: &[Mutation]) -> String {
    let mut s = text.to_string();
    for m in muts {
        let len = s.len().max(1);
        match *m {
            Mutation::Delete(a, n) => {
                let a = floor(&s, a % len);
                let b = floor(&s, a + n);
                s.replace_range(a..b, "");
            }
            Mutation::Insert(a, f) => {
                let a = floor(&s, a % len);
                s.insert_str(a, FRAGMENTS[f]);
            }
            Mutation::Duplicate(a, n, b) => {
                let a = floor(&s, a % len);
                let e = floor(&s, a + n);
                let piece = s[a..e].to_string();
                let b = floor(&s, b % len);
                s.insert_str(b, &piece);
            }
            Mutation::Byte(a, b) => {
                let a = floor(&s, a % len);
                let c = char::from(b.min(0x7e));
                s.insert(a, c);
            }
        }
    }
    s
}

/// Everything a tool does with a file; panics only on a real bug.
fn exercise(text: &str) {
    let reg = efir_registry::registry();
    let (m, diags) = parse_and_verify(text, &reg);
    // Rendering must not panic on any span.
    let _ = efir_diagnostics::render("fuzz.efir", text, &diags, false);
    if !diags.is_empty() {
        return;
    }
    for generic in [false, true] {
        let p = print_module(&m, &reg, PrintOptions { generic });
        let (_, d) = parse_and_verify(&p, &reg);
        assert!(d.is_empty(), "printed module does not verify: {d:?}\n{p}");
    }
    let flags = [PassFlag {
        name: "canonicalize".into(),
        options: String::new(),
    }];
    let out = efir_driver::run_case(text, &reg, &flags, PrintOptions::default())
        .expect("pipeline builds");
    assert!(
        out.diags.is_empty(),
        "canonicalize broke a valid module: {:?}",
        out.diags
    );
    // Saturation (bounded) and extraction must work on every valid module.
    let flags = [
        PassFlag {
            name: "saturate".into(),
            options: "node-limit=300,iter-limit=3".into(),
        },
        PassFlag {
            name: "extract".into(),
            options: String::new(),
        },
    ];
    let out = efir_driver::run_case(text, &reg, &flags, PrintOptions::default())
        .expect("pipeline builds");
    assert!(
        out.diags.is_empty(),
        "saturate/extract failed on a valid module: {:?}\n{text}",
        out.diags
    );
    let flags = [
        PassFlag {
            name: "saturate".into(),
            options: "node-limit=200,iter-limit=2".into(),
        },
        PassFlag {
            name: "compact".into(),
            options: "max-candidates=2,max-states=200".into(),
        },
    ];
    let out = efir_driver::run_case(text, &reg, &flags, PrintOptions::default())
        .expect("pipeline builds");
    assert!(
        out.diags
            .iter()
            .all(|d| d.severity != efir_diagnostics::Severity::Error),
        "saturate/compact failed on a valid module: {:?}\n{text}",
        out.diags
    );
    // Cutting into kernels either works (and the kernel graph verifies) or
    // reports E0801; lowering to Triton never panics.
    let flags = [PassFlag {
        name: "lower-to-kernels".into(),
        options: String::new(),
    }];
    let out = efir_driver::run_case(text, &reg, &flags, PrintOptions::default())
        .expect("pipeline builds");
    assert!(
        out.diags.iter().all(|d| d.code == "E0801"),
        "lower-to-kernels failed on a valid module: {:?}\n{text}",
        out.diags
    );
    if let Some(k) = &out.text {
        let (km, d) = parse_and_verify(k, &reg);
        assert!(d.is_empty(), "kernel graph does not verify: {d:?}\n{k}");
        if let Ok(flat) = efir_triton::outline::flatten(&km) {
            for f in efir_triton::programs(&flat) {
                if let Ok(p) = efir_triton::plan(&flat, f) {
                    let _ = efir_triton::emit_python(&p, "fuzz", "fuzz");
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mutated_real_files_never_panic(seed in any::<usize>(), muts in prop::collection::vec(mutation(), 1..6)) {
        let seeds = seeds();
        let text = apply(&seeds[seed % seeds.len()], &muts);
        exercise(&text);
    }

    #[test]
    fn random_fragment_soup_never_panics(parts in prop::collection::vec(0..FRAGMENTS.len(), 0..60)) {
        let text: String = parts.iter().map(|&i| FRAGMENTS[i]).collect::<Vec<_>>().join(" ");
        exercise(&text);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        exercise(&String::from_utf8_lossy(&bytes));
    }
}
