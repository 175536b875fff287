//! Inputs and outputs: seeded random inputs for a function's parameters,
//! and `.npy` files (through `npyz`, which reads and writes f16 too).

use crate::value::{round_scalar, Tensor};
use efir_ir::{DType, Func, Type};
use ndarray::ShapeBuilder;
use ndarray::{ArrayD, IxDyn};
use npyz::WriterBuilder;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};
use std::collections::BTreeMap;
use std::io::Read;
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
    random_inputs_sized(f, seed, dist, &BTreeMap::new(), &[])
}

/// Random inputs for the parameters of `f`, its symbolic extents `|@a|`
/// sized by `dims`. A parameter marked in `given` (its value comes from
/// elsewhere) whose shape `dims` does not fix gets an empty placeholder;
/// every other one is drawn, in order, from the seed.
pub fn random_inputs_sized(
    f: &Func,
    seed: u64,
    dist: Dist,
    dims: &BTreeMap<String, u64>,
    given: &[bool],
) -> Result<Vec<Tensor>, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    f.params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let v = f.value(*p);
            let Type::Tensor(t) = &v.ty else {
                return Err(format!("parameter `%{}` is a tuple", v.name));
            };
            let shape: Result<Vec<usize>, String> = t
                .shape
                .iter()
                .map(|d| match d {
                    efir_ir::Dim::Static(n) => Ok(*n as usize),
                    efir_ir::Dim::Axis(a) => match dims.get(a) {
                        Some(n) => usize::try_from(*n).map_err(|_| format!("|@{a}| = {n} is too large")),
                        None => Err(format!(
                            "parameter `%{}` has the symbolic dim |@{a}|: give its size (--dim {a}=N) or the parameter (--input {}=FILE.npy)",
                            v.name, v.name
                        )),
                    },
                })
                .collect();
            let shape = match shape {
                Ok(s) => s,
                Err(_) if given.get(i) == Some(&true) => {
                    return Ok(Tensor {
                        dtype: t.dtype,
                        data: ArrayD::zeros(IxDyn(&[0])),
                    })
                }
                Err(e) => return Err(e),
            };
            let n: usize = shape.iter().product();
            let data: Vec<f64> = (0..n).map(|_| draw(&mut rng, t.dtype, dist)).collect();
            Ok(Tensor {
                dtype: t.dtype,
                data: ArrayD::from_shape_vec(IxDyn(&shape), data).map_err(|e| e.to_string())?,
            })
        })
        .collect()
}

/// The most data a `.npy` input that is not a regular file (a pipe, a
/// device) may hold: 256 MiB, as the tools' other inputs.
const MAX_STREAM_NPY_BYTES: u64 = 256 << 20;

/// A reader that counts the bytes read through it.
struct Counting<R> {
    inner: R,
    n: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let k = self.inner.read(buf)?;
        self.n += k as u64;
        Ok(k)
    }
}

/// The magic, version, length and header text of a `.npy` file, read from
/// `r` (whose next byte is then the data's first), with the header's shape
/// checked: each dim an integer whose product fits in 64 bits.
fn read_npy_head(r: &mut impl Read) -> Result<Vec<u8>, String> {
    let mut head = vec![0u8; 8];
    r.read_exact(&mut head).map_err(|e| e.to_string())?;
    if &head[..6] != b"\x93NUMPY" {
        return Err("magic not found for NPY file".into());
    }
    let width = match head[6] {
        1 => 2,
        2 | 3 => 4,
        v => return Err(format!("unsupported version {v}")),
    };
    let mut len = vec![0u8; width];
    r.read_exact(&mut len).map_err(|e| e.to_string())?;
    let n = len.iter().rev().fold(0u64, |acc, &b| (acc << 8) | b as u64);
    if n > 1 << 20 {
        return Err(format!("a header of {n} bytes"));
    }
    head.extend_from_slice(&len);
    let mut text = vec![0u8; n as usize];
    r.read_exact(&mut text).map_err(|e| e.to_string())?;
    let t = String::from_utf8_lossy(&text);
    let dims = t
        .split_once("'shape'")
        .and_then(|(_, rest)| rest.split_once('('))
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(dims, _)| dims)
        .ok_or("the header has no shape")?;
    let mut total = 1u64;
    for d in dims.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let d: u64 = d
            .parse()
            .map_err(|_| format!("the shape has the dim `{d}`"))?;
        total = total
            .checked_mul(d)
            .ok_or_else(|| format!("the shape ({dims}) has more elements than 2^64"))?;
    }
    head.extend_from_slice(&text);
    Ok(head)
}

