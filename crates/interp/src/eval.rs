//! The evaluator: runs a function op by op. Ops with *local* semantics
//! (pointwise ops, matmuls, reductions, views, constants) are applied at
//! every coordinate of their result's parallel axes to the operands' local
//! tiles; ops with *global* semantics (the `par` ops, tuples) see whole
//! parallel values. Each dialect provides the semantics of its ops; the
//! registry gathers them into one [`SemanticsTable`].

use crate::value::{round_tile, Local, PTensor, PValue, Precision, Tensor, Tile};
use efir_ir::{AxisState, Dim, Func, Module, Op, State, Type};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};

/// Local semantics: the result at one coordinate from the operands' locals.
/// Ops without operands (constants) return the whole logical value, which
/// the evaluator then slices for each coordinate.
pub type LocalFn = fn(&LocalCtx<'_>, &[Local]) -> Result<Local, String>;

/// Global semantics: the result from whole parallel values.
pub type GlobalFn = fn(&GlobalCtx<'_>, &[&PValue]) -> Result<PValue, String>;

/// How one op is evaluated.
#[derive(Clone, Copy)]
pub enum Semantics {
    /// Applied per coordinate to local tiles.
    Local(LocalFn),
    /// Applied to whole parallel values.
    Global(GlobalFn),
}

/// Op name to semantics.
pub type SemanticsTable = HashMap<&'static str, Semantics>;

/// Evaluation options.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Rounding and accumulation.
    pub precision: Precision,
    /// The tile size of each parallel axis.
    pub tiles: BTreeMap<String, usize>,
}

/// Evaluates the functions of one module.
pub struct Interp<'m> {
    module: &'m Module,
    semantics: &'m SemanticsTable,
    opts: Options,
    sigs: efir_ir::dialect::Signatures,
    extents: RefCell<HashMap<String, (usize, String)>>,
    depth: Cell<usize>,
}

/// How deeply function calls (`kernel.launch`, a reducer's `@f` and `@h`)
/// may nest. The verifier rejects cycles (E0211); this bound keeps a module
/// that was not verified, or an absurdly long chain of calls, from
/// overflowing the stack.
pub const MAX_CALL_DEPTH: usize = 64;

/// What local semantics can see.
pub struct LocalCtx<'a> {
    /// The interpreter (for calls and options).
    pub interp: &'a Interp<'a>,
    /// The op.
    pub op: &'a Op,
    /// The result type.
    pub result: &'a Type,
    /// The operand types.
    pub operands: Vec<&'a Type>,
    /// The coordinate being computed: axis to index.
    pub coord: &'a BTreeMap<String, usize>,
}

impl LocalCtx<'_> {
    /// The precision mode.
    pub fn precision(&self) -> Precision {
        self.interp.opts.precision
    }

    /// The local shape at this coordinate of a value with this logical
    /// shape and state (partitioned dims shrink to their tile here).
    pub fn local_shape(&self, shape: &[Dim], state: &State) -> Result<Vec<usize>, String> {
        let mut out: Vec<usize> = shape
            .iter()
            .map(|d| self.interp.dim_extent(d))
            .collect::<Result<_, _>>()?;
        for (axis, s) in state {
            if let AxisState::Part(i) = s {
                let t = self.interp.tile_size(axis)?;
                let c = self.coord.get(axis).copied().unwrap_or(0);
                let n = out[*i];
                out[*i] = t.min(n.saturating_sub(c * t));
            }
        }
        Ok(out)
    }

    /// The logical shape of the result (a tensor) with symbolic dims
    /// resolved.
    pub fn result_shape(&self) -> Result<Vec<usize>, String> {
        match self.result {
            Type::Tensor(t) => t.shape.iter().map(|d| self.interp.dim_extent(d)).collect(),
            Type::Tuple(_) => Err("expected a tensor result".into()),
        }
    }
}

/// What global semantics can see.
pub struct GlobalCtx<'a> {
    /// The interpreter.
    pub interp: &'a Interp<'a>,
    /// The op.
    pub op: &'a Op,
    /// The result type.
    pub result: &'a Type,
    /// The operand types.
    pub operands: Vec<&'a Type>,
}

impl GlobalCtx<'_> {
    /// The precision mode.
    pub fn precision(&self) -> Precision {
        self.interp.opts.precision
    }
}

