//! Inputs and outputs: seeded random inputs for a function's parameters,
//! and `.npy` files (through `npyz`, which reads and writes f16 too).

use crate::value::{round_scalar, Tensor};
use efir_ir::{DType, Func, Type};
use ndarray::{ArrayD, IxDyn};
use npyz::WriterBuilder;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use std::path::Path;

/// How random inputs are drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Dist {
    /// Standard normal floats; integers uniform in 1..8.
    #[default]
    Normal,
    /// Uniform floats in [-1, 1); integers uniform in 1..8.
    Uniform,
}

/// A random value of `dt`, never zero (a zero draw is replaced by 0.5).
fn draw(rng: &mut ChaCha8Rng, dt: DType, dist: Dist) -> f64 {
    let v = match dt {
        DType::I1 => return rng.random_range(0..2) as f64,
        DType::I32 | DType::I64 => return rng.random_range(1..8) as f64,
        _ => match dist {
            Dist::Normal => StandardNormal.sample(rng),
            Dist::Uniform => rng.random_range(-1.0..1.0),
        },
    };
    let v = round_scalar(v, dt);
    if v == 0.0 {
        0.5
    } else {
        v
    }
}

/// Random inputs for every parameter of `f` (static shapes only).
pub fn random_inputs(f: &Func, seed: u64, dist: Dist) -> Result<Vec<Tensor>, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    f.params
        .iter()
        .map(|p| {
            let v = f.value(*p);
            let Type::Tensor(t) = &v.ty else {
                return Err(format!("parameter `%{}` is a tuple", v.name));
            };
            let shape: Vec<usize> = t
                .shape
                .iter()
                .map(|d| match d {
                    efir_ir::Dim::Static(n) => Ok(*n as usize),
                    efir_ir::Dim::Axis(a) => Err(format!(
                        "parameter `%{}` has the symbolic dim |@{a}|",
                        v.name
                    )),
                })
                .collect::<Result<_, _>>()?;
            let n: usize = shape.iter().product();
            let data: Vec<f64> = (0..n).map(|_| draw(&mut rng, t.dtype, dist)).collect();
            Ok(Tensor {
                dtype: t.dtype,
                data: ArrayD::from_shape_vec(IxDyn(&shape), data).map_err(|e| e.to_string())?,
            })
        })
        .collect()
}

/// Read a `.npy` file as a tensor of `dtype` (the file's dtype must match;
/// bf16 is read from an f32 file and rounded).
pub fn read_npy(path: &Path, dtype: DType) -> Result<Tensor, String> {
    let bytes =
        std::fs::read(path).map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    let npy = npyz::NpyFile::new(&bytes[..])
        .map_err(|e| format!("`{}` is not a .npy file: {e}", path.display()))?;
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let descr = npy.dtype().descr();
    let descr = descr.trim_matches('\'');
    let want = match dtype {
        DType::F16 => "f2",
        DType::BF16 | DType::F32 => "f4",
        DType::F64 => "f8",
        DType::I1 => "b1",
        DType::I32 => "i4",
        DType::I64 => "i8",
    };
    if !descr.ends_with(want) {
        return Err(format!(
            "`{}` holds `{descr}` elements, but the parameter is {dtype} (expected `{want}`)",
            path.display()
        ));
    }
    let err = |e: std::io::Error| format!("cannot read `{}`: {e}", path.display());
    let data: Vec<f64> = match dtype {
        DType::F16 => npy
            .into_vec::<half::f16>()
            .map_err(err)?
            .into_iter()
            .map(f64::from)
            .collect(),
        DType::BF16 | DType::F32 => npy
            .into_vec::<f32>()
            .map_err(err)?
            .into_iter()
            .map(|v| round_scalar(v as f64, dtype))
            .collect(),
        DType::F64 => npy.into_vec::<f64>().map_err(err)?,
        DType::I1 => npy
            .into_vec::<bool>()
            .map_err(err)?
            .into_iter()
            .map(|b| b as i64 as f64)
            .collect(),
        DType::I32 => npy
            .into_vec::<i32>()
            .map_err(err)?
            .into_iter()
            .map(f64::from)
            .collect(),
        DType::I64 => npy
            .into_vec::<i64>()
            .map_err(err)?
            .into_iter()
            .map(|v| v as f64)
            .collect(),
    };
    Ok(Tensor {
        dtype,
        data: ArrayD::from_shape_vec(IxDyn(&shape), data).map_err(|e| e.to_string())?,
    })
}

/// Write a tensor as `.npy` in its dtype (bf16 is written as f32).
pub fn write_npy(path: &Path, t: &Tensor) -> Result<(), String> {
    let shape: Vec<u64> = t.data.shape().iter().map(|&d| d as u64).collect();
    let file = std::fs::File::create(path)
        .map_err(|e| format!("cannot create `{}`: {e}", path.display()))?;
    let w = std::io::BufWriter::new(file);
    let it = t.data.iter().copied();
    let err = |e: std::io::Error| format!("cannot write `{}`: {e}", path.display());
    macro_rules! write_as {
        ($ty:ty, $conv:expr) => {{
            let mut out = npyz::WriteOptions::<$ty>::new()
                .default_dtype()
                .shape(&shape)
                .writer(w)
                .begin_nd()
                .map_err(err)?;
            out.extend(it.map($conv)).map_err(err)?;
            out.finish().map_err(err)?;
        }};
    }
    match t.dtype {
        DType::F16 => write_as!(half::f16, half::f16::from_f64),
        DType::BF16 | DType::F32 => write_as!(f32, |v| v as f32),
        DType::F64 => write_as!(f64, |v| v),
        DType::I1 => write_as!(bool, |v| v != 0.0),
        DType::I32 => write_as!(i32, |v| v as i32),
        DType::I64 => write_as!(i64, |v| v as i64),
    }
    Ok(())
}
