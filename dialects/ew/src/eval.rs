//! Interpreter semantics of the `ew` ops: pointwise on local tiles with
//! numpy broadcasting; results are rounded to their dtype by the evaluator.

use efir_interp::kernels::{map1, map2, map3, nan_max, nan_min};
use efir_interp::{Local, LocalCtx, Semantics};

type R = Result<Local, String>;

fn un(a: &[Local], f: fn(f64) -> f64) -> R {
    Ok(Local::Tile(map1(a[0].tile()?, f)))
}

fn bin(a: &[Local], f: fn(f64, f64) -> f64) -> R {
    Ok(Local::Tile(map2(a[0].tile()?, a[1].tile()?, f)?))
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
    ("ew.add", Semantics::Local(|_, a| bin(a, |x, y| x + y))),
    ("ew.sub", Semantics::Local(|_, a| bin(a, |x, y| x - y))),
    ("ew.mul", Semantics::Local(|_, a| bin(a, |x, y| x * y))),
    ("ew.div", Semantics::Local(|_, a| bin(a, |x, y| x / y))),
    ("ew.max", Semantics::Local(|_, a| bin(a, nan_max))),
    ("ew.min", Semantics::Local(|_, a| bin(a, nan_min))),
    ("ew.pow", Semantics::Local(|_, a| bin(a, f64::powf))),
    ("ew.neg", Semantics::Local(|_, a| un(a, |x| -x))),
    ("ew.abs", Semantics::Local(|_, a| un(a, f64::abs))),
    ("ew.exp", Semantics::Local(|_, a| un(a, f64::exp))),
    ("ew.log", Semantics::Local(|_, a| un(a, f64::ln))),
    ("ew.sqrt", Semantics::Local(|_, a| un(a, f64::sqrt))),
    (
        "ew.rsqrt",
        Semantics::Local(|_, a| un(a, |x| 1.0 / x.sqrt())),
    ),
    ("ew.tanh", Semantics::Local(|_, a| un(a, f64::tanh))),
    (
        "ew.sigmoid",
        Semantics::Local(|_, a| un(a, |x| 1.0 / (1.0 + (-x).exp()))),
    ),
    ("ew.erf", Semantics::Local(|_, a| un(a, libm::erf))),
    ("ew.select", Semantics::Local(select)),
    ("ew.cmp", Semantics::Local(cmp)),
    // The evaluator rounds to the declared dtype (truncating for integers).
    ("ew.cast", Semantics::Local(|_, a| Ok(a[0].clone()))),
];
