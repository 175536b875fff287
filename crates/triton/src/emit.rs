//! Triton Python for a [`Plan`].

use crate::causal::{self, Fact};
use crate::{py_ident, tl_dtype, torch_dtype, Extent, Kernel, Plan};
use efir_dialect_red::{arity, repair_parts};
use efir_ir::dialect::Signatures;
use efir_ir::{Attr, AxisState, DType, Type, ValueId};
use indexmap::IndexSet;
use std::collections::HashMap;
use std::fmt::Write;

mod bcast;
mod direct;
mod estimate;
mod fuse;
mod matmul;
mod reduce;
mod slices;
mod views;

use estimate::estimate_of;
pub use estimate::{estimate, Estimate};

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

struct Scope {
    header: String,
    lines: Vec<String>,
}

struct KernelEmitter<'p, 'a> {
    p: &'p Plan<'a>,
    sigs: Signatures,
    scopes: Vec<Scope>,
    memo: HashMap<(ValueId, Layout), Val>,
    bound: HashMap<String, usize>,
    offs: HashMap<String, (String, usize)>,
    n: usize,
    loads: IndexSet<(ValueId, usize)>,
    /// The loop axis of each scope below the kernel's top level.
    loops: Vec<String>,
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
}

/// One load, store or matmul of a kernel, per program: element sizes (block
/// lengths), and the loops it runs in.
#[derive(Clone, Debug)]
struct Work {
    bytes: u64,
    sizes: Vec<String>,
    loops: Vec<String>,
    flops: bool,
}

fn dtype_bytes(d: DType) -> u64 {
    match d {
        DType::F16 | DType::BF16 => 2,
        DType::F32 | DType::I32 => 4,
        DType::F64 | DType::I64 => 8,
        DType::I1 => 1,
    }
}

