//! Runtime values. A whole (host) value is a [`Tensor`]: a dtype and an
//! `f64` array holding values exactly representable in that dtype. Inside a
//! function, a value under parallel axes is a [`PValue`]: one local
//! [`Local`] per coordinate of its non-replicated axes.

use efir_ir::{AxisState, DType, State};
use ndarray::ArrayD;
use std::collections::BTreeMap;

/// The local data of one tensor at one coordinate.
pub type Tile = ArrayD<f64>;

/// A whole tensor value: its dtype and its elements (stored as `f64`).
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// The element type the values are rounded to.
    pub dtype: DType,
    /// The elements.
    pub data: Tile,
}

/// How precisely to evaluate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Precision {
    /// Round every result to its dtype; accumulate float sums and matmuls
    /// in f32 (f64 for f64 values).
    #[default]
    Native,
    /// Evaluate everything in f64 without rounding intermediates.
    F64,
}

/// Round `v` to the nearest value of `dt` (integers truncate toward zero;
/// `i32` wraps around in two's complement, as the generated kernels'
/// integer arithmetic does: 2^31 is -2^31; NaN is 0; i1 is `v != 0`).
pub fn round_scalar(v: f64, dt: DType) -> f64 {
    match dt {
        DType::F64 => v,
        DType::F32 => v as f32 as f64,
        DType::F16 => half::f16::from_f64(v).to_f64(),
        DType::BF16 => half::bf16::from_f64(v).to_f64(),
        DType::I1 => (v != 0.0 && !v.is_nan()) as i64 as f64,
        DType::I32 => wrap(v, 32),
        // Not wrapped: a value of 2^53 or more is refused after each op
        // (check_exact_ints), since the f64 holding it may be rounded.
        DType::I64 => (v as i64) as f64,
    }
}

/// `v` truncated toward zero, modulo 2^bits into the signed range (NaN and
/// infinities are 0). Exact: every integer of an f64 reduces exactly.
fn wrap(v: f64, bits: i32) -> f64 {
    if !v.is_finite() {
        return 0.0;
    }
    let m = 2f64.powi(bits);
    let r = v.trunc().rem_euclid(m);
    if r >= m / 2.0 {
        r - m
    } else {
        r
    }
}

/// 2^53: below it every integer is an f64 and an f64 result is exact; the
/// interpreter holds values as f64, so an `i64` value at or beyond it may
/// have been silently rounded (see [`check_exact_ints`]).
pub const MAX_EXACT_INT: f64 = 9_007_199_254_740_992.0; // 2^53

/// An error when `t`, of integer type `dt`, holds a value the interpreter
/// cannot vouch for (an `i64` of magnitude 2^53 or more), naming `what`.
pub fn check_exact_ints(t: &Tile, dt: DType, what: &str) -> Result<(), String> {
    if dt != DType::I64 {
        return Ok(());
    }
    match t.iter().find(|v| v.abs() >= MAX_EXACT_INT) {
        Some(v) => Err(format!(
            "{what} holds the i64 value {v:.0}, at least 2^53 in magnitude: the interpreter holds values as f64 and cannot represent every such value exactly"
        )),
        None => Ok(()),
    }
}

/// Round every element of `t` to `dt` (floats only under `F64` precision
/// keep their value; integers are always integral).
pub fn round_tile(t: &mut Tile, dt: DType, p: Precision) {
    if p == Precision::F64 && dt.is_float() {
        return;
    }
    if dt == DType::F64 {
        return;
    }
    t.mapv_inplace(|v| round_scalar(v, dt));
}

/// The value of one op result at one coordinate: a tile, or a tuple.
#[derive(Clone, Debug, PartialEq)]
pub enum Local {
    /// A tensor tile.
    Tile(Tile),
    /// A tuple of locals.
    Tuple(Vec<Local>),
}

impl Local {
    /// The tile, if this is one.
    pub fn tile(&self) -> Result<&Tile, String> {
        match self {
            Local::Tile(t) => Ok(t),
            Local::Tuple(_) => Err("expected a tensor, found a tuple".into()),
        }
    }

    /// The leaves in order.
    pub fn leaves(&self) -> Vec<&Tile> {
        match self {
            Local::Tile(t) => vec![t],
            Local::Tuple(ls) => ls.iter().flat_map(|l| l.leaves()).collect(),
        }
    }
}

/// A tensor under parallel axes: the state (axis name to state, sorted by
/// name) and one tile per coordinate. Coordinates list one index per axis of
/// the state in order; replicated axes always have index 0 (one copy).
#[derive(Clone, Debug, PartialEq)]
pub struct PTensor {
    /// The element type.
    pub dtype: DType,
    /// The parallel state.
    pub state: State,
    /// Tiles by coordinate.
    pub tiles: BTreeMap<Vec<usize>, Tile>,
}

impl PTensor {
    /// A value under no parallel axis.
    pub fn whole(dtype: DType, data: Tile) -> PTensor {
        let mut tiles = BTreeMap::new();
        tiles.insert(Vec::new(), data);
        PTensor {
            dtype,
            state: State::new(),
            tiles,
        }
    }

    /// A value of type `t` with no tiles yet.
    pub fn empty(t: &efir_ir::TensorType) -> PTensor {
        PTensor {
            dtype: t.dtype,
            state: t.state.clone(),
            tiles: BTreeMap::new(),
        }
    }

    /// The axis names in coordinate order.
    pub fn axes(&self) -> Vec<&str> {
        self.state.keys().map(String::as_str).collect()
    }

    /// The single tile of a value under no axis.
    pub fn into_whole(self) -> Result<Tile, String> {
        if !self.state.is_empty() {
            return Err(format!(
                "value still lives under parallel axes {:?}",
                self.axes()
            ));
        }
        self.tiles
            .into_values()
            .next()
            .ok_or_else(|| "empty value".to_string())
    }

    /// Whether axis `a` is replicated (or absent).
    pub fn is_repl(&self, a: &str) -> bool {
        !matches!(
            self.state.get(a),
            Some(AxisState::Part(_) | AxisState::Partial(_))
        )
    }
}

/// A runtime value: a tensor under parallel axes or a tuple of values.
#[derive(Clone, Debug, PartialEq)]
pub enum PValue {
    /// A tensor.
    Tensor(PTensor),
    /// A tuple.
    Tuple(Vec<PValue>),
}

impl PValue {
    /// The tensor, if this is one.
    pub fn tensor(&self) -> Result<&PTensor, String> {
        match self {
            PValue::Tensor(t) => Ok(t),
            PValue::Tuple(_) => Err("expected a tensor, found a tuple".into()),
        }
    }
}
