//! `--extract=greedy`'s search ([`efir_egraph::extract::greedy`]): the
//! least cost of every e-class is the one `egg::Extractor`'s fixpoint finds,
//! its choices form a program, and each e-node is costed at most once (the
//! fixpoint re-costs every class once per level of a chain: quadratic, 50 s
//! on a chain of 20,000 ops, issue 30).

use efir_egraph::convert::{from_func, to_func_text, Graph};
use efir_egraph::extract::{greedy, GlobalMemoryCost};
use efir_egraph::rules::FAMILIES;
use efir_egraph::saturate::run_rules;
use efir_ir::{parse_and_verify, Module};
use egg::{CostFunction, Extractor, Id, SymbolLang};
use std::path::Path;

fn module(src: &str) -> Module {
    let (m, d) = parse_and_verify(src, &efir_registry::registry());
    assert!(d.is_empty(), "{d:?}");
    m
}

fn saturated(m: &Module) -> Graph {
    let g = from_func(&m.funcs[0], m).unwrap();
    run_rules(g, FAMILIES, 30, 20_000, 60.0).0
}

/// A cost function that counts its calls.
struct Counting<'a> {
    inner: GlobalMemoryCost<'a>,
    calls: usize,
}

impl CostFunction<SymbolLang> for Counting<'_> {
    type Cost = f64;
    fn cost<C: FnMut(Id) -> f64>(&mut self, n: &SymbolLang, costs: C) -> f64 {
        self.calls += 1;
        self.inner.cost(n, costs)
    }
}

#[test]
fn least_costs_are_egg_extractors_and_choices_form_a_program() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/small");
    for name in ["attn_decode", "rmsnorm_mlp", "lora", "gated_mlp"] {
        let m = module(&std::fs::read_to_string(root.join(format!("{name}.efir"))).unwrap());
        let g = saturated(&m);
        let eg = &g.egraph;
        let cf = || GlobalMemoryCost {
            eg,
            launch: 65536.0,
        };
        let ours = greedy(eg, &mut cf(), None);
        assert!(!ours.stopped);
        let egg = Extractor::new(eg, cf());
        for c in eg.classes() {
            assert_eq!(
                ours.cost(eg, c.id),
                Some(egg.find_best_cost(c.id)),
                "{name}: class {}",
                c.id
            );
            let n = ours.node(eg, c.id).unwrap();
            let own = cf().cost(n, |k| ours.cost(eg, k).unwrap());
            assert_eq!(own, ours.cost(eg, c.id).unwrap(), "{name}: class {}", c.id);
        }
        let text = to_func_text(&g, &|c| ours.node(eg, c).unwrap().clone()).unwrap();
        assert!(text.contains(&format!("func @{name}")), "{text}");
    }
}

#[test]
fn a_deep_chain_costs_each_enode_once() {
    let n = 20_000;
    let mut s = String::from("func @chain(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {\n");
    let mut prev = "%x".to_string();
    for i in 0..n {
        let op = if i % 2 == 0 { "ew.neg" } else { "ew.exp" };
        s.push_str(&format!("  %v{i} = {op} {prev} : tensor<4x8xf32>\n"));
        prev = format!("%v{i}");
    }
    s.push_str(&format!("  return {prev} : tensor<4x8xf32>\n}}\n"));
    let m = module(&s);
    let g = saturated(&m);
    let eg = &g.egraph;
    let mut cf = Counting {
        inner: GlobalMemoryCost {
            eg,
            launch: 65536.0,
        },
        calls: 0,
    };
    let ours = greedy(eg, &mut cf, None);
    assert!(eg.total_size() > n);
    assert!(
        cf.calls <= eg.total_size(),
        "{} cost calls for {} e-nodes",
        cf.calls,
        eg.total_size()
    );
    let root = g.roots[0];
    assert_eq!(
        ours.cost(eg, root),
        Some(n as f64 * (128.0 + 65536.0)),
        "one kernel per op"
    );
}

#[test]
fn past_the_deadline_every_class_still_gets_a_program() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/small");
    let m = module(&std::fs::read_to_string(root.join("attn_prefill.efir")).unwrap());
    let g = saturated(&m);
    let eg = &g.egraph;
    let mut cf = GlobalMemoryCost {
        eg,
        launch: 65536.0,
    };
    let past = std::time::Instant::now();
    let ours = greedy(eg, &mut cf, Some(past));
    assert!(ours.stopped);
    assert_eq!(ours.costed, 0);
    let mut text = to_func_text(&g, &|c| ours.node(eg, c).unwrap().clone()).unwrap();
    text.push_str(&efir_egraph::saturate::library_used(
        &efir_egraph::saturate::library_refs(eg),
        &Default::default(),
    ));
    let b = module(&text);
    let mut o = efir_interp::compare::CompareOptions::new("attn_prefill");
    o.trials = 1;
    efir_registry::check_equivalent(&m, &b, &o).unwrap();
}
