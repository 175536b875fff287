//! The TTIR builder (feature `mlir`): the public types, the context and
//! the translation of a program; the data of one kernel's emitter
//! ([`Em`]), whose methods live in the submodules by concern.

mod blocks;
mod causal;
mod dots;
mod emit;
mod fuse;
mod group;
mod ixs;
mod kernel;
mod loops;
mod matmul;
mod pointwise;
mod reduce;
mod reload;
mod shapes;
mod units;
mod views;

use efir_dialect_red::{arity, repair_parts};
use efir_ir::{Attr, DType, Dim, Func, Module, Type as EType, ValueId};
use efir_triton::layout_of;
use efir_triton::{plan, Kernel, Plan, AUTO_K};
pub use group::TtirGroup;
use kernel::kernel;
use melior::dialect::DialectRegistry;
use melior::ir::block::BlockLike;
use melior::ir::operation::{OperationBuilder, OperationLike};
use melior::ir::r#type::Type;
use melior::ir::{
    Attribute, Block, BlockRef, Identifier, Location, Module as MModule, OperationRef, Region,
    RegionLike, Value,
};
use melior::utility::register_all_dialects;
use melior::Context;
use shapes::{
    bits, dtype_name, is_float, leaf_reducer_on, leaf_shapes, lit, state_dtype, static_shape,
    symbolic, tiles, ty_text,
};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// A buffer a kernel reads or writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buffer {
    /// The efir value (without `%`).
    pub name: String,
    /// Its shape.
    pub shape: Vec<u64>,
    /// Its element type (efir spelling: `f16`, `f32`, ...).
    pub dtype: String,
    /// The program input it is, if any: an index into the parameters'
    /// leaves (a tuple parameter is one input per field, in order).
    pub input: Option<usize>,
    /// The program result it is, if any: an index into the results'
    /// leaves (a tuple result is one result per field, in order).
    pub output: Option<usize>,
}

/// One kernel: an MLIR module with one `tt.func`.
#[derive(Clone, Debug)]
pub struct TtirKernel {
    /// The function's name.
    pub name: String,
    /// The module's text (verified by melior).
    pub text: String,
    /// The pointer arguments, in order: indices into [`TtirProgram::buffers`].
    pub args: Vec<usize>,
    /// The number of programs of the (one-dimensional) launch grid.
    pub grid: u64,
    /// `num_warps` of the launch.
    pub num_warps: u32,
    /// `num_stages` of the launch.
    pub num_stages: u32,
}

/// A program's kernels, in launch order, and its buffers.
#[derive(Clone, Debug)]
pub struct TtirProgram {
    /// The program's name.
    pub name: String,
    /// Every buffer (inputs, intermediates, results).
    pub buffers: Vec<Buffer>,
    /// The kernels in launch order.
    pub kernels: Vec<TtirKernel>,
    /// Launch groups: kernels the host launches once (see [`group`]).
    pub groups: Vec<TtirGroup>,
    /// Programmatic dependent launch: every launched function first waits
    /// for the launch before it (`griddepcontrol.wait`) and lets the next
    /// one start (`griddepcontrol.launch_dependents`), and the host launches
    /// every kernel but the program's first with Triton's `launch_pdl`
    /// (the Python build's `pdl` at its default; see [`pdl_of`]).
    pub pdl: bool,
}

impl TtirProgram {
    /// The host side as JSON (what `python -m efir run-ttir` reads).
    /// `files`: the kernels' files, then the groups'.
    pub fn manifest(&self, files: &[String]) -> serde_json::Value {
        let bufs: Vec<serde_json::Value> = self
            .buffers
            .iter()
            .map(|b| {
                serde_json::json!({
                    "name": b.name, "shape": b.shape, "dtype": b.dtype,
                    "input": b.input, "output": b.output,
                })
            })
            .collect();
        let ks: Vec<serde_json::Value> = self
            .kernels
            .iter()
            .zip(files)
            .map(|(k, file)| {
                serde_json::json!({
                    "name": k.name, "file": file, "args": k.args, "grid": k.grid,
                    "num_warps": k.num_warps, "num_stages": k.num_stages,
                })
            })
            .collect();
        let gs: Vec<serde_json::Value> = self
            .groups
            .iter()
            .zip(files.iter().skip(self.kernels.len()))
            .map(|(g, file)| {
                serde_json::json!({
                    "name": g.name, "file": file, "members": g.members, "args": g.args,
                    "grid": g.grid, "num_warps": g.num_warps, "num_stages": g.num_stages,
                })
            })
            .collect();
        serde_json::json!({"program": self.name, "buffers": bufs, "kernels": ks, "groups": gs, "pdl": self.pdl})
    }
}

