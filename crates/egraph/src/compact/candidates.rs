//! The candidates as functions (IR built directly, with kernel count and
//! materialized bytes), and the module they are put together in.

use super::kinds::{pointwise, stateless};
use crate::analysis::EGraph;
use crate::convert::{node_operands, to_func, Graph};
use efir_diagnostics::{codes, Diag, Span};
use efir_ir::pass::{PassContext, PassFailed};
use efir_ir::{Attr, Func, Module};
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
    let (kernels, bytes) = summary(&g.egraph, chosen, &g.roots);
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
/// (`library`). It is verified once, by the pass manager after the pass
/// (which the verifier does not check: no two functions share a name, else
/// an error on `cx`, a bug of the pass).
pub fn candidate_module(
    lambdas: Vec<Func>,
    candidates: Vec<Func>,
    library: Vec<Func>,
    cx: &mut PassContext<'_>,
) -> Result<Module, PassFailed> {
    let mut m = Module::default();
    m.funcs.extend(lambdas);
    m.funcs.extend(candidates);
    m.funcs.extend(library);
    let mut names: HashSet<&str> = HashSet::new();
    let mut twice = false;
    for f in &m.funcs {
        if !names.insert(&f.name) {
            twice = true;
            cx.diags.push(
                Diag::error(
                    codes::E0207,
                    format!("in the candidates: function `@{}` is defined twice", f.name),
                    f.name_span,
                )
                .with_label("redefined here"),
            );
        }
    }
    if twice {
        return Err(PassFailed);
    }
    Ok(m)
}

/// Kernel count and materialized bytes of a candidate, as the lowering
/// plans it (`efir_triton::plan`): every value that lives in global memory,
/// other than a parameter, is written by one kernel. Those are the results,
/// `par.collect` buffers, values without parallel state made by a matmul, a
/// reduction or a combine, and pointwise values without parallel state that
/// a slice or concatenation reads (pointwise values are otherwise
/// recomputed by their readers). Bytes count the buffers that are not
/// results.
pub fn summary(eg: &EGraph, chosen: &HashMap<Id, SymbolLang>, roots: &[Id]) -> (usize, f64) {
    let roots: HashSet<Id> = roots.iter().map(|r| eg.find(*r)).collect();
    let mut sliced: HashSet<Id> = HashSet::new();
    for n in chosen.values() {
        if matches!(n.op.as_str(), "tensor.slice" | "tensor.concat") {
            sliced.extend(node_operands(eg, n).iter().map(|c| eg.find(*c)));
        }
    }
    let mut kernels = 0;
    let mut bytes = 0.0;
    let made = |c: Id, op: &str| {
        roots.contains(&c)
            || op == "par.collect"
            || (stateless(eg[c].data.ty())
                && matches!(
                    op,
                    "tile.matmul"
                        | "tensor.matmul"
                        | "tensor.reduce"
                        | "par.reduce"
                        | "par.combine"
                ))
    };
    let mut stored: HashSet<Id> = chosen
        .iter()
        .filter(|(c, n)| made(eg.find(**c), n.op.as_str()))
        .map(|(c, _)| eg.find(*c))
        .collect();
    // Epilogues fused into their one consumer kernel (as the lowering's
    // `epilogues` does).
    let mut users: HashMap<Id, Vec<Id>> = HashMap::new();
    for (c, n) in chosen {
        for o in node_operands(eg, n) {
            users.entry(eg.find(*o)).or_default().push(eg.find(*c));
        }
    }
    let shape_of = |c: Id| -> Option<Vec<efir_ir::Dim>> {
        let t = eg[c].data.ty()?;
        let ls = t.leaves();
        let s = ls.first()?.shape.clone();
        ls.iter()
            .all(|l| l.shape == s && l.state.is_empty())
            .then_some(s)
    };
    let node_of = |c: Id| {
        chosen.get(&c).or_else(|| {
            chosen
                .iter()
                .find(|(k, _)| eg.find(**k) == c)
                .map(|(_, n)| n)
        })
    };
    let mut fused: Vec<Id> = Vec::new();
    for &v in &stored {
        let Some(n) = node_of(v) else { continue };
        if roots.contains(&v)
            || !matches!(
                n.op.as_str(),
                "par.reduce" | "tensor.reduce" | "tile.matmul" | "tensor.matmul"
            )
        {
            continue;
        }
        let Some(shape) = shape_of(v) else { continue };
        let mut targets: HashSet<Id> = HashSet::new();
        let mut seen: HashSet<Id> = HashSet::new();
        let mut stack = vec![v];
        let mut ok = true;
        'walk: while let Some(x) = stack.pop() {
            if !seen.insert(x) {
                continue;
            }
            for &u in users.get(&x).map(Vec::as_slice).unwrap_or(&[]) {
                let Some(un) = node_of(u) else { continue };
                let op = un.op.as_str();
                if !(op.starts_with("ew.") || op == "tensor.get")
                    || shape_of(u).as_ref() != Some(&shape)
                {
                    ok = false;
                    break 'walk;
                }
                if stored.contains(&u) {
                    targets.insert(u);
                } else {
                    stack.push(u);
                }
            }
        }
        if ok && targets.len() == 1 {
            fused.push(v);
        }
    }
    for v in fused {
        stored.remove(&v);
    }
    for (c, n) in chosen {
        let c = eg.find(*c);
        let op = n.op.as_str();
        if op.starts_with("arg") || matches!(op, "tensor.full" | "tensor.iota") {
            continue;
        }
        let buffer = stored.contains(&c) || (pointwise(op) && sliced.contains(&c));
        if !buffer {
            continue;
        }
        kernels += 1;
        if !roots.contains(&c) {
            if let Some(t) = eg[c].data.ty() {
                bytes += crate::extract::bytes(t);
            }
        }
    }
    (kernels, bytes)
}
