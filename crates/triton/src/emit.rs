//! Triton Python for a [`Plan`].
//!
//! This file holds the kernel emitter's state ([`KernelEmitter`]), its
//! scopes and axis bindings, and the memoised walk over a kernel's values
//! ([`KernelEmitter::emit`]). The rest, by concern:
//!
//! - [`ops`]: what each op of a kernel body emits, and the pointwise table;
//! - [`blocks`]: block dims under the bound axes, masks, pointers, loads;
//! - [`kernel`]: one `@triton.jit` kernel (grid, stores, parameters);
//! - [`host`]: the Python module and its `run()` host function;
//! - [`reduce`], [`matmul`], [`slices`], [`views`], [`direct`], [`bcast`]:
//!   reductions and loops, matmuls, slices and concatenations, views,
//!   direct loads, broadcasts and the dots that absorb them;
//! - [`fuse`]: sibling loops fused, dead lines dropped;
//! - [`mod@estimate`]: the static cost estimate.

use crate::causal::{self, Fact};
use crate::{py_ident, tl_dtype, torch_dtype, Extent, Kernel, Plan};
use efir_dialect_red::{arity, repair_parts};
use efir_ir::dialect::Signatures;
use efir_ir::{Attr, AxisState, DType, Type, ValueId};
use indexmap::IndexSet;
use std::collections::HashMap;
use std::fmt::Write;

mod bcast;
mod blocks;
mod direct;
mod estimate;
mod fuse;
mod host;
mod kernel;
mod loops;
mod matmul;
mod ops;
mod reduce;
mod reducers;
mod slices;
mod views;

pub(crate) use estimate::choose_defaults;
use estimate::estimate_of;
pub use estimate::{estimate, estimate_kernels, Estimate, KernelEstimate};
pub use host::emit_python;
use kernel::{emit_kernel_in_context, EmittedKernel};
use ops::pointwise;
pub use reducers::stand_ins;

use bcast::{pointwise_units, real_shape, Units};

/// The deepest chain of values one kernel emits (each level takes a few
/// frames of the translation thread's stack; see `efir_driver::translate`).
const MAX_NESTING: usize = 20_000;

/// One dim of a block: its length (a constexpr expression), the variable
/// holding its offsets, the logical extent (for masks) and whether the
/// blocks divide that extent (where they do, no mask is needed).
#[derive(Clone, Debug)]
struct BD {
    size: String,
    offs: String,
    ext: String,
    even: Even,
}

impl BD {
    /// A unit dim tiled by a block that may exceed it (a query row padded
    /// to a 16-row dot block): one element, masked to it.
    fn padded_unit(&self) -> bool {
        self.ext == "1" && self.size != "1"
    }
}

/// Whether a dim's blocks divide its extent.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Even {
    /// Always (every legal block divides the extent, or the dim is whole).
    Yes,
    /// Not known: the mask stays.
    No,
    /// When the constexpr flag (`EVEN_<axis>`) is true: the kernel keeps a
    /// masked and an unmasked path, chosen when it is compiled.
    Flag(String),
}

/// A block value in a kernel.
#[derive(Clone, Debug)]
struct Blk {
    var: String,
    dims: Vec<BD>,
    dtype: DType,
    depth: usize,
}

#[derive(Clone, Debug)]
enum Val {
    T(Blk),
    Tup(Vec<Val>),
}

impl Val {
    fn depth(&self) -> usize {
        match self {
            Val::T(b) => b.depth,
            Val::Tup(v) => v.iter().map(Val::depth).max().unwrap_or(0),
        }
    }
    fn blocks(&self) -> Vec<Blk> {
        match self {
            Val::T(b) => vec![b.clone()],
            Val::Tup(v) => v.iter().flat_map(Val::blocks).collect(),
        }
    }
}

/// Per dim: the axis tiling it, if any.
type Layout = Vec<Option<String>>;

/// How an axis is bound: the depth of its scope, its tile index variable
/// and its offsets variable (with the depth they were defined at).
type Binding = (usize, Option<String>, Option<(String, usize)>);

