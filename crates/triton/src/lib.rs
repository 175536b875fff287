//! Candidate programs to kernel graphs and Triton (the paper's section 6.1).
//!
//! A candidate is a program over the `tensor`, `ew`, `par` and `tile`
//! dialects whose parallel states say how it is tiled. [`plan()`] cuts it into
//! kernels: every value that must live in global memory (a parameter, a
//! result, a `par.collect` buffer, or a value without parallel state made by
//! a matmul, a reduction or a combine) is a buffer, and each buffer other than
//! a parameter is written by one kernel. Inside a kernel:
//!
//! - the `par.combine` chain above the kernel's result gives the launch grid
//!   (one program per output tile), and so does a `par.collect` (one program
//!   per collected slot);
//! - a `par.reduce` over an axis becomes a loop over that axis's tiles, with
//!   the reducer state as loop-carried variables;
//! - views (`par.partition`, `par.replicate`, combines of tiles) are not
//!   computed: a value is emitted directly in the tiling its consumer needs,
//!   pushing the tiling down through pointwise ops to the loads of buffers;
//! - pointwise values without parallel state are recomputed by each kernel
//!   that reads them (they are never a kernel of their own unless they are a
//!   result, or the operand of a slice or concatenation);
//! - `tensor.slice` and `tensor.concat` are masked loads of their operands
//!   at shifted offsets, so their operands are buffers.
//!
//! [`emit_python`] writes one Python module per program: `@triton.jit`
//! kernels over blocks (masked loads and stores, `tl.dot` with fp32
//! accumulation, `tl.sum`/`tl.max`), and a host function
//! `run(*inputs, config=None)` that allocates buffers and launches the
//! kernels in order. Block sizes are `BLOCK_<axis>` parameters; `num_warps`
//! and `num_stages` too; `CONFIG_SPACE` lists the legal values.

use efir_ir::{Attr, AxisState, DType, Dim, Func, Module, ValueId};
use indexmap::{IndexMap, IndexSet};
use std::fmt::Write;

mod causal;
mod emit;
pub mod outline;
mod plan;
mod schedule;

pub(crate) use emit::choose_defaults;
pub use emit::{
    emit_python, estimate, estimate_kernels, layout_of, stand_ins, storage_dtype, Estimate,
    KernelEstimate,
};
pub use plan::small_dot_extents;
pub use plan::store_view;
pub use plan::{base_plan, plan};

/// The extent of a dim: a number, the tile count of an axis (the leading
/// dim that `par.collect` adds), or a free symbolic extent.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Extent {
    /// A static extent.
    N(u64),
    /// The number of tiles of an axis.
    Tiles(String),
    /// A free symbolic extent (`|@dyn0|`: a `Dim::Axis` whose axis never
    /// splits a dim). The host reads it from the inputs' shapes and passes
    /// it to the kernels as a runtime integer `N_<name>` (not a constexpr,
    /// so one compiled kernel serves every size); a block holding the whole
    /// dim is `NP_<name>`, its next power of two (a constexpr: one compile
    /// per power-of-two bucket). See [`symbols`].
    Sym(String),
}

impl Extent {
    /// The extent of dim `d` in the program being planned or emitted: a
    /// `Dim::Axis` is a free symbolic extent where it names one of the
    /// program's [`symbols`], else the tile count of an axis.
    fn of(d: &Dim) -> Extent {
        match d {
            Dim::Static(n) => Extent::N(*n),
            Dim::Axis(a) if is_symbol(a) => Extent::Sym(a.clone()),
            Dim::Axis(a) => Extent::Tiles(a.clone()),
        }
    }
    /// The extent inside a kernel (constexpr arithmetic, except for a
    /// symbolic extent: a runtime integer).
    pub fn kernel(&self) -> String {
        match self {
            Extent::N(n) => n.to_string(),
            Extent::Tiles(a) => format!("NT_{}", py_ident(a)),
            Extent::Sym(a) => format!("N_{}", py_ident(a)),
        }
    }
    /// The extent on the host.
    pub fn host(&self) -> String {
        match self {
            Extent::N(n) => n.to_string(),
            Extent::Tiles(a) => format!("nt_{}", py_ident(a)),
            Extent::Sym(a) => format!("n_{}", py_ident(a)),
        }
    }
    /// The padded (power of two) block length of an untiled dim, in a kernel.
    pub fn padded(&self) -> String {
        match self {
            Extent::N(n) => n.next_power_of_two().max(1).to_string(),
            Extent::Tiles(a) => format!("NTP_{}", py_ident(a)),
            Extent::Sym(a) => format!("NP_{}", py_ident(a)),
        }
    }
    /// The number of elements the static estimate and the default blocks
    /// assume: the extent, or a symbolic extent's representative size
    /// ([`dim_size`]); `None` for a tile count.
    pub fn size(&self) -> Option<u64> {
        match self {
            Extent::N(n) => Some(*n),
            Extent::Tiles(_) => None,
            Extent::Sym(a) => Some(dim_size(a)),
        }
    }
}

