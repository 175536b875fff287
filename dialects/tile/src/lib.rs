//! The `tile` dialect: computation on the local tiles of parallel values.
//! `tile.matmul` is the local product at each parallel coordinate; its
//! typing is in `efir_dialect_tensor::matmul` (the tile-level rules:
//! part(M) x repl, repl x part(N), part(K) x part(K) -> partial(#red.sum)).

use efir_ir::dialect::{Arity, DialectDef, OpDef};

/// The `tile` dialect.
pub static DIALECT: DialectDef = DialectDef {
    name: "tile",
    summary: "Tile-level computation: the local matmul at each parallel coordinate",
    ops: &[OpDef {
        name: "tile.matmul",
        summary: "the matmul of the local tiles at each parallel coordinate",
        operands: Arity::Exact(2),
        positional: &[],
        attrs: &[],
        infer: |cx| efir_dialect_tensor::matmul::infer_matmul(cx, true),
        fold: None,
        result_from_declared: false,
        extra_attrs: false,
    }],
    terms: &[],
    verify_func: None,
};

/// Interpreter semantics: the local product of the tiles at each
/// coordinate.
pub static SEMANTICS: &[(&str, efir_interp::Semantics)] = &[(
    "tile.matmul",
    efir_interp::Semantics::Local(efir_dialect_tensor::eval::local_matmul),
)];
