//! The candidates as functions (IR built directly, with kernel count and
//! materialized bytes), and the module they are put together in.

use crate::convert::{to_func, Graph};
use efir_diagnostics::Span;
use efir_ir::pass::{PassContext, PassFailed};
use efir_ir::{Attr, Func, Module};
use egg::{Id, SymbolLang};
use std::collections::HashMap;

/// The function of each candidate of `g` (in order), built by up to
/// `threads` threads (each builds every `threads`-th one); they carry
/// `span` (the source function's).
pub fn candidate_funcs(
    g: &Graph,
    span: Span,
    candidates: &[HashMap<Id, SymbolLang>],
    threads: usize,
) -> Result<Vec<Func>, String> {
    let n = candidates.len();
    let workers = threads.clamp(1, n.max(1));
    let build = |w: usize| -> Result<Vec<(usize, Func)>, String> {
        (w..n)
            .step_by(workers)
            .map(|i| candidate_func(g, span, &candidates[i], i).map(|f| (i, f)))
            .collect()
    };
    let parts: Vec<Result<Vec<(usize, Func)>, String>> = if workers == 1 {
        vec![build(0)]
    } else {
        std::thread::scope(|scope| {
            let hs: Vec<_> = (0..workers)
                .map(|w| scope.spawn(move || build(w)))
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        })
    };
    let mut funcs: Vec<Option<Func>> = (0..n).map(|_| None).collect();
    for part in parts {
        for (i, f) in part? {
            funcs[i] = Some(f);
        }
    }
    Ok(funcs.into_iter().flatten().collect())
}

/// Candidate `i` of `g`: the function `@<name>.c<i>` with the e-nodes
/// `chosen`, and its attributes `kernels`, `materialized_bytes` and
/// `source`.
pub fn candidate_func(
    g: &Graph,
    span: Span,
    chosen: &HashMap<Id, SymbolLang>,
    i: usize,
) -> Result<Func, String> {
    let name = format!("{}.c{i}", g.name);
    let mut f = to_func(g, &name, span, &|c| chosen[&g.egraph.find(c)].clone())?;
    let (kernels, bytes) = summary(&f);
    let count = |n: u64| Attr::Int(i64::try_from(n).unwrap_or(i64::MAX));
    f.attrs.insert("kernels".into(), count(kernels as u64));
    f.attrs
        .insert("materialized_bytes".into(), count(bytes as u64));
    f.attrs
        .insert("source".into(), Attr::Symbol(g.name.clone()));
    Ok(f)
}

/// The module of the candidates: the reducer functions kept (`lambdas`),
/// the candidate functions (in order) and the library functions they use
/// (`library`), by [`crate::saturate::module_of`]: verified once, by the
/// pass manager after the pass; two functions of one name are `E0207` on
/// `cx` ("in the candidates: ..."), a bug of the pass.
pub fn candidate_module(
    lambdas: Vec<Func>,
    candidates: Vec<Func>,
    library: Vec<Func>,
    cx: &mut PassContext<'_>,
) -> Result<Module, PassFailed> {
    crate::saturate::module_of(lambdas, candidates, library, "in the candidates", cx)
}

/// Kernel count and materialized bytes of a candidate function `f`, as the
/// lowering's base plan cuts it (`efir_triton::base_plan`, the plan without
/// fused row statistics): [`efir_buffers::cut`], the rules the lowering
/// uses, so that the two agree. Every value that lives in global memory,
/// other than a parameter, is written by one kernel. Bytes count the
/// buffers that are not results.
pub fn summary(f: &Func) -> (usize, f64) {
    let cut = efir_buffers::cut(f, false);
    let bytes = f
        .ops
        .iter()
        .map(|op| op.result)
        .filter(|v| cut.buffer[v.index()] && !f.returns.contains(v))
        .map(|v| crate::extract::bytes(f.ty(v)))
        .sum();
    (cut.kernels(), bytes)
}
