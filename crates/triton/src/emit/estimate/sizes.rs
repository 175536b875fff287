//! The sizes the estimate reads off a kernel's work: the blocks, tile
//! counts and representative extents that name a work item's dims
//! (`BLOCK_<axis>`, `NTP_<axis>`, `N_<sym>`, `SUB_<axis>`, `RB_<axis>`) at
//! the plan's schedule.

use super::*;

/// The sizes of one plan (its axes and symbolic extents).
pub(super) struct Sizes<'p, 'a> {
    p: &'p Plan<'a>,
    syms: Vec<String>,
}

/// The sizes of one kernel: its own blocks of the axes it only loops over
/// (`kernel_blocks`, with the collected sub-loop's block peeled off as
/// `sub`) and its statistics blocks (`stat_blocks`).
pub(super) struct KernelSizes<'s, 'p, 'a> {
    sizes: &'s Sizes<'p, 'a>,
    /// The kernel's blocks that differ from the plan's.
    pub ov: IndexMap<String, u64>,
    /// The block of the kernel's sub-loop over a collected axis.
    pub sub: Option<f64>,
    stat: IndexMap<String, u64>,
}

impl<'p, 'a> Sizes<'p, 'a> {
    pub fn new(p: &'p Plan<'a>) -> Self {
        Sizes {
            p,
            syms: crate::symbols(p.func),
        }
    }

    /// The sizes of kernel `ki`.
    pub fn kernel<'s>(&'s self, ki: usize, k: &EmittedKernel) -> KernelSizes<'s, 'p, 'a> {
        let none = IndexMap::new();
        let (ov, sub) = own_blocks(self.p, k, self.p.kernel_blocks.get(ki).unwrap_or(&none));
        KernelSizes {
            sizes: self,
            ov,
            sub,
            stat: self.p.stat_blocks.get(ki).cloned().unwrap_or_default(),
        }
    }

    /// The representative size of a symbolic extent, by its Python name.
    fn sym_size(&self, id: &str) -> u64 {
        self.syms
            .iter()
            .find(|a| py_ident(a) == id)
            .map_or(1, |a| crate::dim_size(a))
    }

    /// The block of an axis (by its Python name) under blocks `ov`, else
    /// the plan's.
    fn raw_block(&self, ov: &IndexMap<String, u64>, a: &str) -> f64 {
        self.p
            .axes
            .iter()
            .find(|(n, _)| py_ident(n) == a)
            .map(|(n, i)| ov.get(n).copied().unwrap_or(i.default) as f64)
            .unwrap_or(1.0)
    }

    /// [`Self::raw_block`] clipped to the axis's extent: rows of a block
    /// past its dim's extent are masked (not loaded, stored or multiplied).
    fn block_in(&self, ov: &IndexMap<String, u64>, a: &str) -> f64 {
        self.p
            .axes
            .iter()
            .find(|(n, _)| py_ident(n) == a)
            .map(|(n, i)| {
                let b = ov.get(n).copied().unwrap_or(i.default);
                match i.extent.size() {
                    Some(e) => b.min(e.max(1)) as f64,
                    None => b as f64,
                }
            })
            .unwrap_or(1.0)
    }

    /// The block of a kernel's statistics loops over an axis (`RB_<id>`):
    /// its own, else the kernel's block of the axis.
    fn stat_block(
        &self,
        ov: &IndexMap<String, u64>,
        stat: &IndexMap<String, u64>,
        id: &str,
    ) -> f64 {
        match self.p.axes.iter().find(|(n, _)| py_ident(n) == id) {
            Some((n, i)) => {
                let b = stat.get(n).or(ov.get(n)).copied().unwrap_or(i.default);
                match i.extent.size() {
                    Some(e) => b.min(e.max(1)) as f64,
                    None => b as f64,
                }
            }
            None => 1.0,
        }
    }

    /// The tiles of an axis (by its name) at blocks `ov`.
    fn tiles_in(&self, ov: &IndexMap<String, u64>, a: &str) -> f64 {
        let p = self.p;
        let Some(i) = p.axes.get(a) else { return 1.0 };
        let own = ov.get(a).copied().unwrap_or(i.default);
        let ext = match &i.extent {
            Extent::N(_) | Extent::Sym(_) => i.extent.size().unwrap_or(1) as f64,
            Extent::Tiles(b) => {
                let bi = &p.axes[b];
                let e = match bi.extent.size() {
                    Some(n) => n as f64,
                    None => 1.0,
                };
                (e / bi.default as f64).ceil()
            }
        };
        (ext / own as f64).ceil()
    }

    /// A size a work item names (a number, `BLOCK_`, `NTP_`, `NP_` or `N_`)
    /// at blocks `ov`.
    fn size_in(&self, ov: &IndexMap<String, u64>, s: &str) -> f64 {
        if let Ok(n) = s.parse::<f64>() {
            n
        } else if let Some(a) = s.strip_prefix("BLOCK_") {
            self.block_in(ov, a)
        } else if let Some(a) = s.strip_prefix("NTP_") {
            let t = self
                .p
                .axes
                .keys()
                .find(|n| py_ident(n) == a)
                .map(|n| self.tiles_in(ov, n))
                .unwrap_or(1.0);
            (t as u64).next_power_of_two() as f64
        } else if let Some(a) = s.strip_prefix("NP_") {
            // A whole symbolic dim: its representative size's power of two.
            self.sym_size(a).next_power_of_two() as f64
        } else if let Some(a) = s.strip_prefix("N_") {
            self.sym_size(a) as f64
        } else {
            1.0
        }
    }
}

impl KernelSizes<'_, '_, '_> {
    /// A size a work item of this kernel names.
    pub fn size(&self, s: &str) -> f64 {
        match (s.strip_prefix("SUB_"), s.strip_prefix("RB_")) {
            (Some(_), _) => self.sub.unwrap_or(1.0),
            (_, Some(a)) => self.sizes.stat_block(&self.ov, &self.stat, a),
            _ => self.sizes.size_in(&self.ov, s),
        }
    }

    /// The kernel's block of an axis by its Python name, unclipped.
    pub fn raw_block(&self, a: &str) -> f64 {
        self.sizes.raw_block(&self.ov, a)
    }

    /// A size a work item names as Triton allocates it: a block unclipped
    /// (its rows past the dim's extent are masked, not absent), else
    /// [`Self::size`].
    pub fn padded(&self, s: &str) -> f64 {
        match s.strip_prefix("BLOCK_") {
            Some(a) => self.raw_block(a),
            None => self.size(s),
        }
    }

    /// The kernel's tiles of an axis by its name.
    pub fn tiles(&self, a: &str) -> f64 {
        self.sizes.tiles_in(&self.ov, a)
    }
}