/// The representative size of a symbolic extent where none is given
/// (`efir-translate --dim NAME=N` gives one): the static estimate ranks
/// candidates and chooses default blocks at this size.
pub const DEFAULT_DIM_SIZE: u64 = 64;

thread_local! {
    /// Representative sizes of symbolic extents for the translation running
    /// on this thread (see [`DimSizes`]).
    static DIM_SIZES: std::cell::RefCell<std::collections::BTreeMap<String, u64>> =
        const { std::cell::RefCell::new(std::collections::BTreeMap::new()) };
}

/// While alive, the representative sizes of symbolic extents (by name,
/// without `@`) that the static estimate and the default blocks assume on
/// this thread; a symbol not named is [`DEFAULT_DIM_SIZE`]. The emitted
/// kernels take the actual size at run time whatever this is. Per thread,
/// so that translations running at once (the Python module's, in the
/// caller's threads) do not see each other's sizes; restored on drop.
pub struct DimSizes(std::collections::BTreeMap<String, u64>);

impl DimSizes {
    /// Use `sizes` on this thread until the value is dropped.
    pub fn enter(sizes: &std::collections::BTreeMap<String, u64>) -> DimSizes {
        let new = sizes
            .iter()
            .map(|(k, v)| (k.clone(), (*v).max(1)))
            .collect();
        DimSizes(DIM_SIZES.with(|m| std::mem::replace(&mut *m.borrow_mut(), new)))
    }
}

impl Drop for DimSizes {
    fn drop(&mut self) {
        let old = std::mem::take(&mut self.0);
        DIM_SIZES.with(|m| *m.borrow_mut() = old);
    }
}

/// The representative size of symbolic extent `name` (see [`DimSizes`]).
pub fn dim_size(name: &str) -> u64 {
    DIM_SIZES.with(|m| m.borrow().get(name).copied().unwrap_or(DEFAULT_DIM_SIZE))
}

/// Whether [`DimSizes`] gives symbol `name` a size on this thread.
pub fn dim_size_given(name: &str) -> bool {
    DIM_SIZES.with(|m| m.borrow().contains_key(name))
}

/// The free symbolic extents of `f`, in order of first appearance: the
/// names of `Dim::Axis` dims (`|@dyn0|`) that no parallel state of `f`
/// partitions (a dim `|@m|` of a `par.collect` buffer counts the tiles of
/// axis `@m`, which partitions a dim).
pub fn symbols(f: &Func) -> Vec<String> {
    let mut split = std::collections::HashSet::new();
    let mut seen = IndexSet::new();
    for v in &f.values {
        for l in v.ty.leaves() {
            for (a, st) in &l.state {
                if matches!(st, AxisState::Part(_)) {
                    split.insert(a.clone());
                }
            }
            for d in &l.shape {
                if let Dim::Axis(a) = d {
                    seen.insert(a.clone());
                }
            }
        }
    }
    seen.into_iter().filter(|a| !split.contains(a)).collect()
}

thread_local! {
    /// The symbols of the program being planned or emitted on this thread.
    static SYMBOLS: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn is_symbol(a: &str) -> bool {
    SYMBOLS.with(|s| s.borrow().iter().any(|x| x == a))
}

/// The symbols of the program being planned or emitted (set by
/// [`SymScope`]).
pub(crate) fn current_symbols() -> Vec<String> {
    SYMBOLS.with(|s| s.borrow().clone())
}

/// While alive, [`Extent::of`] reads `|@s|` as the symbolic extent `s` for
/// the symbols of one program (restored on drop: planning a program
/// estimates it, and each entry point sets the same scope).
pub(crate) struct SymScope(Vec<String>);

impl SymScope {
    pub(crate) fn enter(f: &Func) -> SymScope {
        let new = symbols(f);
        SymScope(SYMBOLS.with(|s| std::mem::replace(&mut *s.borrow_mut(), new)))
    }
}

impl Drop for SymScope {
    fn drop(&mut self) {
        let old = std::mem::take(&mut self.0);
        SYMBOLS.with(|s| *s.borrow_mut() = old);
    }
}

/// Text from outside (a file name, a pipeline description) as it may sit in
/// a Python docstring: backslashes and quotes escaped, and every character
/// outside printable ASCII written as a `\x`/`\u`/`\U` escape, so that it
/// can neither end the docstring nor start a line of code.
pub fn doc_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            ' '..='~' => out.push(c),
            c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out
}

