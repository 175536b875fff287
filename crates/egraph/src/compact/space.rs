//! Modes and the candidate space: which e-nodes are options
//! (`replicas`, `partitions`).

use super::fixpoint::{readers_of, sweep_to_fixpoint};
use crate::analysis::EGraph;
use efir_ir::AxisState;
use egg::{Id, SymbolLang};

/// How candidates are deduplicated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Prune equivalent partial programs before expanding them.
    Early,
    /// Build every complete candidate, keep one per class.
    After,
    /// Keep every complete candidate.
    None,
}

impl Mode {
    pub(super) fn name(self) -> &'static str {
        match self {
            Mode::Early => "early",
            Mode::After => "after",
            Mode::None => "none",
        }
    }
}

/// Which e-nodes the candidate space allows where a value lives under a
/// replicated axis (pass option `replicas`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replicas {
    /// Such a value is only ever the replicate (a view) of the value
    /// without that axis, where that value still has a parallel state: in
    /// an e-class whose state replicates an axis and has another one, whose
    /// value needs a matmul (an e-node is a matmul or reads such an
    /// e-class) or that has a `par.replicate` e-node, only the
    /// `par.replicate` e-nodes are options. The other e-nodes compute the
    /// same value in each tile of the replicated axis, which a replicate of
    /// it computed under the other axes also does, and the canonical form
    /// does not see where a replicate sits, so they write the same classes
    /// again (see `docs/passes.md`).
    View,
    /// Every e-node is an option.
    Compute,
}

impl Replicas {
    pub(super) fn name(self) -> &'static str {
        match self {
            Replicas::View => "view",
            Replicas::Compute => "compute",
        }
    }
}

/// Which e-nodes the candidate space allows where a value lives under two
/// or more axes that are not replicated (pass option `partitions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Partitions {
    /// Such a value, where its e-class has a `par.partition` e-node (and
    /// [`Replicas::View`] does not already restrict it), is only ever the
    /// partition (a view) of the value whole along that axis: only the
    /// `par.partition` e-nodes are options. That value keeps another axis
    /// that is not replicated, so it still has a parallel state (a kernel
    /// does not have to store it), and the canonical form and the Triton
    /// emitter do not see where a partition sits (a value is emitted in the
    /// tiling its reader needs), so computing it in the tile writes the
    /// same classes again (see `docs/passes.md`).
    View,
    /// Every e-node is an option.
    Compute,
}

impl Partitions {
    pub(super) fn name(self) -> &'static str {
        match self {
            Partitions::View => "view",
            Partitions::Compute => "compute",
        }
    }
}

/// The candidate space: which e-nodes of the e-graph are options (pass
/// options `replicas` and `partitions`). Both restrictions only drop
/// e-nodes that write classes other options write too, on the e-graphs
/// that saturation builds (checked by comparing class sets with the whole
/// space; see `docs/passes.md`); they are not an equivalence that holds on
/// any e-graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Space {
    /// Under replicated axes.
    pub replicas: Replicas,
    /// Under two or more axes that are not replicated.
    pub partitions: Partitions,
}

impl Space {
    /// Every e-node is an option.
    pub const WHOLE: Space = Space {
        replicas: Replicas::Compute,
        partitions: Partitions::Compute,
    };
    /// The pass's default: values are views of values with fewer axes where
    /// the e-graph has them.
    pub const VIEWS: Space = Space {
        replicas: Replicas::View,
        partitions: Partitions::View,
    };
}

impl Default for Space {
    fn default() -> Space {
        Space::VIEWS
    }
}

/// Which options of each class the space keeps (`None`: all of them).
/// - [`Replicas::View`]: in a class whose state replicates an axis and has
///   another one, and whose value needs a matmul or that has a
///   `par.replicate` option, only `par.replicate`.
/// - [`Partitions::View`]: in another class whose state has two axes that
///   are not replicated and that has a `par.partition` option, only
///   `par.partition`.
///
/// Then no option that reads a class that no acyclic program can build
/// with the options left.
pub(super) fn view_mask(
    eg: &EGraph,
    ids: &[Id],
    options: &[Vec<SymbolLang>],
    kids: &[Vec<Vec<u32>>],
    space: Space,
) -> Option<Vec<Vec<bool>>> {
    if space == Space::WHOLE {
        return None;
    }
    let n = ids.len();
    let parents = readers_of(kids);
    let mut matmul = vec![false; n];
    sweep_to_fixpoint(n, &parents, |c| {
        if matmul[c] {
            return false;
        }
        let needs = options[c].iter().zip(&kids[c]).any(|(o, ks)| {
            matches!(o.op.as_str(), "tile.matmul" | "tensor.matmul")
                || ks.iter().any(|k| matmul[*k as usize])
        });
        matmul[c] = needs;
        needs
    });
    // How many axes of a leaf of the class's type are replicated, and how
    // many are not (partitioned or partial).
    let axes = |c: usize| -> Vec<(usize, usize)> {
        eg[ids[c]].data.ty().map_or_else(Vec::new, |t| {
            t.leaves()
                .iter()
                .map(|l| {
                    let r = l
                        .state
                        .values()
                        .filter(|s| matches!(s, AxisState::Repl))
                        .count();
                    (r, l.state.len() - r)
                })
                .collect()
        })
    };
    let has = |c: usize, op: &str| options[c].iter().any(|o| o.op.as_str() == op);
    let mut keep: Vec<Vec<bool>> = (0..n)
        .map(|c| {
            let a = axes(c);
            // A state that replicates an axis and has another one: without
            // the replicated axes, the value still has a parallel state, so
            // it can be computed in the tile (a matmul without parallel
            // state is stored by its kernel, and computing it in each tile
            // of the replicated axis is then the only way to fuse it into
            // its reader).
            let replicas = space.replicas == Replicas::View
                && a.iter().any(|(r, o)| *r > 0 && *o > 0)
                && (matmul[c] || has(c, "par.replicate"));
            // Likewise, whole along one of two axes that are not
            // replicated, the value keeps the other.
            let partitions = !replicas
                && space.partitions == Partitions::View
                && a.iter().any(|(_, o)| *o >= 2)
                && has(c, "par.partition");
            let only = if replicas {
                Some("par.replicate")
            } else if partitions {
                Some("par.partition")
            } else {
                None
            };
            options[c]
                .iter()
                .map(|o| only.is_none_or(|v| o.op.as_str() == v))
                .collect()
        })
        .collect();
    // The classes an acyclic program can still build (least fixpoint: a
    // class is buildable when a kept option reads only buildable classes),
    // and no option that reads another class: a class left with options
    // that only lead back to itself has no program either.
    let mut buildable = vec![false; n];
    sweep_to_fixpoint(n, &parents, |c| {
        let now = !buildable[c]
            && (0..kids[c].len())
                .any(|j| keep[c][j] && kids[c][j].iter().all(|k| buildable[*k as usize]));
        buildable[c] |= now;
        now
    });
    for c in 0..n {
        for (j, ks) in kids[c].iter().enumerate() {
            if ks.iter().any(|k| !buildable[*k as usize]) {
                keep[c][j] = false;
            }
        }
    }
    Some(keep)
}

/// Keep the elements of `v` whose place `keep` marks.
pub(super) fn retain_marked<T>(v: &mut Vec<T>, keep: &[bool]) {
    let mut marks = keep.iter();
    v.retain(|_| marks.next().copied().unwrap_or(false));
}
