//! The Python module of a plan: the docstring, `DEFAULT_CONFIG`,
//! `CONFIG_SPACE`, `ESTIMATE`, `INPUTS`, the kernels and the host function
//! `run()`.

use super::*;

/// The Python module for a plan: kernels, configuration, host function.
pub fn emit_python(p: &Plan<'_>, source: &str, pipeline: &str) -> Result<String, String> {
    let f = p.func;
    let _syms = crate::SymScope::enter(f);
    let mut ks = Vec::new();
    for k in &p.kernels {
        ks.push(emit_kernel_in_context(p, k)?);
    }
    let groups = launch_groups(p, &ks);
    // Programmatic dependent launch is a choice of programs of several launches.
    let pdl = groups.len() > 1;
    if p.pdl.is_some() && !pdl {
        return Err(
            "schedule entry `pdl`: the program takes one launch (`pdl` chooses how a program of several launches chains them)"
                .into(),
        );
    }
    let mut out = String::new();
    docstring(&mut out, p, source, pipeline);
    let (defaults, space) = configuration(p, &ks, groups.len())?;
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
    inputs_list(&mut out, f)?;
    for g in &groups {
        for (j, &i) in g.iter().enumerate() {
            let text = if pdl {
                with_pdl(&ks[i].text)
            } else {
                ks[i].text.clone()
            };
            let text = if j > 0 { offset_pid(&text) } else { text };
            let _ = writeln!(out, "\n{text}");
        }
        if g.len() > 1 {
            let _ = writeln!(out, "\n{}", group_kernel(&ks, g, pdl));
        }
    }
    if groups.iter().any(|g| g.len() > 1) {
        // (group, schedule) pairs whose group launch ran out of resources
        let _ = writeln!(out, "\n_UNGROUPED = set()");
    }
    let _ = write!(out, "{REGS_HELPER}");
    if pdl {
        let _ = write!(out, "{PDL_HELPER}");
    }
    let _ = writeln!(out);
    run_function(&mut out, p, &ks, &groups);
    Ok(out)
}

/// The plan's kernels in launch groups: runs of consecutive kernels none of
/// which reads a buffer that another of the run writes (the gate and up
/// projections of a split-K MLP, say). A group of several kernels is
/// launched once (horizontal fusion: [`group_kernel`]) where they share
/// `num_warps` and `num_stages`, which saves a launch and the gap between
/// the kernels (about 2 us on an H100 for two split-K GEMVs of 4096x4096,
/// `bench/gpu/hfuse_probe.py`).
pub(super) fn launch_groups(p: &Plan<'_>, ks: &[EmittedKernel]) -> Vec<Vec<usize>> {
    let roots: Vec<ValueId> = p.kernels.iter().map(|k| k.root).collect();
    let reads: Vec<Vec<ValueId>> = ks
        .iter()
        .map(|ek| ek.buffers.iter().map(|(v, _)| *v).collect())
        .collect();
    crate::launch_groups(&roots, &reads)
}

