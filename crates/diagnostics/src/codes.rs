//! The stable error codes of efir, one line each. Each code is explained at
//! length in `docs/errors.md` and pinned by at least one `invalid.efir`
//! lit case (a test checks both).

/// `(code, one-line summary)` for every error efir reports.
pub const ALL: &[(&str, &str)] = &[
    // E01xx: lexing and parsing.
    (E0100, "invalid character or token"),
    (E0101, "unexpected token"),
    (E0102, "unexpected end of file"),
    (E0103, "invalid literal"),
    (E0104, "unknown element type"),
    (E0105, "malformed type"),
    (E0106, "diagnostic expectation malformed or not met"),
    // E02xx: structure of modules and ops, common to every dialect.
    (E0200, "value defined twice"),
    (E0201, "use of an undefined value"),
    (E0202, "unknown operation"),
    (E0203, "wrong number of operands"),
    (E0204, "missing, unknown or ill-kinded attribute"),
    (E0205, "declared result type differs from the inferred type"),
    (E0206, "returned values do not match the function signature"),
    (E0207, "function defined twice"),
    (
        E0208,
        "generic form operand types differ from the operands' types",
    ),
    (E0209, "reference to an unknown function"),
    (E0210, "expected a tensor value, found a tuple"),
    (E0211, "functions refer to each other in a cycle"),
    // E03xx: the `ew` dialect.
    (E0301, "operand shapes cannot be broadcast together"),
    (E0302, "operand element types differ"),
    (E0303, "element type not supported by the operation"),
    (E0304, "operand parallel states are incompatible"),
    (E0305, "operation not allowed on partial values"),
    // E04xx: the `tensor` dialect.
    (E0401, "matmul operands have incompatible matrix dims"),
    (E0402, "matmul batch dims cannot be broadcast"),
    (E0403, "dimension out of range"),
    (E0404, "reshape changes the number of elements"),
    (E0405, "invalid permutation"),
    (E0406, "shape cannot be broadcast to the target shape"),
    (E0407, "tuple access out of range or not a tuple"),
    (E0408, "reduction input does not fit the reducer"),
    (E0409, "invalid constant"),
    (E0410, "view not legal for the operand's parallel state"),
    (E0411, "invalid slice bounds"),
    (E0412, "concatenated operands do not fit together"),
    // E05xx: the `red` dialect (reducers).
    (E0501, "unknown reducer"),
    (E0502, "malformed reducer"),
    (E0503, "reducer function has the wrong signature"),
    // E06xx: the `par` and `tile` dialects (parallel states).
    (E0601, "parallel axis already present"),
    (E0602, "parallel state does not match the operation"),
    (E0603, "dimension already partitioned by another axis"),
    (E0604, "collect needs a partial or replicated axis"),
    (E0605, "matmul operand states cannot be combined"),
    // E07xx: the `egraph` dialect.
    (E0701, "e-class with e-nodes of different types"),
    (E0702, "reference to an e-class without e-nodes"),
    (E0703, "e-node whose type differs from its e-class's"),
    (E0704, "op other than egraph ops in an e-graph function"),
    (
        E0705,
        "a rewrite rule would merge e-classes of different types (a bug)",
    ),
    (E0706, "candidate enumeration stopped by a limit (warning)"),
    (E0707, "target program not in the e-graph"),
    (
        E0708,
        "the candidate space leaves a result without a program; the whole space is enumerated instead (warning)",
    ),
    (E0801, "a program cannot be lowered to Triton kernels"),
    (
        E0802,
        "a kernel launch does not match the kernel's signature",
    ),
];

macro_rules! codes {
    ($($name:ident),* $(,)?) => {
        $(
            #[doc = concat!("Error code `", stringify!($name), "`; see [`ALL`].")]
            pub const $name: &str = stringify!($name);
        )*
    };
}

codes!(
    E0100, E0101, E0102, E0103, E0104, E0105, E0106, E0200, E0201, E0202, E0203, E0204, E0205,
    E0206, E0207, E0208, E0209, E0210, E0211, E0301, E0302, E0303, E0304, E0305, E0401, E0402,
    E0403, E0404, E0405, E0406, E0407, E0408, E0409, E0410, E0411, E0412, E0501, E0502, E0503,
    E0601, E0602, E0603, E0604, E0605, E0701, E0702, E0703, E0704, E0705, E0706, E0707, E0708,
    E0801, E0802,
);

/// Codes that only a bug in efir can produce (no input triggers them, so
/// no lit case pins them).
pub const INTERNAL: &[&str] = &[E0705];

/// The summary of a code, if it exists.
pub fn summary(code: &str) -> Option<&'static str> {
    ALL.iter().find(|(c, _)| *c == code).map(|(_, s)| *s)
}
