//! `docs/rules.md` lists every rule with its equation; it is generated from
//! the rule definitions. Regenerate with
//! `EFIR_BLESS=1 cargo test -p efir-registry --test rules_doc` and read the
//! diff.

use efir_egraph::rules::{rules, FAMILIES};
use std::fmt::Write;
use std::path::Path;

fn render() -> String {
    let mut s = String::from(
        "# Rewrite rules\n\n\
         Generated from `crates/egraph/src/rules/` by\n\
         `EFIR_BLESS=1 cargo test -p efir-registry --test rules_doc`; do not edit.\n\n\
         Every rule is applied through a typed union: its right-hand side is\n\
         type-checked before it is added, and it is only merged with the matched\n\
         e-class when both have the same type (a rule that would merge different\n\
         types is reported as a bug, `E0705`). Axes introduced by refinement are\n\
         named by role and extent (`@m16`: rows of extent 16, `@n11008`: columns,\n\
         `@k4096`: a reduced dim, `@b32`: a batch dim), so the same decomposition\n\
         reached twice is one term and aligned dims share an axis.\n\n\
         Each family is checked by `crates/registry/tests/rules.rs`: programs\n\
         extracted at random from saturated e-graphs must compute the same as their\n\
         source in the interpreter, and every rule must have fired.\n",
    );
    let all = rules(FAMILIES);
    for fam in FAMILIES {
        let rs: Vec<_> = all.iter().filter(|r| r.family == *fam).collect();
        let _ = write!(
            s,
            "\n## {fam} ({} rules)\n\n| rule | equation | matches |\n|---|---|---|\n",
            rs.len()
        );
        for r in rs {
            let _ = writeln!(
                s,
                "| `{}` | {} | `{}` |",
                r.name,
                r.equation.replace('|', "\\|"),
                r.lhs
            );
        }
    }
    s
}

#[test]
fn rules_md_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/rules.md");
    let want = render();
    if std::env::var_os("EFIR_BLESS").is_some() {
        std::fs::write(&path, &want).unwrap();
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(have == want, "docs/rules.md is out of date: run EFIR_BLESS=1 cargo test -p efir-registry --test rules_doc");
}
