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

/// The ops whose semantics are not their scalar function applied element
/// by element.
const SPECIAL: &[(&str, Semantics)] = &[
    ("ew.select", Semantics::Local(select)),
    ("ew.cmp", Semantics::Local(cmp)),
    // The evaluator rounds to the declared dtype (truncating for integers).
    ("ew.cast", Semantics::Local(|_, a| Ok(a[0].clone()))),
];

/// Whether two names are equal (in a constant).
const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// The semantics of each op of the table `ops`: its entry in [`SPECIAL`],
/// else its scalar function element by element ([`pointwise`]).
const fn semantics<const N: usize>(ops: &[efir_ir::OpDef]) -> [(&'static str, Semantics); N] {
    let mut out = [("", Semantics::Local(pointwise)); N];
    let mut i = 0;
    while i < N {
        out[i].0 = ops[i].name;
        let mut j = 0;
        while j < SPECIAL.len() {
            if same(ops[i].name, SPECIAL[j].0) {
                out[i].1 = SPECIAL[j].1;
            }
            j += 1;
        }
        i += 1;
    }
    out
}

/// The semantics of every `ew` op, one per entry of the op table: a new
/// pointwise op is evaluated with its scalar function (its `fold`) without
/// an entry here.
pub static SEMANTICS: &[(&str, Semantics)] = &semantics::<{ crate::OPS.len() }>(crate::OPS);

#[cfg(test)]
mod tests {
    use super::{SEMANTICS, SPECIAL};

    #[test]
    fn every_op_has_semantics_and_every_special_one_is_an_op() {
        let names: Vec<&str> = SEMANTICS.iter().map(|s| s.0).collect();
        let ops: Vec<&str> = crate::OPS.iter().map(|o| o.name).collect();
        assert_eq!(names, ops);
        for (name, _) in SPECIAL {
            assert!(ops.contains(name), "`{name}` is not an `ew` op");
        }
    }
}