impl<'m> Interp<'m> {
    /// An interpreter for `module`.
    pub fn new(module: &'m Module, semantics: &'m SemanticsTable, opts: Options) -> Interp<'m> {
        Interp {
            module,
            semantics,
            opts,
            sigs: efir_ir::verify::signatures(module),
            extents: RefCell::new(HashMap::new()),
            depth: Cell::new(0),
        }
    }

    /// The signatures of the module's functions.
    pub fn signatures(&self) -> &efir_ir::dialect::Signatures {
        &self.sigs
    }

    /// The options.
    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// The tile size of axis `a`.
    pub fn tile_size(&self, a: &str) -> Result<usize, String> {
        match self.opts.tiles.get(a) {
            Some(&t) if t > 0 => Ok(t),
            Some(_) => Err(format!("the tile size of `@{a}` must be positive")),
            None => Err(format!(
                "no tile size for parallel axis `@{a}` (give one with --tile {a}=N)"
            )),
        }
    }

    /// The number of coordinates of axis `a` (known once a partition along
    /// it ran).
    pub fn extent(&self, a: &str) -> Result<usize, String> {
        self.extents.borrow().get(a).map(|e| e.0).ok_or_else(|| {
            format!(
                "the number of coordinates of `@{a}` is unknown: nothing is partitioned along it"
            )
        })
    }

    /// The coordinates of the axes `f` partitions static dims along, known
    /// before its ops run: a value defined under an axis before the first
    /// partition along it (a `tensor.full` that compaction placed first)
    /// needs them (issue 30: efir-run refused such candidates, "nothing is
    /// partitioned along it"). Where the operand's extent or the tile size
    /// is unknown the partition sets them when it runs, which also reports
    /// disagreements.
    fn partition_extents(&self, f: &Func) {
        for op in f.ops.iter().filter(|o| o.name == "par.partition") {
            let (Some(a), Some(i), Some(v)) = (
                op.attrs.get("axis").and_then(|a| a.as_symbol()),
                op.attrs.get("dim").and_then(|a| a.as_int()),
                op.operands.first(),
            ) else {
                continue;
            };
            let Ok(size) = self.tile_size(a) else {
                continue;
            };
            if self.extents.borrow().contains_key(a) {
                continue;
            }
            let dims: Vec<u64> = f
                .ty(*v)
                .leaves()
                .iter()
                .filter_map(|l| {
                    let i = usize::try_from(i).ok()?;
                    // Already sliced along dim i: its tiles are not the dim.
                    if l.state
                        .values()
                        .any(|s| matches!(s, AxisState::Part(j) if *j == i))
                    {
                        return None;
                    }
                    match l.shape.get(i) {
                        Some(Dim::Static(n)) => Some(*n),
                        _ => None,
                    }
                })
                .collect();
            if let Some(&n) = dims.first() {
                if dims.iter().all(|d| *d == n) {
                    let n = n as usize;
                    let _ = self.set_extent(
                        a,
                        n.div_ceil(size),
                        &format!("a dim of {n} in tiles of {size}"),
                    );
                }
            }
        }
    }

    /// Record that axis `a` has `n` coordinates because of `why`; it is an
    /// error for one axis to slice dims into different numbers of tiles.
    pub fn set_extent(&self, a: &str, n: usize, why: &str) -> Result<(), String> {
        let mut ex = self.extents.borrow_mut();
        match ex.get(a) {
            Some((m, w)) if *m != n => Err(format!(
                "parallel axis `@{a}` has {m} coordinates ({w}) but {n} coordinates here ({why})"
            )),
            _ => {
                ex.insert(a.to_string(), (n, why.to_string()));
                Ok(())
            }
        }
    }

    /// The extent of a dim (static, or the coordinates of an axis).
    pub fn dim_extent(&self, d: &Dim) -> Result<usize, String> {
        match d {
            Dim::Static(n) => Ok(*n as usize),
            Dim::Axis(a) => self.extent(a),
        }
    }

    /// Run function `name` on whole inputs; inputs are checked against the
    /// parameter types and rounded to their dtypes.
    pub fn run(&self, name: &str, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
        let f = self
            .module
            .func(name)
            .ok_or_else(|| format!("no function `@{name}` in the module"))?;
        if inputs.len() != f.params.len() {
            return Err(format!(
                "`@{name}` takes {} inputs, {} given",
                f.params.len(),
                inputs.len()
            ));
        }
        let mut args = Vec::new();
        for (p, t) in f.params.iter().zip(inputs) {
            let v = f.value(*p);
            let Type::Tensor(ty) = &v.ty else {
                return Err(format!(
                    "parameter `%{}` is a tuple; only tensors can be inputs",
                    v.name
                ));
            };
            if !ty.state.is_empty() {
                return Err(format!(
                    "parameter `%{}` lives under parallel axes; inputs must be whole",
                    v.name
                ));
            }
            // A free symbolic extent (`|@dyn0|`, a family of sizes: no
            // partition gives it) takes its size from the first input that
            // has it; the others must agree.
            if t.data.ndim() == ty.rank() {
                for (i, d) in ty.shape.iter().enumerate() {
                    if let Dim::Axis(a) = d {
                        if self.extent(a).is_err() && !self.opts.tiles.contains_key(a) {
                            self.set_extent(
                                a,
                                t.data.shape()[i],
                                &format!("dim {i} of input `%{}`", v.name),
                            )?;
                        }
                    }
                }
            }
            let shape: Vec<usize> = ty
                .shape
                .iter()
                .map(|d| self.dim_extent(d))
                .collect::<Result<_, _>>()?;
            if t.data.shape() != shape.as_slice() || t.dtype != ty.dtype {
                return Err(format!(
                    "input `%{}` must be {:?} of {}, but {:?} of {} was given",
                    v.name,
                    shape,
                    ty.dtype,
                    t.data.shape(),
                    t.dtype
                ));
            }
            let mut data = t.data.clone();
            round_tile(&mut data, ty.dtype, Precision::Native);
            args.push(PValue::Tensor(PTensor::whole(ty.dtype, data)));
        }
        let outs = self.eval_func(f, args)?;
        let mut result = Vec::new();
        for (o, v) in outs.into_iter().zip(&f.returns) {
            flatten_whole(o, &mut result)
                .map_err(|e| format!("result `%{}` of `@{name}`: {e}", f.value(*v).name))?;
        }
        Ok(result)
    }

    /// Call a function of the module on parallel values (used by
    /// `kernel.launch`): its results.
    pub fn call_values(&self, name: &str, args: Vec<PValue>) -> Result<Vec<PValue>, String> {
        let f = self
            .module
            .func(name)
            .ok_or_else(|| format!("no function `@{name}` in the module"))?;
        if args.len() != f.params.len() {
            return Err(format!(
                "`@{name}` takes {} arguments, {} given",
                f.params.len(),
                args.len()
            ));
        }
        self.eval_func(f, args)
    }

    /// Call a function on whole tiles (used by reducers for `@f` and `@h`;
    /// the function's ops broadcast, so rank-0 functions apply pointwise).
    pub fn call(&self, name: &str, args: Vec<Tile>) -> Result<Vec<Tile>, String> {
        let f = self
            .module
            .func(name)
            .ok_or_else(|| format!("no function `@{name}` in the module"))?;
        let args = f
            .params
            .iter()
            .zip(args)
            .map(|(p, a)| {
                let dt = f
                    .ty(*p)
                    .as_tensor()
                    .map(|t| t.dtype)
                    .unwrap_or(efir_ir::DType::F32);
                PValue::Tensor(PTensor::whole(dt, a))
            })
            .collect();
        let outs = self.eval_func(f, args)?;
        let mut result = Vec::new();
        for o in outs {
            flatten_whole(o, &mut result)?;
        }
        Ok(result.into_iter().map(|t| t.data).collect())
    }

    fn eval_func(&self, f: &Func, args: Vec<PValue>) -> Result<Vec<PValue>, String> {
        let depth = self.depth.get();
        if depth >= MAX_CALL_DEPTH {
            return Err(format!(
                "calls nested more than {MAX_CALL_DEPTH} deep at `@{}` (do functions call each other in a cycle?)",
                f.name
            ));
        }
        self.depth.set(depth + 1);
        let out = self.eval_body(f, args);
        self.depth.set(depth);
        out
    }

    fn eval_body(&self, f: &Func, args: Vec<PValue>) -> Result<Vec<PValue>, String> {
        let mut env: Vec<Option<PValue>> = vec![None; f.values.len()];
        for (p, a) in f.params.iter().zip(args) {
            env[p.index()] = Some(a);
        }
        self.partition_extents(f);
        let accumulators = efir_ir::accum::accumulators(f);
        for op in &f.ops {
            let operands: Vec<&PValue> = op
                .operands
                .iter()
                .map(|v| {
                    env[v.index()]
                        .as_ref()
                        .ok_or("value used before definition")
                })
                .collect::<Result<_, _>>()?;
            let wide = accumulators.contains(&op.result);
            let v = self.eval_op(f, op, &operands, wide).map_err(|e| {
                format!("`{}` defining `%{}`: {e}", op.name, f.value(op.result).name)
            })?;
            env[op.result.index()] = Some(v);
        }
        f.returns
            .iter()
            .map(|v| {
                env[v.index()]
                    .clone()
                    .ok_or_else(|| "returned value is undefined".to_string())
            })
            .collect()
    }

    /// `wide`: the result is an accumulator held at f32 whatever its type
    /// (`efir_ir::accum`).
    fn eval_op(
        &self,
        f: &Func,
        op: &Op,
        operands: &[&PValue],
        wide: bool,
    ) -> Result<PValue, String> {
        let sem = self
            .semantics
            .get(op.name.as_str())
            .ok_or_else(|| format!("the interpreter has no semantics for `{}`", op.name))?;
        let result = f.ty(op.result);
        let operand_tys: Vec<&Type> = op.operands.iter().map(|v| f.ty(*v)).collect();
        let mut out = match sem {
            Semantics::Global(g) => g(
                &GlobalCtx {
                    interp: self,
                    op,
                    result,
                    operands: operand_tys,
                },
                operands,
            )?,
            Semantics::Local(l) => self.eval_local(*l, op, result, operand_tys, operands)?,
        };
        round_value(&mut out, result, self.opts.precision, wide);
        check_value(&out, result)?;
        Ok(out)
    }

    fn eval_local(
        &self,
        l: LocalFn,
        op: &Op,
        result: &Type,
        operand_tys: Vec<&Type>,
        operands: &[&PValue],
    ) -> Result<PValue, String> {
        let leaves = result.leaves();
        let state = &leaves.first().ok_or("empty tuple result")?.state;
        if leaves.iter().any(|t| &t.state != state) {
            return Err("the fields of a local op's result must share one parallel state".into());
        }
        let empty = BTreeMap::new();
        if operands.is_empty() {
            // A constant: build the whole value once, then slice it.
            let cx = LocalCtx {
                interp: self,
                op,
                result,
                operands: operand_tys,
                coord: &empty,
            };
            let whole = l(&cx, &[])?;
            let whole = whole.tile()?;
            let t = leaves[0];
            return Ok(PValue::Tensor(self.slice_whole(whole, t.dtype, state)?));
        }
        let coords = self.coords(state)?;
        let mut fields: Vec<PTensor> = leaves.iter().map(|t| PTensor::empty(t)).collect();
        for coord in coords {
            let locals: Vec<Local> = operands
                .iter()
                .map(|v| project(v, &coord))
                .collect::<Result<_, _>>()?;
            let cx = LocalCtx {
                interp: self,
                op,
                result,
                operands: operand_tys.clone(),
                coord: &coord,
            };
            let r = l(&cx, &locals)?;
            let key: Vec<usize> = coord.values().copied().collect();
            let rl = r.leaves();
            if rl.len() != fields.len() {
                return Err(format!(
                    "semantics of `{}` produced {} fields, the type has {}",
                    op.name,
                    rl.len(),
                    fields.len()
                ));
            }
            for (f, t) in fields.iter_mut().zip(rl) {
                f.tiles.insert(key.clone(), t.clone());
            }
        }
        Ok(match result {
            Type::Tensor(_) => PValue::Tensor(fields.remove(0)),
            Type::Tuple(_) => rebuild(result, &mut fields.into_iter()),
        })
    }

    /// Every coordinate of a state: replicated axes have only index 0.
    pub fn coords(&self, state: &State) -> Result<Vec<BTreeMap<String, usize>>, String> {
        let mut out = vec![BTreeMap::new()];
        for (axis, s) in state {
            let n = match s {
                AxisState::Repl => 1,
                _ => self.extent(axis)?,
            };
            out = out
                .into_iter()
                .flat_map(|c| {
                    (0..n).map(move |i| {
                        let mut c = c.clone();
                        c.insert(axis.clone(), i);
                        c
                    })
                })
                .collect();
        }
        Ok(out)
    }

    /// Slice a whole tile into the tiles of `state` (no partial axes).
    pub fn slice_whole(
        &self,
        whole: &Tile,
        dtype: efir_ir::DType,
        state: &State,
    ) -> Result<PTensor, String> {
        let mut tiles = BTreeMap::new();
        for coord in self.coords(state)? {
            let mut t = whole.view();
            for (axis, s) in state {
                match s {
                    AxisState::Part(i) => {
                        let size = self.tile_size(axis)?;
                        let c = coord[axis];
                        let n = t.shape()[*i];
                        let (a, b) = ((c * size).min(n), ((c + 1) * size).min(n));
                        t.slice_axis_inplace(ndarray::Axis(*i), (a..b).into());
                    }
                    AxisState::Repl => {}
                    AxisState::Partial(_) => {
                        return Err("a whole value cannot be sliced into partial values".into())
                    }
                }
            }
            tiles.insert(coord.values().copied().collect(), t.to_owned());
        }
        Ok(PTensor {
            dtype,
            state: state.clone(),
            tiles,
        })
    }
}