/// Blocks emitted so far, by value and tiling.
type Memo = HashMap<(ValueId, Layout), Val>;

struct Scope {
    header: String,
    lines: Vec<String>,
}

struct KernelEmitter<'p, 'a> {
    p: &'p Plan<'a>,
    sigs: Signatures,
    scopes: Vec<Scope>,
    memo: Memo,
    bound: HashMap<String, usize>,
    offs: HashMap<String, (String, usize)>,
    n: usize,
    loads: IndexSet<(ValueId, usize)>,
    /// The loop axis of each scope below the kernel's top level.
    loops: Vec<String>,
    /// The number of each of those loops (see [`Work::nest`]), and how many
    /// loops the kernel has opened.
    nest: Vec<usize>,
    opened: usize,
    /// Axes whose loops without a matmul run on blocks of their own
    /// (`RB_<axis>`, see [`Plan::stat_blocks`]).
    stat_axes: IndexSet<String>,
    /// Each plain (not causally clipped) reduction loop the kernel opened:
    /// its axis and whether it accumulates matmul products.
    loop_kinds: Vec<(String, bool)>,
    /// Memory traffic and matmul work, for the static estimate.
    work: Vec<Work>,
    /// The tile index variable of each bound axis.
    idx: HashMap<String, String>,
    /// How many bindings of each axis are live (a grid axis, open loops),
    /// counting those that hoisting hides: a loop over an axis with a live
    /// binding names its index and offsets afresh, so as not to overwrite
    /// the variables of that binding.
    live: HashMap<String, usize>,
    /// Aliases of axes: inside a loop over an axis that the requested
    /// tiling also uses, the request's tiles are named by an alias bound to
    /// the outer binding (see [`KernelEmitter::par_reduce_here`]).
    alias: HashMap<String, String>,
    /// Element facts of the program's values (causal tile skipping).
    facts: Vec<Option<Fact>>,
    /// The unit dims of block variables that hold single elements along
    /// some dims (see [`bcast`]); variables not here are whole blocks.
    unit: HashMap<String, Units>,
    /// Variables that are the product of two others (see [`bcast`]).
    prods: HashMap<String, (String, String)>,
    /// f32 variables whose values are exactly those of a 16-bit float type.
    narrow: HashMap<String, DType>,
    /// The values of the program whose blocks are such variables.
    narrow_values: HashMap<ValueId, DType>,
    /// Matrix products that a later accumulator update may absorb (see
    /// [`bcast`]).
    dots: HashMap<String, bcast::DotInfo>,
    /// f32 variables that are copies of others.
    copy_of: HashMap<String, String>,
    /// Block variables that are views of loads (see [`direct`]).
    views: HashMap<String, direct::LoadView>,
    /// The reduction whose tile state is to be computed at its loop
    /// accumulator's running maximum, and that accumulator (see
    /// [`KernelEmitter::tile_reduce_at`]).
    rebase: Option<(ValueId, String)>,
    /// Extents of whole dims padded to blocks of 16 (see [`crate::small_dot_extents`]).
    pad16: std::collections::HashSet<u64>,
    /// A grid axis whose later tiles take longer (a causal loop's bound
    /// grows with it): its tiles are scheduled last first.
    heavy: Option<String>,
    /// Rebased running maxima, and the accumulator each is based on.
    rebased: HashMap<String, String>,
    /// Matrices loaded directly, by load, row and column dim.
    direct: HashMap<String, String>,
    /// Inside the loop over the tiles wholly below a causal diagonal: the
    /// grid axis (query tiles) and the loop axis (key tiles), under which a
    /// causal mask is all true (see [`causal`]).
    unmasked: Option<(String, String)>,
    /// How many [`KernelEmitter::emit`] calls are open (values being emitted
    /// for the operands of others).
    nesting: usize,
    /// Bounds of f32 variables, where known (see [`bcast`]).
    bounds: HashMap<String, (f64, f64)>,
    /// Offsets variables of bindings whose blocks are not their axis's:
    /// the sub-blocks of a loop inside a grid tile (see
    /// [`KernelEmitter::collect_sub_loop`]), and the block variable.
    sub_block: HashMap<String, String>,
    /// 16-bit block variables computed in the kernel by rounding an f32
    /// one (a matmul's result): that f32 variable. A widening cast of such
    /// a variable reads the f32 one instead (see
    /// [`KernelEmitter::emit_pointwise`]).
    unrounded: HashMap<String, String>,
    /// f32 block variables that are another block expression times a
    /// positive constant, `var = base * c` (the softmax scale of attention's
    /// scores, through the causal mask's `-inf` select and views): `(base,
    /// c)`. A maximum over such a block is the base's maximum times `c`, and
    /// `exp(var - m)` is `exp2(base * (c * log2(e)) - m * log2(e))`: one
    /// fused multiply-add per element, the scale folded into FlashAttention's
    /// `log2(e)` (see [`KernelEmitter::tile_reduce_at`] and
    /// [`KernelEmitter::inline`]).
    scaled: HashMap<String, (String, f64)>,
    /// Scalar f32 constants by variable (`tl.full([], value, ...)`).
    consts: HashMap<String, f64>,
    /// Matmul accumulators by name: where each is declared (depth, line),
    /// its block dims and initial value (see [`KernelEmitter::declare_acc`]).
    acc_decls: HashMap<String, AccDecl>,
    /// Lines to write right after the loop that a scope of this depth
    /// holds closes (see [`KernelEmitter::close_loop`]), by the depth.
    after_loop: HashMap<usize, Vec<String>>,
}

