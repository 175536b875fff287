//! Between functions and e-graphs: a function of value ops becomes an
//! e-graph with its roots ([`from_func`]); an e-graph becomes an `egraph`
//! dialect function ([`to_egraph_func`], as text [`to_egraph_text`]) and is
//! read back ([`from_egraph_func`]); and a chosen e-node per e-class becomes a
//! function of value ops again ([`to_func`], printed by [`to_func_text`]).

use crate::analysis::{arg_leaf, operand_count, Ctx, Data, EGraph, TypeAnalysis};
use crate::dialects::value_registry;
use efir_diagnostics::Span;
use efir_ir::dialect::Signatures;
use efir_ir::{Attr, Func, Module, Type, ValueId};
use egg::{Id, SymbolLang};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;
use std::sync::Arc;

/// A function's e-graph: the graph, its roots and the function's header.
pub struct Graph {
    /// The e-graph.
    pub egraph: EGraph,
    /// One e-class per returned value.
    pub roots: Vec<Id>,
    /// The function's name.
    pub name: String,
    /// Parameter names and types.
    pub params: Vec<(String, Type)>,
    /// Result types.
    pub results: Vec<Type>,
}
/// The signatures an e-graph's type analysis needs: the repair library's
/// and the module's. Computed once per module and shared by the e-graphs of
/// all its functions (per function, it made passes quadratic in the number
/// of functions).
pub fn graph_signatures(m: &Module) -> Arc<Signatures> {
    let mut sigs = crate::repairs::library_signatures().clone();
    sigs.extend(efir_ir::verify::signatures(m));
    Arc::new(sigs)
}

fn new_graph(f: &Func, sigs: Arc<Signatures>) -> Graph {
    let params: Vec<(String, Type)> = f
        .params
        .iter()
        .map(|p| (f.value(*p).name.clone(), f.ty(*p).clone()))
        .collect();
    let ctx = Arc::new(Ctx {
        registry: value_registry(),
        sigs,
        params: params.iter().map(|p| p.1.clone()).collect(),
    });
    Graph {
        egraph: EGraph::new(TypeAnalysis::new(ctx)),
        roots: Vec::new(),
        name: f.name.clone(),
        params,
        results: f.results.clone(),
    }
}

/// Add the attribute and declared-type leaves of an op to `children`.
fn attr_children(
    eg: &mut EGraph,
    op: &str,
    attrs: &indexmap::IndexMap<String, Attr>,
    declared: &Type,
    children: &mut Vec<Id>,
) -> Result<(), String> {
    let def = eg
        .analysis
        .ctx
        .registry
        .op(op)
        .ok_or_else(|| format!("`{op}` is not a value op"))?;
    for spec in def.attrs {
        let a = attrs
            .get(spec.name)
            .cloned()
            .ok_or_else(|| format!("`{op}` lacks attribute `{}`", spec.name))?;
        let leaf = eg.analysis.attr_leaf(a);
        children.push(eg.add(leaf));
    }
    if def.result_from_declared {
        let leaf = eg
            .analysis
            .attr_leaf(Attr::Type(Box::new(declared.clone())));
        children.push(eg.add(leaf));
    }
    Ok(())
}

/// The e-graph of a function of value ops.
pub fn from_func(f: &Func, m: &Module) -> Result<Graph, String> {
    from_func_in(f, graph_signatures(m))
}

/// [`from_func`] with the module's [`graph_signatures`].
pub fn from_func_in(f: &Func, sigs: Arc<Signatures>) -> Result<Graph, String> {
    let mut g = new_graph(f, sigs);
    let eg = &mut g.egraph;
    let mut ids: HashMap<efir_ir::ValueId, Id> = HashMap::new();
    for (i, p) in f.params.iter().enumerate() {
        ids.insert(*p, eg.add(arg_leaf(i)));
    }
    for op in &f.ops {
        let mut children: Vec<Id> = op.operands.iter().map(|v| ids[v]).collect();
        attr_children(eg, &op.name, &op.attrs, f.ty(op.result), &mut children)?;
        let id = eg.add(SymbolLang::new(op.name.as_str(), children));
        ids.insert(op.result, id);
    }
    g.roots = f.returns.iter().map(|v| ids[v]).collect();
    eg.rebuild();
    Ok(g)
}

