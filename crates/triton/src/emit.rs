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
mod fuse;
mod slices;

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
    /// Matrix products that a later accumulator update may absorb (see
    /// [`bcast`]).
    dots: HashMap<String, bcast::DotInfo>,
    /// f32 variables that are copies of others.
    copy_of: HashMap<String, String>,
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
    Ok(match op {
        "ew.add" => format!("{} + {}", x(0), x(1)),
        "ew.sub" => format!("{} - {}", x(0), x(1)),
        "ew.mul" => format!("{} * {}", x(0), x(1)),
        "ew.div" => format!("{} / {}", x(0), x(1)),
        "ew.pow" => back(format!("tl.exp({} * tl.log({}))", f32(1), f32(0))),
        "ew.max" => format!("tl.maximum({}, {})", x(0), x(1)),
        "ew.min" => format!("tl.minimum({}, {})", x(0), x(1)),
        "ew.neg" => format!("-({})", x(0)),
        "ew.abs" => format!("tl.abs({})", x(0)),
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
            bounds: HashMap::new(),
            nesting: 0,
            unmasked: None,
            dots: HashMap::new(),
            copy_of: HashMap::new(),
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
                let p = ext.padded();
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
        let r = dims.len();
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
        for (i, d) in dims.iter().enumerate() {
            terms.push(format!(
                "{} * ({})",
                idx64(along(&d.offs, i, r)),
                stride(i + off)
            ));
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
                    }
                }
            }
        }
        Ok(x)
    }

    /// Where value `a` (already emitted in some tiling) holds 16-bit
    /// floats exactly: their type.
    fn exact16_of(&self, a: ValueId) -> Option<DType> {
        let t = self.p.func.ty(a).as_tensor()?;
        if matches!(t.dtype, DType::F16 | DType::BF16) {
            return Some(t.dtype);
        }
        // The operand's own block: any tiling of it holds the same values.
        self.memo
            .iter()
            .find(|((v, _), _)| *v == a)
            .and_then(|(_, x)| match x {
                Val::T(b) => self.narrow.get(&b.var).copied(),
                Val::Tup(_) => None,
            })
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
                    return Err("a reshape that merges or splits dims inside a kernel".into());
                }
                if (0..er.len()).any(|j| er[j] == Extent::N(1) && lay[j].is_some()) {
                    return Err("a reshape of a tiled unit dim".into());
                }
                let mut la: Layout = vec![None; ea.len()];
                for (x, y) in nu_a.iter().zip(&nu_r) {
                    la[*x] = lay[*y].clone();
                }
                let x = self.block(a, &la)?;
                let (dims, depth) = self.dims(&er, lay)?;
                let ux = self.units(&x.var, ea.len());
                let mut u: Units = vec![false; er.len()];
                for (x, y) in nu_a.iter().zip(&nu_r) {
                    u[*y] = ux[*x];
                }
                let e = format!("tl.reshape({}, {})", x.var, real_shape(&dims, &u));
                let y = self.result(v, lay, e, depth.max(x.depth))?;
                if let Val::T(b) = &y {
                    self.set_units(&b.var, u);
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

    /// The layout of operand `a` of a reduction over `d`, from the request.
    fn reduce_input_layout(&self, a: ValueId, lay: &Layout, d: usize) -> Layout {
        let f = self.p.func;
        let mut la = lay.clone();
        let own = f.ty(a).leaves().first().and_then(|l| {
            l.state.iter().find_map(|(ax, st)| match st {
                AxisState::Part(i) if *i == d => Some(ax.clone()),
                _ => None,
            })
        });
        la.insert(d, own);
        la
    }

    fn reduce(&mut self, v: ValueId, lay: &Layout) -> Result<Val, String> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let r = op
            .attrs
            .get("reducer")
            .ok_or("reduce without reducer")?
            .clone();
        let d = op.attrs.get("dim").and_then(Attr::as_int).unwrap_or(0) as usize;
        let a = op.operands[0];
        let la = self.reduce_input_layout(a, lay, d);
        let xs = self.emit(a, &la)?.blocks();
        let depth = xs.iter().map(|b| b.depth).max().unwrap_or(0);
        let states = self.tile_reduce(&r, &xs, d, depth)?;
        self.finish(v, lay, states, depth)
    }

    /// Cast reducer states (f32 expressions of the result's block shape) to
    /// the result's dtypes.
    fn finish(
        &mut self,
        v: ValueId,
        lay: &Layout,
        states: Vec<String>,
        depth: usize,
    ) -> Result<Val, String> {
        let f = self.p.func;
        let rt = f.ty(v).clone();
        let leaves: Vec<_> = rt.leaves().into_iter().cloned().collect();
        if leaves.len() != states.len() {
            return Err("reducer state count differs from the result's fields".into());
        }
        let mut out = Vec::new();
        for (l, s) in leaves.iter().zip(states) {
            let exts: Vec<Extent> = l.shape.iter().map(Extent::of).collect();
            let (dims, dd) = self.dims(&exts, lay)?;
            let depth = depth.max(dd);
            let var = self.fresh("r");
            self.line(depth, format!("{var} = ({s}).to({})", tl_dtype(l.dtype)));
            let u = self.units(&s, dims.len());
            self.set_units(&var, u);
            if l.dtype == DType::F32 {
                self.copy_of.insert(var.clone(), s.clone());
            }
            out.push(Val::T(Blk {
                var,
                dims,
                dtype: l.dtype,
                depth,
            }));
        }
        Ok(if matches!(rt, Type::Tuple(_)) {
            Val::Tup(out)
        } else {
            out.pop().ok_or("no state")?
        })
    }

    /// Reduce blocks along dim `d`: the reducer's states as f32 variables.
    fn tile_reduce(
        &mut self,
        r: &Attr,
        xs: &[Blk],
        d: usize,
        depth: usize,
    ) -> Result<Vec<String>, String> {
        let Attr::Term(name, args) = r else {
            return Err("malformed reducer".into());
        };
        let rank = xs
            .first()
            .map(|b| b.dims.len())
            .ok_or("reduction of nothing")?;
        let bd = xs[0].dims[d].clone();
        match name.as_str() {
            "red.sum" | "red.max" => {
                if name == "red.sum" {
                    if let Some(t) = self.dot_sum(&xs[0].var, &xs[0].dims, d, depth) {
                        return Ok(vec![t]);
                    }
                }
                // A block unit along the reduced dim is broadcast first.
                let x0 = if self.units(&xs[0].var, rank)[d] {
                    self.full(xs[0].clone())
                } else {
                    xs[0].clone()
                };
                let u = self.units(&x0.var, rank);
                // The reduced block lives in registers: it counts for the
                // estimate's largest block (a broadcast product reduced here
                // can be far larger than any load or matmul tile), not for
                // traffic.
                self.work.push(Work {
                    bytes: 0,
                    sizes: x0
                        .dims
                        .iter()
                        .zip(&u)
                        .map(|(b, u)| if *u { "1".into() } else { b.size.clone() })
                        .collect(),
                    loops: self.loops[..depth.min(self.loops.len())].to_vec(),
                    flops: false,
                });
                let (fun, ident) = if name == "red.sum" {
                    ("tl.sum", "0.0")
                } else {
                    ("tl.max", "float('-inf')")
                };
                let x = self.fresh("p");
                let src = format!("({}).to(tl.float32)", x0.var);
                for l in Self::pad_lines(&x, &src, &bd, d, rank, ident) {
                    self.line(depth, l);
                }
                let var = self.fresh("s");
                self.line(depth, format!("{var} = {fun}({x}, axis={d})"));
                let mut us = u;
                us.remove(d);
                self.set_units(&var, us);
                Ok(vec![var])
            }
            "red.prod" => {
                let mut out = Vec::new();
                let mut rest = xs;
                for (_, c) in args {
                    let n = arity(c, &self.sigs).ok_or("malformed product")?.inputs;
                    let (h, t) = rest.split_at(n.min(rest.len()));
                    out.extend(self.tile_reduce(c, h, d, depth)?);
                    rest = t;
                }
                Ok(out)
            }
            "red.repair" => {
                let (p, c, fname, _) = repair_parts(args).ok_or("malformed repair")?;
                let (p, c, fname) = (p.clone(), c.clone(), fname.to_string());
                let ip = arity(&p, &self.sigs).ok_or("malformed repair")?.inputs;
                let s = self.tile_reduce(&p, &xs[..ip.min(xs.len())], d, depth)?;
                // f(x, s') with the tile's producer state broadcast along d.
                let mut fargs: Vec<(String, Units)> = Vec::new();
                for b in xs {
                    let x = self.fresh("q");
                    self.line(depth, format!("{x} = ({}).to(tl.float32)", b.var));
                    let u = self.units(&b.var, rank);
                    self.set_units(&x, u.clone());
                    let n16 = match b.dtype {
                        DType::F16 | DType::BF16 => Some(b.dtype),
                        _ => self.narrow.get(&b.var).copied(),
                    };
                    if let Some(t) = n16 {
                        self.narrow.insert(x.clone(), t);
                    }
                    fargs.push((x, u));
                }
                for sv in &s {
                    let mut u = self.units(sv, rank - 1);
                    u.insert(d, true);
                    fargs.push((along_insert(sv, d, rank), u));
                }
                // A maximum producer's state bounds its input from above.
                let maxof = match &p {
                    Attr::Term(n, _) if n == "red.max" && ip == 1 => vec![(0, xs.len())],
                    _ => Vec::new(),
                };
                let ys = self.inline(&fname, &fargs, depth, &maxof)?;
                let yb: Vec<Blk> = ys
                    .into_iter()
                    .map(|var| Blk {
                        var,
                        dims: xs[0].dims.clone(),
                        dtype: DType::F32,
                        depth,
                    })
                    .collect();
                let cs = self.tile_reduce(&c, &yb, d, depth)?;
                Ok(s.into_iter().chain(cs).collect())
            }
            other => Err(format!("no Triton lowering for reducer #{other}")),
        }
    }

    /// Merge two reducer states (variables), at `depth`.
    fn combine(
        &mut self,
        r: &Attr,
        a: &[String],
        b: &[String],
        depth: usize,
    ) -> Result<Vec<String>, String> {
        let Attr::Term(name, args) = r else {
            return Err("malformed reducer".into());
        };
        match name.as_str() {
            "red.sum" | "red.max" => {
                if name == "red.sum" {
                    let fused = self
                        .dot_update(&a[0], &b[0], depth)
                        .or_else(|| self.dot_update(&b[0], &a[0], depth));
                    if let Some(v) = fused {
                        return Ok(vec![v]);
                    }
                }
                let var = self.fresh("m");
                let e = if name == "red.sum" {
                    format!("{} + {}", a[0], b[0])
                } else {
                    format!("tl.maximum({}, {})", a[0], b[0])
                };
                self.line(depth, format!("{var} = {e}"));
                let u = self.units_both(&a[0], &b[0]);
                self.set_units(&var, u);
                Ok(vec![var])
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
                let (p, c, _, h) = repair_parts(args).ok_or("malformed repair")?;
                let (p, c, h) = (p.clone(), c.clone(), h.to_string());
                let np = arity(&p, &self.sigs).ok_or("malformed repair")?.states;
                let (s1, c1) = a.split_at(np.min(a.len()));
                let (s2, c2) = b.split_at(np.min(b.len()));
                let s = self.combine(&p, s1, s2, depth)?;
                let with_units = |e: &Self, xs: &[String]| -> Vec<(String, Units)> {
                    xs.iter()
                        .map(|x| (x.clone(), e.unit.get(x).cloned().unwrap_or_default()))
                        .collect()
                };
                let all1: Vec<String> = c1.iter().chain(s1).chain(&s).cloned().collect();
                let all2: Vec<String> = c2.iter().chain(s2).chain(&s).cloned().collect();
                let args1 = with_units(self, &all1);
                let args2 = with_units(self, &all2);
                // A merged maximum is at least each side's: old - new <= 0.
                let nc = c1.len();
                let maxof: Vec<(usize, usize)> = match &p {
                    Attr::Term(n, _) if n == "red.max" && np == 1 => vec![(nc, nc + 1)],
                    _ => Vec::new(),
                };
                let c1 = self.inline(&h, &args1, depth, &maxof)?;
                let c2 = self.inline(&h, &args2, depth, &maxof)?;
                let cs = self.combine(&c, &c1, &c2, depth)?;
                Ok(s.into_iter().chain(cs).collect())
            }
            other => Err(format!("no Triton lowering for reducer #{other}")),
        }
    }

    /// Inline a pointwise function of the module over block expressions.
    ///
    /// Arguments come with their unit dims (see [`bcast`]; an empty list for
    /// a whole block of unknown rank); the results' are recorded. Each
    /// `(i, j)` of `maxof` says that argument `j` is the maximum of argument
    /// `i` (so `i - j <= 0`): the bounds this gives the results are recorded
    /// too (see [`bcast`]'s dots).
    fn inline(
        &mut self,
        fname: &str,
        args: &[(String, Units)],
        depth: usize,
        maxof: &[(usize, usize)],
    ) -> Result<Vec<String>, String> {
        let g = self
            .p
            .module
            .func(fname)
            .ok_or_else(|| format!("unknown function @{fname}"))?;
        if g.params.len() != args.len() {
            return Err(format!("@{fname} takes {} arguments", g.params.len()));
        }
        // Every argument has the same rank (or none is known).
        let r = args.iter().map(|(_, u)| u.len()).max().unwrap_or(0);
        let mut env: HashMap<ValueId, (String, Units)> = HashMap::new();
        for (p, (a, u)) in g.params.iter().zip(args) {
            let u = if u.len() == r {
                u.clone()
            } else {
                vec![false; r]
            };
            env.insert(*p, (a.clone(), u));
        }
        let mut iv: HashMap<ValueId, bcast::Bound> = HashMap::new();
        let param = |v: ValueId| g.params.iter().position(|p| *p == v);
        for op in &g.ops {
            let dt = g
                .ty(op.result)
                .as_tensor()
                .map(|t| t.dtype)
                .unwrap_or(DType::F32);
            let (e, u) = if op.name == "tensor.full" {
                (
                    literal(op.attrs.get("value").unwrap_or(&Attr::Int(0))),
                    vec![true; r],
                )
            } else {
                let xs: Vec<String> = op.operands.iter().map(|o| env[o].0.clone()).collect();
                let us: Vec<(usize, Units)> =
                    op.operands.iter().map(|o| (r, env[o].1.clone())).collect();
                (
                    pointwise(&op.name, &op.attrs, &xs, dt)?,
                    pointwise_units(r, &us),
                )
            };
            let var = self.fresh("g");
            self.line(depth, format!("{var} = {e}"));
            let below_max = op.name == "ew.sub"
                && op.operands.len() == 2
                && matches!((param(op.operands[0]), param(op.operands[1])),
                    (Some(i), Some(j)) if maxof.contains(&(i, j)));
            let ins: Vec<Option<bcast::Bound>> =
                op.operands.iter().map(|o| iv.get(o).copied()).collect();
            let value = op.attrs.get("value").and_then(Attr::as_f64);
            if let Some(b) = bcast::bound_of(&op.name, &ins, value, below_max) {
                iv.insert(op.result, b);
                self.bounds.insert(var.clone(), b);
            }
            if op.name == "ew.mul" && op.operands.len() == 2 {
                let (a, b) = (
                    env[&op.operands[0]].0.clone(),
                    env[&op.operands[1]].0.clone(),
                );
                self.note_product(&var, &a, &b);
            }
            self.set_units(&var, u.clone());
            env.insert(op.result, (var, u));
        }
        Ok(g.returns.iter().map(|x| env[x].0.clone()).collect())
    }

    /// Open a loop over the tiles of `axis` (bound inside it); its depth.
    /// With `stop`, the loop runs over the first `stop` tiles only (a
    /// variable of the enclosing scope; see [`causal`]).
    fn open_loop(&mut self, axis: &str, stop: Option<String>) -> usize {
        let (hi, name) = match stop {
            Some(h) => (h, format!("{axis}/causal")),
            None => (format!("NT_{}", py_ident(axis)), axis.to_string()),
        };
        self.open_loop_range(axis, "0", hi, name)
    }

    /// Open a loop over tiles `lo..hi` of `axis`; `name` is the loop as the
    /// estimate counts it (`<axis>`, `<axis>/causal`, `<axis>/diag`).
    fn open_loop_range(&mut self, axis: &str, lo: &str, hi: String, name: String) -> usize {
        let id = py_ident(axis);
        let i = if self.live.get(axis).is_some_and(|n| *n > 0) {
            self.n += 1;
            format!("i{}_{id}", self.n)
        } else {
            format!("i_{id}")
        };
        self.scopes.push(Scope {
            header: format!("for {i} in range({lo}, {hi}):"),
            lines: Vec::new(),
        });
        let inner = self.top();
        self.loops.push(name);
        self.bind(axis, &i, inner);
        inner
    }

    /// Close the innermost loop (over `axis`): its lines go into the
    /// enclosing scope, and what was emitted inside it is forgotten.
    fn close_loop(&mut self, axis: &str) -> Result<(), String> {
        let inner = self.top();
        let sc = self.scopes.pop().ok_or("no scope")?;
        let outer = &mut self.scopes[inner - 1].lines;
        outer.push(sc.header);
        outer.extend(
            fuse::optimize(sc.lines)
                .into_iter()
                .map(|l| format!("    {l}")),
        );
        self.bound.remove(axis);
        self.idx.remove(axis);
        if let Some(n) = self.live.get_mut(axis) {
            *n -= 1;
        }
        self.loops.pop();
        self.offs.retain(|_, (_, d)| *d < inner);
        self.memo.retain(|_, x| x.depth() < inner);
        Ok(())
    }

    /// A parallel reduction is emitted as a loop at the shallowest depth where
    /// everything it depends on (the axes of its result's tiling) is bound:
    /// outside any enclosing loop it does not depend on, even one over the
    /// same axis.
    fn par_reduce(&mut self, v: ValueId, lay: &Layout) -> Result<Val, String> {
        let outer = lay
            .iter()
            .flatten()
            .map(|a| self.bound.get(a).copied().unwrap_or(0))
            .max()
            .unwrap_or(0);
        if outer == self.top() {
            return self.par_reduce_here(v, lay);
        }
        let scopes = self.scopes.split_off(outer + 1);
        let bound = self.bound.clone();
        let idx = self.idx.clone();
        let offs = self.offs.clone();
        let memo = self.memo.clone();
        let loops = self.loops.clone();
        self.bound.retain(|_, d| *d <= outer);
        self.offs.retain(|_, (_, d)| *d <= outer);
        self.memo.retain(|_, x| x.depth() <= outer);
        self.loops.truncate(outer);
        let r = self.par_reduce_here(v, lay);
        let fresh: Vec<_> = self.memo.drain().collect();
        self.scopes.extend(scopes);
        self.bound = bound;
        self.idx = idx;
        self.offs = offs;
        self.memo = memo;
        self.loops = loops;
        for (k, x) in fresh {
            self.memo.entry(k).or_insert(x);
        }
        r
    }

    fn par_reduce_here(&mut self, v: ValueId, lay: &Layout) -> Result<Val, String> {
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
        let outer = self.top();
        // A reduction over an axis that is already bound (a grid axis, or an
        // enclosing loop the reduction cannot be hoisted out of) runs its own
        // loop over that axis: inside it the axis has fresh offsets, and what
        // was computed from the outer binding is hidden until it closes.
        let shadow = self.binding(&axis).map(|b| {
            let memo = self.memo.clone();
            self.memo.retain(|_, x| x.depth() < b.0);
            (b, memo)
        });
        // A result tiled by the axis it reduces over (a partition over `@k`
        // of a reduction over `@k`, two dims sharing the axis name) needs
        // both bindings of the axis in one block: the loop's for the reduced
        // dim, the outer one for the result's tiles. The latter are asked
        // for under an alias bound like the outer binding.
        let mut aliased = None;
        let inner_lay: Layout = if lay.iter().flatten().any(|a| *a == axis) {
            let Some((b, _)) = &shadow else {
                return Err(format!(
                    "a value tiled by @{axis} where @{axis} is not bound"
                ));
            };
            self.n += 1;
            let al = format!("{axis}@{}", self.n);
            self.set_binding(&al, b.clone());
            self.alias.insert(al.clone(), axis.clone());
            let l = lay
                .iter()
                .map(|a| match a {
                    Some(x) if *x == axis => Some(al.clone()),
                    _ => a.clone(),
                })
                .collect();
            aliased = Some(al);
            l
        } else {
            lay.clone()
        };
        let rt = f.ty(v).clone();
        let leaves: Vec<_> = rt.leaves().into_iter().cloned().collect();
        let idents = efir_dialect_red::identity(&r).ok_or("reducer without identity")?;
        let mut accs = Vec::new();
        // Where each accumulator's initial value is (its shape is patched
        // once the tile states' unit dims are known).
        let mut inits: Vec<(usize, Vec<BD>, String)> = Vec::new();
        for (l, id) in leaves.iter().zip(&idents) {
            let exts: Vec<Extent> = l.shape.iter().map(Extent::of).collect();
            let (dims, _) = self.dims(&exts, lay)?;
            let var = self.fresh("acc");
            let idv = if id.is_infinite() {
                if *id < 0.0 {
                    "float('-inf')".to_string()
                } else {
                    "float('inf')".to_string()
                }
            } else {
                format!("{id:?}")
            };
            inits.push((self.scopes[outer].lines.len(), dims.clone(), idv.clone()));
            self.line(
                outer,
                format!("{var} = tl.full({}, {idv}, tl.float32)", shape_list(&dims)),
            );
            accs.push(var);
        }
        // Causal tile skipping: the iterations whose tile state is the
        // reducer's identity form a suffix; stop before it.
        let stop = match self.tile_states(op.operands[0], &inner_lay, &axis) {
            Some((g, s)) if s == idents.iter().map(|x| Some(*x)).collect::<Vec<_>>() => {
                let hi = self.fresh("hi");
                let (bg, bl) = (self.block_of(&g), self.block_of(&axis));
                let ig = self.idx.get(&g).cloned().ok_or("unbound axis")?;
                self.line(
                    outer,
                    format!(
                        "{hi} = tl.minimum((({ig} + 1) * {bg} + {bl} - 1) // {bl}, NT_{})",
                        py_ident(&axis)
                    ),
                );
                Some((hi, g, ig, bg, bl))
            }
            _ => None,
        };
        let x = op.operands[0];
        match stop {
            Some((hi, g, ig, bg, bl)) if !self.dot_accumulates(&r, x) => {
                // The tiles wholly below the diagonal (every key before
                // every query of the tile) first, where the causal mask is
                // all true and is not computed; then the diagonal tiles,
                // masked.
                let lo = self.fresh("lo");
                self.line(
                    outer,
                    format!("{lo} = tl.minimum(({ig} * {bg} + 1) // {bl}, {hi})"),
                );
                let name = format!("{axis}/causal");
                let inner = self.open_loop_range(&axis, "0", lo.clone(), name);
                self.unmasked = Some((g.clone(), axis.clone()));
                let res = self.reduce_iteration(&r, x, &inner_lay, &accs, &inits, outer, inner);
                self.unmasked = None;
                res?;
                self.close_loop(&axis)?;
                let inner = self.open_loop_range(&axis, &lo, hi, format!("{axis}/diag"));
                self.reduce_iteration(&r, x, &inner_lay, &accs, &inits, outer, inner)?;
            }
            stop => {
                let inner = self.open_loop(&axis, stop.map(|s| s.0));
                self.reduce_iteration(&r, x, &inner_lay, &accs, &inits, outer, inner)?;
            }
        }
        self.close_loop(&axis)?;
        if let Some((b, memo)) = shadow {
            self.set_binding(&axis, b);
            // What was computed outside the inner loop does not depend on
            // its binding of the axis (that lives at the loop's depth).
            let fresh = std::mem::replace(&mut self.memo, memo);
            for (k, x) in fresh {
                self.memo.entry(k).or_insert(x);
            }
        }
        if let Some(al) = aliased {
            // (Blocks memoized under the alias keep it in their key; it is
            // never asked for again.)
            self.bound.remove(&al);
            self.idx.remove(&al);
            self.offs.remove(&format!("axis:{al}"));
        }
        self.finish(v, lay, accs, outer)
    }

    /// One iteration of a parallel reduction's loop (at depth `inner`):
    /// the tile state of `x`, merged into the accumulators.
    #[allow(clippy::too_many_arguments)]
    fn reduce_iteration(
        &mut self,
        r: &Attr,
        x: ValueId,
        inner_lay: &Layout,
        accs: &[String],
        inits: &[(usize, Vec<BD>, String)],
        outer: usize,
        inner: usize,
    ) -> Result<(), String> {
        if self.dot_accumulates(r, x) {
            // A sum of matmul tiles: each tile's product goes into the fp32
            // accumulator as it is made, never rounded to the tile's dtype.
            let (la, lb) = self.matmul_layouts(x, inner_lay)?;
            self.matmul_product(x, &la, &lb, inner_lay, Some((&accs[0], inner)))?;
        } else {
            let xs = self.emit(x, inner_lay)?.blocks();
            // An accumulator holds single elements where its tile states do
            // (see [`bcast`]): its initial value takes their shape.
            let mut xv = Vec::new();
            for ((b, (at, dims, idv)), acc) in xs.iter().zip(inits).zip(accs) {
                let u = self.units(&b.var, b.dims.len());
                let var = self.fresh("t");
                self.line(inner, format!("{var} = ({}).to(tl.float32)", b.var));
                if b.dtype == DType::F32 {
                    self.copy_of.insert(var.clone(), b.var.clone());
                }
                if u.iter().any(|x| *x) && u.len() == dims.len() {
                    self.scopes[outer].lines[*at] = format!(
                        "{acc} = tl.full({}, {idv}, tl.float32)",
                        real_shape(dims, &u)
                    );
                    self.set_units(acc, u.clone());
                }
                self.set_units(&var, u);
                xv.push(var);
            }
            let merged = self.combine(r, accs, &xv, inner)?;
            // A merged state whole where its accumulator was unit makes the
            // accumulator whole (a loop-carried variable keeps its shape).
            for ((acc, m), (at, dims, idv)) in accs.iter().zip(&merged).zip(inits) {
                let (ua, um) = (self.units(acc, dims.len()), self.units(m, dims.len()));
                if ua != um {
                    self.scopes[outer].lines[*at] = format!(
                        "{acc} = tl.full({}, {idv}, tl.float32)",
                        real_shape(dims, &um)
                    );
                    self.unit.remove(acc);
                    self.set_units(acc, um);
                }
            }
            for (a, m) in accs.iter().zip(&merged) {
                self.line(inner, format!("{a} = {m}"));
            }
        }
        Ok(())
    }

    /// Whether a reduction with reducer `r` of value `x` adds matmul tiles
    /// into its accumulator directly: a sum of a `tile.matmul` (or
    /// `tensor.matmul`) computed in the kernel.
    fn dot_accumulates(&self, r: &Attr, x: ValueId) -> bool {
        let is_sum = matches!(r, Attr::Term(n, _) if n == "red.sum");
        let f = self.p.func;
        is_sum
            && !self.p.buffer[x.index()]
            && self.p.def[x.index()]
                .is_some_and(|i| matches!(f.ops[i].name.as_str(), "tile.matmul" | "tensor.matmul"))
            && f.ty(x).as_tensor().is_some()
    }

    /// The tilings of a matmul's operands for its result in `lay`: rows and
    /// columns from the request, the reduced dim K as the operands are split.
    fn matmul_layouts(&self, v: ValueId, lay: &Layout) -> Result<(Layout, Layout), String> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let (a, b) = (op.operands[0], op.operands[1]);
        let (ea, eb, er) = (extents(f.ty(a)), extents(f.ty(b)), extents(f.ty(v)));
        let (ra, rb, r) = (ea.len(), eb.len(), er.len());
        let side = |e: &[Extent], own: Layout, keep: usize, out: usize| -> Layout {
            let k = r - e.len();
            let mut l: Layout = (0..e.len())
                .map(|j| {
                    if j + 2 >= e.len() || (e[j] == Extent::N(1) && er[j + k] != Extent::N(1)) {
                        None
                    } else {
                        lay[j + k].clone()
                    }
                })
                .collect();
            l[keep] = own[keep].clone();
            l[out] = lay[if out + 2 == e.len() { r - 2 } else { r - 1 }].clone();
            l
        };
        Ok((
            side(&ea, layout_of(f.ty(a)), ra - 1, ra - 2),
            side(&eb, layout_of(f.ty(b)), rb - 2, rb - 1),
        ))
    }

    /// Where value `y` in tiling `lay` is, in a loop over axis `l`, a block
    /// whose reducer states are constants once the `l` tile starts after the
    /// tile of a bound axis `G` ends (see [`causal`]): `G` and the states.
    /// Unknown states are `None`.
    fn tile_states(&self, y: ValueId, lay: &Layout, l: &str) -> Option<(String, Vec<Option<f64>>)> {
        if let Some(Fact::Const { c, i, j }) = self.facts[y.index()] {
            let g = lay.get(i)?.clone();
            if lay.get(j)?.as_deref() == Some(l) {
                if let Some(g) = g.filter(|g| g != l && self.bound.contains_key(g)) {
                    return Some((g, vec![Some(c)]));
                }
            }
        }
        let f = self.p.func;
        let op = &f.ops[self.p.def[y.index()]?];
        let name = op.name.as_str();
        match name {
            "par.partition" | "par.replicate" | "par.combine" => {
                self.tile_states(op.operands[0], lay, l)
            }
            "tensor.reduce" => {
                let r = op.attrs.get("reducer")?;
                let d = op.attrs.get("dim").and_then(Attr::as_int)? as usize;
                let x = op.operands[0];
                let la = self.reduce_input_layout(x, lay, d);
                let (g, cs) = self.tile_states(x, &la, l)?;
                Some((g, causal::reduce_const(r, &cs, self.p.module, &self.sigs)?))
            }
            "tile.matmul" | "tensor.matmul" => {
                let (la, lb) = self.matmul_layouts(y, lay).ok()?;
                [(op.operands[0], la), (op.operands[1], lb)]
                    .into_iter()
                    .find_map(|(x, lx)| {
                        self.tile_states(x, &lx, l)
                            .filter(|(_, cs)| cs.as_slice() == [Some(0.0)])
                    })
            }
            "tensor.tuple" => {
                // Fields without a mask are unknown (finite) values.
                let mut g0: Option<String> = None;
                let mut out = Vec::new();
                for o in &op.operands {
                    match self.tile_states(*o, lay, l) {
                        Some((g, cs)) => {
                            if g0.as_ref().is_some_and(|h| *h != g) {
                                return None;
                            }
                            g0 = Some(g);
                            out.extend(cs);
                        }
                        None => out.extend(vec![None; f.ty(*o).leaves().len()]),
                    }
                }
                Some((g0?, out))
            }
            _ if name.starts_with("ew.") && op.operands.len() == 1 => {
                let x = op.operands[0];
                if extents(f.ty(x)).len() != lay.len() {
                    return None;
                }
                let (g, cs) = self.tile_states(x, lay, l)?;
                let c = *cs.first()?;
                let c = if name == "ew.cast" {
                    c.and_then(causal::cast_exact)
                } else {
                    causal::abstract_op(name, &op.attrs, &[c]).filter(|c| !c.is_nan())
                };
                Some((g, vec![c]))
            }
            _ => None,
        }
    }

    fn matmul(&mut self, v: ValueId, lay: &Layout) -> Result<Val, String> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        // Output tiles of a matmul are independent: the result is computed
        // in the tiling asked for (rows and columns from the request, the
        // reduced dim K as the operands are split).
        let (a, b) = (op.operands[0], op.operands[1]);
        let (ea, eb, er) = (extents(f.ty(a)), extents(f.ty(b)), extents(f.ty(v)));
        let (ra, rb) = (ea.len(), eb.len());
        let (mut la, mut lb) = self.matmul_layouts(v, lay)?;
        let dt = f.ty(v).as_tensor().ok_or("expected a tensor")?.dtype;
        // A long K that the program does not split is split here: a loop
        // over K tiles accumulating in fp32 (the plan registered its axis).
        let auto = match ea.last() {
            Some(Extent::N(k)) => format!("r{k}"),
            _ => String::new(),
        };
        if la[ra - 1].is_none()
            && lb[rb - 2].is_none()
            && self.p.axes.contains_key(&auto)
            && !self.bound.contains_key(&auto)
        {
            let outer = self.top();
            let (dims, _) = self.dims(&er, lay)?;
            let acc = self.fresh("acc");
            self.line(
                outer,
                format!("{acc} = tl.zeros({}, dtype=tl.float32)", shape_list(&dims)),
            );
            let inner = self.open_loop(&auto, None);
            la[ra - 1] = Some(auto.clone());
            lb[rb - 2] = Some(auto.clone());
            self.matmul_product(v, &la, &lb, lay, Some((&acc, inner)))?;
            self.close_loop(&auto)?;
            return self.result(v, lay, format!("({acc}).to({})", tl_dtype(dt)), outer);
        }
        let (e, depth) = self.matmul_product(v, &la, &lb, lay, None)?;
        self.result(v, lay, format!("({e}).to({})", tl_dtype(dt)), depth)
    }

    /// The fp32 product of the operands of matmul `v` in the given tilings
    /// (an expression of the result's block shape), and its depth. With
    /// `acc` (an fp32 accumulator of the result's block shape, and the depth
    /// of the loop that updates it), the product is added to the
    /// accumulator instead (`acc = tl.dot(a, b, acc)`: no partial product is
    /// rounded) and the expression is the accumulator.
    fn matmul_product(
        &mut self,
        v: ValueId,
        la: &Layout,
        lb: &Layout,
        lay: &Layout,
        acc: Option<(&str, usize)>,
    ) -> Result<(String, usize), String> {
        let f = self.p.func;
        let op = &f.ops[self.p.def[v.index()].ok_or("no def")?];
        let (a, b) = (op.operands[0], op.operands[1]);
        let er = extents(f.ty(v));
        let (ra, rb, r) = (la.len(), lb.len(), er.len());
        let xa = self.block(a, la)?;
        let xa = self.full(xa);
        let xb = self.block(b, lb)?;
        let xb = self.full(xb);
        let depth = xa.depth.max(xb.depth);
        // Zero the K padding of both operands.
        let ka = &xa.dims[ra - 1];
        let kb = &xb.dims[rb - 2];
        let (am, bm) = if ka.even == Even::Yes && kb.even == Even::Yes {
            (xa.var.clone(), xb.var.clone())
        } else {
            let am = self.fresh("a");
            let bm = self.fresh("b");
            for l in Self::pad_lines(&am, &xa.var, ka, ra - 1, ra, "0.0") {
                self.line(depth, l);
            }
            for l in Self::pad_lines(&bm, &xb.var, kb, rb - 2, rb, "0.0") {
                self.line(depth, l);
            }
            (am, bm)
        };
        let unit_batch = |x: &Blk| x.dims[..x.dims.len() - 2].iter().all(|d| d.size == "1");
        let (m, k, n) = (
            xa.dims[ra - 2].size.clone(),
            ka.size.clone(),
            xb.dims[rb - 1].size.clone(),
        );
        let same =
            xa.dtype == xb.dtype && matches!(xa.dtype, DType::F16 | DType::BF16 | DType::F32);
        let mut sizes: Vec<String> = xa.dims[..ra - 1].iter().map(|d| d.size.clone()).collect();
        sizes.push(k.clone());
        sizes.push(n.clone());
        self.work.push(Work {
            bytes: 2,
            sizes,
            loops: self.loops[..depth].to_vec(),
            flops: true,
        });
        let e = if unit_batch(&xa) && unit_batch(&xb) {
            // One matrix per program: drop the unit batch dims.
            let (a2, b2) = if ra == 2 && rb == 2 {
                (am.clone(), bm.clone())
            } else {
                let a2 = self.fresh("a");
                let b2 = self.fresh("b");
                self.line(depth, format!("{a2} = tl.reshape({am}, [{m}, {k}])"));
                self.line(depth, format!("{b2} = tl.reshape({bm}, [{k}, {n}])"));
                (a2, b2)
            };
            // tl.dot needs blocks of at least 16; smaller ones (a GEMV row)
            // multiply and sum. Block sizes are constexprs, so the choice is
            // made when the kernel is compiled.
            let fused = acc.filter(|_| r == 2);
            let dot = match fused {
                Some((c, _)) => format!("tl.dot({a2}, {b2}, {c})"),
                None => format!("tl.dot({a2}, {b2}, out_dtype=tl.float32)"),
            };
            let mut small = format!(
                "tl.sum(({a2}).to(tl.float32)[:, :, None] * ({b2}).to(tl.float32)[None, :, :], axis=1)"
            );
            if let Some((c, _)) = fused {
                small = format!("{c} + {small}");
            }
            let lit = |s: &str| s.parse::<u64>().ok();
            let known_small = [&m, &k, &n].iter().any(|s| lit(s).is_some_and(|x| x < 16));
            // The fused update runs every iteration of the accumulator's loop,
            // even where the operands do not depend on it.
            let at = fused.map_or(depth, |(_, d)| d);
            let prod = if !same || known_small {
                small
            } else if [&m, &k, &n].iter().all(|s| lit(s).is_some()) {
                dot
            } else {
                let t = match fused {
                    Some((c, _)) => c.to_string(),
                    None => self.fresh("mm"),
                };
                self.line(
                    at,
                    format!("if ({m} >= 16) and ({k} >= 16) and ({n} >= 16):"),
                );
                self.line(at, format!("    {t} = {dot}"));
                self.line(at, "else:".into());
                self.line(at, format!("    {t} = {small}"));
                t
            };
            if let Some((c, d)) = fused {
                if prod != c {
                    self.line(d, format!("{c} = {prod}"));
                }
                return Ok((c.to_string(), d));
            }
            if r == 2 {
                prod
            } else {
                let (dims, _) = self.dims(&er, lay)?;
                format!("tl.reshape({prod}, {})", shape_list(&dims))
            }
        } else {
            let ea = expand(&format!("({am}).to(tl.float32)"), ra, r);
            let eb = expand(&format!("({bm}).to(tl.float32)"), rb, r);
            let mut ia: Vec<&str> = vec![":"; r];
            ia.push("None");
            let mut ib: Vec<&str> = vec![":"; r - 2];
            ib.extend(["None", ":", ":"]);
            format!(
                "tl.sum(({ea})[{}] * ({eb})[{}], axis={})",
                ia.join(", "),
                ib.join(", "),
                r - 1
            )
        };
        if let Some((c, d)) = acc {
            self.line(d, format!("{c} = {c} + ({e})"));
            return Ok((c.to_string(), d));
        }
        Ok((format!("({e})"), depth))
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
    buffers: Vec<(ValueId, usize)>,
    work: Vec<Work>,
    grid: Vec<String>,
}