/// Where a matmul accumulator is declared, for
/// [`KernelEmitter::matmul_product`] to declare it as a matrix instead.
#[derive(Clone, Debug)]
struct AccDecl {
    depth: usize,
    line: usize,
    dims: Vec<String>,
    init: String,
    /// The matrix variable that stands for it once it is one.
    flat: Option<String>,
}

/// One load, store or matmul of a kernel, per program: element sizes (block
/// lengths), and the loops it runs in.
#[derive(Clone, Debug)]
struct Work {
    bytes: u64,
    /// Bytes of the whole buffer a load reads (0 for stores, registers and
    /// matmuls): the estimate takes a large one to stream from DRAM, a
    /// small one re-read by many programs to stay in L2.
    source: f64,
    sizes: Vec<String>,
    loops: Vec<String>,
    /// The loops of `loops`, each by its number in the kernel: two loops
    /// over one axis one after the other are two nests, not one.
    nest: Vec<usize>,
    flops: bool,
    /// A load's or store's block along its buffer's last (contiguous) dim,
    /// where the block's dims follow the buffer's: the contiguous run of
    /// each row it touches. A run under a 32-byte sector moves whole
    /// sectors (the estimate counts their bytes). `None`: not known.
    run: Option<String>,
    /// A matmul with an operand computed in the kernel (an RMS norm applied
    /// to its row tile inside the K loop) rather than loaded: Triton stages
    /// it through registers, not the loop's pipelined loads.
    computed: bool,
}

/// The block of `dims` (one per dim of a buffer of extents `exts`, aligned
/// at the end: a leading collected dim may precede them) along the buffer's
/// last dim of an extent other than 1: the contiguous run of each row a
/// load or store of that block touches (see [`Work::run`]).
fn contiguous_run(dims: &[BD], exts: &[Extent]) -> Option<String> {
    dims.iter()
        .rev()
        .zip(exts.iter().rev())
        .find(|(_, e)| !matches!(e, Extent::N(1)))
        .map(|(d, _)| d.size.clone())
}

/// Whether a loop (as [`Work`] names it) is clipped by a causal bound: the
/// loop below the diagonal or the diagonal's own.
fn is_clipped(l: &str) -> bool {
    l.ends_with("/causal") || l.ends_with("/diag")
}