/// The e-graph of an `egraph` dialect function.
pub fn from_egraph_func(f: &Func, m: &Module) -> Result<Graph, String> {
    from_egraph_func_in(f, graph_signatures(m))
}

/// [`from_egraph_func`] with the module's [`graph_signatures`].
pub fn from_egraph_func_in(f: &Func, sigs: Arc<Signatures>) -> Result<Graph, String> {
    let mut g = new_graph(f, sigs);
    let eg = &mut g.egraph;
    let mut classes: HashMap<i64, Id> = HashMap::new();
    let mut pending: Vec<&efir_ir::Op> = f.ops.iter().filter(|o| o.name == "egraph.node").collect();
    while !pending.is_empty() {
        let before = pending.len();
        let mut rest = Vec::new();
        for op in pending {
            let class = op.attrs.get("class").and_then(Attr::as_int).unwrap_or(-1);
            let kids = op
                .attrs
                .get("children")
                .and_then(Attr::as_int_array)
                .unwrap_or_default();
            let Some(mut children) = kids
                .iter()
                .map(|c| classes.get(c).copied())
                .collect::<Option<Vec<Id>>>()
            else {
                rest.push(op);
                continue;
            };
            let name = match op.attrs.get("op") {
                Some(Attr::Str(s)) => s.clone(),
                _ => return Err("`egraph.node` without op".into()),
            };
            let node = if name == "arg" {
                arg_leaf(op.attrs.get("param").and_then(Attr::as_int).unwrap_or(0) as usize)
            } else {
                let attrs = efir_dialect_egraph::op_attrs(&op.attrs);
                attr_children(eg, &name, &attrs, f.ty(op.result), &mut children)?;
                SymbolLang::new(name.as_str(), children)
            };
            let id = eg.add(node);
            match classes.get(&class) {
                Some(&c) => {
                    eg.union(c, id);
                }
                None => {
                    classes.insert(class, id);
                }
            }
        }
        if rest.len() == before {
            return Err(format!(
                "{} e-nodes cannot be built: their e-classes form a cycle without a base",
                rest.len()
            ));
        }
        pending = rest;
    }
    eg.rebuild();
    for op in f.ops.iter().filter(|o| o.name == "egraph.root") {
        let class = op.attrs.get("class").and_then(Attr::as_int).unwrap_or(-1);
        let id = classes
            .get(&class)
            .ok_or_else(|| format!("root e-class {class} does not exist"))?;
        g.roots.push(eg.find(*id));
    }
    Ok(g)
}

fn header(g: &Graph, name: &str) -> String {
    let ps: Vec<String> = g.params.iter().map(|(n, t)| format!("%{n}: {t}")).collect();
    let rs: Vec<String> = g.results.iter().map(|t| t.to_string()).collect();
    let res = match rs.len() {
        0 => String::new(),
        1 => format!(" -> {}", rs[0]),
        _ => format!(" -> ({})", rs.join(", ")),
    };
    format!("func @{name}({}){res} {{\n", ps.join(", "))
}

/// The op attributes of an e-node (its attribute children), by name.
pub fn node_attrs(eg: &EGraph, n: &SymbolLang) -> Vec<(String, Attr)> {
    let reg = &eg.analysis.ctx.registry;
    let Some(def) = reg.op(n.op.as_str()) else {
        return Vec::new();
    };
    let k = operand_count(reg, n.op.as_str(), n.children.len()).unwrap_or(0);
    def.attrs
        .iter()
        .zip(&n.children[k..])
        .filter_map(|(s, c)| match &eg[*c].data {
            Data::Attr(i) => Some((s.name.to_string(), eg.analysis.attrs[*i].clone())),
            _ => None,
        })
        .collect()
}

/// The operand children of an e-node.
pub fn node_operands<'a>(eg: &EGraph, n: &'a SymbolLang) -> &'a [Id] {
    let k = operand_count(&eg.analysis.ctx.registry, n.op.as_str(), n.children.len()).unwrap_or(0);
    &n.children[..k.min(n.children.len())]
}

fn attr_dict(attrs: &[(String, Attr)], extra: &str) -> String {
    let mut items: Vec<String> = attrs.iter().map(|(k, v)| format!("{k} = {v}")).collect();
    if !extra.is_empty() {
        items.insert(0, extra.to_string());
    }
    if items.is_empty() {
        String::new()
    } else {
        format!(" {{{}}}", items.join(", "))
    }
}

