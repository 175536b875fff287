//! The one visible list of every dialect and every pass, like MLIR's
//! `registerAllDialects()` / `registerAllPasses()`. A new dialect or pass
//! is added here and nowhere else.

use efir_ir::dialect::DialectDef;
use efir_ir::pass::PassInfo;
use efir_ir::Registry;

/// Every dialect, in registration order.
pub fn all_dialects() -> [&'static DialectDef; 7] {
    [
        &efir_dialect_ew::DIALECT,
        &efir_dialect_tensor::DIALECT,
        &efir_dialect_red::DIALECT,
        &efir_dialect_par::DIALECT,
        &efir_dialect_tile::DIALECT,
        &efir_dialect_egraph::DIALECT,
        &efir_dialect_kernel::DIALECT,
    ]
}

/// The interpreter semantics of every op of every dialect.
pub fn all_semantics() -> efir_interp::SemanticsTable {
    [
        efir_dialect_ew::eval::SEMANTICS,
        efir_dialect_tensor::eval::SEMANTICS,
        efir_dialect_par::eval::SEMANTICS,
        efir_dialect_tile::SEMANTICS,
        efir_dialect_kernel::SEMANTICS,
    ]
    .into_iter()
    .flatten()
    .copied()
    .collect()
}

/// Run both modules on the same fresh random inputs (several seeds and
/// tile choices, see [`efir_interp::compare`]) and return the report, or an
/// error naming the worst output when they differ beyond the tolerance.
pub fn check_equivalent(
    a: &efir_ir::Module,
    b: &efir_ir::Module,
    opts: &efir_interp::compare::CompareOptions,
) -> Result<efir_interp::compare::Report, String> {
    let rep = efir_interp::compare::compare(a, b, &all_semantics(), opts)?;
    if rep.ok {
        return Ok(rep);
    }
    let worst = rep
        .trials
        .iter()
        .max_by(|x, y| {
            let m = |t: &efir_interp::compare::Trial| t.errors.iter().copied().fold(0.0, f64::max);
            m(x).total_cmp(&m(y))
        })
        .map(|t| format!("seed {} tiles {:?} errors {:?}", t.seed, t.tiles, t.errors))
        .unwrap_or_default();
    Err(format!(
        "`@{}` differs: max relative L2 {:.3e} > {:.1e} ({worst})",
        opts.func, rep.max_error, opts.tol
    ))
}

/// Panic unless the two modules compute the same function (for the tests
/// of passes: the output program must equal the input program).
#[track_caller]
pub fn assert_equivalent(
    a: &efir_ir::Module,
    b: &efir_ir::Module,
    opts: &efir_interp::compare::CompareOptions,
) {
    if let Err(e) = check_equivalent(a, b, opts) {
        panic!("{e}");
    }
}

/// Every pass, by flag name.
pub fn all_passes() -> Vec<PassInfo> {
    vec![
        efir_transforms::canonicalize::INFO,
        efir_egraph::saturate::INFO,
        efir_egraph::extract::INFO,
        efir_egraph::compact::INFO,
        efir_triton::outline::INFO,
    ]
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
