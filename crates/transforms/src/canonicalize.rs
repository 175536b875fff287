//! `--canonicalize`: folds pointwise ops and views over splat constants
//! (`tensor.full`), removes common subexpressions, and removes dead values,
//! repeated until nothing changes.
//!
//! Folding evaluates in f64 and rounds to the result's element type (f16
//! and bf16 through the `half` crate); integer results that would overflow
//! or are not finite are left alone.

use efir_ir::pass::{Pass, PassContext, PassFailed, PassInfo, PassOptions};
use efir_ir::{Attr, AxisState, DType, Func, Module, Op, Type, ValueId};
use indexmap::IndexMap;
use serde_json::json;
use std::collections::HashMap;

/// Registration of `--canonicalize`.
pub const INFO: PassInfo = PassInfo {
    name: "canonicalize",
    summary: "Fold constants, eliminate common subexpressions and dead values",
    options: &[
        ("fold", "fold ops over splat constants (default true)"),
        ("cse", "eliminate common subexpressions (default true)"),
        ("dce", "remove values that are never used (default true)"),
    ],
    create: |o| {
        INFO.check_options(o)?;
        Ok(Box::new(Canonicalize {
            fold: o.get_bool("fold", true)?,
            cse: o.get_bool("cse", true)?,
            dce: o.get_bool("dce", true)?,
        }))
    },
};

/// The pass.
pub struct Canonicalize {
    fold: bool,
    cse: bool,
    dce: bool,
}

impl Canonicalize {
    /// With every part enabled.
    pub fn new() -> Canonicalize {
        Canonicalize {
            fold: true,
            cse: true,
            dce: true,
        }
    }

    /// From options.
    pub fn from_options(o: &PassOptions) -> Result<Box<dyn Pass>, String> {
        (INFO.create)(o)
    }
}

impl Default for Canonicalize {
    fn default() -> Self {
        Canonicalize::new()
    }
}

impl Pass for Canonicalize {
    fn name(&self) -> &'static str {
        "canonicalize"
    }

    fn run(&mut self, m: &mut Module, cx: &mut PassContext<'_>) -> Result<(), PassFailed> {
        let (mut folded, mut cse, mut dead, mut rounds) = (0, 0, 0, 0);
        // E-graph functions are not dataflow: their e-nodes are all live and
        // name each other by e-class id. They are left alone.
        for f in m
            .funcs
            .iter_mut()
            .filter(|f| !f.ops.iter().any(|o| o.dialect() == "egraph"))
        {
            loop {
                rounds += 1;
                let mut changed = 0;
                if self.fold {
                    let n = fold_constants(f, cx.registry);
                    folded += n;
                    changed += n;
                }
                if self.cse {
                    let n = eliminate_common(f);
                    cse += n;
                    changed += n;
                }
                if self.dce {
                    let n = eliminate_dead(f);
                    dead += n;
                    changed += n;
                }
                if changed == 0 {
                    break;
                }
            }
        }
        cx.stats.insert("folded".into(), json!(folded));
        cx.stats.insert("cse_removed".into(), json!(cse));
        cx.stats.insert("dead_removed".into(), json!(dead));
        cx.stats.insert("rounds".into(), json!(rounds));
        Ok(())
    }
}

/// Round `v` to what `dt` can hold, or `None` if it cannot hold it.
pub fn round_to(v: f64, dt: DType) -> Option<Attr> {
    match dt {
        DType::F64 => Some(Attr::Float(v)),
        DType::F32 => Some(Attr::Float(v as f32 as f64)),
        DType::F16 => Some(Attr::Float(half::f16::from_f64(v).to_f64())),
        DType::BF16 => Some(Attr::Float(half::bf16::from_f64(v).to_f64())),
        DType::I1 => v.is_finite().then_some(Attr::Int((v != 0.0) as i64)),
        DType::I32 => (v.is_finite() && v.fract() == 0.0 && v.abs() <= i32::MAX as f64)
            .then_some(Attr::Int(v as i64)),
        DType::I64 => (v.is_finite() && v.fract() == 0.0 && v.abs() < (1u64 << 53) as f64)
            .then_some(Attr::Int(v as i64)),
    }
}

fn splat_values(f: &Func) -> HashMap<ValueId, f64> {
    f.ops
        .iter()
        .filter(|op| op.name == "tensor.full")
        .filter_map(|op| {
            let dt = f.ty(op.result).as_tensor()?.dtype;
            let v = round_to(op.attrs.get("value")?.as_f64()?, dt)?.as_f64()?;
            Some((op.result, v))
        })
        .collect()
}

fn full_op(like: &Op, value: Attr) -> Op {
    let mut attrs = IndexMap::new();
    attrs.insert("value".to_string(), value);
    Op {
        name: "tensor.full".into(),
        operands: Vec::new(),
        attrs,
        result: like.result,
        span: like.span,
        operand_spans: Vec::new(),
        attr_spans: IndexMap::new(),
    }
}

