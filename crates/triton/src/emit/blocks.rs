//! Blocks of the kernel emitter: the dims of a block under the bound axes,
//! masks, pointers into buffers and loads.

use super::*;

impl KernelEmitter<'_, '_> {
    pub(super) fn dim(&mut self, ext: &Extent, axis: Option<&str>) -> Result<(BD, usize), String> {
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
                let own = self.sub_block.get(&offs).cloned();
                let mut even = self.even_of(a, ext);
                if own.as_deref().is_some_and(|b| b.starts_with("RB_")) {
                    // (`EVEN_<axis>` is of the axis's block, not of a
                    // statistics loop's.)
                    if let Even::Flag(_) = even {
                        even = Even::No;
                    }
                }
                Ok((
                    BD {
                        size: own.unwrap_or_else(|| self.block_of(a)),
                        offs,
                        ext: ext.kernel(),
                        even,
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
    pub(super) fn even_of(&self, a: &str, ext: &Extent) -> Even {
        let a = self.alias.get(a).map_or(a, String::as_str);
        let Some(info) = self.p.axes.get(a) else {
            return Even::No;
        };
        // (A symbolic extent is always masked: an `EVEN_` flag would be a
        // constexpr that recompiles the kernel with the size.)
        if info.extent != *ext || matches!(ext, Extent::Sym(_)) {
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
    pub(super) fn mask_parts(dims: &[BD]) -> (Vec<String>, Vec<String>, Vec<String>) {
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
    pub(super) fn masked(dims: &[BD], make: impl Fn(Option<&str>) -> String) -> Vec<String> {
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
    pub(super) fn pad_lines(
        var: &str,
        x: &str,
        bd: &BD,
        d: usize,
        r: usize,
        fill: &str,
    ) -> Vec<String> {
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

    pub(super) fn dims(
        &mut self,
        exts: &[Extent],
        lay: &Layout,
    ) -> Result<(Vec<BD>, usize), String> {
        let mut out = Vec::new();
        let mut depth = 0;
        for (e, a) in exts.iter().zip(lay) {
            let (d, dp) = self.dim(e, a.as_deref())?;
            depth = depth.max(dp);
            out.push(d);
        }
        Ok((out, depth))
    }

    pub(super) fn mask(dims: &[BD]) -> String {
        let r = dims.len();
        let m: Vec<String> = dims
            .iter()
            .enumerate()
            .map(|(i, d)| format!("({} < {})", along(&d.offs, i, r), d.ext))
            .collect();
        m.join(" & ")
    }

    pub(super) fn ptr(
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
    pub(super) fn ptr_at(
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
        // (A symbolic extent has no bound: 64-bit.)
        let elems = exts.iter().try_fold(1u128, |n, e| match e {
            Extent::N(x) => Some(n * *x as u128),
            Extent::Tiles(a) => match self.p.axes.get(a).map(|i| &i.extent) {
                Some(Extent::N(x)) => Some(n * *x as u128),
                _ => None,
            },
            Extent::Sym(_) => None,
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

    pub(super) fn load(&mut self, v: ValueId, lay: &Layout) -> Result<Val, String> {
        let f = self.p.func;
        let t = f.ty(v).clone();
        let leaves: Vec<_> = t.leaves().into_iter().cloned().collect();
        let mut fields = Vec::new();
        for (i, l) in leaves.iter().enumerate() {
            let exts: Vec<Extent> = l.shape.iter().map(Extent::of).collect();
            let (dims, depth) = self.dims(&exts, lay)?;
            let dt = storage_dtype(self.p, v, l.dtype);
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
                bytes: dtype_bytes(dt),
                source: buffer_bytes(&l.shape, dt),
                sizes: dims.iter().map(|d| d.size.clone()).collect(),
                loops: self.loops[..depth].to_vec(),
                nest: self.nest[..depth].to_vec(),
                flops: false,
                run: contiguous_run(&dims, &exts),
                computed: false,
            });
            self.note_load(&var, &name, &exts, &dims, dt, depth);
            fields.push(Val::T(Blk {
                var,
                dims,
                dtype: dt,
                depth,
            }));
        }
        Ok(if matches!(t, Type::Tuple(_)) {
            Val::Tup(fields)
        } else {
            fields.pop().ok_or("empty value")?
        })
    }
}
