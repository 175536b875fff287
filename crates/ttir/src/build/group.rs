//! Launch groups (horizontal fusion), as the Python build's: consecutive
//! kernels none of which reads what another writes
//! ([`efir_triton::launch_groups`]) and which share `num_warps` and
//! `num_stages` are also built as one module: each member a private
//! `tt.func` whose program ids start after the earlier members'
//! ([`Em::pid_off`]), and a public `tt.func` that runs, per program, the
//! member its id falls in (`scf.if` on the program id, `tt.call`; Triton
//! inlines the calls). The host launches the group once instead of its
//! members.

use super::*;

/// A launch group's module.
#[derive(Clone, Debug)]
pub struct TtirGroup {
    /// The group function's name (`_h<i>_<j>...`: no kernel's name).
    pub name: String,
    /// The module's text (parsed back and verified by melior).
    pub text: String,
    /// The kernels it launches, as indices into [`TtirProgram::kernels`].
    pub members: Vec<usize>,
    /// Its pointer arguments: indices into [`TtirProgram::buffers`].
    pub args: Vec<usize>,
    /// Its programs: the members' together.
    pub grid: u64,
    /// The members' `num_warps`.
    pub num_warps: u32,
    /// The members' `num_stages`.
    pub num_stages: u32,
}

/// The functions of a one-function module's text (the lines between its
/// `module ... {` and its closing brace).
fn funcs_of(text: &str) -> Result<&str, String> {
    let start = text.find('\n').ok_or("an empty kernel module")? + 1;
    let end = text
        .rfind('}')
        .ok_or("a kernel module without a closing brace")?;
    Ok(text[start..end].trim_end())
}

/// The groups of several kernels of `p` that share warps and stages
/// (`kernels` as built alone): each member is built again as a private
/// function with its program-id offset, and the group function added.
pub(super) fn groups(
    ctx: &Context,
    diags: &Arc<Mutex<Vec<String>>>,
    p: &Plan<'_>,
    kernels: &[TtirKernel],
    buffers: &mut Vec<Buffer>,
    index: &mut HashMap<(ValueId, usize), usize>,
    pdl: bool,
) -> Result<Vec<TtirGroup>, String> {
    let mut out = Vec::new();
    for g in launch_groups(p) {
        if g.len() < 2 {
            continue;
        }
        let first = &kernels[g[0]];
        if g.iter().any(|&i| {
            kernels[i].num_warps != first.num_warps || kernels[i].num_stages != first.num_stages
        }) {
            continue;
        }
        let ids: Vec<String> = g.iter().map(|i| i.to_string()).collect();
        let name = format!("_h{}", ids.join("_"));
        let mut text = String::new();
        let mut args: Vec<usize> = Vec::new();
        let mut off = 0u64;
        let mut starts = Vec::new();
        for &i in &g {
            let k = &p.kernels[i];
            let m = kernel::kernel(ctx, diags, p, k, buffers, index, kernel::Role::Member(off))
                .map_err(|e| format!("launch group {name}, kernel {i}: {e}"))?;
            text.push_str(funcs_of(&m.text)?);
            text.push('\n');
            for a in &m.args {
                if !args.contains(a) {
                    args.push(*a);
                }
            }
            starts.push(off);
            off += m.grid;
        }
        if off > i32::MAX as u64 {
            continue;
        }
        let ty = |b: usize| format!("!tt.ptr<{}>", buffers[b].dtype);
        let sig: Vec<String> = args
            .iter()
            .enumerate()
            .map(|(j, b)| format!("%arg{j}: {}", ty(*b)))
            .collect();
        // Per member: a call with its arguments, under `pid < start of the
        // next member` (the last one in the innermost else).
        let call = |j: usize| {
            let m = &kernels[g[j]];
            let ops: Vec<String> = m
                .args
                .iter()
                .map(|a| format!("%arg{}", args.iter().position(|x| x == a).unwrap_or(0)))
                .collect();
            let tys: Vec<String> = m.args.iter().map(|a| ty(*a)).collect();
            format!(
                "\"tt.call\"({}) {{callee = @{}}} : ({}) -> ()",
                ops.join(", "),
                m.name,
                tys.join(", ")
            )
        };
        let mut body = call(g.len() - 1);
        for j in (0..g.len() - 1).rev() {
            body = format!(
                "%c{j} = arith.constant {} : i32\n%b{j} = arith.cmpi slt, %pid, %c{j} : i32\nscf.if %b{j} {{\n{}\n}} else {{\n{body}\n}}",
                starts[j + 1],
                call(j)
            );
        }
        let attrs: Vec<&str> = args
            .iter()
            .map(|_| "{tt.divisibility = 16 : i32}")
            .collect();
        let tys: Vec<String> = args.iter().map(|b| ty(*b)).collect();
        // Under programmatic dependent launch the group function waits and
        // triggers (its members, private, do not).
        let gdc: String = if pdl {
            kernel::PDL_ASM
                .iter()
                .enumerate()
                .map(|(j, asm)| {
                    format!("%gdc{j} = \"tt.elementwise_inline_asm\"() {{asm_string = \"{asm}\", constraints = \"=r\", packed_element = 1 : i32, pure = false}} : () -> i32\n")
                })
                .collect()
        } else {
            String::new()
        };
        let _ = std::fmt::Write::write_fmt(
            &mut text,
            format_args!(
                "\"tt.func\"() ({{\n^bb0({}):\n{gdc}%pid = \"tt.get_program_id\"() {{axis = 0 : i32}} : () -> i32\n{body}\n\"tt.return\"() : () -> ()\n}}) {{arg_attrs = [{}], function_type = ({}) -> (), sym_name = \"{name}\", sym_visibility = \"public\"}} : () -> ()\n",
                sig.join(", "),
                attrs.join(", "),
                tys.join(", ")
            ),
        );
        let full = format!(
            "module attributes {{efir.grid = {off} : i32, efir.num_stages = {} : i32, efir.num_warps = {} : i32}} {{\n{text}}}\n",
            first.num_stages, first.num_warps
        );
        let module = MModule::parse(ctx, &full).ok_or_else(|| {
            format!(
                "launch group {name}: melior cannot parse its module: {}",
                drain(diags)
            )
        })?;
        if !module.as_operation().verify() {
            return Err(format!(
                "launch group {name}: the module does not verify: {}",
                drain(diags)
            ));
        }
        out.push(TtirGroup {
            name,
            text: module.as_operation().to_string(),
            members: g,
            args,
            grid: off,
            num_warps: first.num_warps,
            num_stages: first.num_stages,
        });
    }
    Ok(out)
}