fn context() -> Context {
    let registry = DialectRegistry::new();
    register_all_dialects(&registry);
    let ctx = Context::new();
    ctx.append_dialect_registry(&registry);
    ctx.load_all_available_dialects();
    ctx.set_allow_unregistered_dialects(true);
    ctx
}

/// Collect the context's diagnostics (verifier and parser messages).
fn diagnostics(ctx: &Context) -> Arc<Mutex<Vec<String>>> {
    let out = Arc::new(Mutex::new(Vec::new()));
    let sink = out.clone();
    ctx.attach_diagnostic_handler(move |d| {
        if let Ok(mut v) = sink.lock() {
            v.push(d.to_string());
        }
        true
    });
    out
}

fn drain(d: &Arc<Mutex<Vec<String>>>) -> String {
    d.lock()
        .map(|mut v| v.drain(..).collect::<Vec<_>>().join("; "))
        .unwrap_or_default()
}

/// Parse TTIR text with melior (unregistered dialects allowed), verify it
/// and print it again.
pub fn round_trip(text: &str) -> Result<String, String> {
    let ctx = context();
    let diags = diagnostics(&ctx);
    let m = MModule::parse(&ctx, text)
        .ok_or_else(|| format!("melior cannot parse the text: {}", drain(&diags)))?;
    if !m.as_operation().verify() {
        return Err(format!(
            "the parsed module does not verify: {}",
            drain(&diags)
        ));
    }
    Ok(m.as_operation().to_string())
}

/// Translate program `f` of `m` to one TTIR module per kernel.
pub fn translate(m: &Module, f: &Func) -> Result<TtirProgram, String> {
    let p = plan(m, f)?;
    // A size known only at run time (a free `|@dyn0|`, which the Python
    // build passes to its kernels) is refused here, before any kernel.
    for v in &f.values {
        for l in v.ty.leaves() {
            for d in &l.shape {
                if let Dim::Axis(a) = d {
                    if matches!(
                        p.axes.get(a).map(|i| &i.extent),
                        None | Some(efir_triton::Extent::Sym(_))
                    ) {
                        return Err(format!("`%{}`: {}", v.name, symbolic(a)));
                    }
                }
            }
        }
    }
    let ctx = context();
    let diags = diagnostics(&ctx);
    let pdl = pdl_of(&p);
    let mut buffers: Vec<Buffer> = Vec::new();
    let mut index: HashMap<(ValueId, usize), usize> = HashMap::new();
    let mut kernels = Vec::new();
    for k in &p.kernels {
        let kk = kernel(
            &ctx,
            &diags,
            &p,
            k,
            &mut buffers,
            &mut index,
            kernel::Role::Launched { pdl },
        )
        .map_err(|e| {
            format!(
                "kernel {} (writing `%{}`): {e}",
                k.index,
                f.value(k.root).name
            )
        })?;
        kernels.push(kk);
    }
    let groups = group::groups(&ctx, &diags, &p, &kernels, &mut buffers, &mut index, pdl)?;
    Ok(TtirProgram {
        name: f.name.clone(),
        buffers,
        kernels,
        groups,
        pdl,
    })
}

/// Whether a program chains its launches by programmatic dependent launch,
/// as the Python build's `DEFAULT_CONFIG` has it: where it takes two
/// launches or more (its launch groups, [`efir_triton::launch_groups`]),
/// the schedule's `pdl`, else on for exactly two. (A schedule that sets
/// `pdl` on a program of one launch is refused by [`plan`].)
fn pdl_of(p: &Plan<'_>) -> bool {
    let launches = launch_groups(p).len();
    launches >= 2 && p.pdl.unwrap_or(launches == 2)
}

