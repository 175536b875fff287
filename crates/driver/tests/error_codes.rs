//! Every error code is explained in `docs/errors.md` and pinned by at
//! least one lit case (`expected-error ... {{E0xxx: ...}}` or a FileCheck
//! line `error[E0xxx]` or `warning[E0xxx]`), and every code the sources emit is in the table.

mod corpus;

use std::path::Path;

fn read_tree(dir: &Path, ext: &str, out: &mut String) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            read_tree(&p, ext, out);
        } else if p.extension().is_some_and(|x| x == ext) {
            out.push_str(&std::fs::read_to_string(&p).unwrap_or_default());
        }
    }
}

#[test]
fn every_code_is_documented_and_pinned() {
    let root = corpus::repo_root();
    let docs = std::fs::read_to_string(root.join("docs/errors.md")).unwrap_or_default();
    let mut lit = String::new();
    read_tree(&root.join("lit-tests"), "efir", &mut lit);
    let mut missing = Vec::new();
    for (code, _) in efir_diagnostics::codes::ALL {
        if !docs.contains(&format!("## {code}")) {
            missing.push(format!("{code}: not explained in docs/errors.md"));
        }
        if !efir_diagnostics::codes::INTERNAL.contains(code)
            && !lit.contains(&format!("{{{{{code}"))
            && !lit.contains(&format!("error[{code}]"))
            && !lit.contains(&format!("warning[{code}]"))
        {
            missing.push(format!("{code}: no lit case pins it"));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn every_emitted_code_is_in_the_table() {
    let root = corpus::repo_root();
    let mut src = String::new();
    read_tree(&root.join("crates"), "rs", &mut src);
    read_tree(&root.join("dialects"), "rs", &mut src);
    for (i, _) in src.match_indices("codes::E") {
        let code = &src[i + 7..(i + 12).min(src.len())];
        if !code[1..].bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        assert!(
            efir_diagnostics::codes::summary(code).is_some(),
            "`{code}` is used but not in codes::ALL"
        );
    }
}