/// Bytes of a buffer of shape `shape` and dtype `dtype` (a symbolic dim at
/// its representative size; a tile count as 1).
fn buffer_bytes(shape: &[efir_ir::Dim], dtype: DType) -> f64 {
    let elems: f64 = shape
        .iter()
        .map(|d| Extent::of(d).size().unwrap_or(1) as f64)
        .product();
    elems * dtype_bytes(dtype) as f64
}

/// The element type buffer `v` stores: f32 for an accumulator (collected
/// partial sums of a 16-bit type, `efir_ir::accum`), else its type's.
pub fn storage_dtype(p: &Plan<'_>, v: ValueId, dt: DType) -> DType {
    if p.accumulators.contains(&v) {
        DType::F32
    } else {
        dt
    }
}

fn dtype_bytes(d: DType) -> u64 {
    match d {
        DType::F16 | DType::BF16 => 2,
        DType::F32 | DType::I32 => 4,
        DType::F64 | DType::I64 => 8,
        DType::I1 => 1,
    }
}

/// Per dim of `t` (its first leaf): the axis partitioning it, if any.
pub fn layout_of(t: &Type) -> Layout {
    let l = t.leaves();
    let Some(first) = l.first() else {
        return Vec::new();
    };
    let mut lay = vec![None; first.shape.len()];
    for (a, st) in &first.state {
        if let AxisState::Part(i) = st {
            lay[*i] = Some(a.clone());
        }
    }
    lay
}

fn extents(t: &Type) -> Vec<Extent> {
    t.leaves()
        .first()
        .map(|l| l.shape.iter().map(Extent::of).collect())
        .unwrap_or_default()
}

/// The literal of a constant of type `dt`: an integer type takes an integer
/// literal (`tl.full([], 8.0, tl.int32)` is refused by Triton 3.6); a float
/// type the number as written by [`literal`].
fn typed_literal(a: &Attr, dt: DType) -> String {
    if dt.is_float() {
        return literal(a);
    }
    let int = match a {
        Attr::Int(i) => Some(*i),
        Attr::Float(x) if x.is_finite() && x.fract() == 0.0 && x.abs() < 9.2e18 => Some(*x as i64),
        _ => None,
    };
    int.map_or_else(|| literal(a), |i| i.to_string())
}

fn literal(a: &Attr) -> String {
    match a.as_f64() {
        Some(x) if x.is_nan() => "float('nan')".into(),
        Some(x) if x == f64::INFINITY => "float('inf')".into(),
        Some(x) if x == f64::NEG_INFINITY => "float('-inf')".into(),
        Some(x) => format!("{x:?}"),
        None => "0".into(),
    }
}

/// `v` indexed to rank `r` (dims aligned from the right).
fn expand(var: &str, rank: usize, r: usize) -> String {
    if rank == r || rank == 0 {
        return var.to_string();
    }
    let mut idx: Vec<&str> = vec!["None"; r - rank];
    idx.extend(std::iter::repeat_n(":", rank));
    format!("{var}[{}]", idx.join(", "))
}

/// 1-D offsets of dim `i` of a rank-`r` block, broadcastable.
fn along(offs: &str, i: usize, r: usize) -> String {
    if r == 1 {
        return offs.to_string();
    }
    let idx: Vec<&str> = (0..r).map(|j| if j == i { ":" } else { "None" }).collect();
    format!("{offs}[{}]", idx.join(", "))
}

fn shape_list(dims: &[BD]) -> String {
    let s: Vec<&str> = dims.iter().map(|d| d.size.as_str()).collect();
    format!("[{}]", s.join(", "))
}

