//! Flash-decoding twins of candidates: a candidate whose online-softmax
//! loop (`par.reduce` of a repaired reducer) would run fewer programs than
//! the GPU has SMs over a long key dim gets a second version in which that
//! loop is rule `split.collect-repair-states` applied: the partial states of
//! the key blocks stored (`par.collect`, one block per program) and merged
//! by the reducer's parallel combine written as IR, in a kernel after.
//!
//! The twin is built from the candidate's IR rather than enumerated from the
//! e-graph: with that rule's e-classes in the e-graph, a limited enumeration
//! finds other candidates first (attention decode at batch 1 lost the one
//! measured fastest on the H200 from its first 64, and the first programs
//! with merged states computed some fields by the merge and the others by
//! a loop). Each twin is the candidate with one rewrite applied at each
//! such loop, whose meaning `crates/registry/tests/rules.rs` checks; it is
//! appended after the enumerated candidates, at most one per candidate.

use crate::rules::storage::{exp_repair_fields, few_rows_long_loop};
use efir_ir::{Attr, AxisState, Dim, Func, Op, TensorType, Type, ValueId};
use indexmap::IndexMap;

/// The twin of `f` named `name`, or `None` where `f` has no loop to split.
pub fn split_states(f: &Func, name: &str) -> Option<Func> {
    let mut out = f.clone();
    out.name = name.to_string();
    let mut ops: Vec<Op> = Vec::with_capacity(f.ops.len() + 16);
    let mut split = false;
    for op in &f.ops {
        match splittable(f, op) {
            Some((axis, fields)) => {
                merge(&mut out, &mut ops, op, &axis, &fields);
                split = true;
            }
            None => ops.push(op.clone()),
        }
    }
    out.ops = ops;
    split.then_some(out)
}

/// The axis and field types of a loop that the twin splits.
fn splittable(f: &Func, op: &Op) -> Option<(String, Vec<TensorType>)> {
    if op.name != "par.reduce" {
        return None;
    }
    let axis = op.attrs.get("axis")?.as_symbol()?.to_string();
    let sums = exp_repair_fields(op.attrs.get("reducer")?)?;
    let Type::Tuple(fields) = f.ty(op.result) else {
        return None;
    };
    let fields: Vec<TensorType> = fields
        .iter()
        .map(|t| t.as_tensor().cloned())
        .collect::<Option<_>>()?;
    let first = fields.first()?;
    let plain =
        |t: &TensorType| t.state.is_empty() && t.shape == first.shape && t.dtype == first.dtype;
    let operand_ok =
        f.ty(*op.operands.first()?).leaves().iter().all(|t| {
            t.state.len() == 1 && matches!(t.state.get(&axis), Some(AxisState::Partial(_)))
        });
    (fields.len() == 1 + sums
        && first.dtype.is_float()
        && operand_ok
        && fields.iter().all(plain)
        && few_rows_long_loop(first, &axis))
    .then_some((axis, fields))
}

/// New ops of a twin, in order, with values named after the loop's.
struct Builder<'a> {
    out: &'a mut Func,
    ops: &'a mut Vec<Op>,
    span: efir_diagnostics::Span,
    base: String,
}

impl Builder<'_> {
    /// Append the op of `step` over `operands`; its value.
    fn emit(
        &mut self,
        step: &str,
        operands: Vec<ValueId>,
        attrs: &[(&str, Attr)],
        ty: Type,
    ) -> ValueId {
        let span = self.span;
        let v = self
            .out
            .add_value(&format!("{}_{step}", self.base), ty, span);
        let attrs: IndexMap<String, Attr> = attrs
            .iter()
            .map(|(k, a)| (k.to_string(), a.clone()))
            .collect();
        self.ops.push(Op {
            name: name_of(step).to_string(),
            operand_spans: vec![span; operands.len()],
            attr_spans: attrs.keys().map(|k| (k.clone(), span)).collect(),
            operands,
            attrs,
            result: v,
            span,
        });
        v
    }
}

/// Append to `ops` the merge that replaces `op` (its result keeps its
/// value, now defined by a `tensor.tuple`).
fn merge(out: &mut Func, ops: &mut Vec<Op>, op: &Op, axis: &str, fields: &[TensorType]) {
    let dt = fields[0].dtype;
    let shape = &fields[0].shape;
    let mut collected_shape = vec![Dim::Axis(axis.to_string())];
    collected_shape.extend(shape.iter().cloned());
    let mut one_shape = vec![Dim::Static(1)];
    one_shape.extend(shape.iter().cloned());
    let tensor = |dt, shape: Vec<Dim>| Type::Tensor(TensorType::new(dt, shape));
    let collected = tensor(dt, collected_shape.clone());
    let whole = tensor(dt, shape.clone());
    let reduce = |r: &str| {
        [
            ("reducer", Attr::Term(r.to_string(), vec![])),
            ("dim", Attr::Int(0)),
        ]
    };
    let base = out.value(op.result).name.clone();
    let mut b = Builder {
        out,
        ops,
        span: op.span,
        base,
    };
    let c = b.emit(
        "collect",
        vec![op.operands[0]],
        &[("axis", Attr::Symbol(axis.to_string()))],
        Type::Tuple(vec![collected.clone(); fields.len()]),
    );
    let field = |b: &mut Builder<'_>, i: usize| {
        b.emit(
            "get",
            vec![c],
            &[("index", Attr::Int(i as i64))],
            collected.clone(),
        )
    };
    let m_c = field(&mut b, 0);
    let m = b.emit("max", vec![m_c], &reduce("red.max"), whole.clone());
    let m1 = b.emit("reshape", vec![m], &[], tensor(dt, one_shape));
    let one = b.emit(
        "full",
        vec![],
        &[("value", Attr::Float(1.0))],
        tensor(dt, vec![]),
    );
    let same = b.emit(
        "cmp",
        vec![m_c, m1],
        &[("pred", Attr::Word("eq".into()))],
        tensor(efir_ir::DType::I1, collected_shape),
    );
    let d = b.emit("sub", vec![m_c, m1], &[], collected.clone());
    let x = b.emit("exp", vec![d], &[], collected.clone());
    let e = b.emit("select", vec![same, one, x], &[], collected.clone());
    let mut results = vec![m];
    for i in 1..fields.len() {
        let c_i = field(&mut b, i);
        let w = b.emit("mul", vec![c_i, e], &[], collected.clone());
        results.push(b.emit("sum", vec![w], &reduce("red.sum"), whole.clone()));
    }
    let span = op.span;
    b.ops.push(Op {
        name: "tensor.tuple".into(),
        operand_spans: vec![span; results.len()],
        attr_spans: IndexMap::new(),
        operands: results,
        attrs: IndexMap::new(),
        result: op.result,
        span,
    });
}

/// The op each step of [`merge`] writes.
fn name_of(step: &str) -> &'static str {
    match step {
        "collect" => "par.collect",
        "get" => "tensor.get",
        "max" | "sum" => "tensor.reduce",
        "reshape" => "tensor.reshape",
        "full" => "tensor.full",
        "cmp" => "ew.cmp",
        "sub" => "ew.sub",
        "exp" => "ew.exp",
        "select" => "ew.select",
        _ => "ew.mul",
    }
}
