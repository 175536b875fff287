//! efir's IR core: [`types`], [`attr`]ibutes, [`module`]s, the op
//! [`dialect`] registry, building from syntax ([`lower`]), the
//! [`verify`]er, the [`print`](mod@print)er and the [`pass`] manager.
//!
//! ```
//! let reg = efir_ir::Registry::new();
//! let (m, diags) = efir_ir::parse_and_verify("func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}\n", &reg);
//! assert!(diags.is_empty());
//! assert_eq!(m.funcs[0].name, "f");
//! ```

pub mod accum;
pub mod attr;
pub mod dialect;
pub mod input;
pub mod lower;
pub mod module;
pub mod pass;
pub mod print;
pub mod shape;
pub mod types;
pub mod verify;

pub use attr::Attr;
pub use dialect::{DialectDef, InferCtx, OpDef, Registry};
pub use module::{Func, Module, Op, ValueId};
pub use print::{print_module, PrintOptions};
pub use types::{AxisState, DType, Dim, State, TensorType, Type};

use efir_diagnostics::Diag;

/// Parse, build and verify a module. Syntax errors stop before building;
/// otherwise every error of building and verification is returned.
pub fn parse_and_verify(src: &str, registry: &Registry) -> (Module, Vec<Diag>) {
    let (ast, diags) = efir_syntax::parse(src);
    if !diags.is_empty() {
        return (Module::default(), diags);
    }
    let (m, mut diags) = lower::build_module(&ast, registry);
    // Ops that failed to build are not in the module, so verification does
    // not repeat their errors; a `return` that failed to build is not
    // checked against the signature either.
    let bad_returns: Vec<efir_diagnostics::Span> = m
        .funcs
        .iter()
        .map(|f| f.return_span)
        .filter(|r| {
            diags
                .iter()
                .any(|d| d.span.start >= r.start && d.span.end <= r.end)
        })
        .collect();
    diags.extend(
        verify::verify(&m, registry).into_iter().filter(|d| {
            !(d.code == efir_diagnostics::codes::E0206 && bad_returns.contains(&d.span))
        }),
    );
    diags.sort_by_key(|d| d.span.start);
    (m, diags)
}
