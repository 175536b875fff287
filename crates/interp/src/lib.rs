//! efir's reference interpreter (`efir-run`): evaluates functions of every
//! dialect, tiled forms included, with concrete tile sizes, on given or
//! seeded random inputs, and compares programs output by output.
//!
//! The semantics of each op live in its dialect crate (`eval` module); this
//! crate owns the value model ([`value`]), the evaluator with the parallel
//! semantics ([`eval`]), array kernels the dialects share ([`kernels`]),
//! inputs ([`inputs`]) and comparison ([`compare`]).

pub mod budget;
pub mod compare;
pub mod eval;
pub mod inputs;
pub mod kernels;
pub mod value;

pub use eval::{GlobalCtx, Interp, LocalCtx, Options, Semantics, SemanticsTable};
pub use value::{Local, PTensor, PValue, Precision, Tensor, Tile};