fn layout_of(t: &Type) -> Layout {
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

/// The Triton expression of a pointwise op over operand expressions.
fn pointwise(
    op: &str,
    attrs: &indexmap::IndexMap<String, Attr>,
    a: &[String],
    dt: DType,
) -> Result<String, String> {
    let x = |i: usize| a[i].clone();
    let f32 = |i: usize| format!("({}).to(tl.float32)", a[i]);
    let back = |e: String| format!("({e}).to({})", tl_dtype(dt));
    // bf16 arithmetic is computed in f32 and rounded once (the same result:
    // f32 holds the exact sum, difference or product of two bf16 values
    // closely enough to round correctly), as Inductor does; Triton's CPU
    // interpreter computes bf16 arithmetic wrongly.
    let wide = dt == DType::BF16;
    let arith = |e: String| if wide { back(e) } else { e };
    let y = |i: usize| if wide { f32(i) } else { x(i) };
    Ok(match op {
        "ew.add" => arith(format!("{} + {}", y(0), y(1))),
        "ew.sub" => arith(format!("{} - {}", y(0), y(1))),
        "ew.mul" => arith(format!("{} * {}", y(0), y(1))),
        "ew.div" => arith(format!("{} / {}", y(0), y(1))),
        "ew.pow" => back(format!("tl.exp({} * tl.log({}))", f32(1), f32(0))),
        "ew.max" => arith(format!("tl.maximum({}, {})", y(0), y(1))),
        "ew.min" => arith(format!("tl.minimum({}, {})", y(0), y(1))),
        "ew.neg" => arith(format!("-({})", y(0))),
        "ew.abs" => arith(format!("tl.abs({})", y(0))),
        "ew.exp" => back(format!("tl.exp({})", f32(0))),
        "ew.log" => back(format!("tl.log({})", f32(0))),
        "ew.sqrt" => back(format!("tl.sqrt({})", f32(0))),
        "ew.rsqrt" => back(format!("tl.rsqrt({})", f32(0))),
        "ew.sigmoid" => back(format!("tl.sigmoid({})", f32(0))),
        "ew.tanh" => back(format!("2.0 * tl.sigmoid(2.0 * {}) - 1.0", f32(0))),
        "ew.erf" => back(format!("tl.erf({})", f32(0))),
        "ew.select" => format!("tl.where({}, {}, {})", x(0), x(1), x(2)),
        "ew.cast" => back(x(0)),
        "ew.cmp" => {
            let p = match attrs.get("pred").and_then(Attr::as_word) {
                Some("lt") => "<",
                Some("le") => "<=",
                Some("gt") => ">",
                Some("ge") => ">=",
                Some("eq") => "==",
                Some("ne") => "!=",
                _ => return Err("ew.cmp without a predicate".into()),
            };
            format!("{} {p} {}", x(0), x(1))
        }
        other => return Err(format!("no Triton lowering for `{other}`")),
    })
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

    /// Bind axis `a` to tile index `idx` at `depth`.
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

    fn bind(&mut self, a: &str, idx: &str, depth: usize) {
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
        let b = self.block_of(a);
        self.line(depth, format!("{var} = {idx} * {b} + tl.arange(0, {b})"));
        self.set_binding(a, (depth, Some(idx.to_string()), Some((var, depth))));
    }

    fn dim(&mut self, ext: &Extent, axis: Option<&str>) -> Result<(BD, usize), String> {
        match axis {
            Some(a) => {
                let Some(d) = self.bound.get(a).copied() else {
                    return Err(format!(
                        "a value tiled by @{a} is needed where @{a} is neither a grid axis nor a loop"
                    ));
                };
                let offs = self
                    .offs
                    .get(&format!("axis:{a}"))
                    .map(|(v, _)| v.clone())
                    .ok_or_else(|| format!("@{a} is bound without offsets"))?;
                Ok((
                    BD {
                        size: self.block_of(a),
                        offs,
                        ext: ext.kernel(),
                        even: self.even_of(a, ext),
                    },
                    d,
                ))
            }
            None => {
                // A whole dim that is a matmul's M, N or K under 16 is
                // padded to 16 (masked), so that the product is a `tl.dot`
                // (see [`crate::small_dot_extents`]).
                let p = match ext {
                    Extent::N(n) if *n > 1 && self.pad16.contains(n) => "16".to_string(),
                    _ => ext.padded(),
                };
                let key = format!("ar:{p}");
                let var = match self.offs.get(&key) {
                    Some((v, _)) => v.clone(),
                    None => {
                        let v = format!("ar_{}", py_ident(&p));
                        self.line(0, format!("{v} = tl.arange(0, {p})"));
                        self.offs.insert(key, (v.clone(), 0));
                        v
                    }
                };
                let even = if p == ext.kernel() {
                    Even::Yes
                } else {
                    Even::No
                };
                Ok((
                    BD {
                        size: p,
                        offs: var,
                        ext: ext.kernel(),
                        even,
                    },
                    0,
                ))
            }
        }
    }

    /// Whether the blocks of axis (or alias) `a` divide `ext`, the extent of
    /// a dim it tiles.
    fn even_of(&self, a: &str, ext: &Extent) -> Even {
        let a = self.alias.get(a).map_or(a, String::as_str);
        let Some(info) = self.p.axes.get(a) else {
            return Even::No;
        };
        if info.extent != *ext {
            return Even::No;
        }
        match ext {
            Extent::N(n) if info.domain.iter().all(|b| *b > 0 && n % b == 0) => Even::Yes,
            _ => Even::Flag(format!("EVEN_{}", py_ident(a))),
        }
    }

    /// The mask of the dims whose blocks may not divide their extent, and
    /// the flags under which they do: `(always, flagged, flags)` where
    /// `always` holds the terms of dims never known even, `flagged` those of
    /// dims even under a flag.
    fn mask_parts(dims: &[BD]) -> (Vec<String>, Vec<String>, Vec<String>) {
        let r = dims.len();
        let (mut always, mut flagged, mut flags) = (Vec::new(), Vec::new(), Vec::new());
        for (i, d) in dims.iter().enumerate() {
            let t = format!("({} < {})", along(&d.offs, i, r), d.ext);
            match &d.even {
                Even::Yes => {}
                Even::No => always.push(t),
                Even::Flag(f) => {
                    flagged.push(t);
                    if !flags.contains(f) {
                        flags.push(f.clone());
                    }
                }
            }
        }
        (always, flagged, flags)
    }

    /// Lines of a statement `make(mask)` over `dims`: `make(None)` where every
    /// block divides its extent, `make(Some(mask))` where some may not, and
    /// where that depends on `EVEN_*` flags, both under a constexpr `if`.
    fn masked(dims: &[BD], make: impl Fn(Option<&str>) -> String) -> Vec<String> {
        let (always, flagged, flags) = Self::mask_parts(dims);
        let join = |ts: &[String]| (!ts.is_empty()).then(|| ts.join(" & "));
        let partial = join(&always);
        if flags.is_empty() {
            return vec![make(partial.as_deref())];
        }
        let all: Vec<String> = always.iter().chain(&flagged).cloned().collect();
        let full = join(&all);
        vec![
            format!("if {}:", flags.join(" and ")),
            format!("    {}", make(partial.as_deref())),
            "else:".into(),
            format!("    {}", make(full.as_deref())),
        ]
    }

    /// `x` with the elements beyond the extent of dim `d` (of a rank-`r`
    /// block) replaced by `fill`, where blocks may not divide it.
    fn pad_lines(var: &str, x: &str, bd: &BD, d: usize, r: usize, fill: &str) -> Vec<String> {
        let w = format!(
            "{var} = tl.where({} < {}, {x}, {fill})",
            along(&bd.offs, d, r),
            bd.ext
        );
        match &bd.even {
            Even::Yes => vec![format!("{var} = {x}")],
            Even::No => vec![w],
            Even::Flag(f) => vec![
                format!("if {f}:"),
                format!("    {var} = {x}"),
                "else:".into(),
                format!("    {w}"),
            ],
        }
    }

    fn dims(&mut self, exts: &[Extent], lay: &Layout) -> Result<(Vec<BD>, usize), String> {
        let mut out = Vec::new();
        let mut depth = 0;
        for (e, a) in exts.iter().zip(lay) {
            let (d, dp) = self.dim(e, a.as_deref())?;
            depth = depth.max(dp);
            out.push(d);
        }
        Ok((out, depth))
    }

    fn mask(dims: &[BD]) -> String {
        let r = dims.len();
        let m: Vec<String> = dims
            .iter()
            .enumerate()
            .map(|(i, d)| format!("({} < {})", along(&d.offs, i, r), d.ext))
            .collect();
        m.join(" & ")
    }

    fn ptr(
        &self,
        name: &str,
        dims: &[BD],
        exts: &[Extent],
        lead: Option<(&str, String)>,
    ) -> String {
        let r = dims.len();
        let offs: Vec<String> = dims
            .iter()
            .enumerate()
            .map(|(i, d)| along(&d.offs, i, r))
            .collect();
        self.ptr_at(name, &offs, exts, lead)
    }

    /// The pointers of buffer `name` (of extents `exts`) at the element
    /// offsets `offs` (one broadcastable expression per dim after `lead`).
    fn ptr_at(
        &self,
        name: &str,
        offs: &[String],
        exts: &[Extent],
        lead: Option<(&str, String)>,
    ) -> String {
        // Row-major strides over the buffer's extents (`lead` is a leading
        // collected dim indexed by a scalar).
        let all: Vec<String> = exts.iter().map(Extent::kernel).collect();
        let stride = |i: usize| -> String {
            if i + 1 >= all.len() {
                "1".into()
            } else {
                all[i + 1..].join(" * ")
            }
        };
        let off = lead.is_some() as usize;
        // Offsets into a buffer of 2^31 elements or more are 64-bit.
        // (A collected dim has at most as many tiles as its axis's extent.)
        let elems = exts.iter().try_fold(1u128, |n, e| match e {
            Extent::N(x) => Some(n * *x as u128),
            Extent::Tiles(a) => match self.p.axes.get(a).map(|i| &i.extent) {
                Some(Extent::N(x)) => Some(n * *x as u128),
                _ => None,
            },
        });
        let wide = elems.is_none_or(|n| n >= 1 << 31);
        let idx64 = |x: String| {
            if wide {
                format!("({x}).to(tl.int64)")
            } else {
                x
            }
        };
        let mut terms = Vec::new();
        if let Some((idx, _)) = &lead {
            terms.push(format!("{} * ({})", idx64(idx.to_string()), stride(0)));
        }
        for (i, o) in offs.iter().enumerate() {
            terms.push(format!("{} * ({})", idx64(o.clone()), stride(i + off)));
        }
        if terms.is_empty() {
            name.to_string()
        } else {
            format!("{name} + {}", terms.join(" + "))
        }
    }

    fn load(&mut self, v: ValueId, lay: &Layout) -> Result<Val, String> {
        let f = self.p.func;
        let t = f.ty(v).clone();
        let leaves: Vec<_> = t.leaves().into_iter().cloned().collect();
        let mut fields = Vec::new();
        for (i, l) in leaves.iter().enumerate() {
            let exts: Vec<Extent> = l.shape.iter().map(Extent::of).collect();
            let (dims, depth) = self.dims(&exts, lay)?;
            self.loads.insert((v, i));
            let name = buf_param(f, v, i);
            let var = self.fresh("x");
            let ptr = self.ptr(&name, &dims, &exts, None);
            for l in Self::masked(&dims, |m| match m {
                None => format!("{var} = tl.load({ptr})"),
                Some(m) => format!("{var} = tl.load({ptr}, mask={m}, other=0)"),
            }) {
                self.line(depth, l);
            }
            self.work.push(Work {
                bytes: dtype_bytes(l.dtype),
                sizes: dims.iter().map(|d| d.size.clone()).collect(),
                loops: self.loops[..depth].to_vec(),
                flops: false,
            });
            self.note_load(&var, &name, &exts, &dims, l.dtype, depth);
            fields.push(Val::T(Blk {
                var,
                dims,
                dtype: l.dtype,
                depth,
            }));
        }
        Ok(if matches!(t, Type::Tuple(_)) {
            Val::Tup(fields)
        } else {
            fields.pop().ok_or("empty value")?
        })
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
        // Views and widening casts of 16-bit floats hold values exactly
        // representable in 16 bits (see [`bcast`]'s dots).
        let f = self.p.func;
        if let (Some(i), Val::T(b)) = (self.p.def[v.index()], &x) {
            let op = &f.ops[i];
            let view = matches!(
                op.name.as_str(),
                "tensor.broadcast" | "tensor.reshape" | "tensor.transpose" | "ew.cast"
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

    fn emit_op(&mut self, v: ValueId, lay: &Layout) -> Result<Val, String> {
        let f = self.p.func;
        let Some(i) = self.p.def[v.index()] else {
            return self.load(v, lay);
        };
        if let (Some((g, l)), Some(Fact::Mask { i: di, j: dj })) =
            (&self.unmasked, self.facts[v.index()])
        {
            if lay.get(di) == Some(&Some(g.clone())) && lay.get(dj) == Some(&Some(l.clone())) {
                // A causal mask on a tile wholly below the diagonal: all
                // true (a block of single elements, at the loop's depth).
                let t = f.ty(v).as_tensor().ok_or("expected a tensor")?.clone();
                let exts: Vec<Extent> = t.shape.iter().map(Extent::of).collect();
                let (dims, _) = self.dims(&exts, lay)?;
                let depth = self.top();
                let var = self.fresh("t");
                let ones = vec!["1"; dims.len()].join(", ");
                self.line(depth, format!("{var} = tl.full([{ones}], 1, tl.int1)"));
                self.set_units(&var, vec![true; dims.len()]);
                return Ok(Val::T(Blk {
                    var,
                    dims,
                    dtype: t.dtype,
                    depth,
                }));
            }
        }
        let op = &f.ops[i];
        let name = op.name.as_str();
        let rt = f.ty(v).clone();
        let rank = extents(&rt).len();
        match name {
            "par.partition" | "par.replicate" | "par.combine" => self.emit(op.operands[0], lay),
            "tensor.tuple" => {
                let mut out = Vec::new();
                for o in &op.operands {
                    if extents(f.ty(*o)).len() != lay.len() {
                        return Err("a tuple of values of different ranks inside a kernel".into());
                    }
                    out.push(self.emit(*o, lay)?);
                }
                Ok(Val::Tup(out))
            }
            "tensor.get" => {
                let idx = op.attrs.get("index").and_then(Attr::as_int).unwrap_or(0) as usize;
                match self.emit(op.operands[0], lay)? {
                    Val::Tup(fs) => fs
                        .get(idx)
                        .cloned()
                        .ok_or_else(|| "tensor.get out of range".into()),
                    Val::T(b) => Ok(Val::T(b)),
                }
            }
            "tensor.full" => {
                let value = literal(op.attrs.get("value").unwrap_or(&Attr::Int(0)));
                let t = rt.as_tensor().ok_or("expected a tensor")?;
                let exts: Vec<Extent> = t.shape.iter().map(Extent::of).collect();
                let (dims, depth) = self.dims(&exts, lay)?;
                let var = self.fresh("c");
                self.line(
                    depth,
                    format!(
                        "{var} = tl.full({}, {value}, {})",
                        shape_list(&dims),
                        tl_dtype(t.dtype)
                    ),
                );
                Ok(Val::T(Blk {
                    var,
                    dims,
                    dtype: t.dtype,
                    depth,
                }))
            }
            "tensor.iota" => {
                let d = op.attrs.get("dim").and_then(Attr::as_int).unwrap_or(0) as usize;
                let t = rt.as_tensor().ok_or("expected a tensor")?;
                let exts: Vec<Extent> = t.shape.iter().map(Extent::of).collect();
                let (dims, depth) = self.dims(&exts, lay)?;
                // Unit along every dim but its own (see [`bcast`]).
                let e = format!(
                    "({}).to({})",
                    along(&dims[d].offs, d, dims.len()),
                    tl_dtype(t.dtype)
                );
                let r = dims.len();
                let x = self.result(v, lay, e, depth)?;
                if let Val::T(b) = &x {
                    self.set_units(&b.var, (0..r).map(|j| j != d).collect());
                }
                Ok(x)
            }
            "tensor.broadcast" => {
                let a = op.operands[0];
                let ea = extents(f.ty(a));
                let er = extents(&rt);
                let k = er.len() - ea.len();
                let la: Layout = (0..ea.len())
                    .map(|j| {
                        if ea[j] == Extent::N(1) && er[j + k] != Extent::N(1) {
                            None
                        } else {
                            lay[j + k].clone()
                        }
                    })
                    .collect();
                let x = self.block(a, &la)?;
                let (_, depth) = self.dims(&er, lay)?;
                // Lazy (see [`bcast`]): unit along the new and the stretched
                // dims.
                let ux = self.units(&x.var, ea.len());
                let u: Units = (0..rank)
                    .map(|j| {
                        j < k || ux[j - k] || (ea[j - k] == Extent::N(1) && er[j] != Extent::N(1))
                    })
                    .collect();
                let e = expand(&x.var, x.dims.len(), rank);
                let y = self.result(v, lay, e, depth.max(x.depth))?;
                if let Val::T(b) = &y {
                    self.set_units(&b.var, u);
                    if x.dims.len() == ea.len() {
                        let new = rank - ea.len();
                        self.note_view(&b.var, &x.var, |m| {
                            std::iter::repeat_n(None, new)
                                .chain(m.iter().copied())
                                .collect()
                        });
                    }
                }
                Ok(y)
            }
            "tensor.transpose" => {
                let perm = op
                    .attrs
                    .get("perm")
                    .and_then(Attr::as_int_array)
                    .ok_or("transpose without perm")?;
                let mut la: Layout = vec![None; rank];
                for (k, p) in perm.iter().enumerate() {
                    la[*p as usize] = lay[k].clone();
                }
                let x = self.block(op.operands[0], &la)?;
                let ux = self.units(&x.var, rank);
                let u: Units = perm.iter().map(|p| ux[*p as usize]).collect();
                let ps: Vec<String> = perm.iter().map(|p| p.to_string()).collect();
                let e = if rank == 2 && perm == [1, 0] {
                    format!("tl.trans({})", x.var)
                } else {
                    format!("tl.permute({}, ({},))", x.var, ps.join(", "))
                };
                let y = self.result(v, lay, e, x.depth)?;
                if let Val::T(b) = &y {
                    self.set_units(&b.var, u);
                    self.note_view(&b.var, &x.var, |m| {
                        perm.iter()
                            .map(|p| m.get(*p as usize).copied().flatten())
                            .collect()
                    });
                }
                Ok(y)
            }
            "tensor.reshape" => {
                let a = op.operands[0];
                let ea = extents(f.ty(a));
                let er = extents(&rt);
                let nu_a: Vec<usize> = (0..ea.len()).filter(|j| ea[*j] != Extent::N(1)).collect();
                let nu_r: Vec<usize> = (0..er.len()).filter(|j| er[*j] != Extent::N(1)).collect();
                if nu_a.len() != nu_r.len() || nu_a.iter().zip(&nu_r).any(|(x, y)| ea[*x] != er[*y])
                {
                    // A view of a buffer is loaded through index arithmetic.
                    if let Some(r) = self.view_load(v, lay) {
                        return r;
                    }
                    return Err("a reshape that merges or splits dims inside a kernel".into());
                }
                let mut la: Layout = vec![None; ea.len()];
                for (x, y) in nu_a.iter().zip(&nu_r) {
                    la[*x] = lay[*y].clone();
                }
                let x = self.block(a, &la)?;
                let (dims, depth) = self.dims(&er, lay)?;
                let ux = self.units(&x.var, ea.len());
                // A unit dim of the result that is tiled (a row padded to a
                // 16-row dot block) holds one element: it is a lazy broadcast.
                let mut u: Units = (0..er.len())
                    .map(|j| er[j] == Extent::N(1) && lay[j].is_some())
                    .collect();
                for (x, y) in nu_a.iter().zip(&nu_r) {
                    u[*y] = ux[*x];
                }
                let e = format!("tl.reshape({}, {})", x.var, real_shape(&dims, &u));
                let y = self.result(v, lay, e, depth.max(x.depth))?;
                if let Val::T(b) = &y {
                    self.set_units(&b.var, u);
                    let n = er.len();
                    self.note_view(&b.var, &x.var, |m| {
                        let mut out = vec![None; n];
                        for (a, r) in nu_a.iter().zip(&nu_r) {
                            out[*r] = m.get(*a).copied().flatten();
                        }
                        out
                    });
                }
                Ok(y)
            }
            "tensor.reduce" => self.reduce(v, lay),
            "tensor.slice" => self.slice(v, lay),
            "tensor.concat" => self.concat(v, lay),
            "par.reduce" => self.par_reduce(v, lay),
            "tile.matmul" | "tensor.matmul" => self.matmul(v, lay),
            _ if name.starts_with("ew.") => {
                let mut args = Vec::new();
                let mut vars = Vec::new();
                let mut us = Vec::new();
                let mut depth = 0;
                let er = extents(&rt);
                for o in &op.operands {
                    let ea = extents(f.ty(*o));
                    let k = er.len() - ea.len();
                    let la: Layout = (0..ea.len())
                        .map(|j| {
                            if ea[j] == Extent::N(1) && er[j + k] != Extent::N(1) {
                                None
                            } else {
                                lay[j + k].clone()
                            }
                        })
                        .collect();
                    let x = self.block(*o, &la)?;
                    depth = depth.max(x.depth);
                    // An operand's stretched unit-extent dims are unit too.
                    let mut u = self.units(&x.var, ea.len());
                    for (j, uj) in u.iter_mut().enumerate() {
                        *uj |= ea[j] == Extent::N(1) && er[j + k] != Extent::N(1);
                    }
                    us.push((ea.len(), u));
                    args.push(expand(&x.var, x.dims.len(), rank));
                    vars.push(args.last().cloned().unwrap_or_default());
                }
                let dt = rt.as_tensor().ok_or("expected a tensor")?.dtype;
                let e = pointwise(name, &op.attrs, &args, dt)?;
                let y = self.result(v, lay, e, depth)?;
                if let Val::T(b) = &y {
                    self.set_units(&b.var, pointwise_units(rank, &us));
                    if name == "ew.cast" && us[0].0 == rank {
                        let from = f.ty(op.operands[0]).as_tensor().map(|t| t.dtype);
                        if let Some(from) = from {
                            self.note_copy(&b.var, &vars[0], from, dt);
                        }
                    }
                    if name == "ew.mul" && us.iter().all(|(ra, _)| *ra == rank) {
                        self.note_product(&b.var, &vars[0], &vars[1]);
                    }
                }
                Ok(y)
            }
            other => Err(format!("no Triton lowering for `{other}` inside a kernel")),
        }
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

struct EmittedKernel {
    name: String,
    text: String,
    /// The schedule constants the kernel takes, as launch arguments
    /// (`BLOCK_a=block_a`, ...).
    consts: Vec<String>,
    buffers: Vec<(ValueId, usize)>,
    work: Vec<Work>,
    grid: Vec<String>,
}

fn emit_kernel(p: &Plan<'_>, k: &Kernel) -> Result<EmittedKernel, String> {
    let f = p.func;
    let mut e = KernelEmitter::new(p);
    e.pad16 = crate::small_dot_extents(p.func, &p.def, &p.buffer, k.body);
    e.line(0, "pid = tl.program_id(0)".into());
    for (a, _) in &k.grid {
        let id = py_ident(a);
        e.line(0, format!("idx_{id} = pid % NT_{id}"));
        e.line(0, format!("pid = pid // NT_{id}"));
        e.bind(a, &format!("idx_{id}"), 0);
    }
    let body_ty = f.ty(k.body).clone();
    let mut lay = layout_of(&body_ty);
    for (a, d) in &k.grid {
        if let Some(d) = d {
            // Grid axes of the launch that the program does not tile itself.
            let own = body_ty.leaves().iter().any(|l| l.state.contains_key(a));
            if !own && lay.get(*d).is_some_and(Option::is_none) {
                lay[*d] = Some(a.clone());
            }
        }
    }
    let val = e.emit_def(k.body, &lay)?;
    // Where programs along one grid axis do unequal work (a causal loop),
    // that axis varies fastest and its heaviest tiles start first, so that
    // the last wave is not all long programs (the tail of the launch).
    if let Some(i) = e
        .heavy
        .clone()
        .and_then(|h| k.grid.iter().position(|(a, _)| *a == h))
    {
        // The program id as the grid's order would have it, from one where
        // axis `i` varies fastest, reversed.
        let nt = |a: &String| format!("NT_{}", py_ident(a));
        let below: Vec<String> = k.grid[..i].iter().map(|(a, _)| nt(a)).collect();
        let below = if below.is_empty() {
            "1".to_string()
        } else {
            below.join(" * ")
        };
        let h = nt(&k.grid[i].0);
        let (q, r) = (e.fresh("hq"), e.fresh("hr"));
        let lines = [
            format!("{q} = pid % {h}"),
            format!("{r} = pid // {h}"),
            format!(
                "pid = {r} % ({below}) + ({h} - 1 - {q}) * ({below}) + {r} // ({below}) * ({below} * {h})"
            ),
        ];
        e.scopes[0].lines.splice(1..1, lines);
    }
    let blocks = val.blocks();
    let root_ty = f.ty(k.root).clone();
    let leaves: Vec<_> = root_ty.leaves().into_iter().cloned().collect();
    if leaves.len() != blocks.len() {
        return Err("the kernel's value and its buffer have different fields".into());
    }
    let blocks: Vec<Blk> = blocks.into_iter().map(|b| e.full(b)).collect();
    let mut stores = Vec::new();
    for (i, (l, b)) in leaves.iter().zip(&blocks).enumerate() {
        let exts: Vec<Extent> = l.shape.iter().map(Extent::of).collect();
        let name = buf_param(f, k.root, i);
        stores.push((k.root, i));
        let lead = if k.collect {
            let a = &k
                .grid
                .iter()
                .find(|(_, d)| d.is_none())
                .ok_or("collect without axis")?
                .0;
            Some((format!("idx_{}", py_ident(a)), String::new()))
        } else {
            None
        };
        let lead_ref = lead.as_ref().map(|(x, s)| (x.as_str(), s.clone()));
        let ptr = e.ptr(&name, &b.dims, &exts, lead_ref);
        let val = format!("({}).to({})", b.var, tl_dtype(l.dtype));
        for line in KernelEmitter::masked(&b.dims, |m| match m {
            None => format!("tl.store({ptr}, {val})"),
            Some(m) => format!("tl.store({ptr}, {val}, mask={m})"),
        }) {
            e.line(0, line);
        }
        e.work.push(Work {
            bytes: dtype_bytes(l.dtype),
            sizes: b.dims.iter().map(|d| d.size.clone()).collect(),
            loops: Vec::new(),
            flops: false,
        });
    }
    let mut buffers: Vec<(ValueId, usize)> = e.loads.iter().copied().collect();
    for s in stores {
        if !buffers.contains(&s) {
            buffers.push(s);
        }
    }
    let name = format!("_k{}_{}", k.index, py_ident(&f.value(k.root).name));
    let body = fuse::dead_code(fuse::optimize(std::mem::take(&mut e.scopes[0].lines)));
    // Only the schedule constants the body reads are parameters, so that a
    // block of one kernel does not recompile the others.
    let words: std::collections::HashSet<&str> = body
        .iter()
        .flat_map(|l| l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
        .collect();
    let mut params: Vec<String> = buffers.iter().map(|(v, i)| buf_param(f, *v, *i)).collect();
    let mut consts = Vec::new();
    for a in p.axes.keys() {
        let id = py_ident(a);
        for c in ["BLOCK", "NT", "NTP", "EVEN"] {
            let name = format!("{c}_{id}");
            if words.contains(name.as_str()) {
                params.push(format!("{name}: tl.constexpr"));
                consts.push(format!("{name}={}_{id}", c.to_lowercase()));
            }
        }
    }
    let mut text = String::new();
    let grid: Vec<String> = k.grid.iter().map(|(a, _)| format!("@{a}")).collect();
    let _ = writeln!(text, "@triton.jit");
    let _ = writeln!(text, "def {name}({}):", params.join(", "));
    let _ = writeln!(
        text,
        "    \"\"\"Writes %{} ({}); grid over [{}].\"\"\"",
        f.value(k.root).name,
        root_ty,
        grid.join(", ")
    );
    for l in body {
        let _ = writeln!(text, "    {l}");
    }
    Ok(EmittedKernel {
        name,
        text,
        consts,
        buffers,
        work: e.work,
        grid: k.grid.iter().map(|(a, _)| a.clone()).collect(),
    })
}

fn emit_kernel_in_context(p: &Plan<'_>, k: &Kernel) -> Result<EmittedKernel, String> {
    emit_kernel(p, k).map_err(|e| {
        format!(
            "kernel {} (writing `%{}`): {e}",
            k.index,
            p.func.value(k.root).name
        )
    })
}

/// The Python module for a plan: kernels, configuration, host function.
pub fn emit_python(p: &Plan<'_>, source: &str, pipeline: &str) -> Result<String, String> {
    let f = p.func;
    let mut ks = Vec::new();
    for k in &p.kernels {
        ks.push(emit_kernel_in_context(p, k)?);
    }
    let mut out = String::new();
    let _ = writeln!(out, "\"\"\"Triton kernels for `@{}`.", f.name);
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Generated by efir-translate --to-triton from {}",
        crate::doc_escape(source)
    );
    let _ = writeln!(
        out,
        "(pipeline: {}). {} kernel(s):",
        crate::doc_escape(pipeline),
        p.kernels.len()
    );
    for line in crate::describe(p).lines() {
        let _ = writeln!(out, "    {line}");
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Call run(*inputs, config=None) with torch tensors; config overrides"
    );
    let _ = writeln!(out, "DEFAULT_CONFIG (legal values in CONFIG_SPACE).");
    let _ = writeln!(out, "\"\"\"");
    let _ = writeln!(out);
    let _ = writeln!(out, "import torch");
    let _ = writeln!(out, "import triton");
    let _ = writeln!(out, "import triton.language as tl");
    let _ = writeln!(out);
    let mut defaults = Vec::new();
    let mut space = Vec::new();
    for (a, info) in &p.axes {
        let id = py_ident(a);
        defaults.push(format!("    \"BLOCK_{id}\": {},", info.default));
        let d: Vec<String> = info.domain.iter().map(|x| x.to_string()).collect();
        space.push(format!("    \"BLOCK_{id}\": [{}],", d.join(", ")));
    }
    defaults.push(format!("    \"num_warps\": {},", p.warps));
    defaults.push(format!("    \"num_stages\": {},", p.stages));
    let list = |xs: &[u32]| xs.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    space.push(format!("    \"num_warps\": [{}],", list(&crate::WARPS)));
    space.push(format!("    \"num_stages\": [{}],", list(&crate::STAGES)));
    // A program of several kernels: each kernel's warps and stages may
    // differ from the program's (absent from a configuration: the program's).
    if p.kernels.len() > 1 {
        for i in 0..p.kernels.len() {
            if let Some(w) = p.kernel_warps.get(i).copied().flatten() {
                defaults.push(format!("    \"num_warps_k{i}\": {w},"));
            }
            if let Some(s) = p.kernel_stages.get(i).copied().flatten() {
                defaults.push(format!("    \"num_stages_k{i}\": {s},"));
            }
            space.push(format!(
                "    \"num_warps_k{i}\": [{}],",
                list(&crate::WARPS)
            ));
            space.push(format!(
                "    \"num_stages_k{i}\": [{}],",
                list(&crate::STAGES)
            ));
        }
    }
    let _ = writeln!(out, "DEFAULT_CONFIG = {{\n{}\n}}", defaults.join("\n"));
    let _ = writeln!(out);
    let _ = writeln!(out, "CONFIG_SPACE = {{\n{}\n}}", space.join("\n"));
    let _ = writeln!(out);
    let est = estimate_of(p, &ks);
    let _ = writeln!(
        out,
        "# Static estimate at DEFAULT_CONFIG (ranks candidates; not a measurement)."
    );
    let _ = writeln!(
        out,
        "ESTIMATE = {{\"kernels\": {}, \"bytes\": {:.0}, \"flops\": {:.0}, \"time_us\": {:.3}, \"largest_block\": {:.0}}}",
        est.kernels, est.bytes, est.flops, est.time_us, est.largest_block
    );
    let _ = writeln!(out);
    let params: Vec<String> = f
        .params
        .iter()
        .map(|v| py_ident(&f.value(*v).name))
        .collect();
    let _ = writeln!(out, "INPUTS = [");
    for v in &f.params {
        let t = f.ty(*v).as_tensor().ok_or("a tuple parameter")?;
        let dims: Vec<String> = t.shape.iter().map(|d| Extent::of(d).host()).collect();
        let _ = writeln!(
            out,
            "    (\"{}\", ({}{}), {}),",
            f.value(*v).name,
            dims.join(", "),
            if dims.len() == 1 { "," } else { "" },
            torch_dtype(t.dtype)
        );
    }
    let _ = writeln!(out, "]");
    let _ = writeln!(out);
    for k in &ks {
        let _ = writeln!(out, "\n{}", k.text);
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "def run(*inputs, config=None):");
    let _ = writeln!(
        out,
        "    \"\"\"Run `@{}` on torch tensors; returns its result(s).\"\"\"",
        f.name
    );
    let _ = writeln!(out, "    cfg = dict(DEFAULT_CONFIG)");
    let _ = writeln!(out, "    if config:");
    let _ = writeln!(out, "        cfg.update(config)");
    let _ = writeln!(out, "    if len(inputs) != {}:", params.len());
    let _ = writeln!(
        out,
        "        raise TypeError(f\"@{} takes {} inputs, got {{len(inputs)}}\")",
        f.name,
        params.len()
    );
    let _ = writeln!(
        out,
        "    for (name, shape, dtype), t in zip(INPUTS, inputs):"
    );
    let _ = writeln!(
        out,
        "        if tuple(t.shape) != shape or t.dtype != dtype:"
    );
    let _ = writeln!(out, "            raise ValueError(f\"input %{{name}}: expected {{shape}} {{dtype}}, got {{tuple(t.shape)}} {{t.dtype}}\")");
    let _ = writeln!(out, "    dev = inputs[0].device");
    for (i, v) in f.params.iter().enumerate() {
        let _ = writeln!(out, "    {} = inputs[{i}].contiguous()", buf_host(f, *v, 0));
    }
    for a in p.axes.keys() {
        let id = py_ident(a);
        let ext = p.axes[a].extent.host();
        let _ = writeln!(out, "    block_{id} = cfg[\"BLOCK_{id}\"]");
        let _ = writeln!(out, "    nt_{id} = triton.cdiv({ext}, block_{id})");
        let _ = writeln!(out, "    ntp_{id} = triton.next_power_of_2(nt_{id})");
        let _ = writeln!(out, "    even_{id} = {ext} % block_{id} == 0");
    }
    for (k, ek) in p.kernels.iter().zip(&ks) {
        for (i, l) in f.ty(k.root).leaves().iter().enumerate() {
            let dims: Vec<String> = l.shape.iter().map(|d| Extent::of(d).host()).collect();
            let _ = writeln!(
                out,
                "    {} = torch.empty(({}{}), dtype={}, device=dev)",
                buf_host(f, k.root, i),
                dims.join(", "),
                if dims.len() == 1 { "," } else { "" },
                torch_dtype(l.dtype)
            );
        }
        let grid: Vec<String> = k
            .grid
            .iter()
            .map(|(a, _)| format!("nt_{}", py_ident(a)))
            .collect();
        let grid = if grid.is_empty() {
            "1".to_string()
        } else {
            grid.join(" * ")
        };
        let mut args: Vec<String> = ek
            .buffers
            .iter()
            .map(|(v, i)| buf_host(f, *v, *i))
            .collect();
        args.extend(ek.consts.iter().cloned());
        if p.kernels.len() > 1 {
            let i = k.index;
            args.push(format!(
                "num_warps=cfg.get(\"num_warps_k{i}\", cfg[\"num_warps\"])"
            ));
            args.push(format!(
                "num_stages=cfg.get(\"num_stages_k{i}\", cfg[\"num_stages\"])"
            ));
        } else {
            args.push("num_warps=cfg[\"num_warps\"]".into());
            args.push("num_stages=cfg[\"num_stages\"]".into());
        }
        let _ = writeln!(out, "    {}[({grid},)]({})", ek.name, args.join(", "));
    }
    let rets: Vec<String> = f
        .returns
        .iter()
        .flat_map(|r| {
            (0..f.ty(*r).leaves().len())
                .map(|i| buf_host(f, *r, i))
                .collect::<Vec<_>>()
        })
        .collect();
    if rets.len() == 1 {
        let _ = writeln!(out, "    return {}", rets[0]);
    } else {
        let _ = writeln!(out, "    return ({},)", rets.join(", "));
    }
    Ok(out)
}