impl<'p, 'a> KernelEmitter<'p, 'a> {
    fn new(p: &'p Plan<'a>) -> Self {
        KernelEmitter {
            p,
            sigs: crate::signatures(p.module, p.func),
            scopes: vec![Scope {
                header: String::new(),
                lines: Vec::new(),
            }],
            memo: HashMap::new(),
            bound: HashMap::new(),
            offs: HashMap::new(),
            n: 0,
            loads: IndexSet::new(),
            loops: Vec::new(),
            nest: Vec::new(),
            opened: 0,
            stat_axes: IndexSet::new(),
            loop_kinds: Vec::new(),
            work: Vec::new(),
            idx: HashMap::new(),
            live: HashMap::new(),
            alias: HashMap::new(),
            facts: causal::element_facts(p.func),
            unit: HashMap::new(),
            prods: HashMap::new(),
            narrow: HashMap::new(),
            narrow_values: HashMap::new(),
            bounds: HashMap::new(),
            nesting: 0,
            unmasked: None,
            dots: HashMap::new(),
            copy_of: HashMap::new(),
            views: HashMap::new(),
            direct: HashMap::new(),
            rebase: None,
            rebased: HashMap::new(),
            heavy: None,
            pad16: Default::default(),
            sub_block: HashMap::new(),
            unrounded: HashMap::new(),
            scaled: HashMap::new(),
            consts: HashMap::new(),
            acc_decls: HashMap::new(),
            after_loop: HashMap::new(),
        }
    }

    fn fresh(&mut self, p: &str) -> String {
        self.n += 1;
        format!("{p}{}", self.n)
    }

    fn line(&mut self, depth: usize, l: String) {
        self.scopes[depth].lines.push(l);
    }

    fn top(&self) -> usize {
        self.scopes.len() - 1
    }

    /// The block length of axis `a`: a literal where its only legal block
    /// is 1 (so that matmuls over such dims can drop them).
    fn block_of(&self, a: &str) -> String {
        let a = self.alias.get(a).map_or(a, String::as_str);
        match self.p.axes.get(a) {
            Some(i) if i.domain == [1] => "1".into(),
            _ => format!("BLOCK_{}", py_ident(a)),
        }
    }

    /// The binding of axis `a` in force, if any.
    fn binding(&self, a: &str) -> Option<Binding> {
        let d = *self.bound.get(a)?;
        Some((
            d,
            self.idx.get(a).cloned(),
            self.offs.get(&format!("axis:{a}")).cloned(),
        ))
    }

    /// Put binding `b` in force for axis (or alias) `a`.
    fn set_binding(&mut self, a: &str, (d, idx, offs): Binding) {
        self.bound.insert(a.to_string(), d);
        if let Some(i) = idx {
            self.idx.insert(a.to_string(), i);
        }
        if let Some(o) = offs {
            self.offs.insert(format!("axis:{a}"), o);
        }
    }

    /// Bind axis `a` to tile index `idx` at `depth`.
    fn bind(&mut self, a: &str, idx: &str, depth: usize) {
        self.bind_block(a, idx, depth, None);
    }

    /// [`Self::bind`], on blocks of `block` (a loop's own) if given.
    fn bind_block(&mut self, a: &str, idx: &str, depth: usize, block: Option<String>) {
        let id = py_ident(a);
        // An axis bound again while another binding of it is live (a loop
        // over a grid axis, or over the axis of an enclosing loop, hoisted
        // out of that loop or not) gets offsets of its own.
        let var = if self.live.get(a).is_some_and(|n| *n > 0) {
            // (`offs<n>_<axis>` cannot be another axis's `offs_<axis>`.)
            self.n += 1;
            format!("offs{}_{id}", self.n)
        } else {
            format!("offs_{id}")
        };
        *self.live.entry(a.to_string()).or_default() += 1;
        let b = block.clone().unwrap_or_else(|| self.block_of(a));
        self.line(depth, format!("{var} = {idx} * {b} + tl.arange(0, {b})"));
        // (An offsets variable bound again, by a later loop over the axis,
        // takes that loop's block.)
        match block {
            Some(b) => self.sub_block.insert(var.clone(), b),
            None => self.sub_block.remove(&var),
        };
        self.set_binding(a, (depth, Some(idx.to_string()), Some((var, depth))));
    }

