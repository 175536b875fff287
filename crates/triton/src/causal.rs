//! Causal tile skipping: which iterations of a parallel-reduction loop add
//! only the reducer's identity, so that the loop can stop early.
//!
//! A forward analysis over a program's values finds *element facts*: a value
//! that equals its index along one dim (`tensor.iota`), a causal mask
//! (`iota_i >= iota_j`), and a value that is a known constant wherever that
//! mask is false (`select(mask, x, -inf)`, then `exp` of it is 0, a matmul
//! operand that is 0 there, ...). In a loop over axis `L` tiling dim `j`
//! inside a program whose dim `i` is tiled by `G`, every element of a block
//! with `idx_j > idx_i` is masked once the `L` tile starts after the `G`
//! tile ends; if the loop body's reducer state for such a block is the
//! reducer's identity, those iterations (a suffix of the loop) change
//! nothing, and the loop runs only `cdiv((idx_G + 1) * BLOCK_G, BLOCK_L)`
//! iterations.
//!
//! Assumption, as in FlashAttention: the values the masked constant meets in
//! pointwise ops are finite (`-inf - m` is `-inf` for a finite row maximum
//! `m`, `0 * v` is 0 for finite `v`, `0 / l` is 0 for a nonzero finite `l`).
//! A causal row always keeps its diagonal, so its maximum and normalizer are
//! finite on finite inputs.

use crate::Extent;
use efir_dialect_red::{arity, repair_parts};
use efir_ir::dialect::Signatures;
use efir_ir::{Attr, Func, Module, Type};

/// What is known about every element of a value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Fact {
    /// Every element is this constant.
    Full(f64),
    /// Each element is its index along this dim.
    Iota(usize),
    /// Each element is `idx[i] >= idx[j]`.
    Mask { i: usize, j: usize },
    /// Each element with `idx[j] > idx[i]` is this constant.
    Const { c: f64, i: usize, j: usize },
}

fn extents(t: &Type) -> Vec<Extent> {
    t.leaves()
        .first()
        .map(|l| l.shape.iter().map(Extent::of).collect())
        .unwrap_or_default()
}

/// Move a fact's dims through a map from operand dims to result dims
/// (`None`: the dim is gone or broadcast, so index facts on it are lost).
fn remap(x: Fact, m: &dyn Fn(usize) -> Option<usize>) -> Option<Fact> {
    Some(match x {
        Fact::Full(c) => Fact::Full(c),
        Fact::Iota(d) => Fact::Iota(m(d)?),
        Fact::Mask { i, j } => Fact::Mask { i: m(i)?, j: m(j)? },
        Fact::Const { c, i, j } => Fact::Const {
            c,
            i: m(i)?,
            j: m(j)?,
        },
    })
}

/// A finite-or-infinite scalar result, `None` for NaN.
fn num(x: f64) -> Option<f64> {
    (!x.is_nan()).then_some(x)
}

/// A pointwise op on scalars (booleans as 0/1), where it is one of the ops
/// this analysis knows and the result is not NaN; `None` otherwise.
pub(crate) fn scalar_op(
    name: &str,
    attrs: &indexmap::IndexMap<String, Attr>,
    x: &[f64],
) -> Option<f64> {
    num(scalar_raw(name, attrs, x)?)
}

/// A pointwise op on scalars some of which are unknown (`None`: some finite
/// value): the result where the known ones decide it (`0 * x`, `-inf - x`,
/// a select with a known condition), `None` otherwise. NaN stays NaN.
pub(crate) fn abstract_op(
    name: &str,
    attrs: &indexmap::IndexMap<String, Attr>,
    x: &[Option<f64>],
) -> Option<f64> {
    if let Some(all) = x.iter().copied().collect::<Option<Vec<f64>>>() {
        return scalar_raw(name, attrs, &all);
    }
    let a = |i: usize| x.get(i).copied().flatten();
    match name {
        "ew.select" => {
            let c = a(0)?;
            x.get(if c != 0.0 { 1 } else { 2 }).copied().flatten()
        }
        "ew.mul" => [a(0), a(1)].into_iter().flatten().find(|c| *c == 0.0),
        "ew.div" => a(0).filter(|c| *c == 0.0),
        "ew.add" => [a(0), a(1)].into_iter().flatten().find(|c| c.is_infinite()),
        "ew.sub" => match (a(0), a(1)) {
            (Some(c), None) if c.is_infinite() => Some(c),
            (None, Some(c)) if c.is_infinite() => Some(-c),
            _ => None,
        },
        "ew.max" => [a(0), a(1)]
            .into_iter()
            .flatten()
            .find(|c| *c == f64::INFINITY),
        "ew.min" => [a(0), a(1)]
            .into_iter()
            .flatten()
            .find(|c| *c == f64::NEG_INFINITY),
        _ => None,
    }
}

