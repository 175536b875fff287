//! A function's `schedule` attribute applied to its plan.

use crate::{py_ident, Plan, MAXNREG, STAGES, WARPS};
use efir_ir::Attr;

/// Apply a function's `schedule` attribute (the string a tuner records,
/// `"BLOCK_k4096=64,num_warps=8,num_stages=3"`) to the plan's default
/// configuration: every key must name a configuration parameter of the
/// program and every value must be legal for it.
pub(crate) fn apply_schedule(p: &mut Plan<'_>) -> Result<(), String> {
    let Some(a) = p.func.attrs.get("schedule") else {
        return Ok(());
    };
    let Attr::Str(text) = a else {
        return Err(
            "the `schedule` attribute must be a string such as \"BLOCK_m=64,num_warps=4\"".into(),
        );
    };
    for part in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| format!("schedule entry `{part}` is not KEY=VALUE"))?;
        let (k, v) = (k.trim(), v.trim());
        let n: u64 = v
            .parse()
            .map_err(|_| format!("schedule entry `{part}`: `{v}` is not a positive integer"))?;
        // The value of a launch option (`num_warps`, `num_stages`,
        // `maxnreg`, or one kernel's) from its legal ones.
        let legal = |legal: &[u32]| {
            u32::try_from(n)
                .ok()
                .filter(|n| legal.contains(n))
                .ok_or_else(|| format!("schedule entry `{part}`: {k} must be one of {legal:?}"))
        };
        // `num_warps_k<i>` / `num_stages_k<i>` / `maxnreg_k<i>`: one
        // kernel's, where there are several.
        let per_kernel = [("num_warps_k", 0), ("num_stages_k", 1), ("maxnreg_k", 2)]
            .iter()
            .find_map(|(pre, what)| Some((*what, k.strip_prefix(pre)?)))
            .and_then(|(w, i)| Some((w, i.parse::<usize>().ok()?)))
            .filter(|(_, i)| *i < p.kernels.len() && p.kernels.len() > 1);
        if let Some((what, i)) = per_kernel {
            let n = legal([&WARPS[..], &STAGES[..], &MAXNREG[..]][what])?;
            match what {
                0 => p.kernel_warps[i] = Some(n),
                1 => p.kernel_stages[i] = Some(n),
                _ => p.kernel_maxnreg[i] = Some(n),
            }
            continue;
        }
        // `BLOCK_<axis>__k<i>`: one kernel's block of an axis it only loops
        // over; `BLOCK_<axis>__r<i>`: of its statistics loops over it
        // (both checked against the kernel when the module is emitted).
        let own = |sep: &str| {
            k.strip_prefix("BLOCK_")
                .and_then(|r| r.rsplit_once(sep))
                .and_then(|(a, i)| Some((a, i.parse::<usize>().ok()?)))
                .filter(|(_, i)| *i < p.kernels.len())
        };
        let (kernel_own, stat_own) = (own("__k"), own("__r"));
        if let Some(((axis, i), stat)) = kernel_own
            .map(|x| (x, false))
            .or(stat_own.map(|x| (x, true)))
        {
            let (key, info) = p
                .axes
                .iter()
                .find(|(_, i)| py_ident(&i.name) == axis)
                .ok_or_else(|| {
                    format!("schedule entry `{part}`: the program has no axis for `BLOCK_{axis}`")
                })?;
            if !info.domain.contains(&n) {
                return Err(format!(
                    "schedule entry `{part}`: {k} must be one of {:?}",
                    info.domain
                ));
            }
            let key = key.clone();
            if stat {
                p.stat_blocks[i].insert(key, n);
            } else {
                p.kernel_blocks[i].insert(key, n);
            }
            continue;
        }
        match k {
            "maxnreg" => p.maxnreg = Some(legal(&MAXNREG)?),
            // a program of several kernels (checked against its launches
            // when it is emitted)
            "pdl" if p.kernels.len() > 1 => p.pdl = Some(legal(&[0, 1])? == 1),
            "pdl" => {
                return Err(format!(
                    "schedule entry `{part}`: the program takes one launch (`pdl` chooses how a program of several launches chains them)"
                ))
            }
            "num_warps" => p.warps = legal(&WARPS)?,
            "num_stages" => p.stages = legal(&STAGES)?,
            _ => {
                let id = k.strip_prefix("BLOCK_").ok_or_else(|| {
                    format!("schedule entry `{part}`: unknown parameter `{k}` (BLOCK_<axis>, num_warps, num_stages, maxnreg, pdl, num_warps_k<i>, num_stages_k<i>, maxnreg_k<i> of a program with several kernels)")
                })?;
                let info = p
                    .axes
                    .values_mut()
                    .find(|i| py_ident(&i.name) == id)
                    .ok_or_else(|| {
                        format!("schedule entry `{part}`: the program has no axis for `{k}`")
                    })?;
                if !info.domain.contains(&n) {
                    return Err(format!(
                        "schedule entry `{part}`: {k} must be one of {:?}",
                        info.domain
                    ));
                }
                info.default = n;
            }
        }
    }
    Ok(())
}