    fn emit(&mut self, v: ValueId, lay: &Layout) -> Result<Val, String> {
        if let Some(x) = self.memo.get(&(v, lay.clone())) {
            return Ok(x.clone());
        }
        if self.nesting >= MAX_NESTING {
            return Err(format!(
                "a chain of more than {MAX_NESTING} ops inside one kernel (at `%{}`); split the program",
                self.p.func.value(v).name
            ));
        }
        self.nesting += 1;
        let x = if self.p.buffer[v.index()] {
            self.load(v, lay)
        } else {
            self.emit_def(v, lay)
        };
        self.nesting -= 1;
        let x = x?;
        self.memo.insert((v, lay.clone()), x.clone());
        Ok(x)
    }

    fn result(
        &mut self,
        v: ValueId,
        lay: &Layout,
        expr: String,
        depth: usize,
    ) -> Result<Val, String> {
        let f = self.p.func;
        let t = f.ty(v).as_tensor().ok_or("expected a tensor")?.clone();
        let exts: Vec<Extent> = t.shape.iter().map(Extent::of).collect();
        let (dims, dd) = self.dims(&exts, lay)?;
        let depth = depth.max(dd);
        let var = self.fresh("v");
        if let Some(sc) = self.scaled.get(&expr).cloned() {
            self.scaled.insert(var.clone(), sc);
        }
        self.line(depth, format!("{var} = {expr}"));
        Ok(Val::T(Blk {
            var,
            dims,
            dtype: t.dtype,
            depth,
        }))
    }

    fn emit_def(&mut self, v: ValueId, lay: &Layout) -> Result<Val, String> {
        let x = self.emit_op(v, lay)?;
        // Views, partitions and widening casts of 16-bit floats hold values
        // exactly representable in 16 bits (see [`bcast`]'s dots).
        let f = self.p.func;
        if let (Some(i), Val::T(b)) = (self.p.def[v.index()], &x) {
            let op = &f.ops[i];
            let view = matches!(
                op.name.as_str(),
                "tensor.broadcast"
                    | "tensor.reshape"
                    | "tensor.transpose"
                    | "ew.cast"
                    | "par.partition"
                    | "par.replicate"
            );
            if view && matches!(b.dtype, DType::F32 | DType::F64) {
                if let Some(a) = op.operands.first() {
                    if let Some(t) = self.exact16_of(*a) {
                        self.narrow.insert(b.var.clone(), t);
                        self.narrow_values.insert(v, t);
                    }
                }
            }
        }
        Ok(x)
    }

    /// Where value `a` holds 16-bit floats exactly (in any tiling): their
    /// type.
    fn exact16_of(&self, a: ValueId) -> Option<DType> {
        let t = self.p.func.ty(a).as_tensor()?;
        if matches!(t.dtype, DType::F16 | DType::BF16) {
            return Some(t.dtype);
        }
        self.narrow_values.get(&a).copied()
    }

    fn block(&mut self, v: ValueId, lay: &Layout) -> Result<Blk, String> {
        match self.emit(v, lay)? {
            Val::T(b) => Ok(b),
            Val::Tup(_) => Err("a tuple where a tensor was expected".into()),
        }
    }
}

/// `s` (a reduced block) with a unit dim inserted at `d` of a rank-`r` block.
fn along_insert(s: &str, d: usize, r: usize) -> String {
    if r == 1 {
        return s.to_string();
    }
    let idx: Vec<&str> = (0..r).map(|j| if j == d { "None" } else { ":" }).collect();
    format!("({s})[{}]", idx.join(", "))
}

/// The kernel parameter naming buffer `v` (field `i`).
fn buf_param(f: &efir_ir::Func, v: ValueId, i: usize) -> String {
    format!("p_{}_{i}", py_ident(&f.value(v).name))
}

/// The host variable holding buffer `v` (field `i`).
fn buf_host(f: &efir_ir::Func, v: ValueId, i: usize) -> String {
    format!("b_{}_{i}", py_ident(&f.value(v).name))
}
