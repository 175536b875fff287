//! `--lower-to-kernels`: a candidate program to a kernel graph in the
//! `kernel` dialect, and back ([`flatten`]).
//!
//! Each kernel of the [`plan`](crate::plan()) becomes a function
//! `@<program>.k<i>` whose parameters are the buffers it reads, whose body is
//! the part of the program it computes (with its tiling in the parallel
//! states) and whose one result is the buffer it writes; its attributes name
//! the grid axes (`grid`, the axes the program tiles the result by; the
//! lowering to Triton adds one per untiled dim), the parallel reductions that
//! become loops (`loops`) and the value it writes (`writes`). The program
//! itself becomes the launches of its kernels in order
//! (`kernel.launch<@f.k0> %x, %w : type`).

use crate::{plan, reducer_functions};
use efir_diagnostics::{codes, Diag};
use efir_ir::pass::{Pass, PassContext, PassFailed, PassInfo};
use efir_ir::{Attr, Func, Module, Op, ValueId};
use indexmap::{IndexMap, IndexSet};
use std::collections::HashMap;

/// Registration of `--lower-to-kernels`.
pub const INFO: PassInfo = PassInfo {
    name: "lower-to-kernels",
    summary: "Outline each kernel of a candidate program into a function and launch them in order (kernel dialect)",
    options: &[],
    create: |o| {
        INFO.check_options(o)?;
        Ok(Box::new(LowerToKernels))
    },
};

/// The pass.
pub struct LowerToKernels;

/// Functions that `kernel.launch` ops of `m` call.
pub fn launched(m: &Module) -> IndexSet<String> {
    m.funcs
        .iter()
        .flat_map(|f| f.ops.iter())
        .filter(|op| op.name == "kernel.launch")
        .filter_map(|op| op.attrs.get("callee").and_then(Attr::as_symbol))
        .map(str::to_string)
        .collect()
}

fn copy_op(op: &Op, g: &mut Func, from: &Func, map: &mut HashMap<ValueId, ValueId>) -> ValueId {
    let r = g.add_value(
        &from.value(op.result).name,
        from.ty(op.result).clone(),
        from.value(op.result).span,
    );
    let mut o = op.clone();
    o.operands = op.operands.iter().map(|x| map[x]).collect();
    o.result = r;
    g.ops.push(o);
    map.insert(op.result, r);
    r
}

/// The kernel functions and the launcher of program `f`.
pub fn outline(m: &Module, f: &Func) -> Result<(Func, Vec<Func>), String> {
    let p = plan(m, f)?;
    let mut kernels = Vec::new();
    let mut launcher = Func::new(&f.name);
    launcher.attrs = f.attrs.clone();
    launcher.results = f.results.clone();
    let mut lmap: HashMap<ValueId, ValueId> = HashMap::new();
    for prm in &f.params {
        let v = f.value(*prm);
        let n = launcher.add_value(&v.name, v.ty.clone(), v.span);
        launcher.params.push(n);
        lmap.insert(*prm, n);
    }
    for k in &p.kernels {
        // The ops this kernel computes: back from its root to buffers.
        let mut need: IndexSet<usize> = IndexSet::new();
        let mut inputs: IndexSet<ValueId> = IndexSet::new();
        let mut stack = vec![k.root];
        while let Some(v) = stack.pop() {
            let Some(i) = p.def[v.index()] else {
                inputs.insert(v);
                continue;
            };
            if v != k.root && p.buffer[v.index()] {
                inputs.insert(v);
                continue;
            }
            if need.insert(i) {
                stack.extend(f.ops[i].operands.iter().rev().copied());
            }
        }
        let mut order: Vec<usize> = need.into_iter().collect();
        order.sort_unstable();
        // Buffers in the order the kernel first reads them.
        let mut ins: Vec<ValueId> = Vec::new();
        for i in &order {
            for o in &f.ops[*i].operands {
                if inputs.contains(o) && !ins.contains(o) {
                    ins.push(*o);
                }
            }
        }
        let mut g = Func::new(&format!("{}.k{}", f.name, k.index));
        let mut map: HashMap<ValueId, ValueId> = HashMap::new();
        for v in &ins {
            let info = f.value(*v);
            let n = g.add_value(&info.name, info.ty.clone(), info.span);
            g.params.push(n);
            map.insert(*v, n);
        }
        for i in &order {
            copy_op(&f.ops[*i], &mut g, f, &mut map);
        }
        g.results = vec![f.ty(k.root).clone()];
        g.returns = vec![map[&k.root]];
        let grid: Vec<String> = k.grid.iter().map(|(a, _)| format!("@{a}")).collect();
        let loops: Vec<String> = order
            .iter()
            .filter(|i| f.ops[**i].name == "par.reduce")
            .filter_map(|i| f.ops[*i].attrs.get("axis").and_then(Attr::as_symbol))
            .map(|a| format!("@{a}"))
            .collect();
        let mut attrs = IndexMap::new();
        attrs.insert("grid".to_string(), Attr::Str(grid.join(" ")));
        attrs.insert("loops".to_string(), Attr::Str(loops.join(" ")));
        attrs.insert(
            "writes".to_string(),
            Attr::Str(format!("%{}", f.value(k.root).name)),
        );
        g.attrs = attrs;
        // The launch.
        let r = launcher.add_value(
            &f.value(k.root).name,
            f.ty(k.root).clone(),
            f.value(k.root).span,
        );
        let mut op_attrs = IndexMap::new();
        op_attrs.insert("callee".to_string(), Attr::Symbol(g.name.clone()));
        launcher.ops.push(Op {
            name: "kernel.launch".into(),
            operands: ins.iter().map(|v| lmap[v]).collect(),
            attrs: op_attrs,
            result: r,
            span: f.ops[p.def[k.root.index()].ok_or("root without op")?].span,
            operand_spans: Vec::new(),
            attr_spans: IndexMap::new(),
        });
        lmap.insert(k.root, r);
        kernels.push(g);
    }
    launcher.returns = f.returns.iter().map(|r| lmap[r]).collect();
    Ok((launcher, kernels))
}