/// The reducer of a collect kernel's body `x` where it is a `tensor.reduce`
/// (not a sum, which is a matmul's split-K) whose result is partial over
/// the collected axis `a`: a flash-decoding program's online-softmax state
/// of its tile of keys, streamed in sub-blocks by both builds.
pub fn partial_reducer(
    f: &efir_ir::Func,
    def: &[Option<usize>],
    buffer: &[bool],
    x: efir_ir::ValueId,
    a: &str,
) -> Option<efir_ir::Attr> {
    let op = &f.ops[def[x.index()]?];
    if op.name != "tensor.reduce" || buffer[x.index()] {
        return None;
    }
    let r = op.attrs.get("reducer")?;
    if matches!(r, efir_ir::Attr::Term(n, _) if n == "red.sum") {
        return None;
    }
    let partial = f
        .ty(x)
        .leaves()
        .iter()
        .all(|l| matches!(l.state.get(a), Some(efir_ir::AxisState::Partial(p)) if p == r));
    partial.then(|| r.clone())
}

/// The unit dims that a reshape keeping its non-unit dims in order keeps:
/// pairs `(operand dim, result dim)` of unit dims (`unit_a`, `unit_r`)
/// between the same two non-unit dims on both sides, paired from the left.
/// One-query attention's row, `[.., 1, keys] -> [.., 1, keys, 1]`, is such
/// a pair, so that a tiled row (padded to a 16-row dot block) stays tiled
/// through the view (both builds).
pub fn kept_units(unit_a: &[bool], unit_r: &[bool]) -> Vec<(usize, usize)> {
    let gap = |u: &[bool], j: usize| u[..j].iter().filter(|x| !**x).count();
    let mut used = vec![false; unit_r.len()];
    let mut pairs = Vec::new();
    for x in (0..unit_a.len()).filter(|j| unit_a[*j]) {
        let g = gap(unit_a, x);
        if let Some(y) = (0..unit_r.len()).find(|y| !used[*y] && unit_r[*y] && gap(unit_r, *y) == g)
        {
            used[y] = true;
            pairs.push((x, y));
        }
    }
    pairs
}

