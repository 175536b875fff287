//! Interpreter semantics of the `par` ops, on whole parallel values: tiles
//! are keyed by coordinates (one index per axis of the state, in name
//! order; replicated axes hold one copy at index 0).

use efir_interp::kernels::{concat, stack};
use efir_interp::{GlobalCtx, PTensor, PValue, Semantics, Tile};
use efir_ir::{AxisState, State, Type};
use std::collections::BTreeMap;

type R = Result<PValue, String>;

fn axis<'a>(cx: &'a GlobalCtx<'a>) -> Result<&'a str, String> {
    cx.op
        .attrs
        .get("axis")
        .and_then(|a| a.as_symbol())
        .ok_or_else(|| "missing axis".into())
}

fn dim(cx: &GlobalCtx<'_>) -> Result<usize, String> {
    Ok(cx
        .op
        .attrs
        .get("dim")
        .and_then(|a| a.as_int())
        .ok_or("missing dim")? as usize)
}

fn pos(state: &State, a: &str) -> usize {
    state.keys().position(|k| k == a).unwrap_or(0)
}

fn with(key: &[usize], at: usize, c: usize) -> Vec<usize> {
    let mut k = key.to_vec();
    k.insert(at, c);
    k
}

fn without(key: &[usize], at: usize) -> Vec<usize> {
    let mut k = key.to_vec();
    k.remove(at);
    k
}

/// Apply `f` to every tensor of a value, pairing it with the result type's
/// field.
fn map_fields(
    v: &PValue,
    t: &Type,
    f: &mut dyn FnMut(&PTensor, &State) -> Result<PTensor, String>,
) -> R {
    match (v, t) {
        (PValue::Tensor(x), Type::Tensor(tt)) => Ok(PValue::Tensor(f(x, &tt.state)?)),
        (PValue::Tuple(vs), Type::Tuple(ts)) => Ok(PValue::Tuple(
            vs.iter()
                .zip(ts)
                .map(|(v, t)| map_fields(v, t, f))
                .collect::<Result<_, _>>()?,
        )),
        _ => Err("value and type differ in structure".into()),
    }
}

fn partition(cx: &GlobalCtx<'_>, a: &[&PValue]) -> R {
    let (p, i) = (axis(cx)?, dim(cx)?);
    let size = cx.interp.tile_size(p)?;
    map_fields(a[0], cx.result, &mut |x, state| {
        let at = pos(state, p);
        let mut tiles = BTreeMap::new();
        for (key, t) in &x.tiles {
            let n = t.shape()[i];
            let e = n.div_ceil(size);
            cx.interp
                .set_extent(p, e, &format!("a dim of {n} in tiles of {size}"))?;
            for c in 0..e {
                let s = t.slice_axis(ndarray::Axis(i), (c * size..((c + 1) * size).min(n)).into());
                tiles.insert(with(key, at, c), s.to_owned());
            }
        }
        Ok(PTensor {
            dtype: x.dtype,
            state: state.clone(),
            tiles,
        })
    })
}

fn replicate(cx: &GlobalCtx<'_>, a: &[&PValue]) -> R {
    let p = axis(cx)?;
    map_fields(a[0], cx.result, &mut |x, state| {
        let at = pos(state, p);
        let tiles = x
            .tiles
            .iter()
            .map(|(k, t)| (with(k, at, 0), t.clone()))
            .collect();
        Ok(PTensor {
            dtype: x.dtype,
            state: state.clone(),
            tiles,
        })
    })
}

/// The tiles along one axis that share the rest of their coordinate.
type Group<'a> = (Vec<usize>, Vec<&'a Tile>);

/// Group the tiles of `x` by their key without axis `at`, in coordinate
/// order along it (`e` coordinates; replicated axes repeat their copy).
fn groups(x: &PTensor, at: usize, e: usize, repl: bool) -> Result<Vec<Group<'_>>, String> {
    let mut out = Vec::new();
    for key in x.tiles.keys().filter(|k| k[at] == 0) {
        let tiles = (0..e)
            .map(|c| {
                let k = if repl {
                    key.clone()
                } else {
                    with(&without(key, at), at, c)
                };
                x.tiles
                    .get(&k)
                    .ok_or_else(|| format!("missing tile at {k:?}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        out.push((without(key, at), tiles));
    }
    Ok(out)
}

fn combine(cx: &GlobalCtx<'_>, a: &[&PValue]) -> R {
    let (p, i) = (axis(cx)?, dim(cx)?);
    let e = cx.interp.extent(p)?;
    map_fields(a[0], cx.result, &mut |x, state| {
        let at = pos(&x.state, p);
        let mut tiles = BTreeMap::new();
        for (k, ts) in groups(x, at, e, false)? {
            tiles.insert(k, concat(&ts, i)?);
        }
        Ok(PTensor {
            dtype: x.dtype,
            state: state.clone(),
            tiles,
        })
    })
}

fn collect(cx: &GlobalCtx<'_>, a: &[&PValue]) -> R {
    let p = axis(cx)?;
    let e = cx.interp.extent(p)?;
    map_fields(a[0], cx.result, &mut |x, state| {
        let at = pos(&x.state, p);
        let repl = x.state.get(p) == Some(&AxisState::Repl);
        let mut tiles = BTreeMap::new();
        for (k, ts) in groups(x, at, e, repl)? {
            tiles.insert(k, stack(&ts)?);
        }
        Ok(PTensor {
            dtype: x.dtype,
            state: state.clone(),
            tiles,
        })
    })
}

fn leaves(v: &PValue) -> Vec<&PTensor> {
    match v {
        PValue::Tensor(t) => vec![t],
        PValue::Tuple(vs) => vs.iter().flat_map(leaves).collect(),
    }
}

fn reduce(cx: &GlobalCtx<'_>, a: &[&PValue]) -> R {
    let p = axis(cx)?;
    let r = cx.op.attrs.get("reducer").ok_or("missing reducer")?;
    let e = cx.interp.extent(p)?;
    let fields = leaves(a[0]);
    let x0 = fields.first().ok_or("empty tuple")?;
    let at = pos(&x0.state, p);
    let result_leaves = cx.result.leaves();
    let mut out: Vec<PTensor> = result_leaves.iter().map(|t| PTensor::empty(t)).collect();
    for key in x0.tiles.keys().filter(|k| k[at] == 0) {
        let base = without(key, at);
        let state_at = |c: usize| -> Result<Vec<Tile>, String> {
            let k = with(&base, at, c);
            fields
                .iter()
                .map(|f| {
                    f.tiles
                        .get(&k)
                        .cloned()
                        .ok_or_else(|| format!("missing tile at {k:?}"))
                })
                .collect()
        };
        let mut acc = state_at(0)?;
        for c in 1..e {
            acc = efir_dialect_red::eval::combine(r, &acc, &state_at(c)?, cx.interp)?;
        }
        for (o, t) in out.iter_mut().zip(acc) {
            o.tiles.insert(base.clone(), t);
        }
    }
    let mut it = out.into_iter();
    Ok(efir_interp::eval::rebuild(cx.result, &mut it))
}

/// The semantics of every `par` op.
pub static SEMANTICS: &[(&str, Semantics)] = &[
    ("par.partition", Semantics::Global(partition)),
    ("par.replicate", Semantics::Global(replicate)),
    ("par.combine", Semantics::Global(combine)),
    ("par.reduce", Semantics::Global(reduce)),
    ("par.collect", Semantics::Global(collect)),
];