/// The e-graph as an `egraph` dialect function (e-classes renumbered
/// densely in id order; attribute e-classes are written inline).
pub fn to_egraph_text(g: &Graph) -> String {
    let eg = &g.egraph;
    let mut number: BTreeMap<Id, usize> = BTreeMap::new();
    let mut classes: Vec<_> = eg
        .classes()
        .filter(|c| matches!(c.data, Data::Value(_)))
        .collect();
    classes.sort_by_key(|c| c.id);
    for c in &classes {
        let n = number.len();
        number.insert(c.id, n);
    }
    let mut s = header(g, &g.name);
    let mut k = 0;
    for c in &classes {
        let Data::Value(ty) = &c.data else { continue };
        let mut nodes: Vec<&SymbolLang> = c.nodes.iter().collect();
        nodes.sort();
        for n in nodes {
            let cid = number[&c.id];
            if let Some(i) = n.op.as_str().strip_prefix("arg") {
                let _ = writeln!(
                    s,
                    "  %n{k} = egraph.node<{cid}, \"arg\", []> {{param = {i}}} : {ty}"
                );
            } else {
                let kids: Vec<String> = node_operands(eg, n)
                    .iter()
                    .map(|c| number[&eg.find(*c)].to_string())
                    .collect();
                let _ = writeln!(
                    s,
                    "  %n{k} = egraph.node<{cid}, \"{}\", [{}]>{} : {ty}",
                    n.op,
                    kids.join(", "),
                    attr_dict(&node_attrs(eg, n), "")
                );
            }
            k += 1;
        }
    }
    let mut rets = Vec::new();
    for (j, r) in g.roots.iter().enumerate() {
        let r = eg.find(*r);
        let ty = eg[r].data.ty().cloned().unwrap_or(Type::Tuple(Vec::new()));
        let _ = writeln!(s, "  %r{j} = egraph.root<{}> : {ty}", number[&r]);
        rets.push((format!("%r{j}"), ty.to_string()));
    }
    let names: Vec<&str> = rets.iter().map(|r| r.0.as_str()).collect();
    let tys: Vec<&str> = rets.iter().map(|r| r.1.as_str()).collect();
    if rets.is_empty() {
        s.push_str("  return\n}\n");
    } else {
        let _ = writeln!(s, "  return {} : {}\n}}", names.join(", "), tys.join(", "));
    }
    s
}

/// The e-graph as an `egraph` dialect function built as IR, the same
/// function that [`to_egraph_text`] writes (e-classes renumbered densely in
/// id order, e-nodes in order within a class, values `%n0`, `%n1`, ... and
/// `%r0`, ... for the roots, skipping parameter names); it, its ops and
/// values carry `span`.
pub fn to_egraph_func(g: &Graph, span: Span) -> Result<Func, String> {
    let eg = &g.egraph;
    let mut f = Func::new(&g.name);
    f.name_span = span;
    f.span = span;
    f.return_span = span;
    for (n, t) in &g.params {
        let p = f.push_value(n.clone(), t.clone(), span);
        f.params.push(p);
    }
    f.results = g.results.clone();
    f.result_spans = vec![span; g.results.len()];
    let taken: HashSet<&str> = g.params.iter().map(|(n, _)| n.as_str()).collect();
    let mut k = 0usize;
    let mut fresh = |prefix: &str| loop {
        let r = format!("{prefix}{k}");
        k += 1;
        if !taken.contains(r.as_str()) {
            break r;
        }
    };
    let mut number: BTreeMap<Id, i64> = BTreeMap::new();
    let mut classes: Vec<_> = eg
        .classes()
        .filter(|c| matches!(c.data, Data::Value(_)))
        .collect();
    classes.sort_by_key(|c| c.id);
    for c in &classes {
        let n = number.len() as i64;
        number.insert(c.id, n);
    }
    let class_of = |c: Id| {
        number
            .get(&eg.find(c))
            .copied()
            .ok_or_else(|| "an operand e-class without a value type".to_string())
    };
    for c in &classes {
        let Data::Value(ty) = &c.data else { continue };
        let mut nodes: Vec<&SymbolLang> = c.nodes.iter().collect();
        nodes.sort();
        for n in nodes {
            let mut attrs = indexmap::IndexMap::new();
            attrs.insert("class".to_string(), Attr::Int(number[&c.id]));
            if let Some(i) = n.op.as_str().strip_prefix("arg") {
                let i: i64 = i.parse().map_err(|_| "bad argument leaf".to_string())?;
                attrs.insert("op".into(), Attr::Str("arg".into()));
                attrs.insert("children".into(), Attr::Array(Vec::new()));
                attrs.insert("param".into(), Attr::Int(i));
            } else {
                let kids = node_operands(eg, n)
                    .iter()
                    .map(|c| class_of(*c).map(Attr::Int))
                    .collect::<Result<Vec<_>, _>>()?;
                attrs.insert("op".into(), Attr::Str(n.op.to_string()));
                attrs.insert("children".into(), Attr::Array(kids));
                attrs.extend(node_attrs(eg, n));
            }
            let result = fresh("n");
            f.push_op("egraph.node", Vec::new(), attrs, result, ty.clone(), span);
        }
    }
    let mut k = 0usize;
    for r in &g.roots {
        let r = eg.find(*r);
        let ty = eg[r].data.ty().cloned().unwrap_or(Type::Tuple(Vec::new()));
        let mut attrs = indexmap::IndexMap::new();
        attrs.insert("class".to_string(), Attr::Int(class_of(r)?));
        let result = loop {
            let name = format!("r{k}");
            k += 1;
            if !taken.contains(name.as_str()) {
                break name;
            }
        };
        let v = f.push_op("egraph.root", Vec::new(), attrs, result, ty, span);
        f.returns.push(v);
    }
    Ok(f)
}

