//! Every rule family is checked by the interpreter: saturate the small
//! examples and seed programs with the family (and the families that
//! create its matches), extract several programs at random from the
//! e-graph and compare each with the source on random inputs and tile
//! sizes. Every rule of the family must have fired somewhere, so none goes
//! unchecked.

use efir_egraph::convert::{from_func, to_func_text, Graph};
use efir_egraph::rules::rules;
use efir_egraph::saturate::run_rules;
use efir_interp::compare::CompareOptions;
use efir_ir::{parse_and_verify, Module};
use egg::{CostFunction, Extractor, Id, Language, SymbolLang};
use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn programs() -> Vec<(String, Module)> {
    let reg = efir_registry::registry();
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("examples/small"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    files.extend(
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/seeds"))
            .unwrap()
            .flatten()
            .map(|e| e.path()),
    );
    files.extend(
        std::fs::read_dir(root().join("examples/derivations"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.to_string_lossy().ends_with(".source.efir")),
    );
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let (m, d) = parse_and_verify(&std::fs::read_to_string(&p).unwrap(), &reg);
            assert!(d.is_empty(), "{}: {d:?}", p.display());
            (p.file_stem().unwrap().to_string_lossy().into_owned(), m)
        })
        .collect()
}

/// A cost that prefers a different e-node in each e-class for each seed.
struct RandomCost(u64);

impl CostFunction<SymbolLang> for RandomCost {
    type Cost = f64;
    fn cost<C: FnMut(Id) -> f64>(&mut self, n: &SymbolLang, mut costs: C) -> f64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (self.0, n.op.as_str(), n.children()).hash(&mut h);
        let own = (h.finish() % 97) as f64 + 1.0;
        own + n.children().iter().map(|c| costs(*c)).sum::<f64>()
    }
}

fn saturate(m: &Module, families: &[&str], fired: &mut BTreeSet<String>) -> Graph {
    let g = from_func(&m.funcs[0], m).unwrap();
    let (g, iterations, _) = run_rules(g, families, 8, 4000, 60.0);
    for it in &iterations {
        fired.extend(it.applied.keys().map(|s| s.to_string()));
    }
    assert!(
        g.egraph.analysis.errors.is_empty(),
        "{:?}",
        g.egraph.analysis.errors
    );
    g
}

fn check_family(family: &str, with: &[&str]) {
    let reg = efir_registry::registry();
    let mut fams: Vec<&str> = with.to_vec();
    fams.push(family);
    let mut fired = BTreeSet::new();
    for (name, m) in programs() {
        let g = saturate(&m, &fams, &mut fired);
        for seed in 0..6u64 {
            let ex = Extractor::new(&g.egraph, RandomCost(seed));
            let mut text = to_func_text(&g, &|c| ex.find_best_node(c).clone()).unwrap();
            let lib = efir_egraph::saturate::library_refs(&g.egraph);
            text.push_str(&efir_egraph::saturate::library_used(
                &lib,
                &Default::default(),
            ));
            let (b, d) = parse_and_verify(&text, &reg);
            assert!(
                d.is_empty(),
                "{name}: extracted program does not verify: {d:?}\n{text}"
            );
            let mut o = CompareOptions::new(&m.funcs[0].name);
            o.trials = 1;
            o.tol = 1e-9;
            o.seed = seed;
            if let Err(e) = efir_registry::check_equivalent(&m, &b, &o) {
                panic!("family {family}: {name} (seed {seed}): {e}\n{text}");
            }
        }
    }
    let own: Vec<String> = rules(&[family]).into_iter().map(|r| r.name).collect();
    let unfired: Vec<&String> = own.iter().filter(|r| !fired.contains(*r)).collect();
    assert!(
        unfired.is_empty(),
        "rules of `{family}` never checked: {unfired:?}"
    );
}

#[test]
fn algebraic_rules_preserve_meaning() {
    check_family("algebraic", &[]);
}

#[test]
fn refinement_rules_preserve_meaning() {
    check_family("refinement", &["fusion"]);
}

#[test]
fn propagation_rules_preserve_meaning() {
    check_family("propagation", &["refinement", "fusion"]);
}

#[test]
fn structural_rules_preserve_meaning() {
    check_family("structural", &["refinement", "propagation"]);
}

#[test]
fn fusion_rules_preserve_meaning() {
    check_family("fusion", &[]);
}

#[test]
fn storage_rules_preserve_meaning() {
    check_family("storage", &["refinement"]);
}

#[test]
fn view_rules_preserve_meaning() {
    check_family("view", &[]);
}

#[test]
fn split_rules_preserve_meaning() {
    check_family("split", &["refinement", "fusion"]);
}