/// The Python identifier part for an efir name (injective: distinct names
/// never share one). A name of ASCII letters, digits and single
/// underscores is itself; any other (`l.weight`, `x$1`, `a__b`, `é`) is its
/// characters with every other one replaced by `_`, then `__` and the hex
/// of its UTF-8 bytes, which no name of the first kind contains.
pub fn py_ident(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.contains("__");
    if plain {
        return s.to_string();
    }
    let mut out: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    out.push_str("__");
    for b in s.bytes() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// A readable file stem for a program name: every character other than an
/// ASCII letter or digit becomes `_` (not injective: a caller writing
/// several files checks that their stems differ).
pub fn file_stem(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// Matmuls with an unsplit K longer than this get a K loop when lowered.
pub const AUTO_K: u64 = 128;

/// A parallel axis of a program.
#[derive(Clone, Debug)]
pub struct AxisInfo {
    /// The axis name (without `@`).
    pub name: String,
    /// The extent of the dims it splits.
    pub extent: Extent,
    /// Legal block sizes.
    pub domain: Vec<u64>,
    /// The default block size.
    pub default: u64,
}

/// How a kernel's programs are laid out.
#[derive(Clone, Debug)]
pub struct Kernel {
    /// The kernel's index in launch order.
    pub index: usize,
    /// The value the kernel writes.
    pub root: ValueId,
    /// The grid axes, outermost first, with the dim of the root each indexes
    /// (`None` for a collected axis: the buffer's leading dim).
    pub grid: Vec<(String, Option<usize>)>,
    /// The value computed under the grid (the root with its combines peeled).
    pub body: ValueId,
    /// Whether the root is a `par.collect`.
    pub collect: bool,
}

/// A program cut into kernels.
#[derive(Debug)]
pub struct Plan<'a> {
    /// The module (for reducer functions).
    pub module: &'a Module,
    /// Values held at f32 whatever their 16-bit type: collected partial
    /// sums (`efir_ir::accum`); their buffers are f32.
    pub accumulators: std::collections::HashSet<efir_ir::ValueId>,
    /// The program.
    pub func: &'a Func,
    /// The op defining each value (`None` for parameters).
    pub def: Vec<Option<usize>>,
    /// Whether each value is a buffer in global memory.
    pub buffer: Vec<bool>,
    /// The kernels in launch order.
    pub kernels: Vec<Kernel>,
    /// The axes.
    pub axes: IndexMap<String, AxisInfo>,
    /// `num_warps` and `num_stages` of the default configuration.
    pub warps: u32,
    /// See `warps`.
    pub stages: u32,
    /// Per kernel (launch order), `num_warps` and `num_stages` that override
    /// the program's (`num_warps_k<i>`, `num_stages_k<i>` of a configuration,
    /// offered where a program has more than one kernel).
    pub kernel_warps: Vec<Option<u32>>,
    /// See `kernel_warps`.
    pub kernel_stages: Vec<Option<u32>>,
    /// A cap on the registers a thread of every kernel may take (Triton's
    /// `maxnreg` launch option; `maxnreg` of a configuration), and each
    /// kernel's own (`maxnreg_k<i>`, where a program has several): none by
    /// default. A GEMM tile at 8 warps whose epilogue takes it past 128
    /// registers a thread runs one program an SM; capped at 128, two.
    pub maxnreg: Option<u32>,
    /// See `maxnreg`.
    pub kernel_maxnreg: Vec<Option<u32>>,
    /// Programmatic dependent launch (`pdl` of a configuration, offered
    /// where the program takes two launches or more): each launch after the
    /// first may start while the one before it finishes, and every kernel
    /// waits for its predecessor before its first instruction. The default
    /// schedule (`choose_defaults`) turns it on where the program takes
    /// two launches and the first one's programs all fit on the SMs at
    /// once (measured 0.4-0.7 us faster on an H100 for lora, gated_mlp and
    /// decode at B=1); off for more launches (a chain of five measured 3 us
    /// slower; `bench/gpu/s41/pdl_probe.py`) or a first launch past one
    /// wave (lora at B=8: 28.8 us against 18.8). None: not chosen (on for
    /// two launches).
    pub pdl: Option<bool>,
    /// Per kernel (launch order), blocks of axes that the kernel only loops
    /// over (`BLOCK_<axis>__k<i>` of a configuration): such a kernel may
    /// take its own block, since no buffer it reads or writes depends on it
    /// (a statistics kernel's one long loop over a row whose axis another
    /// kernel splits finely).
    pub kernel_blocks: Vec<IndexMap<String, u64>>,
    /// Per kernel (launch order), blocks of the statistics loops over an
    /// axis (`BLOCK_<axis>__r<i>` of a configuration): where a kernel loops
    /// over an axis both for a matmul's K and for a reduction without a
    /// matmul (a normalization's mean and variance before the projection),
    /// the latter loops may take longer blocks than the matmul's K loop.
    pub stat_blocks: Vec<IndexMap<String, u64>>,
}

/// The legal `num_warps` values of a configuration.
pub const WARPS: [u32; 4] = [1, 2, 4, 8];
/// The legal `num_stages` values of a configuration.
pub const STAGES: [u32; 5] = [1, 2, 3, 4, 5];
/// The legal `maxnreg` values of a configuration: 65,536 registers an SM
/// shared by 1-4 programs of 4 or 8 warps (255: no cap).
pub const MAXNREG: [u32; 6] = [64, 80, 96, 128, 168, 255];

/// Python names of dtypes.
pub fn tl_dtype(d: DType) -> &'static str {
    match d {
        DType::F16 => "tl.float16",
        DType::BF16 => "tl.bfloat16",
        DType::F32 => "tl.float32",
        DType::F64 => "tl.float64",
        DType::I1 => "tl.int1",
        DType::I32 => "tl.int32",
        DType::I64 => "tl.int64",
    }
}

/// Torch names of dtypes.
pub fn torch_dtype(d: DType) -> &'static str {
    match d {
        DType::F16 => "torch.float16",
        DType::BF16 => "torch.bfloat16",
        DType::F32 => "torch.float32",
        DType::F64 => "torch.float64",
        DType::I1 => "torch.bool",
        DType::I32 => "torch.int32",
        DType::I64 => "torch.int64",
    }
}

/// A short text description of the plan (for `--stats` and comments).
pub fn describe(p: &Plan<'_>) -> String {
    describe_estimated(p, &[])
}

