//! The rule families (the paper's Table 1), one module each. Every rule has
//! a kebab-case name `family.what-it-does`, its equation as a comment and
//! in `docs/rules.md`, and is applied through [`typed_union`]: the
//! right-hand side is type-checked e-node by e-node before anything is
//! added, and it is only unioned with the matched e-class when the types
//! agree. A rule that would merge different types is a bug: it is recorded
//! with the rule's name and fails the pass.

pub mod algebraic;
pub mod fusion;
pub mod propagation;
pub mod refinement;
pub mod storage;
pub mod structural;
pub mod view;

use crate::analysis::{infer, Data, EGraph, TypeAnalysis};
use efir_ir::{Attr, AxisState, TensorType, Type};
use egg::{Applier, Id, Pattern, PatternAst, Rewrite, Subst, Symbol, SymbolLang, Var};

/// A right-hand side to build: existing e-classes, attribute leaves and
/// new e-nodes.
#[derive(Clone, Debug)]
pub enum Rhs {
    /// An existing e-class.
    Class(Id),
    /// An attribute leaf.
    Attr(Attr),
    /// A new e-node.
    Node(String, Vec<Rhs>),
}

/// `op(children)`.
pub fn node(op: &str, children: Vec<Rhs>) -> Rhs {
    Rhs::Node(op.to_string(), children)
}

/// An integer attribute.
pub fn int(i: usize) -> Rhs {
    Rhs::Attr(Attr::Int(i as i64))
}

/// An axis attribute.
pub fn axis(a: &str) -> Rhs {
    Rhs::Attr(Attr::Symbol(a.to_string()))
}

/// `par.partition<dim, @axis>(x)`.
pub fn partition(x: Rhs, dim: usize, a: &str) -> Rhs {
    node("par.partition", vec![x, int(dim), axis(a)])
}

/// `par.replicate<@axis>(x)`.
pub fn replicate(x: Rhs, a: &str) -> Rhs {
    node("par.replicate", vec![x, axis(a)])
}

/// `par.combine<dim, @axis>(x)`.
pub fn combine(x: Rhs, dim: usize, a: &str) -> Rhs {
    node("par.combine", vec![x, int(dim), axis(a)])
}

/// Build `rhs` (checking each new e-node's type first); the e-class of the
/// result, or why it is ill-typed.
pub fn build(eg: &mut EGraph, rhs: &Rhs) -> Result<Id, String> {
    match rhs {
        Rhs::Class(id) => Ok(*id),
        Rhs::Attr(a) => {
            let leaf = eg.analysis.attr_leaf(a.clone());
            Ok(eg.add(leaf))
        }
        Rhs::Node(op, kids) => {
            let ids: Vec<Id> = kids
                .iter()
                .map(|k| build(eg, k))
                .collect::<Result<_, _>>()?;
            let data: Vec<&Data> = ids.iter().map(|i| &eg[*i].data).collect();
            match infer(&eg.analysis, op, &data) {
                Data::Invalid(why) => Err(why),
                _ => Ok(eg.add(SymbolLang::new(op.as_str(), ids))),
            }
        }
    }
}

/// Build `rhs` and union it with `class` if its type equals the class's;
/// otherwise record a bug naming `rule`.
pub fn typed_union(eg: &mut EGraph, class: Id, rhs: &Rhs, rule: &str) -> Vec<Id> {
    match build(eg, rhs) {
        Err(why) => {
            eg.analysis
                .errors
                .push(format!("rule `{rule}` built an ill-typed e-node: {why}"));
            Vec::new()
        }
        Ok(id) => {
            if eg[id].data != eg[class].data {
                let msg = format!(
                    "rule `{rule}` would merge e-classes of different types: {:?} and {:?}",
                    eg[class].data, eg[id].data
                );
                eg.analysis.errors.push(msg);
                return Vec::new();
            }
            if eg.union(class, id) {
                vec![class]
            } else {
                Vec::new()
            }
        }
    }
}

/// What a rule's right-hand side can see: the e-graph, the matched e-class
/// and the pattern's bindings.
pub struct Match<'a> {
    /// The e-graph.
    pub eg: &'a EGraph,
    /// The matched e-class.
    pub class: Id,
    /// The bindings.
    pub subst: &'a Subst,
}

