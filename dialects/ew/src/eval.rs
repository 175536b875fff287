//! Interpreter semantics of the `ew` ops: pointwise on local tiles with
//! numpy broadcasting; results are rounded to their dtype by the evaluator.

use efir_interp::kernels::{map1, map2, map3};
use efir_interp::{Local, LocalCtx, Semantics};

type R = Result<Local, String>;

/// A pointwise op without attributes, element by element (with numpy
/// broadcasting): its scalar function is the op table's (the one
/// `--canonicalize` folds constants with), written once.
fn pointwise(cx: &LocalCtx<'_>, a: &[Local]) -> R {
    let fold = crate::OPS
        .iter()
        .find(|o| o.name == cx.op.name)
        .and_then(|o| o.fold)
        .ok_or_else(|| format!("`{}` has no scalar function", cx.op.name))?;
    let attrs = &cx.op.attrs;
    let tile = match a {
        [x] => map1(x.tile()?, |x| fold(&[x], attrs).unwrap_or(f64::NAN)),
        [x, y] => map2(x.tile()?, y.tile()?, |x, y| {
            fold(&[x, y], attrs).unwrap_or(f64::NAN)
        })?,
        _ => return Err(format!("`{}` takes one or two operands", cx.op.name)),
    };
    Ok(Local::Tile(tile))
}

fn cmp(cx: &LocalCtx<'_>, a: &[Local]) -> R {
    let pred: fn(f64, f64) -> bool = match cx.op.attrs.get("pred").and_then(|p| p.as_word()) {
        Some("lt") => |x, y| x < y,
        Some("le") => |x, y| x <= y,
        Some("gt") => |x, y| x > y,
        Some("ge") => |x, y| x >= y,
        Some("eq") => |x, y| x == y,
        Some("ne") => |x, y| x != y,
        other => return Err(format!("unknown predicate {other:?}")),
    };
    Ok(Local::Tile(map2(a[0].tile()?, a[1].tile()?, |x, y| {
        pred(x, y) as i64 as f64
    })?))
}

fn select(_: &LocalCtx<'_>, a: &[Local]) -> R {
    Ok(Local::Tile(map3(
        a[0].tile()?,
        a[1].tile()?,
        a[2].tile()?,
        |c, x, y| {
            if c != 0.0 {
                x
            } else {
                y
            }
        },
    )?))
}

/// The semantics of every `ew` op.
pub static SEMANTICS: &[(&str, Semantics)] = &[
    // The pointwise ops' scalar functions are their `fold`s in the op table.
    ("ew.add", Semantics::Local(pointwise)),
    ("ew.sub", Semantics::Local(pointwise)),
    ("ew.mul", Semantics::Local(pointwise)),
    ("ew.div", Semantics::Local(pointwise)),
    ("ew.max", Semantics::Local(pointwise)),
    ("ew.min", Semantics::Local(pointwise)),
    ("ew.pow", Semantics::Local(pointwise)),
    ("ew.neg", Semantics::Local(pointwise)),
    ("ew.abs", Semantics::Local(pointwise)),
    ("ew.exp", Semantics::Local(pointwise)),
    ("ew.log", Semantics::Local(pointwise)),
    ("ew.log1p", Semantics::Local(pointwise)),
    ("ew.sqrt", Semantics::Local(pointwise)),
    ("ew.rsqrt", Semantics::Local(pointwise)),
    ("ew.tanh", Semantics::Local(pointwise)),
    ("ew.sigmoid", Semantics::Local(pointwise)),
    ("ew.erf", Semantics::Local(pointwise)),
    ("ew.select", Semantics::Local(select)),
    ("ew.cmp", Semantics::Local(cmp)),
    // The evaluator rounds to the declared dtype (truncating for integers).
    ("ew.cast", Semantics::Local(|_, a| Ok(a[0].clone()))),
];