/// [`describe`], each kernel's line followed by its share of the static
/// estimate where `est` has one (`--print-plan`).
pub fn describe_estimated(p: &Plan<'_>, est: &[KernelEstimate]) -> String {
    let mut s = String::new();
    for a in symbols(p.func) {
        let how = if dim_size_given(&a) {
            "from --dim"
        } else {
            "the default; set it with --dim"
        };
        let _ = writeln!(
            s,
            "symbolic extent @{a}: read from the inputs at run time; estimate and default blocks at {} ({how})",
            dim_size(&a)
        );
    }
    for (i, k) in p.kernels.iter().enumerate() {
        let grid: Vec<String> = k.grid.iter().map(|(a, _)| format!("@{a}")).collect();
        let _ = write!(
            s,
            "kernel {}: writes %{} over grid [{}]",
            k.index,
            p.func.value(k.root).name,
            grid.join(", ")
        );
        if let Some(e) = est.get(i) {
            let scale = if e.scale > 1.0 {
                format!(", x{:.2} for registers", e.scale)
            } else {
                String::new()
            };
            let _ = write!(
                s,
                "; {} programs ({} wave(s)), estimate {:.1} us (streaming {:.1}, loop trips {:.1}{scale})",
                e.programs,
                e.waves,
                e.time_us,
                e.stream_us,
                e.serial_us + 0.0
            );
        }
        s.push('\n');
    }
    s
}

/// Add the functions that reducer term `a` calls (its `f` and `h`
/// arguments, at any depth) to `out`.
fn reducer_calls(a: &Attr, out: &mut IndexSet<String>) {
    match a {
        Attr::Term(_, args) => {
            for (k, v) in args {
                if let (Some(k), Some(s)) = (k, v.as_symbol()) {
                    if k == "f" || k == "h" {
                        out.insert(s.to_string());
                    }
                }
                reducer_calls(v, out);
            }
        }
        Attr::Array(xs) => xs.iter().for_each(|x| reducer_calls(x, out)),
        _ => {}
    }
}

/// The functions the reducers of `f` (in attributes and partial states)
/// call.
fn calls_of(f: &Func, out: &mut IndexSet<String>) {
    for op in &f.ops {
        for a in op.attrs.values() {
            reducer_calls(a, out);
        }
    }
    for v in &f.values {
        for l in v.ty.leaves() {
            for st in l.state.values() {
                if let AxisState::Partial(r) = st {
                    reducer_calls(r, out);
                }
            }
        }
    }
}

/// The functions a module's reducers call (not programs of their own).
pub fn reducer_functions(m: &Module) -> IndexSet<String> {
    let mut out = IndexSet::new();
    for f in &m.funcs {
        calls_of(f, &mut out);
    }
    // Library functions call each other.
    let mut changed = true;
    while changed {
        changed = false;
        for f in &m.funcs {
            if f.name.starts_with("efir.") && !out.contains(&f.name) {
                out.insert(f.name.clone());
                changed = true;
            }
        }
    }
    out
}

/// The programs of a module: its functions that are not reducer functions
/// or launched kernels.
pub fn programs(m: &Module) -> Vec<&Func> {
    let r = reducer_functions(m);
    let k = outline::launched(m);
    m.funcs
        .iter()
        .filter(|f| !r.contains(&f.name) && !k.contains(&f.name))
        .collect()
}

/// Signatures of the functions that the reducers of `f` call, as the `red`
/// dialect wants them. (Only those: a module of thousands of candidates
/// would otherwise have every signature copied for every kernel.)
pub fn signatures(m: &Module, f: &Func) -> efir_ir::dialect::Signatures {
    let mut names = IndexSet::new();
    calls_of(f, &mut names);
    names
        .iter()
        .filter_map(|n| m.func(n))
        .map(|g| (g.name.clone(), efir_ir::verify::signature(g)))
        .collect()
}

/// Kernels in launch groups: runs of consecutive kernels (kernel `i`
/// writes `roots[i]` and reads the buffers `reads[i]`) none of which reads
/// a buffer that another of the run writes. Both builds launch a group of
/// several kernels once (horizontal fusion) where its kernels share
/// `num_warps` and `num_stages`.
pub fn launch_groups(roots: &[ValueId], reads: &[Vec<ValueId>]) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, (root, read)) in roots.iter().zip(reads).enumerate() {
        let independent = |g: &Vec<usize>| {
            g.iter()
                .all(|&m| !read.contains(&roots[m]) && !reads[m].contains(root))
        };
        match groups.last_mut() {
            Some(g) if independent(g) => g.push(i),
            _ => groups.push(vec![i]),
        }
    }
    groups
}
