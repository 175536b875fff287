//! The syntax tree of a `.efir` file, as written: names are strings and
//! nothing is resolved or checked yet (that is `efir-ir`'s job).

use efir_diagnostics::Span;

/// A name with where it was written.
#[derive(Clone, Debug, PartialEq)]
pub struct Name {
    /// The text, without its sigil (`%`, `@`, `#`).
    pub text: String,
    /// Where it was written.
    pub span: Span,
}

/// A whole file: functions in order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Module {
    /// The functions.
    pub funcs: Vec<Func>,
}

/// `func @name(%a: T, ...) -> (T, ...) { stmts }`
#[derive(Clone, Debug, PartialEq)]
pub struct Func {
    /// The function's symbol.
    pub name: Name,
    /// Parameters with their types.
    pub args: Vec<(Name, Type)>,
    /// Result types.
    pub results: Vec<Type>,
    /// Function attributes, `attributes {key = value}`.
    pub attrs: Vec<(Name, Attr)>,
    /// Body statements; the last should be a `return`.
    pub body: Vec<Stmt>,
    /// The whole function.
    pub span: Span,
    /// The span of `}` that closes the body.
    pub close_span: Span,
}

/// One statement of a function body.
#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    /// `%x = op ...`
    Op(Box<OpStmt>),
    /// `return %a, %b : T, U`
    Return(ReturnStmt),
    /// A statement that did not parse; its error is already reported.
    Error,
}

/// `%x = op ...`, in custom or generic form.
#[derive(Clone, Debug, PartialEq)]
pub struct OpStmt {
    /// The defined value.
    pub result: Name,
    /// The op's name, `dialect.op`.
    pub name: Name,
    /// Whether it was written in the generic (quoted) form.
    pub generic: bool,
    /// Positional attributes `<...>` of the custom form.
    pub positional: Vec<Attr>,
    /// Operand values.
    pub operands: Vec<Name>,
    /// Named attributes `{key = value}`.
    pub attrs: Vec<(Name, Attr)>,
    /// Operand types written in the generic form.
    pub operand_types: Option<Vec<Type>>,
    /// The result type.
    pub result_type: Type,
    /// The whole op (from the op name to the result type).
    pub span: Span,
}

/// `return %a, %b : T, U`
#[derive(Clone, Debug, PartialEq)]
pub struct ReturnStmt {
    /// Returned values.
    pub values: Vec<Name>,
    /// Their written types.
    pub types: Vec<Type>,
    /// The whole statement.
    pub span: Span,
}

/// An attribute value.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    /// `42`, `-1`
    Int(i64, Span),
    /// `1.5`, `-inf`
    Float(f64, Span),
    /// `"text"`
    Str(String, Span),
    /// `true` / `false`
    Bool(bool, Span),
    /// `@name`
    Symbol(Name),
    /// A bare word such as `lt`.
    Word(Name),
    /// `[a, b, ...]`
    Array(Vec<Attr>, Span),
    /// `#dialect.name<arg, key = arg, ...>`
    Term(Name, Vec<(Option<Name>, Attr)>, Span),
    /// A type.
    Type(Type),
}

impl Attr {
    /// Where the attribute was written.
    pub fn span(&self) -> Span {
        match self {
            Attr::Int(_, s)
            | Attr::Float(_, s)
            | Attr::Str(_, s)
            | Attr::Bool(_, s)
            | Attr::Array(_, s)
            | Attr::Term(_, _, s) => *s,
            Attr::Symbol(n) | Attr::Word(n) => n.span,
            Attr::Type(t) => t.span(),
        }
    }
}

/// A dimension of a shape.
#[derive(Clone, Debug, PartialEq)]
pub enum Dim {
    /// A static extent.
    Static(u64),
    /// The extent `|@p|` of a parallel axis.
    Axis(String),
}

/// The state of one parallel axis, as written.
#[derive(Clone, Debug, PartialEq)]
pub enum State {
    /// `part(i)`
    Part(i64),
    /// `repl`
    Repl,
    /// `partial(#reducer)`
    Partial(Attr),
}

/// A type, as written.
#[derive(Clone, Debug, PartialEq)]
pub enum Type {
    /// `tensor<8x4xf16, @m: part(0)>`
    Tensor {
        /// Dims in order.
        dims: Vec<Dim>,
        /// The element type's name.
        dtype: Name,
        /// Parallel states per axis.
        states: Vec<(Name, State)>,
        /// Where.
        span: Span,
    },
    /// `tuple<T, U>`
    Tuple(Vec<Type>, Span),
}

impl Type {
    /// Where the type was written.
    pub fn span(&self) -> Span {
        match self {
            Type::Tensor { span, .. } | Type::Tuple(_, span) => *span,
        }
    }
}