/// The plan's launch groups ([`efir_triton::launch_groups`] over its
/// kernels' buffers), whatever their warps and stages.
fn launch_groups(p: &Plan<'_>) -> Vec<Vec<usize>> {
    let roots: Vec<ValueId> = p.kernels.iter().map(|k| k.root).collect();
    let reads: Vec<Vec<ValueId>> = p
        .kernels
        .iter()
        .map(|k| kernel::kernel_buffers(p, k))
        .collect();
    efir_triton::launch_groups(&roots, &reads)
}

/// Per dim: the axis tiling it, if any.
type Layout = Vec<Option<String>>;

/// One dim of a block: its length, its element offsets (`tensor<size x i32>`)
/// and the logical extent (masks where the block passes it).
#[derive(Clone, Copy)]
struct Bd<'c, 'm> {
    size: u64,
    offs: Value<'c, 'm>,
    ext: u64,
    /// The length of the tile the block lies in: its size, or the tile of
    /// a grid axis that a loop streams in sub-blocks of `size` (see
    /// [`Em::collect_sub_loop`]); the block is even where its tiles are.
    tile: u64,
}

impl Bd<'_, '_> {
    fn even(&self) -> bool {
        let t = self.tile.max(self.size);
        self.ext.is_multiple_of(t) && t <= self.ext
    }
}

#[derive(Clone)]
struct Blk<'c, 'm> {
    v: Value<'c, 'm>,
    dims: Vec<Bd<'c, 'm>>,
    dt: DType,
    depth: usize,
}

impl Blk<'_, '_> {
    fn shape(&self) -> Vec<u64> {
        self.dims.iter().map(|d| d.size).collect()
    }
}

/// The blocks of a value: a tensor's, or a tuple's fields'.
#[derive(Clone)]
enum Val<'c, 'm> {
    T(Blk<'c, 'm>),
    Tup(Vec<Val<'c, 'm>>),
}

impl<'c, 'm> Val<'c, 'm> {
    /// The leaves' blocks, in field order.
    fn blocks(&self) -> Vec<Blk<'c, 'm>> {
        match self {
            Val::T(b) => vec![b.clone()],
            Val::Tup(v) => v.iter().flat_map(Val::blocks).collect(),
        }
    }

    /// The deepest scope a block of it lives in.
    fn depth(&self) -> usize {
        self.blocks().iter().map(|b| b.depth).max().unwrap_or(0)
    }

    fn tensor(self) -> Result<Blk<'c, 'm>, String> {
        match self {
            Val::T(b) => Ok(b),
            Val::Tup(_) => Err("a tuple value where a tensor is needed".into()),
        }
    }
}

struct Scope<'c, 'm> {
    block: BlockRef<'c, 'm>,
    /// The op of the enclosing scope's block that holds this scope.
    anchor: Option<OperationRef<'c, 'm>>,
}

