//! The one visible list of every dialect and every pass, like MLIR's
//! `registerAllDialects()` / `registerAllPasses()`. A new dialect or pass
//! is added here and nowhere else.

use efir_ir::dialect::DialectDef;
use efir_ir::pass::PassInfo;
use efir_ir::Registry;

/// Every dialect, in registration order.
pub fn all_dialects() -> [&'static DialectDef; 5] {
    [
        &efir_dialect_ew::DIALECT,
        &efir_dialect_tensor::DIALECT,
        &efir_dialect_red::DIALECT,
        &efir_dialect_par::DIALECT,
        &efir_dialect_tile::DIALECT,
    ]
}

/// The interpreter semantics of every op of every dialect.
pub fn all_semantics() -> efir_interp::SemanticsTable {
    [
        efir_dialect_ew::eval::SEMANTICS,
        efir_dialect_tensor::eval::SEMANTICS,
        efir_dialect_par::eval::SEMANTICS,
        efir_dialect_tile::SEMANTICS,
    ]
    .into_iter()
    .flatten()
    .copied()
    .collect()
}

/// Every pass, by flag name.
pub fn all_passes() -> Vec<PassInfo> {
    vec![efir_transforms::canonicalize::INFO]
}

/// A registry with every dialect.
pub fn registry() -> Registry {
    let mut r = Registry::new();
    for d in all_dialects() {
        r.register(d);
    }
    r
}

/// The pass registered under `name`.
pub fn pass(name: &str) -> Option<PassInfo> {
    all_passes().into_iter().find(|p| p.name == name)
}