/// A function of value ops built from one chosen e-node per e-class
/// (`choose(class)`), shared sub-terms emitted once, in the generic form:
/// [`to_func`] printed.
pub fn to_func_text(g: &Graph, choose: &dyn Fn(Id) -> SymbolLang) -> Result<String, String> {
    let f = to_func(g, &g.name, Span::default(), choose)?;
    let m = Module { funcs: vec![f] };
    Ok(efir_ir::print_module(
        &m,
        &g.egraph.analysis.ctx.registry,
        efir_ir::PrintOptions { generic: true },
    ))
}

/// The function `@name` of value ops built from one chosen e-node per
/// e-class (`choose(class)`), shared sub-terms built once, operands before
/// their users (depth first from the roots, first operand first). Its
/// values are the parameters of `g` and `%_0`, `%_1`, ... (skipping
/// parameter names); the function, its ops and values carry `span`.
pub fn to_func(
    g: &Graph,
    name: &str,
    span: Span,
    choose: &dyn Fn(Id) -> SymbolLang,
) -> Result<Func, String> {
    let eg = &g.egraph;
    let mut f = Func::new(name);
    f.name_span = span;
    f.span = span;
    f.return_span = span;
    for (n, t) in &g.params {
        let p = f.push_value(n.clone(), t.clone(), span);
        f.params.push(p);
    }
    f.results = g.results.clone();
    f.result_spans = vec![span; g.results.len()];
    let taken: HashSet<&str> = g.params.iter().map(|(n, _)| n.as_str()).collect();
    let mut values: HashMap<Id, ValueId> = HashMap::new();
    let mut k = 0;
    // Iterative post-order over the chosen e-nodes.
    let mut stack: Vec<(Id, bool)> = g.roots.iter().rev().map(|r| (eg.find(*r), false)).collect();
    let mut on_path: HashSet<Id> = HashSet::new();
    while let Some((c, expanded)) = stack.pop() {
        if values.contains_key(&c) {
            continue;
        }
        let n = choose(c);
        if let Some(i) = n.op.as_str().strip_prefix("arg") {
            let i: usize = i.parse().map_err(|_| "bad argument leaf".to_string())?;
            let p = f
                .params
                .get(i)
                .ok_or("an argument leaf past the parameters")?;
            values.insert(c, *p);
            continue;
        }
        let ops: Vec<Id> = node_operands(eg, &n).iter().map(|x| eg.find(*x)).collect();
        if !expanded {
            if !on_path.insert(c) {
                return Err("the chosen e-nodes form a cycle".into());
            }
            stack.push((c, true));
            for o in ops.iter().rev() {
                if !values.contains_key(o) {
                    stack.push((*o, false));
                }
            }
            continue;
        }
        on_path.remove(&c);
        let operands: Vec<ValueId> = ops
            .iter()
            .map(|o| values.get(o).copied().ok_or("operand not emitted"))
            .collect::<Result<_, _>>()?;
        let ty = eg[c].data.ty().ok_or("a value e-class without a type")?;
        let result = loop {
            let r = format!("_{k}");
            k += 1;
            if !taken.contains(r.as_str()) {
                break r;
            }
        };
        let attrs = node_attrs(eg, &n).into_iter().collect();
        let v = f.push_op(n.op.as_str(), operands, attrs, result, ty.clone(), span);
        values.insert(c, v);
    }
    f.returns = g.roots.iter().map(|r| values[&eg.find(*r)]).collect();
    Ok(f)
}

