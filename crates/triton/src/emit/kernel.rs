//! One `@triton.jit` kernel of a plan: the grid, the body, the stores and
//! the parameters.

use super::*;

pub(super) struct EmittedKernel {
    pub(super) name: String,
    pub(super) text: String,
    /// The schedule constants the kernel takes, as launch arguments
    /// (`BLOCK_a=block_a`, ...).
    pub(super) consts: Vec<String>,
    pub(super) buffers: Vec<(ValueId, usize)>,
    /// The kernel's parameters as its signature lists them (buffer
    /// pointers, then constants with their `: tl.constexpr`).
    pub(super) params: Vec<String>,
    pub(super) work: Vec<Work>,
    pub(super) grid: Vec<String>,
    /// Axes (keys of the plan's axes) the kernel only loops over: not in
    /// its grid, no buffer it reads or writes has a dim of their tiles, and
    /// no causal clipping; the kernel may take its own block of them.
    pub(super) loop_only: Vec<String>,
    /// The collected axis of a split-K kernel that loops over sub-blocks
    /// of its tile (`SUB_<axis>`, the kernel's own block of it).
    pub(super) sub_loop: Option<String>,
    /// Loop-only axes whose loops without a matmul run on blocks of their
    /// own (`RB_<axis>`; see [`Plan::stat_blocks`]).
    pub(super) stat_axes: Vec<String>,
    /// Loop-only axes that the kernel loops over both for a matmul and for
    /// a reduction without one (the candidates for `stat_axes`).
    mixed: Vec<String>,
}

/// The grid axis (its position in `grid`) that should vary fastest in a
/// kernel with a matmul, where it is not the first: the one whose tiles
/// index the fewest bytes of the buffers the kernel loads. The programs of
/// one wave then differ along it and share the tiles of the other operands:
/// a 512-row projection by a 4096x14336 weight in 128x128 tiles with the
/// weight's axis fastest re-reads the whole weight from DRAM for each of the
/// 4 row tiles (Llama's gate projection on the H100: no faster at 8 warps
/// than its 216 us at 4; remapped, at 8 warps, 170 against the up
/// projection's 129, whose rows' axis is first in its grid).
fn l2_fastest(work: &[Work], grid: &[(String, Option<usize>)]) -> Option<usize> {
    let names = |s: &str| -> Vec<String> {
        s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map(str::to_string)
            .collect()
    };
    let blocks: Vec<String> = grid
        .iter()
        .map(|(a, _)| format!("BLOCK_{}", py_ident(a)))
        .collect();
    let tiled = |s: &str| blocks.iter().position(|b| names(s).contains(b));
    // A matmul whose output tile is of two grid axes (rows and columns;
    // not attention at decode, whose rows are one query).
    let tile = work.iter().any(|w| {
        let n = w.sizes.len();
        w.flops
            && n >= 3
            && matches!(
                (tiled(&w.sizes[n - 3]), tiled(&w.sizes[n - 1])),
                (Some(r), Some(c)) if r != c
            )
    });
    if grid.len() < 2 || !tile {
        return None;
    }
    let indexed = |a: &str| -> f64 {
        let block = format!("BLOCK_{}", py_ident(a));
        work.iter()
            .filter(|w| !w.flops && w.source > 0.0)
            .filter(|w| w.sizes.iter().any(|s| names(s).contains(&block)))
            .map(|w| w.source)
            .sum()
    };
    let bytes: Vec<f64> = grid.iter().map(|(a, _)| indexed(a)).collect();
    let (i, least) =
        bytes.iter().enumerate().fold(
            (0, bytes[0]),
            |(bi, b), (i, &x)| if x < b { (i, x) } else { (bi, b) },
        );
    (i > 0 && least < bytes[0]).then_some(i)
}

fn emit_kernel(p: &Plan<'_>, k: &Kernel) -> Result<EmittedKernel, String> {
    let first = emit_kernel_with(p, k, IndexSet::new())?;
    if first.mixed.is_empty() {
        return Ok(first);
    }
    // Again, with the statistics loops on blocks of their own.
    emit_kernel_with(p, k, first.mixed.iter().cloned().collect())
}

