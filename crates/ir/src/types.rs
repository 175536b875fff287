//! Value types: element types, shapes with static or symbolic dims, the
//! parallel state of a tensor, tensor and tuple types.
//!
//! A tensor type is `(dtype, logical shape, state)` where the state maps each
//! parallel axis the value lives under to `part(i)`, `repl` or
//! `partial(ρ)`. Two values with the same shape but different states have
//! different types.
//!
//! Attribute values ([`Attr`]) are defined here too: an attribute may hold a
//! type and a partial state holds its reducer, an attribute, so the two
//! are one recursive datum (their behaviour is in [`crate::attr`]).

use std::collections::BTreeMap;
use std::fmt;

/// An element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    /// IEEE half.
    F16,
    /// bfloat16.
    BF16,
    /// IEEE single.
    F32,
    /// IEEE double.
    F64,
    /// Boolean.
    I1,
    /// 32-bit signed integer.
    I32,
    /// 64-bit signed integer.
    I64,
}

impl DType {
    /// Every dtype, in printing order.
    pub const ALL: [DType; 7] = [
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
        DType::I1,
        DType::I32,
        DType::I64,
    ];

    /// The spelling in `.efir` files.
    pub fn name(self) -> &'static str {
        match self {
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I1 => "i1",
            DType::I32 => "i32",
            DType::I64 => "i64",
        }
    }

    /// Parse a spelling.
    pub fn from_name(s: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == s)
    }

    /// Whether this is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// Whether this is an integer type (i1 included).
    pub fn is_int(self) -> bool {
        !self.is_float()
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One dimension of a logical shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dim {
    /// A static extent.
    Static(u64),
    /// `|@p|`: the number of coordinates of parallel axis `p` (known only
    /// once a tile size is chosen).
    Axis(String),
}

impl Dim {
    /// Whether this is the static extent 1 (a broadcast dim).
    pub fn is_one(&self) -> bool {
        *self == Dim::Static(1)
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Static(n) => write!(f, "{n}"),
            Dim::Axis(a) => write!(f, "|@{a}|"),
        }
    }
}

/// The state of a value along one parallel axis.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AxisState {
    /// Each coordinate holds a distinct slice along dim `i`.
    Part(usize),
    /// Each coordinate holds the whole value.
    Repl,
    /// Each coordinate holds a contribution still to be combined with the
    /// reducer (a `#red.*` attribute).
    Partial(Attr),
}

impl fmt::Display for AxisState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AxisState::Part(i) => write!(f, "part({i})"),
            AxisState::Repl => f.write_str("repl"),
            AxisState::Partial(r) => write!(f, "partial({r})"),
        }
    }
}

/// A parallel state: axis name to its state, ordered by name.
pub type State = BTreeMap<String, AxisState>;

/// `tensor<dims x dtype, @axis: state, ...>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorType {
    /// The element type.
    pub dtype: DType,
    /// The logical (whole) shape.
    pub shape: Vec<Dim>,
    /// The parallel state.
    pub state: State,
}

impl TensorType {
    /// A tensor type without parallel state.
    pub fn new(dtype: DType, shape: Vec<Dim>) -> TensorType {
        TensorType {
            dtype,
            shape,
            state: State::new(),
        }
    }

    /// A tensor type with static dims.
    pub fn of(dtype: DType, dims: &[u64]) -> TensorType {
        TensorType::new(dtype, dims.iter().map(|&d| Dim::Static(d)).collect())
    }

    /// The rank.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The same type with another dtype.
    pub fn with_dtype(&self, dtype: DType) -> TensorType {
        TensorType {
            dtype,
            ..self.clone()
        }
    }

    /// The number of elements if every dim is static.
    pub fn num_elements(&self) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |acc, d| match d {
            Dim::Static(n) => acc.checked_mul(*n),
            Dim::Axis(_) => None,
        })
    }
}

impl fmt::Display for TensorType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tensor<")?;
        for d in &self.shape {
            write!(f, "{d}x")?;
        }
        write!(f, "{}", self.dtype)?;
        for (axis, s) in &self.state {
            write!(f, ", @{axis}: {s}")?;
        }
        f.write_str(">")
    }
}

/// The type of a value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// A tensor.
    Tensor(TensorType),
    /// A tuple of values.
    Tuple(Vec<Type>),
}

impl Type {
    /// The tensor type, if this is one.
    pub fn as_tensor(&self) -> Option<&TensorType> {
        match self {
            Type::Tensor(t) => Some(t),
            Type::Tuple(_) => None,
        }
    }

    /// The dims of a tensor type other than those of extent 1 (none for a
    /// tuple): two types whose non-unit dims differ are not a reshape that
    /// only inserts or removes unit dims, but one that splits or merges.
    pub fn non_unit_dims(&self) -> Vec<Dim> {
        self.as_tensor()
            .map(|t| {
                t.shape
                    .iter()
                    .filter(|d| **d != Dim::Static(1))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The tensor fields in order (a tensor is its own single field).
    pub fn leaves(&self) -> Vec<&TensorType> {
        match self {
            Type::Tensor(t) => vec![t],
            Type::Tuple(ts) => ts.iter().flat_map(|t| t.leaves()).collect(),
        }
    }
}

impl From<TensorType> for Type {
    fn from(t: TensorType) -> Type {
        Type::Tensor(t)
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Tensor(t) => write!(f, "{t}"),
            Type::Tuple(ts) => {
                f.write_str("tuple<")?;
                for (i, t) in ts.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{t}")?;
                }
                f.write_str(">")
            }
        }
    }
}

/// A shape printed as `8x64` (for messages).
pub fn shape_str(shape: &[Dim]) -> String {
    if shape.is_empty() {
        return "scalar".into();
    }
    shape
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("x")
}

/// An attribute value. Floats compare and hash by their bits so that
/// attributes can key maps (CSE, hash-consing).
#[derive(Clone, Debug)]
pub enum Attr {
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    Str(String),
    /// A boolean.
    Bool(bool),
    /// `@name`: a function or a parallel axis.
    Symbol(String),
    /// A bare word from a fixed set, such as a comparison predicate `lt`.
    Word(String),
    /// `[a, b]`.
    Array(Vec<Attr>),
    /// `#dialect.name<args>`: positional args have no key.
    Term(String, Vec<(Option<String>, Attr)>),
    /// A type.
    Type(Box<Type>),
}
