//! The candidates as functions: their text (with kernel count and
//! materialized bytes), and the module they are read back into.

use super::kinds::{pointwise, stateless};
use crate::analysis::EGraph;
use crate::convert::{node_operands, to_func_text, Graph};
use efir_diagnostics::Diag;
use efir_ir::pass::{PassContext, PassFailed};
use efir_ir::Module;
use egg::{Id, SymbolLang};
use std::collections::{HashMap, HashSet};

/// The text of each candidate of `g` (in order), written by up to
/// `threads` threads (each writes every `threads`-th one).
pub(super) fn candidate_texts(
    g: &Graph,
    candidates: &[HashMap<Id, SymbolLang>],
    threads: usize,
) -> Result<Vec<String>, String> {
    let n = candidates.len();
    let workers = threads.clamp(1, n.max(1));
    let write = |w: usize| -> Result<Vec<(usize, String)>, String> {
        (w..n)
            .step_by(workers)
            .map(|i| candidate_text(g, &candidates[i], i).map(|t| (i, t)))
            .collect()
    };
    let parts: Vec<Result<Vec<(usize, String)>, String>> = if workers == 1 {
        vec![write(0)]
    } else {
        std::thread::scope(|scope| {
            let hs: Vec<_> = (0..workers)
                .map(|w| scope.spawn(move || write(w)))
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        })
    };
    let mut texts: Vec<String> = vec![String::new(); n];
    for part in parts {
        for (i, t) in part? {
            texts[i] = t;
        }
    }
    Ok(texts)
}

/// The text of candidate `i` of `g`: the function `@<name>.c<i>` with the
/// e-nodes `chosen`, and its attributes.
pub(super) fn candidate_text(
    g: &Graph,
    chosen: &HashMap<Id, SymbolLang>,
    i: usize,
) -> Result<String, String> {
    let body = to_func_text(g, &|c| chosen[&g.egraph.find(c)].clone())?;
    let (kernels, bytes) = summary(&g.egraph, chosen, &g.roots);
    let name = format!("{}.c{i}", g.name);
    let body = body.replacen(&format!("func @{}(", g.name), &format!("func @{name}("), 1);
    let attrs = format!(
        " attributes {{kernels = {kernels}, materialized_bytes = {}, source = @{}}} {{",
        bytes as u64, g.name
    );
    Ok(match body.find(" {\n") {
        Some(i) => format!("{}{}{}", &body[..i], attrs, &body[i + 2..]),
        None => body,
    })
}

/// The module of the candidates: the reducer functions kept (`lambdas`,
/// their text), the candidate functions (`bodies`, in order) and the
/// library functions they use (`library`, their text, and their names),
/// parsed and verified like [`crate::saturate::replace_module`] does,
/// errors reported on `cx`. With `workers` above one, the candidates are
/// split into that many runs, and each is parsed and verified on its own
/// thread with the reducer and library functions it may refer to; the
/// functions are then put together in the same order as from one run.
pub fn parse_candidates(
    lambdas: &str,
    bodies: &[String],
    library: &str,
    library_names: &std::collections::BTreeSet<String>,
    workers: usize,
    cx: &mut PassContext<'_>,
) -> Result<Module, PassFailed> {
    let chunk_text = |run: &[String]| -> String {
        let mut t = lambdas.to_string();
        for b in run {
            if !t.is_empty() {
                t.push('\n');
            }
            t.push_str(b);
        }
        t.push_str(library);
        t
    };
    let workers = workers.clamp(1, bodies.len().max(1));
    let size = bodies.len().div_ceil(workers).max(1);
    let registry = cx.registry;
    let parsed: Vec<(Module, Vec<Diag>)> = if workers == 1 {
        vec![efir_ir::parse_and_verify(&chunk_text(bodies), registry)]
    } else {
        std::thread::scope(|scope| {
            let hs: Vec<_> = bodies
                .chunks(size)
                .map(|run| {
                    let text = chunk_text(run);
                    scope.spawn(move || efir_ir::parse_and_verify(&text, registry))
                })
                .collect();
            hs.into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        })
    };
    let mut out = Module::default();
    let mut library_funcs = Vec::new();
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    for run in parsed {
        let mut m = Module::default();
        crate::saturate::take_parsed(&mut m, run, "in the candidates", cx)?;
        // Each run's module is the reducer functions, its candidates, then
        // the library functions: each reducer and library function is kept
        // once, the library functions last.
        for f in m.funcs {
            if !seen.insert(f.name.clone()) {
                continue;
            }
            if library_names.contains(&f.name) {
                library_funcs.push(f);
            } else {
                out.funcs.push(f);
            }
        }
    }
    out.funcs.extend(library_funcs);
    Ok(out)
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
