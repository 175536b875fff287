//! Array kernels the dialects' semantics share: numpy broadcasting maps,
//! batched matmul with f32 or f64 accumulation, and reductions along a dim.

use crate::value::{Precision, Tile};
use efir_ir::DType;
use ndarray::{Array2, ArrayD, Axis, IxDyn, Zip};

/// The numpy broadcast of several shapes.
pub fn broadcast_shape(shapes: &[&[usize]]) -> Result<Vec<usize>, String> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for s in shapes {
        let off = rank - s.len();
        for (j, &d) in s.iter().enumerate() {
            let o = &mut out[off + j];
            if d == 1 {
                continue;
            }
            if *o == 1 {
                *o = d;
            } else if *o != d {
                return Err(format!("local shapes {shapes:?} do not broadcast"));
            }
        }
    }
    Ok(out)
}

/// Apply `f` pointwise to one tile.
pub fn map1(a: &Tile, f: impl Fn(f64) -> f64) -> Tile {
    a.mapv(f)
}

/// Apply `f` pointwise to two broadcast tiles.
pub fn map2(a: &Tile, b: &Tile, f: impl Fn(f64, f64) -> f64) -> Result<Tile, String> {
    let shape = broadcast_shape(&[a.shape(), b.shape()])?;
    let av = a.broadcast(IxDyn(&shape)).ok_or("broadcast failed")?;
    let bv = b.broadcast(IxDyn(&shape)).ok_or("broadcast failed")?;
    Ok(Zip::from(&av).and(&bv).map_collect(|&x, &y| f(x, y)))
}

/// Apply `f` pointwise to three broadcast tiles.
pub fn map3(
    a: &Tile,
    b: &Tile,
    c: &Tile,
    f: impl Fn(f64, f64, f64) -> f64,
) -> Result<Tile, String> {
    let shape = broadcast_shape(&[a.shape(), b.shape(), c.shape()])?;
    let av = a.broadcast(IxDyn(&shape)).ok_or("broadcast failed")?;
    let bv = b.broadcast(IxDyn(&shape)).ok_or("broadcast failed")?;
    let cv = c.broadcast(IxDyn(&shape)).ok_or("broadcast failed")?;
    Ok(Zip::from(&av)
        .and(&bv)
        .and(&cv)
        .map_collect(|&x, &y, &z| f(x, y, z)))
}

/// Whether sums and products of this dtype accumulate in f32.
fn f32_accumulation(dt: DType, p: Precision) -> bool {
    p == Precision::Native && dt != DType::F64
}

/// `max` that propagates NaN, as PyTorch does.
pub fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// `min` that propagates NaN.
pub fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

/// Sum along `axis` (accumulating in f32 for non-f64 data at native
/// precision).
pub fn sum_axis(a: &Tile, axis: usize, dt: DType, p: Precision) -> Tile {
    if f32_accumulation(dt, p) {
        a.map_axis(Axis(axis), |lane| {
            lane.iter().fold(0f32, |s, &x| s + x as f32) as f64
        })
    } else {
        a.map_axis(Axis(axis), |lane| lane.iter().sum())
    }
}

/// Maximum along `axis` (-inf for an empty dim).
pub fn max_axis(a: &Tile, axis: usize) -> Tile {
    a.map_axis(Axis(axis), |lane| {
        lane.iter().fold(f64::NEG_INFINITY, |m, &x| nan_max(m, x))
    })
}

/// Batched matmul `[..., M, K] x [..., K, N]` with broadcast batch dims.
pub fn matmul(a: &Tile, b: &Tile, dt: DType, p: Precision) -> Result<Tile, String> {
    let (ra, rb) = (a.ndim(), b.ndim());
    if ra < 2 || rb < 2 {
        return Err("matmul operands need rank 2 or more".into());
    }
    let (m, k) = (a.shape()[ra - 2], a.shape()[ra - 1]);
    let (k2, n) = (b.shape()[rb - 2], b.shape()[rb - 1]);
    if k != k2 {
        return Err(format!(
            "local matmul contraction dims differ: {k} and {k2}"
        ));
    }
    let batch = broadcast_shape(&[&a.shape()[..ra - 2], &b.shape()[..rb - 2]])?;
    let mut ashape = batch.clone();
    ashape.extend([m, k]);
    let mut bshape = batch.clone();
    bshape.extend([k, n]);
    let av = a.broadcast(IxDyn(&ashape)).ok_or("broadcast failed")?;
    let bv = b.broadcast(IxDyn(&bshape)).ok_or("broadcast failed")?;
    let nb: usize = batch.iter().product();
    let a3 = av.to_shape((nb, m, k)).map_err(|e| e.to_string())?;
    let b3 = bv.to_shape((nb, k, n)).map_err(|e| e.to_string())?;
    let mut out = ndarray::Array3::<f64>::zeros((nb, m, n));
    let f32acc = f32_accumulation(dt, p);
    for i in 0..nb {
        let x = a3.index_axis(Axis(0), i);
        let y = b3.index_axis(Axis(0), i);
        let r: Array2<f64> = if f32acc {
            let x32 = x.mapv(|v| v as f32);
            let y32 = y.mapv(|v| v as f32);
            x32.dot(&y32).mapv(|v| v as f64)
        } else {
            x.dot(&y)
        };
        out.index_axis_mut(Axis(0), i).assign(&r);
    }
    let mut shape = batch;
    shape.extend([m, n]);
    out.into_shape_with_order(IxDyn(&shape))
        .map_err(|e| e.to_string())
}

/// Concatenate tiles along `axis`.
pub fn concat(tiles: &[&Tile], axis: usize) -> Result<Tile, String> {
    let views: Vec<_> = tiles.iter().map(|t| t.view()).collect();
    ndarray::concatenate(Axis(axis), &views).map_err(|e| e.to_string())
}

/// Stack equally shaped tiles along a new leading dim.
pub fn stack(tiles: &[&Tile]) -> Result<Tile, String> {
    let views: Vec<_> = tiles.iter().map(|t| t.view()).collect();
    ndarray::stack(Axis(0), &views).map_err(|e| e.to_string())
}

/// A tile of `shape` filled with `v`.
pub fn full(shape: &[usize], v: f64) -> Tile {
    ArrayD::from_elem(IxDyn(shape), v)
}
