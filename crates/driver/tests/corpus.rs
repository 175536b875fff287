//! The `.efir` files of the repository, for tests that run over all of
//! them: every valid case (not an invalid-input test) of every file under
//! `examples/`, `lit-tests/` and `docs/`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            if !p.ends_with("Output") {
                walk(&p, out);
            }
        } else if p.extension().is_some_and(|e| e == "efir") {
            out.push(p);
        }
    }
}

/// Every `.efir` file in the repository.
pub fn all_files() -> Vec<PathBuf> {
    let root = repo_root();
    let mut out = Vec::new();
    for d in [
        "examples",
        "lit-tests",
        "docs",
        "bench",
        "crates",
        "dialects",
        "tools",
    ] {
        walk(&root.join(d), &mut out);
    }
    out
}

/// Whether a file is an invalid-input test (its cases are meant to fail).
pub fn is_invalid_input(text: &str) -> bool {
    text.contains("expected-error")
        || text.contains("expected-warning")
        || text
            .lines()
            .any(|l| l.contains("RUN:") && l.contains("not efir-opt"))
}

/// `(file, case text)` for every case of every valid-input file.
pub fn valid_cases() -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for f in all_files() {
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        if is_invalid_input(&text) {
            continue;
        }
        for case in efir_driver::split::split(&text) {
            if case.text.trim().is_empty() {
                continue;
            }
            out.push((f.clone(), case.text.to_string()));
        }
    }
    out
}
