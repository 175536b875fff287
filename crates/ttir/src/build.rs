//! The TTIR builder (feature `mlir`).

use efir_dialect_red::{arity, repair_parts};
use efir_ir::{Attr, AxisState, DType, Dim, Func, Module, Type as EType, ValueId};
use efir_triton::{plan, Kernel, Plan, AUTO_K};
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
    /// The program input it is (index into the parameters), if any.
    pub input: Option<usize>,
    /// The program result it is (index into the results), if any.
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
}

impl TtirProgram {
    /// The host side as JSON (what `python -m efir run-ttir` reads).
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
        serde_json::json!({"program": self.name, "buffers": bufs, "kernels": ks})
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
    let ctx = context();
    let diags = diagnostics(&ctx);
    let mut buffers: Vec<Buffer> = Vec::new();
    let mut index: HashMap<(ValueId, usize), usize> = HashMap::new();
    let mut kernels = Vec::new();
    for k in &p.kernels {
        let kk = kernel(&ctx, &diags, &p, k, &mut buffers, &mut index).map_err(|e| {
            format!(
                "kernel {} (writing `%{}`): {e}",
                k.index,
                f.value(k.root).name
            )
        })?;
        kernels.push(kk);
    }
    Ok(TtirProgram {
        name: f.name.clone(),
        buffers,
        kernels,
    })
}

fn dtype_name(d: DType) -> &'static str {
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

