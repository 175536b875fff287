//! One kernel: its pointer arguments, the `tt.func` and its module
//! attributes, the program id decomposed over the grid axes, the body
//! computed and stored.

use super::*;

/// The pointer arguments of a kernel: the buffers its body reads (reached
/// without crossing a buffer), in value order, then the one it writes.
pub(super) fn kernel_buffers(p: &Plan<'_>, k: &Kernel) -> Vec<ValueId> {
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

/// How a kernel's function is built: launched by the host (chaining its
/// launches by programmatic dependent launch or not), or as a private member
/// of a launch group whose programs start after `off` of the group's.
#[derive(Clone, Copy)]
pub(super) enum Role {
    Launched { pdl: bool },
    Member(u64),
}

pub(super) fn kernel(
    ctx: &Context,
    diags: &Arc<Mutex<Vec<String>>>,
    p: &Plan<'_>,
    k: &Kernel,
    buffers: &mut Vec<Buffer>,
    index: &mut HashMap<(ValueId, usize), usize>,
    role: Role,
) -> Result<TtirKernel, String> {
    let member = match role {
        Role::Member(off) => Some(off),
        Role::Launched { .. } => None,
    };
    let f = p.func;
    let loc = Location::unknown(ctx);
    // One pointer per leaf of each buffer (a tuple buffer is one per field).
    let mut bufs: Vec<(ValueId, usize)> = Vec::new();
    let mut args = Vec::new();
    let mut arg_tys = Vec::new();
    // Program inputs and results are numbered by leaf: a tuple input or
    // result is one buffer per field, in order (as the Python build returns
    // a tuple result's fields).
    let flat = |list: &[ValueId], v: ValueId, leaf: usize| -> Option<usize> {
        let pos = list.iter().position(|x| *x == v)?;
        let before: usize = list[..pos].iter().map(|x| f.ty(*x).leaves().len()).sum();
        Some(before + leaf)
    };
    for v in kernel_buffers(p, k) {
        let leaves = leaf_shapes(p, f.ty(v))?;
        let tuple = f.ty(v).as_tensor().is_none();
        for (leaf, (shape, dt)) in leaves.into_iter().enumerate() {
            // Collected partial sums are held at f32 (`efir_ir::accum`).
            let dt = efir_triton::storage_dtype(p, v, dt);
            let (input, output) = (flat(&f.params, v, leaf), flat(&f.returns, v, leaf));
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
    // Built twice where a causal loop makes the programs along one grid
    // axis unequal: the second time that axis's heaviest tiles start first
    // (see [`Em::run`]).
    let mut heavy: Option<String> = None;
    loop {
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
                (
                    Identifier::new(ctx, "sym_visibility"),
                    a(if member.is_some() {
                        "\"private\""
                    } else {
                        "\"public\""
                    })?,
                ),
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
        let found;
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
                pad16: efir_triton::small_dot_extents(p.func, &p.def, &p.buffer, k.body),
                idx: HashMap::new(),
                alias: HashMap::new(),
                sigs: efir_triton::signatures(p.module, f),
                prods: Vec::new(),
                narrow_states: None,
                own: p
                    .kernel_blocks
                    .get(k.index)
                    .into_iter()
                    .flatten()
                    .filter(|(a, _)| !k.grid.iter().any(|(g, _)| g == *a))
                    .map(|(a, b)| (a.clone(), *b))
                    .collect(),
                zero_padded: HashMap::new(),
                unrounded: HashMap::new(),
                scaled: HashMap::new(),
                unmasked: HashMap::new(),
                reloaded: HashMap::new(),
                stat: p
                    .stat_blocks
                    .get(k.index)
                    .into_iter()
                    .flatten()
                    .map(|(a, b)| (a.clone(), *b))
                    .collect(),
                streamed: HashMap::new(),
                sub: None,
                rebase: None,
                rebase_acc: None,
                rebased: Vec::new(),
                heavy_first: heavy.clone(),
                pid_off: member.unwrap_or(0),
                // (a group's member runs under the group function's wait)
                pdl: matches!(role, Role::Launched { pdl: true }),
                diag_true: None,
                heavy: None,
            };
            for (i, v) in bufs.iter().enumerate() {
                let x = body.argument(i).map_err(|e| e.to_string())?;
                em.args.insert(*v, x.into());
            }
            em.run(k, &nts)?;
            found = em.heavy.clone();
            // Sibling loops over the same range share one loop.
            fuse::sibling_loops(ctx, body)?;
        }
        if heavy.is_none() {
            if let Some(h) = found.filter(|h| k.grid.iter().any(|(a, _)| a == h)) {
                heavy = Some(h);
                continue;
            }
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
        return Ok(TtirKernel {
            name,
            text: module.as_operation().to_string(),
            args,
            grid,
            num_warps: warps,
            num_stages: stages,
        });
    }
}

impl<'c, 'm> Em<'c, 'm, '_, '_> {
    /// The kernel: decompose the program id, compute the body, store it.
    /// With [`Em::heavy_first`] (an axis along which later tiles loop
    /// longer), the program id is first permuted as the Python build's:
    /// that axis varies fastest and its last tiles come first, so that the
    /// launch's last wave is not all long programs.
    pub(super) fn run(&mut self, k: &Kernel, nts: &[u64]) -> R<()> {
        let f = self.p.func;
        if self.pdl {
            for asm in PDL_ASM {
                self.pdl_op(asm)?;
            }
        }
        let mut pid = self.val(
            0,
            "tt.get_program_id",
            &[],
            "i32",
            &[("axis", "0 : i32".into())],
        )?;
        // A later member of a launch group: its programs come after the
        // earlier members' (the Python build's `PID_OFF`).
        if self.pid_off > 0 {
            let c = self.const_i32(0, self.pid_off as i64)?;
            pid = self.val(0, "arith.subi", &[pid, c], "i32", &[])?;
        }
        if let Some(i) = self
            .heavy_first
            .as_ref()
            .and_then(|h| k.grid.iter().position(|(a, _)| a == h))
        {
            // q = pid % h, r = pid / h (h the heavy axis's tiles, `below`
            // those of the axes before it): pid = r % below + (h - 1 - q)
            // * below + r / below * (below * h).
            let h = nts[i] as i64;
            let below: i64 = nts[..i].iter().product::<u64>() as i64;
            let ch = self.const_i32(0, h)?;
            let q = self.val(0, "arith.remsi", &[pid, ch], "i32", &[])?;
            let r = self.val(0, "arith.divsi", &[pid, ch], "i32", &[])?;
            let ch1 = self.const_i32(0, h - 1)?;
            let rev = self.val(0, "arith.subi", &[ch1, q], "i32", &[])?;
            pid = if below == 1 {
                let a = self.val(0, "arith.muli", &[r, ch], "i32", &[])?;
                self.val(0, "arith.addi", &[rev, a], "i32", &[])?
            } else {
                let cb = self.const_i32(0, below)?;
                let cbh = self.const_i32(0, below * h)?;
                let lo = self.val(0, "arith.remsi", &[r, cb], "i32", &[])?;
                let mid = self.val(0, "arith.muli", &[rev, cb], "i32", &[])?;
                let hi = self.val(0, "arith.divsi", &[r, cb], "i32", &[])?;
                let hi = self.val(0, "arith.muli", &[hi, cbh], "i32", &[])?;
                let x = self.val(0, "arith.addi", &[lo, mid], "i32", &[])?;
                self.val(0, "arith.addi", &[x, hi], "i32", &[])?
            };
        }
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
        // A split-K program's matmul streams its tile of the collected
        // axis in sub-blocks (see [`Em::collect_sub_loop`]).
        self.sub = self.sub_loop_of(k)?.map(|(a, s)| (k.body, a, s));
        // Its own block of any other grid axis is refused, as the Python
        // host refuses it.
        let i = k.index;
        if let Some(a) = self
            .p
            .kernel_blocks
            .get(i)
            .into_iter()
            .flatten()
            .find(|(a, _)| {
                k.grid.iter().any(|(g, _)| g == *a) && self.sub.as_ref().map(|s| &s.1) != Some(*a)
            })
            .map(|(a, _)| a)
        {
            return Err(format!(
                "schedule entry `BLOCK_{}__k{i}`: kernel {i} does not only loop over @{a}, so it cannot take a block of its own",
                efir_triton::py_ident(a)
            ));
        }
        // A flash-decoding program's state streams its tile likewise.
        let blocks = match self.sub.clone().and_then(|(_, a, sb)| {
            Some((
                efir_triton::partial_reducer(f, &self.p.def, &self.p.buffer, k.body, &a)?,
                a,
                sb,
            ))
        }) {
            Some((r, a, sb)) => {
                self.sub = None;
                self.collect_sub_reduce(k.body, &a, sb, &r, &lay)?.blocks()
            }
            None => self.emit_op(k.body, &lay)?.blocks(),
        };
        if self.sub.is_some() {
            return Err("the split-K matmul was not streamed".into());
        }
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
        // A kernel computing a value that its buffer holds through views
        // (reshapes and transposes) stores each element where the views
        // put it.
        let through =
            efir_triton::store_view(f, &self.p.def, &self.p.buffer, k.root).map(|(chain, _)| chain);
        for (leaf, ((exts, dt), x)) in leaves.into_iter().zip(blocks).enumerate() {
            // A buffer of collected partial sums is f32: it takes the
            // matmul's f32 sum before its rounding where this kernel has it
            // (as the Python build stores `acc`), else the block widened.
            let dt = efir_triton::storage_dtype(self.p, k.root, dt);
            let x = match self.unrounded.get(&super::emit::raw(x.v)) {
                Some(w) if dt != x.dt => w.clone(),
                _ => x,
            };
            let x = self.cast(&x, dt)?;
            let exts = if lead.is_some() {
                &exts[1..]
            } else {
                &exts[..]
            };
            let ptr = match &through {
                Some(chain) if lead.is_none() => {
                    let mut idx = Vec::with_capacity(x.dims.len());
                    for j in 0..x.dims.len() {
                        idx.push(self.ix_dim(0, &x.dims, j)?);
                    }
                    let idx = self.store_ixs(chain, idx, 0)?;
                    self.ixs_ptrs((k.root, leaf), exts, dt, &x.shape(), idx, 0)?
                }
                Some(_) => return Err("a collect kernel storing through views".into()),
                None => self.ptrs((k.root, leaf), &x.dims, exts, dt, 0, lead)?,
            };
            match self.mask(&x.dims, 0)? {
                None => self.op(0, "tt.store", &[ptr, x.v], &[], &[])?,
                Some(m) => self.op(0, "tt.store", &[ptr, x.v, m], &[], &[])?,
            };
        }
        self.op(0, "tt.return", &[], &[], &[])?;
        Ok(())
    }
}

/// Programmatic dependent launch's two instructions, as Triton's
/// `tl.extra.cuda.gdc_wait` and `gdc_launch_dependents` write them (inline
/// assembly with a dummy result): wait for the launch before this one to
/// finish and flush its writes, then let the next launch's programs start.
pub(super) const PDL_ASM: [&str; 2] = [
    "griddepcontrol.wait; // dummy $0",
    "griddepcontrol.launch_dependents; // dummy $0",
];

impl Em<'_, '_, '_, '_> {
    /// One of [`PDL_ASM`] at the function's top.
    fn pdl_op(&self, asm: &str) -> R<()> {
        self.op(
            0,
            "tt.elementwise_inline_asm",
            &[],
            &["i32"],
            &[
                ("asm_string", format!("\"{asm}\"")),
                ("constraints", "\"=r\"".into()),
                ("packed_element", "1 : i32".into()),
                ("pure", "false".into()),
            ],
        )?;
        Ok(())
    }
}
