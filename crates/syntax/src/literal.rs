//! Checked conversion of literal tokens (integers, floats, dims, strings).

use crate::lexer::LexError;
use efir_diagnostics::codes::E0103;
use lalrpop_util::ParseError;

type R<'a, T> = Result<T, ParseError<usize, crate::lexer::Tok<'a>, LexError>>;

fn err<'a, T>(l: usize, r: usize, message: String) -> R<'a, T> {
    Err(ParseError::User {
        error: LexError {
            start: l,
            end: r,
            code: E0103,
            message,
        },
    })
}

/// An `i64` literal.
pub fn int<'a>(s: &str, l: usize, r: usize) -> R<'a, i64> {
    s.parse::<i64>()
        .or_else(|_| err(l, r, format!("integer `{s}` does not fit in 64 bits")))
}

/// A float literal, with `inf`, `-inf` and `nan`.
pub fn float<'a>(s: &str, l: usize, r: usize) -> R<'a, f64> {
    match s {
        "inf" => Ok(f64::INFINITY),
        "-inf" => Ok(f64::NEG_INFINITY),
        "nan" => Ok(f64::NAN),
        _ => s
            .parse::<f64>()
            .or_else(|_| err(l, r, format!("invalid float `{s}`"))),
    }
}

/// A static dim (at most 2^40 so that element counts cannot overflow).
pub fn dim<'a>(s: &str, l: usize, r: usize) -> R<'a, u64> {
    match s.parse::<u64>() {
        Ok(v) if v <= 1 << 40 => Ok(v),
        _ => err(l, r, format!("dimension `{s}` is too large")),
    }
}

/// A string literal body with `\"`, `\\`, `\n`, `\t` escapes.
pub fn string<'a>(s: &str, l: usize, r: usize) -> R<'a, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            other => {
                return err(
                    l,
                    r,
                    format!("invalid escape `\\{}` in string", other.unwrap_or(' ')),
                )
            }
        }
    }
    Ok(out)
}

/// Quote a string for printing (the inverse of [`string`]).
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Print a float so that it lexes as a float and parses back to the same
/// bits (`1.0`, `1e-6`, `-inf`).
pub fn format_float(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let s = format!("{v:?}");
    if s.contains('.') || s.contains('e') {
        s
    } else {
        format!("{s}.0")
    }
}