/// A value of type `t` from its tensor fields in order (a missing field is
/// an empty tensor of the field's type).
pub fn rebuild(t: &Type, fields: &mut dyn Iterator<Item = PTensor>) -> PValue {
    match t {
        Type::Tensor(tt) => PValue::Tensor(fields.next().unwrap_or(PTensor::empty(tt))),
        Type::Tuple(ts) => PValue::Tuple(ts.iter().map(|t| rebuild(t, fields)).collect()),
    }
}

/// The local of `v` at `coord` (replicated axes read index 0).
pub fn project(v: &PValue, coord: &BTreeMap<String, usize>) -> Result<Local, String> {
    match v {
        PValue::Tuple(vs) => Ok(Local::Tuple(
            vs.iter()
                .map(|v| project(v, coord))
                .collect::<Result<_, _>>()?,
        )),
        PValue::Tensor(t) => {
            let key: Vec<usize> = t
                .state
                .iter()
                .map(|(a, s)| match s {
                    AxisState::Repl => Ok(0),
                    _ => coord.get(a).copied().ok_or_else(|| {
                        format!("operand lives under `@{a}` but the result does not")
                    }),
                })
                .collect::<Result<_, String>>()?;
            t.tiles
                .get(&key)
                .cloned()
                .map(Local::Tile)
                .ok_or_else(|| format!("no tile at coordinate {key:?}"))
        }
    }
}