struct Em<'c, 'm, 'p, 'a> {
    ctx: &'c Context,
    loc: Location<'c>,
    p: &'p Plan<'a>,
    scopes: Vec<Scope<'c, 'm>>,
    /// Bound axes: the depth of the binding and the offsets.
    bound: HashMap<String, (usize, Value<'c, 'm>)>,
    /// `tt.make_range(0, n)` at the top level.
    ranges: HashMap<u64, Value<'c, 'm>>,
    memo: HashMap<(ValueId, Layout), Val<'c, 'm>>,
    args: HashMap<(ValueId, usize), Value<'c, 'm>>,
    pad16: HashSet<u64>,
    /// The tile index (an i32) of each bound axis.
    idx: HashMap<String, Value<'c, 'm>>,
    /// Aliases of axes: inside a loop over an axis that the requested
    /// tiling also uses, the request's tiles are named by an alias bound
    /// like the outer binding (see [`Em::par_reduce`]).
    alias: HashMap<String, String>,
    /// Signatures of the functions the reducers call.
    sigs: efir_ir::dialect::Signatures,
    /// Products of two blocks each broadcast along a dim of the other (a
    /// reducer function's `p * v` over a `[m, k, 1]` and a `[1, k, n]`
    /// block): the product and its operands before the broadcasts, so
    /// that a sum over `k` is a `tt.dot` (see [`Em::dot_sum`]).
    /// With each operand: whether its values are known to lie in [0, 1].
    prods: Vec<Prod<'c, 'm>>,
    /// The tile states whose reduction keeps its unit dims (the loop's
    /// accumulators take them; see [`units`]).
    narrow_states: Option<ValueId>,
    /// The kernel's own blocks of axes it only loops over (a schedule's or
    /// the estimate's `BLOCK_<axis>__k<i>`, as the Python build launches
    /// the kernel with); other axes take the plan's block.
    own: HashMap<String, u64>,
    /// Masked loads (their value's raw pointer) whose masked-off elements
    /// are zeros: per dim, the offsets (raw pointer), extent and size the
    /// mask bounds (see [`Em::pad`]).
    zero_padded: HashMap<usize, Vec<(usize, u64, u64)>>,
    /// A 16-bit matmul result (by its raw value) -> its f32 sum before the
    /// rounding: a buffer of collected partial sums stores that.
    unrounded: HashMap<usize, Blk<'c, 'm>>,
    /// f32 blocks (by raw value) that are another block times a positive
    /// constant: that block and the constant, as the Python build's
    /// `scaled` (attention's score scale, folded into the softmax's
    /// maximum and its `exp2`; see [`Em::tile_reduce`] and [`Em::inline`]).
    scaled: HashMap<usize, (Blk<'c, 'm>, f64)>,
    /// Unmasked loads (by their value's raw pointer): the buffer leaf, its
    /// extents, type, the block's dims and its depth, so that a matmul
    /// operand read from it is loaded again as a matrix (see `reload.rs`).
    #[allow(clippy::type_complexity)]
    unmasked: HashMap<usize, ((ValueId, usize), Vec<u64>, DType, Vec<Bd<'c, 'm>>, usize)>,
    /// Such loads loaded again as matrices (by the first load's raw
    /// pointer and its dims as rows and columns): the matrix, at the first
    /// load's depth.
    reloaded: HashMap<(usize, usize, usize), Value<'c, 'm>>,
    /// The kernel's blocks of its statistics loops (a schedule's or the
    /// estimate's `BLOCK_<axis>__r<i>`, as the Python build launches the
    /// kernel with): a `par.reduce` over such an axis that is not a
    /// matmul's K loop runs on this block.
    stat: HashMap<String, u64>,
    /// Grid axes whose tile a loop streams in sub-blocks, while it does
    /// (the axis's own block is then the sub-block's): their tiles' length.
    streamed: HashMap<String, u64>,
    /// The split-K matmul to stream (see [`Em::collect_sub_loop`]): the
    /// kernel's body, the collected axis and its sub-block.
    sub: Option<(ValueId, String, u64)>,
    /// The accumulator of a `par.reduce` loop's maximum state while its
    /// tile states are computed (see [`Em::reduce_iteration`]): a repair
    /// over a maximum computes its tile's states at the merged maximum.
    rebase: Option<(ValueId, Blk<'c, 'm>)>,
    /// [`Em::rebase`]'s accumulator, taken by the repair of that reduction
    /// (see [`Em::tile_reduce_at`]).
    rebase_acc: Option<Blk<'c, 'm>>,
    /// Merged maxima (tile states rebased on an accumulator) and that
    /// accumulator: their merge needs no repair of the tile's states.
    rebased: Vec<(Value<'c, 'm>, Value<'c, 'm>)>,
    /// The grid axis whose later tiles start first (see [`Em::run`]).
    heavy_first: Option<String>,
    /// The causal mask's comparison while the loop over the key tiles
    /// below the diagonal is built: a constant true there.
    diag_true: Option<ValueId>,
    /// Programs of the launch group's earlier members (0 outside a group):
    /// subtracted from the program id.
    pid_off: u64,
    /// Programmatic dependent launch: the function first waits for the
    /// launch before it and lets the next one start (a launched function
    /// of a program that chains its launches; see [`pdl_of`]).
    pdl: bool,
    /// The grid axis tiling the queries of a causal loop, once one is
    /// emitted (its later tiles loop longer).
    heavy: Option<String>,
}

type R<T> = Result<T, String>;

/// A recorded product and its two operands, each with whether its values
/// lie in [0, 1] (see [`Em::dot_sum`]).
type Prod<'c, 'm> = (Value<'c, 'm>, (Blk<'c, 'm>, bool), (Blk<'c, 'm>, bool));