fn is_float(d: DType) -> bool {
    matches!(d, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
}

fn bits(d: DType) -> u32 {
    match d {
        DType::I1 => 1,
        DType::F16 | DType::BF16 => 16,
        DType::F32 | DType::I32 => 32,
        DType::F64 | DType::I64 => 64,
    }
}

/// The number of tiles of axis `a` at its block.
fn tiles(p: &Plan<'_>, a: &str) -> Result<u64, String> {
    let info = p.axes.get(a).ok_or_else(|| format!("unknown axis @{a}"))?;
    match info.extent {
        efir_triton::Extent::N(e) => Ok(e.div_ceil(info.default.max(1))),
        efir_triton::Extent::Tiles(_) => Err(format!(
            "axis @{a} over a tile count (not covered by the TTIR path)"
        )),
    }
}

/// The extents (a dim of `|@a|` tiles is the tile count of `@a` at its
/// block) and dtype of each leaf of `t`.
fn leaf_shapes(p: &Plan<'_>, t: &EType) -> Result<Vec<(Vec<u64>, DType)>, String> {
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

fn static_shape(p: &Plan<'_>, t: &EType) -> Result<(Vec<u64>, DType), String> {
    if t.as_tensor().is_none() {
        return Err("a tuple value where a tensor is needed".into());
    }
    leaf_shapes(p, t)?
        .pop()
        .ok_or_else(|| "a value without a tensor".into())
}

fn layout_of(t: &EType) -> Layout {
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

/// The combining op and identity of a leaf reducer (`red.sum`, ...).
fn leaf_reducer(name: &str) -> Option<(&'static str, f64)> {
    match name {
        "red.sum" => Some(("arith.addf", 0.0)),
        "red.max" => Some(("arith.maxnumf", f64::NEG_INFINITY)),
        "red.min" => Some(("arith.minnumf", f64::INFINITY)),
        _ => None,
    }
}

/// A float literal MLIR reads in type `d`.
fn float_lit(x: f64, d: DType) -> String {
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

fn lit(x: f64, d: DType) -> String {
    if is_float(d) {
        float_lit(x, d)
    } else if d == DType::I1 {
        (if x != 0.0 { "true" } else { "false" }).into()
    } else {
        format!("{}", x as i64)
    }
}

fn ty_text(shape: &[u64], elt: &str) -> String {
    if shape.is_empty() {
        elt.to_string()
    } else {
        let s: Vec<String> = shape.iter().map(|n| n.to_string()).collect();
        format!("tensor<{}x{elt}>", s.join("x"))
    }
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
}

impl Bd<'_, '_> {
    fn even(&self) -> bool {
        self.ext.is_multiple_of(self.size) && self.size <= self.ext
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

/// The pointer arguments of a kernel: the buffers its body reads (reached
/// without crossing a buffer), in value order, then the one it writes.
fn kernel_buffers(p: &Plan<'_>, k: &Kernel) -> Vec<ValueId> {
    let f = p.func;
    let mut seen = HashSet::new();
    let mut reads = Vec::new();
    let mut stack: Vec<ValueId> = match p.def[k.body.index()] {
        Some(i) => f.ops[i].operands.clone(),
        None => vec![k.body],
    };
    while let Some(v) = stack.pop() {
        if !seen.insert(v) {
            continue;
        }
        if p.buffer[v.index()] {
            reads.push(v);
            continue;
        }
        if let Some(i) = p.def[v.index()] {
            stack.extend(f.ops[i].operands.iter().copied());
        }
    }
    reads.sort_by_key(|v| v.index());
    reads.retain(|v| *v != k.root);
    reads.push(k.root);
    reads
}

/// The extents (under 16) of matmul dims in a kernel: padded to 16 where
/// a block holds them whole, so that the product is a `tt.dot`.
fn small_dot_extents(p: &Plan<'_>, body: ValueId) -> HashSet<u64> {
    let f = p.func;
    let mut out = HashSet::new();
    let mut seen = HashSet::new();
    let mut stack = vec![body];
    while let Some(v) = stack.pop() {
        if !seen.insert(v) {
            continue;
        }
        let Some(i) = p.def[v.index()] else { continue };
        let op = &f.ops[i];
        if matches!(op.name.as_str(), "tile.matmul" | "tensor.matmul") {
            for (x, j) in [
                (op.operands[0], 2),
                (op.operands[0], 1),
                (op.operands[1], 1),
            ] {
                if let Some(t) = f.ty(x).as_tensor() {
                    if let Some(Dim::Static(n)) = t.shape.len().checked_sub(j).map(|i| &t.shape[i])
                    {
                        if *n > 1 && *n < 16 {
                            out.insert(*n);
                        }
                    }
                }
            }
        }
        for o in &op.operands {
            if !p.buffer[o.index()] {
                stack.push(*o);
            }
        }
    }
    out
}

fn kernel(
    ctx: &Context,
    diags: &Arc<Mutex<Vec<String>>>,
    p: &Plan<'_>,
    k: &Kernel,
    buffers: &mut Vec<Buffer>,
    index: &mut HashMap<(ValueId, usize), usize>,
) -> Result<TtirKernel, String> {
    let f = p.func;
    let loc = Location::unknown(ctx);
    // One pointer per leaf of each buffer (a tuple buffer is one per field).
    let mut bufs: Vec<(ValueId, usize)> = Vec::new();
    let mut args = Vec::new();
    let mut arg_tys = Vec::new();
    for v in kernel_buffers(p, k) {
        let leaves = leaf_shapes(p, f.ty(v))?;
        let tuple = f.ty(v).as_tensor().is_none();
        let (input, output) = (
            f.params.iter().position(|x| *x == v),
            f.returns.iter().position(|x| *x == v),
        );
        if tuple && (input.is_some() || output.is_some()) {
            return Err(format!(
                "`%{}`, a tuple program input or result (not covered by the TTIR path)",
                f.value(v).name
            ));
        }
        for (leaf, (shape, dt)) in leaves.into_iter().enumerate() {
            let i = *index.entry((v, leaf)).or_insert_with(|| {
                let name = f.value(v).name.clone();
                buffers.push(Buffer {
                    name: if tuple {
                        format!("{name}.{leaf}")
                    } else {
                        name
                    },
                    shape,
                    dtype: dtype_name(dt).into(),
                    input,
                    output,
                });
                buffers.len() - 1
            });
            bufs.push((v, leaf));
            args.push(i);
            arg_tys.push(format!("!tt.ptr<{}>", dtype_name(dt)));
        }
    }
    let name = format!(
        "k{}_{}",
        k.index,
        efir_triton::file_stem(&f.value(k.root).name)
    );
    // The grid: one program per tile of each grid axis.
    let mut grid = 1u64;
    let mut nts = Vec::new();
    for (a, _) in &k.grid {
        let nt = tiles(p, a)?;
        nts.push(nt);
        grid *= nt;
    }
    if grid > i32::MAX as u64 {
        return Err(format!("a grid of {grid} programs"));
    }
    let module = MModule::new(loc);
    let t = |s: &str| Type::parse(ctx, s).ok_or_else(|| format!("bad type `{s}`"));
    let a = |s: &str| Attribute::parse(ctx, s).ok_or_else(|| format!("bad attribute `{s}`"));
    let mut tys = Vec::new();
    for s in &arg_tys {
        tys.push((t(s)?, loc));
    }
    let region = Region::new();
    region.append_block(Block::new(&tys));
    let arg_attrs: Vec<&str> = arg_tys
        .iter()
        .map(|_| "{tt.divisibility = 16 : i32}")
        .collect();
    let func = OperationBuilder::new("tt.func", loc)
        .add_attributes(&[
            (Identifier::new(ctx, "sym_name"), a(&format!("\"{name}\""))?),
            (Identifier::new(ctx, "sym_visibility"), a("\"public\"")?),
            (
                Identifier::new(ctx, "function_type"),
                a(&format!("({}) -> ()", arg_tys.join(", ")))?,
            ),
            (
                Identifier::new(ctx, "arg_attrs"),
                a(&format!("[{}]", arg_attrs.join(", ")))?,
            ),
        ])
        .add_regions([region])
        .build()
        .map_err(|e| e.to_string())?;
    // The kernel's own num_warps/num_stages where a schedule gives them (as
    // the Python build launches it), else the program's.
    let warps = p
        .kernel_warps
        .get(k.index)
        .copied()
        .flatten()
        .unwrap_or(p.warps);
    let stages = p
        .kernel_stages
        .get(k.index)
        .copied()
        .flatten()
        .unwrap_or(p.stages);
    let module_attrs = [
        ("efir.num_warps", format!("{warps} : i32")),
        ("efir.num_stages", format!("{stages} : i32")),
        ("efir.grid", format!("{grid} : i32")),
    ];
    {
        let fref = module.body().append_operation(func);
        let body = fref
            .region(0)
            .map_err(|e| e.to_string())?
            .first_block()
            .ok_or("tt.func without a block")?;
        let mut em = Em {
            ctx,
            loc,
            p,
            scopes: vec![Scope {
                block: body,
                anchor: None,
            }],
            bound: HashMap::new(),
            ranges: HashMap::new(),
            memo: HashMap::new(),
            args: HashMap::new(),
            pad16: small_dot_extents(p, k.body),
            idx: HashMap::new(),
            alias: HashMap::new(),
            sigs: efir_triton::signatures(p.module, f),
        };
        for (i, v) in bufs.iter().enumerate() {
            let x = body.argument(i).map_err(|e| e.to_string())?;
            em.args.insert(*v, x.into());
        }
        em.run(k, &nts)?;
    }
    let mut module = module;
    {
        use melior::ir::operation::OperationMutLike;
        let mut mo = module.as_operation_mut();
        for (key, val) in &module_attrs {
            mo.set_attribute(key, a(val)?);
        }
    }
    if !module.as_operation().verify() {
        return Err(format!("the TTIR module does not verify: {}", drain(diags)));
    }
    Ok(TtirKernel {
        name,
        text: module.as_operation().to_string(),
        args,
        grid,
        num_warps: warps,
        num_stages: stages,
    })
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
}

type R<T> = Result<T, String>;

impl<'c, 'm> Em<'c, 'm, '_, '_> {
    fn ty(&self, s: &str) -> R<Type<'c>> {
        Type::parse(self.ctx, s).ok_or_else(|| format!("bad type `{s}`"))
    }

    /// Build op `name` and place it at `depth` (before the op holding the
    /// next scope, where that scope is open).
    fn op(
        &self,
        depth: usize,
        name: &str,
        operands: &[Value<'c, 'm>],
        results: &[&str],
        attrs: &[(&str, String)],
    ) -> R<OperationRef<'c, 'm>> {
        let mut rt = Vec::new();
        for r in results {
            rt.push(self.ty(r)?);
        }
        let mut at = Vec::new();
        for (k, v) in attrs {
            let x = Attribute::parse(self.ctx, v)
                .ok_or_else(|| format!("bad attribute `{v}` of {name}"))?;
            at.push((Identifier::new(self.ctx, k), x));
        }
        let op = OperationBuilder::new(name, self.loc)
            .add_operands(operands)
            .add_results(&rt)
            .add_attributes(&at)
            .build()
            .map_err(|e| format!("{name}: {e}"))?;
        Ok(self.place(depth, op))
    }

    fn place(&self, depth: usize, op: melior::ir::Operation<'c>) -> OperationRef<'c, 'm> {
        let s = &self.scopes[depth];
        match self.scopes.get(depth + 1).and_then(|n| n.anchor) {
            Some(anchor) => s.block.insert_operation_before(anchor, op),
            None => s.block.append_operation(op),
        }
    }

    fn val(
        &self,
        depth: usize,
        name: &str,
        operands: &[Value<'c, 'm>],
        result: &str,
        attrs: &[(&str, String)],
    ) -> R<Value<'c, 'm>> {
        let o = self.op(depth, name, operands, &[result], attrs)?;
        Ok(o.result(0).map_err(|e| e.to_string())?.into())
    }

    fn const_i32(&self, depth: usize, x: i64) -> R<Value<'c, 'm>> {
        self.val(
            depth,
            "arith.constant",
            &[],
            "i32",
            &[("value", format!("{x} : i32"))],
        )
    }

    /// A constant block of `shape` (a scalar where the shape is empty).
    fn splat_const(&self, depth: usize, x: f64, shape: &[u64], dt: DType) -> R<Value<'c, 'm>> {
        let ty = ty_text(shape, dtype_name(dt));
        let v = if shape.is_empty() {
            format!("{} : {ty}", lit(x, dt))
        } else {
            format!("dense<{}> : {ty}", lit(x, dt))
        };
        self.val(depth, "arith.constant", &[], &ty, &[("value", v)])
    }

    fn range(&mut self, n: u64) -> R<Value<'c, 'm>> {
        if let Some(v) = self.ranges.get(&n) {
            return Ok(*v);
        }
        let v = self.val(
            0,
            "tt.make_range",
            &[],
            &ty_text(&[n], "i32"),
            &[("start", "0 : i32".into()), ("end", format!("{n} : i32"))],
        )?;
        self.ranges.insert(n, v);
        Ok(v)
    }

    /// Bind axis `a` to the tile whose index is `idx` (an i32) at `depth`.
    fn bind(&mut self, a: &str, idx: Value<'c, 'm>, depth: usize) -> R<()> {
        let b = self.block_of(a)?;
        let r = self.range(b)?;
        let cb = self.const_i32(depth, b as i64)?;
        let start = self.val(depth, "arith.muli", &[idx, cb], "i32", &[])?;
        let t = ty_text(&[b], "i32");
        let s = self.val(depth, "tt.splat", &[start], &t, &[])?;
        let offs = self.val(depth, "arith.addi", &[s, r], &t, &[])?;
        self.bound.insert(a.to_string(), (depth, offs));
        self.idx.insert(a.to_string(), idx);
        Ok(())
    }

    fn block_of(&self, a: &str) -> R<u64> {
        let a = self.alias.get(a).map(String::as_str).unwrap_or(a);
        Ok(self
            .p
            .axes
            .get(a)
            .ok_or_else(|| format!("unknown axis @{a}"))?
            .default)
    }

    fn dim(&mut self, ext: u64, axis: Option<&str>) -> R<(Bd<'c, 'm>, usize)> {
        match axis {
            Some(a) => {
                let (d, offs) = *self.bound.get(a).ok_or_else(|| {
                    format!("a value tiled by @{a} is needed where @{a} is neither a grid axis nor a loop")
                })?;
                Ok((
                    Bd {
                        size: self.block_of(a)?,
                        offs,
                        ext,
                    },
                    d,
                ))
            }
            None => {
                let size = if ext > 1 && self.pad16.contains(&ext) {
                    16
                } else {
                    ext.next_power_of_two().max(1)
                };
                let offs = self.range(size)?;
                Ok((Bd { size, offs, ext }, 0))
            }
        }
    }

    fn dims(&mut self, exts: &[u64], lay: &Layout) -> R<(Vec<Bd<'c, 'm>>, usize)> {
        let mut out = Vec::new();
        let mut depth = 0;
        for (i, e) in exts.iter().enumerate() {
            let (d, dp) = self.dim(*e, lay.get(i).cloned().flatten().as_deref())?;
            depth = depth.max(dp);
            out.push(d);
        }
        Ok((out, depth))
    }

    /// `offs` (a block of one dim) as dim `i` of a rank-`r` block, unit
    /// along the others.
    fn along(
        &self,
        depth: usize,
        offs: Value<'c, 'm>,
        n: u64,
        i: usize,
        r: usize,
        elt: &str,
    ) -> R<Value<'c, 'm>> {
        let mut shape = vec![n];
        let mut v = offs;
        // Unit dims before `i`, then after it.
        for _ in 0..i {
            shape.insert(0, 1);
            v = self.val(
                depth,
                "tt.expand_dims",
                &[v],
                &ty_text(&shape, elt),
                &[("axis", "0 : i32".into())],
            )?;
        }
        while shape.len() < r {
            shape.push(1);
            let ax = shape.len() - 1;
            v = self.val(
                depth,
                "tt.expand_dims",
                &[v],
                &ty_text(&shape, elt),
                &[("axis", format!("{ax} : i32"))],
            )?;
        }
        Ok(v)
    }

    /// `v` of `from` broadcast to `to` (same rank).
    fn bcast(
        &self,
        depth: usize,
        v: Value<'c, 'm>,
        from: &[u64],
        to: &[u64],
        elt: &str,
    ) -> R<Value<'c, 'm>> {
        if from == to {
            return Ok(v);
        }
        if from.is_empty() {
            return self.val(depth, "tt.splat", &[v], &ty_text(to, elt), &[]);
        }
        self.val(depth, "tt.broadcast", &[v], &ty_text(to, elt), &[])
    }

    /// The mask of the dims whose blocks pass their extent (`None`: none do).
    fn mask(&self, dims: &[Bd<'c, 'm>], depth: usize) -> R<Option<Value<'c, 'm>>> {
        let r = dims.len();
        let shape: Vec<u64> = dims.iter().map(|d| d.size).collect();
        let mut m = None;
        for (i, d) in dims.iter().enumerate() {
            if d.even() {
                continue;
            }
            let x = self.along(depth, d.offs, d.size, i, r, "i32")?;
            let mut unit = vec![1; r];
            unit[i] = d.size;
            let e = self.splat_const(depth, d.ext as f64, &unit, DType::I32)?;
            let c = self.val(
                depth,
                "arith.cmpi",
                &[x, e],
                &ty_text(&unit, "i1"),
                &[("predicate", "2 : i64".into())],
            )?;
            let c = self.bcast(depth, c, &unit, &shape, "i1")?;
            m = Some(match m {
                None => c,
                Some(p) => self.val(depth, "arith.andi", &[p, c], &ty_text(&shape, "i1"), &[])?,
            });
        }
        Ok(m)
    }

    /// Pointers into leaf `buf.1` of buffer `buf.0` (row-major over
    /// `exts`) at the block `dims`; with `lead` (a collect buffer's tile
    /// index), into slice `lead` of the buffer, whose leading dim `exts`
    /// leaves out (`lead.1` slices).
    fn ptrs(
        &self,
        buf: (ValueId, usize),
        dims: &[Bd<'c, 'm>],
        exts: &[u64],
        dt: DType,
        depth: usize,
        lead: Option<(Value<'c, 'm>, u64)>,
    ) -> R<Value<'c, 'm>> {
        let mut base = *self
            .args
            .get(&buf)
            .ok_or("a buffer that is not an argument")?;
        let mut elems: u128 = exts.iter().map(|e| *e as u128).product();
        let pt = format!("!tt.ptr<{}>", dtype_name(dt));
        if let Some((i, slices)) = lead {
            elems *= slices as u128;
            let n: u64 = exts.iter().product();
            let c = self.const_i32(depth, n as i64)?;
            let off = self.val(depth, "arith.muli", &[i, c], "i32", &[])?;
            base = self.val(depth, "tt.addptr", &[base, off], &pt, &[])?;
        }
        if elems >= 1 << 31 {
            return Err("a buffer of 2^31 elements or more (64-bit offsets are not covered by the TTIR path)".into());
        }
        let r = dims.len();
        let shape: Vec<u64> = dims.iter().map(|d| d.size).collect();
        if r == 0 {
            return Ok(base);
        }
        let mut acc: Option<Value<'c, 'm>> = None;
        for (i, d) in dims.iter().enumerate() {
            let stride: u64 = exts[i + 1..].iter().product();
            let mut unit = vec![1; r];
            unit[i] = d.size;
            let mut x = self.along(depth, d.offs, d.size, i, r, "i32")?;
            if stride != 1 {
                let s = self.splat_const(depth, stride as f64, &unit, DType::I32)?;
                x = self.val(depth, "arith.muli", &[x, s], &ty_text(&unit, "i32"), &[])?;
            }
            let x = self.bcast(depth, x, &unit, &shape, "i32")?;
            acc = Some(match acc {
                None => x,
                Some(a) => self.val(depth, "arith.addi", &[a, x], &ty_text(&shape, "i32"), &[])?,
            });
        }
        let acc = acc.ok_or("no dims")?;
        let tp = ty_text(&shape, &pt);
        let b = self.val(depth, "tt.splat", &[base], &tp, &[])?;
        self.val(depth, "tt.addptr", &[b, acc], &tp, &[])
    }

    fn load(&mut self, v: ValueId, lay: &Layout) -> R<Val<'c, 'm>> {
        let leaves = leaf_shapes(self.p, self.p.func.ty(v))?;
        let mut out = Vec::new();
        for (leaf, (exts, dt)) in leaves.into_iter().enumerate() {
            out.push(Val::T(self.load_leaf((v, leaf), &exts, dt, lay)?));
        }
        if self.p.func.ty(v).as_tensor().is_some() {
            return out.pop().ok_or_else(|| "a value without a tensor".into());
        }
        Ok(Val::Tup(out))
    }

    fn load_leaf(
        &mut self,
        buf: (ValueId, usize),
        exts: &[u64],
        dt: DType,
        lay: &Layout,
    ) -> R<Blk<'c, 'm>> {
        let (dims, depth) = self.dims(exts, lay)?;
        let shape: Vec<u64> = dims.iter().map(|d| d.size).collect();
        let ptr = self.ptrs(buf, &dims, exts, dt, depth, None)?;
        let rt = ty_text(&shape, dtype_name(dt));
        let x = match self.mask(&dims, depth)? {
            None => self.val(
                depth,
                "tt.load",
                &[ptr],
                &rt,
                &[("operandSegmentSizes", "array<i32: 1, 0, 0>".into())],
            )?,
            Some(m) => {
                let z = self.splat_const(depth, 0.0, &shape, dt)?;
                self.val(
                    depth,
                    "tt.load",
                    &[ptr, m, z],
                    &rt,
                    &[("operandSegmentSizes", "array<i32: 1, 1, 1>".into())],
                )?
            }
        };
        Ok(Blk {
            v: x,
            dims,
            dt,
            depth,
        })
    }

    /// The block of tensor `v` in tiling `lay`.
    fn emit(&mut self, v: ValueId, lay: &Layout) -> R<Blk<'c, 'm>> {
        self.emit_val(v, lay)?.tensor()
    }

    /// The blocks of `v` (a tensor or a tuple) in tiling `lay`.
    fn emit_val(&mut self, v: ValueId, lay: &Layout) -> R<Val<'c, 'm>> {
        if let Some(x) = self.memo.get(&(v, lay.clone())) {
            return Ok(x.clone());
        }
        let x = if self.p.buffer[v.index()] {
            self.load(v, lay)?
        } else {
            self.emit_op(v, lay)?
        };
        self.memo.insert((v, lay.clone()), x.clone());
        Ok(x)
    }

    /// Cast block `x` to `to`.
    fn cast(&self, x: &Blk<'c, 'm>, to: DType) -> R<Blk<'c, 'm>> {
        let from = x.dt;
        if from == to {
            return Ok(x.clone());
        }
        let shape = x.shape();
        let rt = ty_text(&shape, dtype_name(to));
        let d = x.depth;
        let v = match (is_float(from), is_float(to)) {
            (true, true) if bits(to) > bits(from) => self.val(d, "arith.extf", &[x.v], &rt, &[])?,
            (true, true) if bits(to) < bits(from) => {
                self.val(d, "arith.truncf", &[x.v], &rt, &[])?
            }
            // f16 <-> bf16: through f32.
            (true, true) => {
                let f = self.cast(x, DType::F32)?;
                return self.cast(&f, to);
            }
            (false, true) if from == DType::I1 => self.val(d, "arith.uitofp", &[x.v], &rt, &[])?,
            (false, true) => self.val(d, "arith.sitofp", &[x.v], &rt, &[])?,
            (true, false) if to == DType::I1 => {
                let z = self.splat_const(d, 0.0, &shape, from)?;
                self.val(
                    d,
                    "arith.cmpf",
                    &[x.v, z],
                    &rt,
                    &[("predicate", "13 : i64".into())],
                )?
            }
            (true, false) => self.val(d, "arith.fptosi", &[x.v], &rt, &[])?,
            (false, false) if from == DType::I1 => self.val(d, "arith.extui", &[x.v], &rt, &[])?,
            (false, false) if to == DType::I1 => {
                let z = self.splat_const(d, 0.0, &shape, from)?;
                self.val(
                    d,
                    "arith.cmpi",
                    &[x.v, z],
                    &rt,
                    &[("predicate", "1 : i64".into())],
                )?
            }
            (false, false) if bits(to) > bits(from) => {
                self.val(d, "arith.extsi", &[x.v], &rt, &[])?
            }
            (false, false) => self.val(d, "arith.trunci", &[x.v], &rt, &[])?,
        };
        Ok(Blk {
            v,
            dims: x.dims.clone(),
            dt: to,
            depth: d,
        })
    }

    fn with(&self, x: &Blk<'c, 'm>, v: Value<'c, 'm>, dt: DType) -> Blk<'c, 'm> {
        Blk {
            v,
            dims: x.dims.clone(),
            dt,
            depth: x.depth,
        }
    }

    /// Operand `o` of an op with result extents `er` in tiling `lay`,
    /// broadcast to the result's block (numpy rules: aligned right, unit
    /// dims stretched).
    fn operand(&mut self, o: ValueId, er: &[u64], lay: &Layout) -> R<Blk<'c, 'm>> {
        let (ea, _) = static_shape(self.p, self.p.func.ty(o))?;
        let k = er.len() - ea.len();
        let la: Layout = (0..ea.len())
            .map(|j| {
                if ea[j] == 1 && er[j + k] != 1 {
                    None
                } else {
                    lay[j + k].clone()
                }
            })
            .collect();
        let x = self.emit(o, &la)?;
        let (dims, depth) = self.dims(er, lay)?;
        let depth = depth.max(x.depth);
        let elt = dtype_name(x.dt);
        let mut shape = x.shape();
        let mut v = x.v;
        if !shape.is_empty() {
            while shape.len() < er.len() {
                shape.insert(0, 1);
                v = self.val(
                    depth,
                    "tt.expand_dims",
                    &[v],
                    &ty_text(&shape, elt),
                    &[("axis", "0 : i32".into())],
                )?;
            }
        }
        let to: Vec<u64> = dims.iter().map(|d| d.size).collect();
        let v = self.bcast(depth, v, &shape, &to, elt)?;
        Ok(Blk {
            v,
            dims,
            dt: x.dt,
            depth,
        })
    }

    fn emit_op(&mut self, v: ValueId, lay: &Layout) -> R<Val<'c, 'm>> {
        let f = self.p.func;
        let i = self.p.def[v.index()].ok_or("a parameter that is not a buffer")?;
        let op = &f.ops[i];
        match op.name.as_str() {
            "par.partition" | "par.replicate" | "par.combine" => self.emit_val(op.operands[0], lay),
            "tensor.tuple" => {
                let mut out = Vec::new();
                for o in &op.operands {
                    if layout_of(f.ty(*o)).len() != lay.len() {
                        return Err(
                            "a tuple of values of different ranks inside a kernel (not covered by the TTIR path)"
                                .into(),
                        );
                    }
                    out.push(self.emit_val(*o, lay)?);
                }
                Ok(Val::Tup(out))
            }
            "tensor.get" => {
                let idx = op.attrs.get("index").and_then(Attr::as_int).unwrap_or(0) as usize;
                match self.emit_val(op.operands[0], lay)? {
                    Val::Tup(fs) => fs
                        .get(idx)
                        .cloned()
                        .ok_or_else(|| "tensor.get out of range".into()),
                    x => Ok(x),
                }
            }
            "tensor.reduce" => self.reduce(v, lay),
            "par.reduce" => self.par_reduce(v, lay),
            _ => self.emit_tensor_op(v, lay).map(Val::T),
        }
    }

    fn emit_tensor_op(&mut self, v: ValueId, lay: &Layout) -> R<Blk<'c, 'm>> {
        let f = self.p.func;
        let i = self.p.def[v.index()].ok_or("a parameter that is not a buffer")?;
        let op = &f.ops[i];
        let name = op.name.as_str();
        let (er, rdt) = static_shape(self.p, f.ty(v))?;
        match name {
            "tensor.full" => {
                let x = op.attrs.get("value").and_then(Attr::as_f64).unwrap_or(0.0);
                let (dims, _) = self.dims(&er, lay)?;
                let shape: Vec<u64> = dims.iter().map(|d| d.size).collect();
                let c = self.splat_const(0, x, &shape, rdt)?;
                Ok(Blk {
                    v: c,
                    dims,
                    dt: rdt,
                    depth: 0,
                })
            }
            "tensor.iota" => {
                let d = op.attrs.get("dim").and_then(Attr::as_int).unwrap_or(0) as usize;
                let (dims, depth) = self.dims(&er, lay)?;
                let shape: Vec<u64> = dims.iter().map(|d| d.size).collect();
                let bd = dims.get(d).copied().ok_or("iota dim out of range")?;
                let x = self.along(depth, bd.offs, bd.size, d, er.len(), "i32")?;
                let mut unit = vec![1; er.len()];
                unit[d] = bd.size;
                let x = self.bcast(depth, x, &unit, &shape, "i32")?;
                let b = Blk {
                    v: x,
                    dims,
                    dt: DType::I32,
                    depth,
                };
                self.cast(&b, rdt)
            }
            "tensor.broadcast" => self.operand(op.operands[0], &er, lay),
            "tensor.reshape" => {
                let a = op.operands[0];
                let (ea, _) = static_shape(self.p, f.ty(a))?;
                let nu_a: Vec<usize> = (0..ea.len()).filter(|j| ea[*j] != 1).collect();
                let nu_r: Vec<usize> = (0..er.len()).filter(|j| er[*j] != 1).collect();
                if nu_a.len() != nu_r.len() || nu_a.iter().zip(&nu_r).any(|(x, y)| ea[*x] != er[*y])
                {
                    return Err(
                        "a reshape that merges or splits dims (not covered by the TTIR path)"
                            .into(),
                    );
                }
                let mut la: Layout = vec![None; ea.len()];
                for (x, y) in nu_a.iter().zip(&nu_r) {
                    la[*x] = lay[*y].clone();
                }
                let x = self.emit(a, &la)?;
                let (dims, depth) = self.dims(&er, lay)?;
                let depth = depth.max(x.depth);
                let shape: Vec<u64> = dims.iter().map(|d| d.size).collect();
                let v = if x.shape().iter().product::<u64>() == 1 && shape.is_empty()
                    || shape == x.shape()
                {
                    x.v
                } else if x.shape().is_empty() {
                    self.val(
                        depth,
                        "tt.splat",
                        &[x.v],
                        &ty_text(&shape, dtype_name(x.dt)),
                        &[],
                    )?
                } else {
                    self.val(
                        depth,
                        "tt.reshape",
                        &[x.v],
                        &ty_text(&shape, dtype_name(x.dt)),
                        &[],
                    )?
                };
                Ok(Blk {
                    v,
                    dims,
                    dt: x.dt,
                    depth,
                })
            }
            "tensor.transpose" => {
                let perm = op
                    .attrs
                    .get("perm")
                    .and_then(Attr::as_int_array)
                    .ok_or("transpose without perm")?;
                let mut la: Layout = vec![None; er.len()];
                for (k, p) in perm.iter().enumerate() {
                    la[*p as usize] = lay[k].clone();
                }
                let x = self.emit(op.operands[0], &la)?;
                let (dims, depth) = self.dims(&er, lay)?;
                let depth = depth.max(x.depth);
                let shape: Vec<u64> = dims.iter().map(|d| d.size).collect();
                let ps: Vec<String> = perm.iter().map(|p| p.to_string()).collect();
                let v = self.val(
                    depth,
                    "tt.trans",
                    &[x.v],
                    &ty_text(&shape, dtype_name(x.dt)),
                    &[("order", format!("array<i32: {}>", ps.join(", ")))],
                )?;
                Ok(Blk {
                    v,
                    dims,
                    dt: x.dt,
                    depth,
                })
            }
            "tensor.matmul" | "tile.matmul" => self.matmul(v, lay),
            _ if name.starts_with("ew.") => self.pointwise(v, lay),
            other => Err(format!(
                "`{other}` inside a kernel (not covered by the TTIR path)"
            )),
        }
    }

    fn pointwise(&mut self, v: ValueId, lay: &Layout) -> R<Blk<'c, 'm>> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let (er, rdt) = static_shape(self.p, f.ty(v))?;
        let mut xs = Vec::new();
        for o in &op.operands {
            xs.push(self.operand(*o, &er, lay)?);
        }
        self.pointwise_blocks(&op.name, &op.attrs, xs, rdt)
    }

    /// Pointwise op `name` over blocks of one shape, giving `rdt`.
    fn pointwise_blocks(
        &self,
        name: &str,
        attrs: &indexmap::IndexMap<String, Attr>,
        mut xs: Vec<Blk<'c, 'm>>,
        rdt: DType,
    ) -> R<Blk<'c, 'm>> {
        let depth = xs.iter().map(|x| x.depth).max().unwrap_or(0);
        for x in xs.iter_mut() {
            x.depth = depth;
        }
        let x0 = xs.first().cloned().ok_or("an ew op without operands")?;
        let shape = x0.shape();
        let dt = x0.dt;
        let fl = is_float(dt);
        let t = |d: DType| ty_text(&shape, dtype_name(d));
        let bin = |s: &Self, fop: &str, iop: &str| -> R<Blk<'c, 'm>> {
            let v = s.val(
                depth,
                if fl { fop } else { iop },
                &[xs[0].v, xs[1].v],
                &t(dt),
                &[],
            )?;
            Ok(s.with(&x0, v, dt))
        };
        // Transcendental functions in f32, then back (as the Python build).
        let f32u = |s: &Self, ops: &[&str]| -> R<Blk<'c, 'm>> {
            let x = s.cast(&x0, DType::F32)?;
            let mut v = x.v;
            for o in ops {
                v = s.val(depth, o, &[v], &t(DType::F32), &[])?;
            }
            s.cast(&s.with(&x0, v, DType::F32), rdt)
        };
        let out = match name {
            "ew.add" => bin(self, "arith.addf", "arith.addi")?,
            "ew.sub" => bin(self, "arith.subf", "arith.subi")?,
            "ew.mul" => bin(self, "arith.mulf", "arith.muli")?,
            "ew.div" => bin(self, "arith.divf", "arith.divsi")?,
            "ew.max" => bin(self, "arith.maxnumf", "arith.maxsi")?,
            "ew.min" => bin(self, "arith.minnumf", "arith.minsi")?,
            "ew.neg" if fl => self.with(
                &x0,
                self.val(depth, "arith.negf", &[x0.v], &t(dt), &[])?,
                dt,
            ),
            "ew.abs" if fl => {
                self.with(&x0, self.val(depth, "math.absf", &[x0.v], &t(dt), &[])?, dt)
            }
            "ew.exp" => f32u(self, &["math.exp"])?,
            "ew.log" => f32u(self, &["math.log"])?,
            "ew.sqrt" => f32u(self, &["math.sqrt"])?,
            "ew.rsqrt" => f32u(self, &["math.rsqrt"])?,
            "ew.erf" => f32u(self, &["math.erf"])?,
            "ew.sigmoid" | "ew.tanh" => {
                // sigmoid(x) = 1 / (1 + exp(-x)); tanh(x) = 2 sigmoid(2x) - 1.
                let x = self.cast(&x0, DType::F32)?;
                let tf = t(DType::F32);
                let one = self.splat_const(depth, 1.0, &shape, DType::F32)?;
                let two = self.splat_const(depth, 2.0, &shape, DType::F32)?;
                let mut a = x.v;
                if name == "ew.tanh" {
                    a = self.val(depth, "arith.mulf", &[a, two], &tf, &[])?;
                }
                let n = self.val(depth, "arith.negf", &[a], &tf, &[])?;
                let e = self.val(depth, "math.exp", &[n], &tf, &[])?;
                let d = self.val(depth, "arith.addf", &[one, e], &tf, &[])?;
                let mut s = self.val(depth, "arith.divf", &[one, d], &tf, &[])?;
                if name == "ew.tanh" {
                    let m = self.val(depth, "arith.mulf", &[s, two], &tf, &[])?;
                    s = self.val(depth, "arith.subf", &[m, one], &tf, &[])?;
                }
                self.cast(&self.with(&x0, s, DType::F32), rdt)?
            }
            "ew.pow" => {
                let b = self.cast(&x0, DType::F32)?;
                let e = self.cast(&xs[1], DType::F32)?;
                let tf = t(DType::F32);
                let l = self.val(depth, "math.log", &[b.v], &tf, &[])?;
                let m = self.val(depth, "arith.mulf", &[e.v, l], &tf, &[])?;
                let x = self.val(depth, "math.exp", &[m], &tf, &[])?;
                self.cast(&self.with(&x0, x, DType::F32), rdt)?
            }
            "ew.select" => {
                let (c, a, b) = (&xs[0], &xs[1], &xs[2]);
                let v = self.val(depth, "arith.select", &[c.v, a.v, b.v], &t(a.dt), &[])?;
                self.with(a, v, a.dt)
            }
            "ew.cmp" => {
                let pred = attrs
                    .get("pred")
                    .and_then(Attr::as_word)
                    .ok_or("ew.cmp without a predicate")?;
                let (fp, ip) = match pred {
                    "eq" => (1, 0),
                    "ne" => (13, 1),
                    "lt" => (4, 2),
                    "le" => (5, 3),
                    "gt" => (2, 4),
                    "ge" => (3, 5),
                    other => return Err(format!("ew.cmp predicate `{other}`")),
                };
                let (o, p) = if fl {
                    ("arith.cmpf", fp)
                } else {
                    ("arith.cmpi", ip)
                };
                let v = self.val(
                    depth,
                    o,
                    &[xs[0].v, xs[1].v],
                    &t(DType::I1),
                    &[("predicate", format!("{p} : i64"))],
                )?;
                self.with(&x0, v, DType::I1)
            }
            "ew.cast" => self.cast(&x0, rdt)?,
            other => {
                return Err(format!(
                    "`{other}` on {} (not covered by the TTIR path)",
                    dtype_name(dt)
                ))
            }
        };
        if out.dt != rdt {
            return self.cast(&out, rdt);
        }
        Ok(out)
    }

    /// `x` with the elements past the extent of dim `d` replaced by `fill`.
    fn pad(&self, x: &Blk<'c, 'm>, d: usize, fill: f64) -> R<Blk<'c, 'm>> {
        let bd = x.dims[d];
        if bd.even() {
            return Ok(x.clone());
        }
        let Some(m) = self.mask(&[bd], x.depth)? else {
            return Ok(x.clone());
        };
        let r = x.dims.len();
        let shape = x.shape();
        let m = if r > 1 {
            let mut unit = vec![1; r];
            unit[d] = bd.size;
            // `mask` gave a rank-1 block; place it along dim `d`.
            let m = self.along(x.depth, m, bd.size, d, r, "i1")?;
            self.bcast(x.depth, m, &unit, &shape, "i1")?
        } else {
            m
        };
        let c = self.splat_const(x.depth, fill, &shape, x.dt)?;
        let v = self.val(
            x.depth,
            "arith.select",
            &[m, x.v, c],
            &ty_text(&shape, dtype_name(x.dt)),
            &[],
        )?;
        Ok(self.with(x, v, x.dt))
    }

    /// `tt.reduce` of `x` (f32) along `d` with `combine` (`arith.addf`, ...).
    fn tt_reduce(&self, x: &Blk<'c, 'm>, d: usize, combine: &str) -> R<Value<'c, 'm>> {
        let mut rs = x.shape();
        rs.remove(d);
        let elt = dtype_name(x.dt);
        let rt = self.ty(&ty_text(&rs, elt))?;
        let et = self.ty(elt)?;
        let region = Region::new();
        let blk = Block::new(&[(et, self.loc), (et, self.loc)]);
        let (a, b) = (
            blk.argument(0).map_err(|e| e.to_string())?,
            blk.argument(1).map_err(|e| e.to_string())?,
        );
        let s = blk.append_operation(
            OperationBuilder::new(combine, self.loc)
                .add_operands(&[a.into(), b.into()])
                .add_results(&[et])
                .build()
                .map_err(|e| e.to_string())?,
        );
        let sv: Value = s.result(0).map_err(|e| e.to_string())?.into();
        blk.append_operation(
            OperationBuilder::new("tt.reduce.return", self.loc)
                .add_operands(&[sv])
                .build()
                .map_err(|e| e.to_string())?,
        );
        region.append_block(blk);
        let op = OperationBuilder::new("tt.reduce", self.loc)
            .add_operands(&[x.v])
            .add_results(&[rt])
            .add_attributes(&[(
                Identifier::new(self.ctx, "axis"),
                Attribute::parse(self.ctx, &format!("{d} : i32")).ok_or("axis")?,
            )])
            .add_regions([region])
            .build()
            .map_err(|e| e.to_string())?;
        let r = self.place(x.depth, op);
        Ok(r.result(0).map_err(|e| e.to_string())?.into())
    }

    /// The tiling of operand `a` of a reduction over dim `d`: the result's,
    /// with the reduced dim tiled as `a` is (by the axis of a parallel
    /// reduction, whose loop binds it) or whole.
    fn reduce_input_layout(&self, a: ValueId, lay: &Layout, d: usize) -> Layout {
        let mut la = lay.clone();
        la.insert(d, layout_of(self.p.func.ty(a)).get(d).cloned().flatten());
        la
    }

    fn reduce(&mut self, v: ValueId, lay: &Layout) -> R<Val<'c, 'm>> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let d = op.attrs.get("dim").and_then(Attr::as_int).unwrap_or(0) as usize;
        let r = op.attrs.get("reducer").ok_or("reduce without reducer")?;
        let a = op.operands[0];
        let la = self.reduce_input_layout(a, lay, d);
        let xs = self.emit_val(a, &la)?.blocks();
        let states = self.tile_reduce(r, &xs, d)?;
        self.finish(v, lay, states)
    }

    /// Reducer states (f32 blocks) as the blocks of `v`, in its dtypes.
    fn finish(&mut self, v: ValueId, lay: &Layout, states: Vec<Blk<'c, 'm>>) -> R<Val<'c, 'm>> {
        let t = self.p.func.ty(v);
        let leaves = leaf_shapes(self.p, t)?;
        if leaves.len() != states.len() {
            return Err("the reducer's state count differs from the result's fields".into());
        }
        let mut out = Vec::new();
        for ((er, rdt), s) in leaves.into_iter().zip(states) {
            let (dims, dd) = self.dims(&er, lay)?;
            let b = Blk {
                v: s.v,
                dims,
                dt: s.dt,
                depth: dd.max(s.depth),
            };
            out.push(Val::T(self.cast(&b, rdt)?));
        }
        if t.as_tensor().is_some() {
            return out.pop().ok_or_else(|| "no state".into());
        }
        Ok(Val::Tup(out))
    }

    /// Reduce blocks `xs` (the fields of one input) along dim `d` with
    /// reducer `r`: its states, f32 blocks without dim `d`.
    fn tile_reduce(&mut self, r: &Attr, xs: &[Blk<'c, 'm>], d: usize) -> R<Vec<Blk<'c, 'm>>> {
        let Attr::Term(name, args) = r else {
            return Err(format!("malformed reducer `{r}`"));
        };
        match name.as_str() {
            "red.sum" | "red.max" | "red.min" if args.is_empty() => {
                let (combine, ident) = leaf_reducer(name).ok_or("malformed reducer")?;
                let x = xs.first().ok_or("a reduction of nothing")?;
                if !is_float(x.dt) {
                    return Err("an integer reduction (not covered by the TTIR path)".into());
                }
                let x = self.cast(x, DType::F32)?;
                let x = self.pad(&x, d, ident)?;
                let s = self.tt_reduce(&x, d, combine)?;
                let mut dims = x.dims.clone();
                dims.remove(d);
                Ok(vec![Blk {
                    v: s,
                    dims,
                    dt: DType::F32,
                    depth: x.depth,
                }])
            }
            "red.prod" => {
                let mut out = Vec::new();
                let mut rest = xs;
                for (_, c) in args {
                    let n = arity(c, &self.sigs).ok_or("malformed product")?.inputs;
                    let (h, t) = rest.split_at(n.min(rest.len()));
                    out.extend(self.tile_reduce(c, h, d)?);
                    rest = t;
                }
                Ok(out)
            }
            "red.repair" => {
                let (p, c, fname, _) = repair_parts(args).ok_or("malformed repair")?;
                let ip = arity(p, &self.sigs).ok_or("malformed repair")?.inputs;
                let s = self.tile_reduce(p, &xs[..ip.min(xs.len())], d)?;
                // f(x..., s...) over the tile, the producer's states
                // broadcast along `d`; then the consumer over its results.
                let x0 = xs.first().ok_or("a reduction of nothing")?;
                let depth = xs
                    .iter()
                    .chain(&s)
                    .map(|b| b.depth)
                    .max()
                    .unwrap_or(0);
                let mut fargs = Vec::new();
                for b in xs {
                    if b.shape() != x0.shape() {
                        return Err(
                            "a repaired reduction of fields with different blocks (not covered by the TTIR path)"
                                .into(),
                        );
                    }
                    let mut x = self.cast(b, DType::F32)?;
                    x.depth = depth;
                    fargs.push(x);
                }
                for sv in &s {
                    fargs.push(self.unreduce(sv, d, &x0.dims, depth)?);
                }
                let ys = self.inline(fname, fargs, depth)?;
                let cs = self.tile_reduce(c, &ys, d)?;
                Ok(s.into_iter().chain(cs).collect())
            }
            _ => Err(format!(
                "reducer `{r}` (not covered by the TTIR path; sum, max, min, their products and repairs are)"
            )),
        }
    }

    /// State block `s` (without dim `d`) broadcast along `d` to `dims`.
    fn unreduce(
        &self,
        s: &Blk<'c, 'm>,
        d: usize,
        dims: &[Bd<'c, 'm>],
        depth: usize,
    ) -> R<Blk<'c, 'm>> {
        let to: Vec<u64> = dims.iter().map(|b| b.size).collect();
        let elt = dtype_name(s.dt);
        let v = if s.dims.is_empty() {
            self.val(depth, "tt.splat", &[s.v], &ty_text(&to, elt), &[])?
        } else {
            let mut unit = s.shape();
            unit.insert(d, 1);
            let e = self.val(
                depth,
                "tt.expand_dims",
                &[s.v],
                &ty_text(&unit, elt),
                &[("axis", format!("{d} : i32"))],
            )?;
            self.bcast(depth, e, &unit, &to, elt)?
        };
        Ok(Blk {
            v,
            dims: dims.to_vec(),
            dt: s.dt,
            depth,
        })
    }

    /// Function `fname` of the module (pointwise, over scalars) applied to
    /// blocks of one shape, at `depth`: its results, in f32.
    fn inline(&mut self, fname: &str, args: Vec<Blk<'c, 'm>>, depth: usize) -> R<Vec<Blk<'c, 'm>>> {
        let g = self
            .p
            .module
            .func(fname)
            .ok_or_else(|| format!("no function @{fname}"))?;
        if g.params.len() != args.len() {
            return Err(format!(
                "@{fname} takes {} arguments, the reducer gives {}",
                g.params.len(),
                args.len()
            ));
        }
        let proto = args.first().cloned().ok_or("a function of no arguments")?;
        let mut env: HashMap<ValueId, Blk<'c, 'm>> = g.params.iter().copied().zip(args).collect();
        for op in &g.ops {
            let (rs, dt) = static_shape(self.p, g.ty(op.result))?;
            if !rs.is_empty() {
                return Err(format!("@{fname} is not over scalars"));
            }
            let b = match op.name.as_str() {
                "tensor.full" => {
                    let x = op.attrs.get("value").and_then(Attr::as_f64).unwrap_or(0.0);
                    let v = self.splat_const(depth, x, &proto.shape(), dt)?;
                    Blk {
                        v,
                        dims: proto.dims.clone(),
                        dt,
                        depth,
                    }
                }
                n if n.starts_with("ew.") => {
                    let mut xs = Vec::new();
                    for o in &op.operands {
                        xs.push(env.get(o).cloned().ok_or("an operand defined later")?);
                    }
                    self.pointwise_blocks(n, &op.attrs, xs, dt)?
                }
                other => {
                    return Err(format!(
                        "`{other}` in @{fname} (not covered by the TTIR path)"
                    ))
                }
            };
            env.insert(op.result, b);
        }
        let mut out = Vec::new();
        for x in &g.returns {
            let b = env.get(x).ok_or("a result defined nowhere")?;
            out.push(self.cast(b, DType::F32)?);
        }
        Ok(out)
    }

    /// Merge reducer states `a` and `b` (f32 blocks of one shape) at `depth`.
    fn combine(
        &mut self,
        r: &Attr,
        a: &[Blk<'c, 'm>],
        b: &[Blk<'c, 'm>],
        depth: usize,
    ) -> R<Vec<Blk<'c, 'm>>> {
        let Attr::Term(name, args) = r else {
            return Err(format!("malformed reducer `{r}`"));
        };
        match name.as_str() {
            "red.sum" | "red.max" | "red.min" if args.is_empty() => {
                let (op, _) = leaf_reducer(name).ok_or("malformed reducer")?;
                let (x, y) = (
                    a.first().ok_or("no state")?,
                    b.first().ok_or("no state")?,
                );
                let v = self.val(depth, op, &[x.v, y.v], &ty_text(&x.shape(), "f32"), &[])?;
                Ok(vec![Blk {
                    v,
                    dims: x.dims.clone(),
                    dt: DType::F32,
                    depth,
                }])
            }
            "red.prod" => {
                let mut out = Vec::new();
                let (mut ra, mut rb) = (a, b);
                for (_, c) in args {
                    let n = arity(c, &self.sigs).ok_or("malformed product")?.states;
                    let (ha, ta) = ra.split_at(n.min(ra.len()));
                    let (hb, tb) = rb.split_at(n.min(rb.len()));
                    out.extend(self.combine(c, ha, hb, depth)?);
                    (ra, rb) = (ta, tb);
                }
                Ok(out)
            }
            "red.repair" => {
                // s = p(s1, s2); each consumer state repaired to s by h,
                // then merged.
                let (p, c, _, h) = repair_parts(args).ok_or("malformed repair")?;
                let np = arity(p, &self.sigs).ok_or("malformed repair")?.states;
                let (s1, c1) = a.split_at(np.min(a.len()));
                let (s2, c2) = b.split_at(np.min(b.len()));
                let s = self.combine(p, s1, s2, depth)?;
                let args1: Vec<_> = c1.iter().chain(s1).chain(&s).cloned().collect();
                let args2: Vec<_> = c2.iter().chain(s2).chain(&s).cloned().collect();
                let c1 = self.inline(h, args1, depth)?;
                let c2 = self.inline(h, args2, depth)?;
                let cs = self.combine(c, &c1, &c2, depth)?;
                Ok(s.into_iter().chain(cs).collect())
            }
            _ => Err(format!(
                "reducer `{r}` (not covered by the TTIR path; sum, max, min, their products and repairs are)"
            )),
        }
    }

    /// `par.reduce`: an `scf.for` over the tiles of its axis, carrying one
    /// f32 accumulator per state field (started at the reducer's
    /// identity); each iteration computes the tile's states with the axis
    /// bound to the loop's tile and merges them into the accumulators.
    fn par_reduce(&mut self, v: ValueId, lay: &Layout) -> R<Val<'c, 'm>> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let r = op
            .attrs
            .get("reducer")
            .ok_or("par.reduce without reducer")?
            .clone();
        let axis = op
            .attrs
            .get("axis")
            .and_then(Attr::as_symbol)
            .ok_or("par.reduce without axis")?
            .to_string();
        let x = op.operands[0];
        let outer = self.scopes.len() - 1;
        // A reduction over an axis already bound (a grid axis, an enclosing
        // loop) runs its own loop over it: inside, the axis has fresh
        // offsets, and what was computed from the outer binding is hidden.
        let shadow = self.bound.get(&axis).copied().map(|b| {
            let memo = self.memo.clone();
            self.memo.retain(|_, x| x.depth() < b.0);
            (b, self.idx.get(&axis).copied(), memo)
        });
        // A result tiled by the axis it reduces over needs both bindings in
        // one block: its tiles are asked for under an alias bound like the
        // outer binding.
        let mut alias = None;
        let inner_lay: Layout = if lay.iter().flatten().any(|a| *a == axis) {
            let Some((b, _, _)) = &shadow else {
                return Err(format!(
                    "a value tiled by @{axis} where @{axis} is not bound"
                ));
            };
            let al = format!("{axis}@{}", self.alias.len());
            self.bound.insert(al.clone(), *b);
            self.alias.insert(al.clone(), axis.clone());
            let l = lay
                .iter()
                .map(|a| match a {
                    Some(x) if *x == axis => Some(al.clone()),
                    _ => a.clone(),
                })
                .collect();
            alias = Some(al);
            l
        } else {
            lay.clone()
        };
        let leaves = leaf_shapes(self.p, f.ty(v))?;
        let idents = efir_dialect_red::identity(&r)
            .ok_or_else(|| format!("reducer `{r}` without an identity"))?;
        if idents.len() != leaves.len() {
            return Err("the reducer's state count differs from the result's fields".into());
        }
        let mut inits = Vec::new();
        let mut acc_dims = Vec::new();
        let mut acc_tys = Vec::new();
        for ((er, _), id) in leaves.iter().zip(&idents) {
            let (dims, _) = self.dims(er, lay)?;
            let shape: Vec<u64> = dims.iter().map(|d| d.size).collect();
            inits.push(self.splat_const(outer, *id, &shape, DType::F32)?);
            acc_tys.push(self.ty(&ty_text(&shape, "f32"))?);
            acc_dims.push(dims);
        }
        let nt = tiles(self.p, &axis)?;
        let lb = self.const_i32(0, 0)?;
        let ub = self.const_i32(0, nt as i64)?;
        let st = self.const_i32(0, 1)?;
        let i32t = self.ty("i32")?;
        let mut block_args = vec![(i32t, self.loc)];
        block_args.extend(acc_tys.iter().map(|t| (*t, self.loc)));
        let region = Region::new();
        region.append_block(Block::new(&block_args));
        let mut operands = vec![lb, ub, st];
        operands.extend(&inits);
        let forop = OperationBuilder::new("scf.for", self.loc)
            .add_operands(&operands)
            .add_results(&acc_tys)
            .add_regions([region])
            .build()
            .map_err(|e| format!("scf.for: {e}"))?;
        let fref = self.place(outer, forop);
        let body = fref
            .region(0)
            .map_err(|e| e.to_string())?
            .first_block()
            .ok_or("scf.for without a block")?;
        self.scopes.push(Scope {
            block: body,
            anchor: Some(fref),
        });
        let inner = self.scopes.len() - 1;
        let iv: Value = body.argument(0).map_err(|e| e.to_string())?.into();
        let mut accs = Vec::new();
        for (i, dims) in acc_dims.iter().enumerate() {
            accs.push(Blk {
                v: body.argument(i + 1).map_err(|e| e.to_string())?.into(),
                dims: dims.clone(),
                dt: DType::F32,
                depth: inner,
            });
        }
        let res = self
            .bind(&axis, iv, inner)
            .and_then(|_| self.reduce_iteration(&r, x, &inner_lay, &accs, inner));
        // Close the loop whatever happened, then report.
        let yielded = match res {
            Ok(ms) => self.op(inner, "scf.yield", &ms, &[], &[]).map(|_| ()),
            Err(e) => Err(e),
        };
        self.bound.remove(&axis);
        self.idx.remove(&axis);
        self.memo.retain(|_, b| b.depth() < inner);
        self.scopes.pop();
        if let Some((b, idx, memo)) = shadow {
            self.bound.insert(axis.clone(), b);
            if let Some(i) = idx {
                self.idx.insert(axis.clone(), i);
            }
            // What was computed outside the loop does not depend on its
            // binding of the axis (that lives at the loop's depth).
            let fresh = std::mem::replace(&mut self.memo, memo);
            for (k, x) in fresh {
                self.memo.entry(k).or_insert(x);
            }
        }
        if let Some(al) = alias {
            self.bound.remove(&al);
        }
        yielded?;
        let mut states = Vec::new();
        for (i, dims) in acc_dims.into_iter().enumerate() {
            states.push(Blk {
                v: fref.result(i).map_err(|e| e.to_string())?.into(),
                dims,
                dt: DType::F32,
                depth: outer,
            });
        }
        self.finish(v, lay, states)
    }

    /// One iteration of a `par.reduce` loop (at depth `inner`): the tile's
    /// states of `x`, merged into the accumulators `accs`.
    fn reduce_iteration(
        &mut self,
        r: &Attr,
        x: ValueId,
        inner_lay: &Layout,
        accs: &[Blk<'c, 'm>],
        inner: usize,
    ) -> R<Vec<Value<'c, 'm>>> {
        let xs = self.emit_val(x, inner_lay)?.blocks();
        if xs.len() != accs.len() {
            return Err("the tile states and the accumulators differ in count".into());
        }
        let mut ts = Vec::new();
        for (b, a) in xs.iter().zip(accs) {
            if b.shape() != a.shape() {
                return Err(format!(
                    "a tile state block {:?} where its accumulator is {:?}",
                    b.shape(),
                    a.shape()
                ));
            }
            let mut t = self.cast(b, DType::F32)?;
            t.depth = inner;
            ts.push(t);
        }
        let merged = self.combine(r, accs, &ts, inner)?;
        Ok(merged.into_iter().map(|b| b.v).collect())
    }

    fn matmul(&mut self, v: ValueId, lay: &Layout) -> R<Blk<'c, 'm>> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let (a, b) = (op.operands[0], op.operands[1]);
        let (ea, _) = static_shape(self.p, f.ty(a))?;
        let (eb, _) = static_shape(self.p, f.ty(b))?;
        let (er, rdt) = static_shape(self.p, f.ty(v))?;
        let (ra, rb, r) = (ea.len(), eb.len(), er.len());
        if ra < 2 || rb < 2 || r < 2 {
            return Err("a matmul of vectors (not covered by the TTIR path)".into());
        }
        // Leading (batch) dims as the result's, stretched unit dims whole;
        // rows and columns from the request, K as the operand is split.
        let side = |e: &[u64]| -> Layout {
            let k = r - e.len();
            (0..e.len() - 2)
                .map(|j| {
                    if e[j] == 1 && er[j + k] != 1 {
                        None
                    } else {
                        lay[j + k].clone()
                    }
                })
                .collect()
        };
        let kax = layout_of(f.ty(a))[ra - 1].clone();
        let mut la = side(&ea);
        la.extend([lay[r - 2].clone(), kax.clone()]);
        let mut lb = side(&eb);
        lb.extend([kax.clone(), lay[r - 1].clone()]);
        let (dims, depth0) = self.dims(&er, lay)?;
        let shape: Vec<u64> = dims.iter().map(|d| d.size).collect();
        if shape[..r - 2].iter().any(|n| *n != 1) {
            return Err(
                "a batched matmul with batch blocks over 1 (not covered by the TTIR path)".into(),
            );
        }
        let shape2 = shape[r - 2..].to_vec();
        let auto = format!("r{}", ea[ra - 1]);
        let (x, depth) = if kax.is_none()
            && ea[ra - 1] > AUTO_K
            && self.p.axes.contains_key(&auto)
            && !self.bound.contains_key(&auto)
        {
            // A K loop: scf.for over K tiles with an f32 accumulator.
            let outer = self.scopes.len() - 1;
            let bk = self.block_of(&auto)?;
            let nt = ea[ra - 1].div_ceil(bk) as i64;
            let lb0 = self.const_i32(0, 0)?;
            let ub = self.const_i32(0, nt)?;
            let st = self.const_i32(0, 1)?;
            let acc0 = self.splat_const(outer.max(depth0), 0.0, &shape2, DType::F32)?;
            let acc_t = ty_text(&shape2, "f32");
            let at = self.ty(&acc_t)?;
            let i32t = self.ty("i32")?;
            let region = Region::new();
            region.append_block(Block::new(&[(i32t, self.loc), (at, self.loc)]));
            let forop = OperationBuilder::new("scf.for", self.loc)
                .add_operands(&[lb0, ub, st, acc0])
                .add_results(&[at])
                .add_regions([region])
                .build()
                .map_err(|e| format!("scf.for: {e}"))?;
            let fref = self.place(outer, forop);
            let body = fref
                .region(0)
                .map_err(|e| e.to_string())?
                .first_block()
                .ok_or("scf.for without a block")?;
            self.scopes.push(Scope {
                block: body,
                anchor: Some(fref),
            });
            let inner = self.scopes.len() - 1;
            let iv: Value = body.argument(0).map_err(|e| e.to_string())?.into();
            let acc: Value = body.argument(1).map_err(|e| e.to_string())?.into();
            la[ra - 1] = Some(auto.clone());
            lb[rb - 2] = Some(auto.clone());
            let res = self
                .bind(&auto, iv, inner)
                .and_then(|_| self.product(v, &la, &lb, Some(acc), inner));
            // Close the loop whatever happened, then report.
            let yielded = match res {
                Ok((x, _)) => self.op(inner, "scf.yield", &[x], &[], &[]).map(|_| ()),
                Err(e) => Err(e),
            };
            self.bound.remove(&auto);
            self.memo.retain(|_, b| b.depth() < inner);
            self.scopes.pop();
            yielded?;
            let out: Value = fref.result(0).map_err(|e| e.to_string())?.into();
            (out, outer.max(depth0))
        } else {
            let (x, d) = self.product(v, &la, &lb, None, 0)?;
            (x, d.max(depth0))
        };
        let x = if r > 2 {
            self.val(depth, "tt.reshape", &[x], &ty_text(&shape, "f32"), &[])?
        } else {
            x
        };
        let blk = Blk {
            v: x,
            dims,
            dt: DType::F32,
            depth,
        };
        self.cast(&blk, rdt)
    }

    /// `x` (a block whose dims but the last two are single elements) as a
    /// matrix.
    fn matrix(&self, x: &Blk<'c, 'm>) -> R<Blk<'c, 'm>> {
        let r = x.dims.len();
        if r == 2 {
            return Ok(x.clone());
        }
        if x.dims[..r - 2].iter().any(|d| d.size != 1) {
            return Err(
                "a batched matmul with batch blocks over 1 (not covered by the TTIR path)".into(),
            );
        }
        let dims = x.dims[r - 2..].to_vec();
        let s: Vec<u64> = dims.iter().map(|d| d.size).collect();
        let v = self.val(
            x.depth,
            "tt.reshape",
            &[x.v],
            &ty_text(&s, dtype_name(x.dt)),
            &[],
        )?;
        Ok(Blk {
            v,
            dims,
            dt: x.dt,
            depth: x.depth,
        })
    }

    /// The f32 product (a matrix) of the operands of matmul `v` in tilings
    /// `la`, `lb` (plus `acc`, at loop depth `at`), and its depth.
    fn product(
        &mut self,
        v: ValueId,
        la: &Layout,
        lb: &Layout,
        acc: Option<Value<'c, 'm>>,
        at: usize,
    ) -> R<(Value<'c, 'm>, usize)> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let xa = self.emit(op.operands[0], la)?;
        let xb = self.emit(op.operands[1], lb)?;
        let depth = xa.depth.max(xb.depth).max(at);
        let (mut xa, mut xb) = (xa, xb);
        xa.depth = depth;
        xb.depth = depth;
        let xa = self.matrix(&xa)?;
        let xb = self.matrix(&xb)?;
        // Zero the K padding of both operands.
        let xa = self.pad(&xa, 1, 0.0)?;
        let xb = self.pad(&xb, 0, 0.0)?;
        let (bm, bk, bn) = (xa.dims[0].size, xa.dims[1].size, xb.dims[1].size);
        let shape = vec![bm, bn];
        let ft = ty_text(&shape, "f32");
        let acc = match acc {
            Some(x) => x,
            None => self.splat_const(depth, 0.0, &shape, DType::F32)?,
        };
        if bm >= 16 && bn >= 16 && bk >= 16 {
            // Same 16-bit type: a 16-bit dot; otherwise f32 (tf32, as tl.dot).
            let dt = if xa.dt == xb.dt && matches!(xa.dt, DType::F16 | DType::BF16) {
                xa.dt
            } else {
                DType::F32
            };
            let xa = self.cast(&xa, dt)?;
            let xb = self.cast(&xb, dt)?;
            let d = self.val(
                depth,
                "tt.dot",
                &[xa.v, xb.v, acc],
                &ft,
                &[
                    ("inputPrecision", "0 : i32".into()),
                    ("maxNumImpreciseAcc", "0 : i32".into()),
                ],
            )?;
            return Ok((d, depth));
        }
        // A block under 16: multiply and sum in registers.
        let xa = self.cast(&xa, DType::F32)?;
        let xb = self.cast(&xb, DType::F32)?;
        let s3 = [bm, bk, bn];
        let t3 = ty_text(&s3, "f32");
        let a3 = self.val(
            depth,
            "tt.expand_dims",
            &[xa.v],
            &ty_text(&[bm, bk, 1], "f32"),
            &[("axis", "2 : i32".into())],
        )?;
        let a3 = self.bcast(depth, a3, &[bm, bk, 1], &s3, "f32")?;
        let b3 = self.val(
            depth,
            "tt.expand_dims",
            &[xb.v],
            &ty_text(&[1, bk, bn], "f32"),
            &[("axis", "0 : i32".into())],
        )?;
        let b3 = self.bcast(depth, b3, &[1, bk, bn], &s3, "f32")?;
        let p = self.val(depth, "arith.mulf", &[a3, b3], &t3, &[])?;
        let pb = Blk {
            v: p,
            dims: vec![xa.dims[0], xa.dims[1], xb.dims[1]],
            dt: DType::F32,
            depth,
        };
        let s = self.tt_reduce(&pb, 1, "arith.addf")?;
        let d = self.val(depth, "arith.addf", &[acc, s], &ft, &[])?;
        Ok((d, depth))
    }

    /// The kernel: decompose the program id, compute the body, store it.
    fn run(&mut self, k: &Kernel, nts: &[u64]) -> R<()> {
        let f = self.p.func;
        let pid = self.val(
            0,
            "tt.get_program_id",
            &[],
            "i32",
            &[("axis", "0 : i32".into())],
        )?;
        let mut rest = pid;
        for ((a, _), nt) in k.grid.iter().zip(nts) {
            let c = self.const_i32(0, *nt as i64)?;
            let idx = self.val(0, "arith.remsi", &[rest, c], "i32", &[])?;
            rest = self.val(0, "arith.divsi", &[rest, c], "i32", &[])?;
            self.bind(a, idx, 0)?;
        }
        let body_ty = f.ty(k.body).clone();
        let mut lay = layout_of(&body_ty);
        for (a, d) in &k.grid {
            if let Some(d) = d {
                let own = body_ty.leaves().iter().any(|l| l.state.contains_key(a));
                if !own && lay.get(*d).is_some_and(Option::is_none) {
                    lay[*d] = Some(a.clone());
                }
            }
        }
        let blocks = self.emit_op(k.body, &lay)?.blocks();
        let leaves = leaf_shapes(self.p, f.ty(k.root))?;
        if leaves.len() != blocks.len() {
            return Err("the kernel's value and its buffer have different fields".into());
        }
        // A collect kernel writes the slice of its buffer at its tile of
        // the collect axis.
        let lead = match k.grid.iter().find(|(_, d)| d.is_none()) {
            Some((a, _)) if k.collect => {
                let i = *self.idx.get(a).ok_or("the collect axis is not bound")?;
                Some((i, tiles(self.p, a)?))
            }
            _ => None,
        };
        for (leaf, ((exts, dt), x)) in leaves.into_iter().zip(blocks).enumerate() {
            let x = self.cast(&x, dt)?;
            let exts = if lead.is_some() {
                &exts[1..]
            } else {
                &exts[..]
            };
            let ptr = self.ptrs((k.root, leaf), &x.dims, exts, dt, 0, lead)?;
            match self.mask(&x.dims, 0)? {
                None => self.op(0, "tt.store", &[ptr, x.v], &[], &[])?,
                Some(m) => self.op(0, "tt.store", &[ptr, x.v, m], &[], &[])?,
            };
        }
        self.op(0, "tt.return", &[], &[], &[])?;
        Ok(())
    }
}
