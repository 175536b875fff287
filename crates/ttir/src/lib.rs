//! Kernel plans to Triton-dialect MLIR (TTIR), built through melior.
//!
//! [`efir_triton::plan`] cuts a candidate program into kernels; the Python
//! emitter of `efir-triton` writes them as `@triton.jit` functions. This
//! crate writes the same kernels, at the plan's default (or scheduled)
//! configuration, as one MLIR module per kernel holding one `tt.func`:
//! block sizes are constants, the launch grid is one-dimensional (the grid
//! axes decomposed from `tt.get_program_id`, the first axis fastest, as in
//! the Python build), and `num_warps`, `num_stages` and the grid size are
//! module attributes (`efir.num_warps`, `efir.num_stages`, `efir.grid`).
//!
//! The Triton dialect is not part of upstream MLIR: its ops and types are
//! built generically in a context that allows unregistered dialects, next
//! to the registered `arith`, `math` and `scf` ops; melior verifies each
//! module before it is printed. Triton's own parser reads the text (it
//! accepts the generic form of its ops).
//!
//! Everything that needs LLVM is behind the `mlir` feature (off by
//! default); without it only [`AVAILABLE`] exists.

/// Whether this build has the `mlir` feature (melior and LLVM/MLIR 22).
pub const AVAILABLE: bool = cfg!(feature = "mlir");

#[cfg(feature = "mlir")]
mod build;
#[cfg(feature = "mlir")]
pub use build::{round_trip, translate, Buffer, TtirGroup, TtirKernel, TtirProgram};
