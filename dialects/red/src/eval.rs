//! Interpreter semantics of reducers: reduction along a tensor dim and the
//! parallel combine of two states, for sums, maxima, products and repaired
//! reducers (whose `@f` and `@h` are called through the interpreter).
//!
//! A repair is skipped where the producer state did not change
//! (`h(c, s, s) = c` holds for every correct repair); this keeps fully
//! masked rows (`s = s' = -inf`) from turning into NaN.

use crate::{arity, repair_parts};
use efir_interp::kernels::{full, map2, max_axis, nan_max, sum_axis};
use efir_interp::{Interp, Tile};
use efir_ir::{Attr, DType};
use ndarray::Axis;

type R = Result<Vec<Tile>, String>;

/// A term's arguments: optional key and value.
type TermArgs = [(Option<String>, Attr)];

fn parts(r: &Attr) -> Result<(&str, &TermArgs), String> {
    match r {
        Attr::Term(n, a) => Ok((n.as_str(), a.as_slice())),
        other => Err(format!("`{other}` is not a reducer")),
    }
}

fn split_at<T: Clone>(v: &[T], n: usize) -> Result<(Vec<T>, Vec<T>), String> {
    if v.len() < n {
        return Err("too few fields for the reducer".into());
    }
    Ok((v[..n].to_vec(), v[n..].to_vec()))
}

/// The identity state of `r` for states of `shape`.
pub fn identity_state(r: &Attr, shape: &[usize]) -> R {
    let ids = crate::identity(r).ok_or_else(|| format!("reducer {r} has no identity"))?;
    Ok(ids.into_iter().map(|v| full(shape, v)).collect())
}

/// Merge two states of `r` (the parallel combine; also the update of sums,
/// maxima and their products, whose inputs are states).
pub fn combine(r: &Attr, a: &[Tile], b: &[Tile], it: &Interp<'_>) -> R {
    let (name, args) = parts(r)?;
    match name {
        "red.sum" => Ok(vec![map2(&a[0], &b[0], |x, y| x + y)?]),
        "red.max" => Ok(vec![map2(&a[0], &b[0], nan_max)?]),
        "red.prod" => {
            let mut out = Vec::new();
            let (mut ra, mut rb) = (a.to_vec(), b.to_vec());
            for (_, c) in args {
                let n = arity(c, it.signatures()).ok_or("malformed product")?.states;
                let (ha, ta) = split_at(&ra, n)?;
                let (hb, tb) = split_at(&rb, n)?;
                out.extend(combine(c, &ha, &hb, it)?);
                (ra, rb) = (ta, tb);
            }
            Ok(out)
        }
        "red.repair" => {
            let (p, c, _, h) = repair_parts(args).ok_or("malformed repair")?;
            let np = arity(p, it.signatures()).ok_or("malformed repair")?.states;
            let (s1, c1) = split_at(a, np)?;
            let (s2, c2) = split_at(b, np)?;
            let s = combine(p, &s1, &s2, it)?;
            let c1 = repair(h, &c1, &s1, &s, it)?;
            let c2 = repair(h, &c2, &s2, &s, it)?;
            let mut out = s;
            out.extend(combine(c, &c1, &c2, it)?);
            Ok(out)
        }
        other => Err(format!("unknown reducer `#{other}`")),
    }
}

/// `h(c, s, s')`, keeping `c` where the producer state did not change.
fn repair(h: &str, c: &[Tile], s: &[Tile], s1: &[Tile], it: &Interp<'_>) -> R {
    let mut args = c.to_vec();
    args.extend(s.iter().cloned());
    args.extend(s1.iter().cloned());
    let repaired = it.call(h, args)?;
    // same = every producer field unchanged.
    let mut same: Option<Tile> = None;
    for (x, y) in s.iter().zip(s1) {
        let eq = map2(x, y, |a, b| (a == b) as i64 as f64)?;
        same = Some(match same {
            None => eq,
            Some(m) => map2(&m, &eq, |a, b| a * b)?,
        });
    }
    let same = same.ok_or("a repair needs a producer state")?;
    repaired
        .iter()
        .zip(c)
        .map(|(r, c)| {
            efir_interp::kernels::map3(&same, c, r, |m, c, r| if m != 0.0 { c } else { r })
        })
        .collect()
}

/// Reduce dim `axis` of the input fields with `r`. `dtypes` are the input
/// dtypes (for the accumulation precision of sums).
pub fn reduce_axis(
    r: &Attr,
    inputs: &[&Tile],
    dtypes: &[DType],
    axis: usize,
    it: &Interp<'_>,
) -> R {
    let (name, args) = parts(r)?;
    let p = it.options().precision;
    match name {
        "red.sum" => Ok(vec![sum_axis(inputs[0], axis, dtypes[0], p)]),
        "red.max" => Ok(vec![max_axis(inputs[0], axis)]),
        "red.prod" => {
            let mut out = Vec::new();
            let mut k = 0;
            for (_, c) in args {
                let n = arity(c, it.signatures()).ok_or("malformed product")?.inputs;
                let ins = inputs
                    .get(k..k + n)
                    .ok_or("too few inputs for the product")?;
                let dts = dtypes
                    .get(k..k + n)
                    .ok_or("too few inputs for the product")?;
                out.extend(reduce_axis(c, ins, dts, axis, it)?);
                k += n;
            }
            Ok(out)
        }
        "red.repair" => {
            let (pr, cr, f, h) = repair_parts(args).ok_or("malformed repair")?;
            let sig = it.signatures();
            let (pa, ca) = (
                arity(pr, sig).ok_or("bad producer")?,
                arity(cr, sig).ok_or("bad consumer")?,
            );
            if pa.inputs != pa.states || ca.inputs != ca.states {
                return Err("the interpreter supports repaired reducers whose producer and consumer are sums, maxima or their products".into());
            }
            let mut shape = inputs[0].shape().to_vec();
            let n = shape.remove(axis);
            let mut s = identity_state(pr, &shape)?;
            let mut c = identity_state(cr, &shape)?;
            for k in 0..n {
                let xk: Vec<Tile> = inputs
                    .iter()
                    .map(|x| x.index_axis(Axis(axis), k).to_owned())
                    .collect();
                let s1 = combine(pr, &s, &xk[..pa.inputs], it)?;
                let mut fargs = xk.clone();
                fargs.extend(s1.iter().cloned());
                let y = it.call(f, fargs)?;
                let cr_state = repair(h, &c, &s, &s1, it)?;
                c = combine(cr, &cr_state, &y, it)?;
                s = s1;
            }
            s.extend(c);
            Ok(s)
        }
        other => Err(format!("unknown reducer `#{other}`")),
    }
}