/// Round an op's result to its type. Partial results (a `partial(...)`
/// state: per-tile sums, maxima, ... that a `par.reduce` finishes) of a
/// 16-bit float type are kept at f32 precision: they are an accumulator, as
/// in the kernels (`acc = tl.dot(a, b, acc)`), and the `par.reduce` that
/// finishes them rounds once to the type, so a K-split matmul equals the
/// unsplit one to f32 rounding. So are collected partial sums on their way
/// to the reduce that finishes them (`wide`: see `efir_ir::accum`).
fn round_value(v: &mut PValue, t: &Type, p: Precision, wide: bool) {
    match (v, t) {
        (PValue::Tensor(pt), Type::Tensor(tt)) => {
            pt.dtype = tt.dtype;
            let partial = tt
                .state
                .values()
                .any(|s| matches!(s, efir_ir::AxisState::Partial(_)));
            let dt = if (partial || wide)
                && matches!(tt.dtype, efir_ir::DType::F16 | efir_ir::DType::BF16)
            {
                efir_ir::DType::F32
            } else {
                tt.dtype
            };
            for tile in pt.tiles.values_mut() {
                round_tile(tile, dt, p);
            }
        }
        (PValue::Tuple(vs), Type::Tuple(ts)) => {
            for (v, t) in vs.iter_mut().zip(ts) {
                round_value(v, t, p, wide);
            }
        }
        _ => {}
    }
}

/// An error when an integer result cannot be held exactly (see
/// [`crate::value::check_exact_ints`]).
fn check_value(v: &PValue, t: &Type) -> Result<(), String> {
    match (v, t) {
        (PValue::Tensor(pt), Type::Tensor(tt)) => {
            for tile in pt.tiles.values() {
                crate::value::check_exact_ints(tile, tt.dtype, "the result")?;
            }
            Ok(())
        }
        (PValue::Tuple(vs), Type::Tuple(ts)) => {
            for (v, t) in vs.iter().zip(ts) {
                check_value(v, t)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn flatten_whole(v: PValue, out: &mut Vec<Tensor>) -> Result<(), String> {
    match v {
        PValue::Tensor(t) => {
            let dtype = t.dtype;
            out.push(Tensor {
                dtype,
                data: t.into_whole()?,
            });
        }
        PValue::Tuple(vs) => {
            for v in vs {
                flatten_whole(v, out)?;
            }
        }
    }
    Ok(())
}
