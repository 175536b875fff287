//! The dialects of values that e-graphs hold (and the repair library is
//! written in).

/// A registry of the value dialects (the ones e-nodes may use).
pub fn value_registry() -> efir_ir::Registry {
    let mut r = efir_ir::Registry::new();
    for d in [
        &efir_dialect_ew::DIALECT,
        &efir_dialect_tensor::DIALECT,
        &efir_dialect_red::DIALECT,
        &efir_dialect_par::DIALECT,
        &efir_dialect_tile::DIALECT,
    ] {
        r.register(d);
    }
    r
}