fn emit_kernel(p: &Plan<'_>, k: &Kernel) -> Result<EmittedKernel, String> {
    let f = p.func;
    let mut e = KernelEmitter::new(p);
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
    let mut params: Vec<String> = buffers.iter().map(|(v, i)| buf_param(f, *v, *i)).collect();
    for a in p.axes.keys() {
        let id = py_ident(a);
        params.push(format!("BLOCK_{id}: tl.constexpr"));
        params.push(format!("NT_{id}: tl.constexpr"));
        params.push(format!("NTP_{id}: tl.constexpr"));
        params.push(format!("EVEN_{id}: tl.constexpr"));
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
    for l in fuse::optimize(std::mem::take(&mut e.scopes[0].lines)) {
        let _ = writeln!(text, "    {l}");
    }
    Ok(EmittedKernel {
        name,
        text,
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

/// A static estimate of a program at the default configuration: global
/// memory traffic (every program's loads and stores, loops included), matmul
/// flops and kernel launches, and a time from the H200's copy bandwidth and
/// fp16 matmul rate (WORKLOADS.md) plus 2 µs per launch. It ranks candidates;
/// it is not a measurement.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Estimate {
    /// Kernel launches.
    pub kernels: usize,
    /// Bytes moved to and from global memory.
    pub bytes: f64,
    /// Matmul flops.
    pub flops: f64,
    /// The estimated time in microseconds.
    pub time_us: f64,
    /// Elements of the largest block a program holds (matmul operands and
    /// result together, or a block it reduces).
    pub largest_block: f64,
}

fn estimate_of(p: &Plan<'_>, ks: &[EmittedKernel]) -> Estimate {
    let block = |a: &str| -> f64 {
        p.axes
            .iter()
            .find(|(n, _)| py_ident(n) == a)
            .map(|(_, i)| i.default as f64)
            .unwrap_or(1.0)
    };
    let tiles = |a: &str| -> f64 {
        let Some(i) = p.axes.get(a) else { return 1.0 };
        let ext = match &i.extent {
            Extent::N(n) => *n as f64,
            Extent::Tiles(b) => {
                let bi = &p.axes[b];
                let e = match bi.extent {
                    Extent::N(n) => n as f64,
                    Extent::Tiles(_) => 1.0,
                };
                (e / bi.default as f64).ceil()
            }
        };
        (ext / i.default as f64).ceil()
    };
    let size = |s: &str| -> f64 {
        if let Ok(n) = s.parse::<f64>() {
            n
        } else if let Some(a) = s.strip_prefix("BLOCK_") {
            block(a)
        } else if let Some(a) = s.strip_prefix("NTP_") {
            let t = p
                .axes
                .keys()
                .find(|n| py_ident(n) == a)
                .map(|n| tiles(n))
                .unwrap_or(1.0);
            (t as u64).next_power_of_two() as f64
        } else {
            1.0
        }
    };
    let mut est = Estimate {
        kernels: ks.len(),
        ..Estimate::default()
    };
    for k in ks {
        let programs: f64 = k.grid.iter().map(|a| tiles(a)).product();
        for w in &k.work {
            // A causally clipped loop runs about half its tiles on average.
            let trips: f64 = w
                .loops
                .iter()
                .map(|a| {
                    if let Some(b) = a.strip_suffix("/causal") {
                        (tiles(b) + 1.0) / 2.0
                    } else if a.ends_with("/diag") {
                        // The diagonal tiles of a split causal loop (about
                        // one; the other loop counts half of all).
                        1.0
                    } else {
                        tiles(a)
                    }
                })
                .product();
            let elems: f64 = w.sizes.iter().map(|s| size(s)).product();
            if w.flops {
                est.flops += 2.0 * elems * trips * programs;
            } else {
                est.bytes += elems * w.bytes as f64 * trips * programs;
            }
        }
    }
    est.time_us = (est.bytes / 4.27e12).max(est.flops / 671e12) * 1e6 + 2.0 * est.kernels as f64;
    // Blocks far beyond what fits in registers spill (or do not compile):
    // scale the time by how far the largest one overshoots 32K elements.
    let mut largest: f64 = 0.0;
    for k in ks {
        for w in &k.work {
            let v: Vec<f64> = w.sizes.iter().map(|s| size(s)).collect();
            let fp = if w.flops && v.len() >= 3 {
                let n = v.len();
                let batch: f64 = v[..n - 3].iter().product();
                batch * (v[n - 3] * v[n - 2] + v[n - 2] * v[n - 1] + v[n - 3] * v[n - 1])
            } else {
                v.iter().product()
            };
            largest = largest.max(fp);
        }
    }
    est.largest_block = largest;
    if largest > 32768.0 {
        est.time_us *= largest / 32768.0;
    }
    est
}

/// The static estimate of a plan (see [`Estimate`]).
pub fn estimate(p: &Plan<'_>) -> Result<Estimate, String> {
    let ks = p
        .kernels
        .iter()
        .map(|k| emit_kernel_in_context(p, k))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(estimate_of(p, &ks))
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
    let consts: Vec<String> = p
        .axes
        .keys()
        .flat_map(|a| {
            let id = py_ident(a);
            [
                format!("BLOCK_{id}=block_{id}"),
                format!("NT_{id}=nt_{id}"),
                format!("NTP_{id}=ntp_{id}"),
                format!("EVEN_{id}=even_{id}"),
            ]
        })
        .collect();
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
        args.extend(consts.iter().cloned());
        args.push("num_warps=cfg[\"num_warps\"]".into());
        args.push("num_stages=cfg[\"num_stages\"]".into());
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
