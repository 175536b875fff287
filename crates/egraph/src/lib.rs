//! efir's e-graph: one `egg` language over every dialect
//! (`SymbolLang`: op names with operand and attribute children), the type
//! analysis ([`analysis`]), conversion between functions, e-graphs and the
//! `egraph` dialect ([`convert`]), the rule families ([`rules`]), and the
//! passes `--saturate` ([`saturate`]) and `--extract` ([`extract`]).

pub mod analysis;
pub mod compact;
pub mod convert;
pub mod deadline;
pub mod dialects;
pub mod extract;
pub mod repairs;
pub mod rules;
pub mod saturate;