/// [`scalar_op`], NaN included (a select may discard it).
fn scalar_raw(name: &str, attrs: &indexmap::IndexMap<String, Attr>, x: &[f64]) -> Option<f64> {
    let a = |i: usize| x.get(i).copied();
    Some(match name {
        "ew.add" => a(0)? + a(1)?,
        "ew.sub" => a(0)? - a(1)?,
        "ew.mul" => a(0)? * a(1)?,
        "ew.div" => a(0)? / a(1)?,
        "ew.max" => a(0)?.max(a(1)?),
        "ew.min" => a(0)?.min(a(1)?),
        "ew.neg" => -a(0)?,
        "ew.abs" => a(0)?.abs(),
        "ew.exp" => a(0)?.exp(),
        "ew.log" => a(0)?.ln(),
        "ew.sqrt" => a(0)?.sqrt(),
        "ew.select" => {
            if a(0)? != 0.0 {
                a(1)?
            } else {
                a(2)?
            }
        }
        "ew.cmp" => {
            let (p, q) = (a(0)?, a(1)?);
            let t = match attrs.get("pred").and_then(Attr::as_word)? {
                "lt" => p < q,
                "le" => p <= q,
                "gt" => p > q,
                "ge" => p >= q,
                "eq" => p == q,
                "ne" => p != q,
                _ => return None,
            };
            f64::from(u8::from(t))
        }
        _ => return None,
    })
}

/// A cast of a constant that every float type holds exactly.
pub(crate) fn cast_exact(c: f64) -> Option<f64> {
    (c == 0.0 || c.is_infinite() || c == 1.0).then_some(c)
}

/// The element facts of every value of `f` (indexed by value).
pub(crate) fn element_facts(f: &Func) -> Vec<Option<Fact>> {
    let mut facts: Vec<Option<Fact>> = vec![None; f.values.len()];
    for op in &f.ops {
        let get = |k: usize| op.operands.get(k).and_then(|v| facts[v.index()]);
        let er = extents(f.ty(op.result));
        let r = er.len();
        // Right-aligned broadcasting of operand `k` into the result.
        let bmap = |k: usize| {
            let ea = op
                .operands
                .get(k)
                .map(|v| extents(f.ty(*v)))
                .unwrap_or_default();
            let off = r.checked_sub(ea.len());
            let er = er.clone();
            move |d: usize| {
                let off = off?;
                (ea.get(d) == er.get(d + off)).then_some(d + off)
            }
        };
        let name = op.name.as_str();
        let fact = match name {
            "tensor.full" => op.attrs.get("value").and_then(Attr::as_f64).map(Fact::Full),
            "tensor.iota" => {
                let d = op.attrs.get("dim").and_then(Attr::as_int).unwrap_or(0);
                Some(Fact::Iota(d as usize))
            }
            "par.partition" | "par.replicate" | "par.combine" => {
                let m = bmap(0);
                get(0).and_then(|x| remap(x, &m))
            }
            "tensor.broadcast" => {
                let m = bmap(0);
                get(0).and_then(|x| remap(x, &m))
            }
            "tensor.transpose" => {
                let perm = op.attrs.get("perm").and_then(Attr::as_int_array);
                match (get(0), perm) {
                    (Some(x), Some(perm)) => {
                        remap(x, &|d| perm.iter().position(|p| *p as usize == d))
                    }
                    _ => None,
                }
            }
            "tensor.reshape" => {
                let ea = extents(f.ty(op.operands[0]));
                let nu_a: Vec<usize> = (0..ea.len()).filter(|j| ea[*j] != Extent::N(1)).collect();
                let nu_r: Vec<usize> = (0..r).filter(|j| er[*j] != Extent::N(1)).collect();
                let same = nu_a.len() == nu_r.len()
                    && nu_a.iter().zip(&nu_r).all(|(x, y)| ea[*x] == er[*y]);
                match get(0) {
                    Some(x) if same => {
                        remap(x, &|d| nu_a.iter().position(|a| *a == d).map(|k| nu_r[k]))
                    }
                    _ => None,
                }
            }
            "ew.cast" => match get(0) {
                Some(Fact::Full(c)) => cast_exact(c).map(Fact::Full),
                Some(Fact::Const { c, i, j }) => cast_exact(c).map(|c| Fact::Const { c, i, j }),
                Some(Fact::Iota(d)) => Some(Fact::Iota(d)),
                _ => None,
            },
            "ew.cmp" => {
                let pred = op.attrs.get("pred").and_then(Attr::as_word);
                let (ma, mb) = (bmap(0), bmap(1));
                match (get(0), get(1)) {
                    (Some(Fact::Iota(a)), Some(Fact::Iota(b))) => match (ma(a), mb(b), pred) {
                        (Some(a), Some(b), Some("ge")) if a != b => Some(Fact::Mask { i: a, j: b }),
                        (Some(a), Some(b), Some("le")) if a != b => Some(Fact::Mask { i: b, j: a }),
                        _ => None,
                    },
                    _ => None,
                }
            }
            "ew.select" => {
                let mask = get(0).and_then(|x| remap(x, &bmap(0)));
                let other = get(2).and_then(|x| remap(x, &bmap(2)));
                match (mask, other) {
                    (Some(Fact::Mask { i, j }), Some(Fact::Full(c))) => {
                        Some(Fact::Const { c, i, j })
                    }
                    (Some(Fact::Mask { i, j }), Some(Fact::Const { c, i: i2, j: j2 }))
                        if (i, j) == (i2, j2) =>
                    {
                        Some(Fact::Const { c, i, j })
                    }
                    _ => None,
                }
            }
            _ if name.starts_with("ew.") && op.operands.len() == 1 => match get(0) {
                Some(Fact::Full(c)) => scalar_op(name, &op.attrs, &[c]).map(Fact::Full),
                Some(Fact::Const { c, i, j }) => {
                    scalar_op(name, &op.attrs, &[c]).map(|c| Fact::Const { c, i, j })
                }
                _ => None,
            },
            "ew.add" | "ew.sub" | "ew.mul" | "ew.div" | "ew.max" | "ew.min" => {
                let x = get(0).and_then(|x| remap(x, &bmap(0)));
                let y = get(1).and_then(|y| remap(y, &bmap(1)));
                binary(name, &op.attrs, x, y)
            }
            _ => None,
        };
        facts[op.result.index()] = fact;
    }
    facts
}