/// `m` with every launcher's kernels inlined back (the program each kernel
/// graph came from, up to value names) and the kernel functions dropped.
pub fn flatten(m: &Module) -> Result<Module, String> {
    let callees = launched(m);
    if callees.is_empty() {
        return Ok(m.clone());
    }
    let mut out = m.clone();
    out.funcs.retain(|f| !callees.contains(&f.name));
    for f in out.funcs.iter_mut() {
        if !f.ops.iter().any(|o| o.name == "kernel.launch") {
            continue;
        }
        let mut g = Func::new(&f.name);
        g.attrs = f.attrs.clone();
        g.results = f.results.clone();
        let mut map: HashMap<ValueId, ValueId> = HashMap::new();
        for prm in &f.params {
            let v = f.value(*prm);
            let n = g.add_value(&v.name, v.ty.clone(), v.span);
            g.params.push(n);
            map.insert(*prm, n);
        }
        for op in &f.ops {
            if op.name != "kernel.launch" {
                copy_op(op, &mut g, f, &mut map);
                continue;
            }
            let callee = op
                .attrs
                .get("callee")
                .and_then(Attr::as_symbol)
                .unwrap_or("");
            let k = m
                .func(callee)
                .ok_or_else(|| format!("no kernel `@{callee}`"))?;
            let mut kmap: HashMap<ValueId, ValueId> = HashMap::new();
            for (prm, a) in k.params.iter().zip(&op.operands) {
                kmap.insert(*prm, map[a]);
            }
            for kop in &k.ops {
                copy_op(kop, &mut g, k, &mut kmap);
            }
            let r = *k.returns.first().ok_or("a kernel without result")?;
            map.insert(op.result, kmap[&r]);
        }
        g.returns = f.returns.iter().map(|r| map[r]).collect();
        *f = g;
    }
    Ok(out)
}

impl Pass for LowerToKernels {
    fn name(&self) -> &'static str {
        "lower-to-kernels"
    }

    fn run(&mut self, m: &mut Module, cx: &mut PassContext<'_>) -> Result<(), PassFailed> {
        let skip: IndexSet<String> = reducer_functions(m)
            .into_iter()
            .chain(launched(m))
            .collect();
        let mut funcs = Vec::new();
        let mut failed = false;
        let mut kernels = 0;
        for f in &m.funcs {
            let program = !skip.contains(&f.name)
                && !f
                    .ops
                    .iter()
                    .any(|o| o.name.starts_with("egraph.") || o.name == "kernel.launch");
            if !program {
                funcs.push(f.clone());
                continue;
            }
            match outline(m, f) {
                Ok((launcher, ks)) => {
                    kernels += ks.len();
                    funcs.push(launcher);
                    funcs.extend(ks);
                }
                Err(e) => {
                    failed = true;
                    cx.diags.push(
                        Diag::error(
                            codes::E0801,
                            format!("cannot cut `@{}` into kernels: {e}", f.name),
                            f.name_span,
                        )
                        .with_label("this program"),
                    );
                }
            }
        }
        if failed {
            return Err(PassFailed);
        }
        m.funcs = funcs;
        cx.stats
            .insert("kernels".into(), serde_json::json!(kernels));
        Ok(())
    }
}