/// A kernel launched as a later member of a group: its program ids start
/// after the earlier members' (`PID_OFF`, 0 when it is launched alone).
fn offset_pid(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    let mut done = (false, false);
    for line in text.lines() {
        if !done.0 && line.starts_with("def ") && line.ends_with("):") {
            out.push_str(&line[..line.len() - 2]);
            out.push_str(", PID_OFF=0):");
            done.0 = true;
        } else if !done.1 && line.trim() == "pid = tl.program_id(0)" {
            out.push_str("    pid = tl.program_id(0) - PID_OFF");
            done.1 = true;
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out.truncate(out.trim_end().len());
    out
}

/// A kernel of a program of several launches: a `PDL` switch (0 unless
/// the configuration's `pdl` is on and the GPU has programmatic dependent
/// launch) under which each program first waits for the kernel launched
/// before it to finish and flush its writes (`gdc_wait`), then lets the
/// next kernel's programs start on the SMs that its own free
/// (`gdc_launch_dependents`). Every kernel waits, so a kernel that reads a
/// buffer written two launches before it also finds it complete.
fn with_pdl(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 160);
    let (mut def, mut doc) = (false, false);
    for line in text.lines() {
        if !def && line.starts_with("def ") && line.ends_with("):") {
            out.push_str(&line[..line.len() - 2]);
            out.push_str(", PDL: tl.constexpr = 0):\n");
            def = true;
            continue;
        }
        out.push_str(line);
        out.push('\n');
        if def && !doc && line.trim_start().starts_with("\"\"\"") {
            out.push_str("    if PDL:\n");
            out.push_str("        tl.extra.cuda.gdc_wait()\n");
            out.push_str("        tl.extra.cuda.gdc_launch_dependents()\n");
            doc = true;
        }
    }
    out.truncate(out.trim_end().len());
    out
}

/// The name of a group's kernel (kernel names start `_k<i>_`, so no
/// kernel has it).
fn group_name(g: &[usize]) -> String {
    let ids: Vec<String> = g.iter().map(|i| i.to_string()).collect();
    format!("_h{}", ids.join("_"))
}

/// The parameter `x` of group member `j`, in the group kernel.
fn member_param(j: usize, x: &str) -> String {
    format!("m{j}_{x}")
}

/// One kernel for a launch group: each program runs the member its id
/// falls in (`G_j`: the programs of the members before `j`), with the
/// member's parameters (prefixed `m<j>_`) passed through.
fn group_kernel(ks: &[EmittedKernel], g: &[usize], pdl: bool) -> String {
    let mut params = Vec::new();
    let mut calls = Vec::new();
    for (j, &i) in g.iter().enumerate() {
        let mut args = Vec::new();
        for x in &ks[i].params {
            let (name, ty) = match x.split_once(':') {
                Some((n, t)) => (n.trim(), format!(":{t}")),
                None => (x.as_str(), String::new()),
            };
            params.push(format!("{}{ty}", member_param(j, name)));
            args.push(member_param(j, name));
        }
        if j > 0 {
            params.push(format!("G_{j}"));
            args.push(format!("PID_OFF=G_{j}"));
        }
        if pdl {
            args.push("PDL=PDL".into());
        }
        calls.push(format!("{}({})", ks[i].name, args.join(", ")));
    }
    if pdl {
        params.push("PDL: tl.constexpr = 0".into());
    }
    let mut text = String::new();
    let _ = writeln!(text, "@triton.jit");
    let _ = writeln!(text, "def {}({}):", group_name(g), params.join(", "));
    let names: Vec<&str> = g.iter().map(|&i| ks[i].name.as_str()).collect();
    let _ = writeln!(
        text,
        "    \"\"\"{} in one launch (their programs one after the other).\"\"\"",
        names.join(", ")
    );
    let _ = writeln!(text, "    pid = tl.program_id(0)");
    for (j, call) in calls.iter().enumerate() {
        if j + 1 == calls.len() {
            let _ = writeln!(text, "    else:");
        } else if j == 0 {
            let _ = writeln!(text, "    if pid < G_1:");
        } else {
            let _ = writeln!(text, "    elif pid < G_{}:", j + 1);
        }
        let _ = writeln!(text, "        {call}");
    }
    text.truncate(text.trim_end().len());
    text
}

/// The module's docstring (what it computes, from what, its kernels) and
/// imports.
fn docstring(out: &mut String, p: &Plan<'_>, source: &str, pipeline: &str) {
    let f = p.func;
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
}

/// `DEFAULT_CONFIG`'s and `CONFIG_SPACE`'s entries (Python lines): the
/// axes' blocks, warps and stages, each kernel's own warps, stages and
/// blocks where the program has several, the statistics loops' blocks;
/// an error where the plan's schedule gives a kernel a block it has no
/// loop for.
fn configuration(
    p: &Plan<'_>,
    ks: &[EmittedKernel],
    launches: usize,
) -> Result<(Vec<String>, Vec<String>), String> {
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
    if let Some(r) = p.maxnreg {
        defaults.push(format!("    \"maxnreg\": {r},"));
    }
    let list = |xs: &[u32]| xs.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    space.push(format!("    \"num_warps\": [{}],", list(&crate::WARPS)));
    space.push(format!("    \"num_stages\": [{}],", list(&crate::STAGES)));
    if launches > 1 {
        let on = p.pdl.unwrap_or(launches == 2);
        defaults.push(format!("    \"pdl\": {},", u8::from(on)));
        space.push("    \"pdl\": [0, 1],".into());
    }
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
            if let Some(r) = p.kernel_maxnreg.get(i).copied().flatten() {
                defaults.push(format!("    \"maxnreg_k{i}\": {r},"));
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
        // Each kernel's own block of an axis it only loops over, or of the
        // loop over its tile of a collected axis.
        for (i, ek) in ks.iter().enumerate() {
            for a in ek.loop_only.iter().chain(&ek.sub_loop) {
                let id = py_ident(a);
                if let Some(b) = p.kernel_blocks[i].get(a) {
                    defaults.push(format!("    \"BLOCK_{id}__k{i}\": {b},"));
                }
                let d: Vec<String> = p.axes[a].domain.iter().map(|x| x.to_string()).collect();
                space.push(format!("    \"BLOCK_{id}__k{i}\": [{}],", d.join(", ")));
            }
        }
    }
    // Each kernel's block of its statistics loops over an axis that its
    // matmul also loops over.
    for (i, ek) in ks.iter().enumerate() {
        for a in &ek.stat_axes {
            let id = py_ident(a);
            if let Some(b) = p.stat_blocks[i].get(a) {
                defaults.push(format!("    \"BLOCK_{id}__r{i}\": {b},"));
            }
            let d: Vec<String> = p.axes[a].domain.iter().map(|x| x.to_string()).collect();
            space.push(format!("    \"BLOCK_{id}__r{i}\": [{}],", d.join(", ")));
        }
    }
    for (i, blocks) in p.stat_blocks.iter().enumerate() {
        if let Some(a) = blocks.keys().find(|a| !ks[i].stat_axes.contains(a)) {
            return Err(format!(
                "schedule entry `BLOCK_{}__r{i}`: kernel {i} has no loop over @{a} without a matmul beside one with a matmul, so it has no statistics block of it",
                py_ident(a)
            ));
        }
    }
    for (i, blocks) in p.kernel_blocks.iter().enumerate() {
        if let Some(a) = blocks
            .keys()
            .find(|a| !ks[i].loop_only.contains(a) && ks[i].sub_loop.as_ref() != Some(*a))
        {
            return Err(format!(
                "schedule entry `BLOCK_{}__k{i}`: kernel {i} does not only loop over @{a}, so it cannot take a block of its own",
                py_ident(a)
            ));
        }
    }
    Ok((defaults, space))
}

/// `INPUTS`: each parameter's name, shape (a symbolic extent as its name)
/// and dtype.
fn inputs_list(out: &mut String, f: &efir_ir::Func) -> Result<(), String> {
    let _ = writeln!(out, "INPUTS = [");
    for v in &f.params {
        let t = f.ty(*v).as_tensor().ok_or("a tuple parameter")?;
        // (A symbolic extent is its name, a string: any size, the same
        // wherever the name is.)
        let dims: Vec<String> = t
            .shape
            .iter()
            .map(|d| match Extent::of(d) {
                Extent::Sym(a) => format!("\"{}\"", crate::doc_escape(&a)),
                e => e.host(),
            })
            .collect();
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
    Ok(())
}

/// `run()`: checks the inputs (and reads the sizes of symbolic extents),
/// computes the blocks and tile counts of the configuration, allocates
/// each kernel's buffers and launches it, and returns the results.
fn run_function(out: &mut String, p: &Plan<'_>, ks: &[EmittedKernel], groups: &[Vec<usize>]) {
    let f = p.func;
    let syms = crate::symbols(f);
    let params: Vec<String> = f
        .params
        .iter()
        .map(|v| py_ident(&f.value(*v).name))
        .collect();
    if !syms.is_empty() {
        out.push_str(SIZES_HELPER);
        let _ = writeln!(out);
    }
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
    if syms.is_empty() {
        let _ = writeln!(
            out,
            "    for (name, shape, dtype), t in zip(INPUTS, inputs):"
        );
        let _ = writeln!(
            out,
            "        if tuple(t.shape) != shape or t.dtype != dtype:"
        );
        let _ = writeln!(out, "            raise ValueError(f\"input %{{name}}: expected {{shape}} {{dtype}}, got {{tuple(t.shape)}} {{t.dtype}}\")");
    } else {
        // Symbolic extents: each is the first input dim that has it, and
        // every input dim that has it must agree.
        let _ = writeln!(out, "    sizes = _sizes(inputs)");
        for a in &syms {
            let id = py_ident(a);
            let _ = writeln!(out, "    n_{id} = sizes[\"{}\"]", crate::doc_escape(a));
            let _ = writeln!(out, "    np_{id} = triton.next_power_of_2(n_{id})");
        }
    }
    // A program without inputs (only constants) allocates on the GPU where
    // there is one (issue 30: `inputs[0]` raised IndexError).
    if f.params.is_empty() {
        let _ = writeln!(
            out,
            "    dev = torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")"
        );
    } else {
        let _ = writeln!(out, "    dev = inputs[0].device");
    }
    for (i, v) in f.params.iter().enumerate() {
        let _ = writeln!(out, "    {} = inputs[{i}].contiguous()", buf_host(f, *v, 0));
    }
    let pdl = groups.len() > 1;
    if pdl {
        let _ = writeln!(out, "    pdl = _pdl_on(cfg, dev)");
    }
    for a in p.axes.keys() {
        let id = py_ident(a);
        let ext = p.axes[a].extent.host();
        let _ = writeln!(out, "    block_{id} = cfg[\"BLOCK_{id}\"]");
        let _ = writeln!(out, "    nt_{id} = triton.cdiv({ext}, block_{id})");
        let _ = writeln!(out, "    ntp_{id} = triton.next_power_of_2(nt_{id})");
        let _ = writeln!(out, "    even_{id} = {ext} % block_{id} == 0");
    }
    for (gi, g) in groups.iter().enumerate() {
        let mut calls: Vec<Launch> = g
            .iter()
            .map(|&i| launch(out, p, &p.kernels[i], &ks[i]))
            .collect();
        // Every launch but the program's first is a dependent launch.
        for (j, c) in calls.iter_mut().enumerate() {
            c.pdl = match (pdl, gi == 0 && j == 0) {
                (false, _) => Pdl::Off,
                (true, true) => Pdl::First,
                (true, false) => Pdl::Next,
            };
        }
        if calls.len() == 1 {
            let c = &calls[0];
            let _ = writeln!(out, "    {}", c.call(&c.grid, &c.args, &c.name));
            continue;
        }
        // A launch group: one launch where the members share warps and
        // stages (the default), else one launch each.
        let same: Vec<String> = calls[1..]
            .iter()
            .map(|c| {
                format!(
                    "{} == {} and {} == {} and {} == {}",
                    c.warps, calls[0].warps, c.stages, calls[0].stages, c.regs, calls[0].regs
                )
            })
            .collect();
        let mut args = Vec::new();
        let mut before = Vec::new();
        for (j, c) in calls.iter().enumerate() {
            let _ = writeln!(out, "    pg{}_{j} = {}", g[0], c.grid);
            if j > 0 {
                args.push(format!("G_{j}={}", before.join(" + ")));
            }
            before.push(format!("pg{}_{j}", g[0]));
            // Every argument by name: the buffers (positional in the
            // member's own launch) and its `NAME=value` constants.
            let ek = &ks[g[j]];
            for (v, i) in &ek.buffers {
                args.push(format!(
                    "{}={}",
                    member_param(j, &buf_param(p.func, *v, *i)),
                    buf_host(p.func, *v, *i)
                ));
            }
            for x in &c.args[ek.buffers.len()..] {
                args.push(member_param(j, x));
            }
        }
        // Members whose shared memory together exceeds the GPU's fail to
        // launch as a group (Triton allocates each inlined member its own):
        // they are launched one by one, for that schedule from then on.
        let name = group_name(g);
        let flag = format!("grouped{}", g[0]);
        let _ = writeln!(out, "    {flag} = False");
        let _ = writeln!(
            out,
            "    if {} and (\"{name}\", tuple(sorted(cfg.items()))) not in _UNGROUPED:",
            same.join(" and ")
        );
        let _ = writeln!(out, "        try:");
        let _ = writeln!(
            out,
            "            {}",
            calls[0].call(&before.join(" + "), &args, &name)
        );
        let _ = writeln!(out, "            {flag} = True");
        let _ = writeln!(out, "        except triton.runtime.errors.OutOfResources:");
        let _ = writeln!(
            out,
            "            _UNGROUPED.add((\"{name}\", tuple(sorted(cfg.items()))))"
        );
        let _ = writeln!(out, "    if not {flag}:");
        for (j, c) in calls.iter().enumerate() {
            let _ = writeln!(
                out,
                "        {}",
                c.call(&format!("pg{}_{j}", g[0]), &c.args, &c.name)
            );
        }
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
    } else if rets.is_empty() {
        // `return (,)` was a SyntaxError (issue 30).
        let _ = writeln!(out, "    return ()");
    } else {
        let _ = writeln!(out, "    return ({},)", rets.join(", "));
    }
}

/// A kernel's launch in `run()`: its name, grid, arguments (the buffers,
/// then `NAME=value` constants) and its warps and stages.
struct Launch {
    name: String,
    grid: String,
    args: Vec<String>,
    warps: String,
    stages: String,
    /// The `maxnreg` cap (a Python expression, None for none).
    regs: String,
    /// Its part in programmatic dependent launch.
    pdl: Pdl,
}

/// A launch's part in programmatic dependent launch ([`with_pdl`]).
#[derive(Clone, Copy)]
enum Pdl {
    /// A program of one launch.
    Off,
    /// The program's first launch: launched as usual (it waits for
    /// whatever ran before the program); it lets the next one start early.
    First,
    /// A later launch: a dependent launch where the configuration has
    /// `pdl` on.
    Next,
}

impl Launch {
    /// `kernel[(grid,)](args, num_warps=..., num_stages=...)` with this
    /// launch's warps and stages.
    fn call(&self, grid: &str, args: &[String], kernel: &str) -> String {
        let mut all = args.to_vec();
        all.push(format!("num_warps={}", self.warps));
        all.push(format!("num_stages={}", self.stages));
        all.push(format!("**_regs({})", self.regs));
        match self.pdl {
            Pdl::Off => {}
            Pdl::First => all.push("PDL=pdl".into()),
            Pdl::Next => {
                all.push("PDL=pdl".into());
                all.push("**_launch_pdl(pdl)".into());
            }
        }
        format!("{kernel}[({grid},)]({})", all.join(", "))
    }
}

/// In `run()`: kernel `k`'s result buffers and its own blocks; returns its
/// launch for the caller to write.
fn launch(out: &mut String, p: &Plan<'_>, k: &Kernel, ek: &EmittedKernel) -> Launch {
    let f = p.func;
    for (i, l) in f.ty(k.root).leaves().iter().enumerate() {
        let dims: Vec<String> = l.shape.iter().map(|d| Extent::of(d).host()).collect();
        let _ = writeln!(
            out,
            "    {} = torch.empty(({}{}), dtype={}, device=dev)",
            buf_host(f, k.root, i),
            dims.join(", "),
            if dims.len() == 1 { "," } else { "" },
            torch_dtype(storage_dtype(p, k.root, l.dtype))
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
    let mut consts = ek.consts.clone();
    if p.kernels.len() > 1 {
        // The kernel's own block of an axis it only loops over.
        let i = k.index;
        for a in &ek.loop_only {
            let id = py_ident(a);
            let ext = p.axes[a].extent.host();
            let kb = format!("kb{i}_{id}");
            let _ = writeln!(out, "    {kb} = cfg.get(\"BLOCK_{id}__k{i}\", block_{id})");
            for c in consts.iter_mut() {
                let Some((name, _)) = c.split_once('=') else {
                    continue;
                };
                let value = if name == format!("BLOCK_{id}") {
                    kb.clone()
                } else if name == format!("NT_{id}") {
                    format!("triton.cdiv({ext}, {kb})")
                } else if name == format!("NTP_{id}") {
                    format!("triton.next_power_of_2(triton.cdiv({ext}, {kb}))")
                } else if name == format!("EVEN_{id}") {
                    format!("{ext} % {kb} == 0")
                } else {
                    continue;
                };
                *c = format!("{name}={value}");
            }
        }
    }
    if let Some(a) = &ek.sub_loop {
        // The sub-blocks of a collected axis's tile: the kernel's own
        // block of it, at most the tile.
        let id = py_ident(a);
        let i = k.index;
        for c in consts.iter_mut() {
            if c.split_once('=').map(|x| x.0) == Some(format!("SUB_{id}").as_str()) {
                *c = format!("SUB_{id}=min(cfg.get(\"BLOCK_{id}__k{i}\", block_{id}), block_{id})");
            }
        }
    }
    for a in &ek.stat_axes {
        // The block of the kernel's statistics loops over `a`: its
        // own, else the kernel's block of `a`.
        let id = py_ident(a);
        let i = k.index;
        let ext = p.axes[a].extent.host();
        let base = if p.kernels.len() > 1 && ek.loop_only.contains(a) {
            format!("kb{i}_{id}")
        } else {
            format!("block_{id}")
        };
        let rb = format!("rb{i}_{id}");
        let _ = writeln!(out, "    {rb} = cfg.get(\"BLOCK_{id}__r{i}\", {base})");
        for c in consts.iter_mut() {
            let Some((name, _)) = c.split_once('=') else {
                continue;
            };
            if name == format!("RB_{id}") {
                *c = format!("{name}={rb}");
            } else if name == format!("RNT_{id}") {
                *c = format!("{name}=triton.cdiv({ext}, {rb})");
            }
        }
    }
    args.extend(consts);
    let (warps, stages, regs) = if p.kernels.len() > 1 {
        let i = k.index;
        (
            format!("cfg.get(\"num_warps_k{i}\", cfg[\"num_warps\"])"),
            format!("cfg.get(\"num_stages_k{i}\", cfg[\"num_stages\"])"),
            format!("cfg.get(\"maxnreg_k{i}\", cfg.get(\"maxnreg\"))"),
        )
    } else {
        (
            "cfg[\"num_warps\"]".into(),
            "cfg[\"num_stages\"]".into(),
            "cfg.get(\"maxnreg\")".into(),
        )
    };
    Launch {
        name: ek.name.clone(),
        grid,
        args,
        warps,
        stages,
        regs,
        pdl: Pdl::Off,
    }
}

/// The launch option capping a kernel's registers where the configuration
/// has one (`maxnreg`, `maxnreg_k<i>`; Triton's interpreter ignores it).
const REGS_HELPER: &str = r#"

def _regs(n):
    """Triton's `maxnreg` launch option where the configuration caps a kernel's registers."""
    return {} if n is None else {"maxnreg": n}
"#;

/// The host helpers of a program of several launches: whether this call
/// chains them by programmatic dependent launch (the configuration's `pdl`
/// on a GPU of compute capability 9.0 or later, never under Triton's
/// interpreter), and the launch option of
/// a dependent launch.
const PDL_HELPER: &str = r#"

_PDL_DEVICES = {}


def _pdl_on(cfg, dev):
    """Programmatic dependent launch: the configuration's `pdl` where the GPU has it (sm_90 and later)."""
    import os

    if not cfg.get("pdl") or dev.type != "cuda" or os.environ.get("TRITON_INTERPRET") == "1":
        return False
    if dev not in _PDL_DEVICES:
        _PDL_DEVICES[dev] = torch.cuda.get_device_capability(dev)[0] >= 9
    return _PDL_DEVICES[dev]


def _launch_pdl(on):
    """The launch option of a dependent launch (none when `pdl` is off)."""
    return {"launch_pdl": True} if on else {}
"#;

/// The host helper of a program with symbolic extents: checks the inputs
/// against `INPUTS` (a string dim is a symbolic extent) and returns the
/// size of each symbol, read from the first input dim that has it.
const SIZES_HELPER: &str = r#"
def _sizes(inputs):
    """The size of each symbolic extent (the first input dim that has it);
    every input dim of one symbol must agree, and sizes are at least 1."""
    sizes = {}
    for (name, shape, dtype), t in zip(INPUTS, inputs):
        got = tuple(t.shape)
        if len(got) != len(shape) or t.dtype != dtype or any(
            not isinstance(s, str) and s != n for s, n in zip(shape, got)
        ):
            raise ValueError(f"input %{name}: expected {shape} {dtype} (a string is a symbolic extent), got {got} {t.dtype}")
        for j, (s, n) in enumerate(zip(shape, got)):
            if not isinstance(s, str):
                continue
            if n < 1:
                raise ValueError(f"input %{name}: dim {j} (symbolic extent @{s}) is {n}; sizes of at least 1 are supported")
            if sizes.setdefault(s, n) != n:
                raise ValueError(f"input %{name}: dim {j} (symbolic extent @{s}) is {n}, but an earlier input has @{s} = {sizes[s]}")
    return sizes

"#;