fn emit_kernel_with(
    p: &Plan<'_>,
    k: &Kernel,
    stat_axes: IndexSet<String>,
) -> Result<EmittedKernel, String> {
    let f = p.func;
    let mut e = KernelEmitter::new(p);
    e.stat_axes = stat_axes;
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
    // A split-K program's matmul runs as a loop over sub-blocks of its
    // tile of the collected axis.
    let sub_axis = k
        .collect
        .then(|| {
            k.grid
                .iter()
                .find(|(_, d)| d.is_none())
                .map(|(a, _)| a.clone())
        })
        .flatten()
        .filter(|a| {
            e.dot_accumulates(&Attr::Term("red.sum".into(), Vec::new()), k.body)
                || crate::partial_reducer(f, &p.def, &p.buffer, k.body, a).is_some()
        });
    let val = match &sub_axis {
        Some(a) => match crate::partial_reducer(f, &p.def, &p.buffer, k.body, a) {
            Some(r) => e.collect_sub_reduce(k.body, a, &r, &lay)?,
            None => e.collect_sub_loop(k.body, a, &lay)?,
        },
        None => e.emit_def(k.body, &lay)?,
    };
    // Where programs along one grid axis do unequal work (a causal loop),
    // that axis varies fastest and its heaviest tiles start first, so that
    // the last wave is not all long programs (the tail of the launch).
    // Otherwise, in a kernel with a matmul, the axis indexing the fewest
    // bytes of what it loads varies fastest, so that the programs running
    // together share the tiles of the larger operand through L2 (see
    // [`l2_fastest`]).
    let heavy = e
        .heavy
        .clone()
        .and_then(|h| k.grid.iter().position(|(a, _)| *a == h));
    let fastest = heavy
        .map(|i| (i, true))
        .or_else(|| l2_fastest(&e.work, &k.grid).map(|i| (i, false)));
    if let Some((i, reversed)) = fastest {
        // The program id as the grid's order would have it, from one where
        // axis `i` varies fastest (reversed: its heaviest tiles first).
        let nt = |a: &String| format!("NT_{}", py_ident(a));
        let below: Vec<String> = k.grid[..i].iter().map(|(a, _)| nt(a)).collect();
        let below = if below.is_empty() {
            "1".to_string()
        } else {
            below.join(" * ")
        };
        let h = nt(&k.grid[i].0);
        let (q, r) = (e.fresh("hq"), e.fresh("hr"));
        let at = if reversed {
            format!("({h} - 1 - {q})")
        } else {
            q.clone()
        };
        let lines = [
            format!("{q} = pid % {h}"),
            format!("{r} = pid // {h}"),
            format!(
                "pid = {r} % ({below}) + {at} * ({below}) + {r} // ({below}) * ({below} * {h})"
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
    // A kernel computing a value that its buffer holds through views.
    let through = crate::plan::store_view(f, &p.def, &p.buffer, k.root).map(|(c, _)| c);
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
        let ptr = match &through {
            // Each element of the computed block goes where the views put it.
            Some(chain) => {
                let r = b.dims.len();
                let offs: Vec<String> = b
                    .dims
                    .iter()
                    .enumerate()
                    .map(|(j, d)| along(&d.offs, j, r))
                    .collect();
                let idx = store_indices(f, &p.def, chain, offs.clone())?;
                let mut ptr = e.ptr_at(&name, &idx, &exts, lead_ref);
                // A tiled unit dim (a query row padded to a 16-row dot
                // block) indexes 0 in the buffer: its offsets still shape
                // the pointers, so that the mask keeps the one row.
                for (j, d) in b.dims.iter().enumerate() {
                    if d.padded_unit() {
                        ptr = format!("{ptr} + 0 * {}", offs[j]);
                    }
                }
                ptr
            }
            None => e.ptr(&name, &b.dims, &exts, lead_ref),
        };
        // An accumulator's buffer is f32: the block before its rounding to
        // the 16-bit type where the kernel has it (the matmul's f32 sum).
        let dt = storage_dtype(p, k.root, l.dtype);
        let src = if dt != l.dtype {
            e.unrounded
                .get(&b.var)
                .cloned()
                .unwrap_or_else(|| b.var.clone())
        } else {
            b.var.clone()
        };
        let val = format!("({src}).to({})", tl_dtype(dt));
        for line in KernelEmitter::masked(&b.dims, |m| match m {
            None => format!("tl.store({ptr}, {val})"),
            Some(m) => format!("tl.store({ptr}, {val}, mask={m})"),
        }) {
            e.line(0, line);
        }
        e.work.push(Work {
            bytes: dtype_bytes(dt),
            source: 0.0,
            sizes: b.dims.iter().map(|d| d.size.clone()).collect(),
            loops: Vec::new(),
            nest: Vec::new(),
            flops: false,
            // (Through views, the stored elements' order is the views'.)
            run: if through.is_none() {
                contiguous_run(&b.dims, &exts)
            } else {
                None
            },
            computed: false,
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
    for (a, info) in &p.axes {
        let id = py_ident(a);
        // The tile counts of an axis over a symbolic extent vary with the
        // size: runtime integers, so that they do not recompile the kernel.
        let sym = matches!(info.extent, Extent::Sym(_));
        for c in ["BLOCK", "NT", "NTP", "EVEN", "SUB", "RB", "RNT"] {
            let name = format!("{c}_{id}");
            if words.contains(name.as_str()) {
                if sym && (c == "NT" || c == "RNT") {
                    params.push(name.clone());
                } else {
                    params.push(format!("{name}: tl.constexpr"));
                }
                consts.push(format!("{name}={}_{id}", c.to_lowercase()));
            }
        }
    }
    // A symbolic extent: its size (a runtime integer) and, where a block
    // holds the whole dim, that block's length (its next power of two, a
    // constexpr).
    for a in crate::current_symbols() {
        let id = py_ident(&a);
        for (c, constexpr) in [("N", false), ("NP", true)] {
            let name = format!("{c}_{id}");
            if words.contains(name.as_str()) {
                params.push(match constexpr {
                    true => format!("{name}: tl.constexpr"),
                    false => name.clone(),
                });
                consts.push(format!("{name}={}_{id}", c.to_lowercase()));
            }
        }
    }
    let tiles_of = |a: &str| {
        buffers.iter().any(|(v, _)| {
            f.ty(*v).leaves().iter().any(|l| {
                l.shape
                    .iter()
                    .any(|d| matches!(d, efir_ir::Dim::Axis(x) if x == a))
            })
        })
    };
    let loop_only: Vec<String> = p
        .axes
        .keys()
        .filter(|a| {
            let looped = e.work.iter().any(|w| w.loops.iter().any(|l| l == *a));
            let clipped = e.work.iter().any(|w| {
                w.loops
                    .iter()
                    .any(|l| l.split('/').next() == Some(a.as_str()) && is_clipped(l))
            });
            looped
                && !clipped
                && words.contains(format!("BLOCK_{}", py_ident(a)).as_str())
                && !k.grid.iter().any(|(g, _)| g == *a)
                && !tiles_of(a)
        })
        .cloned()
        .collect();
    let mixed: Vec<String> = loop_only
        .iter()
        .filter(|a| {
            e.loop_kinds.iter().any(|(x, d)| x == *a && *d)
                && e.loop_kinds.iter().any(|(x, d)| x == *a && !*d)
        })
        .cloned()
        .collect();
    let stat_axes: Vec<String> = e
        .stat_axes
        .iter()
        .filter(|a| words.contains(format!("RB_{}", py_ident(a)).as_str()))
        .cloned()
        .collect();
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
        params,
        work: e.work,
        grid: k.grid.iter().map(|(a, _)| a.clone()).collect(),
        loop_only,
        sub_loop: sub_axis,
        stat_axes,
        mixed,
    })
}

pub(super) fn emit_kernel_in_context(p: &Plan<'_>, k: &Kernel) -> Result<EmittedKernel, String> {
    let _syms = crate::SymScope::enter(p.func);
    emit_kernel(p, k).map_err(|e| {
        format!(
            "kernel {} (writing `%{}`): {e}",
            k.index,
            p.func.value(k.root).name
        )
    })
}

/// The index expressions of buffer `chain[0]`'s dims at the elements of a
/// block of the value under its chain of reshapes and transposes (`offs`,
/// those of the block's dims): the load of [`super::views`] run upwards (a
/// transpose permutes, a reshape regroups through the row-major flat index,
/// so a merge of heads `(h, d) -> h * D + d` and a split divide and take
/// the modulo).
fn store_indices(
    f: &efir_ir::Func,
    def: &[Option<usize>],
    chain: &[ValueId],
    offs: Vec<String>,
) -> Result<Vec<String>, String> {
    let statics = |y: ValueId| -> Result<Vec<u64>, String> {
        let t = f.ty(y).as_tensor().ok_or("a view of a tuple")?;
        t.shape
            .iter()
            .map(|d| match d {
                efir_ir::Dim::Static(n) => Ok(*n),
                efir_ir::Dim::Axis(a) => Err(format!(
                    "the result is stored through a view of `%{}`, whose extents are not static (|@{a}|)",
                    f.value(y).name
                )),
            })
            .collect()
    };
    let mut idx = offs;
    for &y in chain.iter().rev() {
        let op = &f.ops[def[y.index()].ok_or("a view without its op")?];
        let a = op.operands[0];
        if op.name == "tensor.transpose" {
            // Dim `k` of the result is dim `perm[k]` of the operand.
            let perm = op
                .attrs
                .get("perm")
                .and_then(Attr::as_int_array)
                .ok_or("a transpose without perm")?;
            idx = perm
                .iter()
                .map(|p| {
                    idx.get(*p as usize)
                        .cloned()
                        .ok_or("a transpose out of range")
                })
                .collect::<Result<_, _>>()?;
        } else {
            idx = super::views::regroup(&idx, &statics(a)?, &statics(y)?)?;
        }
    }
    Ok(idx)
}
