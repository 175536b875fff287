//! Interpreter semantics of the `tensor` ops. Constants build their whole
//! logical value (the evaluator slices it); matmul, reduce, the views, slices
//! and concatenation act on local tiles; `tuple` and `get` act on whole values.

use efir_interp::kernels::{full, matmul};
use efir_interp::{GlobalCtx, Local, LocalCtx, PValue, Semantics};
use efir_ir::{DType, Type};
use ndarray::{ArrayD, IxDyn};

type R = Result<Local, String>;

fn result_dtype(cx: &LocalCtx<'_>) -> DType {
    cx.result
        .leaves()
        .first()
        .map(|t| t.dtype)
        .unwrap_or(DType::F32)
}

fn full_value(cx: &LocalCtx<'_>, _: &[Local]) -> R {
    let v = cx
        .op
        .attrs
        .get("value")
        .and_then(|a| a.as_f64())
        .ok_or("missing value")?;
    Ok(Local::Tile(full(&cx.result_shape()?, v)))
}

fn iota(cx: &LocalCtx<'_>, _: &[Local]) -> R {
    let dim = cx
        .op
        .attrs
        .get("dim")
        .and_then(|a| a.as_int())
        .ok_or("missing dim")? as usize;
    let shape = cx.result_shape()?;
    Ok(Local::Tile(ArrayD::from_shape_fn(IxDyn(&shape), |ix| {
        ix[dim] as f64
    })))
}

fn mm(cx: &LocalCtx<'_>, a: &[Local]) -> R {
    Ok(Local::Tile(matmul(
        a[0].tile()?,
        a[1].tile()?,
        result_dtype(cx),
        cx.precision(),
    )?))
}

fn reduce(cx: &LocalCtx<'_>, a: &[Local]) -> R {
    let r = cx.op.attrs.get("reducer").ok_or("missing reducer")?;
    let dim = cx
        .op
        .attrs
        .get("dim")
        .and_then(|a| a.as_int())
        .ok_or("missing dim")? as usize;
    let inputs = a[0].leaves();
    let dtypes: Vec<DType> = cx.operands[0].leaves().iter().map(|t| t.dtype).collect();
    let mut out = efir_dialect_red::eval::reduce_axis(r, &inputs, &dtypes, dim, cx.interp)?;
    Ok(if out.len() == 1 {
        Local::Tile(out.remove(0))
    } else {
        Local::Tuple(out.into_iter().map(Local::Tile).collect())
    })
}

fn local_target(cx: &LocalCtx<'_>) -> Result<Vec<usize>, String> {
    match cx.result {
        Type::Tensor(t) => cx.local_shape(&t.shape, &t.state),
        Type::Tuple(_) => Err("expected a tensor result".into()),
    }
}

fn reshape(cx: &LocalCtx<'_>, a: &[Local]) -> R {
    let t = a[0].tile()?;
    let shape = local_target(cx)?;
    let flat: Vec<f64> = t.iter().copied().collect();
    Ok(Local::Tile(
        ArrayD::from_shape_vec(IxDyn(&shape), flat).map_err(|e| e.to_string())?,
    ))
}

fn transpose(cx: &LocalCtx<'_>, a: &[Local]) -> R {
    let perm: Vec<usize> = cx
        .op
        .attrs
        .get("perm")
        .and_then(|p| p.as_int_array())
        .ok_or("missing perm")?
        .into_iter()
        .map(|p| p as usize)
        .collect();
    Ok(Local::Tile(
        a[0].tile()?
            .clone()
            .permuted_axes(IxDyn(&perm))
            .as_standard_layout()
            .into_owned(),
    ))
}

fn broadcast(cx: &LocalCtx<'_>, a: &[Local]) -> R {
    let shape = local_target(cx)?;
    let t = a[0].tile()?;
    let v = t
        .broadcast(IxDyn(&shape))
        .ok_or_else(|| format!("cannot broadcast {:?} to {shape:?}", t.shape()))?;
    Ok(Local::Tile(v.to_owned()))
}

/// The slice of the local tile: a dim kept whole stays whole (it may be a
/// partitioned dim, whose local extent is its tile's); the others are cut.
fn slice(cx: &LocalCtx<'_>, a: &[Local]) -> R {
    let bounds = crate::slices::slice_bounds(cx.op).ok_or("malformed slice bounds")?;
    let t = cx.operands[0]
        .as_tensor()
        .ok_or("`tensor.slice` of a tuple")?;
    let mut v = a[0].tile()?.view();
    for (k, b) in bounds.iter().enumerate() {
        let whole = matches!(t.shape.get(k), Some(efir_ir::Dim::Static(n)) if b.is_whole(*n));
        if whole {
            continue;
        }
        if b.stop as usize > v.shape()[k] {
            return Err(format!(
                "slice bound {} is past the local extent {} of dim {k}",
                b.stop,
                v.shape()[k]
            ));
        }
        v.slice_axis_inplace(
            ndarray::Axis(k),
            ndarray::Slice::new(b.start as isize, Some(b.stop as isize), b.step as isize),
        );
    }
    Ok(Local::Tile(v.to_owned()))
}

fn concat(cx: &LocalCtx<'_>, a: &[Local]) -> R {
    let dim = cx
        .op
        .attrs
        .get("dim")
        .and_then(|a| a.as_int())
        .ok_or("missing dim")? as usize;
    let tiles: Vec<&ArrayD<f64>> = a.iter().map(Local::tile).collect::<Result<_, _>>()?;
    Ok(Local::Tile(efir_interp::kernels::concat(&tiles, dim)?))
}

fn tuple(_: &GlobalCtx<'_>, a: &[&PValue]) -> Result<PValue, String> {
    Ok(PValue::Tuple(a.iter().map(|v| (*v).clone()).collect()))
}

fn get(cx: &GlobalCtx<'_>, a: &[&PValue]) -> Result<PValue, String> {
    let i = cx
        .op
        .attrs
        .get("index")
        .and_then(|a| a.as_int())
        .ok_or("missing index")? as usize;
    match a[0] {
        PValue::Tuple(vs) => vs
            .get(i)
            .cloned()
            .ok_or_else(|| "tuple index out of range".into()),
        PValue::Tensor(_) => Err("`tensor.get` of a tensor".into()),
    }
}

/// The semantics of every `tensor` op.
pub static SEMANTICS: &[(&str, Semantics)] = &[
    ("tensor.full", Semantics::Local(full_value)),
    ("tensor.iota", Semantics::Local(iota)),
    ("tensor.matmul", Semantics::Local(mm)),
    ("tensor.reduce", Semantics::Local(reduce)),
    ("tensor.reshape", Semantics::Local(reshape)),
    ("tensor.transpose", Semantics::Local(transpose)),
    ("tensor.broadcast", Semantics::Local(broadcast)),
    ("tensor.slice", Semantics::Local(slice)),
    ("tensor.concat", Semantics::Local(concat)),
    ("tensor.tuple", Semantics::Global(tuple)),
    ("tensor.get", Semantics::Global(get)),
];

/// The local matmul, shared with `tile.matmul`.
pub fn local_matmul(cx: &LocalCtx<'_>, a: &[Local]) -> R {
    mm(cx, a)
}