impl Match<'_> {
    /// The e-class bound to `?name`.
    pub fn id(&self, name: &str) -> Id {
        let v: Var = name.parse().expect("pattern variable");
        self.subst[v]
    }

    /// The tensor type of `?name` (None for tuples and attributes).
    pub fn tensor(&self, name: &str) -> Option<&TensorType> {
        self.eg[self.id(name)].data.ty().and_then(Type::as_tensor)
    }

    /// The type of the matched class.
    pub fn ty(&self) -> Option<&TensorType> {
        self.eg[self.class].data.ty().and_then(Type::as_tensor)
    }

    /// The attribute bound to `?name`.
    pub fn attr(&self, name: &str) -> Option<&Attr> {
        match &self.eg[self.id(name)].data {
            Data::Attr(i) => self.eg.analysis.attrs.get_index(*i),
            _ => None,
        }
    }

    /// An integer attribute.
    pub fn int(&self, name: &str) -> Option<usize> {
        self.attr(name)?
            .as_int()
            .and_then(|i| usize::try_from(i).ok())
    }

    /// An axis attribute.
    pub fn axis(&self, name: &str) -> Option<String> {
        self.attr(name)?.as_symbol().map(str::to_string)
    }

    /// `?name` as an existing class.
    pub fn class(&self, name: &str) -> Rhs {
        Rhs::Class(self.id(name))
    }
}