/// A binary pointwise op where one operand is constant under a mask; the
/// other is assumed finite (see the module docs).
fn binary(
    name: &str,
    attrs: &indexmap::IndexMap<String, Attr>,
    x: Option<Fact>,
    y: Option<Fact>,
) -> Option<Fact> {
    use Fact::{Const, Full};
    // The mask both constants (if any) agree on, and each operand's value
    // where it is false.
    let mut ij = None;
    let mut val = |f: Option<Fact>| match f {
        Some(Full(c)) => Some(Some(c)),
        Some(Const { c, i, j }) => {
            if ij.is_some_and(|k| k != (i, j)) {
                return None;
            }
            ij = Some((i, j));
            Some(Some(c))
        }
        _ => Some(None),
    };
    let (a, b) = (val(x)?, val(y)?);
    let c = num(abstract_op(name, attrs, &[a, b])?)?;
    Some(match ij {
        Some((i, j)) => Const { c, i, j },
        None if a.is_some() && b.is_some() => Full(c),
        None => return None,
    })
}

/// Evaluate a pointwise function of the module (a reducer's repair
/// function) on scalars, where it only uses ops [`scalar_op`] knows.
fn eval_func(m: &Module, name: &str, args: &[Option<f64>]) -> Option<Vec<Option<f64>>> {
    let g = m.func(name)?;
    if g.params.len() != args.len() {
        return None;
    }
    let mut env: Vec<Option<f64>> = vec![None; g.values.len()];
    for (p, a) in g.params.iter().zip(args) {
        env[p.index()] = *a;
    }
    for op in &g.ops {
        let xs: Vec<Option<f64>> = op.operands.iter().map(|o| env[o.index()]).collect();
        env[op.result.index()] = match op.name.as_str() {
            "tensor.full" => Some(op.attrs.get("value").and_then(Attr::as_f64)?),
            "ew.cast" => xs[0],
            n if n.starts_with("ew.") => abstract_op(n, &op.attrs, &xs),
            _ => return None,
        };
    }
    // A NaN result would not be the value of a masked block.
    g.returns
        .iter()
        .map(|r| match env[r.index()] {
            Some(x) if x.is_nan() => None,
            x => Some(x),
        })
        .collect()
}

/// The state of reducer `r` over a non-empty block whose inputs are, one
/// per reducer input, all the same constant or unknown (`None`), where that
/// does not depend on the block's length: `None` states are unknown.
pub(crate) fn reduce_const(
    r: &Attr,
    xs: &[Option<f64>],
    m: &Module,
    sigs: &Signatures,
) -> Option<Vec<Option<f64>>> {
    let Attr::Term(name, args) = r else {
        return None;
    };
    match name.as_str() {
        "red.sum" => Some(vec![xs.first()?.filter(|c| *c == 0.0)]),
        "red.max" => Some(vec![*xs.first()?]),
        "red.prod" => {
            let mut out = Vec::new();
            let mut rest = xs;
            for (_, c) in args {
                let n = arity(c, sigs)?.inputs;
                if n > rest.len() {
                    return None;
                }
                let (h, t) = rest.split_at(n);
                out.extend(reduce_const(c, h, m, sigs)?);
                rest = t;
            }
            Some(out)
        }
        "red.repair" => {
            let (p, c, f, _) = repair_parts(args)?;
            let ip = arity(p, sigs)?.inputs;
            let s = reduce_const(p, xs.get(..ip)?, m, sigs)?;
            let fargs: Vec<Option<f64>> = xs.iter().chain(&s).copied().collect();
            let ys = eval_func(m, f, &fargs)?;
            let cs = reduce_const(c, &ys, m, sigs)?;
            Some(s.into_iter().chain(cs).collect())
        }
        _ => None,
    }
}