fn fold_constants(f: &mut Func, registry: &efir_ir::Registry) -> usize {
    let mut n = 0;
    let mut splats = splat_values(f);
    for i in 0..f.ops.len() {
        let op = &f.ops[i];
        if op.operands.is_empty() {
            continue;
        }
        let Some(args) = op
            .operands
            .iter()
            .map(|v| splats.get(v).copied())
            .collect::<Option<Vec<f64>>>()
        else {
            continue;
        };
        let Type::Tensor(rt) = f.ty(op.result) else {
            continue;
        };
        if rt
            .state
            .values()
            .any(|s| matches!(s, AxisState::Partial(_)))
        {
            continue;
        }
        let value = match op.name.as_str() {
            "tensor.broadcast" | "tensor.reshape" | "tensor.transpose" | "tensor.slice" => {
                Some(args[0])
            }
            // Equal splats joined are the same splat (compared by bits, so
            // that a NaN splat stays a NaN splat and -0.0 stays apart).
            "tensor.concat" if args.iter().all(|a| a.to_bits() == args[0].to_bits()) => {
                Some(args[0])
            }
            _ => registry
                .op(&op.name)
                .and_then(|d| d.fold)
                .and_then(|fold| fold(&args, &op.attrs)),
        };
        if let Some(attr) = value.and_then(|v| round_to(v, rt.dtype)) {
            if let Some(v) = attr.as_f64() {
                splats.insert(op.result, v);
            }
            f.ops[i] = full_op(op, attr);
            n += 1;
        }
    }
    n
}

/// What makes two ops compute the same value: name, operands, attributes
/// (sorted by name) and result type.
type OpKey = (String, Vec<ValueId>, Vec<(String, Attr)>, Type);

fn eliminate_common(f: &mut Func) -> usize {
    let mut seen: HashMap<OpKey, ValueId> = HashMap::new();
    let mut n = 0;
    let mut i = 0;
    while i < f.ops.len() {
        let op = &f.ops[i];
        let mut attrs: Vec<(String, Attr)> = op
            .attrs
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        attrs.sort_by(|a, b| a.0.cmp(&b.0));
        let key = (
            op.name.clone(),
            op.operands.clone(),
            attrs,
            f.ty(op.result).clone(),
        );
        if let Some(&prev) = seen.get(&key) {
            let dup = op.result;
            f.ops.remove(i);
            f.replace_uses(dup, prev);
            n += 1;
        } else {
            seen.insert(key, op.result);
            i += 1;
        }
    }
    n
}

fn eliminate_dead(f: &mut Func) -> usize {
    let mut uses = f.use_counts();
    let mut n = 0;
    let mut i = f.ops.len();
    let mut keep = vec![true; f.ops.len()];
    while i > 0 {
        i -= 1;
        let op = &f.ops[i];
        if uses[op.result.index()] == 0 {
            keep[i] = false;
            n += 1;
            for v in &op.operands {
                uses[v.index()] -= 1;
            }
        }
    }
    let mut k = keep.into_iter();
    f.ops.retain(|_| k.next().unwrap_or(true));
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use efir_ir::pass::PassManager;
    use efir_ir::{parse_and_verify, print_module, PrintOptions, Registry};

    fn registry() -> Registry {
        let mut r = Registry::new();
        r.register(&efir_dialect_ew::DIALECT);
        r.register(&efir_dialect_tensor::DIALECT);
        r.register(&efir_dialect_red::DIALECT);
        r
    }

    fn canon(src: &str) -> String {
        let reg = registry();
        let (mut m, d) = parse_and_verify(src, &reg);
        assert!(d.is_empty(), "{d:?}");
        let mut pm = PassManager::new();
        pm.add(Box::new(Canonicalize::new()));
        let (_, res) = pm.run(&mut m, &reg);
        assert!(res.is_ok(), "{res:?}");
        print_module(&m, &reg, PrintOptions::default())
    }

    #[test]
    fn folds_rounds_and_removes_dead() {
        let out = canon(
            "func @f(%x: tensor<4xf16>) -> tensor<4xf16> {
  %a = tensor.full<0.1> : tensor<f16>
  %b = tensor.full<3.0> : tensor<f16>
  %c = ew.mul %a, %b : tensor<f16>
  %d = tensor.broadcast %c : tensor<4xf16>
  %e = ew.add %x, %d : tensor<4xf16>
  %dead = ew.exp %x : tensor<4xf16>
  return %e : tensor<4xf16>
}
",
        );
        // The constant 0.1 is an f16 first, and so is the product.
        let tenth = half::f16::from_f64(0.1).to_f64();
        let want = half::f16::from_f64(tenth * 3.0).to_f64();
        assert!(
            out.contains(&format!("%d = tensor.full<{want:?}> : tensor<4xf16>")),
            "{out}"
        );
        assert!(!out.contains("ew.exp"), "{out}");
        assert!(!out.contains("ew.mul"), "{out}");
    }

    #[test]
    fn cse_merges_identical_ops_only() {
        let out = canon(
            "func @f(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xi1>) {
  %a = ew.exp %x : tensor<4xf32>
  %b = ew.exp %x : tensor<4xf32>
  %s = ew.add %a, %b : tensor<4xf32>
  %l = ew.cmp<lt> %x, %s : tensor<4xi1>
  %g = ew.cmp<gt> %x, %s : tensor<4xi1>
  %o = ew.select %l, %s, %x : tensor<4xf32>
  return %o, %g : tensor<4xf32>, tensor<4xi1>
}
",
        );
        assert_eq!(out.matches("ew.exp").count(), 1, "{out}");
        assert!(out.contains("ew.add %a, %a"), "{out}");
        assert_eq!(out.matches("ew.cmp").count(), 2, "{out}");
    }

    #[test]
    fn integer_folding_respects_range() {
        assert_eq!(round_to(3.0, DType::I32), Some(Attr::Int(3)));
        assert_eq!(round_to(1e12, DType::I32), None);
        assert_eq!(round_to(f64::INFINITY, DType::I64), None);
        assert_eq!(round_to(2.0, DType::I1), Some(Attr::Int(1)));
        assert_eq!(round_to(0.5, DType::I32), None);
    }
}