/// The e-classes that `f`'s returned values already have in the e-graph of
/// `g`, if every op of `f` is represented there (nothing is added); else the
/// first op that is not. This is how a derivation is checked: a hand-written
/// target program is in the saturated e-graph of its source exactly when its
/// returns are the roots.
pub fn lookup_func(g: &mut Graph, f: &Func) -> Result<Vec<Id>, String> {
    lookup_func_nodes(g, f).map(|(roots, _)| roots)
}

/// Like [`lookup_func`], and also the e-node each of `f`'s ops is, by e-class.
pub fn lookup_func_nodes(
    g: &mut Graph,
    f: &Func,
) -> Result<(Vec<Id>, HashMap<Id, SymbolLang>), String> {
    let mut nodes = HashMap::new();
    let eg = &mut g.egraph;
    let mut ids: HashMap<efir_ir::ValueId, Id> = HashMap::new();
    for (i, p) in f.params.iter().enumerate() {
        let id = eg
            .lookup(arg_leaf(i))
            .ok_or("a parameter is not in the e-graph")?;
        ids.insert(*p, id);
    }
    for op in &f.ops {
        let missing = || {
            format!(
                "`%{} = {}` is not in the e-graph",
                f.value(op.result).name,
                op.name
            )
        };
        let mut children: Vec<Id> = op.operands.iter().map(|v| ids[v]).collect();
        let def = eg.analysis.ctx.registry.op(&op.name).ok_or_else(missing)?;
        for spec in def.attrs {
            let a = op.attrs.get(spec.name).ok_or_else(missing)?.clone();
            let leaf = eg.analysis.attr_leaf(a);
            children.push(eg.lookup(leaf).ok_or_else(missing)?);
        }
        if def.result_from_declared {
            let leaf = eg
                .analysis
                .attr_leaf(Attr::Type(Box::new(f.ty(op.result).clone())));
            children.push(eg.lookup(leaf).ok_or_else(missing)?);
        }
        let n = SymbolLang::new(op.name.as_str(), children);
        let id = eg.lookup(n.clone()).ok_or_else(missing)?;
        nodes.insert(eg.find(id), n);
        ids.insert(op.result, id);
    }
    for (i, _) in f.params.iter().enumerate() {
        if let Some(id) = eg.lookup(arg_leaf(i)) {
            nodes.insert(eg.find(id), arg_leaf(i));
        }
    }
    Ok((f.returns.iter().map(|v| eg.find(ids[v])).collect(), nodes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `egraph` function built as IR prints as the text that
    /// [`to_egraph_text`] writes, for a saturated e-graph with e-classes of
    /// several e-nodes, attributes and library reducers.
    #[test]
    fn egraph_func_prints_as_egraph_text() {
        let reg = value_registry();
        let src = include_str!("../../../examples/small/attn_decode.efir");
        let (m, d) = efir_ir::parse_and_verify(src, &reg);
        assert!(d.is_empty(), "{d:?}");
        let g = from_func(&m.funcs[0], &m).unwrap();
        let (g, _, _) =
            crate::saturate::run_rules(g, crate::rules::DEFAULT_FAMILIES, 4, 5_000, 5.0);
        assert!(g.egraph.classes().any(|c| c.nodes.len() > 1));
        let f = to_egraph_func(&g, Span::default()).unwrap();
        let mut reg = reg;
        reg.register(&efir_dialect_egraph::DIALECT);
        let printed = efir_ir::print_module(
            &Module { funcs: vec![f] },
            &reg,
            efir_ir::PrintOptions::default(),
        );
        assert_eq!(printed, to_egraph_text(&g));
    }
}
