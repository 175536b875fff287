//! The candidates as functions (IR built directly, with kernel count and
//! materialized bytes), and the module they are put together in.

use crate::convert::{to_func, Graph};
use efir_diagnostics::Span;
use efir_ir::pass::{PassContext, PassFailed};
use efir_ir::{Attr, Dim, Func, Module, ValueId};
use egg::{Id, SymbolLang};
use std::collections::{HashMap, HashSet};

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
/// fused row statistics; this mirrors its buffer rules): every value that
/// lives in global memory, other than a parameter, is written by one
/// kernel. Those are
/// - the results, `par.collect` buffers, and values without parallel state
///   made by a matmul, a reduction or a combine;
/// - less a reduction or matmul whose every use, down to exactly one of
///   those buffers, is a pointwise op of its own shape (an epilogue computed
///   by that buffer's kernel);
/// - plus what a slice, a concatenation or a reshape that splits or merges
///   dims reads from memory: its operand, reached through parallel views
///   (and, for a slice or concatenation, through slices, and transposes and
///   reshapes of static extents, whose index arithmetic the lowering
///   composes; for a reshape, through transposes and reshapes), stored
///   where that chain ends at a value computed by an op.
///
/// Bytes count the buffers that are not results.
pub fn summary(f: &Func) -> (usize, f64) {
    let n = f.values.len();
    let mut def = vec![None; n];
    for (i, op) in f.ops.iter().enumerate() {
        def[op.result.index()] = Some(i);
    }
    let stateless = |v: ValueId| f.ty(v).leaves().iter().all(|l| l.state.is_empty());
    let mut buffer = vec![false; n];
    for p in &f.params {
        buffer[p.index()] = true;
    }
    for r in &f.returns {
        buffer[r.index()] = true;
    }
    for op in &f.ops {
        let name = op.name.as_str();
        if name == "par.collect"
            || (stateless(op.result)
                && matches!(
                    name,
                    "par.combine"
                        | "par.reduce"
                        | "tensor.reduce"
                        | "tile.matmul"
                        | "tensor.matmul"
                ))
        {
            buffer[op.result.index()] = true;
        }
    }
    epilogues(f, &def, &mut buffer);
    for op in &f.ops {
        let reads_memory = match op.name.as_str() {
            "tensor.slice" | "tensor.concat" => true,
            "tensor.reshape" => splits_or_merges(f, op.operands[0], op.result),
            _ => false,
        };
        if !reads_memory {
            continue;
        }
        for o in &op.operands {
            let mut v = *o;
            while let Some(i) = def[v.index()] {
                if buffer[v.index()] {
                    break;
                }
                let d = &f.ops[i];
                let view = match d.name.as_str() {
                    "par.partition" | "par.replicate" | "par.combine" => true,
                    "tensor.slice" => op.name != "tensor.reshape",
                    "tensor.reshape" | "tensor.transpose" => {
                        op.name == "tensor.reshape"
                            || (all_static(f, v) && all_static(f, d.operands[0]))
                    }
                    _ => false,
                };
                if !view {
                    buffer[v.index()] = true;
                    break;
                }
                v = d.operands[0];
            }
        }
    }
    let mut kernels = 0;
    let mut bytes = 0.0;
    for op in &f.ops {
        let v = op.result;
        if !buffer[v.index()] {
            continue;
        }
        kernels += 1;
        if !f.returns.contains(&v) {
            bytes += crate::extract::bytes(f.ty(v));
        }
    }
    (kernels, bytes)
}

/// The lowering's epilogue fusion (without fused row statistics): a
/// reduction or matmul without parallel state whose every use, down to
/// exactly one buffer, is a pointwise op or a tuple field of its own shape
/// is computed by that buffer's kernel, not stored.
fn epilogues(f: &Func, def: &[Option<usize>], buffer: &mut [bool]) {
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); f.values.len()];
    for (i, op) in f.ops.iter().enumerate() {
        for o in &op.operands {
            users[o.index()].push(i);
        }
    }
    let shape_of = |v: ValueId| -> Option<Vec<Dim>> {
        let ls = f.ty(v).leaves();
        let s = ls.first()?.shape.clone();
        ls.iter()
            .all(|l| l.shape == s && l.state.is_empty())
            .then_some(s)
    };
    for op in &f.ops {
        let v = op.result;
        if !buffer[v.index()]
            || f.returns.contains(&v)
            || !matches!(
                op.name.as_str(),
                "par.reduce" | "tensor.reduce" | "tile.matmul" | "tensor.matmul"
            )
        {
            continue;
        }
        let Some(shape) = shape_of(v) else { continue };
        let mut targets: HashSet<ValueId> = HashSet::new();
        let mut seen: HashSet<ValueId> = HashSet::new();
        let mut stack = vec![v];
        let mut ok = true;
        'walk: while let Some(x) = stack.pop() {
            if !seen.insert(x) {
                continue;
            }
            for &u in &users[x.index()] {
                let uop = &f.ops[u];
                let y = uop.result;
                let pointwise = uop.name.starts_with("ew.") || uop.name == "tensor.get";
                if !pointwise || shape_of(y).as_ref() != Some(&shape) {
                    ok = false;
                    break 'walk;
                }
                if buffer[y.index()] {
                    targets.insert(y);
                } else {
                    stack.push(y);
                }
            }
        }
        if ok && targets.len() == 1 && def[v.index()].is_some() {
            buffer[v.index()] = false;
        }
    }
}

/// Whether every dim of `v` (a tensor) is static.
fn all_static(f: &Func, v: ValueId) -> bool {
    f.ty(v)
        .as_tensor()
        .is_some_and(|t| t.shape.iter().all(|d| matches!(d, Dim::Static(_))))
}

/// Whether reshaping `a` to `r` splits or merges dims (beyond adding or
/// dropping dims of extent 1).
fn splits_or_merges(f: &Func, a: ValueId, r: ValueId) -> bool {
    f.ty(a).non_unit_dims() != f.ty(r).non_unit_dims()
}
