//! The `.efir` surface syntax: a `logos` lexer ([`lexer`]), a `lalrpop`
//! grammar (`grammar.lalrpop`) and the syntax tree ([`ast`]).
//!
//! [`parse`] never panics: every lexing or parsing error becomes a
//! [`Diag`] and the parser recovers at statement and function boundaries,
//! so all errors in a file are reported.

pub mod ast;
pub mod lexer;
pub mod literal;

#[allow(missing_docs, clippy::all, clippy::pedantic, unused_qualifications)]
mod grammar {
    lalrpop_util::lalrpop_mod!(pub grammar);
    pub use self::grammar::*;
}

use efir_diagnostics::{codes, Diag, Span};
use lalrpop_util::ParseError;
use lexer::{LexError, Tok};

/// Parse a whole file. Returns the (possibly partial) module and the
/// syntax errors; the module is only meaningful when there are none.
pub fn parse(src: &str) -> (ast::Module, Vec<Diag>) {
    if let Some(d) = too_deep(src) {
        return (ast::Module::default(), vec![d]);
    }
    let mut recovered = Vec::new();
    let result = grammar::ModuleParser::new().parse(&mut recovered, lexer::lex(src));
    let mut diags: Vec<Diag> = recovered
        .into_iter()
        .map(|e| convert(e.error, src))
        .collect();
    let module = match result {
        Ok(m) => m,
        Err(e) => {
            diags.push(convert(e, src));
            ast::Module::default()
        }
    };
    // Recovery resumes mid-line and can report follow-on errors on the line
    // of the first one; keep only the first error of each line.
    let mut last_line = 0;
    diags.retain(|d| {
        let line = efir_diagnostics::line_of(src, d.span.start as usize);
        let keep = line != last_line;
        last_line = line;
        keep
    });
    (module, diags)
}

/// Brackets may nest this deep; deeper input is rejected before parsing so
/// that no recursive walk over the tree can exhaust the stack.
pub const MAX_NESTING: usize = 256;

fn too_deep(src: &str) -> Option<Diag> {
    let mut depth = 0usize;
    for (l, t, r) in lexer::lex(src).flatten() {
        match t {
            Tok::LParen | Tok::LBrace | Tok::LBracket | Tok::Lt => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Some(
                        Diag::error(
                            codes::E0101,
                            format!("brackets nest deeper than {MAX_NESTING} levels"),
                            Span::new(l, r),
                        )
                        .with_label("nesting limit reached here"),
                    );
                }
            }
            Tok::RParen | Tok::RBrace | Tok::RBracket | Tok::Gt => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

fn convert(e: ParseError<usize, Tok<'_>, LexError>, src: &str) -> Diag {
    match e {
        ParseError::InvalidToken { location } => Diag::error(
            codes::E0100,
            "invalid token",
            Span::new(location, location + 1),
        ),
        ParseError::UnrecognizedEof { location, expected } => Diag::error(
            codes::E0102,
            "unexpected end of file",
            Span::new(location.min(src.len()), src.len()),
        )
        .with_label(expected_label(&expected)),
        ParseError::UnrecognizedToken {
            token: (l, t, r),
            expected,
        } => Diag::error(codes::E0101, format!("unexpected {t}"), Span::new(l, r))
            .with_label(expected_label(&expected)),
        ParseError::ExtraToken { token: (l, t, r) } => {
            Diag::error(codes::E0101, format!("unexpected {t}"), Span::new(l, r))
        }
        ParseError::User { error } => {
            Diag::error(error.code, error.message, Span::new(error.start, error.end))
        }
    }
}

fn expected_label(expected: &[String]) -> String {
    let mut names: Vec<String> = Vec::new();
    for n in expected.iter().map(|e| pretty_terminal(e)) {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    match names.len() {
        0 => String::new(),
        1..=6 => format!("expected {}", names.join(", ")),
        _ => format!("expected one of {}, ...", names[..6].join(", ")),
    }
}

fn pretty_terminal(t: &str) -> String {
    match t {
        "VALUE" => "a value `%name`".into(),
        "SYMBOL" => "a symbol `@name`".into(),
        "ATTRNAME" => "an attribute `#name`".into(),
        "IDENT" => "an identifier".into(),
        "STR" => "a string".into(),
        "INT" => "an integer".into(),
        "FLOAT" => "a float".into(),
        "DIM" | "SYMDIM" => "a dimension".into(),
        other => format!("`{}`", other.trim_matches('"')),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_custom_and_generic() {
        let src = r#"
func @f(%a: tensor<8x4xf32>, %b: tensor<8x4xf32, @m: part(0)>) -> tensor<8x4xf32> {
  %0 = ew.add %a, %a : tensor<8x4xf32>
  %1 = "ew.mul"(%0, %a) {k = 1, f = 2.5, s = "x", w = lt, r = #red.prod<#red.max, #red.sum>} : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %2 = par.partition<0, @m> %1 : tensor<8x4xf32, @m: part(0)>
  return %1 : tensor<8x4xf32>
}
"#;
        let (m, diags) = parse(src);
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(m.funcs.len(), 1);
        assert_eq!(m.funcs[0].body.len(), 4);
    }

    #[test]
    fn reports_every_bad_statement() {
        let src = "func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = ew.add %a = : tensor<4xf32>\n  %1 = ew.add %a %a : tensor<4xf32>\n  return %a : tensor<4xf32>\n}\n";
        let (_, diags) = parse(src);
        assert_eq!(diags.len(), 2, "{diags:?}");
        assert!(diags.iter().all(|d| d.code == codes::E0101));
    }

    #[test]
    fn eof_and_literals() {
        let (_, d) = parse("func @f(");
        assert_eq!(d[0].code, codes::E0102);
        let (_, d) =
            parse("func @f() { %0 = tensor.full<99999999999999999999> : tensor<f32> return }");
        assert!(d.iter().any(|d| d.code == codes::E0103), "{d:?}");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let src = format!(
            "func @f() {{ %0 = tensor.full<{}1{}> : tensor<f32> return }}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let (_, d) = parse(&src);
        assert_eq!(d.len(), 1);
        assert!(d[0].message.contains("nest deeper"));
    }

    #[test]
    fn float_printing_round_trips() {
        for v in [
            1.0,
            -2.5,
            1e-6,
            1e300,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.1,
        ] {
            let s = literal::format_float(v);
            let back = literal::float(&s, 0, 0).unwrap_or(f64::NAN);
            assert_eq!(back.to_bits(), v.to_bits(), "{s}");
        }
    }
}