/// A right-hand side function: the alternatives to union with the match.
pub type RhsFn = fn(&Match<'_>) -> Vec<Rhs>;

/// A right-hand side function over one op, for rules generic over a list of
/// ops (say the unary pointwise ops): it builds the op it is given.
pub type OpRhsFn = fn(&Match<'_>, &'static str) -> Vec<Rhs>;

/// A right-hand side function that names the e-class each right-hand side
/// joins (for rules whose left-hand side has several roots: fusions).
pub type TargetFn = fn(&Match<'_>) -> Vec<(Id, Rhs)>;

/// A right-hand side function over one op that names the e-class each
/// right-hand side joins.
pub type OpTargetFn = fn(&Match<'_>, &'static str) -> Vec<(Id, Rhs)>;

/// How a rule's right-hand sides are applied.
#[derive(Clone, Copy)]
pub enum Apply {
    /// Each right-hand side joins the matched e-class.
    Same(RhsFn),
    /// The same, from a function over one op, with its op.
    SameOp(OpRhsFn, &'static str),
    /// Each right-hand side joins the e-class it names.
    Targets(TargetFn),
    /// The same, from a function over one op, with its op.
    TargetsOp(OpTargetFn, &'static str),
}

struct TypedApplier {
    rhs: Apply,
}

impl Applier<SymbolLang, TypeAnalysis> for TypedApplier {
    fn apply_one(
        &self,
        eg: &mut EGraph,
        class: Id,
        subst: &Subst,
        _ast: Option<&PatternAst<SymbolLang>>,
        rule: Symbol,
    ) -> Vec<Id> {
        let alts: Vec<(Id, Rhs)> = match self.rhs {
            Apply::Same(f) => f(&Match { eg, class, subst })
                .into_iter()
                .map(|r| (class, r))
                .collect(),
            Apply::SameOp(f, op) => f(&Match { eg, class, subst }, op)
                .into_iter()
                .map(|r| (class, r))
                .collect(),
            Apply::Targets(f) => f(&Match { eg, class, subst }),
            Apply::TargetsOp(f, op) => f(&Match { eg, class, subst }, op),
        };
        let mut out = Vec::new();
        for (target, rhs) in alts {
            out.extend(typed_union(eg, target, &rhs, rule.as_str()));
        }
        out
    }
}

/// A rule: its name, family, equation and rewrite.
pub struct RuleDef {
    /// `family.what-it-does`.
    pub name: String,
    /// The family (module) it belongs to.
    pub family: &'static str,
    /// Its equation, for docs.
    pub equation: String,
    /// The left-hand side pattern.
    pub lhs: String,
    /// The right-hand sides.
    pub rhs: Apply,
}

/// A rule from its parts.
pub fn rule(
    family: &'static str,
    name: impl Into<String>,
    equation: impl Into<String>,
    lhs: impl Into<String>,
    rhs: RhsFn,
) -> RuleDef {
    RuleDef {
        name: name.into(),
        family,
        equation: equation.into(),
        lhs: lhs.into(),
        rhs: Apply::Same(rhs),
    }
}

/// A rule of a family generic over ops: its right-hand sides are `rhs`'s
/// for the op `op` (one function for every op of the list, no arm per op).
pub fn op_rule(
    family: &'static str,
    name: impl Into<String>,
    equation: impl Into<String>,
    lhs: impl Into<String>,
    rhs: OpRhsFn,
    op: &'static str,
) -> RuleDef {
    RuleDef {
        name: name.into(),
        family,
        equation: equation.into(),
        lhs: lhs.into(),
        rhs: Apply::SameOp(rhs, op),
    }
}

/// A rule whose left-hand side is a multi-pattern (`?a = (...), ?b = (...)`)
/// and whose right-hand sides name the e-classes they join.
pub fn multi_rule(
    family: &'static str,
    name: impl Into<String>,
    equation: impl Into<String>,
    lhs: impl Into<String>,
    rhs: TargetFn,
) -> RuleDef {
    RuleDef {
        name: name.into(),
        family,
        equation: equation.into(),
        lhs: lhs.into(),
        rhs: Apply::Targets(rhs),
    }
}

/// A multi-pattern rule of a family generic over ops.
pub fn op_multi_rule(
    family: &'static str,
    name: impl Into<String>,
    equation: impl Into<String>,
    lhs: impl Into<String>,
    rhs: OpTargetFn,
    op: &'static str,
) -> RuleDef {
    RuleDef {
        name: name.into(),
        family,
        equation: equation.into(),
        lhs: lhs.into(),
        rhs: Apply::TargetsOp(rhs, op),
    }
}

impl RuleDef {
    /// The egg rewrite.
    pub fn rewrite(&self) -> Rewrite<SymbolLang, TypeAnalysis> {
        let applier = TypedApplier { rhs: self.rhs };
        let rw = if self.lhs.contains(" = ") {
            let pat: egg::MultiPattern<SymbolLang> = self
                .lhs
                .parse()
                .unwrap_or_else(|e| panic!("rule `{}`: bad multi-pattern: {e:?}", self.name));
            Rewrite::new(self.name.clone(), pat, applier)
        } else {
            let pat: Pattern<SymbolLang> = self
                .lhs
                .parse()
                .unwrap_or_else(|e| panic!("rule `{}`: bad pattern: {e}", self.name));
            Rewrite::new(self.name.clone(), pat, applier)
        };
        rw.unwrap_or_else(|e| panic!("rule `{}`: {e}", self.name))
    }
}

/// The view of `x` (of type `t`) for coordinates of axis `p` slicing dim
/// `d` of a rank-`rank` result of extent `shape[d]`: a partition of the
/// aligned dim, or a replicate where `x` is broadcast along it; `None` when
/// `x` already lives under `p`.
pub fn aligned_view(
    x: Rhs,
    t: &TensorType,
    rank: usize,
    d: usize,
    p: &str,
    shape: &[efir_ir::Dim],
) -> Option<Rhs> {
    if has_axis(t, p) {
        return None;
    }
    if efir_ir::shape::is_broadcast_along(&t.shape, rank, d, shape) {
        Some(replicate(x, p))
    } else {
        Some(partition(x, d + t.rank() - rank, p))
    }
}

/// A type with one more axis state.
pub fn with_state(t: &TensorType, p: &str, s: AxisState) -> Attr {
    let mut t = t.clone();
    t.state.insert(p.to_string(), s);
    Attr::Type(Box::new(Type::Tensor(t)))
}

/// The families, in order.
pub const FAMILIES: &[&str] = &[
    "algebraic",
    "refinement",
    "propagation",
    "fusion",
    "structural",
    "storage",
    "view",
    "split",
];

/// The families `--saturate` applies unless told otherwise: all but
/// `split` (flash-decoding's stored partial states of online softmax), which
/// is opt-in until it is measured on the GPU: its e-classes change which
/// candidates a limited compaction finds (attention decode at batch 1 lost
/// the one measured fastest from its first 64).
pub const DEFAULT_FAMILIES: &[&str] = &[
    "algebraic",
    "refinement",
    "propagation",
    "fusion",
    "structural",
    "storage",
    "view",
];

/// Every rule of the named families.
pub fn rules(families: &[&str]) -> Vec<RuleDef> {
    let mut out = Vec::new();
    for f in families {
        out.extend(match *f {
            "algebraic" => algebraic::rules(),
            "refinement" => refinement::rules(),
            "propagation" => propagation::rules(),
            "fusion" => fusion::rules(),
            "structural" => structural::rules(),
            "storage" => storage::rules(),
            "view" => view::rules(),
            "split" => storage::split_rules(),
            _ => Vec::new(),
        });
    }
    out
}

/// The canonical name of an axis that splits a dim: a role letter (`m`
/// rows and `n` columns of a matrix, `k` a reduced dim, `b` a batch dim)
/// and the dim's extent, so that the same decomposition reached by two
/// paths is the same term and aligned dims share an axis.
pub fn axis_name(role: char, extent: &efir_ir::Dim) -> String {
    match extent {
        efir_ir::Dim::Static(n) => format!("{role}{n}"),
        efir_ir::Dim::Axis(a) => format!("{role}_{a}"),
    }
}

/// The role of dim `i` of a rank-`r` value: `n` last, `m` second to last,
/// `b` otherwise.
pub fn role(i: usize, r: usize) -> char {
    if i + 1 == r {
        'n'
    } else if i + 2 == r {
        'm'
    } else {
        'b'
    }
}

/// Whether `t` lives under axis `a`.
pub fn has_axis(t: &TensorType, a: &str) -> bool {
    t.state.contains_key(a)
}

/// Whether `t` has any partial axis (such values are never refined).
pub fn has_partial(t: &TensorType) -> bool {
    t.state.values().any(|s| matches!(s, AxisState::Partial(_)))
}
