//! Shapes, dtypes and literals: the extents of a value's leaves (a dim of
//! `|@a|` tiles is the tile count of `@a`), MLIR type and literal text.

use super::*;

pub(super) fn dtype_name(d: DType) -> &'static str {
    match d {
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::I1 => "i1",
        DType::I32 => "i32",
        DType::I64 => "i64",
    }
}

pub(super) fn is_float(d: DType) -> bool {
    matches!(d, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
}

pub(super) fn bits(d: DType) -> u32 {
    match d {
        DType::I1 => 1,
        DType::F16 | DType::BF16 => 16,
        DType::F32 | DType::I32 => 32,
        DType::F64 | DType::I64 => 64,
    }
}

/// The error for a symbolic extent (`|@dyn0|`, sized at run time): the
/// Python build takes it as a kernel argument; --to-ttir does not yet.
pub(super) fn symbolic(s: &str) -> String {
    format!("the symbolic extent |@{s}| (a size known at run time) is not supported by --to-ttir yet (the Python build, --to-triton, takes it)")
}

/// The number of tiles of axis `a` at its block. An axis over a dim of
/// `|@b|` tiles has the tile count of `@b` (at its block) as its extent.
pub(super) fn tiles(p: &Plan<'_>, a: &str) -> Result<u64, String> {
    let mut chain = vec![a];
    let mut a = a;
    // The extent of the innermost axis, then the tile counts outwards.
    let mut n = loop {
        let info = p.axes.get(a).ok_or_else(|| format!("unknown axis @{a}"))?;
        match &info.extent {
            efir_triton::Extent::N(e) => break *e,
            efir_triton::Extent::Tiles(b) => {
                if chain.contains(&b.as_str()) {
                    return Err(format!("axis @{a} over its own tile count"));
                }
                chain.push(b);
                a = b;
            }
            efir_triton::Extent::Sym(s) => return Err(symbolic(s)),
        }
    };
    for x in chain.iter().rev() {
        n = n.div_ceil(p.axes[*x].default.max(1));
    }
    Ok(n)
}

/// The extents (a dim of `|@a|` tiles is the tile count of `@a` at its
/// block) and dtype of each leaf of `t`.
pub(super) fn leaf_shapes(p: &Plan<'_>, t: &EType) -> Result<Vec<(Vec<u64>, DType)>, String> {
    let mut out = Vec::new();
    for l in t.leaves() {
        let mut s = Vec::new();
        for d in &l.shape {
            match d {
                Dim::Static(n) => s.push(*n),
                Dim::Axis(a) => s.push(tiles(p, a)?),
            }
        }
        out.push((s, l.dtype));
    }
    Ok(out)
}

pub(super) fn static_shape(p: &Plan<'_>, t: &EType) -> Result<(Vec<u64>, DType), String> {
    if t.as_tensor().is_none() {
        return Err("a tuple value where a tensor is needed".into());
    }
    leaf_shapes(p, t)?
        .pop()
        .ok_or_else(|| "a value without a tensor".into())
}

/// The combining op and identity of a leaf reducer on states of `dt`: f32
/// (float inputs accumulate in f32), or the integer type itself (an integer
/// reduction stays exact, with two's-complement wrap-around like the
/// interpreter's).
pub(super) fn leaf_reducer_on(name: &str, dt: DType) -> Option<(&'static str, f64)> {
    let (lo, hi) = match dt {
        DType::I32 => (i32::MIN as f64, i32::MAX as f64),
        DType::I64 => (i64::MIN as f64, i64::MAX as f64),
        _ => (f64::NEG_INFINITY, f64::INFINITY),
    };
    let int = matches!(dt, DType::I32 | DType::I64);
    match (name, int) {
        ("red.sum", false) => Some(("arith.addf", 0.0)),
        ("red.max", false) => Some(("arith.maxnumf", lo)),
        ("red.min", false) => Some(("arith.minnumf", hi)),
        ("red.sum", true) => Some(("arith.addi", 0.0)),
        ("red.max", true) => Some(("arith.maxsi", lo)),
        ("red.min", true) => Some(("arith.minsi", hi)),
        _ => None,
    }
}

/// The type a reduction of `dt` values keeps its states in: f32 for
/// floats, the type itself for i32 and i64 (`None` for i1).
pub(super) fn state_dtype(dt: DType) -> Option<DType> {
    match dt {
        DType::I32 | DType::I64 => Some(dt),
        DType::I1 => None,
        _ => Some(DType::F32),
    }
}

/// A float literal MLIR reads in type `d`.
pub(super) fn float_lit(x: f64, d: DType) -> String {
    if x.is_finite() {
        return format!("{x:.17e}");
    }
    let hex = match (d, x.is_nan(), x > 0.0) {
        (DType::F16, true, _) => "0x7E00",
        (DType::F16, _, true) => "0x7C00",
        (DType::F16, _, false) => "0xFC00",
        (DType::BF16, true, _) => "0x7FC0",
        (DType::BF16, _, true) => "0x7F80",
        (DType::BF16, _, false) => "0xFF80",
        (DType::F64, true, _) => "0x7FF8000000000000",
        (DType::F64, _, true) => "0x7FF0000000000000",
        (DType::F64, _, false) => "0xFFF0000000000000",
        (_, true, _) => "0x7FC00000",
        (_, _, true) => "0x7F800000",
        (_, _, false) => "0xFF800000",
    };
    hex.to_string()
}

pub(super) fn lit(x: f64, d: DType) -> String {
    if is_float(d) {
        float_lit(x, d)
    } else if d == DType::I1 {
        (if x != 0.0 { "true" } else { "false" }).into()
    } else {
        format!("{}", x as i64)
    }
}

pub(super) fn ty_text(shape: &[u64], elt: &str) -> String {
    if shape.is_empty() {
        elt.to_string()
    } else {
        let s: Vec<String> = shape.iter().map(|n| n.to_string()).collect();
        format!("tensor<{}x{elt}>", s.join("x"))
    }
}