/// Read a `.npy` file as a tensor of `dtype` (the file's dtype must match;
/// bf16 is read from an f32 file and rounded). C and Fortran order are
/// read; the data must be exactly what the header says (a file that is
/// shorter or longer is an error), and a file that is not a regular file
/// (a pipe, `/dev/zero`) is read up to 256 MiB. `i64` values of magnitude
/// 2^53 or more are refused (the interpreter holds values as f64).
pub fn read_npy(path: &Path, dtype: DType) -> Result<Tensor, String> {
    let shown = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read `{shown}`: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read `{shown}`: {e}"))?;
    if meta.is_dir() {
        return Err(format!("cannot read `{shown}`: it is a directory"));
    }
    let file_len = meta.is_file().then_some(meta.len());
    let mut r = Counting {
        inner: std::io::BufReader::new(file),
        n: 0,
    };
    // The header is read and its shape checked here first: npyz multiplies
    // the dims without checking for overflow.
    let head = read_npy_head(&mut r).map_err(|e| format!("`{shown}` is not a .npy file: {e}"))?;
    let header_len = r.n;
    let header = npyz::NpyHeader::from_reader(&head[..])
        .map_err(|e| format!("`{shown}` is not a .npy file: {e}"))?;
    let npy = npyz::NpyFile::with_header(header, &mut r);
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
            "`{shown}` holds `{descr}` elements, but the parameter is {dtype} (expected `{want}`)"
        ));
    }
    let item = match dtype {
        DType::F16 => 2u64,
        DType::BF16 | DType::F32 | DType::I32 => 4,
        DType::F64 | DType::I64 => 8,
        DType::I1 => 1,
    };
    let data_len = npy
        .shape()
        .iter()
        .try_fold(item, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| format!("`{shown}`: the shape {shape:?} is too large"))?;
    match file_len {
        Some(len) if len != header_len.saturating_add(data_len) => {
            return Err(format!(
                "`{shown}` has {} bytes of data, but its header says {data_len} ({shape:?} of `{descr}`)",
                len.saturating_sub(header_len)
            ))
        }
        None if data_len > MAX_STREAM_NPY_BYTES => {
            return Err(format!(
                "`{shown}` is not a regular file and its header says {data_len} bytes of data, more than the {} MiB read from a stream",
                MAX_STREAM_NPY_BYTES >> 20
            ))
        }
        _ => {}
    }
    let fortran = npy.order() == npyz::Order::Fortran;
    let err = |e: std::io::Error| format!("cannot read `{shown}`: {e}");
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
        DType::I64 => {
            let v = npy.into_vec::<i64>().map_err(err)?;
            if let Some(x) = v.iter().find(|x| x.unsigned_abs() >= 1 << 53) {
                return Err(format!(
                    "`{shown}` holds the i64 value {x}, at least 2^53 in magnitude: the interpreter holds values as f64 and cannot represent every such value exactly"
                ));
            }
            v.into_iter().map(|x| x as f64).collect()
        }
    };
    let mut rest = [0u8; 1];
    if file_len.is_none()
        && r.read(&mut rest)
            .map_err(|e| format!("cannot read `{shown}`: {e}"))?
            != 0
    {
        return Err(format!(
            "`{shown}` has more data than its header says ({data_len} bytes)"
        ));
    }
    let data = if fortran {
        // Stored column-major: the array of the reversed shape, transposed.
        ArrayD::from_shape_vec(IxDyn(&shape).f(), data)
            .map_err(|e| e.to_string())?
            .as_standard_layout()
            .into_owned()
    } else {
        ArrayD::from_shape_vec(IxDyn(&shape), data).map_err(|e| e.to_string())?
    };
    Ok(Tensor { dtype, data })
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
